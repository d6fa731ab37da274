//! Recorded access sequences for `Phase::Trace`: the compact file that lowering writes
//! (python/reclaimlab/trace.py converts CSV, libCacheSim oracleGeneral and damo records into it)
//! and that the simulator and the real-kernel runner both read, so both replay the very same
//! accesses.
//!
//! File layout (little-endian), see `docs/workload.md`:
//!
//! ```text
//! 8 bytes  magic "RLTRACE1"
//! 8 bytes  u64 n, the number of accesses
//! n × 4    u32 access: bit 31 = write, bits 0..=30 = page index in the concatenation of the
//!          phase's regions (in the phase's region order)
//! ```
//!
//! The lowered config names the file by path and its sha256 (`{"path": ..., "sha256": ...}`);
//! the sha256 keys results and the result cache by the file's content. Lowering writes the file
//! under that name and checks it; this crate checks the magic and the length, and `AccessGen`
//! checks nothing per access (`Phase::check_sizes` has checked the largest index).

use std::fmt;
use std::sync::Arc;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The first 8 bytes of a compact trace file.
pub const MAGIC: &[u8; 8] = b"RLTRACE1";
/// The write flag of an access word.
pub const WRITE_BIT: u32 = 1 << 31;
/// The page index bits of an access word.
pub const INDEX_MASK: u32 = WRITE_BIT - 1;

/// A loaded compact trace: the access words and where they came from.
#[derive(Clone)]
pub struct TraceFile {
    pub path: String,
    pub sha256: String,
    words: Arc<[u32]>,
    /// The largest page index of any access (0 for an empty trace).
    max_index: u32,
}

impl TraceFile {
    /// Parses the bytes of a compact trace file; `path` and `sha256` are kept for messages
    /// and serialization.
    pub fn from_bytes(path: String, sha256: String, bytes: &[u8]) -> Result<TraceFile, String> {
        if bytes.len() < 16 || &bytes[..8] != MAGIC {
            return Err(format!("trace file {path}: not a reclaimlab compact trace (expected the magic \"RLTRACE1\" in its first 8 bytes)"));
        }
        let n = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
        let body = &bytes[16..];
        if n.checked_mul(4) != Some(body.len() as u64) {
            return Err(format!(
                "trace file {path}: header says {n} accesses ({} bytes) but {} bytes follow it",
                n.saturating_mul(4),
                body.len()
            ));
        }
        let words: Arc<[u32]> = body
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        let max_index = words.iter().map(|w| w & INDEX_MASK).max().unwrap_or(0);
        Ok(TraceFile {
            path,
            sha256,
            words,
            max_index,
        })
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: String, sha256: String) -> Result<TraceFile, String> {
        let bytes = std::fs::read(&path).map_err(|e| format!("trace file {path}: {e}"))?;
        TraceFile::from_bytes(path, sha256, &bytes)
    }

    /// The access words, in order.
    pub fn words(&self) -> &Arc<[u32]> {
        &self.words
    }

    pub fn len(&self) -> u64 {
        self.words.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    pub fn max_index(&self) -> u32 {
        self.max_index
    }
}

impl fmt::Debug for TraceFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TraceFile")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .field("accesses", &self.words.len())
            .finish()
    }
}

/// Two traces are the same trace when their contents are (the path does not matter).
impl PartialEq for TraceFile {
    fn eq(&self, other: &Self) -> bool {
        self.sha256 == other.sha256 && self.words == other.words
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTraceFile {
    path: String,
    sha256: String,
}

impl Serialize for TraceFile {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RawTraceFile {
            path: self.path.clone(),
            sha256: self.sha256.clone(),
        }
        .serialize(s)
    }
}

/// Deserializing reads the file: a config with a trace phase is complete only with its data,
/// and both the simulator and the runner load configs through serde.
impl<'de> Deserialize<'de> for TraceFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = RawTraceFile::deserialize(d)?;
        TraceFile::load(raw.path, raw.sha256).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn bytes(words: &[u32]) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&(words.len() as u64).to_le_bytes());
        for w in words {
            b.extend_from_slice(&w.to_le_bytes());
        }
        b
    }

    #[test]
    fn parses_and_rejects() {
        let t =
            TraceFile::from_bytes("t".into(), "x".into(), &bytes(&[3, 7 | WRITE_BIT, 1])).unwrap();
        assert_eq!(&t.words()[..], &[3, 7 | WRITE_BIT, 1]);
        assert_eq!(t.max_index(), 7);
        assert_eq!(t.len(), 3);
        let e =
            TraceFile::from_bytes("t".into(), "x".into(), b"RLTRACE0\0\0\0\0\0\0\0\0").unwrap_err();
        assert!(e.contains("magic"), "{e}");
        let mut short = bytes(&[1, 2]);
        short.pop();
        let e = TraceFile::from_bytes("t".into(), "x".into(), &short).unwrap_err();
        assert!(
            e.contains("header says 2 accesses (8 bytes) but 7 bytes follow"),
            "{e}"
        );
        let e = TraceFile::load("/nonexistent/x.rltrace".into(), "x".into()).unwrap_err();
        assert!(e.starts_with("trace file /nonexistent/x.rltrace: "), "{e}");
    }
}
