//! Access phases and their deterministic access generators.
//!
//! `AccessGen::next` sits in the simulator's innermost loop, so a generator precomputes
//! everything it can in `new` and never allocates afterwards. The order of random draws is
//! part of the workload definition (see `docs/workload.md`): changing it changes every
//! simulated run and breaks agreement with the real-kernel runner.

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use crate::rng::SplitMix64;
use crate::trace::{TraceFile, INDEX_MASK, WRITE_BIT};

/// One memory access: page `page` of region `region` (index into the process's regions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    pub region: u32,
    pub page: u64,
    pub write: bool,
}

/// How a random phase picks pages in the concatenated index space of its regions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Dist {
    Uniform,
    /// `hot_percent` % of the pages (the lowest indices) get `hot_access_percent` % of accesses.
    HotCold {
        hot_percent: u8,
        hot_access_percent: u8,
    },
    /// Rank r (page index r, from 0) has weight 1/(r+1)^theta.
    Zipf {
        theta: f64,
    },
}

/// What a phase's region must be: a file (read, write, mmap, create_files) or anonymous
/// memory (fill, sequential, random, trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionKind {
    Anon,
    File,
}

/// A phase of a process, as lowered by the scenario loader: regions are indices.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Phase {
    /// Write every page of the region once, in index order.
    Fill {
        region: u32,
    },
    /// `passes` passes over the regions in order, one access per page.
    Sequential {
        regions: Vec<u32>,
        passes: u32,
        write_percent: u8,
        /// Each store is a load then a store to the same page (read-modify-write): see
        /// [`AccessGen::rw`]. Absent (false) in configs written before it existed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        rw: bool,
    },
    /// Random accesses over the concatenation of `regions`, until `count` accesses were made or
    /// `duration_ns` of (simulated or real) time has passed, whichever is set.
    Random {
        regions: Vec<u32>,
        dist: Dist,
        count: Option<u64>,
        duration_ns: Option<u64>,
        write_percent: u8,
        /// As `Sequential`'s.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        rw: bool,
    },
    Sleep {
        duration_ns: u64,
    },
    /// `passes` buffered read(2) passes over a file region, in order, one page per call.
    Read {
        region: u32,
        passes: u32,
    },
    /// `passes` passes over a file region through a shared mapping (mmap), in order, one
    /// access per page: a store with probability `write_percent` %, otherwise a load.
    Mmap {
        region: u32,
        passes: u32,
        /// Absent in configs written before stores through mappings existed: loads only.
        #[serde(default)]
        write_percent: u8,
    },
    /// `passes` buffered write(2) passes over a file region, in order, one page per call;
    /// with `fsync_bytes`, an fsync(2) after every that many bytes written.
    Write {
        region: u32,
        passes: u32,
        #[serde(default)]
        fsync_bytes: Option<u64>,
    },
    /// Replays a recorded access sequence (see `trace.rs`) over the concatenation of
    /// `regions`, in order, `passes` times, stopping after `limit` accesses when set. Each
    /// access's page and write flag come from the trace; nothing is drawn.
    Trace {
        regions: Vec<u32>,
        trace: TraceFile,
        passes: u32,
        #[serde(default)]
        limit: Option<u64>,
    },
    /// fs_mark-style file creation: each file region of `regions`, in order, is created and
    /// written from start to end with buffered write(2), one page per call, then closed;
    /// with `fsync`, an fsync(2) before each close (fs_mark -S1; without: -S0).
    CreateFiles {
        regions: Vec<u32>,
        fsync: bool,
    },
    /// A write of `amount` bytes to the process's cgroup's `memory.reclaim` (cgroup v2):
    /// proactive reclaim, optionally with the `swappiness=` argument.
    Reclaim {
        amount: CgroupValue,
        #[serde(default)]
        swappiness: Option<u8>,
    },
    /// A write of `value` to the interface file `file` of the process's cgroup: opened, written
    /// and closed, or with `fd` written through that open descriptor of the process (a
    /// `CgroupOpen` of the same file; memory.peak and memory.swap.peak).
    CgroupWrite {
        file: CgroupFile,
        value: CgroupValue,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fd: Option<u32>,
    },
    /// Opens the interface file `file` (memory.peak or memory.swap.peak) of the process's
    /// cgroup and keeps the descriptor as the process's descriptor `fd` (an index: the
    /// scenario names them) until a `CgroupClose` of it or the process's end.
    CgroupOpen {
        file: CgroupFile,
        fd: u32,
    },
    /// A read of the interface file `file` of the process's cgroup (opened, read, closed), or
    /// with `fd` through that open descriptor (a `CgroupOpen` of the same file): the number
    /// read goes into the phase's record. A keyed file (memory.stat, memory.events) is read
    /// at its row `key`, as the selftests' cg_read_key_long.
    CgroupRead {
        file: CgroupCounter,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fd: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<String>,
    },
    /// Closes the process's descriptor `fd` (close(2); the kernel's release of the open file).
    CgroupClose {
        fd: u32,
    },
    /// A write to the attribute `file` of zram device `device` (/sys/block/zram<device>/,
    /// devices numbered in the scenario's order).
    ZramWrite {
        device: u32,
        file: ZramFile,
    },
    /// `count` kernel allocations of 2^`order` pages each, made on the process's behalf (a
    /// fork's kernel stack: order 2; a SLUB slab: order 3 with `fallback_order` 0, s->oo and
    /// s->min), of type `migratetype`. They are held until the process exits (docs/model/
    /// kernel_alloc.md). Simulator only.
    KernelAlloc {
        count: u32,
        order: u8,
        #[serde(default)]
        fallback_order: Option<u8>,
        #[serde(default)]
        migratetype: KernelMigrateType,
    },
    /// The process exits: all its memory, swap slots and zswap entries are freed.
    Exit,
}

/// The migratetype of a `KernelAlloc` phase's pages (gfp_migratetype: GFP_KERNEL is
/// MIGRATE_UNMOVABLE, __GFP_RECLAIMABLE slab caches MIGRATE_RECLAIMABLE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelMigrateType {
    #[default]
    Unmovable,
    Reclaimable,
}

/// MAX_PAGE_ORDER: the largest block the buddy allocator has.
pub const MAX_KERNEL_ALLOC_ORDER: u8 = 10;

/// A phase's start condition (the scenario's `after = "<process>:<phase>"`, docs/scenario.md):
/// the phase starts once phase `phase` of process `process` (indices into the lowered config)
/// has ended, or that process has stopped without ending it (OOM-killed, or exited before it).
/// The simulator's scheduler and the lab's driver both wait on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct After {
    pub process: u32,
    pub phase: u32,
}

/// The zram attributes a `ZramWrite` phase may write: those the simulator models. Spelled as
/// the kernel's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ZramFile {
    /// `compact`: compact the device's zsmalloc pool (compact_store → zs_compact).
    #[serde(rename = "compact")]
    Compact,
}

impl ZramFile {
    pub fn name(self) -> &'static str {
        match self {
            ZramFile::Compact => "compact",
        }
    }
}

/// The cgroup v2 interface files a `CgroupWrite` phase may write: those writable at runtime
/// that the simulator models. Spelled as the kernel's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CgroupFile {
    #[serde(rename = "memory.high")]
    MemoryHigh,
    #[serde(rename = "memory.max")]
    MemoryMax,
    #[serde(rename = "memory.zswap.max")]
    MemoryZswapMax,
    #[serde(rename = "memory.zswap.writeback")]
    MemoryZswapWriteback,
    #[serde(rename = "memory.swap.max")]
    MemorySwapMax,
    /// A write resets the peak this descriptor reads (6.12 peak_write); any text does.
    #[serde(rename = "memory.peak")]
    MemoryPeak,
    #[serde(rename = "memory.swap.peak")]
    MemorySwapPeak,
}

impl CgroupFile {
    /// The file's name in the cgroup directory.
    pub fn name(self) -> &'static str {
        match self {
            CgroupFile::MemoryHigh => "memory.high",
            CgroupFile::MemoryMax => "memory.max",
            CgroupFile::MemoryZswapMax => "memory.zswap.max",
            CgroupFile::MemoryZswapWriteback => "memory.zswap.writeback",
            CgroupFile::MemorySwapMax => "memory.swap.max",
            CgroupFile::MemoryPeak => "memory.peak",
            CgroupFile::MemorySwapPeak => "memory.swap.peak",
        }
    }

    /// A size file (bytes or `max`); memory.zswap.writeback takes 0 or 1, the peak files
    /// `reset`.
    pub fn is_size(self) -> bool {
        !matches!(
            self,
            CgroupFile::MemoryZswapWriteback | CgroupFile::MemoryPeak | CgroupFile::MemorySwapPeak
        )
    }

    /// A peak file (memory.peak, memory.swap.peak): the one kind a process may keep open
    /// (`CgroupOpen`), where the descriptor matters (per-descriptor resets).
    pub fn is_peak(self) -> bool {
        matches!(self, CgroupFile::MemoryPeak | CgroupFile::MemorySwapPeak)
    }
}

