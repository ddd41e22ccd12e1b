"""Generated runs for the whole-pipeline property tests: a shipped sample run reshaped by a plan.

A plan keeps some endpoints (and some of each endpoint's DP engines), moves each file's clock (skew,
and a stretch that can shrink every stage to 0 s so that stages start and end on one timestamp), cuts
files anywhere (inside a line, an escape or a UTF-8 character), duplicates, removes (a stats gap) and
swaps line ranges, sprinkles escapes and non-ASCII characters, and empties files. The lines stay the real
formats of the sample generator; only their number, order, times and decoration change. Hypothesis
builds the plans (:func:`plans`), :func:`write_run` lays one out as a run directory.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "samples" / "runs"
# Samples that between them hold every kind of run: a bottleneck, a crash and its fan-out, transfer
# failures, a start-up stall, a run with no stats lines, a sweep and Prometheus-only data; and each engine's.
BASES = ("prefill-bound", "engine-crash", "nixl-failures", "startup-stuck", "startup-stall", "stats-missing",
         "stats-missing-dynamo", "kv-exhaustion", "sweep-4xdep2", "block-size-crash", "sglang-transfer-failure",
         "sglang-kv-capacity", "sglang-startup-failure")

_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# Every clock form the samples print: ISO (Rust/Dynamo, T and Z), srtctl's "YYYY-MM-DD HH:MM:SS",
# vLLM's "MM-DD HH:MM:SS" and date(1)'s "Wed Aug 12 14:05:11 UTC 2026".
_STAMP = re.compile(
    rb"(?P<iso>(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)(?P<sep>[T ])(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d))"
    rb"|(?P<md>(?<![\d-])(?P<mo2>\d\d)-(?P<d2>\d\d) (?P<h2>\d\d):(?P<mi2>\d\d):(?P<s2>\d\d))"
    rb"|(?P<unix>(?P<wd>Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>[A-Z][a-z]{2}) +(?P<d3>\d{1,2}) "
    rb"(?P<h3>\d\d):(?P<mi3>\d\d):(?P<s3>\d\d) UTC (?P<y3>\d{4}))")
DECORATIONS = ("\x1b[0;36m", "\x1b[0m", "[0;32m", "\x1b[2K", "é", "日本", "\u2028", "\ufffd", "\t", "\r",
               "💥", "\x00")


@dataclass(frozen=True)
class FilePlan:
    """What happens to one file of the run."""

    skew_s: int = 0             # its clock's offset
    stretch: float = 1.0        # its timeline scaled about the run's start (0: every line on one second)
    cut: float | None = None    # kept fraction of its bytes (a cut anywhere)
    duplicate: tuple[float, float] | None = None  # a range of lines (start, length as fractions) repeated
    swap: tuple[float, float] | None = None       # two line positions whose lines change places
    gap: tuple[float, float] | None = None        # a range of lines (start, length as fractions) removed
    decorate: tuple[tuple[float, int], ...] = ()  # (position, DECORATIONS index) inserted into the bytes
    empty: bool = False


@dataclass(frozen=True)
class RunPlan:
    """A shipped sample reshaped: which endpoint files stay, how many DP engines each keeps, each file's plan."""

    base: str
    keep_endpoints: tuple[bool, ...]   # per endpoint log, in sorted order (at least the plan's choice)
    engines: int                       # DP engines kept per endpoint (lines of higher ranks dropped)
    files: tuple[FilePlan, ...]        # per file of the run, in sorted order (cycled when shorter)
    drop_side_files: bool              # orchestrator, benchmark and recipe files removed


def _fractions() -> st.SearchStrategy[float]:
    return st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def file_plans(draw: st.DrawFn) -> FilePlan:
    return FilePlan(
        skew_s=draw(st.sampled_from([0, 0, 0, -3600, -90, -1, 1, 7, 600, 86400 * 200])),
        stretch=draw(st.sampled_from([1.0, 1.0, 0.0, 0.001, 0.5, 3.0])),
        cut=draw(st.none() | _fractions()),
        duplicate=draw(st.none() | st.tuples(_fractions(), st.floats(0.0, 0.3))),
        swap=draw(st.none() | st.tuples(_fractions(), _fractions())),
        gap=draw(st.none() | st.tuples(_fractions(), st.floats(0.0, 0.5))),
        decorate=tuple(draw(st.lists(st.tuples(_fractions(), st.integers(0, len(DECORATIONS) - 1)), max_size=4))),
        empty=draw(st.integers(0, 9)) == 0,
    )


@st.composite
def plans(draw: st.DrawFn, bases: tuple[str, ...] = BASES) -> RunPlan:
    return RunPlan(
        base=draw(st.sampled_from(bases)),
        keep_endpoints=tuple(draw(st.lists(st.booleans(), min_size=1, max_size=8))),
        engines=draw(st.sampled_from([8, 8, 1, 2, 3])),
        files=tuple(draw(st.lists(file_plans(), min_size=1, max_size=6))),
        drop_side_files=draw(st.integers(0, 3)) == 0,
    )


