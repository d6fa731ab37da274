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
//! Device timing (`SwapDev::issue`) is a cost model, not kernel code: docs/model/time.md. The
//! block layer that builds the requests (plugging, merging) is crate::block.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::page::NONE;
use super::PAGE_SIZE;
use crate::block::Dir;
use crate::compress::Codec;
use crate::config::{DeviceModel, SwapDevice, SwapKind};
use crate::error::{ConfigError, Result};
use crate::sim::{Time, NSEC_PER_SEC};
use crate::stats::DiskStats;

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

pub struct SwapDev {
    pub name: String,
    pub priority: i32,
    /// Global id of this device's slot 0.
    pub base: u32,
    /// si->max: slots including the header slot 0.
    pub max: u32,
    pub inuse: u64,
    pub model: DeviceModel,
    clusters: Vec<Cluster>,
    free_clusters: VecDeque<u32>,
    nonfull_clusters: VecDeque<u32>,
    current: Option<u32>,
    cursor: u32,
    /// The device is busy until then: requests are served one after another, each for its
    /// transfer time (at least 1/iops); latencies overlap.
    pipe_free: Time,
    /// Requests issued and bios merged into them (/sys/block/<dev>/stat).
    pub stat: DiskStats,
    /// Completion times of the requests in flight, when the model limits them (nr_requests):
    /// each holds a tag until then.
    pub tags: BinaryHeap<Reverse<Time>>,
    /// Writes in flight in completion order: (done, page).
    pub inflight: VecDeque<(Time, u32)>,
    /// Time of the DeviceDone event already queued for this device, if any.
    pub scheduled: Option<Time>,
    /// A zram device (SWP_SYNCHRONOUS_IO, in memory) instead of a block device.
    pub zram: Option<crate::zram::Zram>,
}

