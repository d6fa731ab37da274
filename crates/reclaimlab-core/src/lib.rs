//! reclaimlab-core: a deterministic model of Linux memory reclaim with a compressed swap tier
//! (kswapd, direct and memcg reclaim, swap, zswap, zsmalloc), counting what the kernel counts.
//!
//! Pure Rust: no I/O, no wall clock, no threads, no hash-ordered iteration. The same
//! configuration and seed give bit-identical results.

pub mod block;
pub mod compaction;
pub mod compress;
pub mod config;
mod conservation;
pub mod costs;
pub mod engine;
pub mod error;
pub mod knobs;
pub mod latency;
pub mod limits;
pub mod mm;
pub mod page_alloc;
pub mod policy;
mod prefetch;
pub mod psi;
mod sched;
pub mod sim;
pub mod stats;
pub mod zpool;
pub mod zram;
pub mod zswap;

pub use config::SimConfig;
pub use engine::{PhaseRecord, PoolClasses, SimResult, Simulation};
pub use error::{ConfigError, ErrorKind};

/// Parse a lowered scenario (JSON) and build its simulation.
/// Parse a lowered scenario (JSON) and build its simulation. A parse error names the JSON path
/// of the offending field.
pub fn simulation_from_json(json: &str) -> Result<Simulation, ConfigError> {
    Simulation::new(&config_from_json(json)?)
}

/// Parse a lowered scenario (JSON).
pub fn config_from_json(json: &str) -> Result<SimConfig, ConfigError> {
    let de = &mut serde_json::Deserializer::from_str(json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        // serde_path_to_error says "." for the document itself.
        let path = if path == "." { String::new() } else { path };
        ConfigError::new(
            ErrorKind::Parse,
            path,
            format!("invalid lowered config: {}", e.into_inner()),
        )
    })
}
