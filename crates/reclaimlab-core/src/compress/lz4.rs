//! `lz4` — our port (this file) of the kernel's lib/lz4, which is LZ4 v1.7.3:
//! `LZ4_compress_default` (acceleration 1) with an output buffer of at least
//! `LZ4_compressBound(4096)`, i.e. the byU16, no-limit path. lz4-sys bundles LZ4 1.10.0,
//! whose compressor also tries a match starting at `len - 11`, one position past the
//! kernel's last probe; on our text pages that changes about 1 page in 130, by a few bytes.
//! With a switch for that one difference the port equals lz4-sys's `LZ4_compress_default`
//! byte for byte in the tests, and lz4-sys decompresses the port's output.
//!
//! LZ4 block compression as Linux's `LZ4_compress_default` does it for a page: lib/lz4 is LZ4
//! v1.7.3 adapted for the kernel (2017) and has not followed upstream since.
//!
//! For inputs below 64 KiB with an output buffer of at least `LZ4_COMPRESSBOUND(len)` (zswap
//! gives two pages), that is `LZ4_compress_generic(.., noLimit, byU16, noDict, noDictIssue,
//! acceleration = 1)`:
//! * a 2^13-entry u16 table indexed by `(le32(p) * 2654435761) >> 19`, zeroed per call;
//! * search: each probe inserts the current position; after a miss the step grows by one
//!   every 64 probes (`step = probes >> 6`, starting at 64 probes = step 1);
//! * a found match is extended backwards over equal bytes, then forwards up to
//!   `len - LASTLITERALS(5)`;
//! * after a match, position `ip - 2` is inserted and `ip` is probed once for an immediate
//!   next match;
//! * the last 5 bytes are always literals, and no match may start after `len - MFLIMIT(12)`.
//!
//! Upstream LZ4 from 1.9.0 on (and so the lz4-sys crate's bundled 1.10.0) also probes the
//! position `len - 11` (its limit is `mflimitPlusOne`); otherwise the algorithm is the same.
//! [`compress`] with `Limit::Upstream` reproduces that, and the tests check it byte for byte
//! against lz4-sys; `Limit::Kernel` is what the kernel emits (compared once with the kernel's
//! C compressor built in user space: identical on 5039 inputs). Written for reclaimlab from the
//! algorithm description above, not transcribed.

use reclaimlab_workload::PAGE_SIZE;

use super::decode::{byte_at, copy_literals, copy_match, le16_at, DecodeResult};
use super::plugin::{with_scratch, CodecCost, CodecInfo, CostFigure, COMPRESS_BUF_LEN};

const MINMATCH: usize = 4;
const MFLIMIT: usize = 12;
const LASTLITERALS: usize = 5;
const HASH_BITS: u32 = 13;
const SKIP_TRIGGER: u32 = 6;
const ML_MASK: usize = 15;
const RUN_MASK: usize = 15;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    /// lib/lz4 (LZ4 1.7.3): the last probe is at `len - 12`.
    Kernel,
    /// LZ4 >= 1.9.0: the last probe is at `len - 11`.
    #[cfg_attr(not(test), allow(dead_code))]
    Upstream,
}

#[inline]
fn read32(s: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(s[at..at + 4].try_into().unwrap())
}

