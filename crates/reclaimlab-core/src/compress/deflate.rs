//! `deflate` — zlib through flate2: raw deflate (no zlib header or trailer), level 6
//! (`Z_DEFAULT_COMPRESSION`), windowBits 11, memLevel 8 (the kernel's `MAX_MEM_LEVEL`),
//! default strategy, one `deflate(Z_FINISH)` call: crypto/deflate.c's settings. The
//! kernel's lib/zlib_deflate derives from zlib 1.1.3, and with these settings zlib 1.1.3
//! and 1.2.13 emit identical bytes for all 3000 pages we compared. libz-sys links the system
//! zlib when pkg-config finds one; a zlib-ng "compat" build (Fedora >= 40) parses
//! differently, so [`zlib_version`] is exposed and a test refuses zlib-ng.

use std::cell::RefCell;

use reclaimlab_workload::PAGE_SIZE;

use super::decode::DecodeResult;
use super::plugin::{CodecCost, CodecInfo, CostFigure, COMPRESS_BUF_LEN, DST_LEN};

pub const INFO: CodecInfo = CodecInfo {
    name: "deflate",
    cost: CodecCost {
        compress: [
            CostFigure {
                name: "deflate_compress_ns",
                default: 45_280,
                doc: "deflate compression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "deflate_compress_random_ns",
                default: 73_030,
                doc: "deflate compression of a page of random bytes.",
            },
            CostFigure {
                name: "deflate_compress_run_ns",
                default: 37_510,
                doc: "deflate compression of a page that is one run of a byte.",
            },
        ],
        decompress: [
            CostFigure {
                name: "deflate_decompress_ns",
                default: 5_880,
                doc: "deflate decompression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "deflate_decompress_random_ns",
                default: 14_010,
                doc: "deflate decompression of a page of random bytes.",
            },
            CostFigure {
                name: "deflate_decompress_run_ns",
                default: 9_740,
                doc: "deflate decompression of a page that is one run of a byte.",
            },
        ],
    },
    compressed_len: |page| deflate_compress(page, &mut [0u8; DST_LEN]),
    compress,
    decompress: deflate_decompress,
};

/// zlib settings of crypto/deflate.c.
const DEFLATE_LEVEL: u32 = 6;
pub(crate) const DEFLATE_WINDOW_BITS: u8 = 11;

fn compress(page: &[u8; PAGE_SIZE], dst: &mut [u8; COMPRESS_BUF_LEN]) -> usize {
    deflate_compress_reset(page, dst)
}

thread_local! {
    static DEFLATE_STREAM: RefCell<flate2::Compress> = RefCell::new(flate2::Compress::new_with_window_bits(
        flate2::Compression::new(DEFLATE_LEVEL),
        false,
        DEFLATE_WINDOW_BITS,
    ));
    static INFLATE_STREAM: RefCell<flate2::Decompress> =
        RefCell::new(flate2::Decompress::new_with_window_bits(false, DEFLATE_WINDOW_BITS));
}

/// Raw deflate with crypto/deflate.c's settings; returns the length written to `dst`.
pub(crate) fn deflate_compress(src: &[u8], dst: &mut [u8]) -> usize {
    let mut z = flate2::Compress::new_with_window_bits(
        flate2::Compression::new(DEFLATE_LEVEL),
        false,
        DEFLATE_WINDOW_BITS,
    );
    let status = z
        .compress(src, dst, flate2::FlushCompress::Finish)
        .expect("deflate failed");
    assert_eq!(
        status,
        flate2::Status::StreamEnd,
        "deflate output did not fit in two pages"
    );
    assert_eq!(z.total_in(), src.len() as u64);
    z.total_out() as usize
}

/// The version string of the zlib that `deflate` sizes come from (`zlibVersion()`).
pub fn zlib_version() -> String {
    extern "C" {
        fn zlibVersion() -> *const std::ffi::c_char;
    }
    // SAFETY: zlibVersion returns a pointer to a static NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(zlibVersion()) }
        .to_string_lossy()
        .into_owned()
}

/// [`deflate_compress`] on a per-thread stream reset for every page (same bytes).
fn deflate_compress_reset(src: &[u8], dst: &mut [u8]) -> usize {
    DEFLATE_STREAM.with(|z| {
        let mut z = z.borrow_mut();
        z.reset();
        let (in0, out0) = (z.total_in(), z.total_out());
        let status = z
            .compress(src, dst, flate2::FlushCompress::Finish)
            .expect("deflate failed");
        assert_eq!(
            status,
            flate2::Status::StreamEnd,
            "deflate output did not fit in two pages"
        );
        assert_eq!(z.total_in() - in0, src.len() as u64);
        (z.total_out() - out0) as usize
    })
}

fn deflate_decompress(src: &[u8], dst: &mut [u8]) -> DecodeResult<usize> {
    INFLATE_STREAM.with(|z| {
        let mut z = z.borrow_mut();
        z.reset(false);
        let (in0, out0) = (z.total_in(), z.total_out());
        let status = z
            .decompress(src, dst, flate2::FlushDecompress::Finish)
            .map_err(|_| "not a valid raw deflate stream")?;
        if status != flate2::Status::StreamEnd || z.total_in() - in0 != src.len() as u64 {
            return Err("the deflate stream did not end at the end of the input");
        }
        Ok((z.total_out() - out0) as usize)
    })
}
