"""`diag watch` headless core: snapshot builder, ring buffers, retention, replay, renderers, --once.

None of these tests start Textual; the core must work (and --once must print) without it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from loading import load_run, replay
from typer.testing import CliRunner

from diag.changes import Changes
from diag.files import Side
from diag.parsers.ingest import ParsedLog
from diag.parsers.layout import FileInfo
from diag.parsers.records import Fault, NixlFailure, StartupFact, StatsSample
from diag.rules import judge, present
from diag.rules.catalog import catalog
from diag.rules.finding import Finding
from diag.rules.runmodel import STATS_SCHEMA
from diag.rules.settings import Settings
from diag.sources import FollowSource
from diag.tui import state as st
from diag.tui.records import describe
from diag.tui.render import BLOCKS, header_text, kv_bar, node_prefix, spark, window_values

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "samples" / "runs"
T0 = datetime(2026, 8, 1, tzinfo=UTC)


def at_end(run):
    return run.end


@pytest.fixture(scope="module")
def prefill_snapshot() -> st.Snapshot:
    return st.WatchState(FollowSource([str(RUNS / "prefill-bound")]), clock=at_end).step()


@pytest.fixture(scope="module")
def kv_snapshot() -> st.Snapshot:
    return st.WatchState(FollowSource([str(RUNS / "kv-exhaustion")]), clock=at_end).step()


# ------------------------------------------------------------------ snapshot content
def test_snapshot_has_every_endpoint_header_and_findings(prefill_snapshot: st.Snapshot) -> None:
    snap = prefill_snapshot
    assert [e.id for e in snap.endpoints] == ["prefill-w0", "prefill-w1", "prefill-w2", "prefill-w3", "decode-w0"]
    # the side the verdict names as the limit, not decode's recipe-capacity warning (DIAG-K003)
    assert {e.id: (e.s.health, e.s.limiting) for e in snap.endpoints} == {
        **{f"prefill-w{i}": ("LIMITS", True) for i in range(4)}, "decode-w0": ("OK", False)}
    keys = [k for k, _ in snap.header]
    for k in ("job", "model", "topology", "build", "stage", "elapsed", "verdict", "tok/s", "queue"):
        assert k in keys, k
    head = dict(snap.header)
    assert head["elapsed"] == "21m" and "GPUs" in head["tok/s"] and head["stage"] == "completed"
    # the verdict, and figures over its steady window (not the idle tail: prefill's queue shows)
    assert head["verdict"] == "prefill-bound · high @2,048" and "C=2,048 steady" in head["tok/s"]
    assert head["queue"].startswith("P 174.5")
    codes = [(fr.state, fr.f.code) for fr in snap.findings]
    assert ("open", "DIAG-B001") in codes
    states = [s for s, _ in codes]
    assert states == sorted(states, key=lambda s: s != "open"), "open findings come first"
    assert snap.engines["decode-w0"] and len(snap.engines["decode-w0"]) == 8
    assert all(r.kind != "noise" for r in snap.records["decode-w0"])
    assert any(r.kind == "startup" for r in snap.records["decode-w0"])


def test_snapshot_is_immutable(prefill_snapshot: st.Snapshot) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        prefill_snapshot.seq = 99  # type: ignore[misc]
    with pytest.raises(TypeError):
        prefill_snapshot.records["x"] = ()  # type: ignore[index]
    assert isinstance(prefill_snapshot.endpoints, tuple) and isinstance(prefill_snapshot.findings, tuple)


def test_header_packs_and_drops_for_narrow_widths(prefill_snapshot: st.Snapshot) -> None:
    wide = header_text(prefill_snapshot, 118, 4).plain
    narrow = header_text(prefill_snapshot, 78, 4).plain
    assert "bench" in wide and len(wide.splitlines()) <= 4
    assert len(narrow.splitlines()) <= 4 and all(len(line) <= 78 for line in narrow.splitlines())
    assert "job" in narrow and "stage" in narrow and "verdict" in narrow


# ------------------------------------------------------------------ ring buffers and sparklines
def _stats(rows: list[tuple[int, str, float, float]]) -> pl.DataFrame:
    data = {k: [] for k in STATS_SCHEMA}
    for sec, eng, tps, kv in rows:
        vals = {"ts": T0 + timedelta(seconds=sec), "engine": eng, "file": "f", "line": 1, "prompt_tps": tps,
                "gen_tps": 0.0, "running": 1, "waiting": 0, "deferred": None, "preemptions": 0, "kv_usage": kv,
                "prefix_hit": None, "ext_hit": None}
        for k in STATS_SCHEMA:
            data[k].append(vals.get(k))  # the latency quantile columns stay null
    return pl.DataFrame(data, schema=STATS_SCHEMA)


def test_ring_sums_each_engines_latest_value_without_sawtooth() -> None:
    rows = [(s, "0", 100.0, 10.0) for s in range(0, 300, 10)] + [(s + 7, "1", 50.0, 30.0) for s in range(0, 300, 10)]
    ring = st.Ring()
    ring.update(_stats(sorted(rows)))
    inner = list(ring.points)[2:-2]
    assert inner and all(p[1] == 150.0 and p[3] == 20.0 for p in inner)
    assert all(p[0] % st.STEP_S == 0 for p in ring.points)


def test_ring_is_bounded_and_incremental() -> None:
    ring = st.Ring()
    rows: list[tuple[int, str, float, float]] = []
    for hour in range(3):
        rows += [(hour * 3600 + s, "0", float(s % 100), 50.0) for s in range(0, 3600, 10)]
        ring.update(_stats(rows))
        assert len(ring.points) <= st.SERIES_POINTS
    assert len(ring.points) == st.SERIES_POINTS
    last = ring.points[-1][0]
    assert last == (T0 + timedelta(seconds=3 * 3600)).timestamp()
    ts = [p[0] for p in ring.points]
    assert ts == sorted(set(ts)), "no duplicate or out-of-order points after incremental updates"


def test_spark_window_and_bar() -> None:
    assert spark([0, 1, 2, 3, 4, 5, 6, 7], 8) == "▁▂▃▄▅▆▇█"
    assert spark([None, 0.0, None, 8.0], 4) == " ▁ █"
    assert spark([None] * 5, 5) == "     "
    assert len(spark(list(range(360)), 10)) == 10
    pts = [((T0 + timedelta(seconds=s)).timestamp(), 1.0, 1.0, 5.0) for s in range(10, 610, 10)]
    vals = window_values(pts, pts[-1][0], 60, lambda p: p[3])
    assert vals == [5.0] * 6
    assert window_values(pts, pts[-1][0] + 3600, 60, lambda p: p[3]) == [None] * 6
    limits = st.limits_of(Settings())
    assert kv_bar(50.0, limits).plain.startswith("50.0 ") and kv_bar(None, limits).plain == "-"


def test_sparklines_bin_by_mean_on_a_shared_scale() -> None:
    """A drop to 0 in the last slots is not hidden by the maximum of its bin; a row on a shared top
    of twice its values draws half-height blocks; KV is on 0-100 %."""
    steady_then_drop = [100.0] * 27 + [0.0] * 3  # 30 slots (5 min) in 10 cells: the last cell is the drop
    assert spark(steady_then_drop, 10) == "█" * 9 + "▁"
    assert spark([100.0] * 28 + [0.0] * 2, 10)[-1] == "▃", "a partial drop: the bin's mean (33 %)"
    assert spark([50.0] * 10, 10, top=100.0) == "▅" * 10 and spark([50.0] * 10, 10) == "█" * 10
    assert spark([4.0] * 10, 10, top=100.0) == "▁" * 10, "prefill's 4 % KV is not a full bar"


def test_catalog_limits_style_the_cells(kv_snapshot) -> None:
    """wait, KV and preemptions take the severity style of their rule past its configured threshold."""
    from diag.tui.render import all_cells

    rules = catalog()
    limits = kv_snapshot.limits
    assert limits["kv"] == st.Limit(rules["DIAG-K001"].params["kv_usage"], "error", "DIAG-K001")
    assert limits["kv_rising"].value == rules["DIAG-K004"].params["kv_usage"]
    assert limits["wait"].value == rules["DIAG-B001"].params["waiting_high"]
    assert limits["pre"].value == rules["DIAG-K002"].params["min_count"]
    cells = all_cells(kv_snapshot, 5)
    dec, pre = cells["decode-w0"], cells["prefill-w0"]
    assert dec["kv"].style == "bold red" and dec["wait"].style == "yellow" and dec["pre"].style == "yellow"
    assert pre["kv"].style == "" and pre["wait"].style == "" and pre["pre"].style == ""
    tops = {eid: c["tps_spark"].plain for eid, c in cells.items()}
    level = {eid: [BLOCKS.index(c) for c in t if c != " "] for eid, t in tops.items()}
    assert max(level["prefill-w0"]) < 7, "not on its own scale (its own maximum would be a full block)"
    assert sum(level["decode-w0"]) > sum(level["prefill-w0"]), "one tok/s scale: decode (~30k) above prefill (~24k)"
    assert set(cells["prefill-w0"]["kv_spark"].plain) <= {"▁", " "}, "KV ~ on 0-100 %: 4 % stays low"
    strict = st.limits_of(Settings(overrides={"DIAG-K001": {"kv_usage": 99.9}}))
    assert strict["kv"].value == 99.9, "a configured threshold, not a literal"


def test_node_prefix_and_record_descriptions(prefill_snapshot: st.Snapshot) -> None:
    assert node_prefix(prefill_snapshot) == "gb200-r03-"
    text, tone = describe(Fault(line=3, cause="oom", message="CUDA out of memory"))
    assert tone == "fault" and "oom" in text
    assert describe(NixlFailure(line=1, ftype="transfer_failed", request_id="r1"))[1] == "warn"


# ------------------------------------------------------------------ retention and the 24 h bound
def test_compact_drops_old_periodic_keeps_pinned_and_caps_events_in_a_copy() -> None:
    log = ParsedLog("x.out", FileInfo(Path("x.out"), "worker", "decode", 0))
    log.records += [StartupFact(line=1, ts=T0, key="version", value="0.26.1")]
    log.records += [StatsSample(line=i, ts=T0 + timedelta(seconds=10 * i), variant="v1") for i in range(100)]
    log.records += [NixlFailure(line=200 + i, ts=T0 + timedelta(seconds=i), ftype="x") for i in range(50)]
    before = list(log.records)
    out = st.compact([log], T0 + timedelta(seconds=500), cap=20)
    assert log.records == before and len(log.records) == 151, "the log itself is untouched"
    new = out["x.out"]
    assert new is not log and new.records is not log.records and new.path == log.path
    assert st.dropped([log], out) == 50 + 30
    assert sum(isinstance(r, StatsSample) for r in new.records) == 50
    assert sum(isinstance(r, NixlFailure) for r in new.records) == 20
    assert isinstance(new.records[0], StartupFact)
    assert st.compact([new], T0 + timedelta(seconds=500), cap=20) == {}, "nothing more to drop: no copy"


def test_compacting_leaves_the_logs_of_earlier_runs_whole() -> None:
    """Retention trims copies the source adopts: a run built earlier keeps every record it had (the
    source only appends to the logs it holds)."""
    src = Synthetic(endpoints=3)
    state = st.WatchState(src, retain_s=1800, clock=lambda run: run.end)
    state.step()
    first = state.run
    held = {lg.path: list(lg.records) for lg in first.sources}
    for _ in range(3):
        state.step()
    assert all(list(lg.records[: len(held[lg.path])]) == held[lg.path] for lg in first.sources), "nothing removed"
    now = {lg.path: lg for lg in src.logs()}
    assert all(now[p] is not lg for p, lg in ((lg.path, lg) for lg in first.sources)), "the source adopted copies"
    assert max(lg.n_records for lg in src.logs()) < 3 * 65 + 1, "and the copies are trimmed"


class Synthetic:
    """64 decode endpoints, one stats line a minute each and a few NIXL failures; one hour a poll."""

    label = "synthetic"
    root = None
    skipped: list[tuple[str, str]] = []  # noqa: RUF012
    finished = False
    errors = ()

    def __init__(self, endpoints: int = 64) -> None:
        self._logs = [ParsedLog(f"/x/n{i:02d}_decode_w{i}.out",
                                FileInfo(Path(f"/x/n{i:02d}_decode_w{i}.out"), "worker", "decode", i, f"n{i:02d}"))
                      for i in range(endpoints)]
        for log in self._logs:
            log.records.append(StartupFact(line=1, ts=T0, key="version", value="0.26.1"))
        self.hour = 0
        self.line = 2

    def poll(self):
        out = []
        base = T0 + timedelta(hours=self.hour)
        for i, log in enumerate(self._logs):
            new = [StatsSample(line=self.line + k, ts=base + timedelta(seconds=60 * k + i % 60), variant="v1", engine=0,
                               prompt_tps=100.0, gen_tps=float(k), running=4, waiting=0, kv_usage=40.0, preemptions=0)
                   for k in range(60)]
            new += [NixlFailure(line=self.line + 100 + k, ts=base + timedelta(seconds=k), ftype="transfer_failed")
                    for k in range(5)]
            log.records.extend(new)
            out += [(log.path, r) for r in new]
        self.line += 200
        self.hour += 1
        return Changes(out, [])

    def logs(self):
        return self._logs

    def adopt(self, logs):
        self._logs = [logs.get(lg.path, lg) for lg in self._logs]

    def flush(self):
        return Changes([], [])

    def side(self):
        return Side()

    def now(self):
        return None


def test_memory_is_bounded_over_24h_with_64_endpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st, "EVENTS_CAP", 20)

    def findings_of(run):  # ten findings that change every hour: the closed list must stay bounded
        hour = max(ep.last_ts for ep in run.endpoints.values())
        return [Finding("DIAG-X001", "x", "warning", "m", endpoint=f"decode-w{i}", first_ts=hour, last_ts=hour)
                for i in range(10)]

    monkeypatch.setattr(judge, "evaluate", lambda run, rules: findings_of(run))
    state = st.WatchState(Synthetic(), retain_s=1800, clock=lambda run: run.end)
    sizes = []
    started = time.monotonic()
    for _ in range(24):
        snap = state.step()
        sizes.append(st.memory_footprint(state))
    assert len(snap.endpoints) == 64
    last = sizes[-1]
    assert last["max_ring"] <= st.SERIES_POINTS
    assert last["ring_points"] <= 64 * st.SERIES_POINTS
    assert last["closed"] <= st.CLOSED_KEEP
    assert last["snapshot_records"] <= 64 * (st.EVENTS_KEEP + st.STATS_KEEP)
    assert last["model_records"] <= 64 * (1 + 31 + 20)  # pinned + 30 min of stats + capped events
    assert sizes[23] == sizes[12], "no growth once the buffers are full"
    assert time.monotonic() - started < 60


# ------------------------------------------------------------------ replay
def test_replay_releases_records_in_time_order_and_pauses() -> None:
    run = load_run([str(RUNS / "kv-exhaustion")])
    wall = [0.0]
    src = replay(RUNS / "kv-exhaustion", speed=60, monotonic=lambda: wall[0])
    recs, added, _ = src.poll()
    start = src.now()
    assert added and all(r.ts is None or r.ts <= start for _, r in recs)
    wall[0] = 10.0  # 10 s of wall time = 10 min of the run
    recs, _, _ = src.poll()
    assert recs and src.now() == start + timedelta(minutes=10)
    stamped = [r.ts for _, r in recs if r.ts]
    assert stamped == sorted(stamped)
    src.pause()
    wall[0] = 100.0
    assert src.now() == start + timedelta(minutes=10) and src.poll()[0] == []
    src.resume()
    wall[0] = 1000.0
    src.poll()
    assert src.finished and src.now() == max(r.ts for s in run.sources for r in s.all_records() if r.ts)
    total = sum(s.n_records for s in run.sources)
    assert sum(len(log.records) for log in src.logs()) == total


def test_replay_through_the_state_opens_kv_findings_midway() -> None:
    wall = [0.0]
    state = st.WatchState(replay(RUNS / "kv-exhaustion", speed=60, monotonic=lambda: wall[0]))
    opened: list[str] = []
    seen_ok = False
    while True:
        snap = state.step()
        opened += [f.code for f in snap.opened]
        # serving before its KV fills: OK (its recipe-capacity warning, DIAG-K003, colours nothing)
        seen_ok |= snap.endpoint("decode-w0") is not None and snap.endpoint("decode-w0").s.health == "OK"
        if snap.done:
            break
        wall[0] += 2.0
    assert seen_ok and "DIAG-K001" in opened
    assert snap.endpoint("decode-w0").s.health == "CRIT"
    assert snap.label.startswith("replay")


# ------------------------------------------------------------------ the command
def test_watch_usage_errors_exit_2() -> None:
    from diag.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["watch"])
    assert r.exit_code == 2 and "give a run directory" in r.output
    r = runner.invoke(app, ["watch", "--window", "7", str(RUNS / "healthy")])
    assert r.exit_code == 2
    r = runner.invoke(app, ["watch", str(RUNS / "no-such-run")])
    assert r.exit_code == 2 and "no such file" in r.output
    r = runner.invoke(app, ["watch", str(RUNS / "healthy")])  # CliRunner's stdin is not a terminal
    assert r.exit_code == 2 and "--once" in r.output


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["COLUMNS"] = "200"
    return env


def test_once_names_every_endpoint_and_b001() -> None:
    p = subprocess.run([sys.executable, "-m", "diag", "watch", "--once", "samples/runs/prefill-bound"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=_env())
    assert p.returncode == 0, p.stderr
    for ep in ("prefill-w0", "prefill-w1", "prefill-w2", "prefill-w3", "decode-w0"):
        assert ep in p.stdout
    assert "DIAG-B001" in p.stdout and "\x1b[" not in p.stdout


def test_once_runs_without_textual() -> None:
    code = ("import sys; sys.modules['textual'] = None\n"
            "from diag.cli import main; sys.argv = ['diag', 'watch', '--once', '--now', 'end', "
            "'samples/runs/engine-crash']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 1, e.code  # engine-crash has errors: exit 1, like diag tail\n"
            "assert 'textual' not in [m.split('.')[0] for m in sys.modules if sys.modules[m] is not None]\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env=_env())
    assert p.returncode == 0, p.stderr
    assert "DOWN" in p.stdout and "DIAG-E001" in p.stdout


# ------------------------------------------------------------------ what the plots read (issue 17)
def test_ring_carries_queues_preemptions_and_each_engines_kv() -> None:
    rows = [(s, "0", 100.0, 10.0) for s in range(0, 300, 10)] + [(s + 7, "1", 50.0, 30.0) for s in range(0, 300, 10)]
    df = _stats(sorted(rows)).with_columns(pl.when(pl.int_range(pl.len()) == 5).then(3).otherwise(0).alias("preemptions"))
    ring = st.Ring()
    ring.update(df)
    assert ring.engines == ["0", "1"]
    inner = list(ring.points)[2:-2]
    assert all(p.running == 2 and p.waiting == 0 and p.engine_kv == (10.0, 30.0) for p in inner)
    assert sum(p.preempt for p in ring.points) == 3, "a stats line's preemptions land in exactly one slot"


def test_snapshot_carries_engine_names_threshold_and_a_findings_log() -> None:
    snap = st.WatchState(FollowSource([str(RUNS / "kv-exhaustion")]), clock=at_end).step()
    decode = snap.endpoint("decode-w0")
    assert decode is not None and decode.engine_names == tuple(str(i) for i in range(8))
    assert sum(p.preempt for p in decode.series) == decode.s.preemptions
    from diag.rules.catalog import catalog
    assert snap.kv_threshold == catalog()["DIAG-K001"].params["kv_usage"]
    assert {e.f.code for e in snap.log} >= {"DIAG-K001"} and all(e.event == "start" for e in snap.log)


def test_plot_set_series_for_the_run_and_one_endpoint() -> None:
    from diag.tui.plotdata import KV_SERIES_MAX, plot_set

    snap = st.WatchState(FollowSource([str(RUNS / "kv-exhaustion")]), clock=at_end).step()
    run = plot_set(snap, None, 15)
    assert [c.key for c in run.charts] == ["rate", "queues", "kv", "preempt"]
    rate = run.chart("rate")
    assert snap.isl_osl == (8192, 1024) and rate.title == "prefill vs decode req/s"
    assert [s.label for s in rate.series] == ["prefill prompt/ISL 8,192", "decode gen/OSL 1,024"]
    pre, dec = (sorted(s.ys)[len(s.ys) // 2] for s in rate.series)  # medians: the steady state
    assert 10 < pre < 14 and 0.85 < pre / dec < 1.15, "req/s: the two sides' rates are comparable"
    for chart in run.charts:  # round ticks from 0 to the top, the data below the top
        assert chart.yticks[0] == 0 and chart.ymax == chart.yticks[-1]
        labels = [present.compact(t) for t in chart.yticks]
        assert [float(x[:-1]) * 1000 if x.endswith("k") else float(x) for x in labels] == list(chart.yticks)
        assert max((max(s.ys) for s in chart.series if s.ys), default=0) <= chart.ymax
    assert run.chart("kv").yticks == (0, 20, 40, 60, 80, 100)
    assert [present.compact(t) for t in rate.yticks] == ["0", "5", "10", "15"]
    assert len(run.chart("queues").series) == 4 and len(run.chart("kv").series) == 5
    assert len(run.chart("preempt").series) == 2
    assert run.chart("kv").hlines[0][0] == snap.kv_threshold
    assert {s.code for s in run.chart("kv").spans} >= {"DIAG-K001"}
    assert all(-15 <= x <= 0 for s in run.charts[0].series for x in s.xs)
    one = plot_set(snap, "decode-w0", 15)
    assert len(one.chart("kv").series) == 8 and len(one.chart("rate").series) == 2
    assert max(one.chart("kv").series[0].ys) > snap.kv_threshold
    assert sum(one.chart("preempt").series[0].ys) > 0
    narrow = plot_set(snap, "decode-w0", 15, columns=20)
    assert all(len(s.xs) <= 20 for c in narrow.charts for s in c.series), "binned to the plot's columns"
    assert len(plot_set(snap, "decode-w0", 1).chart("rate").series[0].xs) <= 6
    assert KV_SERIES_MAX == 8


def test_round_ticks() -> None:
    from diag.tui.plotdata import ticks

    assert ticks(0, 109885.2) == (0, 50000, 100000, 150000)
    assert [present.compact(t) for t in ticks(0, 152019.0)] == ["0", "50.0k", "100k", "150k", "200k"]
    assert [present.compact(t) for t in ticks(-1, 0)] == ["-1", "-0.8", "-0.6", "-0.4", "-0.2", "0"]
    assert ticks(-5, 0) == (-5, -4, -3, -2, -1, 0) and ticks(-60, 0) == (-60, -40, -20, 0)
    assert ticks(0, 44) == (0, 10, 20, 30, 40, 50)


def test_plot_set_caps_kv_lines_and_reads_only_the_window() -> None:
    from diag.tui.plotdata import KV_SERIES_MAX, in_window, plot_set

    snap = st.WatchState(FollowSource([str(RUNS / "kv-exhaustion")]), clock=at_end).step()
    base = snap.endpoints[0]
    many = tuple(dataclasses.replace(base, s=dataclasses.replace(base.s, id=f"prefill-w{i}")) for i in range(20))
    big = dataclasses.replace(snap, endpoints=many)
    assert len(plot_set(big, None, 15).chart("kv").series) == KV_SERIES_MAX
    assert plot_set(big, None, 15).chart("kv").series[-1].label == "max of 13 others"
    pts = [st.Point(float(t), 1.0, 1.0, 1.0) for t in range(0, 1000, 10)]
    assert [p.t for p in in_window(pts, 900, 950)] == [910, 920, 930, 940, 950]


def test_human_durations() -> None:
    assert [present.duration(s, coarse=True) for s in (None, 12, 119, 240, 7199, 3 * 3600, 2301 * 3600)] == \
        ["-", "12s", "119s", "4m", "119m", "3h", "95d"]
