//! Swap devices: slot allocation in clusters, the device IO model, slot freeing, and the
//! readahead window arithmetic.
//!
//! Slot allocation follows cluster_alloc_swap_entry of mm/swapfile.c as of 6.17/6.18 (Kairui
//! Song's cluster allocator) for order-0 slots on a device without discard: clusters of 512
//! slots (SWAPFILE_CLUSTER) on the kernel's lists (free, nonfull, frag, full). The allocator
//! continues from the slot after the last one it took (si->global_cluster->next for a rotational
//! device; a CPU's percpu_swap_cluster for an SSD or zram: we model one CPU), scanning forward
//! to the end of that cluster only (alloc_swap_scan_cluster); when nothing is free there, it
//! takes the nonfull clusters first, then a free one, then one fragment cluster, each scanned
//! from its start. After an allocation a partly used cluster goes to the tail of the frag list,
//! a full one to the full list (relocate_cluster); freeing a slot puts its cluster at the tail
//! of the nonfull list (partial_free_cluster), or of the free list when it empties
//! (free_cluster). Not modelled: discard, higher orders, reclaim of swap-cache-only slots
//! (swap_reclaim_full_clusters, only when vm_swap_full), the per-CPU clusters of other CPUs.
//! Devices are used in priority order; equal priorities do not round-robin.
//!
//! Readahead window: __swapin_nr_pages / swapin_nr_pages / swap_vma_ra_win of mm/swap_state.c.
//!
//! Device timing (`BlockDevice::issue`, crate::block) is a cost model, not kernel code: docs/model/time.md. The
//! block layer that builds the requests (plugging, merging) is crate::block.

use super::page::{NONE, PAGE_SIZE};
use crate::block::{BlockDevice, BlockDevices};
use crate::compress::Codec;
use crate::config::{DeviceModel, SwapDevice, SwapKind};
use crate::error::{ConfigError, Result};
use crate::policy::Switches;

pub const SWAPFILE_CLUSTER: u32 = 512;

/// Which list of the device a cluster is on (swap_cluster_info->flags; `Off`: on none, the
/// kernel's CLUSTER_FLAG_NONE while a list scan holds it, or CLUSTER_FLAG_FULL's list, which
/// nothing here scans).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClusterList {
    Free = 0,
    NonFull = 1,
    Frag = 2,
    Off = 3,
}

const NO_CLUSTER: u32 = u32::MAX;

struct Cluster {
    count: u16,
    list: ClusterList,
    /// Neighbours on its list (list_head), NO_CLUSTER at the ends.
    prev: u32,
    next: u32,
    used: [u64; (SWAPFILE_CLUSTER / 64) as usize],
}

/// The free, nonfull and frag lists: first and last cluster of each, linked through the
/// clusters (the kernel's list_heads), so that moving a cluster to a list's tail is O(1).
#[derive(Clone, Copy)]
struct Lists {
    head: [u32; 3],
    tail: [u32; 3],
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
    lists: Lists,
    /// global_cluster->next[0] (percpu_swap_cluster for non-rotational devices): the offset
    /// the next allocation scans from, None (SWAP_ENTRY_INVALID) when it must find a cluster.
    next_offset: Option<u32>,
    /// A zram device (SWP_SYNCHRONOUS_IO, in memory) instead of a block device.
    pub zram: Option<crate::zram::Zram>,
}

impl SwapDev {
    pub fn new(name: String, priority: i32, base: u32, pages: u64, model: DeviceModel) -> SwapDev {
        let max = pages.min(u32::MAX as u64 / 2) as u32;
        let nclusters = max.div_ceil(SWAPFILE_CLUSTER);
        let clusters: Vec<Cluster> = (0..nclusters)
            .map(|_| Cluster {
                count: 0,
                list: ClusterList::Off,
                prev: NO_CLUSTER,
                next: NO_CLUSTER,
                used: [0; 8],
            })
            .collect();
        let mut d = SwapDev {
            name,
            priority,
            base,
            max,
            inuse: 0,
            bdev: BlockDevice::new(model),
            clusters,
            lists: Lists {
                head: [NO_CLUSTER; 3],
                tail: [NO_CLUSTER; 3],
            },
            next_offset: None,
            zram: None,
        };
        // Slots past `max` in the last cluster, and slot 0 (the swap header), are never free
        // (swapon marks them bad: swap_cluster_setup_bad_slot).
        for s in max..nclusters * SWAPFILE_CLUSTER {
            let c = &mut d.clusters[(s / SWAPFILE_CLUSTER) as usize];
            c.used[((s % SWAPFILE_CLUSTER) / 64) as usize] |= 1 << (s % 64);
            c.count += 1;
        }
        d.clusters[0].used[0] |= 1;
        d.clusters[0].count += 1;
        // setup_clusters: empty clusters on the free list in order, the others (the header's,
        // a short last one) on the nonfull list.
        for c in 0..nclusters {
            let to = if d.clusters[c as usize].count == 0 {
                ClusterList::Free
            } else {
                ClusterList::NonFull
            };
            d.move_to_tail(c, to);
        }
        d
    }