/// The cgroup counters a `CgroupValue::Of` may be computed from (read from the same cgroup,
/// in bytes, when the phase runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CgroupCounter {
    #[serde(rename = "memory.current")]
    MemoryCurrent,
    #[serde(rename = "memory.swap.current")]
    MemorySwapCurrent,
    #[serde(rename = "memory.zswap.current")]
    MemoryZswapCurrent,
    #[serde(rename = "memory.peak")]
    MemoryPeak,
    #[serde(rename = "memory.swap.peak")]
    MemorySwapPeak,
    /// Keyed files: one number per row (`CgroupRead` with a `key`; no `CgroupValue::Of`).
    #[serde(rename = "memory.stat")]
    MemoryStat,
    #[serde(rename = "memory.events")]
    MemoryEvents,
}

impl CgroupCounter {
    /// A file of `key value` rows (memory.stat, memory.events).
    pub fn is_keyed(self) -> bool {
        matches!(
            self,
            CgroupCounter::MemoryStat | CgroupCounter::MemoryEvents
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            CgroupCounter::MemoryCurrent => "memory.current",
            CgroupCounter::MemorySwapCurrent => "memory.swap.current",
            CgroupCounter::MemoryZswapCurrent => "memory.zswap.current",
            CgroupCounter::MemoryPeak => "memory.peak",
            CgroupCounter::MemorySwapPeak => "memory.swap.peak",
            CgroupCounter::MemoryStat => "memory.stat",
            CgroupCounter::MemoryEvents => "memory.events",
        }
    }
}

/// What a `CgroupWrite` phase writes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum CgroupValue {
    /// `max`: no limit (size files only).
    Max,
    /// A number: bytes for a size file, 0 or 1 for memory.zswap.writeback.
    Value { value: u64 },
    /// `floor(counter × times) − minus` bytes (0 if negative), the counter read from the same
    /// cgroup when the phase runs (test_zswap's "memory.zswap.max = half of
    /// memory.zswap.current", test_memcontrol's "reclaim memory.current − 30M").
    Of {
        of: CgroupCounter,
        times: f64,
        #[serde(default)]
        minus: u64,
    },
    /// `reset`: the text a peak file's reset writes (memory.peak, memory.swap.peak take any
    /// non-empty text and never parse it; the lab writes this word).
    Reset,
}

impl CgroupValue {
    /// The number written, given the counter's current value (None: `max`, or `reset`, which
    /// is no number: `Phase::check` keeps it to the peak files, whose writes never resolve it).
    pub fn resolve(&self, counter: impl FnOnce(CgroupCounter) -> u64) -> Option<u64> {
        match *self {
            CgroupValue::Max | CgroupValue::Reset => None,
            CgroupValue::Value { value } => Some(value),
            // f64 multiplication is exact IEEE arithmetic: the same on every machine.
            CgroupValue::Of { of, times, minus } => {
                Some(((counter(of) as f64 * times).floor() as u64).saturating_sub(minus))
            }
        }
    }

    /// The text written to the file.
    pub fn text(v: Option<u64>) -> String {
        v.map_or_else(|| "max".to_string(), |n| n.to_string())
    }
}

/// The longest phase duration (random `duration`, `sleep`): 10^6 s, in ns. Far above any real
/// run, and small enough that a start time plus a duration never overflows the simulator's
/// u64 nanosecond clock (see reclaimlab-core's `limits`).
pub const MAX_DURATION_NS: u64 = 1_000_000_000_000_000;
/// The most accesses a random phase may make (`count`): 10^15.
pub const MAX_ACCESSES: u64 = 1_000_000_000_000_000;
/// The most passes of a sequential, read or mmap phase: 10^9.
pub const MAX_PASSES: u32 = 1_000_000_000;

impl Phase {
    /// Whether a phase can run in a process with `nregions` regions; the message says why not.
    /// The simulator and the real-kernel runner both refuse what fails here (an `AccessGen`
    /// would panic on it).
    pub fn check(&self, nregions: usize) -> Result<(), String> {
        let check = |r: &u32| {
            if (*r as usize) < nregions {
                Ok(())
            } else {
                Err(format!(
                    "region index {r} out of range (the process has {nregions} regions)"
                ))
            }
        };
        if let Phase::Reclaim {
            amount: CgroupValue::Of { of, .. },
            ..
        }
        | Phase::CgroupWrite {
            value: CgroupValue::Of { of, .. },
            ..
        } = self
        {
            if of.is_keyed() {
                return Err(format!("{} is not a value to compute from", of.name()));
            }
        }
        match self {
            Phase::Write {
                fsync_bytes: Some(0),
                ..
            } => Err("fsync_bytes must be at least 1 byte".into()),
            Phase::Fill { region } => check(region),
            Phase::Read { region, passes }
            | Phase::Mmap { region, passes, .. }
            | Phase::Write { region, passes, .. } => {
                check(region)?;
                if *passes > MAX_PASSES {
                    return Err(format!("passes must be at most {MAX_PASSES}, got {passes}"));
                }
                Ok(())
            }
            Phase::Trace {
                regions,
                passes,
                limit,
                ..
            } => {
                if regions.is_empty() {
                    return Err("needs at least one region".into());
                }
                regions.iter().try_for_each(check)?;
                if *passes > MAX_PASSES {
                    return Err(format!("passes must be at most {MAX_PASSES}, got {passes}"));
                }
                if limit.is_some_and(|c| c > MAX_ACCESSES) {
                    return Err(format!(
                        "limit must be at most {MAX_ACCESSES} accesses, got {}",
                        limit.unwrap_or(0)
                    ));
                }
                Ok(())
            }
            Phase::CreateFiles { regions, .. } => {
                if regions.is_empty() {
                    return Err("needs at least one file".into());
                }
                regions.iter().try_for_each(check)
            }
            Phase::Sequential { regions, .. } | Phase::Random { regions, .. } => {
                if regions.is_empty() {
                    return Err("needs at least one region".into());
                }
                regions.iter().try_for_each(check)?;
                if let Phase::Random {
                    count,
                    duration_ns,
                    dist,
                    ..
                } = self
                {
                    if count.is_some() == duration_ns.is_some() {
                        return Err("a random phase needs exactly one of count and duration".into());
                    }
                    if count.is_some_and(|c| c > MAX_ACCESSES) {
                        return Err(format!(
                            "count must be at most {MAX_ACCESSES} accesses, got {}",
                            count.unwrap_or(0)
                        ));
                    }
                    if duration_ns.is_some_and(|d| d > MAX_DURATION_NS) {
                        return Err(format!(
                            "duration must be at most {MAX_DURATION_NS} ns (10^6 s), got {} ns",
                            duration_ns.unwrap_or(0)
                        ));
                    }
                    if let Dist::Zipf { theta } = dist {
                        if !(theta.is_finite() && *theta >= 0.0) {
                            return Err(format!("zipf theta must be finite and >= 0, got {theta}"));
                        }
                    }
                }
                if let Phase::Sequential { passes, .. } = self {
                    if *passes > MAX_PASSES {
                        return Err(format!("passes must be at most {MAX_PASSES}, got {passes}"));
                    }
                }
                Ok(())
            }
            Phase::Sleep { duration_ns } if *duration_ns > MAX_DURATION_NS => Err(format!(
                "duration must be at most {MAX_DURATION_NS} ns (10^6 s), got {duration_ns} ns"
            )),
            Phase::Reclaim {
                amount: CgroupValue::Max,
                ..
            } => Err("a reclaim amount is a size, not max".into()),
            Phase::Reclaim {
                amount: CgroupValue::Value { value: 0 },
                ..
            } => Err("a reclaim amount must be at least 1 byte".into()),
            Phase::Reclaim {
                swappiness: Some(s),
                ..
            } if *s > 200 => Err(format!("swappiness must be 0..200, got {s}")),
            Phase::Reclaim {
                amount: CgroupValue::Of { times, .. },
                ..
            } if !(times.is_finite() && *times >= 0.0) => {
                Err(format!("times must be finite and >= 0, got {times}"))
            }
            Phase::CgroupWrite {
                file, fd: Some(_), ..
            } if !file.is_peak() => Err(format!(
                "{} is written through a descriptor only if it is memory.peak or memory.swap.peak",
                file.name()
            )),
            Phase::CgroupWrite { file, value, .. } if file.is_peak() => match value {
                CgroupValue::Reset => Ok(()),
                _ => Err(format!("{} takes reset", file.name())),
            },
            Phase::CgroupWrite {
                value: CgroupValue::Reset,
                file,
                ..
            } => Err(format!(
                "{} takes no reset; only the peak files do",
                file.name()
            )),
            Phase::CgroupWrite { file, value, .. } => match (file.is_size(), value) {
                (false, CgroupValue::Value { value: 0 | 1 }) => Ok(()),
                (false, _) => Err(format!("{} takes 0 or 1", file.name())),
                (true, CgroupValue::Of { times, .. }) if !(times.is_finite() && *times >= 0.0) => {
                    Err(format!("times must be finite and >= 0, got {times}"))
                }
                (true, _) => Ok(()),
            },
            Phase::CgroupOpen { file, .. } if !file.is_peak() => Err(format!(
                "only memory.peak and memory.swap.peak are kept open; got {}",
                file.name()
            )),
            Phase::CgroupRead { file, key, .. } if file.is_keyed() != key.is_some() => {
                Err(match key {
                    Some(k) => format!("{} has no rows: no key ({k:?})", file.name()),
                    None => format!("{} is read at a row: key is missing", file.name()),
                })
            }
            Phase::CgroupRead {
                file, fd: Some(_), ..
            } if !matches!(
                file,
                CgroupCounter::MemoryPeak | CgroupCounter::MemorySwapPeak
            ) =>
            {
                Err(format!(
                    "{} is read through a descriptor only if it is memory.peak or memory.swap.peak",
                    file.name()
                ))
            }
            Phase::KernelAlloc { order, .. } if *order > MAX_KERNEL_ALLOC_ORDER => Err(format!(
                "order must be at most {MAX_KERNEL_ALLOC_ORDER} (MAX_PAGE_ORDER), got {order}"
            )),
            Phase::KernelAlloc {
                order,
                fallback_order: Some(f),
                ..
            } if f >= order => Err(format!(
                "fallback_order must be below order ({order}), got {f}"
            )),
            Phase::Sleep { .. }
            | Phase::Exit
            | Phase::Reclaim { .. }
            | Phase::ZramWrite { .. }
            | Phase::CgroupOpen { .. }
            | Phase::CgroupRead { .. }
            | Phase::CgroupClose { .. }
            | Phase::KernelAlloc { .. } => Ok(()),
        }
    }

