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

use super::page::{pg, Page};
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

/// Whether non-events can touch a page of class `c` (Some: a dirty page, false, or a clean
/// one, true: the index of its hazard in [`RegionAcc::hazards`]).
#[inline]
fn touched(c: Class) -> Option<bool> {
    match c {
        Class::Dirty => Some(false),
        Class::Clean => Some(true),
        Class::Unmapped | Class::Zero => None,
    }
}

/// What a hook does at a look at a page ([`Mm::analytic_sync`], [`Mm::analytic_young`],
/// [`Mm::analytic_clear_young`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Look {
    /// Count the page in its class (nothing if it did not change).
    Sync,
    /// Then settle its pending touches (its young bit is read next).
    Young,
    /// Then drop them (its young bit is cleared unread).
    Clear,
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

    fn from_words(words: Vec<u64>) -> PageSet {
        let len = words.iter().map(|w| u64::from(w.count_ones())).sum();
        let mut tree: Vec<u32> = words.iter().map(|w| w.count_ones()).collect();
        let nw = tree.len();
        for i in 1..=nw {
            let j = i + (i & i.wrapping_neg());
            if j <= nw {
                tree[j - 1] += tree[i - 1];
            }
        }
        PageSet { words, tree, len }
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
    /// The region's pages.
    n: u32,
    /// Bookkeeping on (classes counted, hazards pending); off while a phase with dense events
    /// steps its accesses ([`Mm::analytic_suspend`]): nothing is tracked, nothing pending.
    live: bool,
    /// The page weights of the Zipf phase that last drew over this region.
    zw: Option<ZipfW>,
    /// The young-bit hazards of Zipf phases (each page its own rate), one layer per
    /// distinct (theta, position in the phase, phase size).
    layers: Vec<ZLayer>,
}

/// Which Zipf ranks a region's pages have: (theta's bits, the region's first index in the
/// phase's concatenation, the concatenation's size).
type ZKey = (u64, u64, u64);

/// A Zipf phase's page weights over one region, in integers so that sums stay exact:
/// `q[off] = round(2^62 π)`, π the page's access probability; per 64-page word, the
/// sums of `q` over its unmapped pages and over its clean and zero pages (SumTree).
struct ZipfW {
    key: ZKey,
    q: Vec<u64>,
    un: SumTree,
    cz: SumTree,
    un_total: u64,
    cz_total: u64,
    q_total: u64,
}

/// Terms of -ln(1 - x) = x + x²/2 + x³/3 + … kept for a Zipf page outside the head: with
/// x = π/W ≤ (1/64)/(15/16) (π ≤ 1/64, a non-event probability W of at least 15/16:
/// DENSE_NOW), the rest is below x⁴/(4(1-x)), a relative error under 1.2e-6 of the page's
/// hazard (tests that draw every phase, Simulation::set_analytic_dense, may exceed it).
const ZTERMS: usize = 3;

/// Pages with an access probability above this get their own exact hazard (at most 64 of
/// them); the rest share the series' sums.
const HEAD_PI: f64 = 1.0 / 64.0;

/// The young-bit hazards of one Zipf phase's pages in a region: for the head pages (π >
/// HEAD_PI), their own (dirty, clean) hazards; for the rest, Σ m·W^-k (dirty) and
/// Σ m·((1-w)/W)^k (clean), k = 1..=ZTERMS, so that a page's hazard is Σ_k π^k/k · acc[k].
struct ZLayer {
    key: ZKey,
    theta: f64,
    inv_norm: f64,
    head: Vec<[f64; 2]>,
    acc: [[f64; ZTERMS]; 2],
}

impl ZLayer {
    /// The access probability of the region's page `off`.
    #[inline]
    fn pi(&self, off: u32) -> f64 {
        zipf_pi(self.key.1 + u64::from(off), self.theta, self.inv_norm)
    }
}

/// Probability of index `i` (from 0) of a Zipf phase: (i + 1)^-theta / norm.
#[inline]
fn zipf_pi(i: u64, theta: f64, inv_norm: f64) -> f64 {
    ((i + 1) as f64).powf(-theta) * inv_norm
}

/// Sums of per-word weights in a 16-ary tree: `levels[0]` the words' own weights, each level
/// above the sums of 16 entries of the one below, the last at most 16 entries. The word
/// holding weight `k` is found from the top down by scanning at most 16 entries per level:
/// with 2^16 words that is 4 cache-line pairs, where a binary (Fenwick) descent made 16
/// dependent loads, the lower half of them cache misses in a 12 GiB region (issue 17's
/// JVM-like host spent 11 % of its time there). Same answer as any prefix-sum search: the
/// first word whose running sum passes `k`.
struct SumTree {
    levels: Vec<Vec<u64>>,
}

/// Fan-out of SumTree (log2): 16 u64 sums are two cache lines.
const SUM_FAN: u32 = 4;

