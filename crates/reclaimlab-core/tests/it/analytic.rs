//! engine.accesses = "analytic" (mm/analytic.rs, docs/model/analytic.md): its bookkeeping
//! holds after every event, a run with no event at all is the exact run, and under memcg
//! pressure its counters agree with exact mode's within the seeds' spread.

use serde_json::{json, Value};

use crate::common::*;

fn analytic(mut v: Value) -> Value {
    v["engine"] = json!({"accesses": "analytic"});
    v
}

fn with_writes(mut v: Value, percent: u8) -> Value {
    let last = v["processes"][0]["phases"].as_array().unwrap().len() - 1;
    v["processes"][0]["phases"][last]["phase"]["write_percent"] = json!(percent);
    v
}

/// Run `v` with every random phase drawn in bulk, however dense its events (the rule that
/// steps dense phases off: Simulation::set_analytic_dense), so that the draws themselves are
/// tested under heavy memcg pressure.
fn run_drawn(v: &Value) -> reclaimlab_core::SimResult {
    let mut s = build(v);
    s.set_analytic_dense(1.0);
    while !s.step(1 << 16) {}
    s.result()
}

fn zipf(mut v: Value, theta: f64) -> Value {
    let last = v["processes"][0]["phases"].as_array().unwrap().len() - 1;
    v["processes"][0]["phases"][last]["phase"]["dist"] = json!({"kind": "zipf", "theta": theta});
    v
}

fn rw(mut v: Value) -> Value {
    let last = v["processes"][0]["phases"].as_array().unwrap().len() - 1;
    v["processes"][0]["phases"][last]["phase"]["rw"] = json!(true);
    v
}

fn measure(r: &reclaimlab_core::SimResult) -> &reclaimlab_core::PhaseRecord {
    r.phases.iter().find(|p| p.phase == "measure").unwrap()
}

#[test]
fn unknown_mode_is_refused_with_the_values() {
    let mut v = scenario(&[("a", 64, "random")], 10, 1 << 20, false, false);
    v["engine"] = json!({"accesses": "fast"});
    let err = reclaimlab_core::simulation_from_json(&v.to_string())
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(msg.contains("engine.accesses"), "{msg}");
    assert!(
        msg.contains("`exact`") && msg.contains("`analytic`"),
        "{msg}"
    );
}

#[test]
fn fully_resident_phase_is_the_exact_run() {
    // Every access after the fill hits a dirty page: no event, so the analytic run draws the
    // whole phase in bulk and must end at the same time with the same counters.
    let v = with_writes(
        scenario(&[("a", 2048, "random")], 300_000, 1 << 20, false, false),
        30,
    );
    let e = analytic_is_the_exact_run(v, 300_000);
    assert_eq!(e.stats.analytic_accesses, None);
}

/// `v` run in exact and in analytic mode: both make `accesses` accesses and end at the same
/// nanosecond with the same counters, analytic mode having passed over all of them in bulk.
/// The exact run, for further checks.
fn analytic_is_the_exact_run(v: Value, accesses: u64) -> reclaimlab_core::SimResult {
    let (e, a) = (run(&v), run(&analytic(v)));
    assert_eq!(measure(&e).accesses, accesses);
    assert_eq!(measure(&a).accesses, accesses);
    assert_eq!(measure(&e).end_ns, measure(&a).end_ns);
    assert_eq!(e.counters, a.counters);
    assert_eq!(a.stats.analytic_accesses, Some(accesses));
    e
}

fn conserved_every_event(v: &Value) {
    conserved(v, true);
}

/// The bookkeeping holds after every event; `drawn`: every phase drawn in bulk (run_drawn),
/// else under the default rule (dense phases stepped, drawn again once sparse).
fn conserved(v: &Value, drawn: bool) {
    let mut s = build(v);
    if drawn {
        s.set_analytic_dense(1.0);
    }
    s.set_check_interval(1);
    while !s.step(1 << 14) {}
    let r = s.result();
    assert!(r.stats.analytic_accesses.unwrap() > 0);
    assert!(counter(&r, "vmstat.pgscan_anon") > 0);
}

