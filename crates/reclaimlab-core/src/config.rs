//! The lowered scenario: what the Python loader hands the simulator, after validation, unit
//! conversion (bytes, pages, nanoseconds) and name resolution (regions and cgroups are indices).
//! The TOML format users write is documented in docs/scenario.md; this is its resolved form.

use std::collections::BTreeMap;

pub use crate::knobs::{Kernel, VmSysctls, ZswapParams};
use reclaimlab_workload::Phase;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    pub seed: u64,
    pub machine: Machine,
    pub kernel: Kernel,
    pub cgroups: Cgroups,
    pub processes: Vec<Process>,
    /// Time-model overrides, by the names of [`crate::costs::Costs`] fields.
    #[serde(default)]
    pub costs: BTreeMap<String, u64>,
    /// Stop the simulation at this virtual time even if processes are still running.
    #[serde(default)]
    pub max_time_ns: Option<u64>,
    /// Tracepoint groups to count and export (crate::stats::trace: "vmscan", "shrinker",
    /// "zswap"); empty: none, and no `trace.*` keys beyond the file-writeback ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<String>,
    /// How the engine runs the processes' accesses (scenario table `[engine]`).
    #[serde(default, skip_serializing_if = "Engine::is_default")]
    pub engine: Engine,
}

/// The scenario's `[engine]` table: how the simulation is carried out, not what it models.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Engine {
    #[serde(default)]
    pub accesses: Accesses,
}

impl Engine {
    fn is_default(&self) -> bool {
        *self == Engine::default()
    }
}

/// `engine.accesses`: every access stepped one by one (`exact`, the lab's sequence), or the
/// resident hits of uniform and hot/cold random phases drawn in bulk (`analytic`, crate::mm::analytic and
/// docs/model/analytic.md). The one declaration of the values: the scenario loader passes the
/// string through, and an unknown one is refused here with the values listed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", try_from = "String")]
pub enum Accesses {
    #[default]
    Exact,
    Analytic,
}

