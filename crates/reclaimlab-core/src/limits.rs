//! The largest values the model accepts, declared once, and the check of a lowered config
//! against them before anything is built.
//!
//! Why: every value a scenario gives flows into the u64 nanosecond clock, a page count or an
//! index type. The bounds below are far above any real use and small enough that the arithmetic
//! on them cannot overflow: times are at most [`TIME_HORIZON_NS`] (the engine stops a run there)
//! plus one step, and every step added to a time is at most [`MAX_DURATION_NS`] or is clamped
//! by [`crate::sim::later`]. Index types: memcgs and regions are u16 in the page record, pages
//! and swap slots u32 (`u32::MAX` = none), processes u32 in events.
//!
//! `_core.limits()` lists them for docs/scenario.md and the Python loader; each message names
//! the lowered key (mapped back to the scenario key by the loader), the unit and the bound.

use crate::config::SimConfig;
use crate::costs::Costs;
use crate::error::{ConfigError, Result};
pub use reclaimlab_workload::pattern::{MAX_ACCESSES, MAX_DURATION_NS, MAX_PASSES};

/// A CPU cost (`[costs]`, incl. `process_quantum_ns`): 10^12 ns (1000 s per operation).
pub const MAX_COST_NS: u64 = 1_000_000_000_000;
/// A device's `read_latency`/`write_latency`: 10^12 ns.
pub const MAX_LATENCY_NS: u64 = 1_000_000_000_000;
/// `max_time`, and the virtual time at which every run stops (phases still running end with
/// outcome "time_limit"): 10^6 s, the same as the longest phase.
pub const TIME_HORIZON_NS: u64 = MAX_DURATION_NS;
/// `cgroups.memory_stat_interval` (the memory.stat reader's interval): 10^6 s.
pub const MAX_STATS_READ_NS: u64 = MAX_DURATION_NS;
/// `zswap.writeback_pause_ms` (Funaki's patch 6): 10^9 ms = 10^6 s.
pub const MAX_PAUSE_MS: u64 = 1_000_000_000;
/// Cgroups in all, root included: the page record's memcg index is a u16.
pub const MAX_CGROUPS: usize = u16::MAX as usize;
/// Regions over all processes: region indices are u16 (mm/region.rs).
pub const MAX_REGIONS: usize = u16::MAX as usize;
/// Processes: one event and one per-process state each; the scheduler scans them per event.
pub const MAX_PROCESSES: usize = u16::MAX as usize;
/// Swap devices: the kernel's MAX_SWAPFILES is 32 (minus the special entry types).
pub const MAX_SWAP_DEVICES: usize = 32;
/// Simulated pages over all regions: page indices are u32, `u32::MAX` means none.
pub const MAX_PAGES: u64 = u32::MAX as u64 - 1;
/// Swap slots over all devices: slot ids are u32, `u32::MAX` means none.
pub const MAX_SWAP_SLOTS: u64 = u32::MAX as u64 - 1;
/// Distinct page contents per region: each is generated and compressed by every codec in use
/// when the simulation is built.
pub const MAX_VARIANTS: u32 = 65_536;
/// CPUs of the machine.
pub const MAX_CPUS: u32 = 1 << 20;

/// One row of `_core.limits()`: the lowered key it bounds, the bound, its unit, why.
pub struct Limit {
    pub key: &'static str,
    pub max: u64,
    pub unit: &'static str,
    pub why: &'static str,
}

