//! Page tables (pte_alloc): one page per 2 MiB of each region touched, charged to the memcg.

use crate::common::{counter, run, scenario};

#[test]
fn page_tables_are_counted_and_charged() {
    // 1000 pages -> 2 tables, 1025 pages -> 3 tables (each region is its own 2 MiB-aligned VMA).
    let r = run(&scenario(
        &[("a", 1000, "text"), ("b", 1025, "text")],
        100,
        1 << 20,
        false,
        false,
    ));
    assert_eq!(counter(&r, "vmstat.nr_page_table_pages"), 5);
    assert_eq!(counter(&r, "meminfo.PageTables"), 5 * 4);
    let usage = counter(&r, "memcg[/t].memory.usage_in_bytes") / 4096;
    let rss = counter(&r, "memcg[/t].memory.stat.rss") / 4096;
    assert_eq!(rss, 2025);
    // usage = folios + page tables + the charge stock (< MEMCG_CHARGE_BATCH)
    assert!(
        usage >= rss + 5 && usage < rss + 5 + 64,
        "usage {usage}, rss {rss}"
    );
    // never folios: no pgpgin for them
    assert_eq!(counter(&r, "memcg[/t].memory.stat.pgpgin"), 2025);
}

#[test]
fn page_tables_make_a_memcg_reach_its_limit_earlier() {
    // 2025 pages under a 2025-page limit: only the page tables (and the charge batch) overflow it.
    let r = run(&scenario(
        &[("a", 1000, "text"), ("b", 1025, "text")],
        0,
        2025,
        false,
        false,
    ));
    assert!(counter(&r, "memcg[/t].memory.stat.pgpgout") >= 5);
    let roomy = run(&scenario(
        &[("a", 1000, "text"), ("b", 1025, "text")],
        0,
        2025 + 5 + 64,
        false,
        false,
    ));
    assert_eq!(counter(&roomy, "memcg[/t].memory.stat.pgpgout"), 0);
}
