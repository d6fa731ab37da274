//! Decoder primitives shared by the LZO1X and LZ4 block decoders: bounds-checked reads and the
//! wide literal and match copies the kernel's decoders also use.

pub(crate) type DecodeResult<T> = Result<T, &'static str>;

#[inline(always)]
pub(crate) fn take<'a>(src: &'a [u8], ip: &mut usize, n: usize) -> DecodeResult<&'a [u8]> {
    let s = src.get(*ip..*ip + n).ok_or("input overrun")?;
    *ip += n;
    Ok(s)
}

#[inline(always)]
pub(crate) fn byte_at(src: &[u8], ip: &mut usize) -> DecodeResult<usize> {
    let b = *src.get(*ip).ok_or("input overrun")?;
    *ip += 1;
    Ok(usize::from(b))
}

#[inline(always)]
pub(crate) fn le16_at(src: &[u8], ip: &mut usize) -> DecodeResult<usize> {
    let w = take(src, ip, 2)?;
    Ok(usize::from(u16::from_le_bytes([w[0], w[1]])))
}

/// `n` literal bytes from the input to the output. Runs of up to 32 bytes are copied as one
/// 8-byte word or one or two 16-byte blocks (the kernel's decoders also use unaligned wide
/// copies), possibly writing past the run, where later output overwrites it; longer runs, and
/// runs near either end of a buffer, are copied exactly.
#[inline(always)]
pub(crate) fn copy_literals(
    src: &[u8],
    ip: &mut usize,
    dst: &mut [u8],
    op: &mut usize,
    n: usize,
) -> DecodeResult<()> {
    if n <= 8 && *ip + 8 <= src.len() && *op + 8 <= dst.len() {
        let w: [u8; 8] = src[*ip..*ip + 8].try_into().expect("8 bytes");
        dst[*op..*op + 8].copy_from_slice(&w);
    } else if n <= 32 && *ip + 32 <= src.len() && *op + 32 <= dst.len() {
        let w: [u8; 16] = src[*ip..*ip + 16].try_into().expect("16 bytes");
        dst[*op..*op + 16].copy_from_slice(&w);
        if n > 16 {
            let w: [u8; 16] = src[*ip + 16..*ip + 32].try_into().expect("16 bytes");
            dst[*op + 16..*op + 32].copy_from_slice(&w);
        }
    } else {
        let lits = src.get(*ip..*ip + n).ok_or("input overrun")?;
        dst.get_mut(*op..*op + n)
            .ok_or("output overrun")?
            .copy_from_slice(lits);
    }
    *ip += n;
    *op += n;
    Ok(())
}

/// An LZ77 match: `len` bytes from `dist` back. A match of up to 8 (16) bytes from at least 8
/// (16) bytes back is one 8-byte word (16-byte block); other matches from at least 8 bytes
/// back go 8 bytes at a time (every word read is final: it ends at least `dist` bytes behind
/// the write). These may write past the match, where later output overwrites it. A run of one
/// byte is a fill; other overlapping matches (the output repeats with period `dist`) are
/// copied from the match start in non-overlapping blocks that double each time.
#[inline(always)]
pub(crate) fn copy_match(
    dst: &mut [u8],
    op: &mut usize,
    dist: usize,
    len: usize,
) -> DecodeResult<()> {
    if dist == 0 || dist > *op {
        return Err("lookbehind overrun");
    }
    if *op + len > dst.len() {
        return Err("output overrun");
    }
    let from = *op - dist;
    if dist >= 8 && len <= 8 && *op + 8 <= dst.len() {
        let w: [u8; 8] = dst[from..from + 8].try_into().expect("8 bytes");
        dst[*op..*op + 8].copy_from_slice(&w);
    } else if dist >= 16 && len <= 16 && *op + 16 <= dst.len() {
        let w: [u8; 16] = dst[from..from + 16].try_into().expect("16 bytes");
        dst[*op..*op + 16].copy_from_slice(&w);
    } else if dist >= 8 && *op + len + 8 <= dst.len() {
        let (mut s, mut d) = (from, *op);
        let end = d + len;
        while d < end {
            let w: [u8; 8] = dst[s..s + 8].try_into().expect("8 bytes");
            dst[d..d + 8].copy_from_slice(&w);
            s += 8;
            d += 8;
        }
    } else if dist == 1 {
        let b = dst[from];
        dst[*op..*op + len].fill(b);
    } else if dist >= len {
        dst.copy_within(from..from + len, *op);
    } else {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(dist + done);
            dst.copy_within(from..from + n, *op + done);
            done += n;
        }
    }
    *op += len;
    Ok(())
}
