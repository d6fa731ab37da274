//! Integration tests: whole simulations checked against kernel invariants. One binary, one
//! module per subject.

mod after;
mod allocators;
mod block_device;
mod bounds;
mod cgroup_writes;
mod common;
mod determinism;
mod faults;
mod filemap;
mod writeback;
mod identities;
mod lru_gen;
mod mlock;
mod memcg_v1;
mod oom_kill;
mod switches;
mod zswap_limits;
mod page_tables;
mod protection;
mod psi;
mod stats_flush;
mod shmem;
mod thp;