    /// list_del: take `c` off its list.
    fn unlink(&mut self, c: u32) {
        let (list, prev, next) = {
            let cl = &self.clusters[c as usize];
            (cl.list, cl.prev, cl.next)
        };
        if list == ClusterList::Off {
            return;
        }
        let l = list as usize;
        if prev == NO_CLUSTER {
            self.lists.head[l] = next;
        } else {
            self.clusters[prev as usize].next = next;
        }
        if next == NO_CLUSTER {
            self.lists.tail[l] = prev;
        } else {
            self.clusters[next as usize].prev = prev;
        }
        let cl = &mut self.clusters[c as usize];
        cl.list = ClusterList::Off;
        cl.prev = NO_CLUSTER;
        cl.next = NO_CLUSTER;
    }

    /// move_cluster: `c` to the tail of `to` (Off: off every list).
    fn move_to_tail(&mut self, c: u32, to: ClusterList) {
        self.unlink(c);
        if to == ClusterList::Off {
            return;
        }
        let l = to as usize;
        let tail = self.lists.tail[l];
        if tail == NO_CLUSTER {
            self.lists.head[l] = c;
        } else {
            self.clusters[tail as usize].next = c;
        }
        self.lists.tail[l] = c;
        let cl = &mut self.clusters[c as usize];
        cl.list = to;
        cl.prev = tail;
    }

    /// relocate_cluster, after an allocation attempt: empty to the free list, partly used to
    /// the tail of the frag list (unless it is on it), full off the lists (the full list).
    fn relocate(&mut self, c: u32) {
        let cl = &self.clusters[c as usize];
        let to = match cl.count as u32 {
            0 => ClusterList::Free,
            SWAPFILE_CLUSTER => ClusterList::Off,
            _ => ClusterList::Frag,
        };
        if cl.list != to || to == ClusterList::Off {
            self.move_to_tail(c, to);
        }
    }

    /// alloc_swap_scan_cluster for one slot: the first free slot of cluster `c` at or after
    /// `from` (not wrapping to the cluster's start); sets the next offset and relocates `c`.
    fn scan_cluster(&mut self, c: u32, from: u32) -> Option<u32> {
        let cl = &mut self.clusters[c as usize];
        let found = if (cl.count as u32) < SWAPFILE_CLUSTER {
            first_free(&cl.used, from)
        } else {
            None
        };
        self.next_offset = None;
        if let Some(s) = found {
            cl.used[(s / 64) as usize] |= 1 << (s % 64);
            cl.count += 1;
            if (cl.count as u32) < SWAPFILE_CLUSTER && s + 1 < SWAPFILE_CLUSTER {
                self.next_offset = Some(c * SWAPFILE_CLUSTER + s + 1);
            }
        }
        self.relocate(c);
        found.map(|s| c * SWAPFILE_CLUSTER + s)
    }

    /// isolate_lock_cluster + alloc_swap_scan_cluster from the cluster's start, for the first
    /// cluster of `list`.
    fn scan_list_head(&mut self, list: ClusterList) -> Option<Option<u32>> {
        let c = self.lists.head[list as usize];
        if c == NO_CLUSTER {
            return None;
        }
        self.unlink(c);
        Some(self.scan_cluster(c, 0))
    }

    /// SWP_SYNCHRONOUS_IO: IO completes inline (zram).
    pub fn synchronous(&self) -> bool {
        self.zram.is_some()
    }

    pub fn usable(&self) -> u64 {
        self.max as u64 - 1
    }

    /// Allocate one order-0 slot (cluster_alloc_swap_entry); returns the device offset.
    pub fn alloc(&mut self) -> Option<u32> {
        let found = self.alloc_offset();
        if found.is_some() {
            self.inuse += 1;
        }
        found
    }

    fn alloc_offset(&mut self) -> Option<u32> {
        if let Some(off) = self.next_offset {
            let c = off / SWAPFILE_CLUSTER;
            // An empty cluster is scanned from its start (6.18: "if (cluster_is_empty(ci))
            // offset = cluster_offset(si, ci)").
            let from = if self.clusters[c as usize].count == 0 {
                0
            } else {
                off % SWAPFILE_CLUSTER
            };
            if let Some(s) = self.scan_cluster(c, from) {
                return Some(s);
            }
        }
        // new_cluster: every nonfull cluster (scan_all), then one free cluster, then one
        // fragment cluster.
        while let Some(found) = self.scan_list_head(ClusterList::NonFull) {
            if found.is_some() {
                return found;
            }
        }
        if let Some(found) = self.scan_list_head(ClusterList::Free) {
            return found;
        }
        self.scan_list_head(ClusterList::Frag).flatten()
    }

