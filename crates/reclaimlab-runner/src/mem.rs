//! The process's memory: one 2 MiB-aligned anonymous mapping per region, the exact page bytes
//! of `reclaimlab_workload::content`, and the one-byte touches of read and write accesses.
//!
//! Work is split around the driver handshake. [`Prepared`] (built before `ready`) computes the
//! variant tables and bitmaps, so that their memory is charged to the cgroup the runner starts
//! in, not to the cgroup under test. [`RealMemory`] (built after `go`) maps the regions; every
//! page of a region is first faulted by a phase, so region memory is charged where the
//! simulator charges it.

use std::io;
use std::ptr::{self, NonNull};

use reclaimlab_workload::content::{fill_page, variant_of};
use reclaimlab_workload::Content;

use std::path::PathBuf;

use crate::config::{Plan, RegionPlan};
use crate::exec::Memory;
use crate::file::{self, FileRegion};

pub const PAGE_SIZE: usize = reclaimlab_workload::PAGE_SIZE;
/// The simulator assumes PMD-aligned VMAs: VMA swap readahead stays inside the faulting
/// address's 2 MiB block, counted from the region start.
pub const PMD_SIZE: usize = 2 << 20;

/// Regions with at most this many distinct variants get a table of all of them up front;
/// others compute each page's bytes when it is written (caching the last variant).
pub const PRECOMPUTE_MAX_VARIANTS: u32 = 4096;
/// Upper bound on all variant tables together (the tables live outside the cgroup under test,
/// but on the same machine).
pub const TABLE_BUDGET_BYTES: usize = 64 << 20;

/// One page, page-aligned (fast copies; whole pages for `mlockall`).
#[derive(Clone)]
#[repr(C, align(4096))]
pub struct PageBuf(pub [u8; PAGE_SIZE]);

impl PageBuf {
    pub(crate) fn boxed() -> Box<PageBuf> {
        let mut b = Box::new(PageBuf([0; PAGE_SIZE]));
        prefault(&mut b.0);
        b
    }
}

/// Writes one byte per page so that the pages are allocated now (zeroed allocations may be
/// mapped lazily and would otherwise be faulted, and charged, later).
fn prefault(bytes: &mut [u8]) {
    for i in (0..bytes.len()).step_by(PAGE_SIZE) {
        // SAFETY: i is in bounds; volatile so the store of an unchanged value is kept.
        unsafe { ptr::write_volatile(bytes.as_mut_ptr().add(i), bytes[i]) };
    }
}

