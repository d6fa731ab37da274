//! Tracepoint counts: the model's own count of the events the kernel's tracepoints report
//! (include/trace/events/vmscan.h, 6.12), counted in the model's function where the kernel
//! fires the tracepoint, and exported only when the run asks for them (`trace` in the lowered
//! config; `reclaimlab run/validate --trace`), so a run without tracing has the same counters as
//! before.
//!
//! The keys are what the VM lab's guest aggregates with hist triggers (docs/vmlab.md): the
//! event's name, then its hist key (a reclaim priority, a shrinker's scan function), then
//! `calls` (hitcount) or the summed field under the tracepoint's own field name:
//!
//! * `trace.mm_vmscan_lru_shrink_inactive.priority.<p>.{calls,nr_scanned,nr_reclaimed}`
//!   (shrink_inactive_list, and evict_folios under MGLRU);
//! * `trace.mm_vmscan_lru_shrink_active.priority.<p>.{calls,nr_taken,nr_deactivated}`;
//! * `trace.mm_shrink_slab_start.<scan function>.priority.<p>.{calls,total_scan}` and
//!   `trace.mm_shrink_slab_end.<scan function>.{calls,retval}` (do_shrink_slab; retval is the
//!   objects freed). The model's shrinkers are zswap's (`zswap_shrinker_scan`) and zsmalloc's
//!   compaction (`zs_shrinker_scan`); the kernel's others (dentries, inodes ...) are not modelled;
//! * [`ReclaimTrace`]: kswapd runs, direct and memcg reclaim invocations, reclaim_throttle.
//! * with file pages, simulator only (the labs' tracers do not enable these events; seed 001's
//!   ftrace rows, exported by `Mm::export`): `trace.mm_vmscan_write_folio.{direct,kswapd}_{file,anon}`
//!   (pageout by reclaimer and type), `trace.balance_dirty_pages` (writer throttles) and
//!   `trace.mm_vmscan_throttled` (every reclaim_throttle, all reasons).
//!
//! Not a tracepoint: 6.12 has none in mem_cgroup_handle_over_high, whose penalty sleep is a
//! schedule_timeout_killable inside psi_memstall_enter/leave. The model's count of those sleeps
//! is exported under `memcg_high_penalty.*` (simulator only; the kernel shows memory.events
//! high and time, which validate compares through those keys).

use super::Counter;

counters! {
    /// mm_vmscan_lru_shrink_inactive hits of one reclaim priority.
    LruShrinkInactive {
        calls: "Hits (shrink_inactive_list calls that isolated at least one folio).",
        nr_scanned: "Sum of nr_scanned: folios isolated from the inactive list.",
        nr_reclaimed: "Sum of nr_reclaimed: folios freed by shrink_folio_list.",
    }
}

counters! {
    /// mm_vmscan_lru_shrink_active hits of one reclaim priority.
    LruShrinkActive {
        calls: "Hits (shrink_active_list calls).",
        nr_taken: "Sum of nr_taken: folios isolated from the active list.",
        nr_deactivated: "Sum of nr_deactivated: folios moved to the inactive list.",
    }
}

counters! {
    /// mm_shrink_slab_start hits of one shrinker at one reclaim priority.
    ShrinkSlabStart {
        calls: "Hits (do_shrink_slab calls with freeable objects).",
        total_scan: "Sum of total_scan: objects the call set out to scan ((deferred >> priority) + delta, at most 2 x freeable).",
    }
}

counters! {
    /// mm_shrink_slab_end hits of one shrinker (the event has no priority field).
    ShrinkSlabEnd {
        calls: "Hits (do_shrink_slab calls that got past the start tracepoint).",
        retval: "Sum of retval: objects the shrinker freed (its scan_objects returns, SHRINK_STOP not counted).",
    }
}

counters! {
    /// The other reclaim tracepoints (calls, and the end events' nr_reclaimed), and the
    /// simulator's count of memory.high penalty sleeps.
    ReclaimTrace {
        kswapd_wake as "mm_vmscan_kswapd_wake.calls": "kswapd() woke to run balance_pgdat (= vmstat pageoutrun).",
        direct_begin as "mm_vmscan_direct_reclaim_begin.calls": "try_to_free_pages calls (direct reclaim).",
        direct_end as "mm_vmscan_direct_reclaim_end.nr_reclaimed": "Sum of their nr_reclaimed.",
        memcg_begin as "mm_vmscan_memcg_reclaim_begin.calls": "try_to_free_mem_cgroup_pages calls (memcg limit and memory.high reclaim).",
        memcg_end as "mm_vmscan_memcg_reclaim_end.nr_reclaimed": "Sum of their nr_reclaimed.",
        throttled_writeback as "mm_vmscan_throttled.VMSCAN_THROTTLE_WRITEBACK.calls": "reclaim_throttle for writeback.",
        throttled_congested as "mm_vmscan_throttled.VMSCAN_THROTTLE_CONGESTED.calls": "reclaim_throttle on a congested lruvec.",
    }
}