    /// The regions a phase accesses and the kind they must be (file phases work on file
    /// regions, the others on anonymous memory); `None` for the phases that touch no memory:
    /// sleep, exit, the cgroup file phases, zram writes and kernel allocations. The one list of
    /// those phases, which the simulator's and the runner's checks and generators follow.
    pub fn regions_used(&self) -> Option<(RegionKind, &[u32])> {
        match self {
            Phase::Read { region, .. }
            | Phase::Mmap { region, .. }
            | Phase::Write { region, .. } => Some((RegionKind::File, std::slice::from_ref(region))),
            Phase::CreateFiles { regions, .. } => Some((RegionKind::File, regions)),
            Phase::Fill { region } => Some((RegionKind::Anon, std::slice::from_ref(region))),
            Phase::Sequential { regions, .. }
            | Phase::Random { regions, .. }
            | Phase::Trace { regions, .. } => Some((RegionKind::Anon, regions)),
            Phase::Sleep { .. }
            | Phase::Exit
            | Phase::Reclaim { .. }
            | Phase::CgroupWrite { .. }
            | Phase::CgroupOpen { .. }
            | Phase::CgroupRead { .. }
            | Phase::CgroupClose { .. }
            | Phase::ZramWrite { .. }
            | Phase::KernelAlloc { .. } => None,
        }
    }

    /// Checks that every region the phase accesses is of the kind it needs; `region(r)` gives
    /// region `r`'s name and whether it is a file. The check the simulator and the runner share.
    pub fn check_region_kinds<'a>(
        &self,
        region: impl Fn(u32) -> (&'a str, bool),
    ) -> Result<(), String> {
        let Some((kind, used)) = self.regions_used() else {
            return Ok(());
        };
        let wanted_file = kind == RegionKind::File;
        for &r in used {
            let (name, is_file) = region(r);
            if is_file != wanted_file {
                let (is, needs) = if wanted_file {
                    ("anonymous", "a file")
                } else {
                    ("a file", "an anonymous region")
                };
                return Err(format!(
                    "region {r} ({name}) is {is}; this phase needs {needs}"
                ));
            }
        }
        Ok(())
    }

    /// A phase that writes a cgroup file instead of accessing memory.
    pub fn is_cgroup_write(&self) -> bool {
        matches!(self, Phase::Reclaim { .. } | Phase::CgroupWrite { .. })
    }

    /// A phase that works on a cgroup interface file (opens, reads, writes or closes one)
    /// instead of accessing memory.
    pub fn is_cgroup_file(&self) -> bool {
        matches!(
            self,
            Phase::Reclaim { .. }
                | Phase::CgroupWrite { .. }
                | Phase::CgroupOpen { .. }
                | Phase::CgroupRead { .. }
                | Phase::CgroupClose { .. }
        )
    }

    /// The process's descriptors a phase uses: (fd, the file it must be open on; None for a
    /// close), and whether it opens it. For the checks of descriptor references, which the
    /// simulator and the runner share ([`check_fds`]).
    fn fd_use(&self) -> Option<(u32, Option<&'static str>, bool)> {
        match *self {
            Phase::CgroupOpen { file, fd } => Some((fd, Some(file.name()), true)),
            Phase::CgroupWrite {
                file, fd: Some(fd), ..
            } => Some((fd, Some(file.name()), false)),
            Phase::CgroupRead {
                file, fd: Some(fd), ..
            } => Some((fd, Some(file.name()), false)),
            Phase::CgroupClose { fd } => Some((fd, None, false)),
            _ => None,
        }
    }
}

/// The most descriptors one process may keep open.
pub const MAX_CGROUP_FDS: u32 = 1024;

/// Checks the descriptor references of one process's phases, in order: a descriptor is
/// opened before it is used, not opened again while open, used on the file it was opened on,
/// and not used after its close. Returns the number of descriptor slots (highest fd + 1), or
/// (the phase's index, why not).
pub fn check_fds(phases: &[Phase]) -> Result<u32, (usize, String)> {
    let mut open: Vec<Option<&'static str>> = Vec::new();
    for (i, ph) in phases.iter().enumerate() {
        let Some((fd, file, opens)) = ph.fd_use() else {
            continue;
        };
        if fd >= MAX_CGROUP_FDS {
            return Err((
                i,
                format!("fd {fd}: at most {MAX_CGROUP_FDS} descriptors per process"),
            ));
        }
        if open.len() <= fd as usize {
            open.resize(fd as usize + 1, None);
        }
        let slot = &mut open[fd as usize];
        match (opens, *slot, file) {
            (true, Some(f), _) => return Err((i, format!("fd {fd} is already open (on {f})"))),
            (true, None, f) => *slot = f,
            (false, None, _) => {
                return Err((
                    i,
                    format!("fd {fd} is not open here (no cgroup_open of it before, or closed)"),
                ))
            }
            (false, Some(f), Some(want)) if f != want => {
                return Err((i, format!("fd {fd} is open on {f}, not {want}")))
            }
            (false, Some(_), None) => *slot = None,
            (false, Some(_), Some(_)) => {}
        }
    }
    Ok(open.len() as u32)
}

impl Phase {
    /// Whether a phase fits the sizes of the process's regions (`region_pages[i]` pages in
    /// region `i`; call after [`Phase::check`]). Only a trace names pages itself: its largest
    /// page index must lie inside its regions. The simulator and the runner both refuse what
    /// fails here (an `AccessGen` would panic on it).
    pub fn check_sizes(&self, region_pages: &[u64]) -> Result<(), String> {
        if let Phase::Trace { regions, trace, .. } = self {
            let total: u64 = regions
                .iter()
                .map(|&r| region_pages.get(r as usize).copied().unwrap_or(0))
                .sum();
            if !trace.is_empty() && u64::from(trace.max_index()) >= total {
                return Err(format!(
                    "trace file {}: page index {} is outside the phase's regions ({total} pages); the trace was lowered for other region sizes",
                    trace.path,
                    trace.max_index()
                ));
            }
        }
        Ok(())
    }
}

/// The accesses of one phase, in order. See `docs/workload.md` for the exact definition.
#[derive(Clone, Debug)]
pub struct AccessGen {
    rng: SplitMix64,
    done: u64,
    write: WriteMode,
    state: State,
    rw: bool,
}

#[derive(Clone, Copy, Debug)]
enum WriteMode {
    Never,
    Always,
    /// Write with this probability in percent (strictly between 0 and 100): one `below(100)`
    /// draw per access.
    Percent(u64),
}

impl WriteMode {
    fn from_percent(p: u8) -> Self {
        match p {
            0 => WriteMode::Never,
            100.. => WriteMode::Always,
            p => WriteMode::Percent(u64::from(p)),
        }
    }
}

#[derive(Clone, Debug)]
enum State {
    Done,
    Fill {
        region: u32,
        next: u64,
        pages: u64,
    },
    /// `regions` holds (region, pages) with empty regions dropped; `at` indexes it.
    Sequential {
        regions: Box<[(u32, u64)]>,
        passes_left: u32,
        at: usize,
        page: u64,
    },
    Random {
        map: RegionMap,
        pick: Picker,
        remaining: Option<u64>,
    },
    /// `words[at]` is the next access; `remaining` counts down a `limit`.
    Trace {
        map: RegionMap,
        words: Arc<[u32]>,
        at: usize,
        passes_left: u32,
        remaining: Option<u64>,
    },
}

