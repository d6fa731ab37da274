//! zram as a swap device: drivers/block/zram/zram_drv.c as of 6.12 ≈ 6.18 (kernel-model.md §12).
//!
//! Modelled: the write path (same-element pages kept as a flag, compression with the device's
//! comp_algorithm, pages compressing to ≥ huge_class_size stored uncompressed as "huge"
//! objects, zs_malloc), slot free on swap-slot release (notify_free), mm_stat and io_stat.
//! As a swap device zram is non-rotational and SWP_SYNCHRONOUS_IO: writes complete inline and
//! reads are synchronous without readahead (see swap.rs / memory.rs).
//!
//! Simplified: no mem_limit, no writeback/idle/recompression (configured out on the target
//! kernel), no per-slot locking; allocation failures only when no page is free.

use crate::compress::Codec;
use crate::config::SwapDevice;
use crate::error::{ConfigError, Result};
use crate::policy::Switches;
use crate::zpool::{self, zsmalloc, Zpool, ZPOOLS};

/// One slot's stored object.
#[derive(Clone, Copy, Debug, Default)]
pub struct ZramSlot {
    /// zsmalloc handle, or 0 for same-element and empty slots.
    pub handle: u32,
    /// Stored bytes (4096 for huge pages, 0 for same-element pages).
    pub len: u16,
    pub flags: u8,
}

pub const SLOT_USED: u8 = 1;
pub const SLOT_SAME: u8 = 2;
pub const SLOT_HUGE: u8 = 4;

pub struct Zram {
    /// Index into Mm::codecs of this device's comp_algorithm.
    pub codec_slot: usize,
    pub pool: Box<dyn Zpool>,
    pub slots: Vec<ZramSlot>,
    pub pages_stored: u64,
    pub compr_data_size: u64,
    pub same_pages: u64,
    pub huge_pages: u64,
    pub huge_pages_since: u64,
    pub mem_used_max_pages: u64,
    pub notify_free: u64,
    pub failed_writes: u64,
    /// The pool's compaction shrinker's deferred count.
    pub compact_deferred: u64,
}

/// What zram_write_page did.
pub enum ZramWrite {
    Stored,
    /// zs_malloc failed: the bio fails (failed_writes).
    Failed,
}

impl Zram {
    pub fn new(codec_slot: usize, slots: usize, pool: Box<dyn Zpool>) -> Zram {
        Zram {
            codec_slot,
            pool,
            slots: vec![ZramSlot::default(); slots],
            pages_stored: 0,
            compr_data_size: 0,
            same_pages: 0,
            huge_pages: 0,
            huge_pages_since: 0,
            mem_used_max_pages: 0,
            notify_free: 0,
            failed_writes: 0,
            compact_deferred: 0,
        }
    }

    /// Swap device `k` of the lowered config, a zram device with `slots` slots. Its
    /// comp_algorithm (default lzo-rle) joins `codecs` (Mm::codecs) if not there yet.
    ///
    /// Its allocator: mainline zram (every version up to 6.18) calls zs_malloc directly, so
    /// without the `zram.zpool_api` switch `allocator` may only name zsmalloc. The switch is
    /// seed 004's patch (Vitaly Wool, "allow zram to use zbud as underlying allocator",
    /// 2015, not merged): zram allocates through the zpool API (zpool_malloc/zpool_free/
    /// zpool_get_total_size), so any allocator kernel `version` has (zbud up to 6.14) can back
    /// the device. Simplified: the allocator is chosen per device by the scenario, not by a
    /// module parameter or sysfs file (the 2015 series chose it at pool creation too).
    pub(crate) fn from_config(
        k: usize,
        s: &SwapDevice,
        slots: usize,
        version: &str,
        switches: &Switches,
        codecs: &mut Vec<Codec>,
    ) -> Result<Zram> {
        let alg = s.comp_algorithm.as_deref().unwrap_or("lzo-rle");
        let c: Codec = alg
            .parse()
            .map_err(|e| ConfigError::unknown(format!("machine.swap[{k}].comp_algorithm"), e))?;
        let slot = codecs.iter().position(|&x| x == c).unwrap_or_else(|| {
            codecs.push(c);
            codecs.len() - 1
        });
        let path = format!("machine.swap[{k}].allocator");
        let pool = match s.allocator.as_deref() {
            None | Some("zsmalloc") => (zsmalloc::ZPOOL.new)(),
            Some(other) if switches.zram_zpool_api => (zpool::select(other, version, &path)?.new)(),
            Some(other) => {
                let known = ZPOOLS.iter().any(|z| z.name == other) || other == "z3fold";
                let reason = format!(
                    "mainline zram has only zsmalloc (drivers/block/zram calls zs_malloc directly), not {other:?}; \
                     zram on another allocator is seed 004's unmerged patch: set kernel.switches.\"zram.zpool_api\" = true"
                );
                return Err(if known {
                    ConfigError::unavailable(path, reason)
                } else {
                    ConfigError::unknown(path, reason)
                });
            }
        };
        Ok(Zram::new(slot, slots, pool))
    }

