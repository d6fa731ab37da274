//! Codecs: compressed sizes from the real codec implementations, run once per distinct page
//! content and cached by the caller (never in the simulator's hot loop).
//!
//! [`compressed_len`] returns the number of bytes the kernel's compressor writes for one 4 KiB
//! page when given a two-page output buffer (as zswap does), so an incompressible page yields
//! a length above 4096 instead of an error; deciding what to do with such a page is the
//! caller's business. Per codec (kernel crypto name):
//!
//! Each codec is a plug-in in a file of its own (lzo.rs, lzo_rle.rs, lz4.rs, zstd.rs,
//! deflate.rs): its kernel name, how the kernel's implementation is reproduced, its cost
//! figures, and its functions, in one [`CodecInfo`]. [`CODECS`] registers them. lzo1x.rs is the
//! LZO1X encoder and decoder that lzo and lzo-rle share; decode.rs the decoder primitives.
//!
//! Beyond the unit tests, the lzo, lzo-rle and lz4 encoders were compared once, byte for
//! byte, with the kernel's own compressor sources built in user space (3063 and 5039 inputs,
//! all identical; lzo with both the 64-bit CTZ and the generic match loop). Those sources are
//! not part of this repository, so that comparison is not a test here.
//!
//! Everything is deterministic; codec state is per thread and reset for every page.

mod decode;
mod deflate;
mod lz4;
mod lzo;
mod lzo1x;
mod lzo_rle;
mod plugin;
mod zstd;

use std::fmt;
use std::str::FromStr;

use reclaimlab_workload::PAGE_SIZE;

pub use deflate::zlib_version;
pub use plugin::{page_mix, CodecCost, CodecInfo, CostFigure, BYTE_KINDS, COMPRESS_BUF_LEN};
pub use zstd::ZSTD_ESTIMATED_SRC_SIZE;

/// Every codec, in [`Codec`] order.
pub const CODECS: [&CodecInfo; 5] = [
    &lzo::INFO,
    &lzo_rle::INFO,
    &lz4::INFO,
    &zstd::INFO,
    &deflate::INFO,
];

/// A compressor, named as in the kernel crypto API (and `/sys/module/zswap/parameters/compressor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Codec {
    Lzo,
    LzoRle,
    Lz4,
    Zstd,
    Deflate,
}

impl Codec {
    pub const ALL: [Codec; 5] = [
        Codec::Lzo,
        Codec::LzoRle,
        Codec::Lz4,
        Codec::Zstd,
        Codec::Deflate,
    ];

    /// The codec's plug-in: name, cost figures, functions.
    pub fn info(self) -> &'static CodecInfo {
        CODECS[self as usize]
    }

    /// The kernel crypto name.
    pub fn name(self) -> &'static str {
        self.info().name
    }
}

