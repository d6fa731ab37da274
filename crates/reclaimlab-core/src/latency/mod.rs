//! Latency distributions per process and phase (docs/model/latency.md): how long each fault,
//! each allocation stall and each throttling sleep took, in simulated time, recorded into
//! [`hist::Histogram`]s. What is measured from where to where is declared once, in [`KINDS`].

pub mod hist;

use std::collections::BTreeMap;

use serde::Serialize;

pub use hist::{Histogram, Summary};

/// What a latency is of. The order is the export order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Fault,
    FaultMinor,
    FaultMajor,
    FaultZswap,
    IoWait,
    AllocStall,
    HighReclaim,
    Throttle,
}

/// (kind, export name, what it measures).
pub const KINDS: [(Kind, &str, &str); 8] = [
    (Kind::Fault, "fault", "every page fault, from handle_mm_fault's entry to its return (minor and major)"),
    (Kind::FaultMinor, "fault_minor", "faults that counted no pgmajfault (zero-fill, swap-cache hit, page-cache hit)"),
    (Kind::FaultMajor, "fault_major", "faults that counted pgmajfault (swap-in from zswap, zram or disk; file read)"),
    (Kind::FaultZswap, "fault_zswap", "major faults whose page came from zswap (zswap_load)"),
    (Kind::IoWait, "io_wait", "per fault that waited for a device read: the time waited (swap_read_folio to folio unlock)"),
    (
        Kind::AllocStall,
        "alloc_stall",
        "per allocation or charge that entered reclaim: from the first try_to_free_pages / try_to_free_mem_cgroup_pages to the allocation's return",
    ),
    (Kind::HighReclaim, "high_reclaim", "per mem_cgroup_handle_over_high that ran: its reclaim and penalty together"),
    (Kind::Throttle, "throttle", "each throttling sleep: the memory.high penalty, balance_dirty_pages pauses, reclaim_throttle"),
];

const N: usize = KINDS.len();

/// One histogram per kind.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    h: [Histogram; N],
}

impl Latencies {
    #[inline]
    pub fn record(&mut self, kind: Kind, ns: u64) {
        self.h[kind as usize].record(ns);
    }

    pub fn get(&self, kind: Kind) -> &Histogram {
        &self.h[kind as usize]
    }

    pub fn merge(&mut self, other: &Latencies) {
        for (a, b) in self.h.iter_mut().zip(&other.h) {
            a.merge(b);
        }
    }

    /// The non-empty kinds, by export name.
    pub fn summaries(&self) -> BTreeMap<&'static str, Summary> {
        KINDS
            .iter()
            .filter(|(k, ..)| !self.get(*k).is_empty())
            .map(|(k, name, _)| (*name, self.get(*k).summary()))
            .collect()
    }
}

/// Latencies of one phase of one process, as it ran (parallel to the phase records).
#[derive(Clone, Debug, Serialize)]
pub struct PhaseLatency {
    pub process: String,
    pub phase: String,
    pub kinds: BTreeMap<&'static str, Summary>,
}

/// Latencies of one process over all its phases.
#[derive(Clone, Debug, Serialize)]
pub struct ProcessLatency {
    pub process: String,
    pub kinds: BTreeMap<&'static str, Summary>,
}

/// The per-process accumulators the kernel paths record into, and the finished phases.
#[derive(Clone, Debug, Default)]
pub struct LatencyLog {
    /// The running phase of each process.
    pub(crate) current: Vec<Latencies>,
    /// Every phase of each process, merged.
    pub(crate) total: Vec<Latencies>,
    pub(crate) phases: Vec<PhaseLatency>,
}

impl LatencyLog {
    pub fn new(processes: usize) -> LatencyLog {
        LatencyLog {
            current: vec![Latencies::default(); processes],
            total: vec![Latencies::default(); processes],
            phases: Vec::new(),
        }
    }

    /// Every process's latencies, finished phases and running ones, merged.
    pub fn all(&self) -> Latencies {
        let mut all = Latencies::default();
        for l in self.total.iter().chain(&self.current) {
            all.merge(l);
        }
        all
    }

    /// Process `p`'s phase ended: its latencies go to the phase list and the process total.
    pub(crate) fn end_phase(&mut self, p: usize, process: &str, phase: &str) {
        let cur = std::mem::take(&mut self.current[p]);
        self.phases.push(PhaseLatency {
            process: process.to_string(),
            phase: phase.to_string(),
            kinds: cur.summaries(),
        });
        self.total[p].merge(&cur);
    }
}
