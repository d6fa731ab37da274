//! `lzo` — rust-lzo 0.6 (`LZOContext::compress_to_slice`), a mechanical Rust conversion of
//! the kernel's lib/lzo/lzo1x_compress.c. Its compressor is the version Markus Oberhumer
//! brought up to LZO 2.06 in Linux 3.7 (13-bit u16 dictionary, `0x1824429d` hash, skip of
//! `1 + (ip - ii) / 32` after a miss, input cut into 0xc000-byte chunks), not the older
//! miniLZO-derived one. Linux 5.1 made that code generic over a bitstream version and added
//! lzo-rle without changing the version-0 output; the CTZ-based match extension used on
//! 64-bit machines stops at the same lengths as rust-lzo's byte loop. Recent kernels call
//! bounds-checked `_safe` variants, which emit the same bytes whenever the output fits (two
//! pages always suffice).
//!
//! Decompression: the shared LZO1X decoder ([`super::lzo1x`]).

use std::cell::RefCell;

use reclaimlab_workload::PAGE_SIZE;

use super::plugin::{CodecCost, CodecInfo, CostFigure, COMPRESS_BUF_LEN, DST_LEN};

pub const INFO: CodecInfo = CodecInfo {
    name: "lzo",
    cost: CodecCost {
        compress: [
            CostFigure {
                name: "lzo_compress_ns",
                default: 3_470,
                doc: "lzo compression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "lzo_compress_random_ns",
                default: 810,
                doc: "lzo compression of a page of random bytes.",
            },
            CostFigure {
                name: "lzo_compress_run_ns",
                default: 1_710,
                doc: "lzo compression of a page that is one run of a byte.",
            },
        ],
        decompress: [
            CostFigure {
                name: "lzo_decompress_ns",
                default: 1_840,
                doc: "lzo decompression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "lzo_decompress_random_ns",
                default: 90,
                doc: "lzo decompression of a page of random bytes.",
            },
            CostFigure {
                name: "lzo_decompress_run_ns",
                default: 760,
                doc: "lzo decompression of a page that is one run of a byte.",
            },
        ],
    },
    compressed_len: lzo_len,
    compress,
    decompress: super::lzo1x::lzo1x_decompress,
};

thread_local! {
    static LZO_CTX: RefCell<rust_lzo::LZOContext> = RefCell::new(rust_lzo::LZOContext::new());
}

fn lzo_len(page: &[u8; PAGE_SIZE]) -> usize {
    let mut dst = [0u8; DST_LEN];
    lzo_compress(page, &mut dst).len()
}

/// rust-lzo's LZO1X-1 into `dst` (which must hold `lzo1x_worst_compress(len)` bytes, as the
/// kernel's unchecked compressor assumes); returns the compressed bytes.
pub(crate) fn lzo_compress<'a>(src: &[u8], dst: &'a mut [u8]) -> &'a [u8] {
    // len + len/16 + 64 + 3: the kernel's lzo1x_worst_compress().
    assert!(
        dst.len() >= src.len() + src.len() / 16 + 67,
        "LZO output buffer too small"
    );
    LZO_CTX.with(|ctx| {
        let (out, err) = ctx.borrow_mut().compress_to_slice(src, dst);
        assert!(
            err == rust_lzo::LZOError::OK,
            "LZO1X-1 compression cannot fail"
        );
        &*out
    })
}

fn compress(page: &[u8; PAGE_SIZE], dst: &mut [u8; COMPRESS_BUF_LEN]) -> usize {
    lzo_compress(page, dst).len()
}
