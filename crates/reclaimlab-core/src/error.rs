//! The core's one error type: a configuration the model cannot run. It names the key by its
//! path in the lowered JSON (`processes[0].regions[1].pages`, `kernel.zswap.zpool`), which the
//! Python side maps back to the scenario key and file the user wrote, and says what was wrong.

use std::fmt;

/// What kind of mistake a [`ConfigError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The lowered JSON does not parse, or a field has the wrong type or is missing.
    Parse,
    /// A value out of range or inconsistent with another.
    Invalid,
    /// A name (codec, allocator, switch, cost, preset, content class) the model does not know.
    Unknown,
    /// A known name that the selected kernel version does not have, or that is not modelled.
    Unavailable,
}

impl ErrorKind {
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Parse => "parse",
            ErrorKind::Invalid => "invalid",
            ErrorKind::Unknown => "unknown",
            ErrorKind::Unavailable => "unavailable",
        }
    }
}

/// A rejected configuration: `path` is the lowered-JSON path of the key ("" when the error is
/// about the configuration as a whole), `reason` the message without the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub kind: ErrorKind,
    pub path: String,
    pub reason: String,
}

impl ConfigError {
    pub fn new(kind: ErrorKind, path: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError {
            kind,
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub fn invalid(path: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(ErrorKind::Invalid, path, reason)
    }

    pub fn unknown(path: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(ErrorKind::Unknown, path, reason)
    }

    pub fn unavailable(path: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(ErrorKind::Unavailable, path, reason)
    }
}

/// "<path>: <reason>", or the reason alone without a path.
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

impl std::error::Error for ConfigError {}

pub type Result<T> = std::result::Result<T, ConfigError>;