impl SumTree {
    fn new(words: Vec<u64>) -> SumTree {
        let mut levels = vec![words];
        while levels.last().expect("level 0").len() > 1 << SUM_FAN {
            let below = levels.last().expect("level 0");
            let up = below
                .chunks(1 << SUM_FAN)
                .map(|c| c.iter().fold(0u64, |a, &v| a.wrapping_add(v)))
                .collect();
            levels.push(up);
        }
        SumTree { levels }
    }

    /// Add (`up`) or take away `delta` at word `word`.
    #[inline]
    fn add(&mut self, word: usize, delta: u64, up: bool) {
        for (k, level) in self.levels.iter_mut().enumerate() {
            let v = &mut level[word >> (SUM_FAN as usize * k)];
            *v = if up {
                v.wrapping_add(delta)
            } else {
                v.wrapping_sub(delta)
            };
        }
    }

    /// The word holding weight `k` (words in order, each its weight), and what is left of `k`
    /// in it; `k` below the total.
    fn select(&self, mut k: u64) -> (usize, u64) {
        let mut pos = 0usize;
        for level in self.levels.iter().rev() {
            let (a, b) = (pos << SUM_FAN, ((pos + 1) << SUM_FAN).min(level.len()));
            let mut j = a;
            while j + 1 < b && k >= level[j] {
                k -= level[j];
                j += 1;
            }
            pos = j;
        }
        (pos, k)
    }

    /// The sum of every word's weight.
    fn total(&self) -> u64 {
        self.levels
            .last()
            .expect("level 0")
            .iter()
            .fold(0u64, |a, &v| a.wrapping_add(v))
    }
}

impl ZipfW {
    fn build(key: ZKey, theta: f64, inv_norm: f64, acc: &RegionAcc) -> ZipfW {
        let n = acc.pages();
        let q: Vec<u64> = (0..n)
            .map(|off| (zipf_pi(key.1 + u64::from(off), theta, inv_norm) * Q_SCALE).round() as u64)
            .collect();
        let nw = acc.unmapped.words.len();
        let (mut un, mut cz) = (vec![0u64; nw], vec![0u64; nw]);
        for w in 0..nw {
            un[w] = bits_weight(acc.unmapped.words[w], &q[w * 64..]);
            cz[w] = bits_weight(acc.clean.words[w] | acc.zero.words[w], &q[w * 64..]);
        }
        let (un_total, cz_total) = (un.iter().sum(), cz.iter().sum());
        ZipfW {
            key,
            q_total: q.iter().sum(),
            q,
            un: SumTree::new(un),
            cz: SumTree::new(cz),
            un_total,
            cz_total,
        }
    }

    /// Page `off` leaves class `old` for `new`.
    fn moved(&mut self, off: u32, old: Class, new: Class) {
        let (q, w) = (self.q[off as usize], (off / 64) as usize);
        match old {
            Class::Unmapped => {
                self.un.add(w, q, false);
                self.un_total -= q;
            }
            Class::Clean | Class::Zero => {
                self.cz.add(w, q, false);
                self.cz_total -= q;
            }
            Class::Dirty => {}
        }
        match new {
            Class::Unmapped => {
                self.un.add(w, q, true);
                self.un_total += q;
            }
            Class::Clean | Class::Zero => {
                self.cz.add(w, q, true);
                self.cz_total += q;
            }
            Class::Dirty => {}
        }
    }

    /// The page holding weight `k` of the unmapped pages (`unmapped`) or of the clean and
    /// zero ones.
    fn select(&self, acc: &RegionAcc, unmapped: bool, k: u64) -> u32 {
        let (w, mut rem) = if unmapped { &self.un } else { &self.cz }.select(k);
        // The word's weights are read in order from its first member: start loading them
        // while its bits load (a hint only).
        for line in self.q[w * 64..(w * 64 + 64).min(self.q.len())]
            .iter()
            .step_by(8)
        {
            crate::prefetch::prefetch(line);
        }
        let mut bits = if unmapped {
            acc.unmapped.words[w]
        } else {
            acc.clean.words[w] | acc.zero.words[w]
        };
        while bits != 0 {
            let b = bits.trailing_zeros();
            let off = w as u32 * 64 + b;
            let q = self.q[off as usize];
            if rem < q {
                return off;
            }
            rem -= q;
            bits &= bits - 1;
        }
        unreachable!("the word's weight covers k")
    }
}

/// Zipf weights are π scaled by 2^62: a page's probability is off by at most 2^-63 (rounding)
/// and the sums of a region stay below 2^62 + its pages (no overflow).
const Q_SCALE: f64 = (1u64 << 62) as f64;

/// Σ q over the set bits of `bits` (q from the word's first page).
fn bits_weight(mut bits: u64, q: &[u64]) -> u64 {
    let mut s = 0;
    while bits != 0 {
        s += q[bits.trailing_zeros() as usize];
        bits &= bits - 1;
    }
    s
}

