"""Live = batch (issue 21): following a growing run, or replaying it, opens only findings the batch
read of the finished run reports, each once per identity (code, endpoint, start); a changed message,
count or end is an update. Every sample run, written in parts through the real FollowSource (cut at
line ends and mid-line, at the same run time in every file as a run grows) and replayed."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from functools import cache
from pathlib import Path

import pytest
from loading import batch, replay

from diag.follow import FOLLOWED
from diag.parsers.ingest import ParsedLog
from diag.parsers.lineparser import LineParser
from diag.pipeline import Pipeline, Update
from diag.report import Report
from diag.rules.engine import key
from diag.rules.finding import Finding
from diag.rules.settings import Settings
from diag.sources import FollowSource

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(p.name for p in (ROOT / "samples" / "runs").iterdir())
PARTS = 5                      # a growing run is written in this many parts
SHIFTS = (0, 9)                # bytes past the line start a cut falls (0: at a line end), file by file in turn:
                               # some files grow by whole lines, the others stop mid-line at every step
REPLAY_STEP_S = 600.0          # run seconds per replay step


@cache
def _batch(run: str) -> tuple[Report, tuple[ParsedLog, ...]]:
    source = batch(ROOT / "samples" / "runs" / run)
    return Pipeline(source, Settings()).once(), tuple(source.logs())


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    at = data.find(b"\n")
    while at >= 0:
        starts.append(at + 1)
        at = data.find(b"\n", at + 1)
    return starts


def _cuts(log: ParsedLog, data: bytes, parts: int, shift: int, lo: datetime, hi: datetime) -> list[int]:
    """Offsets where the file stands when the run (``lo`` to ``hi``) has reached each of ``parts``
    equal times (the first line stamped after that time; ``shift`` bytes into it), then its end."""
    first_line: dict[int, object] = {}
    for r in log.all_records():
        if r.ts is not None and r.line:
            first_line.setdefault(r.line, r.ts)
    parser = LineParser(log.year)   # a line without a record (noise) is stamped too: the run's clock moves on it
    for n, text in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
        if n not in first_line and (t := parser.line_time(text)) is not None:
            first_line[n] = t
    stamps = [t for _, t in sorted(first_line.items())]
    lines = sorted(first_line)
    starts = _line_starts(data)
    out = []
    for i in range(1, parts):
        if not stamps:
            out.append(len(data) * i // parts)
            continue
        t = lo + (hi - lo) * i / parts
        line = next((n for n, s in zip(lines, stamps, strict=True) if s > t), None)  # type: ignore[operator]
        at = len(data) if line is None else starts[min(line - 1, len(starts) - 1)]
        out.append(min(len(data), at + shift) if at < len(data) else at)
    return [*out, len(data)]


def _stamps(logs: Iterable[ParsedLog]) -> list[datetime]:
    followed = [lg for lg in logs if lg.kind in FOLLOWED]
    return [r.ts for lg in followed for r in lg.all_records() if r.ts is not None] + \
        [lg.last_ts for lg in followed if lg.last_ts is not None]


def _run_start(logs: Iterable[ParsedLog]) -> datetime:
    return min(_stamps(logs))


def _run_end(logs: Iterable[ParsedLog]) -> datetime:
    return max(_stamps(logs))


def _opened(updates: Iterable[Update]) -> Counter[tuple[str, str | None, str]]:
    return Counter(key(f) for u in updates for f in u.opened)


def _check(run: str, opened: Counter[tuple[str, str | None, str]], final: list[Finding], how: str) -> None:
    report, _ = _batch(run)
    want = Counter((f.code, f.endpoint) for f in report.findings)
    per_code = Counter((code, endpoint) for code, endpoint, _ in opened.elements())
    extra = {k: n for k, n in per_code.items() if n > want.get(k, 0)}
    assert not extra, f"{run} ({how}): opened live more often than the batch report has them: {extra}"
    assert all(n == 1 for n in opened.values()), f"{run} ({how}): reopened: {opened}"
    assert [key(f) for f in final] == [key(f) for f in report.findings], f"{run} ({how}): final report differs"


@pytest.mark.parametrize("run", RUNS)
def test_a_growing_run_opens_only_batch_findings_once(run: str, tmp_path: Path) -> None:
    _, logs = _batch(run)
    src = ROOT / "samples" / "runs" / run
    followed = {Path(lg.path).resolve(): lg for lg in logs if lg.kind in FOLLOWED}
    dst_root = tmp_path / run
    lo, hi = _run_start(logs), _run_end(logs)
    growing: dict[Path, tuple[bytes, list[int]]] = {}
    for path in sorted(src.rglob("*")):
        if path.is_dir():
            continue
        dst = dst_root / path.relative_to(src)
        dst.parent.mkdir(parents=True, exist_ok=True)
        log = followed.get(path.resolve())
        if log is None:
            shutil.copy(path, dst)  # the recipe and side files are there from the start
            continue
        data = path.read_bytes()
        dst.write_bytes(b"")
        shift = SHIFTS[len(growing) % len(SHIFTS)]
        growing[dst] = (data, _cuts(log, data, PARTS, shift, lo, hi))
    assert len(growing) >= len(SHIFTS), "both kinds of cut are exercised"
    clock = [lo]   # the wall clock of a live run: the time the run has reached
    pipeline = Pipeline(FollowSource([str(dst_root)], rescan_s=0.0), Settings(), wall=lambda c=clock: c[0])
    updates = []
    written = dict.fromkeys(growing, 0)
    for i in range(PARTS):
        clock[0] = lo + (hi - lo) * (i + 1) / PARTS
        for dst, (data, cuts) in growing.items():
            with dst.open("ab") as fh:
                fh.write(data[written[dst]:cuts[i]])
            written[dst] = cuts[i]
        updates.append(pipeline.step(force=True))
    last = pipeline.finish()
    assert last.report is not None
    _check(run, _opened([*updates, last]), list(last.report.findings), f"{PARTS} parts, cuts at line ends and +9")


@pytest.mark.parametrize("run", RUNS)
def test_a_replay_opens_only_batch_findings_once(run: str) -> None:
    wall = [0.0]
    source = replay(ROOT / "samples" / "runs" / run, speed=1.0, monotonic=lambda: wall[0])
    pipeline = Pipeline(source, Settings())
    updates = [pipeline.step(force=True)]
    while not source.finished:
        wall[0] += REPLAY_STEP_S
        updates.append(pipeline.step(force=True))
    assert updates[-1].report is not None
    _check(run, _opened(updates), list(updates[-1].report.findings), "replay")


def test_a_changed_count_is_an_update_not_a_reopening() -> None:
    from dataclasses import replace

    from diag.rules.engine import diff

    report, _ = _batch("prefill-bound")
    before = list(report.findings)
    after = [replace(f, message=f.message + " (more)") for f in before]
    opened, closed, updated = diff(before, after)
    assert not opened and not closed and len(updated) == len(before)
