"""The kselftest TAP output of one selftest binary, as per-test verdicts.

What ``tools/testing/selftests/kselftest.h`` prints (6.1 and 6.12 alike), and how it is read:

* ``ok N name`` → pass; ``not ok N name`` → fail;
* ``ok N # SKIP name`` → skip; ``ok N # XFAIL name`` → xfail; ``not ok N # error name`` → error;
* ``1..0 # SKIP reason`` (``ksft_exit_skip`` before any test) → every test skipped, with the
  reason;
* ``Bail out! reason`` → the tests without a result are errors;
* anything else (``# ...`` diagnostics, the tests' own messages on stderr) belongs to the test
  whose result line comes next.

The cgroup selftests print no plan line; the test names (from the binary's ``tests[]``, read by
reclaimlab.vm.selftests) give the tests that never reported: the one running when the guest's
per-test timeout fired is ``timeout``, the ones after it (or after a crash) ``not-run``.
A result number seen twice (a forked child flushing its parent's buffered stdout) counts once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["VERDICTS", "TestVerdict", "parse"]

#: Every verdict a test can get.
VERDICTS = ("pass", "fail", "skip", "xfail", "error", "timeout", "not-run")

_RESULT = re.compile(r"^(not )?ok (\d+)\b ?(.*)$")
_DIRECTIVE = re.compile(r"^#\s*(SKIP|XFAIL|error)\b\s*(.*)$", re.I)


@dataclass
class TestVerdict:
    number: int
    name: str
    verdict: str
    #: The TAP directive's text, or why there is no result (timeout, crash, skip reason).
    reason: str = ""
    #: From the previous result (or the binary's start) to this one, in the guest's clock.
    seconds: float | None = None
    #: The lines the binary printed between the previous result and this one.
    output: list[str] = field(default_factory=list)
    #: zswap's debugfs stored_pages, the highest the guest sampled during the test (VM runs).
    stored_pages_max: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "name": self.name,
            "verdict": self.verdict,
            "reason": self.reason,
            "seconds": self.seconds,
            "output": list(self.output),
            "stored_pages_max": self.stored_pages_max,
        }


def _result(negated: bool, rest: str) -> tuple[str, str, str]:
    """(verdict, name, reason) of a result line's text after its number."""
    rest = rest.strip()
    m = _DIRECTIVE.match(rest)
    if m is not None:
        kind = m.group(1).upper()
        text = m.group(2).strip()
        if kind == "SKIP":
            return "skip", text, ""
        if kind == "XFAIL":
            return "xfail", text, ""
        return "error", text, ""
    name, _, directive = rest.partition(" # ")
    return ("fail" if negated else "pass"), name.strip(), directive.strip()


def parse(
    lines: list[tuple[float, str]],
    names: tuple[str, ...] | list[str],
    start: float | None = None,
    timed_out: int | None = None,
    exit_status: int | None = None,
) -> list[TestVerdict]:
    """Per-test verdicts from the binary's output ``lines`` ((time in seconds, text) in order).

    ``names`` are the binary's tests in order (numbered from 1); ``start`` the time it started;
    ``timed_out`` the number of the test the guest stopped it in; ``exit_status`` its status."""
    out: dict[int, TestVerdict] = {}
    pending: list[str] = []
    last_t = start
    whole_skip: str | None = None
    bail: str | None = None
    for t, text in lines:
        text = text.rstrip("\r")
        m = _RESULT.match(text)
        if m is not None:
            n = int(m.group(2))
            if n in out:
                continue  # a duplicate (see the module docstring)
            verdict, name, reason = _result(m.group(1) is not None, m.group(3))
            if not name and 1 <= n <= len(names):
                name = names[n - 1]
            seconds = round(t - last_t, 2) if last_t is not None else None
            out[n] = TestVerdict(n, name, verdict, reason, seconds, pending)
            pending = []
            last_t = t
            continue
        if text.startswith("1..0") and "SKIP" in text.upper():
            whole_skip = text.split("SKIP", 1)[1].strip() or "skipped"
            continue
        if text.startswith("Bail out!"):
            bail = text.removeprefix("Bail out!").strip()
            continue
        pending.append(text)
    for n, name in enumerate(names, start=1):
        if n in out:
            continue
        if whole_skip is not None:
            out[n] = TestVerdict(n, name, "skip", whole_skip)
        elif bail is not None:
            out[n] = TestVerdict(n, name, "error", f"Bail out! {bail}")
        elif timed_out is not None and n == timed_out:
            out[n] = TestVerdict(n, name, "timeout", "no result within the per-test timeout: the binary was killed", None, pending)
            pending = []
        elif timed_out is not None and n > timed_out:
            out[n] = TestVerdict(n, name, "not-run", f"the binary was killed in test {timed_out} ({names[timed_out - 1]})")
        else:
            out[n] = TestVerdict(n, name, "not-run", f"the binary ended (exit status {exit_status}) before this test", None, pending)
            pending = []
    return [out[n] for n in sorted(out)]