counters! {
    /// mem_cgroup_handle_over_high's penalty sleeps (no tracepoint in the kernel: simulator only).
    HighPenalty {
        sleeps: "Penalty sleeps taken (reclaim made too little progress and the penalty was over HZ/100).",
        jiffies: "Sum of their lengths in jiffies (penalty_jiffies, at most MEMCG_MAX_HIGH_DELAY_JIFFIES).",
    }
}

/// DEF_PRIORITY + 1: the reclaim priorities 0..=12.
pub const NR_PRIORITIES: usize = 13;

/// The model's shrinkers, by the scan function the kernel's hist key `shrink.sym` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shrinker {
    /// mm/zswap.c: the per-memcg zswap LRU shrinker (writeback).
    Zswap = 0,
    /// mm/zsmalloc.c: a pool's compaction shrinker (zswap's pools, zram's).
    Zsmalloc = 1,
}

impl Shrinker {
    pub const ALL: [Shrinker; 2] = [Shrinker::Zswap, Shrinker::Zsmalloc];

    pub fn scan_function(self) -> &'static str {
        match self {
            Shrinker::Zswap => "zswap_shrinker_scan",
            Shrinker::Zsmalloc => "zs_shrinker_scan",
        }
    }
}

/// The trace groups `--trace` accepts, each naming the events it turns on.
pub const GROUPS: [&str; 4] = ["vmscan", "shrinker", "zswap", "compaction"];

/// compaction's tracepoints (include/trace/events/compaction.h, 6.12) that the model fires,
/// keyed as the guest's hist triggers split them (python/reclaimlab/vm/trace.py).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CompactTp {
    /// try_to_compact_pages: (order, enum compact_priority).
    TryToCompactPages,
    /// compaction_suitable, every call: (zone, order, enum compact_result).
    Suitable,
    /// compact_zone's end, for a compaction that ran: (sync, enum compact_result).
    End,
    /// compaction_deferred when it defers: (zone, order).
    Deferred,
    /// defer_compaction: (zone, order).
    DeferCompaction,
    /// kcompactd_do_work: (order).
    KcompactdWake,
}

/// enum compact_result as COMPACTION_STATUS (include/trace/events/mmflags.h) prints it,
/// indexed by the enum's value (include/linux/compaction.h).
pub const COMPACT_RESULT_NAMES: [&str; 9] = [
    "not_suitable_zone",
    "skipped",
    "deferred",
    "no_suitable_page",
    "continue",
    "complete",
    "partial_skipped",
    "contended",
    "success",
];

/// The compaction tracepoint counts (always counted when a zone exists: a few map updates per
/// compaction decision; exported only with the `compaction` trace group).
#[derive(Clone, Debug, Default)]
pub struct CompactTrace {
    /// (event, three key values as the event uses them) -> hits.
    hits: std::collections::BTreeMap<(CompactTp, u8, u8, u8), u64>,
    /// mm_compaction_isolate_migratepages / _freepages: calls, nr_scanned, nr_taken.
    pub isolate_migrate: [u64; 3],
    pub isolate_free: [u64; 3],
    /// mm_compaction_migratepages: calls, nr_migrated, nr_failed.
    pub migratepages: [u64; 3],
}

impl CompactTrace {
    pub fn hit(&mut self, tp: CompactTp, a: u8, b: u8, c: u8) {
        *self.hits.entry((tp, a, b, c)).or_insert(0) += 1;
    }

    /// `zone_names[i]`: the name of zone index i (its enum zone_type name).
    pub fn export(&self, zone_names: &[&str], out: &mut Vec<(String, u64)>) {
        let zone = |i: u8| zone_names.get(i as usize).copied().unwrap_or("?");
        let res = |r: u8| COMPACT_RESULT_NAMES[r as usize];
        for (&(tp, a, b, c), &n) in &self.hits {
            let key = match tp {
                CompactTp::TryToCompactPages => {
                    format!("mm_compaction_try_to_compact_pages.order.{a}.prio.{b}")
                }
                CompactTp::Suitable => format!(
                    "mm_compaction_suitable.zone.{}.order.{b}.ret.{}",
                    zone(a),
                    res(c)
                ),
                CompactTp::End => format!(
                    "mm_compaction_end.{}.status.{}",
                    if a == 1 { "sync" } else { "async" },
                    res(b)
                ),
                CompactTp::Deferred => {
                    format!("mm_compaction_deferred.zone.{}.order.{b}", zone(a))
                }
                CompactTp::DeferCompaction => {
                    format!("mm_compaction_defer_compaction.zone.{}.order.{b}", zone(a))
                }
                CompactTp::KcompactdWake => format!("mm_compaction_kcompactd_wake.order.{a}"),
            };
            out.push((format!("trace.{key}.calls"), n));
        }
        for (ev, v, names) in [
            (
                "mm_compaction_isolate_migratepages",
                &self.isolate_migrate,
                ["calls", "nr_scanned", "nr_taken"],
            ),
            (
                "mm_compaction_isolate_freepages",
                &self.isolate_free,
                ["calls", "nr_scanned", "nr_taken"],
            ),
            (
                "mm_compaction_migratepages",
                &self.migratepages,
                ["calls", "nr_migrated", "nr_failed"],
            ),
        ] {
            for (name, x) in names.iter().zip(v.iter()) {
                out.push((format!("trace.{ev}.{name}"), *x));
            }
        }
    }
}

