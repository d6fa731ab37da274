//! The one place where core errors become Python exceptions.
//!
//! A configuration the core rejects raises `reclaimlab._core.ConfigError`, a ValueError whose
//! `path` is the lowered-JSON path of the key ("" if none), `reason` the message without the
//! path and `kind` one of "parse", "invalid", "unknown", "unavailable"; `str(e)` reads
//! "<path>: <reason>". Errors in other arguments (a codec name, a page's length) are
//! ConfigErrors without a lowered path, so Python catches one class.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use reclaimlab_core::{ConfigError as CoreError, ErrorKind};

create_exception!(
    reclaimlab._core,
    ConfigError,
    PyValueError,
    "A configuration the simulator rejects: `path` (lowered-JSON path, \"\" if none), `reason`, `kind`."
);

/// The Python exception for a core error.
pub fn config_error(e: CoreError) -> PyErr {
    Python::attach(|py| {
        let err = ConfigError::new_err(e.to_string());
        let v = err.value(py);
        for (k, val) in [
            ("path", e.path.as_str()),
            ("reason", e.reason.as_str()),
            ("kind", e.kind.name()),
        ] {
            if let Err(set) = v.setattr(k, val) {
                return set;
            }
        }
        err
    })
}

/// A rejected argument that is not part of a lowered config: `what` names it.
pub fn bad_argument(what: &str, reason: impl Into<String>) -> PyErr {
    config_error(CoreError::new(ErrorKind::Invalid, what, reason))
}

/// Registers the exception class, with class-level defaults for its attributes (so that they
/// exist on the class, as the stub declares them).
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let t = m.py().get_type::<ConfigError>();
    t.setattr("path", "")?;
    t.setattr("reason", "")?;
    t.setattr("kind", "")?;
    m.add("ConfigError", t)
}
