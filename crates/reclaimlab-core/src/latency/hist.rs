//! A compact log-linear histogram of nanosecond durations (HDR-style).
//!
//! Values below 128 ns have a bucket each (exact). Above, every power of two [2^m, 2^(m+1))
//! is split into 64 equal buckets, so a bucket is at most 1/64 of its lower bound wide. A
//! percentile reports the midpoint of the bucket holding the exact nearest-rank value
//! (clamped to the exact maximum), so it is within 1/128 (0.79%) of that value: the stated
//! error bound, ≤ 0.8%. Count, sum and maximum are exact.
//!
//! Written here rather than taken from the `hdrhistogram` crate: that crate sizes its counts
//! array up front for a configured range and precision (tens of KiB per histogram at this
//! precision over the whole u64 range) and most of ours stay nearly empty; this one grows
//! its bucket vector only as far as the largest value seen, and merging is an element-wise sum.

use serde::Serialize;

/// Sub-buckets per power of two above the exact range.
const SUB: u64 = 64;
/// Values below this have a bucket of their own.
const EXACT: u64 = 2 * SUB;

/// Relative error bound of a reported percentile against the exact nearest-rank value.
pub const RELATIVE_ERROR: f64 = 1.0 / (2.0 * SUB as f64);

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u64,
    max: u64,
}

/// Bucket index of `v`.
#[inline]
fn index(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros() as u64; // ≥ 7
    let shift = msb - 6; // v >> shift is in [64, 128)
    (EXACT + (shift - 1) * SUB + ((v >> shift) - SUB)) as usize
}

/// The range [lo, hi] of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < EXACT {
        return (i, i);
    }
    let shift = (i - EXACT) / SUB + 1;
    let lo = (SUB + (i - EXACT) % SUB) << shift;
    (lo, lo + ((1u64 << shift) - 1))
}

/// What a histogram reports.
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    /// ns; exact.
    pub sum_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    /// ns; exact.
    pub max_ns: u64,
}

impl Histogram {
    #[inline]
    pub fn record(&mut self, v: u64) {
        let i = index(v);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Add every value of `other` (exact: bucket-wise sums).
    pub fn merge(&mut self, other: &Histogram) {
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.count += other.count;
        self.sum = self.sum.saturating_add(other.sum);
        self.max = self.max.max(other.max);
    }

    /// The nearest-rank `q`-quantile (0 < q ≤ 1, as parts per million): the value of rank
    /// ceil(q·count), reported as its bucket's midpoint, at most the maximum (the last rank is
    /// the maximum itself). 0 when empty.
    pub fn quantile_ppm(&self, q_ppm: u64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = (self.count as u128 * q_ppm as u128)
            .div_ceil(1_000_000)
            .max(1) as u64;
        if rank >= self.count {
            return self.max;
        }
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bounds(i);
                return (lo + (hi - lo) / 2).min(self.max);
            }
        }
        self.max
    }

    pub fn summary(&self) -> Summary {
        Summary {
            count: self.count,
            sum_ns: self.sum,
            p50_ns: self.quantile_ppm(500_000),
            p90_ns: self.quantile_ppm(900_000),
            p99_ns: self.quantile_ppm(990_000),
            p999_ns: self.quantile_ppm(999_000),
            max_ns: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_hold_their_values() {
        let mut prev_hi = None;
        for i in 0..(EXACT as usize + 57 * SUB as usize) {
            let (lo, hi) = bounds(i);
            if let Some(p) = prev_hi {
                assert_eq!(lo, p + 1, "bucket {i}");
            }
            assert_eq!(index(lo), i);
            assert_eq!(index(hi), i);
            assert!(
                (hi - lo) as f64 <= lo as f64 / SUB as f64,
                "bucket {i} too wide"
            );
            prev_hi = Some(hi);
        }
        assert_eq!(prev_hi, Some(u64::MAX));
    }

    #[test]
    fn quantiles_of_a_known_list() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let s = h.summary();
        assert_eq!(
            (s.count, s.max_ns, s.sum_ns),
            (1000, 1_000_000, 500_500_000)
        );
        for (got, exact) in [
            (s.p50_ns, 500_000u64),
            (s.p90_ns, 900_000),
            (s.p99_ns, 990_000),
            (s.p999_ns, 999_000),
        ] {
            assert!(
                (got as f64 - exact as f64).abs() <= exact as f64 * RELATIVE_ERROR,
                "{got} vs {exact}"
            );
        }
        let mut a = Histogram::default();
        let mut b = Histogram::default();
        for v in 1..=1000u64 {
            if v % 2 == 0 { &mut a } else { &mut b }.record(v * 1000);
        }
        a.merge(&b);
        assert_eq!(a, h);
    }
}
