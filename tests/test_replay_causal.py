"""Causal replay (issue 33): what ``diag watch --replay`` shows at virtual time t is what a live run showed
at t. At five checkpoints of every sample's replay the report (verdicts: class, limiter, confidence,
concurrency; findings: code and endpoint; endpoint health) equals the report on a batch read of the run's
files cut at that time by their own stamps (``tests/cutting.py``, apart from the replay's schedule),
judged as a live run at t; the last checkpoint is the end, where it is the batch read of the whole run."""

from __future__ import annotations

import gzip
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from cutting import LOGS, check_opened, cutter
from loading import replay, report_of

from diag.files import find_runs
from diag.parsers.lineparser import LineParser
from diag.parsers.timestamps import STAMP_HINT
from diag.pipeline import Pipeline, Update, analyze, settled
from diag.report import Report
from diag.rules.engine import same
from diag.rules.settings import Settings
from diag.sources import BatchSource

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(p.name for p in (ROOT / "samples" / "runs").iterdir())
CHECKPOINTS = (0.08, 0.3, 0.55, 0.8, 1.0)   # fractions of the replay; 1.0: its end


def summary(report: Report) -> dict[str, object]:
    """What the checkpoints compare: the verdicts, the findings, the endpoints' health."""
    verdicts = report.verdicts
    assert verdicts is not None
    return {"verdicts": [(v.concurrency, v.cls, v.limiter, v.confidence) for v in (verdicts.run, *verdicts.points)],
            "findings": sorted((f.code, f.endpoint or "") for f in report.findings),
            "health": {e.id: e.health for e in report.endpoints}}


def _live_read(files: Path, t: datetime, before: Report | None, settings: Settings) -> Report:
    """The batch read of the cut files judged as a live run at ``t``: the findings settled by then and those
    shown at the checkpoint before (as :class:`Pipeline` keeps them)."""
    source = BatchSource(find_runs([str(files)])[0])
    source.poll()
    run = Pipeline(source, settings).assemble()
    shown = list(before.findings) if before is not None else []
    return analyze(run, settings, t, False, lambda f: any(same(f, g) for g in shown) or settled(f, run, t, settings))


@pytest.mark.parametrize("run", RUNS)
def test_the_replay_at_each_checkpoint_is_the_batch_read_of_the_files_cut_there(run: str, tmp_path: Path) -> None:
    """At each checkpoint the replay's report is the cut files' (judged live at t, with the findings shown at
    the checkpoint before, as the pipeline keeps them); it opens only the batch read's findings, each once."""
    cut = cutter(run)
    wall = [0.0]
    source = replay(ROOT / "samples" / "runs" / run, speed=1.0, monotonic=lambda: wall[0])
    assert (source.start, source.end) == (cut.start, cut.end), "the replay spans the run's logs"
    source.now()   # its clock starts: wall second 0 is the run's start (speed 1)
    settings = Settings()
    pipeline = Pipeline(source, settings)
    updates: list[Update] = []
    want: Report | None = None
    for k, fraction in enumerate(CHECKPOINTS):
        t = cut.start + (cut.end - cut.start) * fraction
        wall[0] = (t - cut.start).total_seconds()
        updates.append(pipeline.step(force=True))
        got = updates[-1].report
        assert got is not None and got.now == t
        assert got.run.clock is None or got.run.clock <= t, f"{run}: the run's clock passed the virtual time"
        if fraction == 1.0:
            assert source.finished
            want = report_of(ROOT / "samples" / "runs" / run)
        else:
            want = _live_read(cut.cut(t, tmp_path / f"at{k}"), t, want, settings)
        assert summary(got) == summary(want), f"{run} at {t:%H:%M:%S} ({fraction:.0%} of the replay)"
    check_opened(run, updates, got, "replay")


