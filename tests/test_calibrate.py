"""Machine profiles (reclaimlab.profile) and the arithmetic of `reclaimlab calibrate`
(reclaimlab.calibrate): parsing, the order in which profile and scenario costs apply,
errors that name the file and key, the least-squares fit, the codec weighting, the device
model, the TOML writer. No root, no kernel runs."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from conftest import MINIMAL
from reclaimlab import calibrate as cal
from reclaimlab import load
from reclaimlab.lower import lower
from reclaimlab.profile import (
    PROFILE_ENV,
    Profile,
    ProfileError,
    active_profile,
    default_profile_path,
    parse_profile,
    profile_path,
)
from reclaimlab.scenario import DEVICE_PRESETS, DeviceModel
from reclaimlab.units import parse_bandwidth, parse_duration

PROFILE = """\
# a test profile
schema_version = 1
kind = "test-vm"

[costs]
access_ns = 50
fault_ns = 600

[devices.virtio-disk]
rotational = true
read_latency = "60.5us"
write_latency = "45us"
read_bandwidth = "900MB/s"
write_bandwidth = "2GB/s"

[measurements]
anything = { goes = 1 }
"""

VIRTIO = MINIMAL.replace('device = "ssd"', 'device = "virtio-disk"')


def one_problem(text: str, file: str = "p.toml") -> str:
    with pytest.raises(ProfileError) as e:
        parse_profile(text, file)
    assert len(e.value.problems) == 1, str(e.value)
    return str(e.value)


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------


def test_parse_profile() -> None:
    p = parse_profile(PROFILE, "p.toml")
    assert p.file == "p.toml"
    assert p.kind == "test-vm"
    assert p.costs == {"access_ns": 50, "fault_ns": 600}
    assert p.devices == {"virtio-disk": DeviceModel(True, 60_500, 45_000, 900_000_000, 2_000_000_000)}
    assert p.measurements == {"anything": {"goes": 1}}


def test_a_partial_device_table_keeps_the_builtin_figures() -> None:
    p = parse_profile('[devices.ssd]\nread_latency = "70us"\n')
    base = DEVICE_PRESETS["ssd"]
    assert p.devices["ssd"] == DeviceModel(base.rotational, 70_000, base.write_latency_ns, base.read_bytes_per_s, base.write_bytes_per_s)


def test_empty_profile_is_valid() -> None:
    assert parse_profile("") == Profile(file="<profile>", sha256=hashlib.sha256(b"").hexdigest())


def test_unknown_cost_name_names_file_and_key() -> None:
    msg = one_problem("[costs]\nacess_ns = 5\n", "profiles/x.toml")
    assert msg.startswith("profiles/x.toml: costs.acess_ns: unknown time-model parameter (did you mean 'access_ns'?); expected one of: ")
    assert "swapin_page_ns" in msg


def test_bad_values_name_file_and_key() -> None:
    assert one_problem("[costs]\naccess_ns = -1\n") == "p.toml: costs.access_ns: expected an integer >= 0 (ns); got -1"
    assert one_problem('[costs]\naccess_ns = "1us"\n') == "p.toml: costs.access_ns: expected an integer >= 0 (ns); got '1us'"
    assert one_problem("[costs]\naccess_ns = true\n") == "p.toml: costs.access_ns: expected an integer >= 0 (ns); got true"
    assert one_problem("[costs]\nprocess_quantum_ns = 0\n") == "p.toml: costs.process_quantum_ns: expected an integer > 0 (ns); got 0"
    assert one_problem("schema_version = 2\n") == "p.toml: schema_version: expected 1; got 2"
    assert one_problem("cost = {}\n").startswith(
        "p.toml: cost: unknown key (did you mean 'costs'?); expected one of: schema_version, kind,"
    )
    assert one_problem("costs = 3\n") == "p.toml: costs: expected a table; got 3"
    assert one_problem("[costs\n").startswith("p.toml: invalid TOML:")


def test_bad_devices_name_file_and_key() -> None:
    assert one_problem("[devices.sdd]\nrotational = false\n").startswith(
        "p.toml: devices.sdd: not a device preset (did you mean 'ssd'?); expected one of: cloud-disk, hdd, lab-loop, nvme, ssd, virtio-disk"
    )
    assert one_problem('[devices.ssd]\nread_latency = "fast"\n').startswith("p.toml: devices.ssd.read_latency: expected a duration")
    assert one_problem("[devices.ssd]\nrotational = 1\n") == "p.toml: devices.ssd.rotational: expected true or false; got 1"
    assert one_problem('[devices.ssd]\nlatency = "1us"\n').startswith("p.toml: devices.ssd.latency: unknown key (did you mean")


def test_every_problem_is_reported() -> None:
    with pytest.raises(ProfileError) as e:
        parse_profile("[costs]\nfoo_ns = 1\nbar_ns = 2\n[devices.floppy]\n", "p.toml")
    assert [p.path for p in e.value.problems] == [("costs", "foo_ns"), ("costs", "bar_ns"), ("devices", "floppy")]


# ---------------------------------------------------------------------------------------------
# Application: profile < scenario [costs]; profile devices replace presets
# ---------------------------------------------------------------------------------------------


def test_profile_costs_are_defaults_and_scenario_costs_override_them() -> None:
    prof = parse_profile(PROFILE)
    assert lower(load(MINIMAL), profile=prof)["costs"] == {"access_ns": 50, "fault_ns": 600}
    s = load(MINIMAL + "[costs]\naccess_ns = 200\n")
    assert lower(s, profile=prof)["costs"] == {"access_ns": 200, "fault_ns": 600}
    assert lower(s, profile=None)["costs"] == {"access_ns": 200}


def test_profile_devices_replace_presets_but_not_scenario_figures() -> None:
    prof = parse_profile(PROFILE)
    dev = lower(load(VIRTIO), profile=prof)["machine"]["swap"][0]["device"]
    assert dev == {
        "rotational": True,
        "read_latency_ns": 60_500,
        "write_latency_ns": 45_000,
        "read_bytes_per_s": 900_000_000,
        "write_bytes_per_s": 2_000_000_000,
    }
    table = MINIMAL.replace('device = "ssd"', 'device = { preset = "virtio-disk", read_latency = "1ms" }')
    dev = lower(load(table), profile=prof)["machine"]["swap"][0]["device"]
    assert (dev["read_latency_ns"], dev["write_latency_ns"]) == (1_000_000, 45_000)
    # Other presets, and the built-in table without a profile, are untouched.
    ssd = DEVICE_PRESETS["ssd"]
    assert lower(load(MINIMAL), profile=prof)["machine"]["swap"][0]["device"]["read_latency_ns"] == ssd.read_latency_ns
    assert (
        lower(load(VIRTIO), profile=None)["machine"]["swap"][0]["device"]["read_latency_ns"]
        == DEVICE_PRESETS["virtio-disk"].read_latency_ns
    )


def test_environment_chooses_the_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text(PROFILE.replace("access_ns = 50", "access_ns = 77"), encoding="utf-8")
    monkeypatch.setenv(PROFILE_ENV, str(f))
    assert profile_path() == f
    prof = active_profile()
    assert prof is not None and prof.costs["access_ns"] == 77 and prof.file == str(f)
    assert lower(load(MINIMAL))["costs"]["access_ns"] == 77
    # Edited: read again.
    f.write_text(PROFILE.replace("access_ns = 50", "access_ns = 78 "), encoding="utf-8")
    assert lower(load(MINIMAL))["costs"]["access_ns"] == 78

    monkeypatch.setenv(PROFILE_ENV, "none")
    assert profile_path() is None and active_profile() is None
    assert lower(load(MINIMAL))["costs"] == {}

    monkeypatch.setenv(PROFILE_ENV, str(tmp_path / "missing.toml"))
    with pytest.raises(ProfileError, match=r"missing\.toml: cannot read the machine profile"):
        lower(load(MINIMAL))

    bad = tmp_path / "bad.toml"
    bad.write_text("[costs]\nnope_ns = 1\n", encoding="utf-8")
    monkeypatch.setenv(PROFILE_ENV, str(bad))
    with pytest.raises(ProfileError, match=r"bad\.toml: costs\.nope_ns: unknown time-model parameter"):
        lower(load(MINIMAL))

    monkeypatch.setenv(PROFILE_ENV, "")  # empty: as if unset, the packaged default profile
    assert profile_path() == default_profile_path() and default_profile_path().is_file()


# ---------------------------------------------------------------------------------------------
# The bundled profile and the list of cost names
# ---------------------------------------------------------------------------------------------


def test_bundled_default_profile_parses() -> None:
    p = parse_profile(default_profile_path().read_text(encoding="utf-8"), str(default_profile_path()))
    assert p.kind == "polyglot-vm"
    measured = {
        "access_ns",
        "fault_ns",
        "page_alloc_zero_ns",
        "swapin_page_ns",
        "reclaim_page_ns",
        "swap_write_end_ns",
        "zswap_entry_ns",
        "shrink_node_ns",  # calibrate 1c
        "swap_ra_page_ns",  # calibrate 3b (--only-readahead, 2026-11-24)
        "scan_page_ns",  # calibrate 3a (--refit-lab, 2026-11-24 23:32)
        # calibrate 3c (--only-write, 2026-11-25 01:33)
        "pagecache_add_ns",
        "shmem_write_page_ns",
        "write_page_ns",
        "folio_account_dirtied_ns",
        "write_begin_folio_ns",
        "reclaim_file_folio_ns",
        "page_reported_touch_ns",  # calibrate 3d (--refit-lab, 2026-11-25 04:01)
    }
    measured |= {
        f"{c}_{w}{k}_ns"
        for c in ("lzo", "lzo_rle", "lz4", "zstd", "deflate")
        for w in ("compress", "decompress")
        for k in cal.KIND_SUFFIX.values()
    }
    assert set(p.costs) == measured
    assert set(p.devices) == {"virtio-disk", "lab-loop"}
    disk = p.devices["virtio-disk"]
    assert disk.iops and disk.max_sectors_kb and disk.nr_requests  # measured since 2026-11-24
    loop = p.devices["lab-loop"]
    assert loop.flush_ns and loop.max_sectors_kb and loop.read_ahead_kb  # measured since 2026-11-24 22:45
    assert {"codecs", "kernel_codecs", "reclaim_pass", "device", "loop_device", "lab", "host", "speed_probe_ns"} <= set(p.measurements)
    assert {"readahead", "readahead_pc0"} <= set(p.measurements["lab"])  # the runs swap_ra_page_ns was fitted on
    assert "page_reporting" in p.measurements["lab"]  # the THP runs page_reported_touch_ns was fitted on
    assert "scan" in p.measurements["lab"]  # the runs scan_page_ns was fitted on
    assert set(cal.WRITE_STAGES) <= set(p.measurements["lab"])  # the runs of the write figures
    assert all("fs_device" in p.measurements["lab"][n] for n in ("write_ext4", "write_reclaim"))


# ---------------------------------------------------------------------------------------------
# The fit
# ---------------------------------------------------------------------------------------------

BASE = {"a_ns": 100, "b_ns": 1000, "c_ns": 50}


def synthetic(truth: dict[str, int], slopes: dict[str, dict[str, float]], noise: dict[str, float] | None = None) -> list[cal.Observation]:
    """Observations whose kernel time is the simulator's at ``truth`` (times 1 + noise)."""
    out = []
    for name, s in slopes.items():
        sim = 1e6 + sum(v * BASE[p] for p, v in s.items())  # some uncharged time, plus the charges
        kernel = sim + sum(v * (truth[p] - BASE[p]) for p, v in s.items())
        out.append(cal.Observation(name, kernel * (1 + (noise or {}).get(name, 0.0)), sim, s))
    return out