impl SwapDev {
    pub fn new(name: String, priority: i32, base: u32, pages: u64, model: DeviceModel) -> SwapDev {
        let max = pages.min(u32::MAX as u64 / 2) as u32;
        let nclusters = max.div_ceil(SWAPFILE_CLUSTER);
        let mut clusters: Vec<Cluster> = (0..nclusters)
            .map(|_| Cluster { count: 0, state: ClusterState::Free, used: [0; 8] })
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
            model,
            clusters,
            free_clusters,
            nonfull_clusters: VecDeque::new(),
            current: None,
            cursor: 0,
            pipe_free: 0,
            stat: DiskStats::default(),
            tags: BinaryHeap::new(),
            inflight: VecDeque::new(),
            scheduled: None,
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
        let start = if self.current == Some(c) { self.cursor % SWAPFILE_CLUSTER } else { 0 };
        // First free slot at or after the cursor, else from the cluster start.
        let find = |used: &[u64; 8], from: u32| -> Option<u32> {
            (from..SWAPFILE_CLUSTER).find(|&s| used[(s / 64) as usize] & (1 << (s % 64)) == 0)
        };
        let s = find(&cl.used, start).or_else(|| find(&cl.used, 0))?;
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
                    Some(c) if self.clusters[c as usize].state == ClusterState::NonFull => break Some(c),
                    Some(_) => continue,
                    None => break None,
                }
            }
            .or_else(|| loop {
                match self.free_clusters.pop_front() {
                    Some(c) if self.clusters[c as usize].state == ClusterState::Free => break Some(c),
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
        debug_assert!(cl.used[(s / 64) as usize] & (1 << (s % 64)) != 0, "freeing free slot {off}");
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

    /// Pages one request may hold: max_sectors_kb / 4 (at least one page); None when the
    /// device model does not merge.
    pub fn max_request_pages(&self) -> Option<usize> {
        self.model.max_sectors_kb.map(|kb| ((kb as u64 * 1024 / PAGE_SIZE).max(1)) as usize)
    }

    /// Issue one request of consecutive pages (in slot order) to the device; returns when it
    /// completes. The device serves requests one after another (FIFO): each occupies it for
    /// the transfer of its bytes at the bandwidth, and at least 1/iops; the latency overlaps
    /// with later requests. Writes complete in submission order and are queued in `inflight`
    /// (every page of a request completes with it). One page and no `iops`: exactly the
    /// per-page model of earlier versions.
    pub fn issue(&mut self, now: Time, dir: Dir, pages: &[u32]) -> Time {
        let n = pages.len() as u64;
        debug_assert!(n > 0);
        let (bytes_per_s, latency) = match dir {
            Dir::Read => (self.model.read_bytes_per_s, self.model.read_latency_ns),
            Dir::Write => (self.model.write_bytes_per_s, self.model.write_latency_ns),
        };
        // u128: a large max_sectors_kb times 4096 × 10^9 overflows u64.
        let transfer = (n as u128 * PAGE_SIZE as u128 * NSEC_PER_SEC as u128).div_ceil(bytes_per_s.max(1) as u128) as u64;
        let min_busy = self.model.iops.map_or(0, |iops| NSEC_PER_SEC.div_ceil(iops.max(1)));
        let start = now.max(self.pipe_free);
        self.pipe_free = start + transfer.max(min_busy);
        let mut done = self.pipe_free + latency;
        match dir {
            Dir::Read => {
                self.stat.read_ios += 1;
                self.stat.read_merges += n - 1;
            }
            Dir::Write => {
                self.stat.write_ios += 1;
                self.stat.write_merges += n - 1;
                done = done.max(self.inflight.back().map_or(0, |b| b.0));
                self.inflight.extend(pages.iter().map(|&p| (done, p)));
            }
        }
        if self.model.nr_requests.is_some() {
            // The request holds its tag until it completes.
            self.tags.push(Reverse(done));
        }
        done
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
}

impl Swap {
    /// The swap devices of the lowered config, numbered into one slot space in their order.
    /// zram devices add their compressor to `codecs` (Mm::codecs).
    pub(crate) fn from_config(cfg: &[SwapDevice], codecs: &mut Vec<Codec>) -> Result<Swap> {
        let mut devs = Vec::new();
        let mut base = 0u32;
        for (k, s) in cfg.iter().enumerate() {
            let pages = s.size_bytes / PAGE_SIZE;
            if pages < 2 {
                return Err(ConfigError::invalid(format!("machine.swap[{k}].size_bytes"), format!("too small ({})", s.name)));
            }
            if base as u64 + pages >= NONE as u64 {
                return Err(ConfigError::invalid("machine.swap", "more than 2^32 - 2 swap slots in total"));
            }
            let mut dev = SwapDev::new(s.name.clone(), s.priority, base, pages, s.device.clone());
            if s.kind == SwapKind::Zram {
                dev.model.rotational = false;
                dev.zram = Some(crate::zram::Zram::from_config(k, s, dev.max as usize, codecs)?);
            }
            devs.push(dev);
            base += pages as u32;
        }
        Ok(Swap::new(devs))
    }

    /// The swap devices' files: block request counts, zram's mm_stat and io_stat (numbered
    /// zram0, zram1, ... in the scenario's order), meminfo's SwapTotal and SwapFree.
    pub fn export(&self, out: &mut Vec<(String, u64)>) {
        for d in &self.devs {
            d.export_block_stat(out);
        }
        for (n, z) in self.devs.iter().filter_map(|d| d.zram.as_ref()).enumerate() {
            z.export(n, out);
        }
        out.push(("meminfo.SwapTotal".into(), self.total_swap_pages * 4));
        out.push(("meminfo.SwapFree".into(), self.nr_swap_pages * 4));
    }

    pub fn new(devs: Vec<SwapDev>) -> Swap {
        let total: u64 = devs.iter().map(|d| d.usable()).sum();
        let slots = devs.iter().map(|d| d.base as u64 + d.max as u64).max().unwrap_or(0);
        let rotational = devs.iter().any(|d| d.model.rotational);
        Swap {
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
        self.devs.iter().rposition(|d| d.base <= slot).expect("slot below every device")
    }

    /// folio_alloc_swap for one page: highest-priority device with a free slot.
    pub fn alloc_slot(&mut self, page: u32) -> Option<u32> {
        let mut order: Vec<usize> = (0..self.devs.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.devs[i].priority));
        for i in order {
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
        DeviceModel {
            rotational: true,
            read_latency_ns: 100,
            write_latency_ns: 100,
            read_bytes_per_s: 4096 * 1_000_000,
            write_bytes_per_s: 4096 * 1_000_000,
            iops: None,
            max_sectors_kb: None,
            nr_requests: None,
        }
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

    #[test]
    fn writes_complete_in_order() {
        let mut d = SwapDev::new("s".into(), -2, 0, 100, model());
        let a = d.issue(0, Dir::Write, &[1]);
        let b = d.issue(0, Dir::Write, &[2]);
        assert!(b > a);
        assert_eq!(d.inflight.len(), 2);
    }

    #[test]
    fn request_occupies_at_least_one_iops_slot() {
        // 1000 ns per page at the bandwidth, 1 ms per request at 1000 IOPS.
        let mut d = SwapDev::new("s".into(), -2, 0, 100, DeviceModel { iops: Some(1000), ..model() });
        assert_eq!(d.issue(0, Dir::Write, &[1]), 1_000_000 + 100);
        assert_eq!(d.issue(0, Dir::Write, &[2, 3, 4]), 2_000_000 + 100);
        assert_eq!(d.issue(0, Dir::Read, &[5]), 3_000_000 + 100);
        assert_eq!((d.stat.write_ios, d.stat.write_merges, d.stat.read_ios), (2, 2, 1));
        // Without the cap a request of three pages takes three page transfers.
        let mut d = SwapDev::new("s".into(), -2, 0, 100, model());
        assert_eq!(d.issue(0, Dir::Write, &[1, 2, 3]), 3_000 + 100);
    }
}
