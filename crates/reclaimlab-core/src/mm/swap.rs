//! Swap devices: slot allocation in clusters, the device IO model, slot freeing, and the
//! readahead window arithmetic.
//!
//! Slot allocation follows the 6.15+ cluster allocator of mm/swapfile.c (Kairui Song) in
//! simplified form: clusters of 512 slots (SWAPFILE_CLUSTER); one current cluster per device
//! scanned forward from a cursor (the kernel keeps a global one for rotational devices and one
//! per CPU for SSDs; we model a single CPU's); when it is full, take a nonfull cluster, else a
//! free one. Discard, fragment lists, higher orders and swap-cache reclaim of full clusters are
//! not modelled. Devices are used in priority order; equal priorities do not round-robin.
//!
//! Readahead window: __swapin_nr_pages / swapin_nr_pages / swap_vma_ra_win of mm/swap_state.c.
//!
//! Device timing (`BlockDevice::issue`, crate::block) is a cost model, not kernel code: docs/model/time.md. The
//! block layer that builds the requests (plugging, merging) is crate::block.

use std::collections::VecDeque;

use super::page::{NONE, PAGE_SIZE};
use crate::block::{BlockDevice, BlockDevices};
use crate::compress::Codec;
use crate::config::{DeviceModel, SwapDevice, SwapKind};
use crate::error::{ConfigError, Result};
use crate::policy::Switches;

pub const SWAPFILE_CLUSTER: u32 = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClusterState {
    Free,
    NonFull,
    Full,
    Current,
}

struct Cluster {
    count: u16,
    state: ClusterState,
    used: [u64; (SWAPFILE_CLUSTER / 64) as usize],
}

/// The first clear bit at or after `from` (< SWAPFILE_CLUSTER) in a cluster's map, a word at a
/// time. Slots past si->max are set in the map, so a clear bit is always a usable slot.
fn first_free(used: &[u64; (SWAPFILE_CLUSTER / 64) as usize], from: u32) -> Option<u32> {
    let mut w = (from / 64) as usize;
    let mut free = !used[w] & (!0u64 << (from % 64));
    loop {
        if free != 0 {
            return Some(w as u32 * 64 + free.trailing_zeros());
        }
        w += 1;
        if w == used.len() {
            return None;
        }
        free = !used[w];
    }
}

pub struct SwapDev {
    pub name: String,
    pub priority: i32,
    /// Global id of this device's slot 0.
    pub base: u32,
    /// si->max: slots including the header slot 0.
    pub max: u32,
    pub inuse: u64,
    /// The block device under the swap area: its request queue and timing (crate::block).
    pub bdev: BlockDevice,
    clusters: Vec<Cluster>,
    free_clusters: VecDeque<u32>,
    nonfull_clusters: VecDeque<u32>,
    current: Option<u32>,
    cursor: u32,
    /// A zram device (SWP_SYNCHRONOUS_IO, in memory) instead of a block device.
    pub zram: Option<crate::zram::Zram>,
}

impl SwapDev {
    pub fn new(name: String, priority: i32, base: u32, pages: u64, model: DeviceModel) -> SwapDev {
        let max = pages.min(u32::MAX as u64 / 2) as u32;
        let nclusters = max.div_ceil(SWAPFILE_CLUSTER);
        let mut clusters: Vec<Cluster> = (0..nclusters)
            .map(|_| Cluster {
                count: 0,
                state: ClusterState::Free,
                used: [0; 8],
            })
            .collect();
        // Slots past `max` in the last cluster, and slot 0 (the swap header), are never free.
        for s in max..nclusters * SWAPFILE_CLUSTER {
            let c = &mut clusters[(s / SWAPFILE_CLUSTER) as usize];
            c.used[((s % SWAPFILE_CLUSTER) / 64) as usize] |= 1 << (s % 64);
            c.count += 1;
        }
        clusters[0].used[0] |= 1;
        clusters[0].count += 1;
        let free_clusters = (0..nclusters).collect();
        SwapDev {
            name,
            priority,
            base,
            max,
            inuse: 0,
            bdev: BlockDevice::new(model),
            clusters,
            free_clusters,
            nonfull_clusters: VecDeque::new(),
            current: None,
            cursor: 0,
            zram: None,
        }
    }