/// A private anonymous read-write mapping whose start is 2 MiB aligned: `mmap` `len + 2 MiB`,
/// then `munmap` the slack before the first aligned address and after `len`. Without
/// [`Mapping::madvise_hugepage`], THP in `madvise` (or `never`) mode maps it with 4 KiB pages only.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// `len` must be a positive multiple of the page size.
    pub fn new(len: usize) -> io::Result<Mapping> {
        if len == 0 || !len.is_multiple_of(PAGE_SIZE) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "mapping length must be a positive multiple of 4096",
            ));
        }
        let total = len
            .checked_add(PMD_SIZE)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "mapping too large"))?;
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let raw = unsafe {
            libc::mmap(
                ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let addr = raw as usize;
        let start = addr.next_multiple_of(PMD_SIZE);
        let head = start - addr;
        let tail = total - head - len;
        // SAFETY: both ranges lie inside the mapping just created and outside [start, start+len).
        unsafe {
            if head > 0 {
                libc::munmap(raw, head);
            }
            if tail > 0 {
                libc::munmap((start + len) as *mut libc::c_void, tail);
            }
        }
        Ok(Mapping {
            ptr: NonNull::new(start as *mut u8).expect("mmap returned address 0"),
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// mlock(2) of the whole mapping in one call, as the cgroup selftests' alloc_anon_mlock
    /// does: the kernel faults every page in (zero-filled) before it returns, and keeps them
    /// mlocked and unevictable until the mapping goes (the scenario's `mlock = true`, modelled
    /// in the simulator's mm/mlock.rs). RLIMIT_MEMLOCK is not raised: the lab runs the runner
    /// as root, whose CAP_IPC_LOCK lets mlock() go past the limit; without it the call fails
    /// with ENOMEM or EPERM and the run stops with that error.
    pub fn mlock(&self) -> io::Result<()> {
        // SAFETY: the range is exactly this mapping; mlock changes no contents.
        if unsafe { libc::mlock(self.ptr.as_ptr().cast(), self.len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// madvise(MADV_HUGEPAGE): the region is VM_HUGEPAGE, so THP faults happen in it under
    /// transparent_hugepage/enabled = madvise (and direct compaction under defrag = madvise).
    pub fn madvise_hugepage(&self) -> io::Result<()> {
        // SAFETY: the range is exactly this mapping; MADV_HUGEPAGE changes no contents.
        if unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_HUGEPAGE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The mapped bytes. Reading faults pages in (untouched pages read as zero).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is readable for len bytes while self lives; all writes go through
        // &mut self methods of the owner.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the range this Mapping owns.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The bytes of a region's pages: `fill_page(content, seed, region_id, variant_of(seed,
/// region_id, page, distinct))`, from a table of all distinct variants or computed on demand.
pub struct PageSource {
    content: Content,
    seed: u64,
    region_id: u32,
    distinct: u32,
    /// All distinct variants, or empty.
    table: Vec<PageBuf>,
    /// Without a table: the last computed variant.
    scratch: Box<PageBuf>,
    scratch_variant: Option<u32>,
}

impl PageSource {
    /// `precompute`: build the table of all `distinct` variants now.
    pub fn new(
        content: Content,
        seed: u64,
        region_id: u32,
        distinct: u32,
        precompute: bool,
    ) -> PageSource {
        let mut table = Vec::new();
        if precompute {
            table.reserve_exact(distinct as usize);
            for v in 0..distinct {
                table.push(PageBuf([0; PAGE_SIZE]));
                let last = table.last_mut().expect("just pushed");
                fill_page(content, seed, region_id, v, &mut last.0);
            }
        }
        PageSource {
            content,
            seed,
            region_id,
            distinct,
            table,
            scratch: PageBuf::boxed(),
            scratch_variant: None,
        }
    }

    /// The variant that page `page` holds.
    #[inline]
    pub fn variant_of(&self, page: u64) -> u32 {
        variant_of(self.seed, self.region_id, page, self.distinct)
    }

    /// The bytes of variant `v`.
    #[inline]
    pub fn variant_bytes(&mut self, v: u32) -> &[u8; PAGE_SIZE] {
        if !self.table.is_empty() {
            return &self.table[v as usize].0;
        }
        if self.scratch_variant != Some(v) {
            fill_page(
                self.content,
                self.seed,
                self.region_id,
                v,
                &mut self.scratch.0,
            );
            self.scratch_variant = Some(v);
        }
        &self.scratch.0
    }

    /// The bytes of page `page`.
    #[inline]
    pub fn page_bytes(&mut self, page: u64) -> &[u8; PAGE_SIZE] {
        let v = self.variant_of(page);
        self.variant_bytes(v)
    }

    /// Bytes held by the variant table.
    pub fn table_bytes(&self) -> usize {
        self.table.len() * PAGE_SIZE
    }
}

/// What a Fill phase does to a buffer standing for a region: page `i` of `buf` gets
/// `src.page_bytes(i)`, pages in index order. `buf.len()` must be a multiple of 4096.
pub fn fill_buffer(buf: &mut [u8], src: &mut PageSource) {
    assert!(
        buf.len().is_multiple_of(PAGE_SIZE),
        "buffer is not whole pages"
    );
    for (i, page) in buf.chunks_exact_mut(PAGE_SIZE).enumerate() {
        page.copy_from_slice(src.page_bytes(i as u64));
    }
}

/// A read access: one volatile load of the byte at `p`.
///
/// # Safety
/// `p` must be valid for reads.
#[inline(always)]
pub unsafe fn read_touch(p: *const u8) -> u8 {
    // SAFETY: by the caller.
    unsafe { ptr::read_volatile(p) }
}

/// A write access that leaves the byte at `p` unchanged.
///
/// On x86_64 this is one read-modify-write instruction (`or byte ptr [p], 0`), which the CPU
/// checks for write permission before reading: a page that is not present takes a single
/// *write* fault, as in the simulator (`do_anonymous_page` allocating at once rather than
/// mapping the zero page first; `do_swap_page` with `FAULT_FLAG_WRITE`, which frees the swap
/// slot). A volatile load followed by a volatile store would take a read fault first, and after
/// a swap-in the read fault keeps the swap slot. (An atomic `fetch_or(0)` is no substitute: LLVM
/// turns idempotent atomic RMWs into a fence plus a load.)
///
/// Elsewhere it falls back to a volatile load and store of the same value; see docs/runner.md.
///
/// # Safety
/// `p` must be valid for reads and writes.
#[inline(always)]
pub unsafe fn write_touch(p: *mut u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: by the caller; the instruction reads and writes exactly the byte at p.
    unsafe {
        std::arch::asm!("or byte ptr [{p}], 0", p = in(reg) p, options(nostack));
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: by the caller.
    unsafe {
        let v = ptr::read_volatile(p);
        ptr::write_volatile(p, v);
    }
}

/// One bit per page.
pub struct Bitmap {
    words: Vec<u64>,
}

impl Bitmap {
    pub fn new(bits: u64) -> Bitmap {
        let mut words = vec![0u64; bits.div_ceil(64) as usize];
        // SAFETY: u64 has no invalid bit patterns; viewing the words as bytes to prefault them.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8)
        };
        prefault(bytes);
        Bitmap { words }
    }

    /// Sets bit `i`; returns whether it was set before.
    #[inline]
    pub fn test_and_set(&mut self, i: u64) -> bool {
        let w = &mut self.words[(i / 64) as usize];
        let m = 1u64 << (i % 64);
        let was = *w & m != 0;
        *w |= m;
        was
    }
}

/// Per-region work done before the `ready` line (see the module comment).
pub struct Prepared {
    sources: Vec<PageSource>,
    /// `Some` for regions that a non-fill phase may write before they are filled: bit set =
    /// the page already holds its content.
    materialized: Vec<Option<Bitmap>>,
}

impl Prepared {
    /// Variant tables for filled (or possibly written-before-filled) regions and for files
    /// that write phases write, with at most [`PRECOMPUTE_MAX_VARIANTS`] variants, within
    /// [`TABLE_BUDGET_BYTES`] in region order. A write phase without its table would compute
    /// each page's bytes during the phase (a text page: several µs of user time, more than the
    /// kernel's whole write(2) path), which the simulator does not charge for a write any
    /// more than for a fill.
    pub fn new(plan: &Plan) -> Prepared {
        Prepared::with_budget(plan, TABLE_BUDGET_BYTES)
    }

    pub fn with_budget(plan: &Plan, budget: usize) -> Prepared {
        let filled = plan.filled_regions();
        let need = plan.needs_materialize();
        let written = plan.written_files();
        let mut left = budget;
        let mut sources = Vec::with_capacity(plan.regions.len());
        let mut materialized = Vec::with_capacity(plan.regions.len());
        for (i, r) in plan.regions.iter().enumerate() {
            let bytes = r.distinct as usize * PAGE_SIZE;
            let precompute = (filled[i] || need[i] || written[i])
                && r.distinct <= PRECOMPUTE_MAX_VARIANTS
                && bytes <= left;
            if precompute {
                left -= bytes;
            }
            sources.push(PageSource::new(
                r.content, plan.seed, r.id, r.distinct, precompute,
            ));
            materialized.push(need[i].then(|| Bitmap::new(r.pages)));
        }
        Prepared {
            sources,
            materialized,
        }
    }

    /// Bytes of all variant tables.
    pub fn table_bytes(&self) -> usize {
        self.sources.iter().map(PageSource::table_bytes).sum()
    }

    /// Writes the plan's file regions to their files (`file::create_files`), before `ready`.
    pub fn create_files(&mut self, plan: &Plan, dirs: &[PathBuf]) -> io::Result<()> {
        file::create_files(plan, dirs, &mut self.sources)
    }
}

struct RealRegion {
    base: *mut u8,
    pages: u64,
    map: Mapping,
    source: PageSource,
    materialized: Option<Bitmap>,
}

impl RealRegion {
    #[inline]
    fn page_ptr(&self, page: u64) -> *mut u8 {
        debug_assert!(page < self.pages, "page {page} of {}", self.pages);
        // SAFETY: page < pages (AccessGen only yields pages of the region), so the offset is
        // inside the mapping.
        unsafe { self.base.add(page as usize * PAGE_SIZE) }
    }

    /// Stores the page's full content.
    #[inline]
    fn write_content(&mut self, page: u64) {
        let dst = self.page_ptr(page);
        let src = self.source.page_bytes(page);
        // SAFETY: dst is a whole page inside the mapping; src is a separate allocation.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), dst, PAGE_SIZE) };
    }
}

/// A region of [`RealMemory`]: anonymous memory, a file, or a file a create_files phase
/// creates (not open: the phase creates, writes and closes it).
enum Slot {
    Anon(RealRegion),
    File(FileRegion),
    Created {
        path: PathBuf,
        plan: RegionPlan,
        source: PageSource,
    },
}

/// The regions, mapped for real (files opened and mapped shared).
pub struct RealMemory {
    regions: Vec<Slot>,
}

impl RealMemory {
    /// Maps every anonymous region of the plan, and opens and maps every file region (the files
    /// [`Prepared::create_files`] wrote, under `dirs`).
    pub fn map(prepared: Prepared, plan: &Plan, dirs: &[PathBuf]) -> io::Result<RealMemory> {
        let mut regions = Vec::with_capacity(plan.regions.len());
        let created = plan.created_regions();
        for (i, ((r, source), materialized)) in plan
            .regions
            .iter()
            .zip(prepared.sources)
            .zip(prepared.materialized)
            .enumerate()
        {
            if created[i] {
                let path = file::file_path(dirs, plan.process_index, i, r)?;
                regions.push(Slot::Created {
                    path,
                    plan: r.clone(),
                    source,
                });
                continue;
            }
            if r.file.is_some() {
                let path = file::file_path(dirs, plan.process_index, i, r)?;
                regions.push(Slot::File(FileRegion::open(&path, r, source)?));
                continue;
            }
            let map = Mapping::new(r.bytes()).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("mmap of region {} ({} pages): {e}", r.name, r.pages),
                )
            })?;
            if r.thp {
                map.madvise_hugepage().map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!("madvise(MADV_HUGEPAGE) of region {}: {e}", r.name),
                    )
                })?;
            }
            if r.mlock {
                map.mlock().map_err(|e| {
                    io::Error::new(e.kind(), format!("mlock of region {} ({} pages; RLIMIT_MEMLOCK without CAP_IPC_LOCK?): {e}", r.name, r.pages))
                })?;
            }
            regions.push(Slot::Anon(RealRegion {
                base: map.as_ptr(),
                pages: r.pages,
                map,
                source,
                materialized,
            }));
        }
        Ok(RealMemory { regions })
    }

    fn anon(&self, r: usize) -> &RealRegion {
        match &self.regions[r] {
            Slot::Anon(a) => a,
            Slot::File(_) | Slot::Created { .. } => panic!("region {r} is a file"),
        }
    }

    fn file(&mut self, r: u32) -> &mut FileRegion {
        match &mut self.regions[r as usize] {
            Slot::File(f) => f,
            Slot::Anon(_) | Slot::Created { .. } => {
                panic!("region {r} is not an open file (Plan::parse checks phases against region kinds and created files)")
            }
        }
    }

    /// Region `r`'s mapped bytes (for tests and checks).
    pub fn region_bytes(&self, r: usize) -> &[u8] {
        self.anon(r).map.bytes()
    }

    /// Region `r`'s start address.
    pub fn region_addr(&self, r: usize) -> usize {
        self.anon(r).base as usize
    }
}

impl Memory for RealMemory {
    fn cgroup_dir(&self) -> io::Result<Option<std::path::PathBuf>> {
        crate::cgroup::own_cgroup_dir().map(Some)
    }

    fn sysfs_write(&mut self, path: &str, value: &str) -> io::Result<()> {
        std::fs::write(path, value).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
    }

    #[inline]
    fn fill(&mut self, region: u32, page: u64) {
        match &mut self.regions[region as usize] {
            Slot::Anon(r) => r.write_content(page),
            Slot::File(_) | Slot::Created { .. } => {
                panic!("fill of a file region (Plan::parse refuses it)")
            }
        }
    }

    #[inline]
    fn touch(&mut self, region: u32, page: u64, write: bool) {
        let p = match &mut self.regions[region as usize] {
            Slot::Anon(r) => {
                let p = r.page_ptr(page);
                if write {
                    if let Some(bits) = &mut r.materialized {
                        if !bits.test_and_set(page) {
                            r.write_content(page);
                            return;
                        }
                    }
                }
                p
            }
            // An mmap phase: the shared file mapping (the file holds the page's bytes already).
            Slot::File(f) => f.page_ptr(page),
            Slot::Created { .. } => panic!("touch of a created file (Plan::parse refuses it)"),
        };
        if write {
            // SAFETY: p is inside the mapping.
            unsafe { write_touch(p) };
        } else {
            // SAFETY: p is inside the mapping.
            unsafe { read_touch(p) };
        }
    }

    fn filled(&mut self, region: u32) {
        if let Slot::Anon(r) = &mut self.regions[region as usize] {
            r.materialized = None;
        }
    }

    fn release(&mut self) {
        self.regions.clear();
    }

    fn file_read(&mut self, region: u32, page: u64) -> io::Result<()> {
        self.file(region).read(page)
    }

    fn file_write(&mut self, region: u32, page: u64, fsync_bytes: Option<u64>) -> io::Result<()> {
        self.file(region).write(page, fsync_bytes)
    }

    fn start_write_phase(&mut self, region: u32) {
        self.file(region).start_write_phase();
    }

    fn create_file(&mut self, region: u32, fsync: bool) -> io::Result<u64> {
        match &mut self.regions[region as usize] {
            Slot::Created { path, plan, source } => file::create_file(path, plan, source, fsync),
            _ => panic!("region {region} is not created by create_files (Plan::created_regions)"),
        }
    }
}

/// `--dry-run`: no memory at all; every access is a no-op.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullMemory;

impl Memory for NullMemory {
    #[inline]
    fn fill(&mut self, _region: u32, _page: u64) {}
    #[inline]
    fn touch(&mut self, _region: u32, _page: u64, _write: bool) {}
    fn filled(&mut self, _region: u32) {}
    fn release(&mut self) {}
    fn file_read(&mut self, _region: u32, _page: u64) -> io::Result<()> {
        Ok(())
    }
    fn file_write(
        &mut self,
        _region: u32,
        _page: u64,
        _fsync_bytes: Option<u64>,
    ) -> io::Result<()> {
        Ok(())
    }
    fn start_write_phase(&mut self, _region: u32) {}
    fn create_file(&mut self, _region: u32, _fsync: bool) -> io::Result<u64> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys;
    use reclaimlab_workload::content::region_id;

    fn expected(
        content: Content,
        seed: u64,
        rid: u32,
        distinct: u32,
        page: u64,
    ) -> [u8; PAGE_SIZE] {
        let mut out = [0u8; PAGE_SIZE];
        fill_page(
            content,
            seed,
            rid,
            variant_of(seed, rid, page, distinct),
            &mut out,
        );
        out
    }

    /// mincore fails with ENOMEM if any page of the range is unmapped.
    fn is_mapped(addr: usize, len: usize) -> bool {
        let mut vec = vec![0u8; len.div_ceil(PAGE_SIZE)];
        // SAFETY: addr is page-aligned and vec has one byte per page.
        unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) == 0 }
    }

    fn thp_always() -> bool {
        sys::thp_mode().as_deref() == Some("always")
    }

    #[test]
    fn fill_buffer_matches_fill_page_for_every_class() {
        let classes = [
            (Content::Text, 7),
            (Content::Random, 5),
            (Content::Mix { random_bytes: 100 }, 3),
            (Content::Mix { random_bytes: 0 }, 1),
            (Content::Same { byte: 0x5a }, 1),
            (Content::Zero, 1),
        ];
        for (content, distinct) in classes {
            for precompute in [true, false] {
                let rid = region_id(2, 3);
                let mut src = PageSource::new(content, 11, rid, distinct, precompute);
                let mut buf = vec![0xEEu8; 40 * PAGE_SIZE];
                fill_buffer(&mut buf, &mut src);
                for (i, page) in buf.chunks_exact(PAGE_SIZE).enumerate() {
                    assert_eq!(
                        page,
                        expected(content, 11, rid, distinct, i as u64),
                        "{content} page {i} precompute {precompute}"
                    );
                }
            }
        }
    }

    #[test]
    fn many_variants_are_computed_per_page() {
        let mut src = PageSource::new(Content::Random, 1, 9, 100_000, false);
        assert_eq!(src.table_bytes(), 0);
        for page in [0u64, 1, 77, 1 << 20] {
            assert_eq!(
                src.page_bytes(page),
                &expected(Content::Random, 1, 9, 100_000, page)
            );
        }
    }

    #[test]
    fn mapping_is_2mib_aligned_zeroed_and_unmapped_on_drop() {
        for len in [PAGE_SIZE, 3 * PAGE_SIZE, PMD_SIZE, PMD_SIZE + PAGE_SIZE] {
            let m = Mapping::new(len).unwrap();
            let addr = m.as_ptr() as usize;
            assert_eq!(addr % PMD_SIZE, 0);
            assert_eq!(m.len(), len);
            assert!(m.bytes().iter().all(|&b| b == 0));
            assert!(is_mapped(addr, len));
            drop(m);
            assert!(!is_mapped(addr, PAGE_SIZE), "still mapped after drop");
        }
        assert!(Mapping::new(0).is_err());
        assert!(Mapping::new(100).is_err());
    }

    #[test]
    fn touches_keep_the_bytes() {
        let m = Mapping::new(8 * PAGE_SIZE).unwrap();
        let p = m.as_ptr();
        // SAFETY: all offsets are inside the mapping.
        unsafe {
            assert_eq!(read_touch(p), 0);
            write_touch(p.add(PAGE_SIZE));
            ptr::write_volatile(p.add(2 * PAGE_SIZE), 0xA7);
            write_touch(p.add(2 * PAGE_SIZE));
            assert_eq!(read_touch(p.add(2 * PAGE_SIZE)), 0xA7);
        }
        assert!(m.bytes()[..2 * PAGE_SIZE].iter().all(|&b| b == 0));
    }

    /// The write touch takes one (write) fault on a fresh page, not a read fault and then a
    /// write fault. Thread-local fault counts, since tests share the process.
    #[test]
    fn write_touch_faults_once_per_fresh_page() {
        if thp_always() {
            eprintln!("THP is in `always` mode; skipping");
            return;
        }
        let n = 256;
        let m = Mapping::new(n * PAGE_SIZE).unwrap();
        let before = sys::thread_faults();
        for i in 0..n {
            // SAFETY: inside the mapping.
            unsafe { write_touch(m.as_ptr().add(i * PAGE_SIZE)) };
        }
        let faults = sys::thread_faults().since(before).minflt;
        assert!(faults >= n as u64 / 2, "{faults}");
        if cfg!(target_arch = "x86_64") {
            assert!(
                faults < n as u64 * 3 / 2,
                "{faults} faults for {n} pages: a read fault came first"
            );
        }
    }

    fn plan(phases: &str, regions: &str) -> Plan {
        let text = format!(
            r#"{{"seed": 3, "processes": [{{"name": "p", "regions": [{regions}], "phases": [{phases}]}}]}}"#
        );
        Plan::parse(&text, 0).unwrap()
    }

    /// Pages of the range in memory now (mincore's residency bits).
    fn resident_pages(addr: usize, len: usize) -> usize {
        let mut vec = vec![0u8; len.div_ceil(PAGE_SIZE)];
        // SAFETY: addr is page-aligned and vec has one byte per page.
        assert_eq!(
            unsafe { libc::mincore(addr as *mut libc::c_void, len, vec.as_mut_ptr()) },
            0
        );
        vec.iter().filter(|&&b| b & 1 != 0).count()
    }

    #[test]
    fn mlock_region_is_faulted_in_whole_when_mapped() {
        // 16 pages: far below any RLIMIT_MEMLOCK, so this runs without CAP_IPC_LOCK too.
        let plan = plan(
            r#"{"name": "f", "phase": {"kind": "fill", "region": 1}}"#,
            r#"{"name": "m", "pages": 16, "content": "zero", "variants": 1, "mlock": true},
               {"name": "a", "pages": 16, "content": "zero", "variants": 1}"#,
        );
        assert!(plan.regions[0].mlock && !plan.regions[1].mlock);
        let mem = RealMemory::map(Prepared::new(&plan), &plan, &[]).unwrap();
        // mlock() populated every page before returning; the other region is untouched.
        assert_eq!(resident_pages(mem.region_addr(0), 16 * PAGE_SIZE), 16);
        assert_eq!(resident_pages(mem.region_addr(1), 16 * PAGE_SIZE), 0);
    }

    #[test]
    fn real_memory_fills_and_materializes_exact_bytes() {
        let plan = plan(
            r#"{"name": "f", "phase": {"kind": "fill", "region": 0}},
               {"name": "w", "phase": {"kind": "sequential", "regions": [0, 1], "passes": 1, "write_percent": 100}}"#,
            r#"{"name": "a", "pages": 9, "content": "text", "variants": 3},
               {"name": "b", "pages": 5, "content": "mix300", "variants": 2},
               {"name": "c", "pages": 4, "content": "random", "variants": 2}"#,
        );
        let prepared = Prepared::new(&plan);
        assert_eq!(
            prepared.table_bytes(),
            5 * PAGE_SIZE,
            "tables for a and b only"
        );
        let mut mem = RealMemory::map(prepared, &plan, &[]).unwrap();
        for r in 0..3 {
            assert_eq!(mem.region_addr(r) % PMD_SIZE, 0);
        }
        for page in 0..9 {
            mem.fill(0, page);
        }
        mem.filled(0);
        // Reads leave untouched pages zero; writes to filled pages keep their bytes; the first
        // write to an unfilled page stores its content.
        mem.touch(1, 0, false);
        mem.touch(2, 1, false);
        for page in 0..9 {
            mem.touch(0, page, true);
        }
        for page in 0..5 {
            mem.touch(1, page, true);
            mem.touch(1, page, true);
        }
        let r = &plan.regions;
        for page in 0..9u64 {
            let got = &mem.region_bytes(0)[page as usize * PAGE_SIZE..][..PAGE_SIZE];
            assert_eq!(got, expected(r[0].content, 3, r[0].id, r[0].distinct, page));
        }
        for page in 0..5u64 {
            let got = &mem.region_bytes(1)[page as usize * PAGE_SIZE..][..PAGE_SIZE];
            assert_eq!(got, expected(r[1].content, 3, r[1].id, r[1].distinct, page));
        }
        assert!(mem.region_bytes(2).iter().all(|&b| b == 0));
        mem.release();
    }

    #[test]
    fn write_phases_get_a_table_of_their_files_bytes() {
        // A write(2) phase needs every page's bytes during the phase: its file gets a variant
        // table before the run (a read phase's does not), and the bytes are the content's.
        let plan = plan(
            r#"{"name": "w", "phase": {"kind": "write", "region": 0, "passes": 1}},
               {"name": "r", "phase": {"kind": "read", "region": 1, "passes": 1}}"#,
            r#"{"name": "a", "pages": 8, "content": "text", "variants": 3, "file": 0},
               {"name": "b", "pages": 8, "content": "text", "variants": 5, "file": 0}"#,
        );
        assert_eq!(plan.written_files(), [true, false]);
        let mut prepared = Prepared::new(&plan);
        assert_eq!(prepared.table_bytes(), 3 * PAGE_SIZE, "a table for a only");
        let r = &plan.regions[0];
        for page in 0..8u64 {
            let got = *prepared.sources[0].page_bytes(page);
            assert_eq!(got, expected(r.content, 3, r.id, r.distinct, page));
        }
    }

    #[test]
    fn table_budget_is_respected() {
        let plan = plan(
            r#"{"name": "f", "phase": {"kind": "fill", "region": 0}}, {"name": "g", "phase": {"kind": "fill", "region": 1}}"#,
            r#"{"name": "a", "pages": 1, "content": "text", "variants": 4},
               {"name": "b", "pages": 1, "content": "text", "variants": 4}"#,
        );
        assert_eq!(
            Prepared::with_budget(&plan, 6 * PAGE_SIZE).table_bytes(),
            4 * PAGE_SIZE
        );
        assert_eq!(Prepared::with_budget(&plan, 0).table_bytes(), 0);
    }
}
