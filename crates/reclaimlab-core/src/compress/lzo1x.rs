//! LZO1X-1 as Linux compresses it (lib/lzo/lzo1x_compress.c since 5.1), in both bitstream
//! versions: 0 (`lzo`) and 1 (`lzo-rle`, which adds an instruction for runs of zero bytes).
//!
//! Written for reclaimlab from the kernel's behaviour and bitstream format (lib/lzo,
//! Documentation/staging/lzo.rst); it is not a transcription of the kernel source. The tests
//! check version 0 byte for byte against rust-lzo (a mechanical conversion of the kernel
//! compressor) and decode version 1 with our own decoder; both versions were also compared
//! once with the kernel's C compressor built in user space (identical on 3063 inputs).
//!
//! What the kernel's algorithm does, and this code reproduces:
//! * The input is cut into chunks of at most `M4_MAX_OFFSET + 1` bytes (0xc000 for version 0,
//!   0xbfff for version 1); each chunk gets a fresh dictionary. Literals still pending at the
//!   end of a chunk are carried into the next. A 4 KiB page is a single chunk.
//! * The dictionary has 2^13 u16 slots indexed by `(le32(ip) * 0x1824429d) >> 19`; one probe,
//!   no chains. A miss skips ahead `1 + (ip - ii) / 32` bytes (ii = start of pending literals),
//!   so long incompressible stretches are scanned sparsely.
//! * Match lengths are extended byte by byte, but the "stop near the end" test only runs every
//!   8 bytes (`ip + m_len >= in_end - 20` at m_len = 12, 20, 28, ...); the kernel's 32/64-bit
//!   CTZ variants stop at exactly the same lengths.
//! * Version 1 only: a position whose next 4 bytes are zero starts a zero run instead of a
//!   dictionary probe. The run is the zero bytes from there (at most 2051, and never past
//!   `in_end - 20`), encoded as a 4-byte M4 instruction with distance 0xbfff:
//!   `le32(((n - 4) << 21) | 0xfffc18 | ((n - 4) & 7))`, after which the next instruction's
//!   1-3 trailing literals are counted in the second byte of that instruction rather than the
//!   second-to-last byte. The output starts with the two bytes 17, 1 (bitstream version 1),
//!   which a version-0 stream never starts with.
//!
//! The decoder below ([`lzo1x_decompress`]) follows the kernel's lzo1x_decompress_safe and
//! reads both versions: lzo's and lzo-rle's plug-ins share it.

use super::decode::{byte_at, copy_literals, copy_match, le16_at, DecodeResult};

const D_BITS: u32 = 13;
const D_SIZE: usize = 1 << D_BITS;
const D_MASK: u32 = (D_SIZE - 1) as u32;

const M2_MAX_LEN: usize = 8;
const M3_MAX_LEN: usize = 33;
const M4_MAX_LEN: usize = 9;
const M2_MAX_OFFSET: usize = 0x0800;
const M3_MAX_OFFSET: usize = 0x4000;
const M4_MAX_OFFSET_V0: usize = 0xbfff;
const M4_MAX_OFFSET_V1: usize = 0xbffe;
const M3_MARKER: u8 = 32;
const M4_MARKER: u8 = 16;

const MIN_ZERO_RUN_LENGTH: usize = 4;
const MAX_ZERO_RUN_LENGTH: usize = 2047 + MIN_ZERO_RUN_LENGTH;

/// Inputs of at most this many bytes are emitted as literals only.
const TAIL: usize = 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    /// Plain LZO1X-1 (`lzo`); production sizes come from rust-lzo, this checks against it.
    #[cfg_attr(not(test), allow(dead_code))]
    V0,
    /// With zero-run encoding (`lzo-rle`).
    V1,
}

/// Compresses `input` into `out` (cleared first), returning the compressed length.
pub(crate) fn compress(input: &[u8], version: Version, out: &mut Vec<u8>) -> usize {
    out.clear();
    let mut enc = Encoder {
        input,
        out,
        dict: vec![0u16; D_SIZE],
        state_offset: 2,
        rle: version == Version::V1,
    };
    let m4_max_offset = match version {
        Version::V0 => M4_MAX_OFFSET_V0,
        Version::V1 => {
            enc.out.extend_from_slice(&[17, 1]);
            M4_MAX_OFFSET_V1
        }
    };
    let data_start = enc.out.len();

    let mut pos = 0;
    let mut left = input.len();
    let mut pending = 0;
    while left > TAIL {
        let len = left.min(m4_max_offset + 1);
        enc.dict.fill(0);
        pending = enc.chunk(pos, len, pending);
        pos += len;
        left -= len;
    }
    pending += left;

    if pending > 0 {
        let start = input.len() - pending;
        if enc.out.len() == data_start && pending <= 238 {
            enc.out.push(17 + pending as u8);
        } else {
            enc.literal_header(pending);
        }
        enc.out.extend_from_slice(&input[start..]);
    }
    enc.out.extend_from_slice(&[M4_MARKER | 1, 0, 0]);
    enc.out.len()
}