def _endpoint_log(path: Path) -> bool:
    return path.suffix == ".out" and any(f"_{role}_w" in path.name for role in ("prefill", "decode"))


def _side_file(path: Path) -> bool:
    return path.name.startswith(("sweep_", "benchmark")) or path.name in {"config.yaml"} or path.suffix == ".json"


def _warp(data: bytes, origin: datetime, plan: FilePlan) -> bytes:
    """Every timestamp of ``data`` moved to ``origin + skew + stretch * (t - origin)``."""
    if plan.skew_s == 0 and plan.stretch == 1.0:
        return data

    def moved(t: datetime) -> datetime:
        return origin + timedelta(seconds=plan.skew_s + plan.stretch * (t - origin).total_seconds())

    def sub(m: re.Match[bytes]) -> bytes:
        try:
            if m["iso"]:
                t = moved(datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]),
                                   tzinfo=UTC))
                return t.strftime(f"%Y-%m-%d{m['sep'].decode()}%H:%M:%S").encode()
            if m["md"]:
                t = moved(datetime(origin.year, int(m["mo2"]), int(m["d2"]), int(m["h2"]), int(m["mi2"]),
                                   int(m["s2"]), tzinfo=UTC))
                return t.strftime("%m-%d %H:%M:%S").encode()
            t = moved(datetime(int(m["y3"]), _MONTHS.index(m["mon"].decode()) + 1, int(m["d3"]), int(m["h3"]),
                               int(m["mi3"]), int(m["s3"]), tzinfo=UTC))
            return (f"{_DAYS[t.weekday()]} {_MONTHS[t.month - 1]} {t.day:2d} {t:%H:%M:%S} UTC {t.year}").encode()
        except ValueError:  # not a date after all (a version, a counter): left as it is
            return m[0]

    return _STAMP.sub(sub, data)


def _drop_engines(data: bytes, engines: int) -> bytes:
    """The lines of DP ranks at or above ``engines`` removed (``Engine 00N:``, ``_DPN``, ``DP rank N``)."""
    if engines >= 8:
        return data
    ranks = "|".join(str(r) for r in range(engines, 16))
    pattern = re.compile(rf"(?:Engine 0*(?:{ranks}):|_DP(?:{ranks})[ _]|DP rank (?:{ranks})\b)".encode())
    return b"".join(line for line in data.splitlines(keepends=True) if not pattern.search(line))


def _reshape(data: bytes, plan: FilePlan) -> bytes:
    if plan.empty:
        return b""
    lines = data.splitlines(keepends=True)
    if plan.duplicate and lines:
        start = int(plan.duplicate[0] * (len(lines) - 1))
        end = start + int(plan.duplicate[1] * len(lines))
        lines[end:end] = lines[start:end]
    if plan.gap and lines:  # a stats gap: the engine stopped logging for a while
        start = int(plan.gap[0] * (len(lines) - 1))
        del lines[start:start + int(plan.gap[1] * len(lines))]
    if plan.swap and lines:
        i, j = (int(f * (len(lines) - 1)) for f in plan.swap)
        lines[i], lines[j] = lines[j], lines[i]
    out = bytearray(b"".join(lines))
    for pos, which in sorted(plan.decorate, reverse=True):
        at = int(pos * len(out))
        out[at:at] = DECORATIONS[which].encode()
    if plan.cut is not None:
        del out[int(plan.cut * len(out)):]
    return bytes(out)


def run_files(run: Path) -> list[Path]:
    """The files of a run in the order a plan's ``files`` apply to them."""
    return sorted(p for p in run.rglob("*") if p.is_file() and p.name != "MANIFEST.json")


def write_run(plan: RunPlan, dest: Path) -> Path:
    """The run of ``plan`` laid out under ``dest`` (created); returns the run directory."""
    base = RUNS / plan.base
    run = dest / plan.base
    shutil.copytree(base, run)
    files = run_files(run)
    (run / "MANIFEST.json").unlink(missing_ok=True)  # the sample's labels, not part of a run
    origin = _origin(files)
    endpoints = [p for p in files if _endpoint_log(p)]
    keep = plan.keep_endpoints
    for n, path in enumerate(endpoints):
        if not keep[n % len(keep)] and n:  # the first endpoint log always stays
            path.unlink()
    for n, path in enumerate(p for p in files if p.exists()):
        if plan.drop_side_files and _side_file(path):
            path.unlink()
            continue
        data = _drop_engines(path.read_bytes(), plan.engines) if _endpoint_log(path) else path.read_bytes()
        fplan = plan.files[n % len(plan.files)]
        path.write_bytes(_reshape(_warp(data, origin, fplan), fplan))
    return run


def _origin(files: list[Path]) -> datetime:
    """The run's first ISO timestamp (the clock every stretch is taken about)."""
    for path in files:
        m = _STAMP.search(path.read_bytes()[:1 << 16])
        if m and m["iso"]:
            return datetime(int(m["y"]), int(m["mo"]), int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]),
                            tzinfo=UTC)
    return datetime(2026, 1, 1, tzinfo=UTC)
