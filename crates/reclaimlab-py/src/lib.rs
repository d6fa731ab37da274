//! The one place where Rust meets Python: `reclaimlab._core`.
//!
//! Errors cross the boundary in errors.rs only: configuration errors become
//! `reclaimlab._core.ConfigError` (a ValueError naming the key); anything else is a bug and
//! panics as such.

mod errors;

use std::collections::BTreeMap;

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
        reclaimlab_core::simulation_from_json(config_json)
            .map(|inner| Simulation { inner })
            .map_err(errors::config_error)
    }

    /// Run up to `max_events` events (without holding the GIL); True once finished.
    fn step(&mut self, py: Python<'_>, max_events: u64) -> bool {
        let inner = &mut self.inner;
        py.detach(|| inner.step(max_events))
    }

    /// Run up to `max_events` events, none later than `until_ns` of simulated time (without
    /// holding the GIL); True once finished. For sampling counters at simulated times.
    fn step_until(&mut self, py: Python<'_>, max_events: u64, until_ns: u64) -> bool {
        let inner = &mut self.inner;
        py.detach(|| inner.step_until(max_events, until_ns))
    }

    /// Simulated time (ns) of the next event; None once the queue is empty.
    fn next_event_ns(&self) -> Option<u64> {
        self.inner.next_event_time()
    }

    /// Simulated time (ns) of the last event run.
    fn now_ns(&self) -> u64 {
        self.inner.now()
    }

    /// Every counter now (gauges read now), as JSON: what `result_json` reports at the end.
    /// Reading changes nothing in the simulation.
    fn counters_json(&self) -> String {
        let counters: BTreeMap<String, u64> = self.inner.counters().into_iter().collect();
        serde_json::to_string(&counters).expect("counters serialise")
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
        let counters: BTreeMap<&str, u64> =
            r.counters.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        serde_json::json!({ "counters": counters, "phases": r.phases, "stats": r.stats, "latency": r.latency }).to_string()
    }

    /// Each zsmalloc pool's debugfs `classes` table as JSON: [{"pool", "classes": [rows]}],
    /// read with the counters (an optional output, not in result_json).
    fn zsmalloc_classes_json(&self) -> String {
        serde_json::to_string(&self.inner.zsmalloc_classes()).expect("classes serialise")
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
    let s = Switches::preset(version).map_err(errors::config_error)?;
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

/// enum compact_result's names as the compaction tracepoints print them (the core's one
/// declaration; the VM lab's trace parser reads the guest's numbers through it).
#[pyfunction]
fn compact_results() -> Vec<&'static str> {
    reclaimlab_core::stats::trace::COMPACT_RESULT_NAMES.to_vec()
}

/// Compressors the simulator knows, by kernel crypto name.
#[pyfunction]
fn codecs() -> Vec<String> {
    reclaimlab_core::compress::Codec::ALL
        .iter()
        .map(|c| c.to_string())
        .collect()
}

/// The exact bytes of one page of a content class (what the runner writes, what the codecs
/// compress): `content` as in scenarios, `region_id` = (process << 16) | region.
#[pyfunction]
fn page_bytes(
    py: Python<'_>,
    content: &str,
    seed: u64,
    region_id: u32,
    variant: u32,
) -> PyResult<Py<PyAny>> {
    use reclaimlab_workload::content::{fill_page, Content};
    let c: Content = content
        .parse()
        .map_err(|e| errors::bad_argument("content", e))?;
    let mut page = [0u8; reclaimlab_workload::PAGE_SIZE];
    fill_page(c, seed, region_id, variant, &mut page);
    Ok(pyo3::types::PyBytes::new(py, &page).into_any().unbind())
}

/// The simulator's compressed length of a 4 KiB page for a kernel compressor name.
#[pyfunction]
fn compressed_len(codec: &str, page: &[u8]) -> PyResult<u32> {
    let c: reclaimlab_core::compress::Codec = codec
        .parse()
        .map_err(|e| errors::bad_argument("codec", e))?;
    let page: &[u8; 4096] = page
        .try_into()
        .map_err(|_| errors::bad_argument("page", "a page is exactly 4096 bytes"))?;
    Ok(reclaimlab_core::compress::compressed_len(c, page))
}

