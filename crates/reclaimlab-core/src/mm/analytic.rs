//! Analytic resident hits (`engine.accesses = "analytic"`, docs/model/analytic.md): a uniform
//! or hot/cold random phase does not step through the accesses that hit resident pages one by
//! one. Not a kernel path: a way of running the model's own access loop in bulk.
//!
//! What an access to a page of an anonymous region does depends only on the page's PTE state
//! ([`Mm::access`]): a mapped page (not the zero page) is a hit that sets its young bit (and,
//! for a store, its dirty bit); a load of the zero page does nothing; anything else faults.
//! Each page of a tracked region is in one [`Class`]; the engine keeps the pages of each class
//! in a [`PageSet`] (counted, ranked, with the k-th member in O(log n)), updated by
//! [`Mm::analytic_sync`] wherever a kernel path changes the PTE state. An access is an *event*
//! (run exactly) if it may change state: a load or store of an unmapped page, a store to a
//! clean page (it dirties it) or to the zero page (do_wp_page). Everything else only sets young
//! bits, so between two events the engine draws how many non-events come first (geometric),
//! advances time by their cost, and accounts the young bits they set lazily: each segment of a
//! region keeps the hazard its dirty and clean pages have accumulated (Σ -ln(1 - π/W) per
//! non-event, π a page's access probability, W the phase's non-event probability), each page
//! the hazard at its last look, and whoever reads a young bit (folio_check_references,
//! shrink_active_list, the multi-gen LRU's walks) first asks [`Mm::analytic_young`], which sets
//! it with probability 1 - exp(-Δ): the probability that at least one of the non-events since
//! then touched this page.

use reclaimlab_workload::{rng, RandomStrata, SplitMix64, Stream};

use super::page::pg;
use super::{Ctx, Mm, RegionInfo};
use crate::sim::{later, Time};

/// What the next access to a page does, by its PTE state (anonymous regions only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// Not mapped (never touched, swapped out, in the swap cache unmapped): every access faults.
    Unmapped,
    /// Mapped, clean (a swap-cache folio mapped by a read fault): a load is a hit, a store
    /// dirties it.
    Clean,
    /// The shared zero page: a load reads it, a store faults (do_wp_page).
    Zero,
    /// Mapped and dirty: every access is a hit.
    Dirty,
}

#[inline]
fn class_of(flags: u32) -> Class {
    if flags & pg::MAPPED == 0 {
        Class::Unmapped
    } else if flags & pg::ZERO_PFN != 0 {
        Class::Zero
    } else if flags & pg::DIRTY != 0 {
        Class::Dirty
    } else {
        Class::Clean
    }
}

/// A set of page offsets (a bitmap) with the count of each 64-page word in a Fenwick tree:
/// insert, remove and the k-th member in O(log n).
#[derive(Clone, Debug)]
pub(crate) struct PageSet {
    words: Vec<u64>,
    /// Fenwick tree over the words' counts, 0-based storage of the 1-based tree.
    tree: Vec<u32>,
    len: u64,
}

impl PageSet {
    /// All of `0..n` (full) or none of it.
    fn new(n: u32, full: bool) -> PageSet {
        let nw = (n as usize).div_ceil(64);
        let mut words = vec![if full { u64::MAX } else { 0 }; nw];
        if full && !n.is_multiple_of(64) {
            words[nw - 1] = (1u64 << (n % 64)) - 1;
        }
        let mut tree: Vec<u32> = words.iter().map(|w| w.count_ones()).collect();
        for i in 1..=nw {
            let j = i + (i & i.wrapping_neg());
            if j <= nw {
                tree[j - 1] += tree[i - 1];
            }
        }
        PageSet {
            words,
            tree,
            len: if full { u64::from(n) } else { 0 },
        }
    }