def test_a_replay_opens_no_stall_the_run_never_had_nor_shows_a_result_before_its_point_ended() -> None:
    """sweep-5xdep2 at 120x: decode-w0 was said to be "in loading weights for 18m26s" a minute in (its log's
    last line was read as the run's clock), and a point's benchmark result was on screen before the point had
    run. The batch read has no DIAG-S001; the replay's clock never passes the virtual time."""
    name = "sweep-5xdep2"
    assert "DIAG-S001" not in {f.code for f in report_of(ROOT / "samples" / "runs" / name).findings}
    wall = [0.0]
    source = replay(ROOT / "samples" / "runs" / name, speed=120.0, monotonic=lambda: wall[0])
    pipeline = Pipeline(source, Settings())
    source.now()
    steps = 0
    while not source.finished:
        wall[0] = 0.5 * steps if steps <= 10 else 1e6   # a run minute a step: start-up, the first point
        report = pipeline.step(force=True).report
        assert report is not None and report.now is not None
        assert "DIAG-S001" not in {f.code for f in report.findings}, f"at {report.now:%H:%M:%S}"
        assert report.run.clock is None or report.run.clock <= report.now
        for result in report.run.benchmark:
            assert result.started is None or result.started <= report.now
            assert not result.complete or (result.ended is not None and result.ended <= report.now), \
                f"the C={result.concurrency} result at {report.now:%H:%M:%S}, its point ended {result.ended:%H:%M:%S}"
        steps += 1
    assert steps == 12


def test_the_scan_of_a_file_reads_every_line_s_time_as_the_general_path_does() -> None:
    """The replay's schedule takes the common heads' times at once (:meth:`LineParser.scan_time`): they are
    the general path's on a line of every shape in the sample logs (its head, digits aside; its carriage
    returns; how many stamps it holds), in file order (the year goes on), and on every line of the shared
    real excerpts, when there."""
    paths = [p for run in RUNS for p, _ in find_runs([str(ROOT / "samples" / "runs" / run)])[0].of(*LOGS)]
    real = sorted((ROOT.parent / "shared" / "samples" / "real-logs").glob("*.log"))
    seen: set[tuple[str, bool, int]] = set()
    tried = 0
    for path in paths + real:
        lines = pl.Series(path.read_bytes().decode("utf-8", errors="replace").split("\n")).str.strip_suffix("\r")
        shapes = zip(lines.str.slice(0, 80).str.replace_all(r"\d", "0").to_list(), lines.str.contains("\r", literal=True),
                     lines.str.count_matches(STAMP_HINT), strict=True)
        fast, general = LineParser(2026), LineParser(2026)
        every = path in real
        for n, (line, shape) in enumerate(zip(lines.to_list(), shapes, strict=True), 1):
            if shape in seen and not every:
                continue
            seen.add(shape)
            tried += 1
            assert fast.scan_time(line) == general.line_time(line, advance=True), f"{path.name}:{n}"
    assert tried > 500


def test_a_compressed_log_replays_as_the_plain_one_and_the_files_stay_as_they_are(tmp_path: Path) -> None:
    """A gzip log is read as far as the virtual time has come, on one stream; the replay writes nothing."""
    run = tmp_path / "run"
    shutil.copytree(ROOT / "samples" / "runs" / "startup-stall", run)
    for log in (run / "logs").glob("*decode*.out"):
        log.with_name(log.name + ".gz").write_bytes(gzip.compress(log.read_bytes()))
        log.unlink()
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    wall = [0.0]
    source = replay(run, speed=1.0, monotonic=lambda: wall[0])
    source.now()
    pipeline = Pipeline(source, Settings())
    wall[0] = (source.end - source.start).total_seconds() / 4   # decode's logs go on for quarter the run
    quarter = pipeline.step(force=True).report
    assert quarter is not None
    packed = [lg for lg in quarter.run.sources if lg.path.endswith(".gz")]
    assert packed and all(0 < lg.size < len(gzip.decompress(Path(lg.path).read_bytes())) for lg in packed)
    wall[0] = 1e9
    final = pipeline.step(force=True).report
    assert source.finished and final is not None
    assert summary(final) == summary(Pipeline(BatchSource(find_runs([str(run)])[0]), Settings()).once())
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before
