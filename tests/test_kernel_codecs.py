"""The arithmetic of the kernel codec timing (reclaimlab.kernel_codecs), without a kernel."""

from __future__ import annotations

import pytest

from reclaimlab import kernel_codecs as kc


def test_net_figures_are_medians_of_paired_differences() -> None:
    rounds = [
        {"lz4": {"text": ([5000, 5100, 4900], [1400, 1500, 1300])}},
        {"lz4": {"text": ([5200, -3000, 5050], [1450, 1420, 90000])}},  # a spike on either side
    ]
    got = kc.net_figures(rounds)["lz4"]["text"]
    assert got["compress_ns"] == 5025.0  # median of the six pairs
    assert got["decompress_ns"] == 1435.0
    assert got["pairs"] == 6
    assert got["compress_rounds_ns"] == [5000, 5050]


def test_composition_fit_recovers_a_linear_mix_and_reports_residuals() -> None:
    per_class = {
        "mix64": {"compress_ns": 600 + (1200 - 600) * 64 / 4096, "decompress_ns": 100.0},
        "mix2048": {"compress_ns": 900.0, "decompress_ns": 100.0},
        "random": {"compress_ns": 1200.0, "decompress_ns": 5.0},
        "text": {"compress_ns": 5000.0, "decompress_ns": 1400.0},  # not part of the fit
    }
    fit = kc.composition_fit(per_class, "compress")
    assert (fit["random"], fit["run"]) == (1200, 600)
    assert set(fit["residuals"]) == {"mix64", "mix2048", "random"}
    assert all(abs(r) < 1e-9 for r in fit["residuals"].values())
    # The random page is never part of the fit (zram stores it as a huge object): the mixes alone.
    d = kc.composition_fit(per_class, "decompress")
    assert (d["random"], d["run"]) == (100, 100)
    assert "random" not in d["residuals"]


def test_composition_fit_needs_two_points() -> None:
    with pytest.raises(ValueError, match="at least two"):
        kc.composition_fit({"random": {"compress_ns": 1.0, "decompress_ns": 1.0}}, "decompress")
