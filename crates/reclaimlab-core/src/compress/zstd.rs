//! `zstd` — libzstd 1.5.7 (bundled by zstd-sys), driven as the kernel drives its own copy:
//! crypto/zstd.c takes `zstd_get_params(3, 1 << 18)` (`ZSTD_getParams(3, 256 KiB, 0)`:
//! windowLog 18, chainLog 16, hashLog 16, searchLog 1, minMatch 4, targetLength 0, dfast;
//! content size on, checksum off, dictID on), and lib/zstd's `zstd_compress_cctx` resets the
//! context, pledges the real source size, sets those ten parameters one by one and calls
//! `ZSTD_compress2`. With 4 KiB pledged, zstd shrinks the tables to windowLog 12, hashLog 13,
//! chainLog 12; the frame is magic, a 1-byte descriptor, a 2-byte content size and one block
//! (raw, 3 + 4096 bytes, when incompressible). No dictionary. Before its 2025 acomp rewrite
//! crypto/zstd.c asked for `zstd_get_params(3, 0)` ("unknown size"; after the shrink the
//! only difference left is minMatch 5), which moves text-like pages by about 12 bytes either
//! way; see [`ZSTD_ESTIMATED_SRC_SIZE`]. The kernel carries its own zstd copy (1.5.2 in 6.2,
//! updated since): with the same calls, 1.5.2, 1.5.5 and 1.5.6 give the same lengths as
//! 1.5.7 for zero, same-filled, random and mixK pages and differ on about a quarter of text
//! pages, by +0.4 bytes on average.

use reclaimlab_workload::PAGE_SIZE;
use zstd::zstd_safe::zstd_sys;

use super::decode::DecodeResult;
use super::plugin::{CodecCost, CodecInfo, CostFigure, COMPRESS_BUF_LEN, DST_LEN};

pub const INFO: CodecInfo = CodecInfo {
    name: "zstd",
    cost: CodecCost {
        compress: [
            CostFigure {
                name: "zstd_compress_ns",
                default: 14_480,
                doc: "zstd compression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "zstd_compress_random_ns",
                default: 6_270,
                doc: "zstd compression of a page of random bytes.",
            },
            CostFigure {
                name: "zstd_compress_run_ns",
                default: 5_040,
                doc: "zstd compression of a page that is one run of a byte.",
            },
        ],
        decompress: [
            CostFigure {
                name: "zstd_decompress_ns",
                default: 5_640,
                doc: "zstd decompression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "zstd_decompress_random_ns",
                default: 110,
                doc: "zstd decompression of a page of random bytes.",
            },
            CostFigure {
                name: "zstd_decompress_run_ns",
                default: 540,
                doc: "zstd decompression of a page that is one run of a byte.",
            },
        ],
    },
    compressed_len: |page| zstd_compress(page, ZSTD_ESTIMATED_SRC_SIZE, &mut [0u8; DST_LEN]),
    compress,
    decompress: zstd_decompress,
};

/// The source-size estimate crypto/zstd.c passes to `zstd_get_params` (`ZSTD_MAX_SIZE`,
/// 1 << 18). Before 2025 it passed 0 ("unknown"), which selects minMatch 5 instead of 4.
pub const ZSTD_ESTIMATED_SRC_SIZE: u64 = 1 << 18;

fn compress(page: &[u8; PAGE_SIZE], dst: &mut [u8; COMPRESS_BUF_LEN]) -> usize {
    zstd_compress(page, ZSTD_ESTIMATED_SRC_SIZE, dst)
}

thread_local! {
    static ZSTD_CCTX: ZstdCctx = ZstdCctx::new();
    static ZSTD_DCTX: ZstdDctx = ZstdDctx::new();
}

/// A zstd compression context, reset before every page as the kernel resets its own.
struct ZstdCctx(*mut zstd_sys::ZSTD_CCtx);

impl ZstdCctx {
    fn new() -> Self {
        // SAFETY: plain constructor; a null return is checked below.
        let p = unsafe { zstd_sys::ZSTD_createCCtx() };
        assert!(!p.is_null(), "ZSTD_createCCtx failed");
        ZstdCctx(p)
    }
}

