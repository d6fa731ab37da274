//! The one place where Rust meets Python: `reclaimlab._core`.
//!
//! Errors cross the boundary here only: configuration errors become ValueError with the
//! core's message (which names the key); anything else is a bug and panics as such.

use std::collections::BTreeMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use reclaimlab_core::costs::Costs;
use reclaimlab_core::policy::{Switches, PRESETS};

/// A simulation built from a lowered scenario (JSON), stepped from Python so that the caller
/// can show progress.
#[pyclass(module = "reclaimlab._core", unsendable)]
struct Simulation {
    inner: reclaimlab_core::Simulation,
}

#[pymethods]
impl Simulation {
    #[new]
    fn new(config_json: &str) -> PyResult<Self> {
        reclaimlab_core::simulation_from_json(config_json).map(|inner| Simulation { inner }).map_err(PyValueError::new_err)
    }

    /// Run up to `max_events` events (without holding the GIL); True once finished.
    fn step(&mut self, py: Python<'_>, max_events: u64) -> bool {
        let inner = &mut self.inner;
        py.detach(|| inner.step(max_events))
    }

    fn progress(&self) -> f64 {
        self.inner.progress()
    }

    fn finished(&self) -> bool {
        self.inner.finished()
    }

    /// {"counters": {...}, "phases": [...], "stats": {...}} as JSON.
    fn result_json(&self) -> String {
        let r = self.inner.result();
        let counters: BTreeMap<&str, u64> = r.counters.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        serde_json::json!({ "counters": counters, "phases": r.phases, "stats": r.stats }).to_string()
    }
}

/// Time-model parameters and their defaults.
#[pyfunction]
fn default_costs<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in Costs::defaults() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// The policy switches a kernel-version preset sets, as JSON-compatible values.
#[pyfunction]
fn preset_switches<'py>(py: Python<'py>, version: &str) -> PyResult<Bound<'py, PyDict>> {
    let s = Switches::preset(version).map_err(PyValueError::new_err)?;
    let d = PyDict::new(py);
    for (k, v) in s.to_map() {
        match v {
            serde_json::Value::Bool(b) => d.set_item(k, b)?,
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => d.set_item(k, i)?,
                None => d.set_item(k, n.as_f64())?,
            },
            serde_json::Value::String(s) => d.set_item(k, s)?,
            other => d.set_item(k, other.to_string())?,
        }
    }
    Ok(d)
}

/// Kernel versions with a preset.
#[pyfunction]
fn presets() -> Vec<&'static str> {
    PRESETS.to_vec()
}

/// Compressors the simulator knows, by kernel crypto name.
#[pyfunction]
fn codecs() -> Vec<String> {
    reclaimlab_core::compress::Codec::ALL.iter().map(|c| c.to_string()).collect()
}

/// The exact bytes of one page of a content class (what the runner writes, what the codecs
/// compress): `content` as in scenarios, `region_id` = (process << 16) | region.
#[pyfunction]
fn page_bytes(py: Python<'_>, content: &str, seed: u64, region_id: u32, variant: u32) -> PyResult<Py<PyAny>> {
    use reclaimlab_workload::content::{fill_page, Content};
    let c: Content = content.parse().map_err(PyValueError::new_err)?;
    let mut page = [0u8; reclaimlab_workload::PAGE_SIZE];
    fill_page(c, seed, region_id, variant, &mut page);
    Ok(pyo3::types::PyBytes::new(py, &page).into_any().unbind())
}

/// The simulator's compressed length of a 4 KiB page for a kernel compressor name.
#[pyfunction]
fn compressed_len(codec: &str, page: &[u8]) -> PyResult<u32> {
    let c: reclaimlab_core::compress::Codec = codec.parse().map_err(PyValueError::new_err)?;
    let page: &[u8; 4096] = page.try_into().map_err(|_| PyValueError::new_err("a page is exactly 4096 bytes"))?;
    Ok(reclaimlab_core::compress::compressed_len(c, page))
}

/// How many distinct page contents a region of this class has with `variants` requested.
#[pyfunction]
fn distinct_variants(content: &str, variants: u32) -> PyResult<u32> {
    let c: reclaimlab_workload::Content = content.parse().map_err(PyValueError::new_err)?;
    Ok(reclaimlab_workload::content::distinct_variants(c, variants))
}

#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Simulation>()?;
    m.add_function(wrap_pyfunction!(default_costs, m)?)?;
    m.add_function(wrap_pyfunction!(preset_switches, m)?)?;
    m.add_function(wrap_pyfunction!(presets, m)?)?;
    m.add_function(wrap_pyfunction!(codecs, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(page_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(compressed_len, m)?)?;
    m.add_function(wrap_pyfunction!(distinct_variants, m)?)?;
    Ok(())
}