impl RegionAcc {
    fn new(pages: u32) -> RegionAcc {
        RegionAcc {
            unmapped: PageSet::new(0, false),
            clean: PageSet::new(0, false),
            zero: PageSet::new(0, false),
            segs: vec![Seg {
                start: 0,
                dirty: 0.0,
                clean: 0.0,
            }],
            snap: Vec::new(),
            n: pages,
            // Counted from the flags at the first draw over it (rebuild), its tables made
            // then: a fill before that, or a phase that only steps, pays nothing for them.
            live: false,
            zw: None,
            layers: Vec::new(),
        }
    }

    /// Start over from the pages' flags (after a suspension): every class counted anew,
    /// nothing pending.
    fn rebuild(&mut self, flags: impl Iterator<Item = u32>) {
        let n = self.pages();
        let nw = (n as usize).div_ceil(64);
        let (mut un, mut cl, mut ze) = (vec![0u64; nw], vec![0u64; nw], vec![0u64; nw]);
        for (off, f) in flags.enumerate() {
            let (w, b) = (off / 64, 1u64 << (off % 64));
            match class_of(f) {
                Class::Unmapped => un[w] |= b,
                Class::Clean => cl[w] |= b,
                Class::Zero => ze[w] |= b,
                Class::Dirty => {}
            }
        }
        self.unmapped = PageSet::from_words(un);
        self.clean = PageSet::from_words(cl);
        self.zero = PageSet::from_words(ze);
        self.segs = vec![Seg {
            start: 0,
            dirty: 0.0,
            clean: 0.0,
        }];
        self.snap.clear();
        self.snap.resize(n as usize, 0.0);
        self.zw = None;
        self.layers.clear();
        self.live = true;
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
        touched(c).map(|clean| self.hazards(off)[usize::from(clean)])
    }

    /// The hazards of page `off` as a dirty and as a clean page: both at once, so that a look
    /// that moves the page between the two computes its Zipf weight (a `powf`) once.
    fn hazards(&self, off: u32) -> [f64; 2] {
        let seg = &self.segs[self.segs.partition_point(|s| s.start <= off) - 1];
        let mut h = [seg.dirty, seg.clean];
        for l in &self.layers {
            if let Some(hl) = l.head.get(off as usize) {
                h[0] += hl[0];
                h[1] += hl[1];
            } else {
                let x = l.pi(off);
                for (hc, a) in h.iter_mut().zip(&l.acc) {
                    *hc += x * (a[0] + x * (a[1] / 2.0 + x * a[2] / 3.0));
                }
            }
        }
        h
    }

    /// A segment boundary at `off` (a copy of the segment it falls in: same hazards, so no
    /// page's pending touches change).
    fn split(&mut self, off: u32) {
        if off == 0 || off >= self.n {
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
        self.n
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
    /// Zipf normalisations computed so far: (theta's bits, pages, 1 / Σ_{j=1..pages} j^-theta).
    norms: Vec<(u64, u64, f64)>,
    /// Tracked regions whose bookkeeping is on (RegionAcc::live): with none, the hooks return
    /// at once, as in exact mode.
    live: u32,
    /// From what rate of events a phase steps (DENSE; tests set 1.0 to draw every phase in
    /// bulk, DENSE_NOW too: Simulation::set_analytic_dense).
    pub(crate) dense: f64,
}

/// 1 / Σ_{j=1..n} j^-theta, computed once per (theta, n).
fn zipf_inv_norm(norms: &mut Vec<(u64, u64, f64)>, theta: f64, n: u64) -> f64 {
    if let Some(&(_, _, v)) = norms
        .iter()
        .find(|&&(t, k, _)| t == theta.to_bits() && k == n)
    {
        return v;
    }
    // Smallest terms first: the sum is as exact as f64 allows.
    let sum: f64 = (1..=n).rev().map(|j| (j as f64).powf(-theta)).sum();
    norms.push((theta.to_bits(), n, 1.0 / sum));
    1.0 / sum
}

/// A binomial(n, p) variate, exactly in distribution: Devroye's recursion on order
/// statistics (Non-Uniform Random Variate Generation, 1986, X.4): the k-th smallest of n
/// uniforms is Beta(k, n + 1 - k); the ones below it are uniform below it, the others above.
/// O(log n) Beta draws, then at most 64 Bernoulli ones.
fn binomial(rng: &mut SplitMix64, mut n: u64, mut p: f64) -> u64 {
    let mut got = 0;
    loop {
        if p <= 0.0 || n == 0 {
            return got;
        }
        if p >= 1.0 {
            return got + n;
        }
        if n < 64 {
            return got + (0..n).filter(|_| rng.unit_f64() < p).count() as u64;
        }
        let k = n.div_ceil(2);
        let x = beta(rng, k as f64, (n + 1 - k) as f64);
        if p < x {
            n = k - 1;
            p /= x;
        } else {
            got += k;
            n -= k;
            p = (p - x) / (1.0 - x);
        }
    }
}

/// Beta(a, b) for a, b >= 1: G_a / (G_a + G_b).
fn beta(rng: &mut SplitMix64, a: f64, b: f64) -> f64 {
    let x = gamma(rng, a);
    x / (x + gamma(rng, b))
}

/// Gamma(a, 1) for a >= 1 (Marsaglia and Tsang, ACM TOMS 26(3), 2000), standard normals by
/// the Box-Muller transform.
fn gamma(rng: &mut SplitMix64, a: f64) -> f64 {
    let d = a - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let (u1, u2) = (1.0 - rng.unit_f64(), rng.unit_f64());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let v = 1.0 + c * z;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = 1.0 - rng.unit_f64();
        if u.ln() < 0.5 * z * z + d - d * v + d * v.ln() {
            return d * v;
        }
    }
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
            norms: Vec::new(),
            live: 0,
            dense: DENSE,
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
    /// Nothing drawn: events are dense (probability DENSE_NOW or more), the phase's regions
    /// are suspended and the caller steps the phase (sched.rs decides when to draw again).
    pub dense: bool,
}

/// A phase whose accesses are events at this rate or more is not worth drawing: every event
/// costs a draw, class counts, and the young-bit bookkeeping of reclaim, which costs more than
/// stepping the 1/DENSE accesses between events. Measured (docs/model/analytic.md):
/// swap-heavy-zswap's shape with 10 % of the reads faulting, analytic 1.5x exact's CPU time;
/// 5 %, 1.3x; 2 %, the same. sched.rs (Stepping) applies it to a window of the phase's
/// accesses; a draw whose event probability is DENSE_NOW or more steps at once.
pub(crate) const DENSE: f64 = 1.0 / 32.0;

/// See DENSE. Also what bounds the Zipf series (ZTERMS): every draw has W >= 15/16.
pub(crate) const DENSE_NOW: f64 = 1.0 / 16.0;

impl Mm {
    /// The rate of events from which a drawn phase steps (DENSE; 1.0 in tests: never).
    pub(crate) fn analytic_dense(&self) -> f64 {
        self.analytic.as_ref().map_or(DENSE, |a| a.dense)
    }

