//! File regions on the real kernel: one file per file region, on the mount point the lab made
//! for its filesystem (`--fs-dir`, in `machine.filesystems` order).
//!
//! * Before `ready` ([`create_files`]), inside the process's cgroup (the runner joins it first:
//!   `--cgroup-procs`), every file of the process is written with its pages' bytes
//!   (`reclaimlab_workload::content`, exactly what the simulator's page contents are) and
//!   fsynced: the simulator's files exist on their device when the run starts. The driver then
//!   syncs and drops the page cache, so the run starts with the files on disk and not cached,
//!   as in the simulator. A file on a tmpfs is made at its size without data (ftruncate: all
//!   holes), as the simulator's tmpfs files start; a file that a create_files phase creates is
//!   not made before that phase.
//! * `create_files` ([`create_file`]): fs_mark's loop: create (O_CREAT | O_TRUNC), one
//!   write(2) of each page's bytes, fsync(2) before the close with `fsync` (-S1).
//! * After `go` ([`FileRegion::open`]) the file is opened read-write and mapped shared (for
//!   `mmap` phases), 2 MiB aligned like the anonymous regions, so that fault-around windows
//!   line up with the file offsets as the simulator assumes.
//! * `read`: one `pread(2)` of 4 KiB per access into a private buffer (the page cache's read
//!   path with the kernel's own readahead); `write`: one `pwrite(2)` of the page's bytes per
//!   access (`generic_perform_write`), with `fsync(2)` after every `fsync_bytes` written in the
//!   phase, counted as the simulator counts (`sched.rs`); `mmap`: a load of byte 0, or a store
//!   of the byte it holds ([`crate::mem::write_touch`]), through the shared mapping.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use crate::config::{Plan, RegionPlan};
use crate::mem::{PageBuf, PageSource, PAGE_SIZE, PMD_SIZE};

/// How many pages [`create_files`] writes per `write(2)`.
const CREATE_CHUNK_PAGES: usize = 256;

/// The file of region `region` of process `process`: `<fs dir>/p<process>.r<region>`. Named by
/// index, not by the scenario's names, so that any name is safe and two processes never share a
/// file.
pub fn file_path(
    dirs: &[PathBuf],
    process: u32,
    region: usize,
    r: &RegionPlan,
) -> io::Result<PathBuf> {
    let fs = r.file.expect("a file region") as usize;
    let dir = dirs.get(fs).ok_or_else(|| {
        io::Error::other(format!(
            "region {region} ({}) is a file on filesystem {fs}, but only {} --fs-dir were given",
            r.name,
            dirs.len()
        ))
    })?;
    Ok(dir.join(format!("p{process}.r{region}")))
}

/// Checks that every file region has its `--fs-dir` (before anything is written).
pub fn check_dirs(plan: &Plan, dirs: &[PathBuf]) -> io::Result<()> {
    for (i, r) in plan.file_regions() {
        file_path(dirs, plan.process_index, i, r)?;
    }
    Ok(())
}

/// Writes every file region of the plan with its pages' bytes, then fsyncs it (see the module
/// comment). An existing file is replaced.
pub fn create_files(plan: &Plan, dirs: &[PathBuf], sources: &mut [PageSource]) -> io::Result<()> {
    let mut chunk = vec![0u8; CREATE_CHUNK_PAGES * PAGE_SIZE];
    let created = plan.created_regions();
    for (i, r) in plan.file_regions() {
        if created[i] {
            continue;
        }
        let path = file_path(dirs, plan.process_index, i, r)?;
        let ctx = |e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("creating file {} of region {}: {e}", path.display(), r.name),
            )
        };
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .map_err(ctx)?;
        if on_tmpfs(path.parent().unwrap_or(Path::new("/"))).map_err(ctx)? {
            f.set_len(r.bytes() as u64).map_err(ctx)?;
            continue;
        }
        let src = &mut sources[i];
        let mut page = 0u64;
        while page < r.pages {
            let n = (r.pages - page).min(CREATE_CHUNK_PAGES as u64) as usize;
            for (k, dst) in chunk[..n * PAGE_SIZE]
                .chunks_exact_mut(PAGE_SIZE)
                .enumerate()
            {
                dst.copy_from_slice(src.page_bytes(page + k as u64));
            }
            f.write_all(&chunk[..n * PAGE_SIZE]).map_err(ctx)?;
            page += n as u64;
        }
        f.sync_all().map_err(ctx)?;
    }
    Ok(())
}

