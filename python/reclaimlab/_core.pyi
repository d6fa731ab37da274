"""The simulator core (Rust, crates/reclaimlab-py/src/lib.rs). Hand-written; keep in sync
(checked with `python -m mypy.stubtest reclaimlab._core`, part of `make lint`)."""

from typing import final

__all__ = [
    "ConfigError",
    "Simulation",
    "check_content",
    "codec_timing",
    "codecs",
    "compact_results",
    "compressed_len",
    "default_costs",
    "distinct_variants",
    "estimate",
    "knobs",
    "latency_quantiles",
    "latency_relative_error",
    "limits",
    "page_bytes",
    "preset_switches",
    "presets",
    "version",
    "zpools",
]

class ConfigError(ValueError):
    """A configuration (or argument) the simulator rejects. ``str(e)`` is ``"<path>: <reason>"``."""

    path: str
    """Path of the key in the lowered JSON (``processes[0].regions[1].pages``), "" if none."""
    reason: str
    """The message without the path."""
    kind: str
    """"parse", "invalid", "unknown" or "unavailable"."""

# A PyO3 class without `subclass`: Python cannot subclass it.
@final
class Simulation:
    """A simulation of one lowered config (the SimConfig JSON of reclaimlab-core's config.rs)."""

    def __new__(cls, config_json: str) -> Simulation:
        """Raises ConfigError when the core rejects the config (its ``path`` names the key)."""

    def step(self, max_events: int) -> bool:
        """Run up to ``max_events`` events (without holding the GIL); True once finished."""

    def step_until(self, max_events: int, until_ns: int) -> bool:
        """Run up to ``max_events`` events, none later than ``until_ns``; True once finished."""

    def next_event_ns(self) -> int | None:
        """Simulated time of the next event; None once the queue is empty."""

    def now_ns(self) -> int:
        """Simulated time of the last event run."""

    def counters_json(self) -> str:
        """Every counter now (gauges read now), as a JSON object; changes nothing."""

    def progress(self) -> float:
        """Virtual time over the expected end, in [0, 1] (best effort)."""

    def finished(self) -> bool: ...
    def result_json(self) -> str:
        """``{"counters": {...}, "phases": [{"process", "phase", "start_ns", "end_ns", "accesses"}],
        "stats": {"events", "sim_time_ns", "pages"}}``"""
    def zsmalloc_classes_json(self) -> str:
        """Each zsmalloc pool's debugfs ``classes`` table, read with the counters:
        ``[{"pool": "zram0", "classes": [{"class", "size", "inuse_ratio" (11 counts: 10% ... 99%,
        100%), "obj_allocated", "obj_used", "pages_used", "pages_per_zspage", "freeable"}]}]``"""

def default_costs() -> dict[str, int]:
    """Time-model parameter names and their defaults (the keys scenario ``[costs]`` may set)."""

def preset_switches(version: str) -> dict[str, bool | int | float | str]:
    """The policy switches a kernel version preset sets. ConfigError on an unknown version."""

def presets() -> list[str]:
    """Kernel versions with a preset."""

def compact_results() -> list[str]:
    """enum compact_result's names, by value, as the compaction tracepoints print them."""

def codecs() -> list[str]:
    """Codec names, as the kernel spells them (lzo, lzo-rle, lz4, zstd, deflate)."""

def version() -> str:
    """The native module's version (its crate version)."""

def latency_quantiles(values: list[int], quantiles_ppm: list[int]) -> list[int]:
    """The core's latency histogram over ``values`` (ns): the nearest-rank quantiles at
    ``quantiles_ppm`` (parts per million, 1 to 1000000), as run results report them."""

def latency_relative_error() -> float:
    """The histogram's stated bound on a reported quantile's relative error."""

def page_bytes(content: str, seed: int, region_id: int, variant: int) -> bytes:
    """The exact bytes of one page of a content class (region_id = (process << 16) | region)."""

def compressed_len(codec: str, page: bytes) -> int:
    """The simulator's compressed length of a 4096-byte page with a kernel compressor."""

def distinct_variants(content: str, variants: int) -> int:
    """Distinct page contents of a region of this class when `variants` are requested."""

def codec_timing(codec: str, page: bytes, reps: int) -> tuple[float, float]:
    """Wall-clock ns of one compression and one decompression of a 4096-byte page with the
    simulator's codec implementation: medians over ``reps`` samples, each the mean of a batch
    of back-to-back calls (hot caches). ConfigError on an unknown codec, a page that is not
    4096 bytes, ``reps`` < 1, or a failed round trip. For ``reclaimlab calibrate``."""

def check_content(spec: str) -> None:
    """Check a content class as scenarios write it (``"text"``, ``"mix1024"``, ``"same:0x5a"``);
    ConfigError (path ``"content"``) saying what is wrong."""

def zpools() -> list[dict[str, str | list[str]]]:
    """zswap pool allocators: ``{"name": ..., "presets": [kernel versions that have it]}``."""

def knobs() -> list[dict[str, str | int | bool | list[str] | None]]:
    """The kernel knobs the simulator reads, declared once (reclaimlab-core knobs.rs): per knob
    ``key`` (scenario key), ``type`` ("bool", "int" or "str"), ``default`` (the kernel's; None
    where the kernel computes it), ``min``, ``max`` (ints or None), ``choices`` (list of str or
    None), ``kernel_file``, ``doc`` and ``lowered`` (dotted path in the lowered JSON)."""

def limits() -> list[dict[str, str | int]]:
    """The largest values the core accepts (reclaimlab-core limits.rs): per bound ``key`` (the
    lowered key), ``max``, ``unit`` and ``why``."""

def estimate(config_json: str) -> dict[str, int]:
    """What a lowered config asks for, before it is built: ``pages``, ``swap_slots``, ``bytes``
    (the core's allocations that grow with the scenario) and ``accesses``. Raises ConfigError
    when a bound fails."""
