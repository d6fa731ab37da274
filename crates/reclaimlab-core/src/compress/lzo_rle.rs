//! `lzo-rle` — our own encoder ([`super::lzo1x`]; rust-lzo has no RLE variant): LZO1X-1 plus a
//! 4-byte instruction for runs of 4..=2051 zero bytes, after a `17, 1` version header. In the
//! tests its version-0 output equals rust-lzo's byte for byte, and its RLE output decodes
//! with our decoder, which follows the kernel's lzo1x_decompress_safe.
//!
//! Cost figures: lzo-rle is timed as lzo (the same `lzo_*_ns` figures), as before it had a
//! file of its own.

use reclaimlab_workload::PAGE_SIZE;

use super::lzo1x::{self, Version};
use super::plugin::{with_scratch, CodecCost, CodecInfo, CostFigure, COMPRESS_BUF_LEN};

pub const INFO: CodecInfo = CodecInfo {
    name: "lzo-rle",
    cost: CodecCost {
        compress: [
            CostFigure {
                name: "lzo_rle_compress_ns",
                default: 5_990,
                doc: "lzo-rle compression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "lzo_rle_compress_random_ns",
                default: 690,
                doc: "lzo-rle compression of a page of random bytes.",
            },
            CostFigure {
                name: "lzo_rle_compress_run_ns",
                default: 3_000,
                doc: "lzo-rle compression of a page that is one run of a byte.",
            },
        ],
        decompress: [
            CostFigure {
                name: "lzo_rle_decompress_ns",
                default: 1_850,
                doc: "lzo-rle decompression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "lzo_rle_decompress_random_ns",
                default: 90,
                doc: "lzo-rle decompression of a page of random bytes.",
            },
            CostFigure {
                name: "lzo_rle_decompress_run_ns",
                default: 90,
                doc: "lzo-rle decompression of a page that is one run of a byte.",
            },
        ],
    },
    compressed_len: |page| with_scratch(|out| lzo1x::compress(page, Version::V1, out)),
    compress,
    decompress: lzo1x::lzo1x_decompress,
};

fn compress(page: &[u8; PAGE_SIZE], dst: &mut [u8; COMPRESS_BUF_LEN]) -> usize {
    with_scratch(|out| {
        let n = lzo1x::compress(page, Version::V1, out);
        dst[..n].copy_from_slice(&out[..n]);
        n
    })
}
