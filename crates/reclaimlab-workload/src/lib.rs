//! Page contents and access patterns shared by the reclaimlab simulator and the real-kernel
//! runner. Everything here is a pure function of (seed, region, page index, phase), so the
//! simulator and a process on the real kernel see the same bytes in the same order.
//!
//! See `docs/workload.md` for the PRNG and content definitions.

pub mod content;
pub mod pattern;
pub mod rng;
pub mod trace;

pub use content::{Content, PAGE_SIZE};
pub use pattern::{
    check_fds, Access, AccessGen, After, CgroupCounter, CgroupFile, CgroupValue, Dist,
    KernelMigrateType, Phase, RandomStrata, RegionKind, ZramFile, MAX_CGROUP_FDS,
    MAX_KERNEL_ALLOC_ORDER,
};
pub use rng::{SplitMix64, Stream};
pub use trace::TraceFile;