/// Every bound, for the docs and the Python loader.
pub const LIMITS: &[Limit] = &[
    Limit {
        key: "costs.*",
        max: MAX_COST_NS,
        unit: "ns",
        why: "a CPU cost (1000 s)",
    },
    Limit {
        key: "machine.swap[].device.read_latency_ns",
        max: MAX_LATENCY_NS,
        unit: "ns",
        why: "a device latency (1000 s)",
    },
    Limit {
        key: "machine.swap[].device.write_latency_ns",
        max: MAX_LATENCY_NS,
        unit: "ns",
        why: "a device latency (1000 s)",
    },
    Limit {
        key: "max_time_ns",
        max: TIME_HORIZON_NS,
        unit: "ns",
        why: "every run stops at 10^6 s of virtual time",
    },
    Limit {
        key: "processes[].phases[].phase.duration_ns",
        max: MAX_DURATION_NS,
        unit: "ns",
        why: "a phase (10^6 s)",
    },
    Limit {
        key: "processes[].phases[].phase.count",
        max: MAX_ACCESSES,
        unit: "accesses",
        why: "a random phase",
    },
    Limit {
        key: "processes[].phases[].phase.passes",
        max: MAX_PASSES as u64,
        unit: "passes",
        why: "a sequential phase",
    },
    Limit {
        key: "cgroups.stats_flush.read_ns",
        max: MAX_STATS_READ_NS,
        unit: "ns",
        why: "a memory.stat read interval (10^6 s)",
    },
    Limit {
        key: "kernel.switches.zswap.writeback_pause_ms",
        max: MAX_PAUSE_MS,
        unit: "ms",
        why: "a pause (10^6 s)",
    },
    Limit {
        key: "cgroups.groups",
        max: MAX_CGROUPS as u64,
        unit: "cgroups",
        why: "the page record's memcg index is 16 bits",
    },
    Limit {
        key: "processes[].regions",
        max: MAX_REGIONS as u64,
        unit: "regions in all",
        why: "region indices are 16 bits",
    },
    Limit {
        key: "processes",
        max: MAX_PROCESSES as u64,
        unit: "processes",
        why: "the scheduler scans every process per event",
    },
    Limit {
        key: "machine.swap",
        max: MAX_SWAP_DEVICES as u64,
        unit: "devices",
        why: "the kernel's MAX_SWAPFILES",
    },
    Limit {
        key: "processes[].regions[].pages",
        max: MAX_PAGES,
        unit: "pages in all",
        why: "page indices are 32 bits",
    },
    Limit {
        key: "machine.swap[].size_bytes",
        max: MAX_SWAP_SLOTS,
        unit: "slots (pages) in all",
        why: "swap slot ids are 32 bits",
    },
    Limit {
        key: "processes[].regions[].variants",
        max: MAX_VARIANTS as u64,
        unit: "variants",
        why: "each is compressed when the run is built",
    },
    Limit {
        key: "machine.cpus",
        max: MAX_CPUS as u64,
        unit: "CPUs",
        why: "far above any machine",
    },
];

fn at_most(path: impl Into<String>, v: u64, max: u64, unit: &str) -> Result<()> {
    if v > max {
        return Err(ConfigError::invalid(
            path,
            format!("{v} {unit} is too large (at most {max} {unit})"),
        ));
    }
    Ok(())
}