/// The tracepoint counts of one run (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct Trace {
    /// vmscan: the LRU, reclaim-entry and throttle events.
    pub vmscan: bool,
    /// shrinker: every modelled shrinker's slab events.
    pub shrinker: bool,
    /// zswap: the zswap shrinker's slab events (zswap has no tracepoints of its own in 6.12).
    pub zswap: bool,
    /// compaction: the compaction events ([`CompactTrace`], counted by the zone's
    /// compaction state and exported by `Mm::export_phys`).
    pub compaction: bool,
    pub inactive: [LruShrinkInactive; NR_PRIORITIES],
    pub active: [LruShrinkActive; NR_PRIORITIES],
    pub slab_start: [[ShrinkSlabStart; NR_PRIORITIES]; 2],
    pub slab_end: [ShrinkSlabEnd; 2],
    pub reclaim: ReclaimTrace,
    pub high_penalty: HighPenalty,
}

/// A priority as an index (the kernel's priority never leaves 0..=DEF_PRIORITY).
pub fn prio(p: i32) -> usize {
    p.clamp(0, NR_PRIORITIES as i32 - 1) as usize
}

impl Trace {
    /// The groups of the lowered config's `trace` list; None when it is empty (no tracing).
    pub fn from_groups(groups: &[String]) -> Result<Option<Box<Trace>>, crate::ConfigError> {
        if groups.is_empty() {
            return Ok(None);
        }
        let mut t = Trace::default();
        for g in groups {
            match g.as_str() {
                "vmscan" => t.vmscan = true,
                "shrinker" => t.shrinker = true,
                "zswap" => t.zswap = true,
                "compaction" => t.compaction = true,
                other => {
                    return Err(crate::ConfigError::invalid(
                        "trace",
                        format!("unknown trace group {other:?}; expected one of {GROUPS:?}"),
                    ))
                }
            }
        }
        Ok(Some(Box::new(t)))
    }

    fn shrinker_on(&self, s: Shrinker) -> bool {
        self.shrinker || (self.zswap && s == Shrinker::Zswap)
    }

    /// Every count of the selected groups, zeros included (stable keys).
    pub fn export(&self, out: &mut Vec<(String, u64)>) {
        if self.vmscan {
            for p in 0..NR_PRIORITIES {
                self.inactive[p].export(
                    &format!("trace.mm_vmscan_lru_shrink_inactive.priority.{p}."),
                    out,
                );
                self.active[p].export(
                    &format!("trace.mm_vmscan_lru_shrink_active.priority.{p}."),
                    out,
                );
            }
            self.reclaim.export("trace.", out);
            self.high_penalty.export("memcg_high_penalty.", out);
        }
        for s in Shrinker::ALL {
            if !self.shrinker_on(s) {
                continue;
            }
            let f = s.scan_function();
            for p in 0..NR_PRIORITIES {
                self.slab_start[s as usize][p].export(
                    &format!("trace.mm_shrink_slab_start.{f}.priority.{p}."),
                    out,
                );
            }
            self.slab_end[s as usize].export(&format!("trace.mm_shrink_slab_end.{f}."), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_select_keys() {
        assert!(Trace::from_groups(&[]).unwrap().is_none());
        assert!(Trace::from_groups(&["bogus".into()]).is_err());
        let mut t = *Trace::from_groups(&["zswap".into()]).unwrap().unwrap();
        t.slab_end[Shrinker::Zswap as usize].retval = 7;
        let mut out = Vec::new();
        t.export(&mut out);
        assert!(
            out.iter().all(|(k, _)| k.contains("zswap_shrinker_scan")),
            "{out:?}"
        );
        assert!(out.contains(&(
            "trace.mm_shrink_slab_end.zswap_shrinker_scan.retval".into(),
            7
        )));
        assert!(out
            .iter()
            .any(|(k, _)| k
                == "trace.mm_shrink_slab_start.zswap_shrinker_scan.priority.12.total_scan"));
        let t = Trace::from_groups(&["vmscan".into(), "shrinker".into()])
            .unwrap()
            .unwrap();
        let mut out = Vec::new();
        t.export(&mut out);
        assert!(out
            .iter()
            .any(|(k, _)| k == "trace.mm_vmscan_lru_shrink_inactive.priority.0.nr_scanned"));
        assert!(out
            .iter()
            .any(|(k, _)| k == "trace.mm_shrink_slab_end.zs_shrinker_scan.calls"));
        assert!(out
            .iter()
            .any(|(k, _)| k == "trace.mm_vmscan_throttled.VMSCAN_THROTTLE_WRITEBACK.calls"));
    }
}
