//! Integration tests: whole simulations checked against kernel invariants. One binary, one
//! module per subject.

mod after;
mod allocators;
mod analytic;
mod block_device;
mod bounds;
mod cgroup_writes;
mod common;
mod determinism;
mod faults;
mod filemap;
mod identities;
mod kalloc;
mod lru_gen;
mod memcg_v1;
mod mlock;
mod oom_kill;
mod page_tables;
mod peak_fds;
mod protection;
mod psi;
mod shmem;
mod stats_flush;
mod switches;
mod thp;
mod tmpfile;
mod writeback;
mod zswap_limits;
