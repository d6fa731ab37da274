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
    let (e, a) = (run(&v), run(&analytic(v)));
    assert_eq!(measure(&e).accesses, 300_000);
    assert_eq!(measure(&a).accesses, 300_000);
    assert_eq!(measure(&e).end_ns, measure(&a).end_ns);
    assert_eq!(e.counters, a.counters);
    assert_eq!(a.stats.analytic_accesses, Some(300_000));
    assert_eq!(e.stats.analytic_accesses, None);
}

fn conserved_every_event(v: &Value) {
    let mut s = build(v);
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
        let a = run(&analytic(v));
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
