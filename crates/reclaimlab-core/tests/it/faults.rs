//! Per-phase page faults (`minflt`, `majflt` of the phase records): what getrusage reports
//! for the process over the phase (mm_account_fault, 6.12 mm/memory.c).

use serde_json::json;

use crate::common::{counter, run, scenario};

#[test]
fn phase_faults_add_up_to_vmstat() {
    // One process, 4096 pages in a v1 group limited to 1024: the fill takes one minor fault a
    // page; the random reads swap pages back in (major) and hit swap-cache readahead (minor).
    let v = scenario(&[("a", 4096, "mix1024")], 20_000, 1024, false, false);
    let r = run(&v);
    let fill = &r.phases[0];
    assert_eq!(
        (fill.minflt, fill.majflt),
        (4096, 0),
        "a fill: one minor fault per fresh page"
    );
    let measure = &r.phases[1];
    assert!(
        measure.majflt > 0 && measure.minflt > 0,
        "measure: {} minor, {} major",
        measure.minflt,
        measure.majflt
    );
    assert!(measure.minflt + measure.majflt <= measure.accesses);
    // One process, no retried faults: the phases' faults are all of the machine's.
    let (min, maj): (u64, u64) = r
        .phases
        .iter()
        .fold((0, 0), |(a, b), p| (a + p.minflt, b + p.majflt));
    assert_eq!(maj, counter(&r, "vmstat.pgmajfault"));
    assert_eq!(min + maj, counter(&r, "vmstat.pgfault"));
    // The record's JSON carries them under getrusage's short names, as the lab runner does.
    let j = serde_json::to_value(&r.phases[1]).unwrap();
    assert_eq!(
        (j["minflt"].clone(), j["majflt"].clone()),
        (json!(measure.minflt), json!(measure.majflt))
    );
}

#[test]
fn reads_of_fresh_memory_are_minor_faults_on_the_zero_page() {
    // Reading a never-written region maps the shared zero page: one minor fault per page, no
    // memory charged; nothing is major.
    let mut v = scenario(&[("a", 512, "mix1024")], 0, 1024, false, false);
    v["processes"][0]["phases"] = json!([{"name": "read", "phase": {"kind": "sequential", "regions": [0], "passes": 2, "write_percent": 0}}]);
    let r = run(&v);
    assert_eq!((r.phases[0].minflt, r.phases[0].majflt), (512, 0));
}

/// `scenario` with a fill, then `passes` over the region with `pass` (a sequential phase's
/// extra keys), then a read pass that evicts what the first passes brought in.
fn passes(pages: u64, pass: serde_json::Value) -> serde_json::Value {
    let mut v = scenario(&[("a", pages, "mix1024")], 0, 1024, false, false);
    let mut p = json!({"kind": "sequential", "regions": [0], "passes": 1, "write_percent": 0});
    for (k, x) in pass.as_object().unwrap() {
        p[k] = x.clone();
    }
    v["processes"][0]["phases"] = json!([
        {"name": "fill", "phase": {"kind": "fill", "region": 0}},
        {"name": "pass", "phase": p},
        {"name": "again", "phase": {"kind": "sequential", "regions": [0], "passes": 1, "write_percent": 0}}]);
    v
}

#[test]
fn rw_takes_the_read_fault_and_dirties_the_page() {
    let read = run(&passes(4096, json!({})));
    let rw = run(&passes(4096, json!({"write_percent": 100, "rw": true})));
    // As many faults as loads alone: the load faults the page in (do_swap_page maps an
    // exclusive anonymous page writable), the store finds it mapped and takes none. (Which of
    // them are major can differ by a page or two: the dirty pages change reclaim's timing.)
    let faults = |r: &reclaimlab_core::SimResult| r.phases[1].minflt + r.phases[1].majflt;
    assert_eq!(faults(&rw), faults(&read));
    assert!(rw.phases[1].majflt > 0);
    // ... but the page is dirty now: evicting it again writes it out, where the clean pages
    // the loads brought in keep their swap copy and are dropped.
    let out = |r: &reclaimlab_core::SimResult| counter(r, "vmstat.pswpout");
    assert!(
        out(&rw) > out(&read) + 1000,
        "pswpout rw {} read {}",
        out(&rw),
        out(&read)
    );
}

