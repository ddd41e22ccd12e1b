"""Live = batch (issue 21): following a growing run, or replaying it, opens only findings the batch
read of the finished run reports, each once per identity (code, endpoint, start); a changed message,
count or end is an update. Every sample run, written in parts through the real FollowSource (cut at
line ends and mid-line, at the same run time in every file as a run grows) and replayed."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest
from cutting import Cutter, cutter
from loading import replay, report_of

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


def _batch(run: str) -> Report:
    return report_of(ROOT / "samples" / "runs" / run)


def _cuts(cut: Cutter, path: Path, size: int, shift: int) -> list[int]:
    """Offsets where a log stands when the run has reached each of ``PARTS`` equal times (its first line
    stamped after that time; ``shift`` bytes into it), then its end."""
    out = []
    for i in range(1, PARTS):
        at = cut.at(path, cut.start + (cut.end - cut.start) * i / PARTS)
        out.append(min(size, at + shift) if at < size else at)
    return [*out, size]


def _opened(updates: Iterable[Update]) -> Counter[tuple[str, str | None, str]]:
    return Counter(key(f) for u in updates for f in u.opened)


def _check(run: str, opened: Counter[tuple[str, str | None, str]], final: list[Finding], how: str) -> None:
    report = _batch(run)
    want = Counter((f.code, f.endpoint) for f in report.findings)
    per_code = Counter((code, endpoint) for code, endpoint, _ in opened.elements())
    extra = {k: n for k, n in per_code.items() if n > want.get(k, 0)}
    assert not extra, f"{run} ({how}): opened live more often than the batch report has them: {extra}"
    assert all(n == 1 for n in opened.values()), f"{run} ({how}): reopened: {opened}"
    assert [key(f) for f in final] == [key(f) for f in report.findings], f"{run} ({how}): final report differs"


@pytest.mark.parametrize("run", RUNS)
def test_a_growing_run_opens_only_batch_findings_once(run: str, tmp_path: Path) -> None:
    cut = cutter(run)
    src = ROOT / "samples" / "runs" / run
    dst_root = tmp_path / run
    lo, hi = cut.start, cut.end
    growing: dict[Path, tuple[bytes, list[int]]] = {}
    for path in sorted(src.rglob("*")):
        if path.is_dir():
            continue
        dst = dst_root / path.relative_to(src)
        dst.parent.mkdir(parents=True, exist_ok=True)
        if path not in cut.logs:
            shutil.copy(path, dst)  # the recipe and side files are there from the start
            continue
        data = path.read_bytes()
        dst.write_bytes(b"")
        growing[dst] = (data, _cuts(cut, path, len(data), SHIFTS[len(growing) % len(SHIFTS)]))
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

    report = _batch("prefill-bound")
    before = list(report.findings)
    after = [replace(f, message=f.message + " (more)") for f in before]
    opened, closed, updated = diff(before, after)
    assert not opened and not closed and len(updated) == len(before)
