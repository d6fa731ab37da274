"""Units as scenarios write them: sizes, durations, bandwidths and page content classes.

Every parser takes what TOML can give (an int or a string) and returns an int in the base unit
(bytes, nanoseconds, bytes per second), or raises ``ValueError`` with a message of the form
``expected ...; got ...`` that the scenario loader puts after the key path.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

__all__ = [
    "PAGE_SIZE",
    "describe",
    "format_duration",
    "format_size",
    "pages",
    "parse_bandwidth",
    "parse_content",
    "parse_duration",
    "parse_size",
]

PAGE_SIZE = 4096

# Size suffixes, case-insensitive. Bare K/M/G/... are binary, as in the kernel's memparse();
# KB/MB/... are decimal and KiB/MiB/... binary, as their names say.
_SIZE_UNITS: dict[str, int] = {"": 1, "b": 1}
for _i, _p in enumerate("kmgtpe", start=1):
    _SIZE_UNITS[_p] = 1024**_i
    _SIZE_UNITS[_p + "ib"] = 1024**_i
    _SIZE_UNITS[_p + "b"] = 1000**_i

_DURATION_UNITS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
}

# ASCII digits only: Python's \d (and int()/Fraction()) also take other scripts' digits, which
# no kernel file or TOML integer accepts.
_NUMBER_UNIT = re.compile(r"^[ \t]*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)[ \t]*([A-Za-zµ]*)[ \t]*$")
#: Every size, duration and bandwidth is a u64 in the core.
U64_MAX = 2**64 - 1

_SIZE_HINT = "a size (int bytes, or a string like '4096', '64MiB', '1GiB', '500MB', '2G')"
_DURATION_HINT = "a duration (int ns, or a string like '10ns', '5us', '20ms', '2s', '1min')"
_BANDWIDTH_HINT = "a bandwidth (int bytes per second, or a string like '500MB/s', '1GiB/s')"


def describe(value: Any) -> str:
    """A value as it would look in TOML, for ``got ...`` in messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if value is None:
        return "nothing"
    return repr(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scaled(value: Any, units: dict[str, int], hint: str, what: str) -> int:
    n = _scaled_unbounded(value, units, hint, what)
    if n > U64_MAX:
        got = f"{describe(value)} = {n} {what}" if isinstance(value, str) else describe(value)
        raise ValueError(f"expected {hint} of at most 2^64 - 1 = {U64_MAX} {what}; got {got}")
    return n


def _scaled_unbounded(value: Any, units: dict[str, int], hint: str, what: str) -> int:
    if _is_int(value):
        if value < 0:
            raise ValueError(f"expected {hint} >= 0; got {describe(value)}")
        return int(value)
    if not isinstance(value, str):
        raise ValueError(f"expected {hint}; got {describe(value)}")
    m = _NUMBER_UNIT.match(value)
    if m is None:
        raise ValueError(f"expected {hint}; got {describe(value)}")
    number, unit = m.groups()
    scale = units.get(unit.lower() if unit != "µs" else unit)
    if scale is None:
        known = ", ".join(sorted({k for k in units if k}, key=lambda k: (units[k], k)))
        raise ValueError(f"expected {hint} (unit one of {known}); got {describe(value)}")
    exact = Fraction(number) * scale
    if exact.denominator != 1:
        raise ValueError(f"expected a whole number of {what}; got {describe(value)} = {float(exact)} {what}")
    return int(exact)


def parse_size(value: Any) -> int:
    """Bytes from an int or a string with an optional B/K/KB/KiB/M/MB/MiB/G/... suffix."""
    return _scaled(value, _SIZE_UNITS, _SIZE_HINT, "bytes")


def parse_duration(value: Any) -> int:
    """Nanoseconds from an int (ns) or a string with a unit: ns, us, ms, s, min, h."""
    if isinstance(value, str):
        m = _NUMBER_UNIT.match(value)
        if m is not None and not m.group(2):
            raise ValueError(f"expected {_DURATION_HINT}; a string needs a unit; got {describe(value)}")
    return _scaled(value, _DURATION_UNITS, _DURATION_HINT, "nanoseconds")


def parse_bandwidth(value: Any) -> int:
    """Bytes per second from an int or a string ``<size>/s``."""
    if _is_int(value):
        if value <= 0:
            raise ValueError(f"expected {_BANDWIDTH_HINT} > 0; got {describe(value)}")
        return _scaled(value, _SIZE_UNITS, _BANDWIDTH_HINT, "bytes per second")
    if not isinstance(value, str) or not value.strip().endswith("/s"):
        raise ValueError(f"expected {_BANDWIDTH_HINT}; got {describe(value)}")
    try:
        bps = _scaled(value.strip()[:-2], _SIZE_UNITS, _BANDWIDTH_HINT, "bytes per second")
    except ValueError:
        raise ValueError(f"expected {_BANDWIDTH_HINT}; got {describe(value)}") from None
    if bps <= 0:
        raise ValueError(f"expected {_BANDWIDTH_HINT} > 0; got {describe(value)}")
    return bps


def pages(size_bytes: int) -> int:
    """Whole 4 KiB pages, rounding up."""
    return -(-size_bytes // PAGE_SIZE)


def parse_content(value: Any) -> str:
    """Validate a content class string with the native core's own parser (content.rs).

    Returns the string unchanged: the lowered config carries the class as written.
    """
    from reclaimlab import native

    if not isinstance(value, str):
        raise ValueError(f"expected a content class like 'text', 'mix512' or 'same:0x5a'; got {describe(value)}")
    native.check_content(value)
    return value


def format_size(n: int) -> str:
    """The shortest exact binary spelling: 1073741824 -> '1GiB', 1000 -> '1000B'."""
    for suffix, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n and n % scale == 0:
            return f"{n // scale}{suffix}"
    return f"{n}B"


def format_duration(ns: int) -> str:
    for suffix, scale in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns and ns % scale == 0:
            return f"{ns // scale}{suffix}"
    return f"{ns}ns"
