//! Page content classes. A region has one class and `variants` distinct page contents; page
//! `i` of region `r` holds variant `variant_of(seed, r, i, variants)`.
//!
//! Compressibility matters more than the bytes themselves: zswap and zram store what the
//! compressor outputs, and same-filled pages are not compressed at all. The classes span the
//! cases that change the kernel's behaviour: zero (same-filled / zero-filled shortcut), random
//! (incompressible: compresses to more than a page), `mixK` (tunable ratio with a long zero
//! tail, which lzo-rle encodes as a run), text (a typical ~3:1 page) and `same:B` (same-filled
//! but not zero, which kernels >= 6.12 no longer special-case in zswap).

use std::fmt;
use std::str::FromStr;

use crate::rng::{derive_key, stream, Stream, VARIANT_KEY};

pub const PAGE_SIZE: usize = 4096;

/// A page content class, written in scenarios as `zero`, `random`, `mixK` (K random bytes then
/// zeros), `text` (dictionary words, about 3:1 compressible) or `same:BYTE` (BYTE repeated, a
/// decimal or 0x-prefixed hex number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Content {
    Zero,
    Random,
    Mix {
        random_bytes: u16,
    },
    Text,
    Same {
        byte: u8,
    },
    /// The bytes 0, 1, .., 255 repeated for the first `bytes` bytes, then zeros: the page the
    /// kernel's test_zswap.c writes ("half of each page with increasing data") with K = 2048.
    Ramp {
        bytes: u16,
    },
}

const CONTENT_FORMS: &str =
    "expected one of `zero`, `random`, `mixK` (K = 0..=4096), `rampK` (K = 0..=4096), `text`, `same:BYTE` (BYTE = 0..=255 decimal or 0x00..=0xff)";

impl FromStr for Content {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |why: &str| Err(format!("bad page content {s:?}: {why}; {CONTENT_FORMS}"));
        match s {
            "zero" => return Ok(Content::Zero),
            "random" => return Ok(Content::Random),
            "text" => return Ok(Content::Text),
            _ => {}
        }
        if let Some(k) = s.strip_prefix("mix") {
            return match parse_digits(k, 10) {
                Some(k) if k <= PAGE_SIZE as u64 => Ok(Content::Mix {
                    random_bytes: k as u16,
                }),
                Some(_) => bad("K is larger than a page"),
                None => bad("K must be a decimal number"),
            };
        }
        if let Some(k) = s.strip_prefix("ramp") {
            return match parse_digits(k, 10) {
                Some(k) if k <= PAGE_SIZE as u64 => Ok(Content::Ramp { bytes: k as u16 }),
                Some(_) => bad("K is larger than a page"),
                None => bad("K must be a decimal number"),
            };
        }
        if let Some(b) = s.strip_prefix("same:") {
            let value = match b.strip_prefix("0x").or_else(|| b.strip_prefix("0X")) {
                Some(hex) => parse_digits(hex, 16),
                None => parse_digits(b, 10),
            };
            return match value {
                Some(v) if v <= 0xff => Ok(Content::Same { byte: v as u8 }),
                Some(_) => bad("BYTE is larger than 255"),
                None => bad("BYTE must be a decimal or 0x-prefixed hex number"),
            };
        }
        bad("unknown content class")
    }
}

/// Digits only (no sign, no spaces), saturating so that long inputs still read as "too big"
/// rather than as a parse error.
fn parse_digits(s: &str, radix: u32) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.chars().try_fold(0u64, |acc, c| {
        let d = c.to_digit(radix)?;
        Some(
            acc.saturating_mul(u64::from(radix))
                .saturating_add(u64::from(d)),
        )
    })
}

impl fmt::Display for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Content::Zero => f.write_str("zero"),
            Content::Random => f.write_str("random"),
            Content::Mix { random_bytes } => write!(f, "mix{random_bytes}"),
            Content::Text => f.write_str("text"),
            Content::Same { byte } => write!(f, "same:{byte:#04x}"),
            Content::Ramp { bytes } => write!(f, "ramp{bytes}"),
        }
    }
}