struct Encoder<'a> {
    input: &'a [u8],
    out: &'a mut Vec<u8>,
    /// Chunk-relative positions of the last occurrence of each hashed 4-byte string.
    dict: Vec<u16>,
    /// Where, counted back from the end of the output, the previous instruction keeps the
    /// count of up to 3 literals that follow it: 2 for matches, 3 for zero runs.
    state_offset: usize,
    rle: bool,
}

impl Encoder<'_> {
    #[inline]
    fn le32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.input[at..at + 4].try_into().unwrap())
    }

    /// Emits the length part of a literal run of `t` bytes (the bytes themselves follow).
    fn literal_header(&mut self, t: usize) {
        if t <= 3 {
            let at = self.out.len() - self.state_offset;
            self.out[at] |= t as u8;
        } else if t <= 18 {
            self.out.push((t - 3) as u8);
        } else {
            self.out.push(0);
            self.push_long_length(t - 18);
        }
    }

    /// The variable-length tail of a length: a zero byte per 255, then the remainder.
    fn push_long_length(&mut self, mut n: usize) {
        while n > 255 {
            n -= 255;
            self.out.push(0);
        }
        self.out.push(n as u8);
    }

    /// Compresses `input[base..base + len]` with `carried` literals pending from the previous
    /// chunk; returns how many literals are pending at its end.
    fn chunk(&mut self, base: usize, len: usize, mut carried: usize) -> usize {
        let in_end = base + len;
        let ip_end = in_end - TAIL;
        // `lit` is where pending literals start (before subtracting `carried`).
        let mut lit = base;
        let mut ip = base + 4usize.saturating_sub(carried);

        'literal: loop {
            ip += 1 + ((ip - lit) >> 5);
            'next: loop {
                if ip >= ip_end {
                    break 'literal;
                }
                let dv = self.le32(ip);
                let mut run = 0;
                let mut m_pos = 0;
                if dv == 0 && self.rle {
                    let limit = ip_end.min(ip + MAX_ZERO_RUN_LENGTH + 1);
                    let mut ir = ip + 4;
                    while ir < limit && self.input[ir] == 0 {
                        ir += 1;
                    }
                    run = (ir - ip).min(MAX_ZERO_RUN_LENGTH);
                } else {
                    let h = (dv.wrapping_mul(0x1824_429d) >> (32 - D_BITS)) & D_MASK;
                    m_pos = base + usize::from(self.dict[h as usize]);
                    self.dict[h as usize] = (ip - base) as u16;
                    if dv != self.le32(m_pos) {
                        continue 'literal;
                    }
                }

                lit -= carried;
                carried = 0;
                let t = ip - lit;
                if t != 0 {
                    self.literal_header(t);
                    self.out.extend_from_slice(&self.input[lit..ip]);
                }

                if run != 0 {
                    ip += run;
                    let n = (run - MIN_ZERO_RUN_LENGTH) as u32;
                    self.out
                        .extend_from_slice(&((n << 21) | 0x00ff_fc18 | (n & 7)).to_le_bytes());
                    self.state_offset = 3;
                    lit = ip;
                    continue 'next;
                }

                let mut m_len = 4;
                while self.input[ip + m_len] == self.input[m_pos + m_len] {
                    m_len += 1;
                    if (m_len - 4) % 8 == 0 && ip + m_len >= ip_end {
                        break;
                    }
                }

                let m_off = ip - m_pos;
                ip += m_len;
                if m_len <= M2_MAX_LEN && m_off <= M2_MAX_OFFSET {
                    let o = m_off - 1;
                    self.out.push((((m_len - 1) << 5) | ((o & 7) << 2)) as u8);
                    self.out.push((o >> 3) as u8);
                } else {
                    let (o, marker, short_max) = if m_off <= M3_MAX_OFFSET {
                        (m_off - 1, M3_MARKER, M3_MAX_LEN)
                    } else {
                        let o = m_off - 0x4000;
                        (o, M4_MARKER | ((o >> 11) & 8) as u8, M4_MAX_LEN)
                    };
                    if m_len <= short_max {
                        self.out.push(marker | (m_len - 2) as u8);
                    } else {
                        self.out.push(marker);
                        self.push_long_length(m_len - short_max);
                    }
                    self.out.push((o << 2) as u8);
                    self.out.push((o >> 6) as u8);
                }
                self.state_offset = 2;
                lit = ip;
            }
        }
        in_end - (lit - carried)
    }
}

