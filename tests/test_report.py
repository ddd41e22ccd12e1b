"""`diag report`: the Pareto frontier (ties, dominated points with equal throughput), the verdict per
sweep point, numbers equal to `diag tail --format json`, the JSON schema, text, and the HTML file
loaded offline in headless Chromium (mandatory in CI: DIAG_REQUIRE_CHROMIUM=1)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from loading import report_of
from schemas import validate

from diag.emit.html import PLOTLY_BUNDLE, SET_ASIDE_ROWS, series_figure, window_labels
from diag.report_doc import build
from diag.rules.present import colour_of
from diag.sla import parse_sla
from diag.sweep import pareto_front

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["samples/runs/sweep-4xdep2", "samples/runs/sweep-5xdep2"]
SCREENSHOT = ROOT / "samples" / "out" / "report-sweep.png"
PAGE_BUDGET = 1_500_000   # bytes: the page of the two sweep samples, plotly.js included
WIDTH = 1400              # px: the page must not scroll sideways at this width


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return run_diag(*args)


@pytest.fixture(scope="module")
def doc() -> dict:
    res = _diag("report", *SWEEP, "--format", "json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


# ---------------------------------------------------------------- the frontier
def test_frontier_keeps_exact_ties_and_drops_dominated_points_with_equal_throughput() -> None:
    xy = [(10.0, 100.0), (10.0, 100.0), (20.0, 50.0), (5.0, 100.0), (20.0, 40.0), (30.0, 10.0), (1.0, 99.0)]
    assert pareto_front(xy) == [True, True, True, False, False, True, False]
    assert pareto_front([]) == []
    assert pareto_front([(1.0, 1.0)]) == [True]


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=25))
def test_frontier_is_exactly_the_undominated_points(raw: list[tuple[int, int]]) -> None:
    xy = [(float(x), float(y)) for x, y in raw]
    on = pareto_front(xy)
    for i, (x, y) in enumerate(xy):
        dominated = any(a >= x and b >= y and (a, b) != (x, y) for a, b in xy)
        assert on[i] == (not dominated), (xy, i)


def test_frontier_on_a_real_tie_and_without_invalid_points() -> None:
    """prefill-bound: 1024 and 2048 have the same tok/s per user, 2048 a little less throughput per GPU;
    nixl-failures lost requests to failed KV transfers at every concurrency: transfer-bound, never on the
    frontier. (A target every
    valid point meets: the frontier here is about ties and validity, test_report_sla about the target.)"""
    d = build([report_of(ROOT / "samples/runs/prefill-bound"), report_of(ROOT / "samples/runs/nixl-failures")],
              parse_sla("ttft=600s,tpot=1s"))
    pts = {(p["run"], p["concurrency"]): p for p in d["points"]}
    a, b = pts["prefill-bound", 1024], pts["prefill-bound", 2048]
    assert a["tok_s_per_user"] == b["tok_s_per_user"] and a["tok_s_per_gpu"]["working"] > b["tok_s_per_gpu"]["working"]
    assert a["frontier"] == {"working": True, "allocated": True}
    assert b["frontier"] == {"working": False, "allocated": False}
    for c in (512, 1024):
        p = pts["nixl-failures", c]
        assert p["verdict"] == "transfer-bound" and p["limiter"] == "kv-transfer failures"
        assert "requests failed" in p["reason"] and not any(p["frontier"].values())


# ---------------------------------------------------------------- verdicts
def test_verdict_per_sweep_point(doc: dict) -> None:
    got = {(p["run"], p["concurrency"]): (p["verdict"], p["limiter"]) for p in doc["points"]}
    assert got == {("sweep-4xdep2", 256): ("under-loaded", None), ("sweep-4xdep2", 512): ("under-loaded", None),
                   ("sweep-4xdep2", 1024): ("healthy", None), ("sweep-4xdep2", 2048): ("prefill-bound", None),
                   ("sweep-5xdep2", 256): ("under-loaded", None), ("sweep-5xdep2", 512): ("under-loaded", None),
                   ("sweep-5xdep2", 1024): ("healthy", None), ("sweep-5xdep2", 2048): ("decode-bound", "kv-capacity")}
    by = {(p["run"], p["concurrency"]): p for p in doc["points"]}
    assert [e["code"] for e in by["sweep-4xdep2", 2048]["evidence"] if e["kind"] == "finding"] == ["DIAG-B001"]
    assert "DIAG-K001" in {e.get("code") for e in by["sweep-5xdep2", 2048]["evidence"]}
    for p in doc["points"]:   # every verdict carries the figures of its own window and its next experiment
        fig = [e for e in p["evidence"] if e["kind"] == "figures"]
        assert len(fig) == 1 and fig[0]["window_s"] > 0 and p["experiments"]
        if p["verdict"] in ("healthy", "under-loaded"):
            assert not [e for e in p["evidence"] if e["kind"] == "finding"]
    crash = build([report_of(ROOT / "samples/runs/engine-crash")])["points"]
    assert [(p["concurrency"], p["verdict"]) for p in crash] == [(512, "under-loaded"), (1024, "invalid")]


# ---------------------------------------------------------------- same numbers as tail
def test_report_numbers_equal_tail_json(doc: dict) -> None:
    validate(doc, "report")
    tail = json.loads(_diag("tail", *SWEEP, "--format", "json").stdout)["runs"]
    assert [r["label"] for r in doc["runs"]] == ["sweep-4xdep2", "sweep-5xdep2"]
    for run, t in zip(doc["runs"], tail, strict=True):
        results = {r["concurrency"]: r for r in t["benchmark"]["results"]}
        points = [p for p in doc["points"] if p["run"] == run["label"]]
        assert sorted(p["concurrency"] for p in points) == sorted(results)
        for p in points:
            r = results[p["concurrency"]]
            for key in ("total_token_throughput", "output_throughput", "request_throughput", "median_tpot_ms",
                        "median_ttft_ms", "mean_ttft_ms", "successful_requests", "failed_requests"):
                assert p[key] == r.get(key), (run["label"], p["concurrency"], key)
            assert (p["started"], p["ended"]) == (r["started"], r["ended"])
            assert p["tok_s_per_user"] == round(1000 / r["median_tpot_ms"], 2)
            tpg = t["benchmark"]["tokens_per_gpu"]
            assert p["gpus"] == {"working": tpg["working_gpus"], "allocated": tpg["allocated_gpus"]}
            for d in ("working", "allocated"):
                assert p["tok_s_per_gpu"][d] == round(r["total_token_throughput"] / p["gpus"][d], 1)
        within = [p for p in points if p["sla"]["meets"] and p["verdict"] != "invalid"]   # best within the target
        best = max(within, key=lambda p: p["tok_s_per_gpu"]["working"])
        assert (run["best"]["concurrency"], run["best"]["tok_s_per_gpu"]) == (best["concurrency"], best["tok_s_per_gpu"])
        assert run["findings"] == t["summary"]["findings"]
        want = sorted((f["code"], f["first_ts"], f["last_ts"]) for f in t["findings"] if f["first_ts"])
        assert sorted((w["code"], w["first_ts"], w["last_ts"]) for w in doc["windows"]
                      if w["run"] == run["label"]) == want
    assert {(r["endpoint"]) for r in doc["series"] if r["run"] == "sweep-5xdep2"} == {
        e["id"] for e in tail[1]["endpoints"]}


def test_run_vs_run_diff(doc: dict) -> None:
    (diff,) = doc["diffs"]
    assert (diff["a"], diff["b"]) == ("sweep-4xdep2", "sweep-5xdep2")
    config = {c["key"]: (c["a"], c["b"]) for c in diff["config"]}
    assert config["topology"] == ("4xDEP2 + 1xDEP8", "5xDEP2 + 1xDEP8")
    assert config["gpus.working_gpus"] == (16, 18) and config["gpus.allocated_gpus"] == (16, 20)
    assert not [k for k in config if ".flag." in k]   # the same flags ran on both
    assert {(f["code"], f["only_in"]) for f in diff["findings"]} == {
        ("DIAG-B001", "sweep-4xdep2"), ("DIAG-K001", "sweep-5xdep2"), ("DIAG-K002", "sweep-5xdep2")}
    assert diff["delta_basis"].startswith("at equal output tok/s per user")


def _line(x: float, p: dict, q: dict, d: str) -> float:
    """tok/s per ``d`` GPU at ``x`` tok/s/user on the straight line between points ``p`` and ``q``."""
    (x0, y0), (x1, y1) = ((r["tok_s_per_user"], r["tok_s_per_gpu"][d]) for r in (p, q))
    return round(y0 + (x - x0) / (x1 - x0) * (y1 - y0), 1)


def test_run_vs_run_delta_is_at_equal_tok_s_per_user(doc: dict) -> None:
    """Each run's curve is its own frontier of valid points: 4xDEP2 drops C=1024 (13.94 tok/s/user, 7,004.5
    tok/s/GPU), which its C=2048 beats on both (19.0, 9,541.0). The rows are every tok/s/user either curve
    measured inside both ranges (19.0 .. 27.11; 5xDEP2's 27.5 lies outside), the other run interpolated."""
    (diff,) = doc["diffs"]
    pts = {(p["run"], p["concurrency"]): p for p in doc["points"]}
    a, b = "sweep-4xdep2", "sweep-5xdep2"
    rows = {r["tok_s_per_user"]: r for r in diff["tps_per_gpu"]}
    assert list(rows) == [19.0, 22.14, 22.39, 27.11]
    assert [[(m["run"], m["concurrency"]) for m in r["measured"]] for r in rows.values()] == [
        [(a, 2048)], [(a, 512)], [(b, 512)], [(a, 256)]]
    assert rows[19.0]["working"] == {"a": 9541.0, "b": 6136.5, "delta": -3404.5, "delta_pct": -35.7}
    assert rows[22.39]["working"] == {"a": 5546.8, "b": 5162.2, "delta": -384.6, "delta_pct": -6.9}
    assert rows[27.11]["allocated"] == {"a": 3628.7, "b": 3073.2, "delta": -555.5, "delta_pct": -15.3}
    for d in ("working", "allocated"):   # the same figures from the points, by hand
        assert rows[19.0][d]["b"] == _line(19.0, pts[b, 1024], pts[b, 512], d)
        assert rows[22.14][d]["b"] == _line(22.14, pts[b, 1024], pts[b, 512], d)
        assert rows[22.39][d]["a"] == _line(22.39, pts[a, 512], pts[a, 256], d)
        assert rows[27.11][d]["b"] == _line(27.11, pts[b, 512], pts[b, 256], d)
        for x, r in rows.items():
            assert r[d]["delta"] == round(r[d]["b"] - r[d]["a"], 1), (x, d)
    # not at equal concurrency: at C=512 the two runs differ by -486.2, at equal tok/s/user by -414.4
    assert pts[b, 512]["tok_s_per_gpu"]["working"] - pts[a, 512]["tok_s_per_gpu"]["working"] == pytest.approx(-486.2)
    assert rows[22.14]["working"]["delta"] == -414.4


def test_text_summary() -> None:
    res = _diag("--no-color", "report", *SWEEP, "--format", "text")
    assert res.returncode == 0, res.stderr
    for text in ("4xDEP2 + 1xDEP8", "5xDEP2 + 1xDEP8", "prefill-bound", "decode-bound", "frontier per working GPU",
                 "frontier per allocated GPU", "DIAG-K001 kv-cache-exhaustion [decode-w0]: only in sweep-5xdep2"):
        assert text in res.stdout, text


def test_text_postmortem() -> None:
    """A failed run's postmortem under the text summary: when, the root cause with its owner, the first error;
    a run that did not fail has none."""
    res = _diag("--no-color", "report", "samples/runs/engine-crash", "samples/runs/healthy",
                "--format", "text")
    assert res.returncode == 1, res.stderr   # a run failed
    log = "samples/runs/engine-crash/logs/gb200-r05-n15_decode_w0.out:703"
    assert "engine-crash: failed at 04:03:01" in res.stdout
    assert "root cause: decode-w0: CUDA out of memory — owner engine" in res.stdout
    assert "first error: CUDA out of memory at" in res.stdout and log in res.stdout
    assert "set aside: 16 consequence(s) after the failure, 0 warning(s)" in res.stdout
    assert "healthy: failed" not in res.stdout


def test_usage_errors() -> None:
    res = _diag("report", "samples/runs/does-not-exist")
    assert res.returncode == 2 and res.stderr.startswith("diag report:") and "Traceback" not in res.stderr


# ---------------------------------------------------------------- the HTML in a real browser
def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    reason = "chromium is not installed (apt-get install chromium; .ci/run installs it)"
    if os.environ.get("DIAG_REQUIRE_CHROMIUM") == "1":
        pytest.fail(reason + " and DIAG_REQUIRE_CHROMIUM=1")
    pytest.skip(reason)


PROBE = """<script>
window.__diagErrors = [];
window.addEventListener('error', function (e) { window.__diagErrors.push(String(e.message)); });
var _err = console.error; console.error = function () { window.__diagErrors.push(Array.from(arguments).join(' ')); _err.apply(console, arguments); };
function texts(root, sel) { return Array.from(root.querySelectorAll(sel)).map(function (t) { return t.textContent; }); }
window.addEventListener('load', function () { setTimeout(function () {
  var out = {errors: window.__diagErrors, plots: {}, width: window.innerWidth,
             scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth};
  document.querySelectorAll('.js-plotly-plot').forEach(function (gd) {
    out.plots[gd.id] = {traces: gd.data.map(function (t) { return {name: t.name, n: (t.x || []).length,
      visible: t.visible !== false, colour: t.line && t.line.color}; }), shapes: (gd.layout.shapes || []).length,
      drawn: gd.querySelectorAll('.scatterlayer .trace, .barlayer .trace').length,
      xticks: texts(gd, '.xaxislayer-above text'),
      yticks: Array.from(gd.querySelectorAll('.yaxislayer-above')).map(function (g) { return texts(g, 'text'); }),
      labels: Array.from(gd.querySelectorAll('.annotation-text-g')).map(function (a) {
        var r = a.getBoundingClientRect(); return {text: a.textContent, x0: r.left, x1: r.right, y0: r.top,
        y1: r.bottom}; })};
  });
  var pre = document.createElement('pre'); pre.id = 'diag-probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
}, 500); });
</script>"""
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=0",
                 "--virtual-time-budget=10000"]