    /// zram_write_page for slot `off`: `same` if every 8-byte word is equal, `comp_len` from
    /// the device's compressor. Pages compressing to `huge_class_size` or more are stored as
    /// PAGE_SIZE objects; zbud (under `zram.zpool_api`) refuses those (zbud_alloc: -ENOSPC
    /// above PAGE_SIZE − header − one chunk, as in the 2015 series before Vitaly Wool's
    /// separate "zbud: allow PAGE_SIZE allocations"), so the write fails (failed_writes). The caller accounts the pool's page growth (and undoes the
    /// write with `free_slot` if the page allocator cannot supply it).
    pub fn write(
        &mut self,
        off: u32,
        same: bool,
        comp_len: u32,
        huge_class_size: u32,
    ) -> ZramWrite {
        // Overwriting a slot (a dirty swap-cache page written again) frees its old contents.
        self.free_slot(off, false);
        if same {
            self.slots[off as usize] = ZramSlot {
                handle: 0,
                len: 0,
                flags: SLOT_USED | SLOT_SAME,
            };
            self.same_pages += 1;
            self.pages_stored += 1;
            return ZramWrite::Stored;
        }
        let (len, huge) = if comp_len >= huge_class_size {
            (4096, true)
        } else {
            (comp_len, false)
        };
        let Ok(h) = self.pool.malloc(len) else {
            self.failed_writes += 1;
            return ZramWrite::Failed;
        };
        let mut flags = SLOT_USED;
        if huge {
            flags |= SLOT_HUGE;
            self.huge_pages += 1;
            self.huge_pages_since += 1;
        }
        self.slots[off as usize] = ZramSlot {
            handle: h,
            len: len as u16,
            flags,
        };
        self.compr_data_size += len as u64;
        self.pages_stored += 1;
        self.mem_used_max_pages = self.mem_used_max_pages.max(self.pool.total_pages());
        ZramWrite::Stored
    }

    /// zram_slot_free (a slot-free notification when `notify`).
    pub fn free_slot(&mut self, off: u32, notify: bool) {
        let s = std::mem::take(&mut self.slots[off as usize]);
        if s.flags & SLOT_USED == 0 {
            return;
        }
        if notify {
            self.notify_free += 1;
        }
        self.pages_stored -= 1;
        if s.flags & SLOT_SAME != 0 {
            self.same_pages -= 1;
            return;
        }
        if s.flags & SLOT_HUGE != 0 {
            self.huge_pages -= 1;
        }
        self.compr_data_size -= s.len as u64;
        self.pool.free(s.handle);
    }

    pub fn slot(&self, off: u32) -> ZramSlot {
        self.slots[off as usize]
    }

    /// mm_stat, in the kernel's field order.
    pub fn mm_stat(&self) -> [(&'static str, u64); 9] {
        [
            ("orig_data_size", self.pages_stored * 4096),
            ("compr_data_size", self.compr_data_size),
            ("mem_used_total", self.pool.total_pages() * 4096),
            ("mem_limit", 0),
            ("mem_used_max", self.mem_used_max_pages * 4096),
            ("same_pages", self.same_pages),
            ("pages_compacted", self.pool.pages_compacted()),
            ("huge_pages", self.huge_pages),
            ("huge_pages_since", self.huge_pages_since),
        ]
    }
}

impl Zram {
    /// mm_stat and io_stat of device `zram{n}` (devices are numbered in the scenario's order,
    /// as the lab configures them).
    pub fn export(&self, n: usize, out: &mut Vec<(String, u64)>) {
        for (k, v) in self.mm_stat() {
            out.push((format!("zram{n}.mm_stat.{k}"), v));
        }
        out.push((format!("zram{n}.io_stat.failed_writes"), self.failed_writes));
        out.push((format!("zram{n}.io_stat.notify_free"), self.notify_free));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zpool::zsmalloc;

    #[test]
    fn same_huge_and_compressed_pages() {
        let mut z = Zram::new(0, 16, (zsmalloc::ZPOOL.new)());
        z.write(1, true, 0, 3625);
        z.write(2, false, 4100, 3625);
        z.write(3, false, 3625, 3625);
        z.write(4, false, 1000, 3625);
        assert_eq!(z.same_pages, 1);
        assert_eq!(z.huge_pages, 2, "≥ huge_class_size is stored uncompressed");
        assert_eq!(z.compr_data_size, 4096 + 4096 + 1000);
        assert_eq!(z.pages_stored, 4);
        assert_eq!(z.mm_stat()[0].1, 4 * 4096);
        z.free_slot(2, true);
        z.free_slot(1, true);
        assert_eq!(
            (z.huge_pages, z.same_pages, z.notify_free, z.pages_stored),
            (1, 0, 2, 2)
        );
        assert_eq!(z.huge_pages_since, 2, "cumulative");
        assert_eq!(z.compr_data_size, 4096 + 1000);
        // Overwriting a slot replaces its contents.
        z.write(4, false, 500, 3625);
        assert_eq!((z.pages_stored, z.compr_data_size), (2, 4096 + 500));
    }
}