    /// SWP_SYNCHRONOUS_IO: IO completes inline (zram).
    pub fn synchronous(&self) -> bool {
        self.zram.is_some()
    }

    pub fn usable(&self) -> u64 {
        self.max as u64 - 1
    }

    fn take_in_cluster(&mut self, c: u32) -> Option<u32> {
        let cl = &mut self.clusters[c as usize];
        if cl.count as u32 >= SWAPFILE_CLUSTER {
            return None;
        }
        let start = if self.current == Some(c) {
            self.cursor % SWAPFILE_CLUSTER
        } else {
            0
        };
        // First free slot at or after the cursor, else from the cluster start (the kernel's
        // find_next_zero_bit in alloc_swap_scan_cluster): a word at a time.
        let s = first_free(&cl.used, start).or_else(|| first_free(&cl.used, 0))?;
        cl.used[(s / 64) as usize] |= 1 << (s % 64);
        cl.count += 1;
        self.cursor = s + 1;
        Some(c * SWAPFILE_CLUSTER + s)
    }

    /// Allocate one order-0 slot; returns the device offset.
    pub fn alloc(&mut self) -> Option<u32> {
        loop {
            if let Some(c) = self.current {
                if let Some(off) = self.take_in_cluster(c) {
                    self.inuse += 1;
                    return Some(off);
                }
                self.clusters[c as usize].state = ClusterState::Full;
                self.current = None;
            }
            let next = loop {
                match self.nonfull_clusters.pop_front() {
                    Some(c) if self.clusters[c as usize].state == ClusterState::NonFull => {
                        break Some(c)
                    }
                    Some(_) => continue,
                    None => break None,
                }
            }
            .or_else(|| loop {
                match self.free_clusters.pop_front() {
                    Some(c) if self.clusters[c as usize].state == ClusterState::Free => {
                        break Some(c)
                    }
                    Some(_) => continue,
                    None => break None,
                }
            })?;
            self.clusters[next as usize].state = ClusterState::Current;
            self.current = Some(next);
            self.cursor = 0;
        }
    }

    pub fn free(&mut self, off: u32) {
        let c = off / SWAPFILE_CLUSTER;
        let s = off % SWAPFILE_CLUSTER;
        let cl = &mut self.clusters[c as usize];
        debug_assert!(
            cl.used[(s / 64) as usize] & (1 << (s % 64)) != 0,
            "freeing free slot {off}"
        );
        cl.used[(s / 64) as usize] &= !(1 << (s % 64));
        cl.count -= 1;
        self.inuse -= 1;
        match cl.state {
            ClusterState::Full => {
                cl.state = ClusterState::NonFull;
                self.nonfull_clusters.push_back(c);
            }
            ClusterState::NonFull if cl.count == 0 => {
                cl.state = ClusterState::Free;
                self.free_clusters.push_back(c);
            }
            _ => {}
        }
    }

    pub fn slot_used(&self, off: u32) -> bool {
        if off == 0 || off >= self.max {
            return false;
        }
        let cl = &self.clusters[(off / SWAPFILE_CLUSTER) as usize];
        let s = off % SWAPFILE_CLUSTER;
        cl.used[(s / 64) as usize] & (1 << (s % 64)) != 0
    }
}