def test_fit_recovers_exact_parameters() -> None:
    slopes = {"fill": {"a_ns": 8000, "b_ns": 0}, "access": {"a_ns": 30000, "b_ns": 30000}}
    obs = synthetic({"a_ns": 9000, "b_ns": 6000, "c_ns": 50}, slopes)
    fit = cal.fit_costs(obs, BASE, ["a_ns", "b_ns"])
    assert fit.params == {"a_ns": 9000, "b_ns": 6000}
    assert all(abs(r) < 1e-9 for r in fit.residuals.values())
    assert fit.floored == [] and fit.unidentified == []


def test_fit_is_least_squares_in_relative_error() -> None:
    slopes = {"p1": {"a_ns": 1000}, "p2": {"a_ns": 2000}, "p3": {"a_ns": 4000}}
    obs = synthetic({"a_ns": 500, "b_ns": 1000, "c_ns": 50}, slopes, noise={"p1": 0.02, "p2": -0.02, "p3": 0.0})
    fit = cal.fit_costs(obs, BASE, ["a_ns"])
    assert abs(fit.params["a_ns"] - 500) < 25
    assert set(fit.residuals) == {"p1", "p2", "p3"}
    assert max(abs(r) for r in fit.residuals.values()) < 0.03


def test_runs_of_a_phase_with_a_common_scale_are_averaged() -> None:
    # Three runs of one phase, 1000 accesses each: 50, 100 and 150 ns per access. With the
    # phase's mean as the common scale the fit is their mean; with each run's own time as its
    # scale, the fast run would count most.
    obs = [cal.Observation(f"access#{i}", 1000.0 * t, 1000.0 * 100, {"a_ns": 1000.0}, 1000.0 * 100) for i, t in enumerate((50, 100, 150))]
    assert cal.fit_costs(obs, BASE, ["a_ns"]).params == {"a_ns": 100}
    own = [cal.Observation(o.name, o.kernel_ns, o.sim_ns, o.slopes) for o in obs]
    assert cal.fit_costs(own, BASE, ["a_ns"]).params["a_ns"] < 80