    /// Count page `i` in the class its flags say now; a no-op in exact mode, for untracked
    /// regions, and when nothing changed (so calling it twice is harmless). Every kernel path
    /// that maps or unmaps an anonymous page, or dirties a mapped one, calls it (debug builds
    /// check it in check_conservation). Pending young bits of the old class are settled first
    /// if the page stays mapped; an unmapped page's young bit no longer matters.
    #[inline]
    pub(crate) fn analytic_sync(&mut self, i: u32) {
        if self.analytic.as_ref().is_some_and(|a| a.live > 0) {
            self.analytic_sync_slow(i);
        }
    }

    /// Page `i`'s record, its region's index and its offset in the region: what every hook
    /// looks up before it finds the region's tables.
    fn analytic_at(&self, i: u32) -> (Page, usize, u32) {
        let region = self.region_index(i);
        (
            self.pages[i as usize],
            region,
            i - self.regions[region].base,
        )
    }

    fn analytic_sync_slow(&mut self, i: u32) {
        self.analytic_look(i, Look::Sync);
    }

    /// What the class and young-bit hooks share: count page `i` in the class its flags say
    /// (settling its pending touches first if it stays mapped), then for [`Look::Young`] settle
    /// them now and for [`Look::Clear`] drop them, each from one computation of the page's
    /// hazards. The draws are the ones the hooks made one after another before 2026-11-25
    /// (same stream, same order): results are unchanged.
    fn analytic_look(&mut self, i: u32, look: Look) {
        let (p, region, off) = self.analytic_at(i);
        let Some(a) = self.analytic.as_mut() else {
            return;
        };
        let Some(r) = a.regions[region].as_mut().filter(|r| r.live) else {
            return;
        };
        let (old, new) = (r.recorded(off), class_of(p.flags));
        if old == new && look == Look::Sync {
            return;
        }
        // Only a page non-events can touch (dirty or clean) has a hazard to read or record.
        let h = touched(new).map(|_| r.hazards(off));
        if old != new {
            if let Some(z) = r.zw.as_mut() {
                z.moved(off, old, new);
            }
            if let (Some(h), Some(was_clean)) = (h, touched(old)) {
                let dh = h[usize::from(was_clean)] - r.snap[off as usize];
                if p.flags & pg::YOUNG == 0 && young_draw(&mut a.rng, dh) {
                    self.pages[i as usize].set(pg::YOUNG);
                }
            }
            if let Some(s) = r.set_mut(old) {
                s.remove(off);
            }
            if let Some(s) = r.set_mut(new) {
                s.insert(off);
            }
        } else if look == Look::Young {
            // (After a class change the page's pending touches are settled above: none left.)
            if let (Some(h), Some(clean)) = (h, touched(new)) {
                let dh = h[usize::from(clean)] - r.snap[off as usize];
                if p.flags & pg::YOUNG == 0 && young_draw(&mut a.rng, dh) {
                    self.pages[i as usize].set(pg::YOUNG);
                }
            }
        }
        if let (Some(h), Some(clean)) = (h, touched(new)) {
            r.snap[off as usize] = h[usize::from(clean)];
        }
    }