#[test]
fn classes_follow_every_event_v1_zswap() {
    // Every page is counted in the class its PTE state says after every event (the check is
    // part of check_conservation), with reads and writes, swap-in and reclaim.
    let v = with_writes(
        scenario(&[("a", 3000, "text")], 60_000, 2000, true, false),
        30,
    );
    conserved_every_event(&analytic(v));
}

#[test]
fn classes_follow_every_event_mglru_swapfile() {
    let mut v = with_writes(
        scenario(&[("a", 3000, "text")], 60_000, 2000, false, false),
        50,
    );
    v["kernel"]["lru_gen"] = json!({"enabled": true});
    conserved_every_event(&analytic(v));
}

/// Mean and standard error of the mean.
fn mean_se(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, (var / n).sqrt())
}

/// Run `v` in both modes over `seeds` and require every figure's means to agree: within 4
/// standard errors of their difference plus 1 % of the exact mean (the analytic draws are
/// another random sequence, not the same one, so only the distributions can agree).
fn agree(v: &Value, seeds: u64, figures: &[&str]) {
    let figure = |r: &reclaimlab_core::SimResult, f: &str| -> f64 {
        let m = measure(r);
        match f {
            "phase_ms" => (m.end_ns - m.start_ns) as f64 / 1e6,
            "majflt_per_kaccess" => m.majflt as f64 * 1000.0 / m.accesses as f64,
            key => counter(r, key) as f64,
        }
    };
    let mut exact = vec![Vec::new(); figures.len()];
    let mut anal = vec![Vec::new(); figures.len()];
    for seed in 1..=seeds {
        let mut v = v.clone();
        v["seed"] = json!(seed);
        let e = run(&v);
        let a = run_drawn(&analytic(v));
        assert_eq!(measure(&e).accesses, measure(&a).accesses);
        assert!(a.stats.analytic_accesses.unwrap() > measure(&a).accesses / 2);
        for (k, f) in figures.iter().enumerate() {
            exact[k].push(figure(&e, f));
            anal[k].push(figure(&a, f));
        }
    }
    for (k, f) in figures.iter().enumerate() {
        let (me, se) = mean_se(&exact[k]);
        let (ma, sa) = mean_se(&anal[k]);
        let tol = 4.0 * (se * se + sa * sa).sqrt() + 0.01 * me.abs();
        eprintln!(
            "{f:<24} exact {me:>12.1} ± {se:<8.1} analytic {ma:>12.1} ± {sa:<8.1} tol {tol:.1}"
        );
        assert!(
            (ma - me).abs() <= tol,
            "{f}: analytic mean {ma:.1} vs exact {me:.1} (tolerance {tol:.1})"
        );
    }
}

const FIGURES: &[&str] = &[
    "vmstat.pgscan_anon",
    "vmstat.pgsteal_anon",
    "vmstat.pgmajfault",
    "majflt_per_kaccess",
    "phase_ms",
];

#[test]
fn agrees_with_exact_under_memcg_pressure_swapfile() {
    // 4000 pages in a 3200-page memcg: 20 % of the accesses fault; reads and writes.
    let v = with_writes(
        scenario(&[("a", 4000, "text")], 150_000, 3200, false, false),
        20,
    );
    let mut figs = FIGURES.to_vec();
    figs.push("vmstat.pswpin");
    figs.push("vmstat.pswpout");
    agree(&v, 8, &figs);
}

#[test]
fn agrees_with_exact_under_memcg_pressure_zswap() {
    let v = with_writes(
        scenario(&[("a", 4000, "text")], 150_000, 3200, true, false),
        20,
    );
    let mut figs = FIGURES.to_vec();
    figs.push("vmstat.zswpin");
    figs.push("vmstat.zswpout");
    agree(&v, 8, &figs);
}

