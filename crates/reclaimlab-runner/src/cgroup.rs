//! The cgroup phases on the real kernel: `reclaim` writes the process's own cgroup's
//! `memory.reclaim`, `cgroup_write` one of its interface files, as the simulator's phases do
//! (crates/reclaimlab-core/src/sched.rs). The cgroup is the one the runner is in when the phase
//! runs (`/proc/self/cgroup`, cgroup v2 only), under the cgroup2 mount of `/proc/self/mountinfo`.
//! `cgroup_open` keeps a peak file open for later `cgroup_write`s and `cgroup_read`s through it
//! (per-descriptor resets), `cgroup_close` closes it.

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use reclaimlab_workload::{CgroupCounter, CgroupFile, CgroupValue};

/// What a cgroup phase did, for the phase report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOutcome {
    /// reclaim: memory.stat `pgsteal` of the cgroup after the write minus before, in bytes (the
    /// kernel does not say how much a memory.reclaim write reclaimed; other reclaim in the
    /// subtree at the same time is counted too).
    pub reclaimed_bytes: Option<u64>,
    /// The write failed with this errno (EAGAIN: memory.reclaim fell short).
    pub errno: Option<i32>,
    /// The number written (`Some(None)`: "max", or "reset" for a peak file; reclaim: the
    /// amount).
    pub written: Option<Option<u64>>,
    /// cgroup_read: the number read (bytes).
    pub read: Option<u64>,
}

/// The cgroup v2 directory this process is in.
pub fn own_cgroup_dir() -> io::Result<PathBuf> {
    let cg = fs::read_to_string("/proc/self/cgroup")?;
    let rel = cg
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| io::Error::other("not in a cgroup v2 hierarchy (no 0:: line in /proc/self/cgroup): cgroup phases need cgroup v2"))?;
    let mounts = fs::read_to_string("/proc/self/mountinfo")?;
    // mountinfo: id parent major:minor root mountpoint options ... - fstype source superopts
    let mount = mounts
        .lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            (post.split(' ').next() == Some("cgroup2"))
                .then(|| pre.split(' ').nth(4).map(str::to_string))?
        })
        .ok_or_else(|| io::Error::other("no cgroup2 mount in /proc/self/mountinfo"))?;
    Ok(Path::new(&mount).join(rel.trim().trim_start_matches('/')))
}

fn read_u64(dir: &Path, file: &str) -> io::Result<u64> {
    let text = fs::read_to_string(dir.join(file))?;
    text.trim()
        .parse()
        .map_err(|e| io::Error::other(format!("{}: {e}", dir.join(file).display())))
}

/// memory.stat's `pgsteal` field.
fn pgsteal(dir: &Path) -> io::Result<u64> {
    let text = fs::read_to_string(dir.join("memory.stat"))?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("pgsteal ")
                .and_then(|v| v.trim().parse().ok())
        })
        .ok_or_else(|| io::Error::other("memory.stat has no pgsteal"))
}

/// Writes `text` to `dir/file`; Err(errno) when the kernel refuses the write.
fn write(dir: &Path, file: &str, text: &str) -> io::Result<Result<(), i32>> {
    match fs::write(dir.join(file), text) {
        Ok(()) => Ok(Ok(())),
        Err(e) => match e.raw_os_error() {
            Some(errno) if errno == libc::EAGAIN => Ok(Err(errno)),
            _ => Err(io::Error::new(
                e.kind(),
                format!("writing {text:?} to {}: {e}", dir.join(file).display()),
            )),
        },
    }
}

/// The number a value stands for, its counter read from `dir` (None: "max").
fn resolve(dir: &Path, value: CgroupValue) -> io::Result<Option<u64>> {
    let mut counter_err = None;
    let v = value.resolve(|c: CgroupCounter| {
        read_u64(dir, c.name()).unwrap_or_else(|e| {
            counter_err = Some(e);
            0
        })
    });
    match counter_err {
        Some(e) => Err(e),
        None => Ok(v),
    }
}

/// A `reclaim` phase: `amount` bytes (and `swappiness=N`) written to `dir/memory.reclaim`.
pub fn reclaim(
    dir: &Path,
    amount: CgroupValue,
    swappiness: Option<u8>,
) -> io::Result<WriteOutcome> {
    let bytes = resolve(dir, amount)?.unwrap_or(0);
    let text = match swappiness {
        Some(s) => format!("{bytes} swappiness={s}"),
        None => bytes.to_string(),
    };
    let before = pgsteal(dir)?;
    let r = write(dir, "memory.reclaim", &text)?;
    let after = pgsteal(dir)?;
    Ok(WriteOutcome {
        reclaimed_bytes: Some(after.saturating_sub(before) * 4096),
        errno: r.err(),
        written: Some(Some(bytes)),
        read: None,
    })
}

/// A `cgroup_write` phase: `value` (computed from the cgroup's counter when it is one) written
/// to `dir/<file>`.
pub fn cgroup_write(dir: &Path, file: CgroupFile, value: CgroupValue) -> io::Result<WriteOutcome> {
    let v = resolve(dir, value)?;
    let text = if file.is_peak() {
        RESET.to_string()
    } else {
        CgroupValue::text(v)
    };
    let r = write(dir, file.name(), &text)?;
    Ok(WriteOutcome {
        reclaimed_bytes: None,
        errno: r.err(),
        written: Some(v),
        read: None,
    })
}

/// What a reset of a peak file writes (the kernel takes any non-empty text).
const RESET: &str = "reset\n";