    /// Start loading what the class and young-bit hooks read for each of `pages` (the hazard at
    /// its last look, its class bits, its Zipf weight): reclaim calls it for a batch of
    /// isolated folios before it looks at the first, so that their cache misses overlap
    /// instead of coming one folio after another (issue 17's JVM-like host spent 14 % of its
    /// time waiting for them). A hint only: a no-op in exact mode, no effect on results.
    #[inline]
    pub(crate) fn analytic_prefetch(&self, pages: &[u32]) {
        let Some(a) = self.analytic.as_ref().filter(|a| a.live > 0) else {
            return;
        };
        for &i in pages {
            let region = self.region_index(i);
            let Some(r) = a.regions[region].as_ref().filter(|r| r.live) else {
                continue;
            };
            let off = (i - self.regions[region].base) as usize;
            let w = off / 64;
            for set in [&r.unmapped, &r.clean, &r.zero] {
                if let Some(word) = set.words.get(w) {
                    crate::prefetch::prefetch(word);
                }
            }
            if let Some(h) = r.snap.get(off) {
                crate::prefetch::prefetch(h);
            }
            if let Some(q) = r.zw.as_ref().and_then(|z| z.q.get(off)) {
                crate::prefetch::prefetch(q);
            }
        }
    }

    /// Before a young bit is read or cleared: set it if a non-event drawn in bulk since the
    /// page's last look touched it (probability 1 - exp(-Δ hazard)). A no-op in exact mode.
    #[inline]
    pub(crate) fn analytic_young(&mut self, i: u32) {
        if self.analytic.as_ref().is_some_and(|a| a.live > 0) {
            self.analytic_young_slow(i);
        }
    }

    /// Before a young bit is cleared unread (shrink_active_list's deactivation): touches drawn
    /// in bulk so far are dropped with it, so no draw is needed, only the page's new start.
    #[inline]
    pub(crate) fn analytic_clear_young(&mut self, i: u32) {
        if self.analytic.as_ref().is_some_and(|a| a.live > 0) {
            self.analytic_look(i, Look::Clear);
        }
    }

    fn analytic_young_slow(&mut self, i: u32) {
        self.analytic_look(i, Look::Young);
    }