#[test]
fn agrees_with_exact_mglru_v2_high() {
    let mut v = with_writes(
        scenario(&[("a", 4000, "text")], 150_000, 3200, true, true),
        20,
    );
    v["kernel"]["lru_gen"] = json!({"enabled": true});
    let mut figs = FIGURES.to_vec();
    figs.push("vmstat.zswpin");
    agree(&v, 8, &figs);
}

fn hot_cold(mut v: Value, hot_percent: u8, hot_access_percent: u8) -> Value {
    let last = v["processes"][0]["phases"].as_array().unwrap().len() - 1;
    v["processes"][0]["phases"][last]["phase"]["dist"] = json!({"kind": "hot_cold",
        "hot_percent": hot_percent, "hot_access_percent": hot_access_percent});
    v
}

#[test]
fn classes_follow_every_event_hot_cold_two_regions() {
    // Two regions, the hot range ending inside the first: the strata split its segments.
    let v = with_writes(
        scenario(
            &[("a", 2000, "text"), ("b", 1500, "text")],
            60_000,
            2600,
            true,
            false,
        ),
        30,
    );
    conserved_every_event(&analytic(hot_cold(v, 30, 80)));
}

#[test]
fn agrees_with_exact_hot_cold_zswap() {
    // 20 % of the pages get 80 % of the accesses; the cold rest does not fit.
    let v = with_writes(
        scenario(&[("a", 4000, "text")], 150_000, 2400, true, false),
        20,
    );
    let mut figs = FIGURES.to_vec();
    figs.push("vmstat.zswpin");
    figs.push("vmstat.zswpout");
    agree(&hot_cold(v, 20, 80), 8, &figs);
}

#[test]
fn classes_follow_every_event_zipf_two_regions() {
    // Zipf over two regions (the second's ranks start after the first's), reads and writes:
    // the weights' sums follow every class change (check_analytic).
    let v = with_writes(
        scenario(
            &[("a", 2000, "text"), ("b", 1500, "text")],
            60_000,
            2600,
            true,
            false,
        ),
        30,
    );
    conserved_every_event(&analytic(zipf(v, 0.99)));
}

#[test]
fn classes_follow_every_event_dense_then_sparse() {
    // Under the default rule: the first draw finds the phase's hot pages swapped out (the fill
    // pushed them out first) and steps; once the hot set is back in, a window's faults may be
    // few enough to draw again (classes counted anew from the flags), and so on.
    let v = with_writes(
        scenario(&[("a", 4000, "text")], 400_000, 3000, true, false),
        10,
    );
    conserved(&analytic(zipf(v, 1.2)), false);
}

#[test]
fn dense_phase_is_stepped_as_exact() {
    // 30 % of the pages are out after the fill: the first draw's event probability is over
    // DENSE_NOW, so the phase steps, and no window is ever sparse again (one access in four
    // faults): every access is stepped with the exact mode's own generator, so the run is
    // exact mode's: the same counters, to the nanosecond.
    let v = with_writes(
        scenario(&[("a", 4000, "text")], 150_000, 2800, true, false),
        20,
    );
    let (e, a) = (run(&v), run(&analytic(v)));
    assert_eq!(a.stats.analytic_accesses, Some(0));
    assert_eq!(measure(&e).end_ns, measure(&a).end_ns);
    assert_eq!(e.counters, a.counters);
}

#[test]
fn sparse_phase_is_drawn_in_bulk() {
    // 4000 pages in a 3990-page memcg, reads: 1.6 % of them fault, under one in 32: drawn.
    let v = scenario(&[("a", 4000, "text")], 150_000, 3990, true, false);
    let a = run(&analytic(v));
    assert!(a.stats.analytic_accesses.unwrap() > 100_000);
}

#[test]
fn agrees_with_exact_zipf_zswap() {
    // Zipf(0.99) over 4000 pages, 2400 in memory, 20 % stores: each page its own rate.
    let v = with_writes(
        scenario(&[("a", 4000, "text")], 150_000, 2400, true, false),
        20,
    );
    let mut figs = FIGURES.to_vec();
    figs.push("vmstat.zswpin");
    figs.push("vmstat.zswpout");
    agree(&zipf(v, 0.99), 8, &figs);
}

