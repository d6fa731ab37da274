//! The lowered scenario, as far as the runner needs it.
//!
//! The runner reads the same JSON the simulator reads (`reclaimlab_core::config::SimConfig`,
//! written by `python/reclaimlab/lower.py`) but does not depend on the core: it declares only
//! `seed` and one process's name, regions and phases, and ignores every other field (no
//! `deny_unknown_fields` on these structs). Phases are `reclaimlab_workload::Phase`, the very type
//! the simulator deserialises, so both read a phase identically.
//!
//! Validation mirrors `Simulation::new` / `check_phase` in the core for the selected process, so
//! a config the simulator rejects is rejected here too, with the same kind of message, instead
//! of panicking later (e.g. in `AccessGen::new`).

use std::path::Path;

use reclaimlab_workload::rng::{stream, Stream};
use reclaimlab_workload::{content, AccessGen, After, Content, Phase, PAGE_SIZE};
use serde::Deserialize;

#[derive(Deserialize)]
struct RawConfig {
    seed: u64,
    /// Kept as JSON values so that only the selected process has to parse, and errors can name
    /// the exact element.
    processes: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct RawProcess {
    name: String,
    regions: Vec<serde_json::Value>,
    phases: Vec<serde_json::Value>,
    /// /proc/<pid>/oom_score_adj (absent: 0, left as inherited).
    #[serde(default)]
    oom_score_adj: Option<i16>,
}

#[derive(Deserialize)]
struct RawRegion {
    name: String,
    pages: u64,
    content: String,
    variants: u32,
    /// A file region: the index of its filesystem in `machine.filesystems`.
    #[serde(default)]
    file: Option<u32>,
    /// madvise(MADV_HUGEPAGE) the region.
    #[serde(default)]
    thp: bool,
    /// mlock(2) the region once mapped.
    #[serde(default)]
    mlock: bool,
    /// An unnamed file: unlinked once opened, freed when the runner closes it.
    #[serde(default)]
    tmpfile: bool,
}

#[derive(Deserialize)]
struct RawNamedPhase {
    name: String,
    phase: Phase,
    #[serde(default)]
    after: Option<After>,
}

/// One region of the process, resolved.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionPlan {
    pub name: String,
    pub pages: u64,
    pub content: Content,
    /// `variants` as written in the config.
    pub variants: u32,
    /// `content::distinct_variants(content, variants)`: what the simulator passes to
    /// `variant_of` (it gives the same bytes as `variants`).
    pub distinct: u32,
    /// `content::region_id(process_index, region_index)`: keys the content stream.
    pub id: u32,
    /// A file region: the index of its filesystem (`machine.filesystems`); None: anonymous.
    pub file: Option<u32>,
    /// madvise(MADV_HUGEPAGE) on the mapping (the scenario's `thp = true`), as the simulator's
    /// THP faults under transparent_hugepage/enabled = madvise assume.
    pub thp: bool,
    /// mlock(2) of the whole mapping right after it is mapped (the scenario's `mlock = true`).
    pub mlock: bool,
    /// The file is unlinked right after `go` opens it (the scenario's `tmpfile = true`): like
    /// an O_TMPFILE file, it has no name, and the close at exit evicts it and its page cache.
    pub tmpfile: bool,
}