/// Whether `dir` is on a tmpfs (statfs f_type TMPFS_MAGIC).
pub fn on_tmpfs(dir: &Path) -> io::Result<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: a zeroed statfs is a valid out-buffer; c is a NUL-terminated path.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: see above.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_type == libc::TMPFS_MAGIC)
}

/// A create_files phase's file (fs_mark's loop body): create or truncate it, write each page's
/// bytes with one write(2) per page, fsync(2) it with `fsync`, close it. Returns the pages
/// written (the phase's accesses, as the simulator counts them).
pub fn create_file(
    path: &Path,
    r: &RegionPlan,
    source: &mut PageSource,
    fsync: bool,
) -> io::Result<u64> {
    let ctx = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!(
                "create_files: file {} of region {}: {e}",
                path.display(),
                r.name
            ),
        )
    };
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(ctx)?;
    for page in 0..r.pages {
        f.write_all(source.page_bytes(page)).map_err(ctx)?;
    }
    if fsync {
        f.sync_all().map_err(ctx)?;
    }
    drop(f);
    Ok(r.pages)
}

/// A shared read-write mapping of a whole file, 2 MiB aligned: a `PROT_NONE` reservation of
/// `len + 2 MiB`, the file mapped `MAP_FIXED` at its first aligned address, the slack unmapped.
struct FileMap {
    ptr: NonNull<u8>,
    len: usize,
}

impl FileMap {
    fn new(file: &File, len: usize) -> io::Result<FileMap> {
        let total = len + PMD_SIZE;
        // SAFETY: a fresh reservation; nothing else refers to it.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let start = raw as usize;
        let aligned = (start + PMD_SIZE - 1) & !(PMD_SIZE - 1);
        // SAFETY: [aligned, aligned + len) lies inside the reservation, which this code owns.
        let got = unsafe {
            libc::mmap(
                aligned as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                file.as_raw_fd(),
                0,
            )
        };
        if got == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: the whole reservation is ours.
            unsafe { libc::munmap(raw, total) };
            return Err(e);
        }
        // SAFETY: the slack before and after the file mapping is part of the reservation.
        unsafe {
            if aligned > start {
                libc::munmap(raw, aligned - start);
            }
            let end = aligned + len;
            if start + total > end {
                libc::munmap(end as *mut libc::c_void, start + total - end);
            }
        }
        Ok(FileMap {
            ptr: NonNull::new(aligned as *mut u8).expect("mmap never returns 0 here"),
            len,
        })
    }
}