def test_fit_holds_negative_parameters_at_the_floor_and_refits_the_rest() -> None:
    # The truth would need b_ns < 0: b is held at 0 and a absorbs what it can.
    slopes = {"fill": {"a_ns": 1000, "b_ns": 0}, "access": {"a_ns": 1000, "b_ns": 1000}}
    obs = synthetic({"a_ns": 3000, "b_ns": -500, "c_ns": 50}, slopes)
    fit = cal.fit_costs(obs, BASE, ["a_ns", "b_ns"])
    assert fit.floored == ["b_ns"]
    assert fit.params["b_ns"] == 0
    assert 2000 < fit.params["a_ns"] < 3000


def test_fit_keeps_parameters_nothing_charges() -> None:
    obs = synthetic({"a_ns": 700, "b_ns": 1000, "c_ns": 50}, {"x": {"a_ns": 100, "c_ns": 0}})
    fit = cal.fit_costs(obs, BASE, ["a_ns", "c_ns"])
    assert fit.params == {"a_ns": 700, "c_ns": 50}
    assert fit.unidentified == ["c_ns"]


def test_fit_needs_kernel_time() -> None:
    with pytest.raises(ValueError, match="no observation"):
        cal.fit_costs([cal.Observation("x", 0.0, 1.0, {"a_ns": 1.0})], BASE, ["a_ns"])


# ---------------------------------------------------------------------------------------------
# Codecs, device, formatting, scenarios, TOML
# ---------------------------------------------------------------------------------------------


def test_codec_figures_are_per_kind_of_byte() -> None:
    # Linear in the random share: run 1600, random 800 (compress); run 150, random 70 (decompress).
    table = {
        "lzo": {
            "text": {"compress_ns": 3000.0, "decompress_ns": 1500.0},
            "mix1024": {"compress_ns": 1400.0, "decompress_ns": 130.0},
            "random": {"compress_ns": 800.0, "decompress_ns": 5.0},  # stored as-is: never decompressed
            "zero": {"compress_ns": 1600.0, "decompress_ns": 150.0},  # our codec on a zero page: mix0
        },
        "zstd": {"text": {"compress_ns": 9000.0, "decompress_ns": 3000.0}},
    }
    assert cal.codec_costs(table) == {
        "lzo_compress_ns": 3000,
        "lzo_compress_random_ns": 800,
        "lzo_compress_run_ns": 1600,
        "lzo_decompress_ns": 1500,
        "lzo_decompress_random_ns": 70,
        "lzo_decompress_run_ns": 150,
        "zstd_compress_ns": 9000,
        "zstd_decompress_ns": 3000,
    }
    # Every figure name is one the core declares.
    assert set(cal.codec_costs(table)) <= set(cal.cost_names())


def test_kernel_codec_figures_take_the_measured_composition() -> None:
    report = {
        "classes": {"lz4": {"text": {"compress_ns": 5000.0, "decompress_ns": 1400.0}}},
        "composition": {"lz4": {"compress": {"random": 1200, "run": 600}, "decompress": {"random": 600, "run": 700}}},
    }
    assert cal.kernel_codec_costs(report) == {
        "lz4_compress_ns": 5000,
        "lz4_compress_random_ns": 1200,
        "lz4_compress_run_ns": 600,
        "lz4_decompress_ns": 1400,
        "lz4_decompress_random_ns": 600,
        "lz4_decompress_run_ns": 700,
    }