/// Check every bound of `cfg` (before any memory is allocated for it).
pub fn check(cfg: &SimConfig) -> Result<()> {
    if cfg.machine.cpus == 0 {
        return Err(ConfigError::invalid("machine.cpus", "must be at least 1"));
    }
    at_most(
        "machine.cpus",
        cfg.machine.cpus as u64,
        MAX_CPUS as u64,
        "CPUs",
    )?;
    for (k, v) in &cfg.costs {
        at_most(format!("costs.{k}"), *v, MAX_COST_NS, "ns")?;
    }
    if let Some(t) = cfg.max_time_ns {
        at_most("max_time_ns", t, TIME_HORIZON_NS, "ns")?;
    }
    if let Some(f) = &cfg.cgroups.stats_flush {
        if let Some(r) = f.read_ns {
            at_most("cgroups.stats_flush.read_ns", r, MAX_STATS_READ_NS, "ns")?;
        }
        if let Some(p) = f.dwork_phase_ns {
            // The flusher's first run comes within one of its periods of any instant.
            let max = crate::mm::memcg_stats::FLUSHER_PERIOD_NS - 1;
            at_most("cgroups.stats_flush.dwork_phase_ns", p, max, "ns")?;
        }
    }
    if let Some(v) = cfg
        .kernel
        .switches
        .get("zswap.writeback_pause_ms")
        .and_then(|v| v.as_u64())
    {
        at_most(
            "kernel.switches.zswap.writeback_pause_ms",
            v,
            MAX_PAUSE_MS,
            "ms",
        )?;
    }
    if cfg.cgroups.groups.len() > MAX_CGROUPS {
        return Err(ConfigError::invalid(
            "cgroups.groups",
            format!(
                "{} cgroups (root included) are too many (at most {MAX_CGROUPS})",
                cfg.cgroups.groups.len()
            ),
        ));
    }
    if cfg.processes.len() > MAX_PROCESSES {
        return Err(ConfigError::invalid(
            "processes",
            format!(
                "{} processes are too many (at most {MAX_PROCESSES})",
                cfg.processes.len()
            ),
        ));
    }
    if cfg.machine.swap.len() > MAX_SWAP_DEVICES {
        return Err(ConfigError::invalid(
            "machine.swap",
            format!(
                "{} swap devices are too many (at most {MAX_SWAP_DEVICES})",
                cfg.machine.swap.len()
            ),
        ));
    }
    let (mut regions, mut pages) = (0usize, 0u64);
    for (pi, p) in cfg.processes.iter().enumerate() {
        if p.cgroup as usize >= cfg.cgroups.groups.len() {
            return Err(ConfigError::invalid(
                format!("processes[{pi}].cgroup"),
                format!(
                    "cgroup index {} out of range ({} cgroups)",
                    p.cgroup,
                    cfg.cgroups.groups.len()
                ),
            ));
        }
        for (ri, r) in p.regions.iter().enumerate() {
            regions += 1;
            if regions > MAX_REGIONS {
                return Err(ConfigError::invalid(
                    format!("processes[{pi}].regions[{ri}]"),
                    format!("too many regions (at most {MAX_REGIONS} over all processes)"),
                ));
            }
            pages = pages.saturating_add(r.pages);
            if pages > MAX_PAGES {
                return Err(ConfigError::invalid(
                    format!("processes[{pi}].regions[{ri}].pages"),
                    format!("too many simulated pages: {pages} pages in all up to here (at most {MAX_PAGES} 4 KiB pages, 16 TiB, over all regions)"),
                ));
            }
            at_most(
                format!("processes[{pi}].regions[{ri}].variants"),
                r.variants as u64,
                MAX_VARIANTS as u64,
                "variants",
            )?;
        }
    }
    let mut slots = 0u64;
    for (k, s) in cfg.machine.swap.iter().enumerate() {
        let d = &s.device;
        at_most(
            format!("machine.swap[{k}].device.read_latency_ns"),
            d.read_latency_ns,
            MAX_LATENCY_NS,
            "ns",
        )?;
        at_most(
            format!("machine.swap[{k}].device.write_latency_ns"),
            d.write_latency_ns,
            MAX_LATENCY_NS,
            "ns",
        )?;
        for (name, v) in [
            ("read_bytes_per_s", d.read_bytes_per_s),
            ("write_bytes_per_s", d.write_bytes_per_s),
        ] {
            if v == 0 {
                return Err(ConfigError::invalid(
                    format!("machine.swap[{k}].device.{name}"),
                    "must be at least 1 byte/s",
                ));
            }
        }
        if d.iops == Some(0) {
            return Err(ConfigError::invalid(
                format!("machine.swap[{k}].device.iops"),
                "must be at least 1 request/s",
            ));
        }
        slots = slots.saturating_add(s.size_bytes / crate::mm::page::PAGE_SIZE);
        if slots > MAX_SWAP_SLOTS {
            return Err(ConfigError::invalid(
                format!("machine.swap[{k}].size_bytes"),
                format!("too much swap: {slots} slots in all up to here (at most {MAX_SWAP_SLOTS} 4 KiB slots, 16 TiB, over all devices)"),
            ));
        }
    }
    // The cost names and process_quantum_ns > 0 are checked where the costs are built.
    Costs::with_overrides(&cfg.costs)?;
    Ok(())
}

/// What a run will ask for, computed from the lowered config before anything is built, so that
/// the caller can refuse a run that cannot fit in memory (Rust aborts on a failed allocation)
/// and warn about a long one.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Estimate {
    /// Simulated virtual pages (one page record each).
    pub pages: u64,
    /// Swap slots over all devices.
    pub swap_slots: u64,
    /// Bytes the core allocates that grow with the scenario: the page arena, the slot-to-page
    /// map and swap cluster table, zram's slot tables, per-region page-table bitmaps, and
    /// zsmalloc's handle tables at their largest (one handle per page that can be compressed).
    pub bytes: u64,
    /// Accesses the phases make (random phases given a duration: the most that fit, one per
    /// `access_ns`; sleeps none).
    pub accesses: u64,
}