def _browser(chromium: str, *args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium, *BROWSER_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              text=True, timeout=180)


@pytest.fixture(scope="session")
def chromium() -> str:
    return _chromium()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report page of the two sweep samples, written by the command."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    res = _diag("report", *SWEEP, "-o", str(out))
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="module")
def probed(page: Path, chromium: str) -> dict:
    """The page as headless Chromium at 1400 px draws it, offline: what each plot holds and shows, the
    console's errors, the page's width."""
    probe = page.with_name("probed.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    run = _browser(chromium, f"--window-size={WIDTH},1000", "--dump-dom", probe.as_uri())
    m = re.search(r'<pre id="diag-probe">(.*?)</pre>', run.stdout, re.S)
    assert m, f"no probe output; stderr: {run.stderr[-2000:]}"
    import html as html_lib

    got = json.loads(html_lib.unescape(m.group(1)))
    got["console"] = [ln for ln in run.stderr.splitlines() if "CONSOLE" in ln and ("rror" in ln or "Uncaught" in ln)]
    return got


def test_html_report_loads_offline_in_headless_chromium(page: Path, probed: dict, chromium: str, doc: dict) -> None:
    text = page.read_text(encoding="utf-8")
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)\s*=", text), "the page loads something external"
    assert probed["errors"] == [] and probed["console"] == [], (probed["errors"], probed["console"])
    plots = probed["plots"]
    assert set(plots) == {"pareto", "curves", "series-0", "series-1", "delta-0"}
    # Pareto: per denominator one series per run (4 points each) and the frontier; only "working" shown
    pareto = plots["pareto"]["traces"]
    assert len(pareto) == 2 * (2 + 1)
    assert [t["n"] for t in pareto] == [4, 4, len(doc["frontier"]["working"]), 4, 4, len(doc["frontier"]["allocated"])]
    assert [t["visible"] for t in pareto] == [True, True, True, False, False, False]
    assert plots["pareto"]["drawn"] == 3
    assert [t["n"] for t in plots["curves"]["traces"]] == [4] * 6 and plots["curves"]["drawn"] == 6
    for i, (run_label, endpoints) in enumerate((("sweep-4xdep2", 5), ("sweep-5xdep2", 6))):
        series = plots[f"series-{i}"]
        assert len(series["traces"]) == endpoints * 5 and series["drawn"] == endpoints * 5
        rows = [r for r in doc["series"] if r["run"] == run_label]
        assert sum(t["n"] for t in series["traces"]) == 5 * len(rows)
        windows = [w for w in doc["windows"] if w["run"] == run_label]
        steps = [s for s in doc["steps"] if s["run"] == run_label]
        assert series["shapes"] == len(windows) + len(steps) and len(steps) == 4
    assert [t["n"] for t in plots["delta-0"]["traces"]] == [4, 4]
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    shot = _browser(chromium, f"--window-size={WIDTH},5200", f"--screenshot={SCREENSHOT}", page.as_uri())
    assert SCREENSHOT.is_file() and SCREENSHOT.stat().st_size > 50_000, shot.stderr[-2000:]


