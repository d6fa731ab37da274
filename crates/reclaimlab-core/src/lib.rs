//! reclaimlab-core: a deterministic model of Linux memory reclaim with a compressed swap tier
//! (kswapd, direct and memcg reclaim, swap, zswap, zsmalloc), counting what the kernel counts.
//!
//! Pure Rust: no I/O, no wall clock, no threads, no hash-ordered iteration. The same
//! configuration and seed give bit-identical results.

pub mod block;
pub mod compress;
pub mod config;
pub mod costs;
pub mod engine;
pub mod mm;
pub mod policy;
pub mod sim;
pub mod stats;
pub mod zpool;
pub mod zram;
pub mod zswap;

pub use config::SimConfig;
pub use engine::{PhaseRecord, SimResult, Simulation};

/// Parse a lowered scenario (JSON) and build its simulation.
pub fn simulation_from_json(json: &str) -> Result<Simulation, String> {
    let cfg: SimConfig = serde_json::from_str(json).map_err(|e| format!("invalid lowered config: {e}"))?;
    Simulation::new(&cfg)
}