impl AccessGen {
    /// A generator for `phase` of a process whose region `i` has `region_pages[i]` pages,
    /// drawing from `rng` (normally `rng::stream(seed, Stream::Access, ..)`).
    ///
    /// Out-of-range percentages are clamped to 100. Regions with no pages are never accessed;
    /// a phase without any page to access yields nothing.
    ///
    /// # Panics
    /// If the phase names a region index outside `region_pages`, a Zipf `theta` that is
    /// negative or not finite, or a trace whose page indices exceed its regions (what
    /// `Phase::check` and `Phase::check_sizes` refuse).
    pub fn new(phase: &Phase, region_pages: &[u64], rng: SplitMix64) -> AccessGen {
        let pages_of = |r: u32| -> u64 {
            *region_pages.get(r as usize).unwrap_or_else(|| {
                panic!(
                    "phase names region {r} but the process has {} regions",
                    region_pages.len()
                )
            })
        };
        let (state, write) = match phase {
            Phase::Fill { region } => {
                let pages = pages_of(*region);
                (
                    State::Fill {
                        region: *region,
                        next: 0,
                        pages,
                    },
                    WriteMode::Always,
                )
            }
            Phase::Sequential {
                regions,
                passes,
                write_percent,
                ..
            } => {
                let regions: Box<[(u32, u64)]> = regions
                    .iter()
                    .map(|&r| (r, pages_of(r)))
                    .filter(|&(_, n)| n > 0)
                    .collect();
                let state = if regions.is_empty() || *passes == 0 {
                    State::Done
                } else {
                    State::Sequential {
                        regions,
                        passes_left: *passes,
                        at: 0,
                        page: 0,
                    }
                };
                (state, WriteMode::from_percent(*write_percent))
            }
            Phase::Random {
                regions,
                dist,
                count,
                duration_ns: _,
                write_percent,
                ..
            } => {
                let map = RegionMap::new(regions.iter().map(|&r| (r, pages_of(r))));
                let state = if map.total == 0 || *count == Some(0) {
                    State::Done
                } else {
                    let pick = Picker::new(dist, map.total);
                    State::Random {
                        map,
                        pick,
                        remaining: *count,
                    }
                };
                (state, WriteMode::from_percent(*write_percent))
            }
            Phase::Read { region, passes }
            | Phase::Mmap { region, passes, .. }
            | Phase::Write { region, passes, .. } => {
                // The same order as a sequential pass over one region. Read and Write phases
                // draw nothing (the phase kind says what each call does); a mapping's stores
                // draw like a sequential phase's.
                let write = match phase {
                    Phase::Mmap { write_percent, .. } => WriteMode::from_percent(*write_percent),
                    Phase::Write { .. } => WriteMode::Always,
                    _ => WriteMode::Never,
                };
                let pages = pages_of(*region);
                let state = if pages == 0 || *passes == 0 {
                    State::Done
                } else {
                    State::Sequential {
                        regions: Box::new([(*region, pages)]),
                        passes_left: *passes,
                        at: 0,
                        page: 0,
                    }
                };
                (state, write)
            }
            Phase::Trace {
                regions,
                trace,
                passes,
                limit,
            } => {
                let map = RegionMap::new(regions.iter().map(|&r| (r, pages_of(r))));
                if let Err(e) = phase.check_sizes(region_pages) {
                    panic!("{e}");
                }
                let state = if trace.is_empty() || *passes == 0 || *limit == Some(0) {
                    State::Done
                } else {
                    State::Trace {
                        map,
                        words: Arc::clone(trace.words()),
                        at: 0,
                        passes_left: *passes,
                        remaining: *limit,
                    }
                };
                // The trace carries each access's write flag.
                (state, WriteMode::Never)
            }
            Phase::CreateFiles { regions, .. } => {
                // One sequential write pass over the files in order; no draws.
                let regions: Box<[(u32, u64)]> = regions
                    .iter()
                    .map(|&r| (r, pages_of(r)))
                    .filter(|&(_, n)| n > 0)
                    .collect();
                let state = if regions.is_empty() {
                    State::Done
                } else {
                    State::Sequential {
                        regions,
                        passes_left: 1,
                        at: 0,
                        page: 0,
                    }
                };
                (state, WriteMode::Always)
            }
            // The phases that touch no memory: Phase::regions_used, their one list.
            _ => {
                debug_assert!(phase.regions_used().is_none());
                (State::Done, WriteMode::Never)
            }
        };
        let rw = matches!(
            phase,
            Phase::Sequential { rw: true, .. } | Phase::Random { rw: true, .. }
        );
        AccessGen {
            rng,
            done: 0,
            write,
            state,
            rw,
        }
    }

    /// Whether each store (`Access::write`) of this phase is a read-modify-write: a load of
    /// the page, then a store to it (the phase's `rw`). Changes no draw and no access: the
    /// simulator and the runner both carry out a write access as the load, then the store.
    #[inline]
    pub fn rw(&self) -> bool {
        self.rw
    }

    /// The next access, or `None` when the phase has no more (a `Random` phase without
    /// `count` never ends: the caller stops it after `duration_ns`).
    #[allow(clippy::should_implement_trait)] // It also implements Iterator; this is the fast path.
    #[inline]
    pub fn next(&mut self) -> Option<Access> {
        let (region, page) = match &mut self.state {
            State::Done => return None,
            State::Fill {
                region,
                next,
                pages,
            } => {
                if *next == *pages {
                    self.state = State::Done;
                    return None;
                }
                let page = *next;
                *next += 1;
                (*region, page)
            }
            State::Sequential {
                regions,
                passes_left,
                at,
                page,
            } => {
                let (region, pages) = regions[*at];
                let this = *page;
                *page += 1;
                if *page == pages {
                    *page = 0;
                    *at += 1;
                    if *at == regions.len() {
                        *at = 0;
                        *passes_left -= 1;
                        if *passes_left == 0 {
                            // This access is the last one; the next call sees Done.
                            self.state = State::Done;
                        }
                    }
                }
                (region, this)
            }
            State::Random {
                map,
                pick,
                remaining,
            } => {
                if let Some(left) = remaining {
                    if *left == 0 {
                        self.state = State::Done;
                        return None;
                    }
                    *left -= 1;
                }
                let index = pick.pick(&mut self.rng, map.total);
                map.locate(index)
            }
            State::Trace {
                map,
                words,
                at,
                passes_left,
                remaining,
            } => {
                if let Some(left) = remaining {
                    if *left == 0 {
                        self.state = State::Done;
                        return None;
                    }
                    *left -= 1;
                }
                let word = words[*at];
                let (region, page) = map.locate(u64::from(word & INDEX_MASK));
                *at += 1;
                if *at == words.len() {
                    *at = 0;
                    *passes_left -= 1;
                    if *passes_left == 0 {
                        // This access is the last one; the next call sees Done.
                        self.state = State::Done;
                    }
                }
                self.done += 1;
                return Some(Access {
                    region,
                    page,
                    write: word & WRITE_BIT != 0,
                });
            }
        };
        let write = match self.write {
            WriteMode::Never => false,
            WriteMode::Always => true,
            WriteMode::Percent(p) => self.rng.below(100) < p,
        };
        self.done += 1;
        Some(Access {
            region,
            page,
            write,
        })
    }

    /// How many accesses `next` has returned so far.
    #[inline]
    pub fn accesses_done(&self) -> u64 {
        self.done
    }