pub struct Swap {
    pub devs: Vec<SwapDev>,
    /// Global slot id → page holding it (NONE if free).
    pub slot_page: Vec<u32>,
    /// nr_swap_pages: free slots over all devices.
    pub nr_swap_pages: u64,
    pub total_swap_pages: u64,
    /// Any active rotational device: cluster readahead instead of VMA readahead.
    pub rotational: bool,
    /// swapin_readahead_hits (starts at 4), prev_offset, last_readahead_pages.
    pub ra_hits: u32,
    pub ra_prev_offset: u64,
    pub ra_last_pages: u32,
    /// Device indices by descending priority, equal priorities in scenario order (the order
    /// folio_alloc_swap tries them); priorities are fixed once the devices exist.
    by_priority: Vec<usize>,
}

/// The block layer reaches the devices under the swap areas through this, nothing else.
impl BlockDevices for [SwapDev] {
    fn bdev(&mut self, dev: usize) -> &mut BlockDevice {
        &mut self[dev].bdev
    }
}

impl Swap {
    /// The swap devices of the lowered config, numbered into one slot space in their order.
    /// zram devices add their compressor to `codecs` (Mm::codecs); their allocator is checked
    /// against kernel `version` and the `zram.zpool_api` switch.
    pub(crate) fn from_config(
        cfg: &[SwapDevice],
        version: &str,
        switches: &Switches,
        codecs: &mut Vec<Codec>,
    ) -> Result<Swap> {
        let mut devs = Vec::new();
        let mut base = 0u32;
        for (k, s) in cfg.iter().enumerate() {
            let pages = s.size_bytes / PAGE_SIZE;
            if pages < 2 {
                return Err(ConfigError::invalid(
                    format!("machine.swap[{k}].size_bytes"),
                    format!("too small ({})", s.name),
                ));
            }
            if base as u64 + pages >= NONE as u64 {
                return Err(ConfigError::invalid(
                    "machine.swap",
                    "more than 2^32 - 2 swap slots in total",
                ));
            }
            let mut dev = SwapDev::new(s.name.clone(), s.priority, base, pages, s.device.clone());
            if s.kind == SwapKind::Zram {
                dev.bdev.model.rotational = false;
                dev.zram = Some(crate::zram::Zram::from_config(
                    k,
                    s,
                    dev.max as usize,
                    version,
                    switches,
                    codecs,
                )?);
            }
            devs.push(dev);
            base += pages as u32;
        }
        Ok(Swap::new(devs))
    }

    /// The swap devices' files: block request counts, zram's mm_stat and io_stat (numbered
    /// zram0, zram1, ... in the scenario's order), meminfo's SwapTotal and SwapFree.
    pub fn export(&self, out: &mut Vec<(String, u64)>) {
        for d in self.devs.iter().filter(|d| d.zram.is_none()) {
            d.bdev.export_stat(&d.name, out);
        }
        for (n, z) in self.devs.iter().filter_map(|d| d.zram.as_ref()).enumerate() {
            z.export(n, out);
        }
        out.push(("meminfo.SwapTotal".into(), self.total_swap_pages * 4));
        out.push(("meminfo.SwapFree".into(), self.nr_swap_pages * 4));
    }

    pub fn new(devs: Vec<SwapDev>) -> Swap {
        let total: u64 = devs.iter().map(|d| d.usable()).sum();
        let slots = devs
            .iter()
            .map(|d| d.base as u64 + d.max as u64)
            .max()
            .unwrap_or(0);
        let rotational = devs.iter().any(|d| d.bdev.model.rotational);
        let mut by_priority: Vec<usize> = (0..devs.len()).collect();
        by_priority.sort_by_key(|&i| std::cmp::Reverse(devs[i].priority));
        Swap {
            by_priority,
            devs,
            slot_page: vec![NONE; slots as usize],
            nr_swap_pages: total,
            total_swap_pages: total,
            rotational,
            ra_hits: 4,
            ra_prev_offset: 0,
            ra_last_pages: 0,
        }
    }

    /// vm_swap_full(): less than half of the swap space is free.
    pub fn vm_swap_full(&self) -> bool {
        self.nr_swap_pages * 2 < self.total_swap_pages
    }