impl Accesses {
    /// Every mode with its name, as the scenario spells it.
    pub const ALL: [(Accesses, &'static str); 2] =
        [(Accesses::Exact, "exact"), (Accesses::Analytic, "analytic")];
}

impl TryFrom<String> for Accesses {
    type Error = String;

    /// Parsed from a string (not as a serde enum) so that a refusal carries the key's own path
    /// and lists the values.
    fn try_from(s: String) -> std::result::Result<Self, String> {
        Accesses::ALL
            .iter()
            .find(|(_, name)| *name == s)
            .map(|&(a, _)| a)
            .ok_or_else(|| {
                let names: Vec<String> = Accesses::ALL
                    .iter()
                    .map(|(_, n)| format!("`{n}`"))
                    .collect();
                format!("unknown mode {s:?}: expected {}", names.join(" or "))
            })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    pub memory_bytes: u64,
    pub cpus: u32,
    #[serde(default)]
    pub swap: Vec<SwapDevice>,
    /// Filesystems that file regions live on (crate::mm::filemap). Empty: the machine has
    /// anonymous memory only, and exports no file-page counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filesystems: Vec<Filesystem>,
    /// Online memcgs of the machine besides the root and the scenario's (`machine.host_memcgs`):
    /// the zswap shrink worker walks them too (crate::mm::zswap). 0: none (configs without it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_memcgs: u32,
    /// The order from which the machine's free memory is reported to a hypervisor
    /// (`machine.page_reporting_order`: a VM whose virtio-balloon does free page reporting,
    /// /sys/module/page_reporting/parameters/page_reporting_order; crate::page_alloc). 0: none
    /// (bare metal, and configs without it).
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub page_reporting_order: u8,
    /// The swap cluster readahead state the machine's kernel has when the run starts
    /// (`machine.swapin_readahead_hits`, `machine.last_readahead_pages`): the global statics of
    /// mm/swap_state.c (`swapin_readahead_hits`, swapin_nr_pages' `last_readahead_pages`), 4
    /// and 0 after boot, afterwards whatever the machine's last swap-ins left. None: the boot
    /// values (configs without them). crate::mm::swap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swapin_readahead_hits: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_readahead_pages: Option<u32>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u8(n: &u8) -> bool {
    *n == 0
}

/// A filesystem holding the files of file regions: on its own block device, or a tmpfs
/// (memory only: its files are shmem, mm/shmem.rs).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filesystem {
    pub name: String,
    /// "ext4", "xfs", "btrfs" (crate::mm::filemap::FsType) or "tmpfs".
    pub fstype: String,
    /// The block device: required for every type but tmpfs, which has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<DeviceModel>,
    /// tmpfs only: the size= mount option (bytes); None: the kernel's default, half of RAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// A block-device filesystem: the size of the image the lab makes it on (the lowering
    /// sets it with the lab's rule), from which an ext4 has mke2fs's layout and journal size
    /// (mm/journal.rs Ext4Geometry::mke2fs). None: mke2fs's default layout and a journal that
    /// never fills.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_bytes: Option<u64>,
    /// A block-device filesystem: what its block device is (the scenario's
    /// `machine.filesystems[].backing`, which the lowering always gives; crate::block::Backing).
    /// Left out (configs written before it existed): the filesystem is on the device itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backing: Option<Backing>,
}

/// What a filesystem's block device is made of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backing {
    /// The filesystem is on the device itself.
    #[default]
    Device,
    /// A loop device with direct IO over an image file on another block device, as the lab
    /// makes its filesystems (`losetup --direct-io=on`): every bio the loop device gets is
    /// submitted again, by its worker, to the device under the image (drivers/block/loop.c).
    Loop,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwapDevice {
    pub name: String,
    /// "file" (a swap file on a block device) or "zram".
    pub kind: SwapKind,
    pub size_bytes: u64,
    /// swapon priority; higher is used first.
    pub priority: i32,
    pub device: DeviceModel,
    /// zram only: comp_algorithm.
    #[serde(default)]
    pub comp_algorithm: Option<String>,
    /// zram only: the allocator of its compressed pages (None: zsmalloc, the only one zram
    /// has; see crate::zram).
    #[serde(default)]
    pub allocator: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwapKind {
    File,
    Zram,
}

/// A block device: fixed latency per request plus transfer time at `*_bandwidth`, transfers
/// serialised (one queue), latencies overlapped; optionally a request-rate cap and request
/// merging (docs/model/time.md, "Swap device model").
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceModel {
    pub rotational: bool,
    pub read_latency_ns: u64,
    pub write_latency_ns: u64,
    pub read_bytes_per_s: u64,
    pub write_bytes_per_s: u64,
    /// Requests per second the device serves at most (a cloud disk's provisioned IOPS): every
    /// request occupies the device for at least 1/iops s. None: no cap.
    #[serde(default)]
    pub iops: Option<u64>,
    /// /sys/block/<dev>/queue/max_sectors_kb: the largest request the block layer builds by
    /// merging bios submitted under one plug. None: no merging, every page is its own request,
    /// issued when it is submitted.
    #[serde(default)]
    pub max_sectors_kb: Option<u32>,
    /// /sys/block/<dev>/queue/nr_requests: requests the queue holds at once (tags). A task
    /// that needs a new request while all are in flight sleeps until one completes. None: no
    /// limit, submitters never wait.
    #[serde(default)]
    pub nr_requests: Option<u32>,
    /// /sys/block/<dev>/queue/read_ahead_kb: the block device's bdi->ra_pages, which a file
    /// opened on it starts with (file_ra_state_init), the largest readahead window of
    /// ondemand readahead (mm/filemap.rs). None: VM_READAHEAD_PAGES (128 KiB), the kernel's
    /// default. Swap readahead does not use it (page-cluster).
    #[serde(default)]
    pub read_ahead_kb: Option<u32>,
    /// Time a cache flush (REQ_OP_FLUSH) occupies the device: the device has a volatile
    /// write cache and no FUA (blk-flush.c emulates a FUA write with a flush after it), as the
    /// loop device and virtio-blk have. None: no volatile cache, flushes are dropped.
    #[serde(default)]
    pub flush_ns: Option<u64>,
}

#[cfg(test)]
impl DeviceModel {
    /// The unit tests' device: 100 ns latency, a million pages per second each way, no caps, so
    /// the times the tests assert are easy to compute by hand.
    pub(crate) fn test_fast() -> DeviceModel {
        DeviceModel {
            rotational: true,
            read_latency_ns: 100,
            write_latency_ns: 100,
            read_bytes_per_s: 4096 * 1_000_000,
            write_bytes_per_s: 4096 * 1_000_000,
            iops: None,
            max_sectors_kb: None,
            nr_requests: None,
            read_ahead_kb: None,
            flush_ns: None,
        }
    }
}

/// The flushes of memcg statistics (mm/memcg_stats.rs): the kernel's periodic flusher and the
/// readers of memory.stat.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsFlush {
    /// When flush_memcg_stats_dwork first runs after time 0, ns (below FLUSH_TIME, 2 s); it
    /// runs every FLUSH_TIME from then on. None: no periodic flusher (not a kernel
    /// configuration: for tests of the mechanism).
    pub dwork_phase_ns: Option<u64>,
    /// A reader (the lab's sampler) reads memory.stat of every cgroup, in pre-order, at time 0
    /// and every this many ns after. None or 0: nobody reads it during the run.
    #[serde(default)]
    pub read_ns: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cgroups {
    pub version: u8,
    /// Pre-order list; index 0 is always the root cgroup ("/"), parents precede children.
    pub groups: Vec<Cgroup>,
    /// When memcg statistics are flushed (mm/memcg_stats.rs); the LRU balance and refault
    /// decisions read the flushed sizes (Mm::lru_size_stat). None: they read live sizes (no
    /// rstat at all; for tests of the mechanism).
    #[serde(default)]
    pub stats_flush: Option<StatsFlush>,
    /// The cgroup2 mount option memory_recursiveprot (v2): unclaimed memory.min/low of a
    /// parent is shared among its children by usage (effective_protection). Off by default,
    /// as a plain `mount -t cgroup2`; systemd mounts with it on.
    #[serde(default)]
    pub memory_recursiveprot: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cgroup {
    /// "/" for the root, otherwise "/a/b".
    pub path: String,
    pub parent: Option<u32>,
    /// v1 memory.limit_in_bytes or v2 memory.max, in bytes (None = unlimited).
    pub limit_bytes: Option<u64>,
    /// v2 memory.high (None = max).
    pub high_bytes: Option<u64>,
    /// v1 memory.swappiness (None = inherited from the parent, or vm.swappiness at the root).
    pub swappiness: Option<u32>,
    /// v2 memory.zswap.max (None = max).
    pub zswap_max_bytes: Option<u64>,
    /// v2 memory.zswap.writeback.
    pub zswap_writeback: bool,
    /// v2 memory.min (None = 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<u64>,
    /// v2 memory.low (None = 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_bytes: Option<u64>,
    /// v2 memory.swap.max (None = max).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap_max_bytes: Option<u64>,
    /// v2 memory.oom.group (None = 0): an OOM kill of a task in this cgroup's subtree kills
    /// every task of the subtree (mem_cgroup_get_oom_group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_group: Option<bool>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub name: String,
    /// Index into `cgroups.groups`.
    pub cgroup: u32,
    pub regions: Vec<Region>,
    pub phases: Vec<NamedPhase>,
    /// /proc/<pid>/oom_score_adj, -1000..=1000 (None = 0): added to the OOM badness in
    /// thousandths of the OOM domain's pages; -1000 (OOM_SCORE_ADJ_MIN) is never killed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_score_adj: Option<i16>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    pub name: String,
    pub pages: u64,
    /// Content class as written in the scenario ("text", "mix1024", "same:0x5a", ...).
    pub content: String,
    /// Distinct page contents in the region.
    pub variants: u32,
    /// A file region: index into `machine.filesystems` of the filesystem holding the file.
    /// None: anonymous memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<u32>,
    /// madvise(MADV_HUGEPAGE): THP faults under kernel.transparent_hugepage.enabled = madvise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub thp: bool,
    /// mlock(2) of the whole region right after it is mapped: every page faulted in by that
    /// one call, mlocked and unevictable (mm/mlock.rs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mlock: bool,
    /// A file region whose file has no name (O_TMPFILE, or unlinked while open): when its
    /// process exits, the last close evicts the inode and its page cache is freed
    /// (mm/memory.rs `exit_process`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tmpfile: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedPhase {
    pub name: String,
    pub phase: Phase,
    /// Starts once another process's phase has ended (`after = "<process>:<phase>"`); absent
    /// in configs of phases without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<reclaimlab_workload::After>,
}