/// A straightforward LZO1X decoder (both bitstream versions), to check the encoder.
#[cfg(test)]
pub(crate) fn decompress(src: &[u8]) -> Result<Vec<u8>, String> {
    let mut out: Vec<u8> = Vec::new();
    let mut ip = 0;
    let byte = |ip: usize| {
        src.get(ip)
            .copied()
            .ok_or_else(|| "input overrun".to_string())
    };
    let version = if src.len() >= 5 && src[0] == 17 {
        ip = 2;
        src[1]
    } else {
        0
    };
    fn copy_literals(
        src: &[u8],
        ip: &mut usize,
        out: &mut Vec<u8>,
        n: usize,
    ) -> Result<(), String> {
        let lits = src.get(*ip..*ip + n).ok_or("literal overrun")?;
        out.extend_from_slice(lits);
        *ip += n;
        Ok(())
    }
    fn copy_match(out: &mut Vec<u8>, dist: usize, len: usize) -> Result<(), String> {
        if dist == 0 || dist > out.len() {
            return Err(format!("lookbehind overrun: dist {dist} at {}", out.len()));
        }
        for _ in 0..len {
            out.push(out[out.len() - dist]);
        }
        Ok(())
    }
    let long_len = |ip: &mut usize, base: usize| -> Result<usize, String> {
        let mut n = 0;
        while byte(*ip)? == 0 {
            n += 255;
            *ip += 1;
        }
        let last = usize::from(byte(*ip)?);
        *ip += 1;
        Ok(n + base + last)
    };

    // state: literals that followed the previous instruction (0-3), or 4 after a literal run.
    let mut state;
    if byte(ip)? > 17 {
        let t = usize::from(src[ip] - 17);
        ip += 1;
        copy_literals(src, &mut ip, &mut out, t)?;
        state = if t < 4 { t } else { 4 };
    } else {
        state = 0;
    }
    loop {
        let t = usize::from(byte(ip)?);
        ip += 1;
        let (dist, len, next);
        if t < 16 {
            if state == 0 {
                let n = if t == 0 { long_len(&mut ip, 15)? } else { t };
                copy_literals(src, &mut ip, &mut out, n + 3)?;
                state = 4;
                continue;
            }
            let b = usize::from(byte(ip)?);
            ip += 1;
            next = t & 3;
            if state != 4 {
                (dist, len) = (1 + (t >> 2) + (b << 2), 2);
            } else {
                (dist, len) = (1 + M2_MAX_OFFSET + (t >> 2) + (b << 2), 3);
            }
        } else if t >= 64 {
            let b = usize::from(byte(ip)?);
            ip += 1;
            next = t & 3;
            (dist, len) = (1 + ((t >> 2) & 7) + (b << 3), (t >> 5) + 1);
        } else if t >= 32 {
            let l = if t & 31 == 0 {
                long_len(&mut ip, 31)?
            } else {
                t & 31
            };
            let w = usize::from(u16::from_le_bytes([byte(ip)?, byte(ip + 1)?]));
            ip += 2;
            next = w & 3;
            (dist, len) = (1 + (w >> 2), l + 2);
        } else {
            let w = usize::from(u16::from_le_bytes([byte(ip)?, byte(ip + 1)?]));
            if version != 0 && w & 0xfffc == 0xfffc && t & 0xf8 == 0x18 {
                let n = ((t & 7) | (usize::from(byte(ip + 2)?) << 3)) + MIN_ZERO_RUN_LENGTH;
                out.resize(out.len() + n, 0);
                ip += 3;
                state = w & 3;
                copy_literals(src, &mut ip, &mut out, state)?;
                continue;
            }
            let l = if t & 7 == 0 {
                long_len(&mut ip, 7)?
            } else {
                t & 7
            };
            let w = usize::from(u16::from_le_bytes([byte(ip)?, byte(ip + 1)?]));
            ip += 2;
            let d = ((t & 8) << 11) + (w >> 2);
            if d == 0 {
                if l + 2 != 3 || ip != src.len() {
                    return Err("bad end of stream".into());
                }
                return Ok(out);
            }
            next = w & 3;
            (dist, len) = (d + 0x4000, l + 2);
        }
        copy_match(&mut out, dist, len)?;
        state = next;
        copy_literals(src, &mut ip, &mut out, next)?;
    }
}

