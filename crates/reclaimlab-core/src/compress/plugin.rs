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

/// The three kinds of bytes a page's codec time is composed of (docs/model/time.md, "Codec
/// cost by content"): dictionary-like text (many short matches), random bytes (no match: the
/// LZ coders' skip acceleration runs over them) and runs (one long match). A page's time is
/// the byte-weighted sum of its codec's three per-page figures ([`page_mix`]).
pub const BYTE_KINDS: [&str; 3] = ["text", "random", "run"];

/// A codec's time figures: per kind of byte ([`BYTE_KINDS`] order), one 4 KiB page made only
/// of that kind, compressed and decompressed.
#[derive(Clone, Copy, Debug)]
pub struct CodecCost {
    pub compress: [CostFigure; 3],
    pub decompress: [CostFigure; 3],
}

/// How many of a page's 4096 bytes are of each kind ([`BYTE_KINDS`] order), for a content
/// class. `mixK` is K random bytes then zeros, `rampK` 256 literal bytes then matches; zero and same-filled pages are one run (they
/// reach a codec only where no same-filled shortcut applies, e.g. `same:B` in 6.12+ zswap).
pub fn page_mix(content: reclaimlab_workload::Content) -> [u64; 3] {
    use reclaimlab_workload::Content;
    let page = PAGE_SIZE as u64;
    match content {
        Content::Text => [page, 0, 0],
        Content::Random => [0, page, 0],
        Content::Mix { random_bytes } => {
            [0, u64::from(random_bytes), page - u64::from(random_bytes)]
        }
        Content::Zero | Content::Same { .. } => [0, 0, page],
        // rampK: its first 256 bytes have no earlier match (coded as literals, like random
        // bytes); the rest repeats them or is zero, long matches like a run.
        Content::Ramp { bytes } => {
            let literals = u64::from(bytes).min(256);
            [0, literals, page - literals]
        }
    }
}

/// One codec plug-in.
pub struct CodecInfo {
    /// Kernel crypto name (`/sys/module/zswap/parameters/compressor`, zram's comp_algorithm).
    pub name: &'static str,
    /// CPU time per 4 KiB page by kind of byte (costs.rs collects these).
    pub cost: CodecCost,
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
