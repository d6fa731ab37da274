//! The peak files' open descriptors (cgroup v2 memory.peak and memory.swap.peak): a write
//! through a descriptor resets the peak that descriptor reads, and only that one.
//!
//! Follows 6.12's mm/memcontrol.c `peak_open`, `peak_write`, `peak_show` and `peak_release`
//! (struct cgroup_of_peak: one value per open file, OFP_PEAK_UNSET until its first write;
//! the memcg's `memory_peaks`/`swap_peaks` lists of the written ones) and the page counter's
//! `local_watermark` (mm/page_counter.c: raised with the watermark at every charge, in
//! memcg.rs). Simplified: the watcher lists are not kept; the open, written descriptors of a
//! memcg's counter are found in the table, which is the same set (the kernel's updates of
//! them do not depend on their order).

use super::{Mm, PAGE_SIZE};

/// One open peak file (struct kernfs_open_file with its cgroup_of_peak).
#[derive(Clone, Debug)]
pub struct PeakFd {
    pub memcg: u16,
    /// memory.swap.peak (the swap counter); else memory.peak.
    pub swap: bool,
    /// cgroup_of_peak.value, pages: None = OFP_PEAK_UNSET (never written through).
    pub value: Option<u64>,
    /// Not yet released (close(2), or its process ended).
    pub open: bool,
}

impl Mm {
    /// (usage, local_watermark, watermark) of the counter a peak file reads.
    fn peak_counter(&mut self, m: u16, swap: bool) -> (u64, &mut u64, u64) {
        let mc = &mut self.memcgs[m as usize];
        if swap {
            (
                mc.swap_usage,
                &mut mc.swap_local_watermark,
                mc.swap_watermark,
            )
        } else {
            (mc.usage, &mut mc.local_watermark, mc.watermark)
        }
    }

    /// peak_open: a new open file of memcg `m`'s memory.peak (or memory.swap.peak), its value
    /// unset. Returns its id in the table.
    pub fn peak_open(&mut self, m: u16, swap: bool) -> usize {
        self.peak_fds.push(PeakFd {
            memcg: m,
            swap,
            value: None,
            open: true,
        });
        self.peak_fds.len() - 1
    }

    /// peak_write: the counter's local watermark drops to its usage; every other written
    /// descriptor of that counter keeps at least the usage as its value (6.12 raises each
    /// peer's value to the current usage, not to the local watermark it loses); this one's
    /// value becomes the usage (its first write registers it as a watcher).
    pub fn peak_write(&mut self, fd: usize) {
        let (m, swap) = (self.peak_fds[fd].memcg, self.peak_fds[fd].swap);
        let usage = self.peak_reset(m, swap, Some(fd));
        self.peak_fds[fd].value = Some(usage);
    }

    /// The part of peak_write that does not depend on the writing descriptor: reset the local
    /// watermark and raise the peers' values (every written, open descriptor of the counter
    /// but `except`). Returns the usage.
    fn peak_reset(&mut self, m: u16, swap: bool, except: Option<usize>) -> u64 {
        let (usage, local, _) = self.peak_counter(m, swap);
        *local = usage;
        for (i, peer) in self.peak_fds.iter_mut().enumerate() {
            if Some(i) != except && peer.open && peer.memcg == m && peer.swap == swap {
                if let Some(v) = peer.value.as_mut() {
                    *v = (*v).max(usage);
                }
            }
        }
        usage
    }

    /// peak_show, bytes: an unwritten descriptor reads the watermark (the peak since the
    /// cgroup was created), a written one the larger of its value and the local watermark.
    pub fn peak_show(&mut self, fd: usize) -> u64 {
        let (m, swap, value) = {
            let f = &self.peak_fds[fd];
            (f.memcg, f.swap, f.value)
        };
        let (_, local, watermark) = self.peak_counter(m, swap);
        let pages = match value {
            None => watermark,
            Some(v) => v.max(*local),
        };
        pages * PAGE_SIZE
    }

    /// peak_release: the descriptor leaves its memcg's watchers.
    pub fn peak_release(&mut self, fd: usize) {
        self.peak_fds[fd].open = false;
    }

    /// A read of the file without a descriptor of the process's (cg_read: open, read, close):
    /// a fresh descriptor is unset, so it reads the watermark.
    pub fn peak_read_once(&mut self, m: u16, swap: bool) -> u64 {
        self.peak_counter(m, swap).2 * PAGE_SIZE
    }

    /// A write of the file without a descriptor of the process's (cg_write: open, write,
    /// close): the fresh descriptor's own value dies with it at the close; what stays is the
    /// local watermark's reset and the peers' raised values.
    pub fn peak_write_once(&mut self, m: u16, swap: bool) {
        self.peak_reset(m, swap, None);
    }
}