def test_device_model_splits_the_4k_time_into_latency_and_transfer() -> None:
    raw = {
        "rotational": True,
        "seq_read_bytes_per_s": 1_024_000_000,  # 4000 ns per page
        "seq_write_bytes_per_s": 2_048_000_000,  # 2000 ns per page
        "rand_read_4k_mean_ns": 64_000,
        "rand_write_4k_mean_ns": 1_000,  # faster than one transfer: latency 0
        "rand_read_4k_median_ns": 50_000,  # not used: the mean is (a sum of IOs)
    }
    assert cal.device_model(raw) == {
        "rotational": True,
        "read_latency_ns": 60_000,
        "write_latency_ns": 0,
        "read_bytes_per_s": 1_024_000_000,
        "write_bytes_per_s": 2_048_000_000,
    }
    with pytest.raises(ValueError, match="seq_read_bytes_per_s"):
        cal.device_model({**raw, "seq_read_bytes_per_s": 0})


def test_device_model_takes_the_request_rate_at_depth_and_the_queue_figures() -> None:
    raw = {
        "rotational": True,
        "seq_read_bytes_per_s": 1_024_000_000,  # 4000 ns per page
        "seq_write_bytes_per_s": 2_048_000_000,
        "rand_read_4k_mean_ns": 64_000,
        "rand_write_4k_mean_ns": 50_000,
        "rand_write_4k_qd_ios_per_s": 50_000,  # 20 us per request: more than a transfer
        "max_sectors_kb": 4096,
        "nr_requests": 256,
    }
    # Idle completion = latency + max(transfer, 1/iops) = the measured mean.
    assert cal.device_model(raw) == {
        "rotational": True,
        "iops": 50_000,
        "max_sectors_kb": 4096,
        "nr_requests": 256,
        "read_latency_ns": 44_000,
        "write_latency_ns": 30_000,
        "read_bytes_per_s": 1_024_000_000,
        "write_bytes_per_s": 2_048_000_000,
    }
    # The queue's read_ahead_kb is taken as it is, 0 (no readahead) included.
    assert cal.device_model({**raw, "read_ahead_kb": 4096})["read_ahead_kb"] == 4096
    assert cal.device_model({**raw, "read_ahead_kb": 0})["read_ahead_kb"] == 0


@pytest.mark.parametrize(
    ("ns", "text"), [(0, "0ns"), (40, "0ns"), (60, "0.1us"), (62_549, "62.5us"), (80_000, "80us"), (1_234_567, "1234.6us")]
)
def test_format_duration_round_trips(ns: int, text: str) -> None:
    assert cal.format_duration(ns) == text
    assert abs(parse_duration(text) - ns) <= 50


def test_format_bandwidth_round_trips() -> None:
    assert cal.format_bandwidth(824_123_456) == "824MB/s"
    assert parse_bandwidth(cal.format_bandwidth(2_342_600_000)) == 2_343_000_000
    assert cal.format_bandwidth(10) == "1MB/s"


def test_kernel_preset_picks_the_newest_not_newer_than_the_host() -> None:
    versions = ["6.8", "6.10", "6.12", "6.18"]
    assert cal.kernel_preset("6.18.44-fc-v657", versions) == "6.18"
    assert cal.kernel_preset("6.11.0", versions) == "6.10"
    assert cal.kernel_preset("7.2.1", versions) == "6.18"
    assert cal.kernel_preset("5.15.0", versions) == "6.8"