impl RegionPlan {
    /// The mapping length in bytes (validated to fit in `usize` with 2 MiB to spare).
    pub fn bytes(&self) -> usize {
        self.pages as usize * PAGE_SIZE
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PhasePlan {
    pub name: String,
    pub phase: Phase,
    /// Waits before the phase until the driver says the named phase of another process ended.
    pub after: Option<After>,
}

/// What process `process_index` of a lowered scenario does.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub seed: u64,
    pub process_index: u32,
    pub process_name: String,
    pub regions: Vec<RegionPlan>,
    pub phases: Vec<PhasePlan>,
    /// The value the runner writes to /proc/self/oom_score_adj before `ready` (None: none).
    pub oom_score_adj: Option<i16>,
}

/// `content::region_id` packs the process and region indices into 16 bits each.
const MAX_INDEX: usize = 1 << 16;

/// File phases work on file regions, the others on anonymous ones (`Phase::check_region_kinds`,
/// which the simulator checks too); kernel_alloc phases are the simulator's alone.
fn check_region_kinds(phase: &Phase, regions: &[RegionPlan]) -> Result<(), String> {
    // A user process cannot ask the kernel for a block of a given order and type.
    if let Phase::KernelAlloc { .. } = phase {
        return Err("kernel_alloc phases run in the simulator only".into());
    }
    phase.check_region_kinds(|r| {
        let reg = &regions[r as usize];
        (reg.name.as_str(), reg.file.is_some())
    })
}

impl Plan {
    /// Reads and validates `path` for process `process`.
    pub fn load(path: &Path, process: usize) -> Result<Plan, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
        Plan::parse(&text, process).map_err(|e| format!("config {}: {e}", path.display()))
    }

    /// Parses and validates the lowered JSON `text` for process `process`.
    pub fn parse(text: &str, process: usize) -> Result<Plan, String> {
        let raw: RawConfig =
            serde_json::from_str(text).map_err(|e| format!("not a lowered scenario: {e}"))?;
        let n = raw.processes.len();
        // Phase counts of every process, to check `after` against (the simulator's check_after).
        let phase_counts: Vec<Option<usize>> = raw
            .processes
            .iter()
            .map(|v| v.get("phases").and_then(|p| p.as_array()).map(Vec::len))
            .collect();
        let Some(value) = raw.processes.into_iter().nth(process) else {
            return Err(match n {
                0 => format!("--process {process}: the config has no processes"),
                _ => format!(
                    "--process {process}: out of range, the config has {n} process(es) (0..={})",
                    n - 1
                ),
            });
        };
        if process >= MAX_INDEX {
            return Err(format!("--process {process}: at most {MAX_INDEX} processes are supported (content region ids)"));
        }
        let at = format!("processes[{process}]");
        let p = RawProcess::deserialize(value).map_err(|e| format!("{at}: {e}"))?;
        let at = format!("{at} ({})", p.name);
        if let Some(adj) = p.oom_score_adj.filter(|a| !(-1000..=1000).contains(a)) {
            return Err(format!(
                "{at}.oom_score_adj: expected -1000..=1000, got {adj}"
            ));
        }
        if p.regions.len() > MAX_INDEX {
            return Err(format!("{at}: at most {MAX_INDEX} regions per process"));
        }

        let mut regions = Vec::with_capacity(p.regions.len());
        for (ri, value) in p.regions.into_iter().enumerate() {
            let rat = format!("{at}.regions[{ri}]");
            let r = RawRegion::deserialize(value).map_err(|e| format!("{rat}: {e}"))?;
            let content: Content = r
                .content
                .parse()
                .map_err(|e| format!("{rat}.content: {e}"))?;
            if r.pages == 0 || r.variants == 0 {
                return Err(format!(
                    "{rat} ({}): pages and variants must be > 0",
                    r.name
                ));
            }
            // The mapping is over-allocated by 2 MiB for alignment, and page offsets must fit
            // in isize for pointer arithmetic.
            let fits = r
                .pages
                .checked_mul(PAGE_SIZE as u64)
                .and_then(|b| b.checked_add(2 << 20))
                .is_some_and(|b| b <= isize::MAX as u64);
            if !fits {
                return Err(format!(
                    "{rat} ({}): {} pages do not fit in this address space",
                    r.name, r.pages
                ));
            }
            regions.push(RegionPlan {
                name: r.name,
                pages: r.pages,
                content,
                variants: r.variants,
                distinct: content::distinct_variants(content, r.variants),
                id: content::region_id(process as u32, ri as u32),
                file: r.file,
                thp: r.thp,
                mlock: r.mlock,
                tmpfile: r.tmpfile,
            });
        }

        let mut phases = Vec::with_capacity(p.phases.len());
        for (k, value) in p.phases.into_iter().enumerate() {
            let pat = format!("{at}.phases[{k}]");
            let np = RawNamedPhase::deserialize(value).map_err(|e| format!("{pat}: {e}"))?;
            np.phase
                .check(regions.len())
                .map_err(|e| format!("{pat} ({}): {e}", np.name))?;
            check_region_kinds(&np.phase, &regions)
                .map_err(|e| format!("{pat} ({}): {e}", np.name))?;
            let region_pages: Vec<u64> = regions.iter().map(|r| r.pages).collect();
            np.phase
                .check_sizes(&region_pages)
                .map_err(|e| format!("{pat} ({}): {e}", np.name))?;
            if let Some(a) = np.after {
                let bad = if a.process as usize == process {
                    Some("names a phase of its own process".to_string())
                } else {
                    match phase_counts.get(a.process as usize) {
                        None => Some(format!(
                            "process {} does not exist ({n} processes)",
                            a.process
                        )),
                        Some(c) if (a.phase as usize) >= c.unwrap_or(0) => {
                            Some(format!("process {} has no phase {}", a.process, a.phase))
                        }
                        Some(_) => None,
                    }
                };
                if let Some(b) = bad {
                    return Err(format!("{pat} ({}).after: {b}", np.name));
                }
            }
            phases.push(PhasePlan {
                name: np.name,
                phase: np.phase,
                after: np.after,
            });
        }
        // Descriptor references (cgroup_open / cgroup_write / cgroup_read / cgroup_close), as
        // the simulator checks them.
        let list: Vec<Phase> = phases.iter().map(|ph| ph.phase.clone()).collect();
        reclaimlab_workload::check_fds(&list)
            .map_err(|(k, e)| format!("{at}.phases[{k}] ({}): {e}", phases[k].name))?;

        let plan = Plan {
            seed: raw.seed,
            process_index: process as u32,
            process_name: p.name,
            regions,
            phases,
            oom_score_adj: p.oom_score_adj,
        };
        plan.check_created(&at)?;
        Ok(plan)
    }