// Scenarios spell contents as strings, so (de)serialise through the same parser and printer.
impl serde::Serialize for Content {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// The id that keys a region's content stream: process index in the high 16 bits, the region's
/// index within the process in the low 16. Both must be below 65536, or ids collide.
#[inline]
pub fn region_id(process_index: u32, region_index: u32) -> u32 {
    debug_assert!(
        process_index < 1 << 16 && region_index < 1 << 16,
        "region_id out of range"
    );
    (process_index << 16) | region_index
}

/// Which of a region's `variants` distinct contents page `page_index` holds:
/// `(derive_key(seed, 0, region_id, page_index) * variants) >> 64` (128-bit multiply), where
/// key 0 is reserved for this purpose (see `rng::derive_key`). Pages are independently and
/// (up to the multiply-high bias) uniformly assigned; `variants <= 1` always gives 0.
#[inline]
pub fn variant_of(seed: u64, region_id: u32, page_index: u64, variants: u32) -> u32 {
    if variants <= 1 {
        return 0;
    }
    let h = derive_key(seed, VARIANT_KEY, u64::from(region_id), page_index);
    ((u128::from(h) * u128::from(variants)) >> 64) as u32
}

/// How many distinct page contents a region of this class with `variants` variants really
/// holds: classes whose bytes do not depend on the variant have one. `variants == 0` counts as 1.
pub fn distinct_variants(content: Content, variants: u32) -> u32 {
    match content {
        Content::Zero
        | Content::Same { .. }
        | Content::Mix { random_bytes: 0 }
        | Content::Ramp { .. } => 1,
        Content::Random | Content::Text | Content::Mix { .. } => variants.max(1),
    }
}

/// The exact bytes of variant `variant` of a region with this content class.
///
/// * `zero`: all 0.
/// * `random`: the 512 outputs of `stream(seed, Content, region_id, variant)`, each stored
///   little-endian (output j fills bytes 8j..8j+8).
/// * `mixK`: the first K bytes of the `random` page of the same (seed, region, variant), then
///   zeros.
/// * `same:B`: all B.
/// * `rampK`: byte i is `i mod 256` for i < K, then zeros (the same for every variant).
/// * `text`: phrases of consecutive [`TEXT_WORDS`] entries, every word followed by one space,
///   cut at 4096 bytes (the last word or its space may be truncated). With `r` the same stream
///   as `random` and `N = TEXT_WORDS.len()`, each phrase draws, in this order:
///   `b = N; b = r.below(b) + 1` three times, `start = r.below(b)`, `len = 1 + r.below(10)`,
///   and writes words `start, start + 1, .., start + len - 1` (indices mod N). The nested draws
///   skew phrase starts strongly towards the common words at the front of the list, so
///   phrases recur, as in prose; that recurrence, not single words, is what LZ77 coders find.
///
///   Measured (1000 variants, codecs configured as the kernel does, see
///   `reclaimlab_core::compress`): mean compressed length lzo 1363 bytes (3.0:1, range
///   1187..1550), lz4 1458 (2.8:1, 1294..1649), zstd 915 (4.5:1), deflate 807 (5.1:1);
///   lzo-rle is lzo + 2 (its header; text has no zero runs).
pub fn fill_page(
    content: Content,
    seed: u64,
    region_id: u32,
    variant: u32,
    out: &mut [u8; PAGE_SIZE],
) {
    match content {
        Content::Zero => out.fill(0),
        Content::Same { byte } => out.fill(byte),
        Content::Random => fill_random(seed, region_id, variant, out, PAGE_SIZE),
        Content::Mix { random_bytes } => {
            let k = usize::from(random_bytes).min(PAGE_SIZE);
            fill_random(seed, region_id, variant, out, k);
            out[k..].fill(0);
        }
        Content::Text => fill_text(seed, region_id, variant, out),
        Content::Ramp { bytes } => {
            let k = usize::from(bytes).min(PAGE_SIZE);
            for (i, b) in out[..k].iter_mut().enumerate() {
                *b = i as u8;
            }
            out[k..].fill(0);
        }
    }
}

/// The first `len` bytes of the random page into `out[..len]`.
fn fill_random(seed: u64, region_id: u32, variant: u32, out: &mut [u8; PAGE_SIZE], len: usize) {
    let mut r = stream(
        seed,
        Stream::Content,
        u64::from(region_id),
        u64::from(variant),
    );
    for chunk in out[..len].chunks_mut(8) {
        let w = r.next_u64().to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// Nested `below` draws that skew a text phrase's first word towards the front of the list.
const TEXT_SKEW_LEVELS: u32 = 3;
/// Phrases are 1..=TEXT_MAX_PHRASE words long.
const TEXT_MAX_PHRASE: u64 = 10;

fn fill_text(seed: u64, region_id: u32, variant: u32, out: &mut [u8; PAGE_SIZE]) {
    let mut r = stream(
        seed,
        Stream::Content,
        u64::from(region_id),
        u64::from(variant),
    );
    let n = TEXT_WORDS.len();
    let mut pos = 0;
    loop {
        let mut bound = n as u64;
        for _ in 0..TEXT_SKEW_LEVELS {
            bound = r.below(bound) + 1;
        }
        let start = r.below(bound) as usize;
        let len = 1 + r.below(TEXT_MAX_PHRASE) as usize;
        for k in 0..len {
            let word = TEXT_WORDS[(start + k) % n].as_bytes();
            let take = word.len().min(PAGE_SIZE - pos);
            out[pos..pos + take].copy_from_slice(&word[..take]);
            pos += take;
            if pos == PAGE_SIZE {
                return;
            }
            out[pos] = b' ';
            pos += 1;
            if pos == PAGE_SIZE {
                return;
            }
        }
    }
}

/// True if every byte is 0.
#[inline]
pub fn is_zero_page(p: &[u8; PAGE_SIZE]) -> bool {
    // Compare words rather than bytes: this runs on every simulated swap-out.
    p.chunks_exact(8)
        .all(|w| u64::from_le_bytes(w.try_into().unwrap()) == 0)
}

/// `Some(w)` if the page is one 8-byte little-endian word `w` repeated, as tested by zram and by
/// zswap up to Linux 6.11 (`zswap_is_page_same_filled`, on 64-bit machines, where the word is
/// an `unsigned long`); from 6.12 zswap only recognises zero-filled pages.
#[inline]
pub fn same_filled_word(p: &[u8; PAGE_SIZE]) -> Option<u64> {
    let mut words = p
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap()));
    let first = words.next()?;
    words.all(|w| w == first).then_some(first)
}

/// The `text` vocabulary, roughly most common first (the generator favours low indices).
/// Lower-case English words, no punctuation; the order is part of the content definition.
pub const TEXT_WORDS: [&str; 320] = [
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on",
    "are", "with", "as", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had",
    "by", "not", "but", "what", "some", "we", "can", "out", "other", "were", "all", "there",
    "when", "up", "use", "your", "how", "said", "an", "each", "she", "which", "do", "their",
    "time", "if", "will", "way", "about", "many", "then", "them", "write", "would", "like", "so",
    "these", "her", "long", "make", "thing", "see", "him", "two", "has", "look", "more", "day",
    "could", "go", "come", "did", "number", "sound", "no", "most", "people", "my", "over", "know",
    "water", "than", "call", "first", "who", "may", "down", "side", "been", "now", "find", "any",
    "new", "work", "part", "take", "get", "place", "made", "live", "where", "after", "back",
    "little", "only", "round", "man", "year", "came", "show", "every", "good", "me", "give", "our",
    "under", "name", "very", "through", "just", "form", "sentence", "great", "think", "say",
    "help", "low", "line", "differ", "turn", "cause", "much", "mean", "before", "move", "right",
    "boy", "old", "too", "same", "tell", "does", "set", "three", "want", "air", "well", "also",
    "play", "small", "end", "put", "home", "read", "hand", "port", "large", "spell", "add", "even",
    "land", "here", "must", "big", "high", "such", "follow", "act", "why", "ask", "men", "change",
    "went", "light", "kind", "off", "need", "house", "picture", "try", "us", "again", "animal",
    "point", "mother", "world", "near", "build", "self", "earth", "father", "head", "stand", "own",
    "page", "should", "country", "found", "answer", "school", "grow", "study", "still", "learn",
    "plant", "cover", "food", "sun", "four", "between", "state", "keep", "eye", "never", "last",
    "let", "thought", "city", "tree", "cross", "farm", "hard", "start", "might", "story", "saw",
    "far", "sea", "draw", "left", "late", "run", "while", "press", "close", "night", "real",
    "life", "few", "north", "open", "seem", "together", "next", "white", "children", "begin",
    "got", "walk", "example", "ease", "paper", "group", "always", "music", "those", "both", "mark",
    "often", "letter", "until", "mile", "river", "car", "feet", "care", "second", "book", "carry",
    "took", "science", "eat", "room", "friend", "began", "idea", "fish", "mountain", "stop",
    "once", "base", "hear", "horse", "cut", "sure", "watch", "color", "face", "wood", "main",
    "enough", "plain", "girl", "usual", "young", "ready", "above", "ever", "red", "list", "though",
    "feel", "talk", "bird", "soon", "body", "dog", "family", "direct", "pose", "leave", "song",
    "measure",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn page(content: Content, seed: u64, region: u32, variant: u32) -> Box<[u8; PAGE_SIZE]> {
        let mut p = Box::new([0xEEu8; PAGE_SIZE]);
        fill_page(content, seed, region, variant, &mut p);
        p
    }

    #[test]
    fn parse_display_round_trip() {
        let cases = [
            ("zero", Content::Zero),
            ("random", Content::Random),
            ("text", Content::Text),
            ("mix0", Content::Mix { random_bytes: 0 }),
            ("mix128", Content::Mix { random_bytes: 128 }),
            ("mix4096", Content::Mix { random_bytes: 4096 }),
            ("same:0x5a", Content::Same { byte: 0x5a }),
            ("same:0x00", Content::Same { byte: 0 }),
            ("same:0xff", Content::Same { byte: 255 }),
        ];
        for (s, c) in cases {
            assert_eq!(s.parse::<Content>(), Ok(c), "{s}");
            assert_eq!(c.to_string(), s);
        }
        // Other accepted spellings print canonically.
        assert_eq!("same:90".parse(), Ok(Content::Same { byte: 0x5a }));
        assert_eq!("same:0X5A".parse(), Ok(Content::Same { byte: 0x5a }));
        assert_eq!("same:0x0005a".parse(), Ok(Content::Same { byte: 0x5a }));
        assert_eq!("same:255".parse(), Ok(Content::Same { byte: 255 }));
        assert_eq!("mix0128".parse(), Ok(Content::Mix { random_bytes: 128 }));
        assert_eq!(
            "same:90".parse::<Content>().unwrap().to_string(),
            "same:0x5a"
        );
    }

    #[test]
    fn parse_rejects_bad_strings() {
        for s in [
            "",
            "Zero",
            "zero ",
            " text",
            "rand",
            "mix",
            "mix-1",
            "mix+1",
            "mix4097",
            "mix1k",
            "mix99999999999999999999999",
            "same",
            "same:",
            "same:256",
            "same:0x100",
            "same:0x",
            "same:-1",
            "same:x5a",
            "same:5a",
            "same:0x5g",
            "same: 1",
            "same:0x10000000000000000000",
            "same:+1",
            "mixed",
            "text2",
        ] {
            let err = s.parse::<Content>().expect_err(s);
            assert!(err.contains("expected one of"), "{s}: {err}");
        }
    }

    #[test]
    fn serde_uses_the_string_form() {
        let c = Content::Same { byte: 0x5a };
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(j, "\"same:0x5a\"");
        assert_eq!(serde_json::from_str::<Content>(&j).unwrap(), c);
        assert!(serde_json::from_str::<Content>("\"mix5000\"").is_err());
    }

    #[test]
    fn region_id_packs_process_and_region() {
        assert_eq!(region_id(0, 0), 0);
        assert_eq!(region_id(1, 2), 0x0001_0002);
        assert_eq!(region_id(0xffff, 0xffff), 0xffff_ffff);
    }

    #[test]
    fn variant_of_is_deterministic_in_range_and_spread() {
        let mut counts = [0u32; 8];
        for p in 0..8000 {
            let v = variant_of(9, 3, p, 8);
            assert_eq!(v, variant_of(9, 3, p, 8));
            counts[v as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (850..1150).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(variant_of(9, 3, 5, 1), 0);
        assert_eq!(variant_of(9, 3, 5, 0), 0);
        // The seed and the region change the assignment.
        let a: Vec<u32> = (0..64).map(|p| variant_of(9, 3, p, 1000)).collect();
        let b: Vec<u32> = (0..64).map(|p| variant_of(10, 3, p, 1000)).collect();
        let c: Vec<u32> = (0..64).map(|p| variant_of(9, 4, p, 1000)).collect();
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn distinct_variants_per_class() {
        assert_eq!(distinct_variants(Content::Zero, 10), 1);
        assert_eq!(distinct_variants(Content::Same { byte: 3 }, 10), 1);
        assert_eq!(distinct_variants(Content::Mix { random_bytes: 0 }, 10), 1);
        assert_eq!(distinct_variants(Content::Mix { random_bytes: 1 }, 10), 10);
        assert_eq!(distinct_variants(Content::Random, 10), 10);
        assert_eq!(distinct_variants(Content::Text, 10), 10);
        assert_eq!(distinct_variants(Content::Text, 0), 1);
    }

    /// The vectors quoted in docs/workload.md.
    #[test]
    fn documented_vectors() {
        let v: Vec<u32> = (0..8)
            .map(|p| variant_of(1, region_id(1, 2), p, 10))
            .collect();
        assert_eq!(v, [8, 7, 9, 4, 6, 8, 6, 7]);
        let r = page(Content::Random, 1, 0, 0);
        assert_eq!(
            r[..16],
            [
                0x22, 0xd5, 0x1e, 0x4e, 0xab, 0xdc, 0x55, 0x0b, 0xc9, 0xe6, 0xe1, 0x03, 0x99, 0x70,
                0x82, 0x01
            ]
        );
        let t = page(Content::Text, 1, 0, 0);
        assert_eq!(
            std::str::from_utf8(&t[..120]).unwrap(),
            "the of and the and to a in is it you the of and to a in is it you that to a in is it you that he was for the of and to a"
        );
        assert_eq!(
            std::str::from_utf8(&t[4060..]).unwrap(),
            "and to a in is it you was for on are"
        );
    }

    #[test]
    fn fill_page_is_deterministic() {
        for c in [
            Content::Zero,
            Content::Random,
            Content::Mix { random_bytes: 1000 },
            Content::Text,
            Content::Same { byte: 7 },
        ] {
            assert_eq!(page(c, 5, 6, 7), page(c, 5, 6, 7), "{c}");
        }
    }

    #[test]
    fn random_page_is_the_content_stream_little_endian() {
        let p = page(Content::Random, 5, 6, 7);
        let mut r = stream(5, Stream::Content, 6, 7);
        for chunk in p.chunks_exact(8) {
            assert_eq!(chunk, r.next_u64().to_le_bytes());
        }
    }

    #[test]
    fn random_variants_regions_and_seeds_differ() {
        let p = page(Content::Random, 1, 2, 0);
        assert_ne!(p, page(Content::Random, 1, 2, 1));
        assert_ne!(p, page(Content::Random, 1, 3, 0));
        assert_ne!(p, page(Content::Random, 2, 2, 0));
        assert_ne!(page(Content::Text, 1, 2, 0), page(Content::Text, 1, 2, 1));
    }

    #[test]
    fn same_page_is_all_that_byte() {
        let p = page(Content::Same { byte: 0x5a }, 1, 2, 3);
        assert!(p.iter().all(|&b| b == 0x5a));
        assert_eq!(same_filled_word(&p), Some(0x5a5a_5a5a_5a5a_5a5a));
        assert!(!is_zero_page(&p));
    }

    #[test]
    fn ramp_is_counting_bytes_then_zeros() {
        let p = page(Content::Ramp { bytes: 2048 }, 1, 2, 3);
        assert!(p[..2048].iter().enumerate().all(|(i, &b)| b == i as u8));
        assert!(p[2048..].iter().all(|&b| b == 0));
        assert_eq!(p, page(Content::Ramp { bytes: 2048 }, 9, 8, 7));
        assert_eq!("ramp2048".parse(), Ok(Content::Ramp { bytes: 2048 }));
        assert!("ramp4097".parse::<Content>().is_err());
        assert_eq!(Content::Ramp { bytes: 7 }.to_string(), "ramp7");
        assert_eq!(distinct_variants(Content::Ramp { bytes: 2048 }, 10), 1);
    }

    #[test]
    fn zero_page_and_mix0() {
        let z = page(Content::Zero, 1, 2, 3);
        assert!(is_zero_page(&z));
        assert_eq!(same_filled_word(&z), Some(0));
        assert_eq!(page(Content::Mix { random_bytes: 0 }, 1, 2, 3), z);
    }

    #[test]
    fn mix128_is_random_prefix_then_zeros() {
        let m = page(Content::Mix { random_bytes: 128 }, 1, 2, 3);
        let r = page(Content::Random, 1, 2, 3);
        assert_eq!(m[..128], r[..128]);
        assert!(m[128..].iter().all(|&b| b == 0));
        assert!(m[..128].iter().filter(|&&b| b != 0).count() > 100);
        // A K that is not a multiple of 8 cuts a word.
        let m = page(Content::Mix { random_bytes: 13 }, 1, 2, 3);
        assert_eq!(m[..13], r[..13]);
        assert!(m[13..].iter().all(|&b| b == 0));
        assert_eq!(page(Content::Mix { random_bytes: 4096 }, 1, 2, 3), r);
    }

    #[test]
    fn text_page_is_words_and_single_spaces() {
        let p = page(Content::Text, 1, 2, 3);
        let s = std::str::from_utf8(&p[..]).unwrap();
        let words: Vec<&str> = s.split(' ').collect();
        assert!(words.len() > 400, "{}", words.len());
        // Every word but the possibly truncated last one comes from the vocabulary.
        for w in &words[..words.len() - 1] {
            assert!(TEXT_WORDS.contains(w), "{w:?}");
        }
        let last = words[words.len() - 1];
        assert!(TEXT_WORDS.iter().any(|w| w.starts_with(last)), "{last:?}");
    }

    #[test]
    fn vocabulary_is_clean() {
        let mut sorted = TEXT_WORDS.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), TEXT_WORDS.len(), "duplicate words");
        assert!(TEXT_WORDS
            .iter()
            .all(|w| !w.is_empty() && w.bytes().all(|c| c.is_ascii_lowercase())));
    }

    /// docs/workload.md carries a copy of the vocabulary for reimplementers; keep them equal.
    #[test]
    fn documented_vocabulary_matches() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/workload.md");
        let Ok(doc) = std::fs::read_to_string(path) else {
            eprintln!("{path} not found; skipping");
            return;
        };
        let block = doc
            .split("```text")
            .nth(1)
            .expect("vocabulary block")
            .split("```")
            .next()
            .unwrap();
        let words: Vec<&str> = block.split_whitespace().collect();
        assert_eq!(words, TEXT_WORDS);
    }

    #[test]
    fn same_filled_word_needs_all_words_equal() {
        let mut p = Box::new([0u8; PAGE_SIZE]);
        for w in p.chunks_exact_mut(8) {
            w.copy_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        }
        assert_eq!(same_filled_word(&p), Some(0x0102_0304_0506_0708));
        p[4095] ^= 1;
        assert_eq!(same_filled_word(&p), None);
        assert!(!is_zero_page(&p));
        let mut z = Box::new([0u8; PAGE_SIZE]);
        z[2048] = 1;
        assert!(!is_zero_page(&z));
        assert_eq!(same_filled_word(&z), None);
    }
}
