//! The one PRNG of reclaimlab: SplitMix64, plus a keyed derivation of independent sub-streams.
//!
//! Both the simulator and the real-kernel runner must draw the same numbers in the same order,
//! possibly from different languages, so everything here is specified bit for bit (see also
//! `docs/workload.md`). SplitMix64 is not cryptographic; it is fast, has a 64-bit state that is
//! trivial to seed, and passes BigCrush, which is all a workload generator needs.

/// The SplitMix64 state increment (2^64 / golden ratio, odd).
pub const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 output function (a variant of the MurmurHash3 64-bit finaliser). A bijection
/// on `u64`, so distinct inputs always give distinct outputs.
#[inline]
pub const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Standard SplitMix64 (Steele, Lea & Flood 2014; Vigna's reference `splitmix64.c`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    #[inline]
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// `state += GAMMA; return mix64(state)`.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        mix64(self.state)
    }

    /// A number in `[0, n)` by Lemire's multiply-high reduction, one draw per call:
    /// `(next_u64() * n) >> 64` in 128-bit arithmetic.
    ///
    /// Without the rejection step of Lemire's full method, some results are more likely than
    /// others by at most one part in `2^64 / n` (n = 10^9 gives a relative bias < 6e-11): far
    /// below anything a memory workload can notice, and it keeps exactly one draw per call,
    /// which makes the sequence easy to reproduce elsewhere. `n == 0` returns 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A uniform `f64` in `[0, 1)`: the top 53 bits of one draw times 2^-53.
    #[inline]
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// What a derived stream is used for; part of the derivation key so the streams never coincide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u64)]
pub enum Stream {
    /// Page bytes (`fill_page`); a = region id, b = variant.
    Content = 1,
    /// Access patterns (`AccessGen`); a, b chosen by the caller (e.g. process, phase).
    Access = 2,
    /// Anything else the simulator needs (e.g. tie-breaking); a, b chosen by the caller.
    Sim = 3,
}

/// Key value reserved for `content::variant_of`, distinct from every `Stream` value.
pub(crate) const VARIANT_KEY: u64 = 0;

/// Hashes (seed, key, a, b) to 64 bits by absorbing one word at a time:
///
/// ```text
/// h = mix64(seed + GAMMA)              // = first output of SplitMix64::new(seed)
/// h = mix64((h ^ key) + GAMMA)
/// h = mix64((h ^ a)   + GAMMA)
/// h = mix64((h ^ b)   + GAMMA)
/// ```
///
/// All arithmetic is on `uint64_t` with wrap-around. Since `mix64` is a bijection, for a fixed
/// prefix every step maps distinct words to distinct states.
#[inline]
pub fn derive_key(seed: u64, key: u64, a: u64, b: u64) -> u64 {
    let mut h = mix64(seed.wrapping_add(GAMMA));
    h = mix64((h ^ key).wrapping_add(GAMMA));
    h = mix64((h ^ a).wrapping_add(GAMMA));
    mix64((h ^ b).wrapping_add(GAMMA))
}

/// An independent SplitMix64 stream for (seed, purpose, a, b): its initial state is
/// `derive_key(seed, purpose as u64, a, b)`. In C:
///
/// ```c
/// static uint64_t mix64(uint64_t z) {
///     z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
///     z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
///     return z ^ (z >> 31);
/// }
/// #define GAMMA 0x9E3779B97F4A7C15ULL
/// uint64_t stream_state(uint64_t seed, uint64_t purpose, uint64_t a, uint64_t b) {
///     uint64_t h = mix64(seed + GAMMA);
///     h = mix64((h ^ purpose) + GAMMA);
///     h = mix64((h ^ a) + GAMMA);
///     return mix64((h ^ b) + GAMMA);
/// }
/// ```
#[inline]
pub fn stream(seed: u64, purpose: Stream, a: u64, b: u64) -> SplitMix64 {
    SplitMix64::new(derive_key(seed, purpose as u64, a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reference_outputs_seed_0() {
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(r.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn below_stays_in_range_and_uses_multiply_high() {
        let mut r = SplitMix64::new(7);
        let mut copy = r.clone();
        for n in [1u64, 2, 3, 10, 100, 1 << 33, u64::MAX] {
            let x = r.below(n);
            assert!(x < n);
            let raw = copy.next_u64();
            assert_eq!(x, ((raw as u128 * n as u128) >> 64) as u64);
        }
        assert_eq!(SplitMix64::new(1).below(0), 0);
    }

    #[test]
    fn unit_f64_is_top_53_bits() {
        let mut r = SplitMix64::new(0);
        let u = r.unit_f64();
        assert_eq!(
            u,
            (0xE220_A839_7B1D_CDAFu64 >> 11) as f64 / 9_007_199_254_740_992.0
        );
        for _ in 0..10_000 {
            let u = r.unit_f64();
            assert!((0.0..1.0).contains(&u));
        }
    }

    #[test]
    fn stream_derivation_matches_its_spelled_out_definition() {
        let (seed, a, b) = (42u64, 0x0001_0002, 17);
        let mut h = SplitMix64::new(seed).next_u64();
        for w in [Stream::Access as u64, a, b] {
            h = mix64((h ^ w).wrapping_add(GAMMA));
        }
        assert_eq!(stream(seed, Stream::Access, a, b), SplitMix64::new(h));
    }

    /// The vectors quoted in docs/workload.md.
    #[test]
    fn documented_vectors() {
        assert_eq!(derive_key(1, 2, 3, 4), 0xd55c_cd4a_eb3c_cafb);
        let mut s = stream(42, Stream::Access, 7, 9);
        assert_eq!(s.next_u64(), 0x4031_f9de_4f8c_3549);
        assert_eq!(s.next_u64(), 0x9ecb_060a_d9e3_b4b6);
    }

    #[test]
    fn streams_differ_by_every_key_part() {
        let base = stream(1, Stream::Content, 2, 3).next_u64();
        assert_ne!(base, stream(0, Stream::Content, 2, 3).next_u64());
        assert_ne!(base, stream(1, Stream::Access, 2, 3).next_u64());
        assert_ne!(base, stream(1, Stream::Content, 3, 3).next_u64());
        assert_ne!(base, stream(1, Stream::Content, 2, 4).next_u64());
        // a and b are not interchangeable.
        assert_ne!(base, stream(1, Stream::Content, 3, 2).next_u64());
    }
}
