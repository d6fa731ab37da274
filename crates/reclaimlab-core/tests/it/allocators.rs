//! zswap's allocator is selected by `kernel.zswap.zpool`, within what the kernel version has.

use reclaimlab_core::{ErrorKind, SimConfig, Simulation};
use serde_json::{json, Value};

use crate::common::*;

/// 6.12 (zbud still exists), text pages (~3:1), the pool limited to 1% of memory so that it
/// fills: 20000 pages through a cgroup of 5000.
fn filling_pool(zpool: &str) -> Value {
    let mut v = scenario(&[("a", 20_000, "text")], 20_000, 5_000, true, false);
    v["kernel"]["version"] = json!("6.12");
    v["kernel"]["zswap"]["max_pool_percent"] = json!(1);
    v["kernel"]["zswap"]["zpool"] = json!(zpool);
    v
}

#[test]
fn zbud_holds_two_objects_per_page_and_fills_sooner_than_zsmalloc() {
    let zbud = run(&filling_pool("zbud"));
    let zs = run(&filling_pool("zsmalloc"));
    let pool = |r| counter(r, "zswap.pool_total_size") / 4096;
    let stored = |r| counter(r, "zswap.stored_pages");
    assert!(stored(&zbud) > 1000 && stored(&zs) > 1000, "both pools in use");
    // zbud: at most two buddies per page; ~1.3 KiB text objects still take a half page each.
    assert!(2 * pool(&zbud) >= stored(&zbud), "zbud: {} pages for {} objects", pool(&zbud), stored(&zbud));
    // zsmalloc packs ~3 such objects per page: more pages per stored page with zbud.
    assert!(pool(&zbud) * stored(&zs) > pool(&zs) * stored(&zbud), "zbud pages/object above zsmalloc's");
    // Both pools reach the same page limit, so zbud stores fewer pages and writes more to disk.
    assert!(stored(&zbud) < stored(&zs), "zbud {} vs zsmalloc {}", stored(&zbud), stored(&zs));
    assert!(counter(&zbud, "vmstat.pswpout") > counter(&zs, "vmstat.pswpout"));
    // NR_ZSPAGES counts zsmalloc's pages only.
    assert_eq!(counter(&zbud, "vmstat.nr_zspages"), 0);
    assert!(counter(&zs, "vmstat.nr_zspages") > 0);
    assert!(sim_conserves(&filling_pool("zbud")));
}

fn sim_conserves(v: &Value) -> bool {
    let mut s = build(v);
    s.set_check_interval(512);
    s.run_to_end();
    s.check_conservation().is_ok()
}

fn error_of(v: Value) -> reclaimlab_core::ConfigError {
    let cfg: SimConfig = serde_json::from_value(v).expect("valid JSON shape");
    Simulation::new(&cfg).err().expect("rejected")
}

#[test]
fn unavailable_and_unknown_allocators_are_typed_errors_naming_the_key() {
    let mut v = filling_pool("zbud");
    v["kernel"]["version"] = json!("6.18");
    let e = error_of(v);
    assert_eq!((e.kind, e.path.as_str()), (ErrorKind::Unavailable, "kernel.zswap.zpool"));
    assert!(e.reason.contains("6.8, 6.10, 6.12"), "{e}");
    let e = error_of(filling_pool("z3fold"));
    assert_eq!(e.kind, ErrorKind::Unavailable);
    assert!(e.reason.contains("not modelled"), "{e}");
    let e = error_of(filling_pool("zsmallok"));
    assert_eq!((e.kind, e.path.as_str()), (ErrorKind::Unknown, "kernel.zswap.zpool"));
    let mut v = scenario(&[("a", 10, "text")], 1, 100, false, false);
    v["machine"]["swap"][0]["kind"] = json!("zram");
    v["machine"]["swap"][0]["allocator"] = json!("zbud");
    let e = error_of(v);
    assert_eq!((e.kind, e.path.as_str()), (ErrorKind::Unavailable, "machine.swap[0].allocator"));
}

#[test]
fn lowered_json_errors_carry_the_path() {
    let mut v = scenario(&[("a", 10, "text")], 1, 100, false, false);
    v["processes"][0]["regions"][0]["pages"] = json!("many");
    let e = reclaimlab_core::simulation_from_json(&v.to_string()).err().expect("rejected");
    assert_eq!((e.kind, e.path.as_str()), (ErrorKind::Parse, "processes[0].regions[0].pages"));
    let mut v = scenario(&[("a", 10, "text")], 1, 100, false, false);
    v["processes"][0]["regions"][0]["variants"] = json!(0);
    let e = reclaimlab_core::simulation_from_json(&v.to_string()).err().expect("rejected");
    assert_eq!(e.to_string(), "processes[0].regions[0].variants: must be > 0");
}