def test_page_ships_the_partial_plotly_bundle_and_stays_small(page: Path) -> None:
    """The basic partial bundle (scatter, bar, pie) inlined once, not the 4.8 MB one with maps; its
    plotly.js is the major version plotly.py writes figures for."""
    import plotly.offline

    text = page.read_text(encoding="utf-8")
    assert page.stat().st_size <= PAGE_BUDGET, page.stat().st_size
    bundle = PLOTLY_BUNDLE.read_text(encoding="utf-8")
    m = re.search(r"plotly\.js \(basic - minified\) v(\d+)\.", bundle[:200])
    assert m and m.group(1) == plotly.offline.get_plotlyjs_version().split(".")[0]
    assert text.count(bundle) == 1 and text.count("plotly.js (") == 1


def test_concurrency_ticks_are_the_sweeps_values(probed: dict) -> None:
    assert probed["plots"]["curves"]["xticks"] == ["256", "512", "1,024", "2,048"] * 3


def test_no_horizontal_scroll_at_1400_px(probed: dict) -> None:
    assert probed["width"] == WIDTH   # the window (scroll bar included); the page fits inside it
    assert probed["scrollWidth"] <= probed["clientWidth"] <= WIDTH, (probed["scrollWidth"], probed["clientWidth"])


def test_single_run_charts_start_at_zero_with_round_ticks(probed: dict) -> None:
    """Each run's endpoint plots: tok/s, running/waiting from 0, KV on 0-100 %, whole tick labels (no
    '5,658.5 ... 5,660' of a flat series zoomed into its noise)."""
    for i in (0, 1):
        prompt, gen, queue, kv = probed["plots"][f"series-{i}"]["yticks"]
        for ticks in (prompt, gen, queue):
            assert ticks[0] == "0" and all(re.fullmatch(r"[0-9,]+k?", t) for t in ticks), ticks
        assert kv == ["0 %", "25 %", "50 %", "75 %", "100 %"]
    for ticks in probed["plots"]["curves"]["yticks"]:
        assert ticks[0] == "0", ticks