// The kernel's decoder (lzo1x_decompress_safe), for both bitstream versions.

/// LZO's long length: every zero byte adds 255, the first non-zero byte ends it (base + 255 x
/// zeros + that byte).
#[inline]
fn lzo_long_len(src: &[u8], ip: &mut usize, base: usize) -> DecodeResult<usize> {
    let mut n = 0;
    loop {
        let b = byte_at(src, ip)?;
        if b != 0 {
            return Ok(n + base + b);
        }
        n += 255;
    }
}

/// LZO1X decompression of both bitstream versions (lib/lzo/lzo1x_decompress_safe.c's
/// instruction set; the zero-run instruction only in version 1). Returns the output length.
pub(crate) fn lzo1x_decompress(src: &[u8], dst: &mut [u8]) -> DecodeResult<usize> {
    const M2_MAX_OFFSET: usize = 0x0800;
    const MIN_ZERO_RUN_LENGTH: usize = 4;
    let mut ip = 0;
    let mut op = 0;
    let version = if src.len() >= 5 && src[0] == 17 {
        ip = 2;
        src[1]
    } else {
        0
    };
    // state: literals that followed the previous instruction (0-3), or 4 after a literal run.
    let mut state;
    if *src.get(ip).ok_or("input overrun")? > 17 {
        let t = usize::from(src[ip] - 17);
        ip += 1;
        copy_literals(src, &mut ip, dst, &mut op, t)?;
        state = t.min(4);
    } else {
        state = 0;
    }
    loop {
        let t = byte_at(src, &mut ip)?;
        let (dist, len, next);
        if t >= 64 {
            let b = byte_at(src, &mut ip)?;
            next = t & 3;
            (dist, len) = (1 + ((t >> 2) & 7) + (b << 3), (t >> 5) + 1);
        } else if t >= 32 {
            let l = if t & 31 == 0 {
                lzo_long_len(src, &mut ip, 31)?
            } else {
                t & 31
            };
            let w = le16_at(src, &mut ip)?;
            next = w & 3;
            (dist, len) = (1 + (w >> 2), l + 2);
        } else if t >= 16 {
            let peek = src.get(ip..ip + 2).ok_or("input overrun")?;
            let w = usize::from(u16::from_le_bytes([peek[0], peek[1]]));
            if version != 0 && w & 0xfffc == 0xfffc && t & 0xf8 == 0x18 {
                let hi = usize::from(*src.get(ip + 2).ok_or("input overrun")?);
                let n = ((t & 7) | (hi << 3)) + MIN_ZERO_RUN_LENGTH;
                ip += 3;
                dst.get_mut(op..op + n).ok_or("output overrun")?.fill(0);
                op += n;
                state = w & 3;
                copy_literals(src, &mut ip, dst, &mut op, state)?;
                continue;
            }
            let l = if t & 7 == 0 {
                lzo_long_len(src, &mut ip, 7)?
            } else {
                t & 7
            };
            let w = le16_at(src, &mut ip)?;
            let d = ((t & 8) << 11) + (w >> 2);
            if d == 0 {
                if l + 2 != 3 || ip != src.len() {
                    return Err("bad end of stream");
                }
                return Ok(op);
            }
            next = w & 3;
            (dist, len) = (d + 0x4000, l + 2);
        } else if state == 0 {
            let n = if t == 0 {
                lzo_long_len(src, &mut ip, 15)?
            } else {
                t
            };
            copy_literals(src, &mut ip, dst, &mut op, n + 3)?;
            state = 4;
            continue;
        } else {
            let b = byte_at(src, &mut ip)?;
            next = t & 3;
            if state != 4 {
                (dist, len) = (1 + (t >> 2) + (b << 2), 2);
            } else {
                (dist, len) = (1 + M2_MAX_OFFSET + (t >> 2) + (b << 2), 3);
            }
        }
        copy_match(dst, &mut op, dist, len)?;
        state = next;
        if next > 0 {
            copy_literals(src, &mut ip, dst, &mut op, next)?;
        }
    }
}
