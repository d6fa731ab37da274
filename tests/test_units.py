from __future__ import annotations

import pytest

from reclaimlab.units import (
    format_duration,
    format_size,
    pages,
    parse_bandwidth,
    parse_content,
    parse_duration,
    parse_size,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (0, 0),
        (4096, 4096),
        ("4096", 4096),
        ("100B", 100),
        ("1K", 1024),
        ("1k", 1024),
        ("1KB", 1000),
        ("1kB", 1000),
        ("1KiB", 1024),
        ("64MiB", 64 << 20),
        ("64M", 64 << 20),
        ("500MB", 500_000_000),
        ("2G", 2 << 30),
        ("1GiB", 1 << 30),
        ("1GB", 10**9),
        ("1.5GiB", 3 << 29),
        ("1 GiB", 1 << 30),
        ("2T", 2 << 40),
        ("1TiB", 1 << 40),
        ("0.5KiB", 512),
    ],
)
def test_parse_size(text: object, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["abc", "1GiBs", "-1G", -5, True, 1.5, "1.3B", "0.1KiB", "", "G", [1]])
def test_parse_size_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match=r"expected .*; got"):
        parse_size(bad)


def test_parse_size_message_names_value() -> None:
    with pytest.raises(ValueError, match=r"got '1GB!'"):
        parse_size("1GB!")
    with pytest.raises(ValueError, match=r"whole number of bytes"):
        parse_size("0.1KiB")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (0, 0),
        (1500, 1500),
        ("10ns", 10),
        ("5us", 5_000),
        ("5µs", 5_000),
        ("20ms", 20_000_000),
        ("2s", 2_000_000_000),
        ("1.5s", 1_500_000_000),
        ("1min", 60_000_000_000),
        ("1h", 3_600_000_000_000),
    ],
)
def test_parse_duration(text: object, expected: int) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("bad", ["10", "5 parsecs", "s", -1, False, 2.5, "1.5ns"])
def test_parse_duration_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match=r"expected .*(duration|whole number of nanoseconds)"):
        parse_duration(bad)


def test_duration_without_unit_says_so() -> None:
    with pytest.raises(ValueError, match="needs a unit"):
        parse_duration("10")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (1000, 1000),
        ("500MB/s", 500_000_000),
        ("1GiB/s", 1 << 30),
        ("2GB/s", 2_000_000_000),
        ("150 MB/s", 150_000_000),
    ],
)
def test_parse_bandwidth(text: object, expected: int) -> None:
    assert parse_bandwidth(text) == expected


@pytest.mark.parametrize("bad", ["500MB", "fast/s", 0, -1, "0MB/s", True])
def test_parse_bandwidth_rejects(bad: object) -> None:
    with pytest.raises(ValueError, match=r"expected a bandwidth"):
        parse_bandwidth(bad)


@pytest.mark.parametrize("good", ["zero", "random", "text", "mix0", "mix1024", "mix4096", "same:0", "same:255", "same:0x5a", "same:0XFF"])
def test_content_valid(good: str) -> None:
    assert parse_content(good) == good


@pytest.mark.parametrize("bad", ["Text", "txet", "mix", "mix4097", "mix-1", "same:", "same:256", "same:0x100", "same:x", "random ", 5])
def test_content_invalid(bad: object) -> None:
    # The native core's parser says what it expected (the string forms) or the Python type check.
    with pytest.raises(ValueError, match=r"expected (one of `zero`|a content class)"):
        parse_content(bad)


def test_pages_round_up() -> None:
    assert pages(0) == 0
    assert pages(1) == 1
    assert pages(4096) == 1
    assert pages(4097) == 2
    assert pages(64 << 20) == 16384


def test_format() -> None:
    assert format_size(1 << 30) == "1GiB"
    assert format_size(1000) == "1000B"
    assert format_duration(20_000_000_000) == "20s"
    assert format_duration(1500) == "1500ns"