def _overlap(a: dict, b: dict) -> bool:
    return a["x0"] < b["x1"] and b["x0"] < a["x1"] and a["y0"] < b["y1"] and b["y0"] < a["y1"]


def test_finding_labels_do_not_collide(probed: dict) -> None:
    """K001 and K002 of sweep-5xdep2 start 5 s apart: one label for both ('DIAG-K0012' before)."""
    for i in (0, 1):
        labels = probed["plots"][f"series-{i}"]["labels"]
        assert not [(a["text"], b["text"]) for k, a in enumerate(labels) for b in labels[k + 1:] if _overlap(a, b)]
    assert "DIAG-K001 · DIAG-K002" in [lab["text"] for lab in probed["plots"]["series-1"]["labels"]]


def test_window_labels_group_close_starts_and_stagger_neighbours() -> None:
    w = [{"code": c, "name": c.lower(), "endpoint": None, "message": "m", "first_ts": f"2026-01-01T00:{m:02d}:00"}
         for c, m in (("A", 0), ("B", 1), ("C", 30), ("D", 31), ("E", 59))]
    got = window_labels(w, ("2026-01-01T00:00:00", "2026-01-01T01:00:00"))
    assert [(g["text"], g["level"]) for g in got] == [("A · B", 0), ("C · D", 1), ("E", 0)]
    assert got[0]["hover"] == "A a: m<br>B b: m"