/// A `cgroup_open` phase: `dir/<file>` opened for reading and writing (as the selftests open
/// memory.peak: O_RDWR | O_APPEND), kept by the caller.
pub fn open(dir: &Path, file: CgroupFile) -> io::Result<fs::File> {
    let path = dir.join(file.name());
    fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))
}

/// A `cgroup_write` of a peak file through its open descriptor: the reset.
pub fn write_fd(f: &mut fs::File, file: CgroupFile) -> io::Result<WriteOutcome> {
    f.write_all(RESET.as_bytes()).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("writing {RESET:?} to an open {}: {e}", file.name()),
        )
    })?;
    Ok(WriteOutcome {
        written: Some(None),
        ..WriteOutcome::default()
    })
}

/// A `cgroup_read`: the number in `dir/<file>` (at its row `key` for memory.stat and
/// memory.events, as the selftests' cg_read_key_long; a missing row fails with ENOENT), or
/// with `f` read through that descriptor from its start (pread, as cg_read_long_fd).
pub fn read(
    dir: &Path,
    file: CgroupCounter,
    key: Option<&str>,
    f: Option<&fs::File>,
) -> io::Result<WriteOutcome> {
    let v = match (f, key) {
        (None, Some(key)) => {
            let text = fs::read_to_string(dir.join(file.name()))?;
            let row = text.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse::<u64>().ok())?
            });
            match row {
                Some(v) => v,
                None => {
                    return Ok(WriteOutcome {
                        errno: Some(libc::ENOENT),
                        ..WriteOutcome::default()
                    })
                }
            }
        }
        (None, None) => read_u64(dir, file.name())?,
        (Some(f), _) => {
            let mut buf = [0u8; 64];
            let n = f.read_at(&mut buf, 0)?;
            std::str::from_utf8(&buf[..n])
                .ok()
                // The number on the first line (the selftests' atol stops at its end too).
                .and_then(|t| t.lines().next()?.trim().parse().ok())
                .ok_or_else(|| {
                    io::Error::other(format!(
                        "an open {} read {:?}: not a number",
                        file.name(),
                        &buf[..n]
                    ))
                })?
        }
    };
    Ok(WriteOutcome {
        read: Some(v),
        ..WriteOutcome::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_in_a_directory() {
        let dir = std::env::temp_dir().join(format!("reclaimlab-cg-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("memory.zswap.current"), "10001\n").unwrap();
        fs::write(dir.join("memory.stat"), "anon 1\npgsteal 5\n").unwrap();
        let o = cgroup_write(
            &dir,
            CgroupFile::MemoryZswapMax,
            CgroupValue::Of {
                of: CgroupCounter::MemoryZswapCurrent,
                times: 0.5,
                minus: 0,
            },
        )
        .unwrap();
        assert_eq!(o.written, Some(Some(5000)));
        assert_eq!(
            fs::read_to_string(dir.join("memory.zswap.max")).unwrap(),
            "5000"
        );
        let o = cgroup_write(&dir, CgroupFile::MemoryHigh, CgroupValue::Max).unwrap();
        assert_eq!(
            (
                o.written,
                fs::read_to_string(dir.join("memory.high"))
                    .unwrap()
                    .as_str()
            ),
            (Some(None), "max")
        );
        let o = reclaim(&dir, CgroupValue::Value { value: 4 << 20 }, Some(0)).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join("memory.reclaim")).unwrap(),
            "4194304 swappiness=0"
        );
        assert_eq!((o.reclaimed_bytes, o.errno), (Some(0), None));
        let o = reclaim(
            &dir,
            CgroupValue::Of {
                of: CgroupCounter::MemoryZswapCurrent,
                times: 1.0,
                minus: 1,
            },
            None,
        )
        .unwrap();
        assert_eq!(
            (
                fs::read_to_string(dir.join("memory.reclaim"))
                    .unwrap()
                    .as_str(),
                o.written
            ),
            ("10000", Some(Some(10000)))
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn keeps_a_descriptor_and_reads_rows() {
        // In a plain directory the "peak file" is a regular file: the reset is appended (the
        // kernel's file ignores what is written), and a read through the descriptor starts at
        // offset 0 whatever the file position.
        let dir = std::env::temp_dir().join(format!("reclaimlab-cgfd-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("memory.peak"), "12288\n").unwrap();
        fs::write(dir.join("memory.events"), "low 0\nhigh 0\nmax 7\noom 1\n").unwrap();
        let mut f = open(&dir, CgroupFile::MemoryPeak).unwrap();
        let o = read(&dir, CgroupCounter::MemoryPeak, None, Some(&f)).unwrap();
        assert_eq!(o.read, Some(12288));
        let o = write_fd(&mut f, CgroupFile::MemoryPeak).unwrap();
        assert_eq!((o.written, o.errno), (Some(None), None));
        assert_eq!(
            fs::read_to_string(dir.join("memory.peak")).unwrap(),
            "12288\nreset\n"
        );
        assert_eq!(
            read(&dir, CgroupCounter::MemoryPeak, None, Some(&f))
                .unwrap()
                .read,
            Some(12288)
        );
        let o = read(&dir, CgroupCounter::MemoryEvents, Some("max"), None).unwrap();
        assert_eq!((o.read, o.errno), (Some(7), None));
        let o = read(&dir, CgroupCounter::MemoryEvents, Some("oom_kill"), None).unwrap();
        assert_eq!((o.read, o.errno), (None, Some(libc::ENOENT)));
        assert!(open(&dir, CgroupFile::MemorySwapPeak)
            .unwrap_err()
            .to_string()
            .contains("memory.swap.peak"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