#[inline]
fn hash(v: u32) -> usize {
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

/// Compresses `src` (shorter than 64 KiB) into `out` (cleared first); returns the length.
pub(crate) fn compress(src: &[u8], limit: Limit, out: &mut Vec<u8>) -> usize {
    assert!(
        src.len() < 65536 + MFLIMIT - 1,
        "byU16 tables only address 64 KiB"
    );
    out.clear();
    let mut anchor = 0;
    // Shorter inputs (below LZ4_minLength = MFLIMIT + 1) are a single literal run.
    if src.len() > MFLIMIT {
        let mflimit = src.len() - MFLIMIT;
        let last_probe = match limit {
            Limit::Kernel => mflimit,
            Limit::Upstream => mflimit + 1,
        };
        let matchlimit = src.len() - LASTLITERALS;
        let mut table = vec![0u16; 1 << HASH_BITS];

        table[hash(read32(src, 0))] = 0;
        let mut ip = 1;
        let mut forward_h = hash(read32(src, ip));
        'sequences: loop {
            // Find a match.
            let mut forward_ip = ip;
            let mut step = 1;
            let mut probes = 1u32 << SKIP_TRIGGER;
            let mut m;
            loop {
                let h = forward_h;
                ip = forward_ip;
                forward_ip += step;
                step = (probes >> SKIP_TRIGGER) as usize;
                probes += 1;
                if forward_ip > last_probe {
                    break 'sequences;
                }
                m = usize::from(table[h]);
                forward_h = hash(read32(src, forward_ip));
                table[h] = ip as u16;
                if read32(src, m) == read32(src, ip) {
                    break;
                }
            }
            while ip > anchor && m > 0 && src[ip - 1] == src[m - 1] {
                ip -= 1;
                m -= 1;
            }

            let mut token = out.len();
            let lits = ip - anchor;
            out.push(0);
            if lits >= RUN_MASK {
                out[token] = (RUN_MASK << 4) as u8;
                push_length(out, lits - RUN_MASK);
            } else {
                out[token] = (lits << 4) as u8;
            }
            out.extend_from_slice(&src[anchor..ip]);

            loop {
                out.extend_from_slice(&((ip - m) as u16).to_le_bytes());
                let extra = common_prefix(src, ip + MINMATCH, m + MINMATCH, matchlimit);
                ip += MINMATCH + extra;
                if extra >= ML_MASK {
                    out[token] += ML_MASK as u8;
                    push_length(out, extra - ML_MASK);
                } else {
                    out[token] += extra as u8;
                }
                anchor = ip;
                if ip > mflimit {
                    break 'sequences;
                }
                table[hash(read32(src, ip - 2))] = (ip - 2) as u16;
                let h = hash(read32(src, ip));
                m = usize::from(table[h]);
                table[h] = ip as u16;
                if read32(src, m) != read32(src, ip) {
                    break;
                }
                // An immediate match: a sequence without literals.
                token = out.len();
                out.push(0);
            }
            ip += 1;
            forward_h = hash(read32(src, ip));
        }
    }

    let last = src.len() - anchor;
    if last >= RUN_MASK {
        out.push((RUN_MASK << 4) as u8);
        push_length(out, last - RUN_MASK);
    } else {
        out.push((last << 4) as u8);
    }
    out.extend_from_slice(&src[anchor..]);
    out.len()
}

/// LZ4's length continuation: 255 per full 255, then the remainder (possibly 0).
fn push_length(out: &mut Vec<u8>, mut n: usize) {
    while n >= 255 {
        out.push(255);
        n -= 255;
    }
    out.push(n as u8);
}

/// How many bytes from `a` equal those from `b`, not counting past `limit` (on `a`).
#[inline]
fn common_prefix(s: &[u8], a: usize, b: usize, limit: usize) -> usize {
    s[a..limit]
        .iter()
        .zip(&s[b..])
        .take_while(|(x, y)| x == y)
        .count()
}

// The plug-in: name, cost figures, and the kernel-path functions.

pub const INFO: CodecInfo = CodecInfo {
    name: "lz4",
    cost: CodecCost {
        compress: [
            CostFigure {
                name: "lz4_compress_ns",
                default: 4_480,
                doc: "lz4 compression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "lz4_compress_random_ns",
                default: 1_380,
                doc: "lz4 compression of a page of random bytes.",
            },
            CostFigure {
                name: "lz4_compress_run_ns",
                default: 2_710,
                doc: "lz4 compression of a page that is one run of a byte.",
            },
        ],
        decompress: [
            CostFigure {
                name: "lz4_decompress_ns",
                default: 2_210,
                doc: "lz4 decompression of a page of dictionary-like text.",
            },
            CostFigure {
                name: "lz4_decompress_random_ns",
                default: 80,
                doc: "lz4 decompression of a page of random bytes.",
            },
            CostFigure {
                name: "lz4_decompress_run_ns",
                default: 150,
                doc: "lz4 decompression of a page that is one run of a byte.",
            },
        ],
    },
    compressed_len: |page| with_scratch(|out| compress(page, Limit::Kernel, out)),
    compress: compress_page,
    decompress: lz4_decompress,
};

fn compress_page(page: &[u8; PAGE_SIZE], dst: &mut [u8; COMPRESS_BUF_LEN]) -> usize {
    with_scratch(|out| {
        let n = compress(page, Limit::Kernel, out);
        dst[..n].copy_from_slice(&out[..n]);
        n
    })
}

/// LZ4 block decompression (the format lib/lz4's `LZ4_decompress_safe` reads). Returns the
/// output length.
fn lz4_decompress(src: &[u8], dst: &mut [u8]) -> DecodeResult<usize> {
    #[inline(always)]
    fn extra(src: &[u8], ip: &mut usize, mut n: usize) -> DecodeResult<usize> {
        if n == 15 {
            loop {
                let b = byte_at(src, ip)?;
                n += b;
                if b != 255 {
                    break;
                }
            }
        }
        Ok(n)
    }
    let mut ip = 0;
    let mut op = 0;
    loop {
        let token = byte_at(src, &mut ip)?;
        let lits = extra(src, &mut ip, token >> 4)?;
        copy_literals(src, &mut ip, dst, &mut op, lits)?;
        if ip == src.len() {
            return Ok(op); // the last sequence has literals only
        }
        let dist = le16_at(src, &mut ip)?;
        let len = extra(src, &mut ip, token & 15)? + 4;
        copy_match(dst, &mut op, dist, len)?;
    }
}