/// Wall-clock time of one compression and one decompression of a 4 KiB page with the
/// simulator's codec implementations (`reclaimlab calibrate`): medians over `reps` samples, in
/// ns per page. Each sample times `batch` back-to-back calls on the same page (hot caches)
/// with `Instant` and divides, `batch` chosen so that a sample lasts at least ~2 µs (timer
/// overhead below 2 %). The round trip is checked once first (ValueError if it fails). The
/// clock lives here, in the bindings: the core never reads it.
#[pyfunction]
fn codec_timing(py: Python<'_>, codec: &str, page: &[u8], reps: u32) -> PyResult<(f64, f64)> {
    use reclaimlab_core::compress::{compress, decompress, Codec, COMPRESS_BUF_LEN};
    use std::hint::black_box;
    use std::time::Instant;

    let c: Codec = codec
        .parse()
        .map_err(|e| errors::bad_argument("codec", e))?;
    let page: [u8; 4096] = page
        .try_into()
        .map_err(|_| errors::bad_argument("page", "a page is exactly 4096 bytes"))?;
    if reps == 0 {
        return Err(errors::bad_argument("reps", "expected at least 1"));
    }
    let mut dst = vec![0u8; COMPRESS_BUF_LEN].into_boxed_slice();
    let dst: &mut [u8; COMPRESS_BUF_LEN] = (&mut *dst).try_into().expect("buffer length");
    let mut back = [0u8; 4096];
    let n = compress(c, &page, dst);
    decompress(c, &dst[..n], &mut back)
        .map_err(|e| errors::bad_argument("codec", format!("{c}: {e}")))?;
    if back != page {
        return Err(errors::bad_argument(
            "codec",
            format!("{c}: the round trip changed the page"),
        ));
    }
    let median = |mut v: Vec<f64>| -> f64 {
        v.sort_by(f64::total_cmp);
        let m = v.len() / 2;
        if v.len() % 2 == 1 {
            v[m]
        } else {
            (v[m - 1] + v[m]) / 2.0
        }
    };
    let run = |f: &mut dyn FnMut()| -> f64 {
        // Warm up and size the batch: at least ~2 µs per sample.
        let t = Instant::now();
        for _ in 0..4 {
            f();
        }
        let one = t.elapsed().as_nanos().max(4) as f64 / 4.0;
        let batch = ((2_000.0 / one).ceil() as u32).clamp(1, 1024);
        let samples = (0..reps)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..batch {
                    f();
                }
                t.elapsed().as_nanos() as f64 / f64::from(batch)
            })
            .collect();
        median(samples)
    };
    Ok(py.detach(|| {
        let comp = run(&mut || {
            black_box(compress(c, black_box(&page), dst));
        });
        let data = dst[..n].to_vec();
        let decomp = run(&mut || {
            black_box(decompress(c, black_box(&data), &mut back)).expect("checked above");
        });
        (comp, decomp)
    }))
}

/// How many distinct page contents a region of this class has with `variants` requested.
#[pyfunction]
fn distinct_variants(content: &str, variants: u32) -> PyResult<u32> {
    let c: reclaimlab_workload::Content = content
        .parse()
        .map_err(|e| errors::bad_argument("content", e))?;
    Ok(reclaimlab_workload::content::distinct_variants(c, variants))
}

/// Check a content class as scenarios write it ("text", "mix1024", "same:0x5a"): None, or
/// ConfigError (path "content") saying what is wrong. The parser is the workload crate's, so
/// Python need not mirror it.
#[pyfunction]
fn check_content(spec: &str) -> PyResult<()> {
    spec.parse::<reclaimlab_workload::Content>()
        .map(|_| ())
        .map_err(|e| errors::bad_argument("content", e))
}

/// A JSON value (a knob's default) as a Python object.
fn json_to_py<'py>(py: Python<'py>, v: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::IntoPyObjectExt;
    Ok(match v {
        serde_json::Value::Null => py.None().into_bound(py),
        serde_json::Value::Bool(b) => b.into_bound_py_any(py)?,
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(u) => u.into_bound_py_any(py)?,
            None => n.as_f64().into_bound_py_any(py)?,
        },
        serde_json::Value::String(s) => s.into_bound_py_any(py)?,
        other => other.to_string().into_bound_py_any(py)?,
    })
}