    /// Whether any region is a file (the runner then needs `--fs-dir` for each filesystem).
    pub fn file_regions(&self) -> impl Iterator<Item = (usize, &RegionPlan)> {
        self.regions
            .iter()
            .enumerate()
            .filter(|(_, r)| r.file.is_some())
    }

    /// By region index: whether a create_files phase creates it. Its file does not exist
    /// before that phase (the runner neither writes it before `ready` nor opens it at `go`).
    pub fn created_regions(&self) -> Vec<bool> {
        let mut out = vec![false; self.regions.len()];
        for p in &self.phases {
            if let Phase::CreateFiles { regions, .. } = &p.phase {
                for &r in regions {
                    out[r as usize] = true;
                }
            }
        }
        out
    }

    /// A region that a create_files phase creates may appear in no other phase: the runner
    /// creates, writes and closes it within that phase (fs_mark's loop), and keeps no open
    /// file or mapping of it for other phases.
    fn check_created(&self, at: &str) -> Result<(), String> {
        let created = self.created_regions();
        let mut seen = vec![false; self.regions.len()];
        for (k, p) in self.phases.iter().enumerate() {
            let used: Vec<u32> = match &p.phase {
                Phase::CreateFiles { regions, .. } => {
                    for &r in regions {
                        if std::mem::replace(&mut seen[r as usize], true) {
                            return Err(format!(
                                "{at}.phases[{k}] ({}): region {r} ({}) is created by an earlier create_files phase; \
                                 the runner creates each file once",
                                p.name, self.regions[r as usize].name
                            ));
                        }
                    }
                    continue;
                }
                Phase::Read { region, .. }
                | Phase::Mmap { region, .. }
                | Phase::Write { region, .. } => vec![*region],
                _ => continue,
            };
            if let Some(&r) = used.iter().find(|&&r| created[r as usize]) {
                return Err(format!(
                    "{at}.phases[{k}] ({}): region {r} ({}) is created by a create_files phase; the runner runs no other \
                     file phase on such a region",
                    p.name, self.regions[r as usize].name
                ));
            }
        }
        Ok(())
    }