def test_endpoint_colours_follow_the_name_whatever_the_run_order(probed: dict) -> None:
    first = build([report_of(ROOT / run) for run in SWEEP])
    second = build([report_of(ROOT / run) for run in reversed(SWEEP)])
    labels = [r["label"] for r in first["runs"]]
    assert [r["label"] for r in second["runs"]] == labels[::-1]

    def colours(doc: dict) -> dict[tuple[str, str], str]:
        return {(run, t.name): t.line.color for run in labels for t in series_figure(doc, run).data}

    assert colours(first) == colours(second)
    assert {name: colour for (_, name), colour in colours(first).items()} == {
        name: colour_of(name) for (_, name) in colours(first)}
    for i in (0, 1):   # and so the browser draws them
        assert {t["name"]: t["colour"] for t in probed["plots"][f"series-{i}"]["traces"]} == {
            t["name"]: colour_of(t["name"]) for t in probed["plots"][f"series-{i}"]["traces"]}


# ---------------------------------------------------------------- postmortem and timeline (issue 35)
CRASH, HEALTHY = "samples/runs/engine-crash", "samples/runs/healthy"


@pytest.fixture(scope="module")
def crash_doc() -> dict:
    """The report document of a failed run and a healthy one, as ``diag report --format json`` builds it."""
    return json.loads(json.dumps(build([report_of(CRASH), report_of(HEALTHY)]), default=str))