impl Drop for ZstdCctx {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createCCtx and freed exactly once.
        unsafe { zstd_sys::ZSTD_freeCCtx(self.0) };
    }
}

fn zstd_check(code: usize, what: &str) -> usize {
    // SAFETY: ZSTD_isError only inspects the value.
    assert!(
        unsafe { zstd_sys::ZSTD_isError(code) } == 0,
        "zstd {what} failed"
    );
    code
}

/// Compresses as crypto/zstd.c does: parameters from `zstd_get_params(3, estimated_src_size)`,
/// applied by lib/zstd's `zstd_compress_cctx` (reset the context, pledge the real source size,
/// set each parameter explicitly, `ZSTD_compress2`). Because the size is pledged, zstd then
/// shrinks windowLog, hashLog and chainLog to suit 4 KiB. Returns the frame length.
pub(crate) fn zstd_compress(src: &[u8], estimated_src_size: u64, dst: &mut [u8]) -> usize {
    use std::ffi::c_int;
    use zstd_sys::ZSTD_cParameter::*;
    ZSTD_CCTX.with(|cctx| {
        let c = cctx.0;
        // SAFETY: a live context owned by this thread, and buffers valid for the lengths
        // passed; ZSTD_getParams is a pure function.
        unsafe {
            let p = zstd_sys::ZSTD_getParams(3, estimated_src_size, 0);
            let reset = zstd_sys::ZSTD_ResetDirective::ZSTD_reset_session_and_parameters;
            zstd_check(zstd_sys::ZSTD_CCtx_reset(c, reset), "reset");
            zstd_check(
                zstd_sys::ZSTD_CCtx_setPledgedSrcSize(c, src.len() as u64),
                "pledge",
            );
            let cp = p.cParams;
            for (param, value) in [
                (ZSTD_c_windowLog, cp.windowLog as c_int),
                (ZSTD_c_hashLog, cp.hashLog as c_int),
                (ZSTD_c_chainLog, cp.chainLog as c_int),
                (ZSTD_c_searchLog, cp.searchLog as c_int),
                (ZSTD_c_minMatch, cp.minMatch as c_int),
                (ZSTD_c_targetLength, cp.targetLength as c_int),
                (ZSTD_c_strategy, cp.strategy as c_int),
                (ZSTD_c_contentSizeFlag, p.fParams.contentSizeFlag),
                (ZSTD_c_checksumFlag, p.fParams.checksumFlag),
                (ZSTD_c_dictIDFlag, c_int::from(p.fParams.noDictIDFlag == 0)),
            ] {
                zstd_check(
                    zstd_sys::ZSTD_CCtx_setParameter(c, param, value),
                    "setParameter",
                );
            }
            let n = zstd_sys::ZSTD_compress2(
                c,
                dst.as_mut_ptr().cast(),
                dst.len(),
                src.as_ptr().cast(),
                src.len(),
            );
            zstd_check(n, "compression")
        }
    })
}

/// A zstd decompression context, reused for every page.
struct ZstdDctx(*mut zstd_sys::ZSTD_DCtx);

impl ZstdDctx {
    fn new() -> Self {
        // SAFETY: plain constructor; a null return is checked below.
        let p = unsafe { zstd_sys::ZSTD_createDCtx() };
        assert!(!p.is_null(), "ZSTD_createDCtx failed");
        ZstdDctx(p)
    }
}

impl Drop for ZstdDctx {
    fn drop(&mut self) {
        // SAFETY: created by ZSTD_createDCtx and freed exactly once.
        unsafe { zstd_sys::ZSTD_freeDCtx(self.0) };
    }
}

fn zstd_decompress(src: &[u8], dst: &mut [u8]) -> DecodeResult<usize> {
    ZSTD_DCTX.with(|d| {
        // SAFETY: a live context owned by this thread; buffers valid for the lengths passed.
        let n = unsafe {
            zstd_sys::ZSTD_decompressDCtx(
                d.0,
                dst.as_mut_ptr().cast(),
                dst.len(),
                src.as_ptr().cast(),
                src.len(),
            )
        };
        // SAFETY: ZSTD_isError only inspects the value.
        if unsafe { zstd_sys::ZSTD_isError(n) } != 0 {
            return Err("not a valid zstd frame of at most one page");
        }
        Ok(n)
    })
}