/// The estimate of `cfg` (call [`check`] first: it assumes the bounds hold).
pub fn estimate(cfg: &SimConfig) -> Estimate {
    use crate::mm::page::{Link, Page};
    use crate::zram::ZramSlot;
    let mut e = Estimate::default();
    let access_ns = Costs::with_overrides(&cfg.costs)
        .map_or(Costs::default().access_ns, |c| c.access_ns)
        .max(1);
    for p in &cfg.processes {
        let region_pages: Vec<u64> = p.regions.iter().map(|r| r.pages).collect();
        e.pages = e.pages.saturating_add(region_pages.iter().sum());
        let pages_of = |rs: &[u32]| {
            rs.iter()
                .map(|&r| region_pages.get(r as usize).copied().unwrap_or(0))
                .sum::<u64>()
        };
        for np in &p.phases {
            let n = match &np.phase {
                reclaimlab_workload::Phase::Fill { region } => pages_of(&[*region]),
                reclaimlab_workload::Phase::Sequential {
                    regions, passes, ..
                } => pages_of(regions).saturating_mul(*passes as u64),
                reclaimlab_workload::Phase::Read { region, passes }
                | reclaimlab_workload::Phase::Mmap { region, passes, .. }
                | reclaimlab_workload::Phase::Write { region, passes, .. } => {
                    pages_of(&[*region]).saturating_mul(*passes as u64)
                }
                reclaimlab_workload::Phase::CreateFiles { regions, .. } => pages_of(regions),
                reclaimlab_workload::Phase::Random { count: Some(c), .. } => *c,
                reclaimlab_workload::Phase::Trace {
                    trace,
                    passes,
                    limit,
                    ..
                } => limit
                    .unwrap_or(u64::MAX)
                    .min(trace.len().saturating_mul(u64::from(*passes))),
                reclaimlab_workload::Phase::Random {
                    duration_ns: Some(d),
                    ..
                } => d / access_ns,
                _ => 0,
            };
            e.accesses = e.accesses.saturating_add(n);
        }
    }
    let mut zram_slots = 0u64;
    for s in &cfg.machine.swap {
        let slots = s.size_bytes / crate::mm::page::PAGE_SIZE;
        e.swap_slots = e.swap_slots.saturating_add(slots);
        if s.kind == crate::config::SwapKind::Zram {
            zram_slots = zram_slots.saturating_add(slots);
        }
    }
    // zsmalloc's handle table: a u32 zspage index and a u16 slot per live handle
    // (zpool/zsmalloc.rs), rounded up.
    const HANDLE_BYTES: u64 = 8;
    // A swap cluster (count, state, 512-bit used map: under 80 bytes) per SWAPFILE_CLUSTER
    // (512) slots: at most one byte per slot.
    const CLUSTER_BYTES_PER_SLOT: u64 = 1;
    // One page-table flag per PTRS_PER_PTE (512) pages: at most one byte per page.
    const PAGE_TABLE_BYTES_PER_PAGE: u64 = 1;
    // The record and, beside it, its list links (mm/page.rs Pages).
    let per_page = std::mem::size_of::<Page>() as u64
        + std::mem::size_of::<Link>() as u64
        + HANDLE_BYTES
        + PAGE_TABLE_BYTES_PER_PAGE;
    let per_slot = std::mem::size_of::<u32>() as u64 + CLUSTER_BYTES_PER_SLOT;
    e.bytes = e
        .pages
        .saturating_mul(per_page)
        .saturating_add(e.swap_slots.saturating_mul(per_slot))
        .saturating_add(
            zram_slots.saturating_mul(std::mem::size_of::<ZramSlot>() as u64 + HANDLE_BYTES),
        );
    e
}

// The arithmetic the bounds make safe, proved when the crate compiles: the horizon plus two of
// the largest steps of any kind stays below the clock's ceiling, and the sum of two clamped
// times (each at most the ceiling) fits in u64.
const LARGEST_STEP_NS: u64 = {
    let mut m = MAX_DURATION_NS;
    if MAX_COST_NS > m {
        m = MAX_COST_NS;
    }
    if MAX_LATENCY_NS > m {
        m = MAX_LATENCY_NS;
    }
    if MAX_PAUSE_MS * 1_000_000 > m {
        m = MAX_PAUSE_MS * 1_000_000;
    }
    m
};
const _: () = assert!(TIME_HORIZON_NS + 2 * LARGEST_STEP_NS < crate::sim::TIME_CEILING_NS);
const _: () = assert!(crate::sim::TIME_CEILING_NS
    .checked_add(crate::sim::TIME_CEILING_NS)
    .is_some());