#[test]
fn rw_on_fresh_memory_faults_twice() {
    // Never-written pages: the load maps the shared zero page, the store copies it
    // (do_wp_page): two minor faults a page, where a plain store takes one.
    let mut v = scenario(&[("a", 256, "mix1024")], 0, 1024, false, false);
    let seq = |rw: bool| json!([{"name": "s", "phase": {"kind": "sequential", "regions": [0], "passes": 1, "write_percent": 100, "rw": rw}}]);
    v["processes"][0]["phases"] = seq(true);
    let r = run(&v);
    assert_eq!((r.phases[0].minflt, r.phases[0].majflt), (512, 0));
    v["processes"][0]["phases"] = seq(false);
    let r = run(&v);
    assert_eq!((r.phases[0].minflt, r.phases[0].majflt), (256, 0));
}

#[test]
fn a_fault_on_a_folio_under_reclaim_writeback_counts_as_a_readahead_hit() {
    // PG_readahead is PG_reclaim (one bit in the kernel). Without readahead (page-cluster 0:
    // swap_ra stays 0), random reads under a v1 limit on a slow disk fault on pages whose
    // reclaim write is still in flight: swap_cache_get_folio/swap_update_readahead test and
    // clear the bit, so those minor faults count swap_ra_hit, and the cleared folios are not
    // rotated when their writes end.
    let mut v = scenario(&[("a", 4096, "random")], 20_000, 1024, false, true);
    v["kernel"]["vm"]["page_cluster"] = json!(0);
    v["machine"]["swap"][0]["device"]["write_bytes_per_s"] = json!(1_000_000u64);
    let last = v["processes"][0]["phases"].as_array().unwrap().len() - 1;
    v["processes"][0]["phases"][last]["phase"]["write_percent"] = json!(50);
    let r = run(&v);
    assert_eq!(counter(&r, "vmstat.swap_ra"), 0);
    let hits = counter(&r, "vmstat.swap_ra_hit");
    assert!(hits > 0, "no readahead hit on a folio under writeback");
    // Every hit was a minor fault of the random phase on a swap-cache folio.
    let measure = r
        .phases
        .iter()
        .find(|p| p.phase == "measure")
        .expect("phase");
    assert!(
        hits <= measure.minflt,
        "{hits} hits, {} minor faults",
        measure.minflt
    );
}

#[test]
fn readahead_pages_cost_swap_ra_page_ns_and_faulting_pages_swapin_page_ns() {
    // A sequential read-back from zswap at page-cluster 3: every major fault reads its window
    // of 8 slots, the 7 readahead pages are then minor faults. Raising swap_ra_page_ns by 1 µs
    // lengthens the read-back by 1 µs per readahead page (swap_ra), and swapin_page_ns by 1 µs
    // per major fault (the faulting pages): each page read is charged one of the two. One
    // process on two CPUs under a v1 limit, zswap without device IO: no contention factor.
    let mut v = passes(2048, json!({}));
    v["kernel"]["zswap"]["enabled"] = json!(true);
    let readback = |v: &serde_json::Value| {
        let r = run(v);
        let p = r.phases.iter().find(|p| p.phase == "pass").expect("phase");
        (
            p.end_ns - p.start_ns,
            counter(&r, "vmstat.swap_ra"),
            counter(&r, "vmstat.swap_ra_hit"),
            p.majflt,
        )
    };
    let (t0, ra, hits, maj) = readback(&v);
    assert!(ra > 0 && hits > 0, "no readahead in a sequential read-back");
    v["costs"] = json!({"swap_ra_page_ns": 1800});
    let (t1, ra1, _, maj1) = readback(&v);
    v["costs"] = json!({"swap_ra_page_ns": 800, "swapin_page_ns": 1800});
    let (t2, ra2, _, maj2) = readback(&v);
    assert_eq!(
        (ra1, maj1, ra2, maj2),
        (ra, maj, ra, maj),
        "counts moved with a cost"
    );
    assert_eq!((t1 - t0) % 1000, 0);
    let ra_in_phase = (t1 - t0) / 1000;
    assert!(
        ra_in_phase > 0 && ra_in_phase <= ra,
        "swap_ra_page_ns: +{} ns over {ra} readahead pages",
        t1 - t0
    );
    assert_eq!((t2 - t0) % 1000, 0);
    assert!(
        (t2 - t0) / 1000 >= maj && (t2 - t0) / 1000 <= maj + ra,
        "swapin_page_ns: +{} ns over {maj} major faults",
        t2 - t0
    );
}

