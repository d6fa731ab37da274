//! What a codec plug-in declares ([`CodecInfo`]) and the buffers the codecs share.

use std::cell::RefCell;

use reclaimlab_workload::PAGE_SIZE;

use super::decode::DecodeResult;

/// A time-model figure a codec declares: its `[costs]` key, default and meaning.
#[derive(Clone, Copy, Debug)]
pub struct CostFigure {
    pub name: &'static str,
    pub default: u64,
    pub doc: &'static str,
}

/// One codec plug-in.
pub struct CodecInfo {
    /// Kernel crypto name (`/sys/module/zswap/parameters/compressor`, zram's comp_algorithm).
    pub name: &'static str,
    /// CPU time per 4 KiB page (costs.rs collects these).
    pub compress_cost: CostFigure,
    pub decompress_cost: CostFigure,
    /// Bytes the kernel's compressor writes for one page into a two-page buffer.
    pub compressed_len: fn(&[u8; PAGE_SIZE]) -> usize,
    /// The same bytes into `dst` (per-thread state reused, as the kernel's per-CPU contexts).
    pub compress: fn(&[u8; PAGE_SIZE], &mut [u8; COMPRESS_BUF_LEN]) -> usize,
    /// Decode into `dst`; the output length.
    pub decompress: fn(&[u8], &mut [u8]) -> DecodeResult<usize>,
}

/// The output buffer zswap hands the compressor: two pages.
pub(crate) const DST_LEN: usize = 2 * PAGE_SIZE;

/// The size of the output buffer [`compress`] writes to: two pages, as zswap hands the
/// compressor (enough for every codec's worst case on one page).
pub const COMPRESS_BUF_LEN: usize = DST_LEN;

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(DST_LEN));
}

/// Run an encoder that writes to a per-thread vector.
pub(crate) fn with_scratch(f: impl FnOnce(&mut Vec<u8>) -> usize) -> usize {
    SCRATCH.with(|s| f(&mut s.borrow_mut()))
}