    /// Free one slot (swap_entries_free): its cluster goes to the tail of the free list when
    /// it empties (free_cluster), else to the tail of the nonfull list unless it is on it
    /// (partial_free_cluster).
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
        if cl.count == 0 {
            if cl.list != ClusterList::Free {
                self.move_to_tail(c, ClusterList::Free);
            }
        } else if cl.list != ClusterList::NonFull {
            self.move_to_tail(c, ClusterList::NonFull);
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
    /// swapin_readahead_hits (4 after boot), prev_offset, last_readahead_pages (0 after boot):
    /// global statics of mm/swap_state.c, so on a real machine a run starts with what the
    /// last swap-ins left (`machine.swapin_readahead_hits`, `machine.last_readahead_pages`;
    /// [`Swap::start_readahead_state`]).
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

    /// The cluster readahead state the run starts with: the boot values (hits 4, no previous
    /// window) unless the machine says otherwise. A machine that has swapped before keeps its
    /// statics: after a random phase whose readahead collapsed, 0 hits and a one-page window
    /// (docs/model/swap.md, "The readahead state at the start of a run"). prev_offset stays 0
    /// (an offset no run's fault is adjacent to, as after boot). The last window is 0 or a
    /// power of two, as __swapin_nr_pages makes it.
    pub(crate) fn start_readahead_state(
        &mut self,
        hits: Option<u32>,
        last_pages: Option<u32>,
    ) -> Result<()> {
        if let Some(p) = last_pages {
            if p != 0 && !p.is_power_of_two() {
                return Err(ConfigError::invalid(
                    "machine.last_readahead_pages",
                    format!(
                        "{p}: expected 0 or a power of two (the window swapin_nr_pages last chose)"
                    ),
                ));
            }
            self.ra_last_pages = p;
        }
        if let Some(h) = hits {
            self.ra_hits = h;
        }
        Ok(())
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

    /// A cache hint for a coming swap-in and free of `slot`: its reverse-map entry and its
    /// cluster (count, list links, used bits) start loading.
    #[inline]
    pub fn prefetch(&self, slot: u32) {
        if let Some(p) = self.slot_page.get(slot as usize) {
            crate::prefetch::prefetch(p);
        }
        if let Some(d) = self.devs.iter().rev().find(|d| d.base <= slot) {
            if let Some(c) = d
                .clusters
                .get(((slot - d.base) / SWAPFILE_CLUSTER) as usize)
            {
                crate::prefetch::prefetch(c);
            }
        }
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
        // The allocator keeps moving forward inside the current cluster.
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
    fn a_cluster_is_scanned_forward_only_and_freed_slots_wait_on_the_nonfull_list() {
        // 6.18 cluster_alloc_swap_entry: the allocator continues after the last slot it took
        // and does not wrap to the start of that cluster; a slot freed behind it puts the
        // cluster on the nonfull list, which is taken (from its start) once the cluster it
        // is in has nothing free ahead, before any free cluster.
        let c = SWAPFILE_CLUSTER;
        let mut d = SwapDev::new("s".into(), -2, 0, 4 * c as u64, model());
        let first: Vec<u32> = (0..c - 1).map(|_| d.alloc().unwrap()).collect();
        assert_eq!(first, (1..c).collect::<Vec<_>>(), "cluster 0 in order");
        d.free(5);
        d.free(9);
        assert_eq!(
            d.alloc(),
            Some(5),
            "cluster 0 full ahead: its nonfull entry, from the start"
        );
        assert_eq!(d.alloc(), Some(9), "then on from the slot after");
        assert_eq!(
            d.alloc(),
            Some(c),
            "nothing ahead in cluster 0: a free cluster"
        );
        assert_eq!(d.alloc(), Some(c + 1));
        assert_eq!(d.alloc(), Some(c + 2));
        d.free(c + 1); // behind the allocator in its own cluster
                       // The free put cluster 1 on the nonfull list, but the next allocation in it moved it to
                       // the frag list (relocate_cluster): the hole is not revisited while other clusters
                       // have room. The allocator goes on to the end of cluster 1, then to a free cluster.
        for k in c + 3..2 * c {
            assert_eq!(d.alloc(), Some(k));
        }
        assert_eq!(
            d.alloc(),
            Some(2 * c),
            "the hole in cluster 1 waits on the frag list"
        );
        // A free in cluster 1 puts it on the nonfull list again, which goes before the rest of
        // the current cluster only once that has nothing free ahead.
        d.free(c + 7);
        assert_eq!(d.alloc(), Some(2 * c + 1));
        // Emptying a cluster returns it to the free list.
        for s in (c..2 * c).filter(|&s| s != c + 1 && s != c + 7) {
            d.free(s);
        }
        assert_eq!(d.alloc(), Some(2 * c + 2), "the current cluster goes on");
        assert_eq!(d.inuse, (c as u64 - 1) + 3);
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