    /// For the simulator's analytic mode (docs/model/analytic.md): a random phase whose pages
    /// are uniform within one or two index ranges (uniform, hot/cold), described as
    /// [`RandomStrata`], and a Zipf phase (one stratum over every index, with its `zipf`
    /// exponent: the caller weighs the pages itself); None for every other phase (other
    /// kinds, a phase that has ended). `rw` phases are answered too: the caller decides.
    pub fn random_strata(&self) -> Option<RandomStrata<'_>> {
        let State::Random {
            map,
            pick,
            remaining,
        } = &self.state
        else {
            return None;
        };
        let total = map.total;
        let strata = match pick {
            Picker::Uniform => [(0, total, 100), (total, total, 0)],
            Picker::HotCold {
                hot,
                hot_access_percent,
            } => {
                // As Picker::pick: an empty side sends its share to the other one.
                let p = if *hot == 0 {
                    0
                } else if *hot == total {
                    100
                } else {
                    *hot_access_percent
                };
                [(0, *hot, p), (*hot, total, 100 - p)]
            }
            Picker::Zipf(_) => [(0, total, 100), (total, total, 0)],
        };
        Some(RandomStrata {
            regions: &map.regions,
            starts: &map.starts,
            total,
            remaining: *remaining,
            write_percent: match self.write {
                WriteMode::Never => 0,
                WriteMode::Always => 100,
                WriteMode::Percent(p) => p,
            },
            strata,
            zipf: match pick {
                Picker::Zipf(z) => Some(z.theta),
                _ => None,
            },
        })
    }

    /// For the simulator's analytic mode: where a sequential pass (a `Sequential` phase) is,
    /// as (region, next page, the region's pages, store percent); None for every other phase
    /// and once it has ended. The accesses up to the region's end are pages `page..pages` of
    /// `region`, in order.
    pub fn sequential_at(&self) -> Option<(u32, u64, u64, u64)> {
        let State::Sequential {
            regions, at, page, ..
        } = &self.state
        else {
            return None;
        };
        let (region, pages) = regions[*at];
        let w = match self.write {
            WriteMode::Never => 0,
            WriteMode::Always => 100,
            WriteMode::Percent(p) => p,
        };
        Some((region, *page, pages, w))
    }

    /// Count the next `n` accesses of a sequential pass as made without drawing them (the
    /// analytic mode); `n` must not go past the current region's end.
    pub fn skip_sequential(&mut self, n: u64) {
        if let State::Sequential {
            regions,
            passes_left,
            at,
            page,
        } = &mut self.state
        {
            let pages = regions[*at].1;
            debug_assert!(*page + n <= pages, "skipping past the region's end");
            *page += n;
            if *page >= pages {
                // As `next` does at a region's last page.
                *page = 0;
                *at += 1;
                if *at == regions.len() {
                    *at = 0;
                    *passes_left -= 1;
                    if *passes_left == 0 {
                        self.state = State::Done;
                    }
                }
            }
            self.done += n;
        }
    }

    /// Count `n` accesses as made without drawing them (the analytic mode draws them its own
    /// way). A phase with a `count` ends once its count is used up; `n` must not exceed it.
    pub fn skip(&mut self, n: u64) {
        if let State::Random {
            remaining: Some(left),
            ..
        } = &mut self.state
        {
            debug_assert!(n <= *left, "skipping {n} accesses of {left} left");
            *left -= n.min(*left);
        }
        self.done += n;
    }
}

/// A random phase as [`AccessGen::random_strata`] describes it.
#[derive(Clone, Copy, Debug)]
pub struct RandomStrata<'a> {
    /// The phase's non-empty regions (indices into the process's regions), in phase order.
    pub regions: &'a [u32],
    /// `starts[i]`: pages of `regions[..i]` in all.
    pub starts: &'a [u64],
    /// Pages of all the regions.
    pub total: u64,
    /// Accesses left of a `count`; None: the phase runs until its duration ends.
    pub remaining: Option<u64>,
    /// Each access is a store with this probability (percent, 0..=100).
    pub write_percent: u64,
    /// `(start, end, percent)`: that percent of the accesses go to the indices `start..end` of
    /// the regions' concatenation, each index equally likely. The ranges are disjoint, cover
    /// `0..total`, and their percents sum to 100; a range may be empty (then its percent is 0).
    pub strata: [(u64, u64, u64); 2],
    /// A Zipf phase's exponent: index `i` of the concatenation is drawn with probability
    /// `(i + 1)^-theta / Σ_{j=1..total} j^-theta` (exactly what the rejection-inversion
    /// sampler draws); `strata` is then the one range over every index.
    pub zipf: Option<f64>,
}

impl Iterator for AccessGen {
    type Item = Access;

    #[inline]
    fn next(&mut self) -> Option<Access> {
        AccessGen::next(self)
    }
}

/// Maps an index in the concatenation of a phase's regions to (region, page).
#[derive(Clone, Debug)]
struct RegionMap {
    /// Non-empty regions in phase order.
    regions: Box<[u32]>,
    /// `starts[i]` = total pages of `regions[..i]`; `starts[0] == 0`.
    starts: Box<[u64]>,
    total: u64,
}

/// Up to this many regions a linear scan beats binary search (and phases rarely list more).
const LINEAR_SEARCH_MAX: usize = 8;

impl RegionMap {
    fn new(regions: impl Iterator<Item = (u32, u64)>) -> Self {
        let mut ids = Vec::new();
        let mut starts = Vec::new();
        let mut total = 0u64;
        for (r, n) in regions.filter(|&(_, n)| n > 0) {
            ids.push(r);
            starts.push(total);
            total = total
                .checked_add(n)
                .expect("phase has more than 2^64 pages");
        }
        RegionMap {
            regions: ids.into(),
            starts: starts.into(),
            total,
        }
    }

    #[inline]
    fn locate(&self, index: u64) -> (u32, u64) {
        let n = self.starts.len();
        let i = if n == 1 {
            0
        } else if n <= LINEAR_SEARCH_MAX {
            // starts is sorted, so counting the later starts <= index finds the region without
            // a data-dependent branch (random indices would defeat the branch predictor).
            self.starts[1..]
                .iter()
                .map(|&s| usize::from(s <= index))
                .sum()
        } else {
            self.starts.partition_point(|&s| s <= index) - 1
        };
        (self.regions[i], index - self.starts[i])
    }
}

#[derive(Clone, Debug)]
enum Picker {
    Uniform,
    /// `hot` = ceil(total * hot_percent / 100) lowest indices are hot, the rest cold.
    HotCold {
        hot: u64,
        hot_access_percent: u64,
    },
    Zipf(Zipf),
}

impl Picker {
    fn new(dist: &Dist, total: u64) -> Self {
        match dist {
            Dist::Uniform => Picker::Uniform,
            Dist::HotCold {
                hot_percent,
                hot_access_percent,
            } => {
                let hp = u128::from((*hot_percent).min(100));
                let hot = (u128::from(total) * hp).div_ceil(100) as u64;
                Picker::HotCold {
                    hot,
                    hot_access_percent: u64::from((*hot_access_percent).min(100)),
                }
            }
            Dist::Zipf { theta } => Picker::Zipf(Zipf::new(total, *theta)),
        }
    }

    /// An index in `[0, total)`.
    #[inline]
    fn pick(&self, rng: &mut SplitMix64, total: u64) -> u64 {
        match self {
            Picker::Uniform => rng.below(total),
            Picker::HotCold {
                hot,
                hot_access_percent,
            } => {
                let cold = total - hot;
                let want_hot = rng.below(100) < *hot_access_percent;
                // An empty side sends its share to the other one.
                if (want_hot && *hot > 0) || cold == 0 {
                    rng.below(*hot)
                } else {
                    hot + rng.below(cold)
                }
            }
            Picker::Zipf(z) => z.sample(rng) - 1,
        }
    }
}

/// Zipf sampler over ranks 1..=n with P(k) proportional to k^-theta, by rejection-inversion
/// (W. Hörmann, G. Derflinger, "Rejection-inversion to generate variates from monotone discrete
/// distributions", ACM TOMACS 6(3), 1996): invert the integral H of the continuous hat
/// h(x) = x^-theta, round to the nearest rank, accept unless the point fell in the part of the
/// hat above the step function. O(1) expected time (acceptance is above 90 % for all theta),
/// no tables, valid for every theta >= 0 including 1.
#[derive(Clone, Debug)]
struct Zipf {
    n: u64,
    theta: f64,
    /// H(1.5) - 1: the lower end of the inverted range (rank 1 gets H(1.5) - h(1) .. H(1.5)).
    h_x1: f64,
    /// H(n + 0.5): the upper end.
    h_n: f64,
    /// Points with k - x <= s lie under the step function and need no acceptance test.
    s: f64,
}

impl Zipf {
    fn new(n: u64, theta: f64) -> Self {
        assert!(
            theta.is_finite() && theta >= 0.0,
            "zipf theta must be finite and >= 0, got {theta}"
        );
        let mut z = Zipf {
            n,
            theta,
            h_x1: 0.0,
            h_n: 0.0,
            s: 0.0,
        };
        z.h_x1 = z.h_integral(1.5) - 1.0;
        z.h_n = z.h_integral(n as f64 + 0.5);
        z.s = 2.0 - z.h_integral_inv(z.h_integral(2.5) - z.h(2.0));
        z
    }

    /// Draws `unit_f64` until acceptance (usually once); returns a rank in 1..=n.
    #[inline]
    fn sample(&self, rng: &mut SplitMix64) -> u64 {
        loop {
            let u = self.h_n + rng.unit_f64() * (self.h_x1 - self.h_n);
            let x = self.h_integral_inv(u);
            // x > 0.5 in exact arithmetic; the clamp guards rounding at both ends.
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.s || u >= self.h_integral(kf + 0.5) - self.h(kf) {
                return k;
            }
        }
    }

    /// h(x) = x^-theta.
    #[inline]
    fn h(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }

    /// H(x) = (x^(1-theta) - 1) / (1 - theta), or ln x when theta = 1, written so that it stays
    /// accurate as theta approaches 1.
    #[inline]
    fn h_integral(&self, x: f64) -> f64 {
        let log_x = x.ln();
        expm1_over_x((1.0 - self.theta) * log_x) * log_x
    }

    /// The inverse of H.
    #[inline]
    fn h_integral_inv(&self, x: f64) -> f64 {
        // t < -1 is only reachable through rounding; log1p would return NaN there.
        let t = (x * (1.0 - self.theta)).max(-1.0);
        (log1p_over_x(t) * x).exp()
    }
}