pub const ALL: [Codec; 5] = Codec::ALL;

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Codec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Codec::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = CODECS.iter().map(|c| c.name).collect();
                format!(
                    "unknown compressor {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

impl serde::Serialize for Codec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Codec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How many bytes `codec` compresses `page` to, as the kernel would (see the codec's file).
pub fn compressed_len(codec: Codec, page: &[u8; PAGE_SIZE]) -> u32 {
    let len = (codec.info().compressed_len)(page);
    u32::try_from(len).expect("compressed page longer than 4 GiB")
}

// Whole-codec round trips: the bytes behind `compressed_len`, and their decompression. Used to
// time the codecs (`reclaimlab calibrate`, through the Python bindings, which own the clock);
// the simulator itself only ever needs lengths.

/// Compresses `page` with `codec` into `dst` and returns the length: the same bytes, so the
/// same length, as [`compressed_len`] (a test checks both). Per-thread codec state is reused
/// and reset for every page, as the kernel reuses its per-CPU contexts: the rust-lzo and zstd
/// contexts of `compressed_len`, and a deflate stream reset with `deflateReset` (where
/// `compressed_len` builds a fresh one). The lzo-rle and lz4 encoders write to a per-thread
/// vector first; the copy into `dst` (a few hundred ns at most) is part of the work, much as
/// zswap copies the compressed bytes from its buffer into the pool.
pub fn compress(codec: Codec, page: &[u8; PAGE_SIZE], dst: &mut [u8; COMPRESS_BUF_LEN]) -> usize {
    (codec.info().compress)(page, dst)
}

/// Decompresses `src` (what [`compress`] wrote for `codec`) into `dst`. An error (naming what
/// is wrong) when `src` is not a valid stream or does not decode to exactly one page.
///
/// * `lzo`, `lzo-rle`: one LZO1X decoder for both bitstream versions, as the kernel's
///   `lzo1x_decompress_safe` (bounds-checked, with the zero-run instruction of version 1);
///   matches are copied with `memmove`-style block copies, as the kernel's COPY8 loops do.
/// * `lz4`: an LZ4 block decoder (the format of lib/lz4's `LZ4_decompress_safe`).
/// * `zstd`: libzstd's `ZSTD_decompressDCtx` with a per-thread context (the kernel's
///   `zstd_decompress_dctx`).
/// * `deflate`: zlib's raw inflate (window bits 11) with a per-thread stream reset for every
///   page (crypto/deflate.c's `zlib_inflateReset` + `zlib_inflate(Z_SYNC_FLUSH)`).
pub fn decompress(codec: Codec, src: &[u8], dst: &mut [u8; PAGE_SIZE]) -> Result<(), String> {
    let n = (codec.info().decompress)(src, dst).map_err(|e| format!("{codec}: {e}"))?;
    if n != PAGE_SIZE {
        return Err(format!("{codec}: decompressed to {n} bytes, not one page"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::deflate::{deflate_compress, DEFLATE_WINDOW_BITS};
    use super::lzo::lzo_compress;
    use super::plugin::DST_LEN;
    use super::zstd::zstd_compress;
    use super::*;
    use reclaimlab_workload::content::{fill_page, Content};

    fn page(content: Content, variant: u32) -> Box<[u8; PAGE_SIZE]> {
        let mut p = Box::new([0u8; PAGE_SIZE]);
        fill_page(content, 1, 0, variant, &mut p);
        p
    }

    /// A spread of contents including the awkward ones: runs of zeros of many lengths at
    /// odd offsets, long matches, pages that are nearly but not quite compressible.
    fn test_pages() -> Vec<Box<[u8; PAGE_SIZE]>> {
        let mut pages = Vec::new();
        for c in [
            "zero",
            "random",
            "text",
            "same:0x5a",
            "mix1",
            "mix13",
            "mix100",
            "mix1024",
            "mix2048",
            "mix4000",
        ] {
            for v in 0..4 {
                pages.push(page(c.parse().unwrap(), v));
            }
        }
        let mut r = reclaimlab_workload::SplitMix64::new(99);
        for _ in 0..200 {
            // Text and random chunks, zero runs of assorted lengths, repeats of earlier bytes.
            let mut p = page(Content::Text, r.below(1000) as u32);
            let noise = page(Content::Random, r.below(1000) as u32);
            let mut at = 0;
            while at < PAGE_SIZE {
                let len = (1 + r.below(600) as usize).min(PAGE_SIZE - at);
                match r.below(4) {
                    0 => p[at..at + len].fill(0),
                    1 => p[at..at + len].copy_from_slice(&noise[at..at + len]),
                    2 if at > 0 => {
                        let from = r.below(at as u64) as usize;
                        let len = len.min(at - from);
                        p.copy_within(from..from + len, at);
                    }
                    _ => {}
                }
                at += len;
            }
            pages.push(p);
        }
        pages
    }

    #[test]
    fn names_round_trip() {
        for c in Codec::ALL {
            assert_eq!(c.to_string().parse::<Codec>(), Ok(c));
        }
        assert_eq!("lzo-rle".parse(), Ok(Codec::LzoRle));
        assert!("lzo_rle".parse::<Codec>().is_err());
        assert!("LZ4".parse::<Codec>().is_err());
        assert_eq!(ALL, Codec::ALL);
    }

    #[test]
    fn our_lzo_encoder_matches_rust_lzo_byte_for_byte() {
        let mut ours = Vec::new();
        let mut theirs = [0u8; DST_LEN];
        for (i, p) in test_pages().iter().enumerate() {
            lzo1x::compress(&p[..], lzo1x::Version::V0, &mut ours);
            assert_eq!(ours, lzo_compress(&p[..], &mut theirs), "page {i}");
        }
        // Sizes other than a page, including the literal-only and multi-chunk paths.
        let big: Vec<u8> = test_pages()
            .iter()
            .take(40)
            .flat_map(|p| p.iter().copied())
            .collect();
        for len in [
            0,
            1,
            3,
            20,
            21,
            22,
            25,
            100,
            238,
            239,
            300,
            0xc000,
            0xc001,
            0xc000 + 21,
            big.len(),
        ] {
            let src = &big[..len];
            let mut theirs = vec![0u8; len + len / 16 + 67];
            lzo1x::compress(src, lzo1x::Version::V0, &mut ours);
            assert_eq!(ours, lzo_compress(src, &mut theirs), "len {len}");
            assert_eq!(lzo1x::decompress(&ours).unwrap(), src, "len {len}");
        }
    }

    #[test]
    fn lzo_rle_round_trips_and_uses_runs() {
        let mut out = Vec::new();
        for (i, p) in test_pages().iter().enumerate() {
            lzo1x::compress(&p[..], lzo1x::Version::V1, &mut out);
            assert_eq!(&out[..2], &[17, 1], "version header");
            assert_eq!(lzo1x::decompress(&out).unwrap(), &p[..], "page {i}");
        }
        let big: Vec<u8> = test_pages()
            .iter()
            .take(40)
            .flat_map(|p| p.iter().copied())
            .collect();
        for len in [0, 1, 20, 21, 30, 0xbfff, 0xc000, big.len()] {
            lzo1x::compress(&big[..len], lzo1x::Version::V1, &mut out);
            assert_eq!(lzo1x::decompress(&out).unwrap(), &big[..len], "len {len}");
        }
        // A zero page is header, one literal run, runs of at most 2051 zeros, and the tail.
        let zero = page(Content::Zero, 0);
        let rle = compressed_len(Codec::LzoRle, &zero);
        let plain = compressed_len(Codec::Lzo, &zero);
        assert!(rle < plain, "rle {rle} vs plain {plain}");
        // Our decoder agrees with rust-lzo's (the kernel's pre-RLE decoder) on plain streams.
        let mut theirs = [0u8; DST_LEN];
        for p in test_pages().iter().take(60) {
            let c = lzo_compress(&p[..], &mut theirs).to_vec();
            let mut back = [0u8; PAGE_SIZE];
            let (d, err) = rust_lzo::LZOContext::decompress_to_slice(&c, &mut back);
            assert!(err == rust_lzo::LZOError::OK);
            assert_eq!(d, &p[..]);
            assert_eq!(lzo1x::decompress(&c).unwrap(), &p[..]);
        }
    }

    fn lz4_sys_compress(src: &[u8]) -> Vec<u8> {
        // SAFETY: buffers valid for the lengths passed; the bound guarantees success.
        unsafe {
            let cap = lz4_sys::LZ4_compressBound(src.len() as i32);
            let mut dst = vec![0u8; cap as usize];
            let n = lz4_sys::LZ4_compress_default(
                src.as_ptr().cast(),
                dst.as_mut_ptr().cast(),
                src.len() as i32,
                cap,
            );
            assert!(n > 0);
            dst.truncate(n as usize);
            dst
        }
    }

    fn lz4_sys_decompress(src: &[u8], len: usize) -> Vec<u8> {
        let mut dst = vec![0u8; len];
        // SAFETY: buffers valid for the lengths passed.
        let n = unsafe {
            lz4_sys::LZ4_decompress_safe(
                src.as_ptr().cast(),
                dst.as_mut_ptr().cast(),
                src.len() as i32,
                len as i32,
            )
        };
        assert_eq!(n, len as i32, "lz4 decompression failed");
        dst
    }

    #[test]
    fn lz4_port_matches_lz4_sys_and_round_trips() {
        let mut out = Vec::new();
        let mut differ = 0;
        let pages = test_pages();
        for (i, p) in pages.iter().enumerate() {
            let reference = lz4_sys_compress(&p[..]);
            lz4::compress(&p[..], lz4::Limit::Upstream, &mut out);
            assert_eq!(out, reference, "page {i}");
            lz4::compress(&p[..], lz4::Limit::Kernel, &mut out);
            assert_eq!(lz4_sys_decompress(&out, PAGE_SIZE), &p[..], "page {i}");
            if out != reference {
                differ += 1;
                assert!(out.len().abs_diff(reference.len()) <= 8, "page {i}");
            }
        }
        eprintln!(
            "lz4: kernel and 1.10 output differ on {differ} of {} pages",
            pages.len()
        );
        for len in [0, 1, 12, 13, 14, 100, 4095] {
            let src = &pages[30][..len];
            lz4::compress(src, lz4::Limit::Upstream, &mut out);
            assert_eq!(out, lz4_sys_compress(src), "len {len}");
            lz4::compress(src, lz4::Limit::Kernel, &mut out);
            assert_eq!(lz4_sys_decompress(&out, len), src, "len {len}");
        }
    }

    #[test]
    fn zstd_frames_round_trip_and_carry_the_content_size() {
        let mut dst = [0u8; DST_LEN];
        for p in test_pages().iter().take(60) {
            let n = zstd_compress(&p[..], ZSTD_ESTIMATED_SRC_SIZE, &mut dst);
            let frame = &dst[..n];
            assert_eq!(::zstd::bulk::decompress(frame, PAGE_SIZE).unwrap(), &p[..]);
            // Magic, then a descriptor with single-segment set and a 2-byte content size.
            assert_eq!(frame[..4], 0xFD2F_B528u32.to_le_bytes());
            assert_eq!(frame[4], 0b0110_0000);
            assert_eq!(
                u16::from_le_bytes([frame[5], frame[6]]) as usize + 256,
                PAGE_SIZE
            );
        }
    }

    #[test]
    fn deflate_round_trips_as_raw_deflate() {
        let mut dst = [0u8; DST_LEN];
        for p in test_pages().iter().take(60) {
            let n = deflate_compress(&p[..], &mut dst);
            let mut back = vec![0u8; PAGE_SIZE];
            let mut d = flate2::Decompress::new_with_window_bits(false, DEFLATE_WINDOW_BITS);
            let status = d
                .decompress(&dst[..n], &mut back, flate2::FlushDecompress::Finish)
                .unwrap();
            assert_eq!(status, flate2::Status::StreamEnd);
            assert_eq!(d.total_out() as usize, PAGE_SIZE);
            assert_eq!(back, &p[..]);
        }
    }

    #[test]
    fn compress_gives_compressed_len_bytes_and_decompress_round_trips() {
        let mut dst = [0u8; COMPRESS_BUF_LEN];
        let mut back = [0u8; PAGE_SIZE];
        for (i, p) in test_pages().iter().enumerate() {
            for c in Codec::ALL {
                let n = compress(c, p, &mut dst);
                assert_eq!(n as u32, compressed_len(c, p), "{c} page {i}");
                back.fill(0xa5);
                decompress(c, &dst[..n], &mut back).unwrap_or_else(|e| panic!("page {i}: {e}"));
                assert_eq!(&back[..], &p[..], "{c} page {i}");
            }
        }
    }

    #[test]
    fn compress_bytes_are_the_reference_encoders_bytes() {
        let mut dst = [0u8; COMPRESS_BUF_LEN];
        let mut reference = [0u8; DST_LEN];
        let mut back = [0u8; PAGE_SIZE];
        for (i, p) in test_pages().iter().enumerate().take(80) {
            // lzo: rust-lzo's bytes, and rust-lzo (the kernel's pre-RLE decoder) reads ours.
            let n = compress(Codec::Lzo, p, &mut dst);
            assert_eq!(
                &dst[..n],
                lzo_compress(&p[..], &mut reference),
                "lzo page {i}"
            );
            let (d, err) = rust_lzo::LZOContext::decompress_to_slice(&dst[..n], &mut back);
            assert!(err == rust_lzo::LZOError::OK && d == &p[..], "lzo page {i}");
            // lzo-rle: our encoder's bytes; the test decoder agrees with the production one.
            let n = compress(Codec::LzoRle, p, &mut dst);
            assert_eq!(
                lzo1x::decompress(&dst[..n]).unwrap(),
                &p[..],
                "lzo-rle page {i}"
            );
            // lz4: lz4-sys reads ours, ours reads lz4-sys's.
            let n = compress(Codec::Lz4, p, &mut dst);
            assert_eq!(
                lz4_sys_decompress(&dst[..n], PAGE_SIZE),
                &p[..],
                "lz4 page {i}"
            );
            decompress(Codec::Lz4, &lz4_sys_compress(&p[..]), &mut back).unwrap();
            assert_eq!(&back[..], &p[..], "lz4 page {i}");
            // deflate: a reset stream emits what a fresh one does.
            let n = compress(Codec::Deflate, p, &mut dst);
            let m = deflate_compress(&p[..], &mut reference);
            assert_eq!(&dst[..n], &reference[..m], "deflate page {i}");
            // zstd: libzstd's own decoder reads the frame.
            let n = compress(Codec::Zstd, p, &mut dst);
            assert_eq!(
                ::zstd::bulk::decompress(&dst[..n], PAGE_SIZE).unwrap(),
                &p[..],
                "zstd page {i}"
            );
        }
    }

    #[test]
    fn decompress_rejects_bad_input_without_panicking() {
        let mut dst = [0u8; COMPRESS_BUF_LEN];
        let mut back = [0u8; PAGE_SIZE];
        let text = page(Content::Text, 3);
        for c in Codec::ALL {
            let n = compress(c, &text, &mut dst);
            for cut in [0, 1, 2, 5, n / 2, n - 1] {
                assert!(
                    decompress(c, &dst[..cut], &mut back).is_err(),
                    "{c} cut at {cut}"
                );
            }
            // Garbage: an error (or, by extraordinary luck, a page), never a panic.
            let noise = page(Content::Random, 9);
            let _ = decompress(c, &noise[..300], &mut back);
        }
        // A stream of a shorter input is not a page.
        let mut out = Vec::new();
        lz4::compress(&text[..100], lz4::Limit::Kernel, &mut out);
        assert!(decompress(Codec::Lz4, &out, &mut back)
            .unwrap_err()
            .contains("not one page"));
    }

    #[test]
    fn zlib_is_not_zlib_ng() {
        let v = zlib_version();
        assert!(
            !v.contains("ng"),
            "zlib-ng ({v}) compresses differently from the kernel's zlib"
        );
        assert!(v.starts_with("1."), "{v}");
    }

    #[test]
    fn random_pages_do_not_fit() {
        for v in 0..8 {
            let p = page(Content::Random, v);
            for c in Codec::ALL {
                let n = compressed_len(c, &p);
                assert!(n > PAGE_SIZE as u32, "{c}: {n}");
            }
        }
    }

    #[test]
    fn zero_pages_are_tiny() {
        let z = page(Content::Zero, 0);
        for c in Codec::ALL {
            let n = compressed_len(c, &z);
            assert!(n < 64, "{c}: {n}");
        }
    }

    #[test]
    fn text_pages_compress_about_three_to_one() {
        for v in 0..16 {
            let p = page(Content::Text, v);
            for c in [Codec::Lzo, Codec::LzoRle, Codec::Lz4] {
                let n = compressed_len(c, &p);
                assert!((1000..=2000).contains(&n), "{c} variant {v}: {n}");
            }
            for c in [Codec::Zstd, Codec::Deflate] {
                let n = compressed_len(c, &p);
                assert!((600..=1500).contains(&n), "{c} variant {v}: {n}");
            }
        }
    }

    #[test]
    fn lengths_are_deterministic() {
        let pages = test_pages();
        let first: Vec<u32> = pages
            .iter()
            .flat_map(|p| Codec::ALL.map(|c| compressed_len(c, p)))
            .collect();
        let again: Vec<u32> = pages
            .iter()
            .flat_map(|p| Codec::ALL.map(|c| compressed_len(c, p)))
            .collect();
        assert_eq!(first, again);
        // And across threads (fresh per-thread codec state).
        let p = pages[25].clone();
        let other = std::thread::spawn(move || Codec::ALL.map(|c| compressed_len(c, &p)))
            .join()
            .unwrap();
        assert_eq!(other, Codec::ALL.map(|c| compressed_len(c, &pages[25])));
    }

    /// `cargo test -p reclaimlab-core compress::tests::ratio_table -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn ratio_table() {
        let classes = ["zero", "random", "mix1024", "mix2048", "text", "same:0x5a"];
        println!("zlib {}", zlib_version());
        print!("{:<10}", "content");
        for c in Codec::ALL {
            print!("{:>16}", c.name());
        }
        println!();
        for class in classes {
            let content: Content = class.parse().unwrap();
            print!("{class:<10}");
            for c in Codec::ALL {
                let lens: Vec<u32> = (0..64)
                    .map(|v| compressed_len(c, &page(content, v)))
                    .collect();
                let mean = lens.iter().map(|&l| f64::from(l)).sum::<f64>() / lens.len() as f64;
                print!("{:>9.0} {:>5.2}:1", mean, PAGE_SIZE as f64 / mean);
            }
            println!();
        }
        for class in ["text"] {
            let content: Content = class.parse().unwrap();
            for c in Codec::ALL {
                let lens: Vec<u32> = (0..64)
                    .map(|v| compressed_len(c, &page(content, v)))
                    .collect();
                println!(
                    "{class} {c}: min {} max {}",
                    lens.iter().min().unwrap(),
                    lens.iter().max().unwrap()
                );
            }
        }
        // What kernels before the 2025 crypto/zstd.c rewrite (zstd_get_params(3, 0)) store.
        let mut dst = [0u8; DST_LEN];
        for class in classes {
            let content: Content = class.parse().unwrap();
            let old: f64 = (0..64)
                .map(|v| zstd_compress(&page(content, v)[..], 0, &mut dst) as f64)
                .sum::<f64>()
                / 64.0;
            println!("zstd with unknown source size, {class}: {old:.1}");
        }
    }
}