#[test]
fn agrees_with_exact_zipf_steep_mglru() {
    // theta 1.3: the head pages (probability above 1/64) get their own exact hazards.
    let mut v = with_writes(
        scenario(&[("a", 4000, "text")], 150_000, 1200, true, false),
        20,
    );
    v["kernel"]["lru_gen"] = json!({"enabled": true});
    let mut figs = FIGURES.to_vec();
    figs.push("vmstat.zswpin");
    agree(&zipf(v, 1.3), 8, &figs);
}

#[test]
fn agrees_with_exact_rw_swapfile() {
    // Read-modify-write stores (each a load, then a store: two accesses' time), 30 %.
    let v = with_writes(
        scenario(&[("a", 4000, "text")], 150_000, 3200, false, false),
        30,
    );
    let mut figs = FIGURES.to_vec();
    figs.push("vmstat.pswpin");
    figs.push("vmstat.pswpout");
    agree(&rw(v), 8, &figs);
}

#[test]
fn rw_fully_resident_phase_is_the_exact_run_in_distribution() {
    // No event after the fill: only the stores' count (binomial) is drawn, so the phase's
    // time is (accesses + stores) x access_ns, stores ~ Binomial(accesses, 0.3): within 5
    // standard deviations of exact mode's.
    let v = rw(with_writes(
        scenario(&[("a", 2048, "random")], 300_000, 1 << 20, false, false),
        30,
    ));
    let (e, a) = (run(&v), run(&analytic(v)));
    let (de, da) = (
        (measure(&e).end_ns - measure(&e).start_ns) as f64,
        (measure(&a).end_ns - measure(&a).start_ns) as f64,
    );
    let per = de / (300_000.0 * 1.3);
    let sd = (300_000.0f64 * 0.3 * 0.7).sqrt() * per;
    assert_eq!(a.stats.analytic_accesses, Some(300_000));
    assert!(
        (da - de).abs() < 5.0 * sd * std::f64::consts::SQRT_2,
        "{da} vs {de} (sd {sd})"
    );
    assert!(da != de, "the stores' count is drawn, not stepped");
}

/// `v` with its measured phase replaced by `passes` sequential passes over region 0.
fn sequential(mut v: Value, passes: u32, write_percent: u8) -> Value {
    let last = v["processes"][0]["phases"].as_array().unwrap().len() - 1;
    v["processes"][0]["phases"][last]["phase"] = json!({"kind": "sequential", "regions": [0],
        "passes": passes, "write_percent": write_percent});
    v
}

#[test]
fn sequential_resident_pass_is_the_exact_run() {
    // Every page passed is resident and dirty: no event, the passes go by in runs, their
    // young bits set as the stepped passes set them: the same run to the nanosecond.
    let v = sequential(
        scenario(&[("a", 3000, "text")], 1, 1 << 20, false, false),
        4,
        30,
    );
    analytic_is_the_exact_run(v, 12_000);
}

#[test]
fn classes_follow_every_event_sequential_rw() {
    let v = rw(sequential(
        scenario(
            &[("a", 3000, "text"), ("b", 1000, "text")],
            1,
            3800,
            true,
            false,
        ),
        6,
        20,
    ));
    conserved_every_event(&analytic(v));
}

#[test]
fn agrees_with_exact_sequential_zswap() {
    // Passes over 3000 of 4000 filled pages in a 3800-page memcg, 20 % stores: the pages
    // pushed out by the fill and the stores to pages read back (clean) are the events.
    let v = sequential(
        scenario(
            &[("a", 3000, "text"), ("b", 1000, "text")],
            1,
            3800,
            true,
            false,
        ),
        20,
        20,
    );
    let mut figs = FIGURES.to_vec();
    figs.push("vmstat.zswpin");
    figs.push("vmstat.zswpout");
    agree(&v, 8, &figs);
}