    #[inline]
    fn contains(&self, i: u32) -> bool {
        self.words[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    fn add(&mut self, word: usize, up: bool) {
        let mut i = word + 1;
        while i <= self.tree.len() {
            if up {
                self.tree[i - 1] += 1;
            } else {
                self.tree[i - 1] -= 1;
            }
            i += i & i.wrapping_neg();
        }
    }

    fn insert(&mut self, i: u32) {
        debug_assert!(!self.contains(i));
        self.words[(i / 64) as usize] |= 1 << (i % 64);
        self.add((i / 64) as usize, true);
        self.len += 1;
    }

    fn remove(&mut self, i: u32) {
        debug_assert!(self.contains(i));
        self.words[(i / 64) as usize] &= !(1 << (i % 64));
        self.add((i / 64) as usize, false);
        self.len -= 1;
    }

    /// How many members are below `i` (`i` up to the set's size).
    fn rank(&self, i: u32) -> u64 {
        let (word, bit) = ((i / 64) as usize, i % 64);
        let mut n = 0u64;
        let mut j = word;
        while j > 0 {
            n += u64::from(self.tree[j - 1]);
            j &= j - 1;
        }
        if bit != 0 {
            n += u64::from((self.words[word] & ((1u64 << bit) - 1)).count_ones());
        }
        n
    }

    /// How many members are in `a..b`.
    fn count(&self, a: u32, b: u32, size: u32) -> u64 {
        if a == 0 && b == size {
            self.len
        } else {
            self.rank(b) - self.rank(a)
        }
    }

    /// The `k`-th member (from 0) in increasing order; `k < len`.
    fn select(&self, k: u64) -> u32 {
        debug_assert!(k < self.len);
        let n = self.tree.len();
        let (mut pos, mut rem) = (0usize, k);
        let mut step = if n == 0 { 0 } else { 1 << n.ilog2() };
        while step > 0 {
            let next = pos + step;
            if next <= n && u64::from(self.tree[next - 1]) <= rem {
                pos = next;
                rem -= u64::from(self.tree[next - 1]);
            }
            step >>= 1;
        }
        let mut w = self.words[pos];
        for _ in 0..rem {
            w &= w - 1;
        }
        pos as u32 * 64 + w.trailing_zeros()
    }
}

/// A run of a region's pages that have had the same touch rates so far: where it starts, and
/// the hazard its dirty and clean pages have accumulated.
#[derive(Clone, Copy, Debug)]
struct Seg {
    start: u32,
    dirty: f64,
    clean: f64,
}

/// One tracked (anonymous) region: its pages by class (dirty ones are the rest), its segments
/// (one while every phase over it was uniform; a hot/cold boundary inside it splits one, and
/// segments never merge), and each page's hazard at its last look.
pub(crate) struct RegionAcc {
    unmapped: PageSet,
    clean: PageSet,
    zero: PageSet,
    segs: Vec<Seg>,
    snap: Vec<f64>,
}

impl RegionAcc {
    fn new(pages: u32) -> RegionAcc {
        RegionAcc {
            unmapped: PageSet::new(pages, true),
            clean: PageSet::new(pages, false),
            zero: PageSet::new(pages, false),
            segs: vec![Seg {
                start: 0,
                dirty: 0.0,
                clean: 0.0,
            }],
            snap: vec![0.0; pages as usize],
        }
    }

    /// The class page `off` is counted in.
    fn recorded(&self, off: u32) -> Class {
        if self.unmapped.contains(off) {
            Class::Unmapped
        } else if self.clean.contains(off) {
            Class::Clean
        } else if self.zero.contains(off) {
            Class::Zero
        } else {
            Class::Dirty
        }
    }

    fn set_mut(&mut self, c: Class) -> Option<&mut PageSet> {
        match c {
            Class::Unmapped => Some(&mut self.unmapped),
            Class::Clean => Some(&mut self.clean),
            Class::Zero => Some(&mut self.zero),
            Class::Dirty => None,
        }
    }

    /// The hazard of page `off` in class `c`, if non-events can touch pages of that class.
    fn hazard(&self, c: Class, off: u32) -> Option<f64> {
        let seg = || &self.segs[self.segs.partition_point(|s| s.start <= off) - 1];
        match c {
            Class::Dirty => Some(seg().dirty),
            Class::Clean => Some(seg().clean),
            Class::Unmapped | Class::Zero => None,
        }
    }

    /// A segment boundary at `off` (a copy of the segment it falls in: same hazards, so no
    /// page's pending touches change).
    fn split(&mut self, off: u32) {
        if off == 0 || off as usize >= self.snap.len() {
            return;
        }
        let k = self.segs.partition_point(|s| s.start <= off);
        if self.segs[k - 1].start != off {
            let seg = Seg {
                start: off,
                ..self.segs[k - 1]
            };
            self.segs.insert(k, seg);
        }
    }

    /// Add hazards to the pages `a..b` (segment boundaries already at `a` and `b`).
    fn add(&mut self, a: u32, b: u32, dirty: f64, clean: f64) {
        for s in self.segs.iter_mut().filter(|s| s.start >= a && s.start < b) {
            s.dirty += dirty;
            s.clean += clean;
        }
    }

    fn pages(&self) -> u32 {
        self.snap.len() as u32
    }
}

/// The analytic mode's state (Mm::analytic; None in exact mode).
pub struct Analytic {
    /// Per region (Mm::regions): Some for anonymous regions, the ones analytic phases may use.
    regions: Vec<Option<RegionAcc>>,
    /// The young-bit draws (rng::Stream::Sim, a = u64::MAX: no process number).
    rng: SplitMix64,
    /// Accesses drawn in bulk (not stepped): stats.analytic_accesses.
    pub(crate) accesses: u64,
    /// The current draw's pieces (Mm::analytic_skip), kept to allocate nothing per draw.
    pieces: Vec<Piece>,
}

/// One stratum's pages in one region: (stratum, phase region index, Mm region, local a..b).
type Piece = (usize, u32, usize, u32, u32);

impl Analytic {
    pub(crate) fn new(regions: &[RegionInfo], seed: u64) -> Analytic {
        Analytic {
            regions: regions
                .iter()
                .map(|r| (r.file.is_none() && r.shmem.is_none()).then(|| RegionAcc::new(r.pages)))
                .collect(),
            rng: rng::stream(seed, Stream::Sim, u64::MAX, 0),
            accesses: 0,
            pieces: Vec::new(),
        }
    }

    /// Whether region `r` (Mm::regions index) is tracked.
    pub(crate) fn tracks(&self, r: usize) -> bool {
        self.regions[r].is_some()
    }
}

/// The rng stream of one phase's analytic draws: (seed, Sim, process, phase | 1 << 32).
pub(crate) fn phase_rng(seed: u64, process: u64, phase: u64) -> SplitMix64 {
    rng::stream(seed, Stream::Sim, process, phase | 1 << 32)
}

/// What [`Mm::analytic_skip`] did: `hits` non-event accesses (time and young bits accounted),
/// then, if `event` is set, the caller runs this access exactly: (process region index, page
/// index in the region, store).
pub(crate) struct Skip {
    pub hits: u64,
    pub event: Option<(u32, u64, bool)>,
}

impl Mm {
    /// Count page `i` in the class its flags say now; a no-op in exact mode, for untracked
    /// regions, and when nothing changed (so calling it twice is harmless). Every kernel path
    /// that maps or unmaps an anonymous page, or dirties a mapped one, calls it (debug builds
    /// check it in check_conservation). Pending young bits of the old class are settled first
    /// if the page stays mapped; an unmapped page's young bit no longer matters.
    #[inline]
    pub(crate) fn analytic_sync(&mut self, i: u32) {
        if self.analytic.is_some() {
            self.analytic_sync_slow(i);
        }
    }

    fn analytic_sync_slow(&mut self, i: u32) {
        let p = self.pages[i as usize];
        let region = self.region_index(i);
        let base = self.regions[region].base;
        let Some(a) = self.analytic.as_mut() else {
            return;
        };
        let Some(r) = a.regions[region].as_mut() else {
            return;
        };
        let off = i - base;
        let (old, new) = (r.recorded(off), class_of(p.flags));
        if old == new {
            return;
        }
        if let (Some(hz), Some(_)) = (r.hazard(old, off), r.hazard(new, off)) {
            if p.flags & pg::YOUNG == 0 && young_draw(&mut a.rng, hz - r.snap[off as usize]) {
                self.pages[i as usize].set(pg::YOUNG);
            }
        }
        if let Some(s) = r.set_mut(old) {
            s.remove(off);
        }
        if let Some(s) = r.set_mut(new) {
            s.insert(off);
        }
        if let Some(hz) = r.hazard(new, off) {
            r.snap[off as usize] = hz;
        }
    }

    /// Before a young bit is read or cleared: set it if a non-event drawn in bulk since the
    /// page's last look touched it (probability 1 - exp(-Δ hazard)). A no-op in exact mode.
    #[inline]
    pub(crate) fn analytic_young(&mut self, i: u32) {
        if self.analytic.is_some() {
            self.analytic_young_slow(i);
        }
    }

    /// Before a young bit is cleared unread (shrink_active_list's deactivation): touches drawn
    /// in bulk so far are dropped with it, so no draw is needed, only the page's new start.
    #[inline]
    pub(crate) fn analytic_clear_young(&mut self, i: u32) {
        if self.analytic.is_some() {
            self.analytic_sync_slow(i);
            let p = self.pages[i as usize];
            let region = self.region_index(i);
            let base = self.regions[region].base;
            if let Some(r) = self
                .analytic
                .as_mut()
                .and_then(|a| a.regions[region].as_mut())
            {
                let off = i - base;
                if let Some(hz) = r.hazard(class_of(p.flags), off) {
                    r.snap[off as usize] = hz;
                }
            }
        }
    }

    fn analytic_young_slow(&mut self, i: u32) {
        self.analytic_sync_slow(i);
        let p = self.pages[i as usize];
        let region = self.region_index(i);
        let base = self.regions[region].base;
        let Some(a) = self.analytic.as_mut() else {
            return;
        };
        let Some(r) = a.regions[region].as_mut() else {
            return;
        };
        let off = i - base;
        let Some(hz) = r.hazard(class_of(p.flags), off) else {
            return;
        };
        if p.flags & pg::YOUNG == 0 && young_draw(&mut a.rng, hz - r.snap[off as usize]) {
            self.pages[i as usize].set(pg::YOUNG);
        }
        r.snap[off as usize] = hz;
    }

    /// Draw the accesses of random phase `u` (of a process whose regions are `proc_regions`)
    /// up to the next event, no access starting at or after `limit`: the non-events' time is
    /// added to `ctx`, their young bits to the pages' hazards. None if the phase cannot be
    /// drawn in bulk (a region that is not tracked, or accesses that cost no time): the caller
    /// steps it.
    pub(crate) fn analytic_skip(
        &mut self,
        ctx: &mut Ctx,
        u: &RandomStrata,
        proc_regions: &[u32],
        limit: Time,
        rng: &mut SplitMix64,
    ) -> Option<Skip> {
        // What Ctx::cpu charges for one access (the slowdown is fixed for the slice).
        let cost = (u128::from(self.costs.access_ns) * u128::from(ctx.slowdown) / 1024) as u64;
        let Analytic {
            regions,
            pieces,
            accesses,
            ..
        } = self.analytic.as_mut()?;
        if cost == 0 {
            return None;
        }
        pieces.clear();
        // Each stratum's pieces: (stratum, phase region index, tracked region, local a..b),
        // and per stratum: one page's access probability, its unmapped, clean + zero and
        // dirty pages.
        let w = u.write_percent as f64 / 100.0;
        let mut strata = [(0.0f64, 0u64, 0u64, 0u64); 2];
        for (s, &(lo, hi, percent)) in u.strata.iter().enumerate() {
            let (mut un, mut cz, mut dirty) = (0u64, 0u64, 0u64);
            if percent > 0 && hi > lo {
                for (k, &r) in u.regions.iter().enumerate() {
                    let start = u.starts[k];
                    let ri = proc_regions[r as usize] as usize;
                    let acc = regions[ri].as_ref()?;
                    let n = acc.pages();
                    let end = start + u64::from(n);
                    if end <= lo || start >= hi {
                        continue;
                    }
                    let (pa, pb) = ((lo.max(start) - start) as u32, (hi.min(end) - start) as u32);
                    let (un_r, c_r, z_r) = (
                        acc.unmapped.count(pa, pb, n),
                        acc.clean.count(pa, pb, n),
                        acc.zero.count(pa, pb, n),
                    );
                    un += un_r;
                    cz += c_r + z_r;
                    dirty += u64::from(pb - pa) - un_r - c_r - z_r;
                    pieces.push((s, r, ri, pa, pb));
                }
            }
            let per_page = if hi > lo {
                percent as f64 / 100.0 / (hi - lo) as f64
            } else {
                0.0
            };
            strata[s] = (per_page, un, cz, dirty);
        }
        // A non-event: any access to a dirty page, a load of a clean or zero page.
        let weight: f64 = strata
            .iter()
            .map(|&(pp, _, cz, d)| pp * (d as f64 + (1.0 - w) * cz as f64))
            .sum();
        let event_weight: f64 = strata
            .iter()
            .map(|&(pp, un, cz, _)| pp * (un as f64 + w * cz as f64))
            .sum();
        // Non-events before the next event: geometric (failures before the first success).
        let k = if event_weight <= 0.0 {
            u64::MAX
        } else if weight <= 0.0 {
            0
        } else {
            let x = 1.0 - rng.unit_f64();
            let g = (x.ln() / (-event_weight.min(1.0)).ln_1p()).floor();
            if g >= 9.0e18 {
                u64::MAX
            } else {
                g as u64
            }
        };
        // Accesses that start before `limit`, and what the phase's count leaves.
        let fit = if ctx.now >= limit {
            0
        } else {
            (limit - ctx.now).div_ceil(cost)
        };
        let left = u.remaining.unwrap_or(u64::MAX);
        let m = k.min(fit).min(left);
        if m > 0 {
            // Each non-event touches a given dirty page of a stratum with probability (its
            // access probability) / weight, a given clean one (a load) with (1 - w) times
            // that. Capped: past 64, a touch is certain.
            for &(s, _, ri, pa, pb) in pieces.iter() {
                let pp = strata[s].0;
                let rate_dirty = (-(-pp / weight).ln_1p()).min(64.0);
                let rate_clean = (-(-pp * (1.0 - w) / weight).ln_1p()).min(64.0);
                let acc = regions[ri].as_mut().expect("checked above");
                acc.split(pa);
                acc.split(pb);
                acc.add(pa, pb, m as f64 * rate_dirty, m as f64 * rate_clean);
            }
            *accesses += m;
            ctx.now = later(ctx.now, m.saturating_mul(cost));
        }
        if !(k < fit && k < left) {
            return Some(Skip {
                hits: m,
                event: None,
            });
        }
        // The event: a load or store of an unmapped page, or a store to a clean or zero page;
        // a stratum and class by their event weights, then a page of the class in the
        // stratum, each equally likely.
        let mut x = rng.unit_f64() * event_weight;
        let mut chosen = None;
        'pick: for (s, &(pp, un, cz, _)) in strata.iter().enumerate() {
            for (on_unmapped, wgt) in [(true, pp * un as f64), (false, pp * w * cz as f64)] {
                if wgt <= 0.0 {
                    continue;
                }
                chosen = Some((s, on_unmapped));
                if x < wgt {
                    break 'pick;
                }
                x -= wgt;
            }
        }
        let (s, on_unmapped) = chosen.expect("an event has a positive weight");
        let mut pick = rng.below(if on_unmapped {
            strata[s].1
        } else {
            strata[s].2
        });
        let write = if on_unmapped {
            rng.below(100) < u.write_percent
        } else {
            true
        };
        for &(_, r, ri, pa, pb) in pieces.iter().filter(|p| p.0 == s) {
            let acc = regions[ri].as_ref().expect("checked above");
            let n = acc.pages();
            let off = if on_unmapped {
                let here = acc.unmapped.count(pa, pb, n);
                if pick >= here {
                    pick -= here;
                    continue;
                }
                acc.unmapped.select(acc.unmapped.rank(pa) + pick)
            } else {
                let (c, z) = (acc.clean.count(pa, pb, n), acc.zero.count(pa, pb, n));
                if pick < c {
                    acc.clean.select(acc.clean.rank(pa) + pick)
                } else if pick - c < z {
                    acc.zero.select(acc.zero.rank(pa) + pick - c)
                } else {
                    pick -= c + z;
                    continue;
                }
            };
            return Some(Skip {
                hits: m,
                event: Some((r, u64::from(off), write)),
            });
        }
        unreachable!("the class counts sum over the regions")
    }

    /// Every tracked page is counted in the class its flags say (check_conservation).
    pub(crate) fn check_analytic(&self) -> Result<(), String> {
        let Some(a) = &self.analytic else {
            return Ok(());
        };
        for (ri, r) in a.regions.iter().enumerate() {
            let Some(r) = r else { continue };
            let base = self.regions[ri].base;
            for off in 0..r.pages() {
                let (rec, now) = (
                    r.recorded(off),
                    class_of(self.pages[(base + off) as usize].flags),
                );
                if rec != now {
                    return Err(format!(
                        "analytic: page {} of region {ri} counted as {rec:?} but is {now:?}",
                        base + off
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Whether at least one touch happened, for a hazard of `dh` since the last look.
#[inline]
fn young_draw(rng: &mut SplitMix64, dh: f64) -> bool {
    dh > 0.0 && rng.unit_f64() < -(-dh).exp_m1()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_set_selects_in_order() {
        for n in [1u32, 63, 64, 65, 200, 1000] {
            let mut s = PageSet::new(n, true);
            assert_eq!(s.len, u64::from(n));
            for k in 0..u64::from(n) {
                assert_eq!(s.select(k), k as u32);
            }
            // Remove every third page: the members are the rest, in order.
            for i in (0..n).step_by(3) {
                s.remove(i);
            }
            let rest: Vec<u32> = (0..n).filter(|i| i % 3 != 0).collect();
            assert_eq!(s.len, rest.len() as u64);
            for (k, &i) in rest.iter().enumerate() {
                assert_eq!(s.select(k as u64), i);
                assert_eq!(s.rank(i), k as u64);
            }
            assert_eq!(s.rank(n), rest.len() as u64);
            for a in (0..n).step_by(7) {
                let want = rest.iter().filter(|&&i| i >= a && i < n - 1).count() as u64;
                assert_eq!(s.count(a, n - 1, n), want);
            }
            s.insert(0);
            assert_eq!(s.select(0), 0);
            let mut e = PageSet::new(n, false);
            assert_eq!(e.len, 0);
            e.insert(n - 1);
            assert_eq!(e.select(0), n - 1);
        }
    }
}