    pub fn dev_of(&self, slot: u32) -> usize {
        self.devs
            .iter()
            .rposition(|d| d.base <= slot)
            .expect("slot below every device")
    }

    /// folio_alloc_swap for one page: highest-priority device with a free slot.
    pub fn alloc_slot(&mut self, page: u32) -> Option<u32> {
        for &i in &self.by_priority {
            if let Some(off) = self.devs[i].alloc() {
                let slot = self.devs[i].base + off;
                self.slot_page[slot as usize] = page;
                self.nr_swap_pages -= 1;
                return Some(slot);
            }
        }
        None
    }

    pub fn free_slot(&mut self, slot: u32) {
        let d = self.dev_of(slot);
        let off = slot - self.devs[d].base;
        self.devs[d].free(off);
        self.slot_page[slot as usize] = NONE;
        self.nr_swap_pages += 1;
    }
}

/// __swapin_nr_pages: the readahead window from the previous fault position, readahead hits
/// and the previous window ("+2 ... just happens to work well").
pub fn swapin_nr_pages(prev: u64, cur: u64, hits: u32, max_pages: u32, prev_win: u32) -> u32 {
    let mut pages = hits + 2;
    if pages == 2 {
        if cur != prev.wrapping_add(1) && cur != prev.wrapping_sub(1) {
            pages = 1;
        }
    } else {
        let mut roundup = 4;
        while roundup < pages {
            roundup <<= 1;
        }
        pages = roundup;
    }
    pages = pages.min(max_pages);
    pages.max(prev_win / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> DeviceModel {
        DeviceModel::test_fast()
    }

    #[test]
    fn slots_are_sequential_and_skip_the_header() {
        let mut d = SwapDev::new("s".into(), -2, 0, 2048, model());
        assert_eq!(d.alloc(), Some(1));
        assert_eq!(d.alloc(), Some(2));
        d.free(1);
        // The cursor keeps moving forward inside the current cluster.
        assert_eq!(d.alloc(), Some(3));
        assert_eq!(d.usable(), 2047);
    }

    #[test]
    fn device_fills_up_and_frees() {
        let mut d = SwapDev::new("s".into(), -2, 0, 1000, model());
        let got: Vec<u32> = std::iter::from_fn(|| d.alloc()).collect();
        assert_eq!(got.len(), 999);
        assert!(!got.contains(&0));
        d.free(600);
        assert_eq!(d.alloc(), Some(600));
        assert_eq!(d.alloc(), None);
    }

    #[test]
    fn first_free_is_the_bitwise_scan() {
        // Against the plain bit-by-bit search, on maps with words full, empty and mixed.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..2000 {
            let mut used = [0u64; 8];
            for w in used.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *w = match x % 4 {
                    0 => !0,
                    1 => 0,
                    _ => x | (x >> 3),
                };
            }
            let from = (round * 37) % SWAPFILE_CLUSTER;
            let slow =
                (from..SWAPFILE_CLUSTER).find(|&s| used[(s / 64) as usize] & (1 << (s % 64)) == 0);
            assert_eq!(first_free(&used, from), slow, "map {used:x?} from {from}");
        }
    }

    #[test]
    fn readahead_window() {
        // First fault: hits start at 4 → 6 → rounded up to 8.
        assert_eq!(swapin_nr_pages(0, 100, 4, 8, 0), 8);
        // No hits, not adjacent, shrinks by half at most per step.
        assert_eq!(swapin_nr_pages(0, 100, 0, 8, 8), 4);
        assert_eq!(swapin_nr_pages(0, 100, 0, 8, 4), 2);
        assert_eq!(swapin_nr_pages(0, 100, 0, 8, 2), 1);
        // Adjacent fault keeps 2.
        assert_eq!(swapin_nr_pages(99, 100, 0, 8, 0), 2);
    }
}