def test_report_carries_each_runs_postmortem_and_timeline_as_tail_json(crash_doc: dict) -> None:
    validate(crash_doc, "report")
    crash, healthy = crash_doc["runs"]
    tail = json.loads(_diag("tail", str(ROOT / CRASH), "--format", "json").stdout)   # report_of reads ROOT/CRASH
    assert crash["postmortem"] == tail["postmortem"] and crash["timeline"] == tail["timeline"]
    (cause,) = crash["postmortem"]["root_causes"]
    assert (cause["code"], cause["owner"], cause["engine"]) == ("DIAG-E001", "engine", "vllm")
    assert crash["postmortem"]["first_error"]["at"] == f"{ROOT / CRASH}/logs/gb200-r05-n15_decode_w0.out:703"
    assert healthy["postmortem"] is None and len(healthy["timeline"]) > 10


def test_html_postmortem_names_owner_and_first_error_and_the_healthy_timeline_is_folded(crash_doc: dict) -> None:
    from diag.emit.html import render_html

    page = render_html(crash_doc)
    section = page[page.index("<h2 id=postmortem>"):page.index("<h2>Pareto</h2>")]
    assert "engine-crash: postmortem (owner <span class=owner>engine</span>)" in section
    assert "Failed at <b>09-03 04:03:01</b>" in section
    assert f"CUDA out of memory <span class=note>at {ROOT / CRASH}/logs/gb200-r05-n15_decode_w0.out:703</span>" in section
    assert section.count("<tr><td>") - sum(len(r["timeline"]) for r in crash_doc["runs"]) == \
        min(len(crash_doc["runs"][0]["postmortem"]["consequences"]), SET_ASIDE_ROWS)   # an event, a consequence a row
    assert "healthy: postmortem" not in section   # a run that did not fail has none
    assert "<details open><summary>engine-crash: timeline" in section
    assert "<details><summary>healthy: timeline" in section   # folded: the run did not fail
    assert "<td>stage</td><td>-</td><td>orchestrator started</td>" in section


def test_html_postmortem_lists_are_capped_with_how_many_more(crash_doc: dict) -> None:
    from diag.emit.html import TIMELINE_ROWS, postmortem_html, timeline_html

    run = crash_doc["runs"][0]
    many = {**run, "postmortem": {**run["postmortem"], "consequences": run["postmortem"]["consequences"] * 5},
            "timeline": run["timeline"] * 5}
    total = len(run["postmortem"]["consequences"]) * 5
    assert f"{total - SET_ASIDE_ROWS} more consequences after the failure" in postmortem_html(many)
    assert f"{len(run['timeline']) * 5 - TIMELINE_ROWS} more events" in timeline_html(many)


def test_an_indexed_part_keeps_the_postmortem_and_timeline() -> None:
    from diag.report_part import RunPart

    part = RunPart.of(report_of(CRASH))
    back = RunPart.from_json(json.loads(json.dumps(part.to_json(), default=str)))
    assert back.postmortem == part.postmortem and back.postmortem["owner"] == "engine"
    assert back.timeline == part.timeline and part.timeline