#[test]
fn a_readahead_folio_loaded_from_zswap_stays_until_a_fault_maps_it_with_pageout_anon_check() {
    // 6.16+ pageout activates a dirty folio that is neither anon nor shmem (switch
    // vmscan.pageout_anon_check, off in the presets for now); a readahead folio
    // loaded from zswap is dirty (exclusive load) and not anon until a fault maps it, so reclaim
    // activates it instead of storing it again. Every readahead folio not hit yet is then still
    // in memory at the end: the memcg's unmapped pages (usage − rss − page tables, v1) are
    // exactly swap_ra − swap_ra_hit, as the kernel's (docs/validation.md, "Swap readahead with
    // zswap"). Without the check (6.12's pageout calls swap_writepage for every swap-cache
    // folio) some are stored again, and fewer stay.
    let mut v = scenario(&[("a", 4096, "text")], 6_000, 3072, true, false);
    v["kernel"]["switches"] = json!({"vmscan.pageout_anon_check": true});
    let unmapped_and_unhit = |v: &serde_json::Value| {
        let r = run(v);
        // The memcg's charge beyond its mapped pages: swap-cache folios no PTE maps, and the
        // page tables (charged to the memcg too).
        let unmapped = (counter(&r, "memcg[/t].memory.usage_in_bytes")
            - counter(&r, "memcg[/t].memory.stat.rss"))
            / 4096
            - counter(&r, "vmstat.nr_page_table_pages");
        let unhit = counter(&r, "vmstat.swap_ra") - counter(&r, "vmstat.swap_ra_hit");
        assert!(
            r.phases.iter().all(|p| p.outcome == "completed"),
            "a phase did not complete"
        );
        (unmapped, unhit, counter(&r, "vmstat.pgactivate"))
    };
    let (unmapped, unhit, activated) = unmapped_and_unhit(&v);
    assert!(unhit > 0, "no readahead folio left unhit");
    assert_eq!(unmapped, unhit, "unhit readahead folios were freed");
    assert!(activated > 0);
    v["kernel"]["switches"] = json!({});
    let (unmapped, unhit, _) = unmapped_and_unhit(&v);
    assert!(
        unhit > 0 && unmapped < unhit,
        "without the check: {unmapped} unmapped, {unhit} unhit"
    );
}

#[test]
fn cluster_readahead_starts_from_the_machines_readahead_state() {
    // swapin_readahead_hits and last_readahead_pages are global statics of mm/swap_state.c:
    // 4 and 0 after boot, so the first swap-in of a fresh machine reads a whole cluster (8 pages
    // with page-cluster 3) and the window shrinks from there. A machine that has swapped before
    // starts where its last swap-ins left them: after a collapsed random phase, 0 hits and a
    // one-page window, so a random fault reads only itself unless it is next to the last one.
    let v = scenario(&[("a", 4096, "mix1024")], 300, 1024, false, false);
    let ra = |v: &serde_json::Value| counter(&run(v), "vmstat.swap_ra");
    let boot = ra(&v);
    let mut collapsed = v.clone();
    collapsed["machine"]["swapin_readahead_hits"] = json!(0);
    collapsed["machine"]["last_readahead_pages"] = json!(1);
    let after = ra(&collapsed);
    assert!(
        boot >= 4 && after < boot,
        "boot state {boot} readahead pages, collapsed {after}"
    );
    // Stated as the boot values, the state is the default.
    let mut stated = v.clone();
    stated["machine"]["swapin_readahead_hits"] = json!(4);
    stated["machine"]["last_readahead_pages"] = json!(0);
    assert_eq!(ra(&stated), boot);
    // The window swapin_nr_pages chose is 0 or a power of two.
    collapsed["machine"]["last_readahead_pages"] = json!(3);
    let cfg: reclaimlab_core::SimConfig = serde_json::from_value(collapsed).expect("parses");
    let e = reclaimlab_core::Simulation::new(&cfg)
        .err()
        .expect("a window of 3 pages refused")
        .to_string();
    assert!(e.contains("machine.last_readahead_pages"), "{e}");
}