impl Drop for FileMap {
    fn drop(&mut self) {
        // SAFETY: exactly the range this FileMap owns.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// An open file region (after `go`).
pub struct FileRegion {
    file: File,
    map: FileMap,
    pub(crate) pages: u64,
    source: PageSource,
    buf: Box<PageBuf>,
    /// Bytes written by the current write phase (for `fsync_bytes`).
    written: u64,
}

impl FileRegion {
    /// Opens (read-write) and maps the file [`create_files`] wrote.
    pub fn open(path: &Path, r: &RegionPlan, source: PageSource) -> io::Result<FileRegion> {
        let ctx = |what: &str, e: io::Error| {
            io::Error::new(
                e.kind(),
                format!("{what} {} of region {}: {e}", path.display(), r.name),
            )
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| ctx("opening", e))?;
        let map = FileMap::new(&file, r.bytes()).map_err(|e| ctx("mapping", e))?;
        if r.tmpfile {
            // O_TMPFILE's effect on a file that had to exist (and be written, synced and
            // dropped from the cache) before `go`: no name from now on, so the last close
            // (exit, or the runner's end) evicts the inode and frees its page cache.
            std::fs::remove_file(path).map_err(|e| ctx("unlinking", e))?;
        }
        Ok(FileRegion {
            file,
            map,
            pages: r.pages,
            source,
            buf: PageBuf::boxed(),
            written: 0,
        })
    }

    /// Page `page`'s address in the shared mapping.
    #[inline]
    pub(crate) fn page_ptr(&self, page: u64) -> *mut u8 {
        debug_assert!(page < self.pages, "page {page} of {}", self.pages);
        // SAFETY: page < pages, so the offset is inside the mapping.
        unsafe { self.map.ptr.as_ptr().add(page as usize * PAGE_SIZE) }
    }

    /// read(2) of one page.
    pub fn read(&mut self, page: u64) -> io::Result<()> {
        self.file
            .read_exact_at(&mut self.buf.0, page * PAGE_SIZE as u64)
    }

    /// write(2) of one page's bytes; fsync(2) when the phase's bytes written cross a multiple
    /// of `fsync_bytes`.
    pub fn write(&mut self, page: u64, fsync_bytes: Option<u64>) -> io::Result<()> {
        let bytes = self.source.page_bytes(page);
        self.file.write_all_at(bytes, page * PAGE_SIZE as u64)?;
        self.written += PAGE_SIZE as u64;
        if let Some(n) = fsync_bytes {
            if self.written / n > (self.written - PAGE_SIZE as u64) / n {
                self.file.sync_all()?;
            }
        }
        Ok(())
    }

    /// A write phase starts: its byte count for `fsync_bytes` starts at 0.
    pub fn start_write_phase(&mut self) {
        self.written = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reclaimlab_workload::content::{fill_page, variant_of};
    use reclaimlab_workload::Content;

    fn plan() -> Plan {
        let text = r#"{"seed": 3, "processes": [{"name": "p", "regions": [
            {"name": "a", "pages": 2, "content": "zero", "variants": 1},
            {"name": "f", "pages": 300, "content": "text", "variants": 5, "file": 0}], "phases": []}]}"#;
        Plan::parse(text, 0).unwrap()
    }

    fn expected(plan: &Plan, page: u64) -> [u8; PAGE_SIZE] {
        let r = &plan.regions[1];
        let mut out = [0u8; PAGE_SIZE];
        fill_page(
            Content::Text,
            plan.seed,
            r.id,
            variant_of(plan.seed, r.id, page, r.distinct),
            &mut out,
        );
        out
    }

    #[test]
    fn created_files_are_made_by_their_phase_and_tmpfs_files_start_as_holes() {
        let text = r#"{"seed": 3, "processes": [{"name": "p", "regions": [
            {"name": "t", "pages": 64, "content": "text", "variants": 5, "file": 0},
            {"name": "c", "pages": 5, "content": "text", "variants": 5, "file": 0}], "phases": [
            {"name": "r", "phase": {"kind": "read", "region": 0, "passes": 1}},
            {"name": "m", "phase": {"kind": "create_files", "regions": [1], "fsync": true}}]}]}"#;
        let plan = Plan::parse(text, 0).unwrap();
        assert_eq!(plan.created_regions(), [false, true]);
        // /dev/shm is a tmpfs on every Linux this runs on; elsewhere the test has no tmpfs.
        let shm = Path::new("/dev/shm");
        if !on_tmpfs(shm).unwrap_or(false) {
            eprintln!("no tmpfs at /dev/shm; skipped");
            return;
        }
        let dir = shm.join(format!(
            "reclaimlab-runner-tmpfs-test-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let dirs = [dir.clone()];
        let mut prepared = crate::Prepared::new(&plan);
        prepared.create_files(&plan, &dirs).unwrap();
        // The tmpfs file has its size and no blocks (all holes, as the simulator's start);
        // the created one does not exist yet.
        let meta = std::fs::metadata(dir.join("p0.r0")).unwrap();
        assert_eq!(meta.len(), 64 * PAGE_SIZE as u64);
        assert_eq!(std::os::unix::fs::MetadataExt::blocks(&meta), 0);
        assert!(!dir.join("p0.r1").exists());
        let r = &plan.regions[1];
        let mut source = PageSource::new(r.content, plan.seed, r.id, r.distinct, false);
        assert_eq!(
            create_file(&dir.join("p0.r1"), r, &mut source, true).unwrap(),
            5
        );
        let bytes = std::fs::read(dir.join("p0.r1")).unwrap();
        assert_eq!(bytes.len(), 5 * PAGE_SIZE);
        let mut want = [0u8; PAGE_SIZE];
        fill_page(
            Content::Text,
            plan.seed,
            r.id,
            variant_of(plan.seed, r.id, 4, r.distinct),
            &mut want,
        );
        assert_eq!(&bytes[4 * PAGE_SIZE..], want);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_tmpfile_loses_its_name_once_opened_and_stays_readable() {
        let text = r#"{"seed": 3, "processes": [{"name": "p", "regions": [
            {"name": "f", "pages": 8, "content": "text", "variants": 5, "file": 0, "tmpfile": true}], "phases": []}]}"#;
        let plan = Plan::parse(text, 0).unwrap();
        assert!(plan.regions[0].tmpfile);
        let dir = std::env::temp_dir().join(format!(
            "reclaimlab-runner-tmpfile-test-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut prepared = crate::Prepared::new(&plan);
        prepared
            .create_files(&plan, std::slice::from_ref(&dir))
            .unwrap();
        let path = dir.join("p0.r0");
        assert!(path.exists());
        let r = &plan.regions[0];
        let source = PageSource::new(r.content, plan.seed, r.id, r.distinct, false);
        let mut f = FileRegion::open(&path, r, source).unwrap();
        // No name any more (O_TMPFILE's state): the last close frees it.
        assert!(!path.exists());
        f.read(7).unwrap();
        let mut want = [0u8; PAGE_SIZE];
        fill_page(
            Content::Text,
            plan.seed,
            r.id,
            variant_of(plan.seed, r.id, 7, r.distinct),
            &mut want,
        );
        assert_eq!(f.buf.0, want);
        drop(f);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_hold_the_simulators_page_bytes_and_are_read_written_and_mapped() {
        let dir = std::env::temp_dir().join(format!(
            "reclaimlab-runner-file-test-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let plan = plan();
        let dirs = [dir.clone()];
        assert!(check_dirs(&plan, &[])
            .unwrap_err()
            .to_string()
            .contains("only 0 --fs-dir"));
        let mut prepared = crate::Prepared::new(&plan);
        prepared.create_files(&plan, &dirs).unwrap();
        let path = dir.join("p0.r1");
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), 300 * PAGE_SIZE);
        for (i, page) in bytes.chunks_exact(PAGE_SIZE).enumerate() {
            assert_eq!(page, expected(&plan, i as u64), "page {i}");
        }
        let source = PageSource::new(
            Content::Text,
            plan.seed,
            plan.regions[1].id,
            plan.regions[1].distinct,
            false,
        );
        let mut f = FileRegion::open(&path, &plan.regions[1], source).unwrap();
        assert_eq!(f.map.ptr.as_ptr() as usize % PMD_SIZE, 0);
        f.read(299).unwrap();
        assert_eq!(f.buf.0, expected(&plan, 299));
        // SAFETY: page 7 is inside the mapping.
        let mapped = unsafe { std::slice::from_raw_parts(f.page_ptr(7), PAGE_SIZE) };
        assert_eq!(mapped, expected(&plan, 7));
        // A write stores the page's own bytes (the file is unchanged) and fsyncs every 2 pages.
        f.start_write_phase();
        for p in 0..3 {
            f.write(p, Some(2 * PAGE_SIZE as u64)).unwrap();
        }
        assert_eq!(f.written, 3 * PAGE_SIZE as u64);
        // SAFETY: page 1 is inside the mapping; write_touch keeps the byte.
        unsafe { crate::mem::write_touch(f.page_ptr(1)) };
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert!(FileRegion::open(
            &dir.join("missing"),
            &plan.regions[1],
            PageSource::new(Content::Zero, 0, 0, 1, false)
        )
        .err()
        .unwrap()
        .to_string()
        .contains("opening"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