/// The kernel knobs the simulator reads, declared once in reclaimlab-core's knobs.rs: one dict
/// per knob with key, type, default (None where the kernel computes it), min, max, choices,
/// kernel_file, doc and lowered (its path in the lowered JSON).
#[pyfunction]
fn knobs<'py>(py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
    reclaimlab_core::knobs::table()
        .iter()
        .map(|row| {
            let k = &row.knob;
            let d = PyDict::new(py);
            d.set_item("key", k.key)?;
            d.set_item("type", k.kind.name())?;
            d.set_item("default", json_to_py(py, &row.default)?)?;
            d.set_item("min", k.min)?;
            d.set_item("max", k.max)?;
            d.set_item("choices", k.choices.map(|f| f()))?;
            d.set_item("kernel_file", k.kernel_file)?;
            d.set_item("doc", k.doc)?;
            d.set_item("lowered", k.lowered)?;
            Ok(d)
        })
        .collect()
}

/// zswap's pool allocators the simulator models, with the kernel versions (of those with a
/// preset) that have each.
#[pyfunction]
fn zpools<'py>(py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
    reclaimlab_core::zpool::ZPOOLS
        .iter()
        .map(|z| {
            let d = PyDict::new(py);
            d.set_item("name", z.name)?;
            d.set_item("presets", z.presets())?;
            Ok(d)
        })
        .collect()
}

/// The largest values the core accepts (reclaimlab_core::limits): key, max, unit, why.
#[pyfunction]
fn limits<'py>(py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
    reclaimlab_core::limits::LIMITS
        .iter()
        .map(|l| {
            let d = PyDict::new(py);
            d.set_item("key", l.key)?;
            d.set_item("max", l.max)?;
            d.set_item("unit", l.unit)?;
            d.set_item("why", l.why)?;
            Ok(d)
        })
        .collect()
}

/// What a lowered config will ask for (pages, swap_slots, bytes, accesses), after the core's
/// bound checks (a ConfigError if one fails); nothing is allocated.
#[pyfunction]
fn estimate<'py>(py: Python<'py>, config_json: &str) -> PyResult<Bound<'py, PyDict>> {
    let cfg = reclaimlab_core::config_from_json(config_json).map_err(errors::config_error)?;
    reclaimlab_core::limits::check(&cfg).map_err(errors::config_error)?;
    let e = reclaimlab_core::limits::estimate(&cfg);
    let d = PyDict::new(py);
    d.set_item("pages", e.pages)?;
    d.set_item("swap_slots", e.swap_slots)?;
    d.set_item("bytes", e.bytes)?;
    d.set_item("accesses", e.accesses)?;
    Ok(d)
}

/// The core's latency histogram over `values` (ns): the nearest-rank quantiles at
/// `quantiles_ppm` (parts per million), as run results report them.
#[pyfunction]
fn latency_quantiles(values: Vec<u64>, quantiles_ppm: Vec<u64>) -> PyResult<Vec<u64>> {
    if let Some(q) = quantiles_ppm.iter().find(|&&q| q == 0 || q > 1_000_000) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "quantile {q} ppm: expected 1 to 1000000"
        )));
    }
    let mut h = reclaimlab_core::latency::Histogram::default();
    for v in values {
        h.record(v);
    }
    Ok(quantiles_ppm
        .into_iter()
        .map(|q| h.quantile_ppm(q))
        .collect())
}

/// The histogram's stated relative error bound of a reported quantile.
#[pyfunction]
fn latency_relative_error() -> f64 {
    reclaimlab_core::latency::hist::RELATIVE_ERROR
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
    m.add_function(wrap_pyfunction!(compact_results, m)?)?;
    m.add_function(wrap_pyfunction!(codecs, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(page_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(compressed_len, m)?)?;
    m.add_function(wrap_pyfunction!(distinct_variants, m)?)?;
    m.add_function(wrap_pyfunction!(codec_timing, m)?)?;
    m.add_function(wrap_pyfunction!(check_content, m)?)?;
    m.add_function(wrap_pyfunction!(zpools, m)?)?;
    m.add_function(wrap_pyfunction!(knobs, m)?)?;
    m.add_function(wrap_pyfunction!(limits, m)?)?;
    m.add_function(wrap_pyfunction!(estimate, m)?)?;
    m.add_function(wrap_pyfunction!(latency_quantiles, m)?)?;
    m.add_function(wrap_pyfunction!(latency_relative_error, m)?)?;
    errors::register(m)?;
    Ok(())
}