    /// Draw the accesses of random phase `u` (of a process whose regions are `proc_regions`)
    /// up to the next event, no access starting at or after `limit`: the non-events' time is
    /// added to `ctx`, their young bits to the pages' hazards. None if the phase cannot be
    /// drawn in bulk (a region that is not tracked, or accesses that cost no time): the caller
    /// steps it. With `rw`, a store is a load then a store, each charged as one access
    /// (AccessGen::rw). If an access is an event with probability DENSE_NOW or more, nothing
    /// is drawn: the phase's regions are suspended ([`Skip::dense`]) and the caller steps.
    pub(crate) fn analytic_skip(
        &mut self,
        ctx: &mut Ctx,
        u: &RandomStrata,
        proc_regions: &[u32],
        limit: Time,
        rng: &mut SplitMix64,
        rw: bool,
    ) -> Option<Skip> {
        // What Ctx::cpu charges for one access (the slowdown is fixed for the slice).
        let cost = (u128::from(self.costs.access_ns) * u128::from(ctx.slowdown) / 1024) as u64;
        let a = self.analytic.as_mut()?;
        if cost == 0 {
            return None;
        }
        // Regions left by a suspension are counted anew from their pages' flags.
        for &r in u.regions {
            let ri = proc_regions[r as usize] as usize;
            let acc = a.regions[ri].as_mut()?;
            if !acc.live {
                let base = self.regions[ri].base as usize;
                let n = acc.pages() as usize;
                acc.rebuild(self.pages[base..base + n].iter().map(|p| p.flags));
                a.live += 1;
            }
        }
        let Analytic {
            regions,
            pieces,
            accesses,
            norms,
            dense,
            ..
        } = a;
        pieces.clear();
        let w = u.write_percent as f64 / 100.0;
        // Per stratum: one page's access probability, the probabilities that an access lands
        // on an unmapped, a clean or zero, and a dirty page of it. A Zipf phase has one
        // stratum whose pages carry their own weights (ZipfW): its figures are sums of them.
        let mut strata = [(0.0f64, 0u64, 0u64, 0u64); 2];
        let mut mass = [(0.0f64, 0.0f64, 0.0f64); 2];
        if let Some(theta) = u.zipf {
            let inv_norm = zipf_inv_norm(norms, theta, u.total);
            let (mut un, mut cz, mut q) = (0u64, 0u64, 0u64);
            for (k, &r) in u.regions.iter().enumerate() {
                let ri = proc_regions[r as usize] as usize;
                let acc = regions[ri].as_mut().expect("checked above");
                let key = (theta.to_bits(), u.starts[k], u.total);
                if acc.zw.as_ref().is_none_or(|z| z.key != key) {
                    acc.zw = Some(ZipfW::build(key, theta, inv_norm, acc));
                }
                let z = acc.zw.as_ref().expect("just built");
                un += z.un_total;
                cz += z.cz_total;
                q += z.q_total;
                pieces.push((0, r, ri, 0, acc.pages()));
            }
            let qf = q as f64;
            mass[0] = (un as f64 / qf, cz as f64 / qf, (q - un - cz) as f64 / qf);
            strata[0] = (inv_norm, un, cz, 0);
        } else {
            for (s, &(lo, hi, percent)) in u.strata.iter().enumerate() {
                let (mut un, mut cz, mut dirty) = (0u64, 0u64, 0u64);
                if percent > 0 && hi > lo {
                    for (k, &r) in u.regions.iter().enumerate() {
                        let start = u.starts[k];
                        let ri = proc_regions[r as usize] as usize;
                        let acc = regions[ri].as_ref().expect("checked above");
                        let n = acc.pages();
                        let end = start + u64::from(n);
                        if end <= lo || start >= hi {
                            continue;
                        }
                        let (pa, pb) =
                            ((lo.max(start) - start) as u32, (hi.min(end) - start) as u32);
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
                let pp = if hi > lo {
                    percent as f64 / 100.0 / (hi - lo) as f64
                } else {
                    0.0
                };
                strata[s] = (pp, un, cz, dirty);
                mass[s] = (pp * un as f64, pp * cz as f64, pp * dirty as f64);
            }
        }
        // A non-event: any access to a dirty page, a load of a clean or zero page.
        let weight: f64 = mass.iter().map(|&(_, cz, d)| d + (1.0 - w) * cz).sum();
        let event_weight: f64 = mass.iter().map(|&(un, cz, _)| un + w * cz).sum();
        if event_weight >= DENSE_NOW && *dense < 1.0 {
            let ris: Vec<usize> = pieces.iter().map(|p| p.2).collect();
            self.analytic_suspend(&ris);
            return Some(Skip {
                hits: 0,
                event: None,
                dense: true,
            });
        }
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
        let left = u.remaining.unwrap_or(u64::MAX);
        let fit = |now: Time| {
            if now >= limit {
                0
            } else {
                (limit - now).div_ceil(cost)
            }
        };
        // Non-events made (each starting before `limit`), and whether the event's access
        // starts before it too.
        let (m, event_fits) = if rw && w > 0.0 {
            // Stores among the non-events (stores to dirty pages) cost two accesses: their
            // number is binomial. In chunks of at most half the accesses that fit, so that
            // every access of a chunk starts before `limit` whatever its stores.
            let dirty_store = (w * mass.iter().map(|m| m.2).sum::<f64>() / weight).min(1.0);
            let mut m = 0u64;
            let want = k.min(left);
            loop {
                let f = fit(ctx.now);
                if m == want || f == 0 {
                    break;
                }
                let n = (want - m).min(f.div_ceil(2));
                let stores = binomial(rng, n, dirty_store);
                m += n;
                ctx.now = later(ctx.now, (n + stores).saturating_mul(cost));
            }
            (m, m == k && k < left && fit(ctx.now) > 0)
        } else {
            let f = fit(ctx.now);
            let m = k.min(f).min(left);
            ctx.now = later(ctx.now, m.saturating_mul(cost));
            (m, k < f && k < left)
        };
        if m > 0 {
            *accesses += m;
            let mf = m as f64;
            if let Some(theta) = u.zipf {
                // Each page its own rate: the head's exactly, the rest by the series' sums.
                let inv_norm = strata[0].0;
                let (xd, xc) = (1.0 / weight, (1.0 - w) / weight);
                for (k, &(_, _, ri, _, _)) in pieces.iter().enumerate() {
                    let acc = regions[ri].as_mut().expect("checked above");
                    let key = (theta.to_bits(), u.starts[k], u.total);
                    let li = match acc.layers.iter().position(|l| l.key == key) {
                        Some(li) => li,
                        None => {
                            let n = u64::from(acc.pages());
                            let head = (0..n.min(64))
                                .take_while(|&o| zipf_pi(key.1 + o, theta, inv_norm) > HEAD_PI)
                                .count();
                            acc.layers.push(ZLayer {
                                key,
                                theta,
                                inv_norm,
                                head: vec![[0.0; 2]; head],
                                acc: [[0.0; ZTERMS]; 2],
                            });
                            acc.layers.len() - 1
                        }
                    };
                    let l = &mut acc.layers[li];
                    for t in 0..ZTERMS {
                        l.acc[0][t] += mf * xd.powi(t as i32 + 1);
                        l.acc[1][t] += mf * xc.powi(t as i32 + 1);
                    }
                    for off in 0..l.head.len() {
                        let pi = l.pi(off as u32);
                        l.head[off][0] += mf * (-(-pi * xd).ln_1p()).min(64.0);
                        l.head[off][1] += mf * (-(-pi * xc).ln_1p()).min(64.0);
                    }
                }
            } else {
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
                    acc.add(pa, pb, mf * rate_dirty, mf * rate_clean);
                }
            }
        }
        if !event_fits {
            return Some(Skip {
                hits: m,
                event: None,
                dense: false,
            });
        }
        // The event: a load or store of an unmapped page, or a store to a clean or zero page;
        // a stratum and class by their event weights, then a page of the class in the
        // stratum (each equally likely, or by its Zipf weight).
        let mut x = rng.unit_f64() * event_weight;
        let mut chosen = None;
        'pick: for (s, &(un, cz, _)) in mass.iter().enumerate() {
            for (on_unmapped, wgt) in [(true, un), (false, w * cz)] {
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
            let off = if let Some(z) = acc.zw.as_ref().filter(|_| u.zipf.is_some()) {
                let here = if on_unmapped { z.un_total } else { z.cz_total };
                if pick >= here {
                    pick -= here;
                    continue;
                }
                z.select(acc, on_unmapped, pick)
            } else if on_unmapped {
                let n = acc.pages();
                let here = acc.unmapped.count(pa, pb, n);
                if pick >= here {
                    pick -= here;
                    continue;
                }
                acc.unmapped.select(acc.unmapped.rank(pa) + pick)
            } else {
                let n = acc.pages();
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
            // The event runs next (Mm::access): start loading its page's record and links and
            // the hazard its class change reads, together rather than one after another (a
            // hint only).
            self.pages.prefetch(self.regions[ri].base + off);
            if let Some(h) = acc.snap.get(off as usize) {
                crate::prefetch::prefetch(h);
            }
            return Some(Skip {
                hits: m,
                event: Some((r, u64::from(off), write)),
                dense: false,
            });
        }
        unreachable!("the class counts sum over the regions")
    }

    /// A sequential pass's accesses from page `off` of region `ri` (Mm::regions index; `r` its
    /// index among the process's regions), up to the next event, the region's end `end`, or
    /// the first access that would start at or after `limit`: every page passed is touched, so
    /// its young bit is set at once (exactly as stepping would; the zero page's loads set
    /// nothing), and the time is their cost. The events: the next unmapped page, and a store
    /// (probability `write_percent` each, drawn as a geometric count over the clean and zero
    /// pages ahead) to a clean or zero page. With `rw`, a store to a dirty page costs two
    /// accesses (their number among the pages passed is binomial, and at most half the
    /// accesses that fit are passed at once). None if the region is not tracked or accesses
    /// cost no time.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn analytic_seq(
        &mut self,
        ctx: &mut Ctx,
        (r, ri): (u32, usize),
        off: u32,
        end: u32,
        write_percent: u64,
        rw: bool,
        limit: Time,
        rng: &mut SplitMix64,
    ) -> Option<Skip> {
        let cost = (u128::from(self.costs.access_ns) * u128::from(ctx.slowdown) / 1024) as u64;
        let a = self.analytic.as_mut()?;
        if cost == 0 {
            return None;
        }
        let base = self.regions[ri].base;
        let acc = a.regions[ri].as_mut()?;
        if !acc.live {
            let n = acc.pages() as usize;
            acc.rebuild(
                self.pages[base as usize..base as usize + n]
                    .iter()
                    .map(|p| p.flags),
            );
            a.live += 1;
        }
        let acc = a.regions[ri].as_mut().expect("tracked");
        let w = write_percent as f64 / 100.0;
        // The next unmapped page, and the clean or zero page that takes the first store.
        let mut stop = next_member(&acc.unmapped.words, off, end).unwrap_or(end);
        let mut event_on_unmapped = stop < end;
        if write_percent > 0 {
            let skips = if write_percent >= 100 {
                0
            } else {
                let x = 1.0 - rng.unit_f64();
                let g = (x.ln() / (-w).ln_1p()).floor();
                if g >= 4.0e9 {
                    u64::MAX
                } else {
                    g as u64
                }
            };
            if let Some(p) = nth_member(&acc.clean.words, &acc.zero.words, off, stop, skips) {
                stop = p;
                event_on_unmapped = false;
            }
        }
        // What fits before `limit` (rw: half of it, whatever the stores).
        let fit = if ctx.now >= limit {
            0
        } else {
            (limit - ctx.now).div_ceil(cost)
        };
        let fit = if rw && w > 0.0 { fit.div_ceil(2) } else { fit };
        let run_end = u64::from(stop).min(u64::from(off) + fit) as u32;
        let mut dirty = 0u64;
        for page in &mut self.pages[(base + off) as usize..(base + run_end) as usize] {
            match class_of(page.flags) {
                Class::Dirty => {
                    dirty += 1;
                    page.flags |= pg::YOUNG;
                }
                Class::Clean => page.flags |= pg::YOUNG,
                Class::Zero | Class::Unmapped => {}
            }
        }
        let hits = u64::from(run_end - off);
        let stores = if rw { binomial(rng, dirty, w) } else { 0 };
        a.accesses += hits;
        ctx.now = later(ctx.now, (hits + stores).saturating_mul(cost));
        let event = (run_end == stop && stop < end && ctx.now < limit).then(|| {
            let write = if event_on_unmapped {
                rng.below(100) < write_percent
            } else {
                true
            };
            (r, u64::from(stop), write)
        });
        Some(Skip {
            hits,
            event,
            dense: false,
        })
    }

    /// Stop tracking regions `ris` (Mm::regions indices) while a phase with dense events
    /// steps over them: every pending young bit is settled now (a bit set early reads the same
    /// as one set when it is first looked at: only readers clear it, and they settle first),
    /// then nothing is counted until [`Mm::analytic_skip`] counts the classes anew.
    pub(crate) fn analytic_suspend(&mut self, ris: &[usize]) {
        let Some(a) = self.analytic.as_mut() else {
            return;
        };
        for &ri in ris {
            let Some(r) = a.regions[ri].as_mut().filter(|r| r.live) else {
                continue;
            };
            let base = self.regions[ri].base;
            for off in 0..r.pages() {
                let page = &mut self.pages[(base + off) as usize];
                if page.flags & pg::YOUNG != 0 {
                    continue;
                }
                if let Some(hz) = r.hazard(r.recorded(off), off) {
                    if young_draw(&mut a.rng, hz - r.snap[off as usize]) {
                        page.set(pg::YOUNG);
                    }
                }
            }
            r.live = false;
            r.zw = None;
            r.layers.clear();
            a.live -= 1;
        }
    }

    /// Every tracked page is counted in the class its flags say (check_conservation).
    pub(crate) fn check_analytic(&self) -> Result<(), String> {
        let Some(a) = &self.analytic else {
            return Ok(());
        };
        for (ri, r) in a.regions.iter().enumerate() {
            let Some(r) = r.as_ref().filter(|r| r.live) else {
                continue;
            };
            let base = self.regions[ri].base;
            if let Some(z) = &r.zw {
                // The Zipf weights' sums follow the classes.
                let (mut un, mut cz) = (0u64, 0u64);
                for off in 0..r.pages() {
                    match r.recorded(off) {
                        Class::Unmapped => un += z.q[off as usize],
                        Class::Clean | Class::Zero => cz += z.q[off as usize],
                        Class::Dirty => {}
                    }
                }
                let (tu, tc) = (z.un.total(), z.cz.total());
                if (un, cz) != (z.un_total, z.cz_total) || (tu, tc) != (un, cz) {
                    return Err(format!(
                        "analytic: region {ri}'s Zipf weights: unmapped {} (tree {}), clean+zero {} (tree {}), but the pages sum to {un}, {cz}",
                        z.un_total, tu, z.cz_total, tc
                    ));
                }
            }
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

/// The first member of a bitmap in `a..b`.
fn next_member(words: &[u64], a: u32, b: u32) -> Option<u32> {
    let mut w = (a / 64) as usize;
    let mut bits = words.get(w)? & (u64::MAX << (a % 64));
    loop {
        if bits != 0 {
            let i = w as u32 * 64 + bits.trailing_zeros();
            return (i < b).then_some(i);
        }
        w += 1;
        if w as u32 * 64 >= b {
            return None;
        }
        bits = words[w];
    }
}

/// The member after `skip` others of the union of two bitmaps in `a..b`.
fn nth_member(x: &[u64], y: &[u64], a: u32, b: u32, mut skip: u64) -> Option<u32> {
    if a >= b {
        return None;
    }
    let mut w = (a / 64) as usize;
    let mut bits = (x[w] | y[w]) & (u64::MAX << (a % 64));
    loop {
        let n = u64::from(bits.count_ones());
        if skip < n {
            for _ in 0..skip {
                bits &= bits - 1;
            }
            let i = w as u32 * 64 + bits.trailing_zeros();
            return (i < b).then_some(i);
        }
        skip -= n;
        w += 1;
        if w as u32 * 64 >= b {
            return None;
        }
        bits = x[w] | y[w];
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
    fn sum_tree_selects_the_word_a_prefix_search_finds() {
        // Sizes around the fan-out's powers, words of weight 0 (skipped) among the others.
        for n in [1usize, 15, 16, 17, 255, 256, 257, 4097, 5000] {
            let words: Vec<u64> = (0..n as u64).map(|w| (w * 7919) % 5 * (w + 1)).collect();
            let mut t = SumTree::new(words.clone());
            let total: u64 = words.iter().sum();
            assert_eq!(t.total(), total);
            let check = |t: &SumTree, words: &[u64]| {
                let total: u64 = words.iter().sum();
                for k in (0..total).step_by(1 + total as usize / 500) {
                    let (mut w, mut rem) = (0, k);
                    while rem >= words[w] {
                        rem -= words[w];
                        w += 1;
                    }
                    assert_eq!(t.select(k), (w, rem), "n {n} k {k}");
                }
            };
            check(&t, &words);
            // Updates keep every level's sums.
            let mut words = words;
            for w in (0..n).step_by(3) {
                t.add(w, 11, true);
                words[w] += 11;
            }
            for w in (0..n).step_by(5) {
                let d = words[w] / 2;
                t.add(w, d, false);
                words[w] -= d;
            }
            assert_eq!(t.total(), words.iter().sum::<u64>());
            check(&t, &words);
        }
    }

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