@pytest.mark.parametrize("cgv", [1, 2])
def test_lab_scenarios_load_and_lower(cgv: int) -> None:
    nop = lower(load(cal.nopressure_scenario("6.18", cgv)), profile=None)
    assert [ph["name"] for ph in nop["processes"][0]["phases"]] == ["fill", "touch", "access"]
    assert nop["machine"]["swap"] == [] and not nop["kernel"]["zswap"]["enabled"]
    pres = lower(load(cal.pressure_scenario("6.18", cgv)), profile=None)
    assert pres["kernel"]["zswap"]["enabled"] and pres["cgroups"]["version"] == cgv
    group = pres["cgroups"]["groups"][1]
    assert group["path"] == f"/{cal.PRESSURE_GROUP}" and group["limit_bytes"] == 48 << 20
    assert [r["pages"] for r in pres["processes"][0]["regions"]] == [(32 << 20) // 4096, (96 << 20) // 4096]
    assert [ph["name"] for ph in pres["processes"][0]["phases"]] == ["fill-free", "fill", "access"]
    zram = lower(load(cal.pressure_scenario("6.18", cgv, compressor="lz4", zram=True)), profile=None)
    assert not zram["kernel"]["zswap"]["enabled"]
    assert [(sw["kind"], sw["comp_algorithm"]) for sw in zram["machine"]["swap"]] == [("zram", "lz4")]
    assert zram["processes"] == pres["processes"]


@pytest.mark.parametrize("cgv", [1, 2])
def test_readahead_scenarios_are_the_zswap_run_with_a_sequential_read_back(cgv: int) -> None:
    pres = lower(load(cal.pressure_scenario("6.18", cgv)), profile=None)
    for cluster, name in ((3, "calibrate-readahead"), (0, "calibrate-readahead-pc0")):
        sc = load(cal.readahead_scenario("6.18", cgv, cluster))
        ra = lower(sc, profile=None)
        assert sc.name == name and ra["kernel"]["vm"]["page_cluster"] == cluster
        assert ra["kernel"]["zswap"] == pres["kernel"]["zswap"] and ra["cgroups"] == pres["cgroups"]
        assert ra["processes"][0]["regions"] == pres["processes"][0]["regions"]
        phases = ra["processes"][0]["phases"]
        assert [ph["name"] for ph in phases] == ["fill-free", "fill", "readback"]
        assert phases[:2] == pres["processes"][0]["phases"][:2]
        assert phases[2]["phase"]["kind"] == "sequential" and phases[2]["phase"]["write_percent"] == 0


@pytest.mark.parametrize("cgv", [1, 2])
def test_write_stage_phases_tell_the_write_path_figures_apart(real_core: Any, cgv: int) -> None:
    # Each write figure is fitted from phases that charge it in different combinations: the
    # fit is exact only if the simulator charges them as the stage's docstring says (per page,
    # 32768 pages a 128 MiB pass), and the ext4 stage's fsync pass stays out of the fit.
    costs = {k: int(v) for k, v in real_core.default_costs().items()}
    per = 32768.0
    tmpfs = lower(load(cal.write_scenario("6.18", cgv, "tmpfs")), profile=None)
    assert [fs["fstype"] for fs in tmpfs["machine"]["filesystems"]] == ["tmpfs"]
    _, sl, _, _ = cal.sim_slopes(real_core, tmpfs, costs, list(cal.WRITE_TMPFS_PARAMS))
    assert sl["p/write"] == {"pagecache_add_ns": per, "shmem_write_page_ns": per}
    assert sl["p/rewrite"] == {"pagecache_add_ns": 0.0, "shmem_write_page_ns": per}
    ext4 = lower(load(cal.write_scenario("6.18", cgv, "ext4")), profile=None)
    assert ext4["machine"]["filesystems"][0]["fstype"] == "ext4" and ext4["cgroups"]["groups"][1]["limit_bytes"] == 1 << 30
    params = ["write_page_ns", "folio_account_dirtied_ns", "write_begin_folio_ns"]
    _, sl, counters, _ = cal.sim_slopes(real_core, ext4, costs, params)
    w, a, b = params
    assert sl["p/write"] == {w: per, a: per, b: per}
    assert sl["p/rewrite"] == {w: per, a: 0.0, b: 0.0}
    assert sl["p/redirty"] == {w: per, a: per, b: 0.0}
    assert cal.WRITE_EXT4_PARAMS == (w, a) and cal.WRITE_UNFITTED["ext4"] == ("p/write", "p/flush")
    # v1: the fsync wrote b, nothing else was written. v2: the 1 GiB memcg is a dirty domain
    # of its own (cgroup writeback, mm/cgwb.rs), whose background threshold (a tenth of its
    # file pages and headroom, about 26k pages) the 32768 dirty pages of a pass cross: its
    # flusher writes a as well, as the kernel's would.
    assert counters["vmstat.nr_written"] == (32768 if cgv == 1 else 65536)
    rec = lower(load(cal.write_scenario("6.18", cgv, "reclaim")), profile=None)
    assert rec["cgroups"]["groups"][1]["limit_bytes"] == 128 << 20
    _, sl, counters, _ = cal.sim_slopes(real_core, rec, costs, list(cal.WRITE_RECLAIM_PARAMS))
    # The write into frames freed from the read's large folios: a new folio per page (within
    # 0.1%), and the reclaim of large folios, one share per page of each (whole large folios
    # are reclaimed at once, so about one folio's figure per 32 pages); the stream: one order-0
    # folio reclaimed per page written, 60 times as much per page. On v2 the 128 MiB memcg's
    # own dirty domain (cgroup writeback, mm/cgwb.rs) throttles the writer: its sleeps absorb
    # part of a CPU cost's change, so the slope is within 5% there, not 0.1%.
    assert sl["p/write"]["write_begin_folio_ns"] == pytest.approx(per, rel=1e-3 if cgv == 1 else 0.05)
    assert sl["p/write"]["reclaim_file_folio_ns"] < per / 20
    assert sl["p/stream"]["write_begin_folio_ns"] == pytest.approx(2 * per, rel=0.05)
    assert sl["p/stream"]["reclaim_file_folio_ns"] == pytest.approx(2 * per, rel=0.05)
    with pytest.raises(ValueError, match="unknown stage"):
        cal.write_scenario("6.18", cgv, "xfs")


@pytest.mark.parametrize("cgv", [1, 2])
def test_scan_scenario_has_a_first_reclaim_over_referenced_pages(real_core: Any, cgv: int) -> None:
    # The fit needs the two pressure fills to scan in very different ratios to the pages they
    # free: the first reclaim meets pages referenced once since their fault (rotated, not
    # freed), the next fill scans one page per page freed.
    sc = load(cal.scan_scenario("6.18", cgv))
    cfg = lower(sc, profile=None)
    assert sc.name == "calibrate-scan" and cfg["cgroups"]["groups"][1]["limit_bytes"] == 48 << 20
    assert [(sw["kind"], sw["comp_algorithm"]) for sw in cfg["machine"]["swap"]] == [("zram", "lzo")]
    assert [ph["name"] for ph in cfg["processes"][0]["phases"]] == ["fill-free", "fill-first", "fill"]
    costs = {k: int(v) for k, v in real_core.default_costs().items()}
    _, slopes, _, _ = cal.sim_slopes(real_core, cfg, costs, ["scan_page_ns", "reclaim_page_ns"])
    free, first, rest = slopes["p/fill-free"], slopes["p/fill-first"], slopes["p/fill"]
    assert free["scan_page_ns"] == 0 and free["reclaim_page_ns"] == 0
    assert first["scan_page_ns"] > 8 * first["reclaim_page_ns"] > 0
    assert rest["scan_page_ns"] == pytest.approx(rest["reclaim_page_ns"], rel=0.02) and rest["reclaim_page_ns"] > 7000


@pytest.mark.parametrize("cgv", [1, 2])
def test_page_reporting_scenario_charges_the_first_touch_of_reported_thps(real_core: Any, cgv: int) -> None:
    # Stage 3d: a's THP fill meets memory free since the start (reported), b's the blocks a
    # just freed (backed): only the first pays page_reported_touch_ns, one per page.
    sc = load(cal.page_reporting_scenario("6.18", cgv).replace('page_reporting_order = "host"', "page_reporting_order = 9"))
    cfg = lower(sc, profile=None)
    assert sc.name == "calibrate-page-reporting" and cfg["machine"]["page_reporting_order"] == 9
    assert [[ph["name"] for ph in p["phases"]] for p in cfg["processes"]] == [["settle", "fill-reported", "gone"], ["wait", "fill-backed"]]
    costs = {k: int(v) for k, v in real_core.default_costs().items()}
    _, slopes, _, _ = cal.sim_slopes(real_core, cfg, costs, ["page_reported_touch_ns", "page_alloc_zero_ns"])
    assert slopes["a/fill-reported"] == {"page_reported_touch_ns": 65536.0, "page_alloc_zero_ns": 65536.0}
    assert slopes["b/fill-backed"] == {"page_reported_touch_ns": 0.0, "page_alloc_zero_ns": 65536.0}
    assert cal.PAGE_REPORTING_UNFITTED == ("b/fill-backed",)


def test_refit_lab_reproduces_the_profile_from_its_own_records(real_core: Any, tmp_path: Path) -> None:
    # The bundled profile's lab figures came from its recorded runs: fitted again on them, with
    # the profile's own codec, device and reclaim-pass figures, they come out the same; and the
    # profile written back parses, with every stage's record kept.
    src = default_profile_path()
    out = tmp_path / "p.toml"
    out.write_text(src.read_text())
    text, summary = cal.refit_lab(cal.Options(output=out, refit_lab=True), lambda _m: None)
    before = parse_profile(src.read_text(), "a.toml")
    after = parse_profile(text, "b.toml")
    for k in ("access_ns", "fault_ns", "page_alloc_zero_ns", "scan_page_ns", "reclaim_page_ns", "swapin_page_ns", "zswap_entry_ns"):
        assert summary["costs"][k] == pytest.approx(before.costs[k], abs=2), k
    assert after.costs == {**before.costs, **summary["costs"]}
    assert set(after.measurements["lab"]) == set(before.measurements["lab"])
    assert text.count("# Added by: ") == 1 and text.count("[measurements.lab]\n") == 1


def test_refit_lab_needs_recorded_stages(tmp_path: Path) -> None:
    out = tmp_path / "p.toml"
    out.write_text('schema_version = 1\nkind = "x"\n[costs]\nfault_ns = 1\n')
    with pytest.raises(cal.LabError, match=r"measurements\.lab\.nopressure"):
        cal.refit_lab(cal.Options(output=out, refit_lab=True), lambda _m: None)


def test_add_to_profile_sets_one_cost_and_replaces_the_stages_records(real_core: Any) -> None:
    text = cal.render_profile(
        "x-vm",
        {"fault_ns": 600, "zswap_entry_ns": 9},
        {},
        {"date": "d", "lab": {"zswap": {"values": cal.Inline(a=1)}, "readahead": {"old": 1, "phases": {"x": cal.Inline(b=2)}}}},
        header=["Not measured (the built-in defaults apply):", "  access_ns, swap_ra_page_ns, zswap_copy_ns."],
        cost_notes={"fault_ns": "lab"},
    )
    records = {"readahead": {"new": 2, "phases": {"p/readback": cal.Inline(k=3)}}, "readahead_pc0": {"new": 4}}
    out = cal.add_to_profile(text, "swap_ra_page_ns", 443, "fit", records, "reclaimlab calibrate --only-readahead")
    again = cal.add_to_profile(out, "swap_ra_page_ns", 450, "fit", records, "reclaimlab calibrate --only-readahead")
    p = parse_profile(again, "x.toml")
    assert p.costs == {"fault_ns": 600, "swap_ra_page_ns": 450, "zswap_entry_ns": 9}
    order = [k for k in cal.cost_names() if k in p.costs]
    assert re.findall(r"^(\w+_ns) =", again, re.M) == order  # inserted in the native core's order
    lab = p.measurements["lab"]
    assert lab["zswap"] == {"values": {"a": 1}} and lab["readahead"] == {"new": 2, "phases": {"p/readback": {"k": 3}}}
    assert lab["readahead_pc0"] == {"new": 4}
    assert "#   access_ns, zswap_copy_ns." in again and again.count("# Added by: ") == 1
    # A name that ends a wrapped line of the list ("...,") goes too.
    wrapped = text.replace("#   access_ns, swap_ra_page_ns, zswap_copy_ns.", "#   access_ns, swap_ra_page_ns,\n#   zswap_copy_ns.")
    out = cal.add_to_profile(wrapped, "swap_ra_page_ns", 443, "fit", {}, "x")
    assert "swap_ra_page_ns," not in out and "#   zswap_copy_ns." in out
    with pytest.raises(ValueError, match="unknown cost parameter: nope_ns"):
        cal.add_to_profile(text, "nope_ns", 1, "", {}, "")


def test_rendered_profile_parses_back() -> None:
    text = cal.render_profile(
        "x-vm",
        {"fault_ns": 600, "access_ns": 49, "lzo_compress_ns": 1800},
        {
            "virtio-disk": {
                "rotational": True,
                "read_latency": "62.6us",
                "write_latency": "64.8us",
                "read_bandwidth": "824MB/s",
                "write_bandwidth": "2342MB/s",
            }
        },
        {
            "date": "2026-01-01",
            "codecs": {"lzo-rle": {"text": cal.Inline(compress_ns=1.5, rounds=[1, 2])}},
            "lab": {"phases": {"p/fill": cal.Inline(kernel_ns=5)}, "empty": {}},
        },
        header=["line one", "", "line three"],
        cost_notes={"access_ns": "lab"},
    )
    assert text.startswith('# line one\n#\n# line three\n\nschema_version = 1\nkind = "x-vm"\n')
    order = [k for k in cal.cost_names() if k in ("access_ns", "fault_ns", "lzo_compress_ns")]
    assert list(re.findall(r"^(\w+_ns) =", text, re.M)) == order  # the native core's order
    assert re.search(r"^access_ns = 49 +# lab$", text, re.M)
    p = parse_profile(text, "x.toml")
    assert p.costs == {"access_ns": 49, "fault_ns": 600, "lzo_compress_ns": 1800}
    assert p.devices["virtio-disk"] == DeviceModel(True, 62_600, 64_800, 824_000_000, 2_342_000_000)
    assert p.measurements["codecs"]["lzo-rle"]["text"] == {"compress_ns": 1.5, "rounds": [1, 2]}
    assert p.measurements["lab"]["phases"]["p/fill"] == {"kernel_ns": 5}
    with pytest.raises(ValueError, match="unknown cost parameters: nope_ns"):
        cal.render_profile("x", {"nope_ns": 1}, {}, {})


class FakeCodecCore:
    """codec_timing etc. with fixed answers, to check the table's shape and the medians."""

    def __init__(self) -> None:
        self.calls = 0

    def distinct_variants(self, content: str, variants: int) -> int:
        return 1 if content == "zero" else variants

    def page_bytes(self, content: str, seed: int, region_id: int, variant: int) -> bytes:
        return bytes([variant]) * 4096

    def codec_timing(self, codec: str, page: bytes, reps: int) -> tuple[float, float]:
        self.calls += 1
        return 1000.0 + page[0] + (self.calls % 3), 500.0

    def compressed_len(self, codec: str, page: bytes) -> int:
        return 100 + page[0]


def test_codec_timer_table() -> None:
    core = FakeCodecCore()
    table = cal.measure_codecs(core, rounds=3, codecs=("lzo", "lz4"), classes=("text", "zero"), variants=3, reps=5)
    assert set(table) == {"lzo", "lz4"} and set(table["lzo"]) == {"text", "zero"}
    cell = table["lzo"]["text"]
    assert cell["decompress_ns"] == 500.0
    assert len(cell["compress_rounds_ns"]) == 3
    assert cell["compress_ns"] == sorted(cell["compress_rounds_ns"])[1]  # median of the rounds
    assert cell["compressed_bytes"] == 101.0  # variants 0, 1, 2
    assert core.calls == 3 * 2 * (3 + 1)


def test_codec_timing_of_the_native_module(real_core: Any) -> None:
    page = bytes(real_core.page_bytes("text", 1, 0, 0))
    for codec in real_core.codecs():
        c, d = real_core.codec_timing(codec, page, 5)
        assert c > 0 and d > 0
    with pytest.raises(ValueError, match="4096"):
        real_core.codec_timing("lzo", b"x", 5)
    with pytest.raises(ValueError, match="reps"):
        real_core.codec_timing("lzo", page, 0)
    with pytest.raises(ValueError, match="unknown compressor"):
        real_core.codec_timing("lz5", page, 5)


def test_main_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert cal.main(cal.Options(reps=0)) == 2
    assert "at least 1" in capsys.readouterr().err


def test_kernel_fit_codecs_are_the_hosts_zswap_codecs_with_costs_but_lzo() -> None:
    # lzo-rle has figures of its own (the kernel's lzo-rle is not lzo).
    assert cal.kernel_fit_codecs(("deflate", "lzo", "lzo-rle")) == ["lzo-rle", "deflate"]
    assert cal.kernel_fit_codecs(("lz4", "zstd", "lzo", "842")) == ["lz4", "zstd"]
    assert cal.kernel_fit_codecs(()) == []


def test_reclaim_pass_figure_is_the_median_cgroup_over_the_passes_of_a_failed_write() -> None:
    from reclaimlab import reclaim_pass as rp

    n = rp.PASSES_PER_FAILED_WRITE
    assert n == 26  # 13 priorities, twice (do_try_to_free_pages' memcg_full_walk retry)
    # per cgroup: (median failed - median ok) / 26 -> 700, 400, 1000; the median cgroup wins
    per = [
        {"failed_ns": [5_000 + 700 * n, 1, 10**9], "ok_ns": [5_000]},
        {"failed_ns": [6_000 + 400 * n], "ok_ns": [6_000, 6_000, 7]},
        {"failed_ns": [5_500 + 1000 * n], "ok_ns": [5_500]},
    ]
    assert rp.figure(per) == {"shrink_node_ns": 700, "per_cgroup_ns": [700, 400, 1000]}
    # a failed write faster than a successful one (noise) gives 0, not a negative cost
    assert rp.figure([{"failed_ns": [10], "ok_ns": [20]}])["shrink_node_ns"] == 0
    with pytest.raises(ValueError):
        rp.figure([])


def test_a_refit_takes_the_device_measurement_recorded_beside_its_runs(tmp_path: Path) -> None:
    # --lab-from refits the recorded swap-file runs with the device measured in the same
    # calibration: the bundled profile records one, a profile without it gives None.
    recorded = cal._recorded_device(default_profile_path())
    assert recorded is not None
    model = cal.device_model(recorded)
    assert model["read_latency_ns"] > 0 and model["write_bytes_per_s"] > 0
    bare = tmp_path / "bare.toml"
    bare.write_text('schema_version = 1\nkind = "x"\n[measurements]\ndate = "2026-11-24"\n')
    assert cal._recorded_device(bare) is None


def _loop_report() -> dict[str, Any]:
    """A loop_device.run report: 2 rounds of 100 files of 128 KiB, 4 read scans of 192 MiB."""
    round_stat = {"write_ios": 300, "write_sectors": 100 * (256 + 64), "write_ticks": 300, "flush_ios": 200, "flush_ticks": 100}
    slow = {**round_stat, "write_ticks": 900, "flush_ticks": 300}
    total = {k: round_stat[k] + slow[k] for k in round_stat}
    return {
        "method": "m",
        "loop_device": "/dev/loop9",
        "queue": {"rotational": "1", "max_sectors_kb": "1280", "nr_requests": "128", "read_ahead_kb": "2560"},
        "create": {
            "files": 200,
            "rounds": 2,
            "file_kib": 128,
            "write_ns": [100, 200, 300],
            "fsync_ns": [1000, 2000, 3000],
            "file_ns": [1100, 2200, 3300],
            "stat": {**total, "write_merges": 1200},
            "round_stats": [round_stat, slow],
        },
        "read": {
            "bytes": 4 * 192 << 20,
            "scans": 4,
            "elapsed_ns": 10**9,
            # 600 requests of 1.25 MiB, 2 ms each.
            "stat": {"read_ios": 600, "read_sectors": 600 * 2560, "read_ticks": 1200, "io_ticks": 300, "time_in_queue": 1200},
        },
        "direct": {
            "chunk_bytes": 1280 * 1024,
            "rand_read_4k_ns": [50_000, 60_000, 70_000],
            "seq_read_bytes": 1 << 30,
            "seq_read_ns": 10**9,
            "seq_overwrite_ns": 2 * 10**9,
            "seq_write_bytes": 1 << 27,
            "seq_write_ns": 10**9,
        },
        "write_cpu": {"pages": 1000, "new_file_ns": 4_000_000, "uncached_ns": 2_300_000, "cached_ns": 1_000_000},
    }


def test_loop_device_figures() -> None:
    from reclaimlab import loop_device

    rep = _loop_report()
    f = loop_device.device_figures(rep)
    # Two windows of 2560 KiB in flight = 4 requests of 1.25 MiB, 2 ms each: 2.62 GB/s; the
    # latency is the 2 ms less the transfer of one request at that rate (0.5 ms).
    assert f["read_bytes_per_s"] == round(4 * 1280 * 1024 * 1e9 / 2e6)
    assert f["read_latency_ns"] == 1_500_000
    # Overwrites: 1 GiB in 2 s. Write requests: the median round's mean, 1 ms or 3 ms -> 2 ms,
    # less the mean request (64000 sectors in 600 requests) at that bandwidth.
    assert f["write_bytes_per_s"] == round((1 << 30) / 2)
    assert f["write_latency_ns"] == round(2e6 - 64000 / 600 * 512 * 1e9 / ((1 << 30) / 2))
    assert f["flush_ns"] == 1_000_000
    assert (f["max_sectors_kb"], f["nr_requests"], f["read_ahead_kb"], f["rotational"]) == (1280, 128, 2560, True)
    c = loop_device.create_figures(rep)
    assert c["fsync_median_ns"] == 2000
    assert c["write_requests_per_file"] == 3.0
    assert c["write_merges_per_file"] == 6.0
    # 320 sectors a file of which 256 are its data: 64 sectors = 8 blocks of 4 KiB.
    assert c["extra_blocks_per_file"] == 8.0
    assert c["flushes_per_file"] == 2.0
    w = loop_device.write_figures(rep)
    assert (w["new_file_page_ns"], w["uncached_page_ns"], w["write_page_ns"], w["insert_page_ns"]) == (4000, 2300, 1000, 1300)


def test_loop_device_tables_and_profile_splice() -> None:
    table, summary = cal.loop_device_tables(_loop_report(), "2026-11-24T22:45:00+00:00")
    assert table["flush_latency"] == "1000us"
    text = (
        'schema_version = 1\nkind = "k"\n\n[costs]\naccess_ns = 30\n\n[devices.virtio-disk]\nrotational = true\n\n'
        '[devices.lab-loop]\nrotational = false\n\n[measurements]\ndate = "x"\n\n[measurements.loop_device]\nold = 1\n\n'
        "[measurements.loop_device.figures]\nold = 2\n\n[measurements.codecs]\nlzo = 1\n"
    )
    dev: list[str] = []
    cal._toml_table(["devices", "lab-loop"], table, dev)
    meas: list[str] = []
    cal._toml_table(["measurements", "loop_device"], summary, meas)
    out = cal.replace_tables(text, {"devices.lab-loop": "\n".join(dev), "measurements.loop_device": "\n".join(meas)})
    doc = tomllib.loads(out)
    assert doc["costs"] == {"access_ns": 30}
    assert doc["devices"]["virtio-disk"] == {"rotational": True}
    assert doc["devices"]["lab-loop"]["flush_latency"] == "1000us"
    assert doc["measurements"]["codecs"] == {"lzo": 1}
    assert "old" not in doc["measurements"]["loop_device"]
    assert doc["measurements"]["loop_device"]["figures"]["flush_ns"] == 1_000_000
    assert doc["measurements"]["loop_device"]["write_cpu"]["write_page_ns"] == 1000
    # The device table stays before [measurements], and the profile parses.
    assert out.index("[devices.lab-loop]") < out.index("[measurements]")
    p = parse_profile(out.split("[measurements]")[0], "p.toml")
    assert p.devices["lab-loop"].flush_ns == 1_000_000