    /// Page counts by region index, as `AccessGen` wants them.
    pub fn region_pages(&self) -> Vec<u64> {
        self.regions.iter().map(|r| r.pages).collect()
    }

    /// The access generator of phase `phase_index`, seeded exactly as the simulator seeds it
    /// (`engine.rs`, `start_phase`): `stream(seed, Access, process_index, phase_index)`.
    pub fn access_gen(&self, phase_index: usize, region_pages: &[u64]) -> AccessGen {
        let rng = stream(
            self.seed,
            Stream::Access,
            u64::from(self.process_index),
            phase_index as u64,
        );
        AccessGen::new(&self.phases[phase_index].phase, region_pages, rng)
    }

    /// The phases that run: everything up to and including the first `Exit`.
    pub fn live_phases(&self) -> &[PhasePlan] {
        match self.phases.iter().position(|p| p.phase == Phase::Exit) {
            Some(i) => &self.phases[..=i],
            None => &self.phases,
        }
    }

    /// Regions that some phase fills (so their page bytes are needed).
    pub fn filled_regions(&self) -> Vec<bool> {
        let mut filled = vec![false; self.regions.len()];
        for p in self.live_phases() {
            if let Phase::Fill { region } = p.phase {
                filled[region as usize] = true;
            }
        }
        filled
    }

    /// File regions that some `write` phase writes with write(2) (their page bytes are needed
    /// during the phase, as a fill's are).
    pub fn written_files(&self) -> Vec<bool> {
        let mut written = vec![false; self.regions.len()];
        for p in self.live_phases() {
            if let Phase::Write { region, .. } = p.phase {
                written[region as usize] = true;
            }
        }
        written
    }

    /// Regions that a non-fill phase may write before any fill of that region. The simulator
    /// gives a page its region's content on the first write of any kind (`do_anonymous_page`
    /// allocates a page "holding" its variant), so the runner must store the full page bytes on
    /// such a first write rather than touch one byte of a zero page.
    pub fn needs_materialize(&self) -> Vec<bool> {
        let mut filled = vec![false; self.regions.len()];
        let mut need = vec![false; self.regions.len()];
        for p in self.live_phases() {
            let (regions, writes) = match &p.phase {
                Phase::Fill { region } => {
                    filled[*region as usize] = true;
                    continue;
                }
                Phase::Sequential {
                    regions,
                    write_percent,
                    ..
                }
                | Phase::Random {
                    regions,
                    write_percent,
                    ..
                } => (regions, *write_percent > 0),
                // A trace says per access whether it writes: any write may come first.
                Phase::Trace { regions, trace, .. } => (
                    regions,
                    trace
                        .words()
                        .iter()
                        .any(|w| w & reclaimlab_workload::trace::WRITE_BIT != 0),
                ),
                // File phases and those that touch no memory store nothing in an anonymous
                // region.
                _ => continue,
            };
            if writes {
                for &r in regions {
                    if !filled[r as usize] {
                        need[r as usize] = true;
                    }
                }
            }
        }
        need
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(processes: &str) -> String {
        format!(
            r#"{{"seed": 7, "machine": {{"memory_bytes": 1}}, "future_field": [1, 2], "processes": [{processes}]}}"#
        )
    }

    const P0: &str = r#"{"name": "a", "cgroup": 0, "regions": [{"name": "r", "pages": 3, "content": "zero", "variants": 1}],
        "phases": [{"name": "f", "phase": {"kind": "fill", "region": 0}}]}"#;