/// ln(1 + x) / x, continuous at 0.
#[inline]
fn log1p_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x - 1) / x, continuous at 0.
#[inline]
fn expm1_over_x(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn file_phases_have_the_pass_bound_of_sequential_ones() {
        for phase in [
            Phase::Read {
                region: 0,
                passes: MAX_PASSES + 1,
            },
            Phase::Mmap {
                region: 0,
                passes: MAX_PASSES + 1,
                write_percent: 0,
            },
            Phase::Write {
                region: 0,
                passes: MAX_PASSES + 1,
                fsync_bytes: None,
            },
        ] {
            assert_eq!(
                phase.check(1),
                Err(format!(
                    "passes must be at most {MAX_PASSES}, got {}",
                    MAX_PASSES + 1
                ))
            );
        }
        assert!(Phase::Read {
            region: 0,
            passes: MAX_PASSES
        }
        .check(1)
        .is_ok());
        assert!(
            Phase::Mmap {
                region: 1,
                passes: 1,
                write_percent: 0
            }
            .check(1)
            .is_err(),
            "region out of range"
        );
    }

    use super::*;
    use crate::rng::{stream, Stream};

    fn rng() -> SplitMix64 {
        stream(1234, Stream::Access, 0, 0)
    }

    fn random(regions: Vec<u32>, dist: Dist, count: Option<u64>, write_percent: u8) -> Phase {
        Phase::Random {
            regions,
            dist,
            count,
            duration_ns: None,
            write_percent,
            rw: false,
        }
    }

    fn pages(g: AccessGen) -> Vec<(u32, u64)> {
        g.map(|a| (a.region, a.page)).collect()
    }

    #[test]
    fn fill_writes_every_page_in_order() {
        let mut g = AccessGen::new(&Phase::Fill { region: 1 }, &[3, 4], rng());
        for p in 0..4 {
            assert_eq!(
                g.next(),
                Some(Access {
                    region: 1,
                    page: p,
                    write: true
                })
            );
        }
        assert_eq!(g.next(), None);
        assert_eq!(g.next(), None);
        assert_eq!(g.accesses_done(), 4);
        assert_eq!(
            AccessGen::new(&Phase::Fill { region: 0 }, &[0], rng()).next(),
            None
        );
    }

    #[test]
    fn sequential_visits_regions_in_list_order_each_pass() {
        let phase = Phase::Sequential {
            regions: vec![2, 0, 1],
            passes: 2,
            write_percent: 0,
            rw: false,
        };
        let g = AccessGen::new(&phase, &[2, 0, 3], rng());
        let one_pass = [(2, 0), (2, 1), (2, 2), (0, 0), (0, 1)];
        let expect: Vec<(u32, u64)> = one_pass.iter().chain(one_pass.iter()).copied().collect();
        let got: Vec<Access> = g.collect();
        assert_eq!(
            got.iter().map(|a| (a.region, a.page)).collect::<Vec<_>>(),
            expect
        );
        assert!(got.iter().all(|a| !a.write));
    }

    #[test]
    fn sequential_edge_cases() {
        let seq = |regions: Vec<u32>, passes| Phase::Sequential {
            regions,
            passes,
            write_percent: 100,
            rw: false,
        };
        assert_eq!(AccessGen::new(&seq(vec![0], 0), &[5], rng()).next(), None);
        assert_eq!(AccessGen::new(&seq(vec![], 3), &[5], rng()).next(), None);
        assert_eq!(
            AccessGen::new(&seq(vec![0, 0], 3), &[0], rng()).next(),
            None
        );
        let all: Vec<Access> = AccessGen::new(&seq(vec![0], 3), &[1], rng()).collect();
        assert_eq!(all.len(), 3);
        assert!(all.iter().all(|a| a.write && a.page == 0));
    }

    #[test]
    fn sequential_write_percent_draws_once_per_access() {
        let phase = Phase::Sequential {
            regions: vec![0],
            passes: 1,
            write_percent: 30,
            rw: false,
        };
        let got: Vec<bool> = AccessGen::new(&phase, &[1000], rng())
            .map(|a| a.write)
            .collect();
        let mut r = rng();
        let expect: Vec<bool> = (0..1000).map(|_| r.below(100) < 30).collect();
        assert_eq!(got, expect);
        let writes = got.iter().filter(|&&w| w).count();
        assert!((240..360).contains(&writes), "{writes}");
    }

    #[test]
    fn read_and_mmap_walk_the_file_in_order_without_writes() {
        for phase in [
            Phase::Read {
                region: 1,
                passes: 2,
            },
            Phase::Mmap {
                region: 1,
                passes: 2,
                write_percent: 0,
            },
        ] {
            let got: Vec<(u32, u64, bool)> = AccessGen::new(&phase, &[5, 3], rng())
                .map(|a| (a.region, a.page, a.write))
                .collect();
            assert_eq!(
                got,
                [
                    (1, 0, false),
                    (1, 1, false),
                    (1, 2, false),
                    (1, 0, false),
                    (1, 1, false),
                    (1, 2, false)
                ]
            );
            assert!(phase.check(1).is_err() && phase.check(2).is_ok());
        }
    }

    #[test]
    fn write_phases_write_every_page_and_mmap_stores_draw_like_sequential() {
        let phase = Phase::Write {
            region: 0,
            passes: 1,
            fsync_bytes: Some(8192),
        };
        let got: Vec<(u64, bool)> = AccessGen::new(&phase, &[3], rng())
            .map(|a| (a.page, a.write))
            .collect();
        assert_eq!(got, [(0, true), (1, true), (2, true)]);
        assert!(Phase::Write {
            region: 0,
            passes: 1,
            fsync_bytes: Some(0)
        }
        .check(1)
        .is_err());
        // A mapping with stores draws one below(100) per access, exactly as a sequential pass.
        let mmap = Phase::Mmap {
            region: 0,
            passes: 1,
            write_percent: 30,
        };
        let seq = Phase::Sequential {
            regions: vec![0],
            passes: 1,
            write_percent: 30,
            rw: false,
        };
        let a: Vec<bool> = AccessGen::new(&mmap, &[200], rng())
            .map(|a| a.write)
            .collect();
        let b: Vec<bool> = AccessGen::new(&seq, &[200], rng())
            .map(|a| a.write)
            .collect();
        assert_eq!(a, b);
        assert!(a.iter().any(|&w| w) && a.iter().any(|&w| !w));
        // Lowered configs without write_percent still load (loads only).
        let old: Phase =
            serde_json::from_str(r#"{"kind": "mmap", "region": 0, "passes": 1}"#).unwrap();
        assert_eq!(
            old,
            Phase::Mmap {
                region: 0,
                passes: 1,
                write_percent: 0
            }
        );
    }

    #[test]
    fn rw_changes_no_access_and_is_absent_from_old_configs() {
        let seq = |rw| Phase::Sequential {
            regions: vec![0],
            passes: 2,
            write_percent: 40,
            rw,
        };
        let plain: Vec<Access> = AccessGen::new(&seq(false), &[50], rng()).collect();
        assert_eq!(
            AccessGen::new(&seq(true), &[50], rng()).collect::<Vec<_>>(),
            plain
        );
        assert!(AccessGen::new(&seq(true), &[50], rng()).rw());
        assert!(!AccessGen::new(&seq(false), &[50], rng()).rw());
        let random: Phase = serde_json::from_str(
            r#"{"kind": "random", "regions": [0], "dist": {"kind": "uniform"}, "count": 3, "duration_ns": null, "write_percent": 100, "rw": true}"#,
        )
        .unwrap();
        assert!(AccessGen::new(&random, &[5], rng()).rw());
        // Written only when set, read as false when absent: older lowered configs are unchanged.
        let old: Phase = serde_json::from_str(
            r#"{"kind": "sequential", "regions": [0], "passes": 2, "write_percent": 40}"#,
        )
        .unwrap();
        assert_eq!(old, seq(false));
        assert!(!serde_json::to_string(&seq(false)).unwrap().contains("rw"));
        assert!(serde_json::to_string(&seq(true))
            .unwrap()
            .contains(r#""rw":true"#));
    }

    fn trace_phase(words: &[u32], regions: Vec<u32>, passes: u32, limit: Option<u64>) -> Phase {
        let mut b = crate::trace::MAGIC.to_vec();
        b.extend_from_slice(&(words.len() as u64).to_le_bytes());
        words
            .iter()
            .for_each(|w| b.extend_from_slice(&w.to_le_bytes()));
        Phase::Trace {
            regions,
            trace: TraceFile::from_bytes("t.rltrace".into(), "sha".into(), &b).unwrap(),
            passes,
            limit,
        }
    }

    #[test]
    fn trace_replays_words_over_the_region_concatenation() {
        // Regions [1, 0] with 3 and 5 pages: indices 0..3 are region 1, 3..8 region 0.
        let words = [0, 4 | WRITE_BIT, 2, 7, 3 | WRITE_BIT];
        let phase = trace_phase(&words, vec![1, 0], 2, None);
        assert!(phase.check(2).is_ok() && phase.check_sizes(&[5, 3]).is_ok());
        let got: Vec<(u32, u64, bool)> = AccessGen::new(&phase, &[5, 3], rng())
            .map(|a| (a.region, a.page, a.write))
            .collect();
        let once = [
            (1, 0, false),
            (0, 1, true),
            (1, 2, false),
            (0, 4, false),
            (0, 0, true),
        ];
        assert_eq!(got, [once, once].concat());
        // The rng is not used: another seed gives the same sequence.
        let other: Vec<Access> =
            AccessGen::new(&phase, &[5, 3], stream(9, Stream::Access, 3, 3)).collect();
        assert_eq!(other.len(), 10);
        assert!(other
            .iter()
            .zip(&got)
            .all(|(a, b)| (a.region, a.page, a.write) == *b));
        // limit cuts across passes; limit 0, passes 0 and an empty trace give nothing.
        let mut g = AccessGen::new(&trace_phase(&words, vec![1, 0], 3, Some(7)), &[5, 3], rng());
        assert_eq!((&mut g).count(), 7);
        assert_eq!(g.accesses_done(), 7);
        assert_eq!(
            AccessGen::new(&trace_phase(&words, vec![0], 1, Some(0)), &[8], rng()).next(),
            None
        );
        assert_eq!(
            AccessGen::new(&trace_phase(&words, vec![0], 0, None), &[8], rng()).next(),
            None
        );
        assert_eq!(
            AccessGen::new(&trace_phase(&[], vec![0], 1, None), &[8], rng()).next(),
            None
        );
    }

    #[test]
    fn trace_checks() {
        let phase = trace_phase(&[9], vec![0], 1, None);
        let e = phase.check_sizes(&[9]).unwrap_err();
        assert!(
            e.contains("page index 9 is outside the phase's regions (9 pages)"),
            "{e}"
        );
        assert!(phase.check_sizes(&[10]).is_ok());
        assert!(trace_phase(&[0], vec![], 1, None).check(1).is_err());
        assert!(trace_phase(&[0], vec![1], 1, None).check(1).is_err());
        assert!(trace_phase(&[0], vec![0], MAX_PASSES + 1, None)
            .check(1)
            .is_err());
        assert!(trace_phase(&[0], vec![0], 1, Some(MAX_ACCESSES + 1))
            .check(1)
            .is_err());
    }

    #[test]
    #[should_panic(expected = "outside the phase's regions")]
    fn trace_out_of_range_panics() {
        AccessGen::new(&trace_phase(&[5], vec![0], 1, None), &[5], rng());
    }

    #[test]
    fn region_kinds_are_checked_both_ways() {
        // Region 0 is anonymous, region 1 a file.
        let region = |r: u32| (["a", "f"][r as usize], r == 1);
        let read = Phase::Read {
            region: 0,
            passes: 1,
        };
        assert_eq!(
            read.check_region_kinds(region).unwrap_err(),
            "region 0 (a) is anonymous; this phase needs a file"
        );
        assert!(Phase::Read {
            region: 1,
            passes: 1
        }
        .check_region_kinds(region)
        .is_ok());
        assert_eq!(
            Phase::Fill { region: 1 }
                .check_region_kinds(region)
                .unwrap_err(),
            "region 1 (f) is a file; this phase needs an anonymous region"
        );
        assert!(Phase::Fill { region: 0 }.check_region_kinds(region).is_ok());
        // A phase that touches no memory names no region, and every region passes.
        assert_eq!(Phase::Exit.regions_used(), None);
        assert!(Phase::Exit.check_region_kinds(|_| unreachable!()).is_ok());
    }

    #[test]
    fn sleep_and_exit_yield_nothing() {
        assert_eq!(
            AccessGen::new(&Phase::Sleep { duration_ns: 5 }, &[1], rng()).next(),
            None
        );
        assert_eq!(AccessGen::new(&Phase::Exit, &[1], rng()).next(), None);
    }

    #[test]
    fn same_seed_same_sequence_other_seed_other_sequence() {
        for dist in [
            Dist::Uniform,
            Dist::HotCold {
                hot_percent: 10,
                hot_access_percent: 90,
            },
            Dist::Zipf { theta: 0.99 },
        ] {
            let phase = random(vec![0, 1], dist.clone(), Some(5000), 50);
            let a: Vec<Access> = AccessGen::new(&phase, &[100, 900], rng()).collect();
            let b: Vec<Access> = AccessGen::new(&phase, &[100, 900], rng()).collect();
            let c: Vec<Access> =
                AccessGen::new(&phase, &[100, 900], stream(1235, Stream::Access, 0, 0)).collect();
            assert_eq!(a, b, "{dist:?}");
            assert_ne!(a, c, "{dist:?}");
        }
    }

    #[test]
    fn random_count_is_honoured() {
        let phase = random(vec![0], Dist::Uniform, Some(777), 0);
        let mut g = AccessGen::new(&phase, &[10], rng());
        let n = (&mut g).count();
        assert_eq!(n, 777);
        assert_eq!(g.accesses_done(), 777);
        assert_eq!(g.next(), None);
        assert_eq!(
            AccessGen::new(&random(vec![0], Dist::Uniform, Some(0), 0), &[10], rng()).next(),
            None
        );
        assert_eq!(
            AccessGen::new(&random(vec![0], Dist::Uniform, Some(5), 0), &[0], rng()).next(),
            None
        );
    }

    #[test]
    fn random_without_count_keeps_going() {
        let phase = random(vec![0], Dist::Uniform, None, 0);
        let g = AccessGen::new(&phase, &[10], rng());
        assert_eq!(g.take(100_000).count(), 100_000);
    }

    #[test]
    fn write_decision_does_not_disturb_page_choice_when_fixed() {
        // write_percent 0 and 100 draw nothing for the write flag, so the pages coincide.
        let a = pages(AccessGen::new(
            &random(vec![0], Dist::Uniform, Some(1000), 0),
            &[50],
            rng(),
        ));
        let b = pages(AccessGen::new(
            &random(vec![0], Dist::Uniform, Some(1000), 100),
            &[50],
            rng(),
        ));
        assert_eq!(a, b);
        let w: Vec<bool> = AccessGen::new(
            &random(vec![0], Dist::Uniform, Some(1000), 100),
            &[50],
            rng(),
        )
        .map(|a| a.write)
        .collect();
        assert!(w.iter().all(|&w| w));
    }

    #[test]
    fn uniform_order_of_draws() {
        // One below(total) for the page, then one below(100) for the write flag.
        let got: Vec<Access> = AccessGen::new(
            &random(vec![1, 0], Dist::Uniform, Some(100), 50),
            &[7, 5],
            rng(),
        )
        .collect();
        let mut r = rng();
        for a in got {
            let i = r.below(12);
            let expect = if i < 5 { (1, i) } else { (0, i - 5) };
            assert_eq!((a.region, a.page), expect);
            assert_eq!(a.write, r.below(100) < 50);
        }
    }

    /// The vectors quoted in docs/workload.md. Zipf goes through libm's ln/exp, so its vector
    /// could in principle differ in the last place on another platform.
    #[test]
    fn documented_vectors() {
        let run = |dist: Dist, write_percent| -> Vec<(u32, u64, bool)> {
            let phase = random(vec![1, 0], dist, Some(6), write_percent);
            AccessGen::new(&phase, &[1000, 24], stream(1, Stream::Access, 0, 0))
                .map(|a| (a.region, a.page, a.write))
                .collect()
        };
        assert_eq!(
            run(Dist::Uniform, 50),
            [
                (0, 980, true),
                (0, 876, false),
                (0, 173, false),
                (0, 445, false),
                (0, 798, false),
                (0, 336, true)
            ]
        );
        assert_eq!(
            run(
                Dist::HotCold {
                    hot_percent: 10,
                    hot_access_percent: 90
                },
                0
            ),
            [
                (0, 490, false),
                (0, 76, false),
                (0, 42, false),
                (0, 77, false),
                (0, 61, false),
                (1, 23, false)
            ]
        );
        assert_eq!(
            run(Dist::Zipf { theta: 0.99 }, 0),
            [
                (1, 0, false),
                (0, 13, false),
                (1, 0, false),
                (1, 0, false),
                (0, 226, false),
                (1, 8, false)
            ]
        );
    }

    /// Pearson's chi-square of observed counts against equal expectations.
    fn chi_square(counts: &[u64]) -> f64 {
        let total: u64 = counts.iter().sum();
        let e = total as f64 / counts.len() as f64;
        counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum()
    }

    #[test]
    fn uniform_covers_all_regions_evenly() {
        // Uneven region sizes, an empty region, and more regions than the linear scan handles.
        for sizes in [
            vec![100u64, 37, 0, 263],
            (1..=12).map(|i| i * 7).collect::<Vec<u64>>(),
        ] {
            let regions: Vec<u32> = (0..sizes.len() as u32).collect();
            let total: u64 = sizes.iter().sum();
            let offsets: Vec<u64> = sizes
                .iter()
                .scan(0, |acc, &n| {
                    let o = *acc;
                    *acc += n;
                    Some(o)
                })
                .collect();
            let n = total * 1000;
            let mut counts = vec![0u64; total as usize];
            for a in AccessGen::new(&random(regions, Dist::Uniform, Some(n), 0), &sizes, rng()) {
                assert!(a.page < sizes[a.region as usize]);
                counts[(offsets[a.region as usize] + a.page) as usize] += 1;
            }
            // dof = total - 1; its standard deviation is sqrt(2 dof). Deterministic, so the
            // bound cannot flake; 6 sigma either side still rejects any biased mapping.
            let dof = (total - 1) as f64;
            let chi = chi_square(&counts);
            let sd = (2.0 * dof).sqrt();
            assert!(
                (dof - 6.0 * sd..dof + 6.0 * sd).contains(&chi),
                "chi2 {chi} dof {dof}"
            );
        }
    }

    #[test]
    fn hotcold_share_within_tolerance() {
        let sizes = [333u64, 667];
        let phase = random(
            vec![0, 1],
            Dist::HotCold {
                hot_percent: 20,
                hot_access_percent: 80,
            },
            Some(200_000),
            0,
        );
        let hot = 200; // ceil(1000 * 20 / 100)
        let mut hot_hits = 0u64;
        let mut counts = vec![0u64; 1000];
        for a in AccessGen::new(&phase, &sizes, rng()) {
            let i = if a.region == 0 { a.page } else { 333 + a.page };
            counts[i as usize] += 1;
            hot_hits += u64::from(i < hot);
        }
        let share = hot_hits as f64 / 200_000.0;
        assert!((share - 0.8).abs() < 0.005, "{share}");
        // Uniform within each side.
        let hot_chi = chi_square(&counts[..200]);
        let cold_chi = chi_square(&counts[200..]);
        assert!(hot_chi < 199.0 + 6.0 * (2.0f64 * 199.0).sqrt(), "{hot_chi}");
        assert!(
            cold_chi < 799.0 + 6.0 * (2.0f64 * 799.0).sqrt(),
            "{cold_chi}"
        );
    }

    #[test]
    fn hotcold_hot_set_rounds_up_and_empty_sides_fall_back() {
        let run = |hot_percent, hot_access_percent, total: u64| -> Vec<u64> {
            let phase = random(
                vec![0],
                Dist::HotCold {
                    hot_percent,
                    hot_access_percent,
                },
                Some(5000),
                0,
            );
            AccessGen::new(&phase, &[total], rng())
                .map(|a| a.page)
                .collect()
        };
        // 10 % of 15 pages = 1.5, rounded up to 2 hot pages.
        let p = run(10, 100, 15);
        assert!(p.iter().all(|&i| i < 2) && p.contains(&0) && p.contains(&1));
        // No hot pages: every access is cold.
        assert!(run(0, 100, 15).iter().any(|&i| i > 10));
        // Everything hot: a cold pick falls back to the hot set.
        let p = run(100, 0, 15);
        assert!(p.iter().all(|&i| i < 15) && p.contains(&14));
    }

    fn zipf_rank1_share(theta: f64) -> (f64, f64) {
        let n = 1000u64;
        let samples = 400_000u64;
        let phase = random(vec![0], Dist::Zipf { theta }, Some(samples), 0);
        let mut counts = vec![0u64; n as usize];
        for a in AccessGen::new(&phase, &[n], rng()) {
            counts[a.page as usize] += 1;
        }
        let norm: f64 = (1..=n).map(|k| (k as f64).powf(-theta)).sum();
        (counts[0] as f64 / samples as f64, 1.0 / norm)
    }

    #[test]
    fn zipf_rank1_frequency_matches_theory() {
        for theta in [1.0, 0.8] {
            let (got, expect) = zipf_rank1_share(theta);
            // sd = sqrt(p (1 - p) / n) is about 0.0005 here.
            assert!(
                (got - expect).abs() < 0.003,
                "theta {theta}: {got} vs {expect}"
            );
        }
    }

    #[test]
    fn zipf_whole_distribution_matches_theory() {
        // Pool the tail into bins so every bin expects plenty of samples.
        let n = 1000u64;
        let theta = 0.99;
        let samples = 300_000u64;
        let phase = random(vec![0, 1], Dist::Zipf { theta }, Some(samples), 0);
        let mut counts = vec![0u64; n as usize];
        for a in AccessGen::new(&phase, &[400, 600], rng()) {
            counts[(if a.region == 0 { a.page } else { 400 + a.page }) as usize] += 1;
        }
        let w: Vec<f64> = (1..=n).map(|k| (k as f64).powf(-theta)).collect();
        let norm: f64 = w.iter().sum();
        let bins: [(usize, usize); 8] = [
            (0, 1),
            (1, 2),
            (2, 4),
            (4, 10),
            (10, 30),
            (30, 100),
            (100, 400),
            (400, 1000),
        ];
        let mut chi = 0.0;
        for (lo, hi) in bins {
            let e = w[lo..hi].iter().sum::<f64>() / norm * samples as f64;
            let o = counts[lo..hi].iter().sum::<u64>() as f64;
            chi += (o - e).powi(2) / e;
        }
        // 7 dof: 99.9th percentile is 24.3.
        assert!(chi < 24.3, "chi2 {chi}");
    }

    #[test]
    fn zipf_small_and_flat_cases() {
        let one = random(vec![0], Dist::Zipf { theta: 1.0 }, Some(100), 0);
        assert!(AccessGen::new(&one, &[1], rng()).all(|a| a.page == 0));
        // theta = 0 is uniform.
        let flat = random(vec![0], Dist::Zipf { theta: 0.0 }, Some(100_000), 0);
        let mut counts = vec![0u64; 10];
        for a in AccessGen::new(&flat, &[10], rng()) {
            counts[a.page as usize] += 1;
        }
        assert!(chi_square(&counts) < 9.0 + 6.0 * 18f64.sqrt(), "{counts:?}");
        // Steep theta stays in range.
        let steep = random(vec![0], Dist::Zipf { theta: 3.0 }, Some(10_000), 0);
        assert!(AccessGen::new(&steep, &[5], rng()).all(|a| a.page < 5));
    }

    #[test]
    #[should_panic(expected = "theta")]
    fn zipf_rejects_negative_theta() {
        AccessGen::new(
            &random(vec![0], Dist::Zipf { theta: -1.0 }, None, 0),
            &[10],
            rng(),
        );
    }

    #[test]
    #[should_panic(expected = "region 3")]
    fn unknown_region_panics() {
        AccessGen::new(&Phase::Fill { region: 3 }, &[10], rng());
    }

    /// `cargo test -p reclaimlab-workload --release -- --ignored --nocapture speed`
    #[test]
    #[ignore]
    fn speed() {
        use std::hint::black_box;
        use std::time::Instant;
        let cases: [(&str, Phase, Vec<u64>); 9] = [
            ("fill", Phase::Fill { region: 0 }, vec![u64::MAX]),
            (
                "sequential wp50",
                Phase::Sequential {
                    regions: vec![0, 1],
                    passes: u32::MAX,
                    write_percent: 50,
                    rw: false,
                },
                vec![1 << 20, 1 << 20],
            ),
            (
                "uniform 1 region",
                random(vec![0], Dist::Uniform, None, 0),
                vec![1 << 20],
            ),
            (
                "uniform 1 region wp50",
                random(vec![0], Dist::Uniform, None, 50),
                vec![1 << 20],
            ),
            (
                "uniform 4 regions",
                random(vec![0, 1, 2, 3], Dist::Uniform, None, 0),
                vec![1 << 18; 4],
            ),
            (
                "uniform 4 regions wp50",
                random(vec![0, 1, 2, 3], Dist::Uniform, None, 50),
                vec![1 << 18; 4],
            ),
            (
                "uniform 20 regions",
                random((0..20).collect(), Dist::Uniform, None, 0),
                vec![1 << 16; 20],
            ),
            (
                "hotcold",
                random(
                    vec![0],
                    Dist::HotCold {
                        hot_percent: 10,
                        hot_access_percent: 90,
                    },
                    None,
                    0,
                ),
                vec![1 << 20],
            ),
            (
                "zipf 0.99",
                random(vec![0], Dist::Zipf { theta: 0.99 }, None, 0),
                vec![1 << 20],
            ),
        ];
        for (name, phase, sizes) in cases {
            let mut g = AccessGen::new(&phase, &sizes, rng());
            let n = 20_000_000u64;
            let t = Instant::now();
            let mut acc = 0u64;
            for _ in 0..n {
                let a = g.next().unwrap();
                acc = acc.wrapping_add(a.page ^ u64::from(a.write));
            }
            black_box(acc);
            println!(
                "{name}: {:.2} ns/access",
                t.elapsed().as_nanos() as f64 / n as f64
            );
        }
    }
}