    #[test]
    fn a_created_file_is_in_no_other_file_phase() {
        let phases = |second: &str| {
            config(&format!(
                r#"{{"name": "a", "regions": [{{"name": "f", "pages": 3, "content": "zero", "variants": 1, "file": 0}}],
                "phases": [{{"name": "c", "phase": {{"kind": "create_files", "regions": [0], "fsync": false}}}}, {second}]}}"#
            ))
        };
        let e = Plan::parse(
            &phases(r#"{"name": "r", "phase": {"kind": "read", "region": 0, "passes": 1}}"#),
            0,
        )
        .unwrap_err();
        assert!(
            e.contains("phases[1] (r): region 0 (f) is created by a create_files phase"),
            "{e}"
        );
        let e = Plan::parse(&phases(r#"{"name": "c2", "phase": {"kind": "create_files", "regions": [0], "fsync": true}}"#), 0)
            .unwrap_err();
        assert!(
            e.contains("created by an earlier create_files phase"),
            "{e}"
        );
        assert!(Plan::parse(
            &phases(r#"{"name": "z", "phase": {"kind": "sleep", "duration_ns": 1}}"#),
            0
        )
        .is_ok());
    }

    #[test]
    fn tolerates_unknown_fields_outside_phases() {
        let text = config(&format!(
            r#"{P0}, {{"name": "b", "extra": true, "regions": [
                {{"name": "x", "pages": 10, "content": "same:0x5a", "variants": 4, "note": 1}},
                {{"name": "y", "pages": 20, "content": "text", "variants": 8}}],
               "phases": [
                {{"name": "s", "phase": {{"kind": "sequential", "regions": [1, 0], "passes": 2, "write_percent": 10}}}},
                {{"name": "z", "phase": {{"kind": "sleep", "duration_ns": 5}}}},
                {{"name": "e", "phase": {{"kind": "exit"}}}},
                {{"name": "after", "phase": {{"kind": "fill", "region": 1}}}}]}}"#
        ));
        let plan = Plan::parse(&text, 1).unwrap();
        assert_eq!(plan.seed, 7);
        assert_eq!(plan.process_index, 1);
        assert_eq!(plan.process_name, "b");
        assert_eq!(plan.region_pages(), [10, 20]);
        assert_eq!(plan.regions[0].content, Content::Same { byte: 0x5a });
        assert_eq!(plan.regions[0].distinct, 1);
        assert_eq!(plan.regions[1].distinct, 8);
        assert_eq!(plan.regions[1].id, content::region_id(1, 1));
        assert_eq!(plan.phases.len(), 4);
        assert_eq!(plan.live_phases().len(), 3);
        // The fill after exit never runs.
        assert_eq!(plan.filled_regions(), [false, false]);
        assert_eq!(plan.needs_materialize(), [true, true]);
    }

    #[test]
    fn materialize_only_writes_before_the_first_fill() {
        let text = config(
            r#"{"name": "p", "regions": [
                {"name": "a", "pages": 1, "content": "text", "variants": 1},
                {"name": "b", "pages": 1, "content": "text", "variants": 1},
                {"name": "c", "pages": 1, "content": "text", "variants": 1}],
              "phases": [
                {"name": "r", "phase": {"kind": "random", "regions": [0, 1], "dist": {"kind": "uniform"}, "count": 5, "duration_ns": null, "write_percent": 0}},
                {"name": "f", "phase": {"kind": "fill", "region": 0}},
                {"name": "w", "phase": {"kind": "sequential", "regions": [0, 1], "passes": 1, "write_percent": 1}}]}"#,
        );
        let plan = Plan::parse(&text, 0).unwrap();
        assert_eq!(plan.filled_regions(), [true, false, false]);
        assert_eq!(plan.needs_materialize(), [false, true, false]);
    }

    fn err(processes: &str, process: usize) -> String {
        Plan::parse(&config(processes), process).unwrap_err()
    }

    #[test]
    fn rejects_what_the_simulator_rejects() {
        let region = |content: &str, pages: u64, variants: u32| {
            format!(
                r#"{{"name": "p", "regions": [{{"name": "r", "pages": {pages}, "content": "{content}", "variants": {variants}}}], "phases": []}}"#
            )
        };
        let phase = |ph: &str| {
            format!(
                r#"{{"name": "p", "regions": [{{"name": "r", "pages": 4, "content": "zero", "variants": 1}}], "phases": [{{"name": "x", "phase": {ph}}}]}}"#
            )
        };
        let cases: Vec<(String, usize, &str)> = vec![
            (P0.into(), 1, "--process 1: out of range"),
            (region("txt", 4, 1), 0, "processes[0] (p).regions[0].content: bad page content \"txt\""),
            (region("text", 0, 1), 0, "pages and variants must be > 0"),
            (region("text", 4, 0), 0, "pages and variants must be > 0"),
            (region("text", u64::MAX / 2, 1), 0, "do not fit"),
            (r#"{"name": "p", "regions": [{"name": "r", "pages": 4, "content": "zero"}], "phases": []}"#.into(), 0, "missing field `variants`"),
            (phase(r#"{"kind": "fill", "region": 1}"#), 0, "phases[0] (x): region index 1 out of range"),
            (phase(r#"{"kind": "sequential", "regions": [], "passes": 1, "write_percent": 0}"#), 0, "needs at least one region"),
            (
                phase(r#"{"kind": "random", "regions": [0], "dist": {"kind": "uniform"}, "count": 1, "duration_ns": 1, "write_percent": 0}"#),
                0,
                "exactly one of count and duration",
            ),
            (
                phase(r#"{"kind": "random", "regions": [0], "dist": {"kind": "uniform"}, "count": null, "duration_ns": null, "write_percent": 0}"#),
                0,
                "exactly one of count and duration",
            ),
            (
                phase(r#"{"kind": "random", "regions": [0], "dist": {"kind": "zipf", "theta": -1.0}, "count": 1, "duration_ns": null, "write_percent": 0}"#),
                0,
                "zipf theta",
            ),
            (phase(r#"{"kind": "teleport"}"#), 0, "processes[0] (p).phases[0]: unknown variant `teleport`"),
        ];
        for (p, idx, want) in cases {
            let e = err(&p, idx);
            assert!(e.contains(want), "{p}\n=> {e}\nwanted {want}");
        }
        let adj = |v: i32| {
            format!(
                r#"{{"seed": 1, "processes": [{{"name": "p", "oom_score_adj": {v}, "regions": [], "phases": []}}]}}"#
            )
        };
        assert_eq!(
            Plan::parse(&adj(-1000), 0).unwrap().oom_score_adj,
            Some(-1000)
        );
        assert!(Plan::parse(&adj(1001), 0)
            .unwrap_err()
            .contains("oom_score_adj: expected -1000..=1000, got 1001"));
        assert!(Plan::parse(r#"{"processes": []}"#, 0)
            .unwrap_err()
            .contains("missing field `seed`"));
        assert!(Plan::parse(r#"{"seed": 1, "processes": []}"#, 0)
            .unwrap_err()
            .contains("no processes"));
        assert!(Plan::parse("{", 0)
            .unwrap_err()
            .contains("not a lowered scenario"));
    }

    #[test]
    fn access_gen_uses_the_simulators_stream() {
        let text = config(&format!(
            r#"{P0}, {{"name": "b", "regions": [{{"name": "x", "pages": 100, "content": "zero", "variants": 1}}],
               "phases": [{{"name": "s", "phase": {{"kind": "sleep", "duration_ns": 1}}}},
                          {{"name": "r", "phase": {{"kind": "random", "regions": [0], "dist": {{"kind": "uniform"}}, "count": 50, "duration_ns": null, "write_percent": 50}}}}]}}"#
        ));
        let plan = Plan::parse(&text, 1).unwrap();
        let got: Vec<_> = plan.access_gen(1, &plan.region_pages()).collect();
        let expect: Vec<_> = AccessGen::new(
            &plan.phases[1].phase,
            &[100],
            stream(7, Stream::Access, 1, 1),
        )
        .collect();
        assert_eq!(got.len(), 50);
        assert_eq!(got, expect);
    }
}
