"""`diag report` under a latency target: `--sla` parsing, the recipe's goodput thresholds, goodput per
request and by quantile, the frontier and the pick within the target, the Pareto's markers and labels,
and a run without benchmark points."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from loading import report_of
from schemas import validate

from diag.emit.html import render_html
from diag.report_doc import build
from diag.sla import SlaError, parse_sla

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["samples/runs/sweep-4xdep2", "samples/runs/sweep-5xdep2"]
RESULT_512 = "logs/sa-bench_isl_8192_osl_1024/results_concurrency_512_gpus_16_ctx_8_gen_8.json"


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return run_diag(*args, env={"COLUMNS": "240"})


def _json(*args: str) -> dict:
    res = _diag("report", *args, "--format", "json")
    assert res.returncode in (0, 1), res.stderr   # 1: a run's verdict fails --fail-on (startup-stall's)
    doc = json.loads(res.stdout)
    validate(doc, "report")
    return doc


@pytest.fixture(scope="module")
def doc() -> dict:
    return _json(*SWEEP)


def _points(doc: dict) -> dict[tuple[str, int], dict]:
    return {(p["run"], p["concurrency"]): p for p in doc["points"]}


# ---------------------------------------------------------------- the pick under the default target
def test_default_target_picks_a_point_that_meets_it_and_says_why(doc: dict) -> None:
    assert doc["sla"] == {"limits": [{"metric": "ttft", "stat": "median", "ms": 2000.0},
                                     {"metric": "tpot", "stat": "median", "ms": 50.0}],
                          "source": "default", "text": "median TTFT <= 2 s, median TPOT <= 50 ms"}
    pick, pts = doc["pick"], _points(doc)
    chosen = pts[pick["run"], pick["concurrency"]]
    assert pick["status"] == "meets" and chosen["sla"]["meets"] is True and chosen["verdict"] != "invalid"
    within = [p for p in doc["points"] if p["sla"]["meets"] and p["verdict"] != "invalid"]
    assert chosen["tok_s_per_gpu"]["working"] == max(p["tok_s_per_gpu"]["working"] for p in within)
    assert (pick["run"], pick["concurrency"]) == ("sweep-4xdep2", 512)
    assert pick["verdict"] == chosen["verdict"] and pick["reason"] == chosen["reason"]
    assert pick["sentence"] == (
        "Pick sweep-4xdep2 (4xDEP2 + 1xDEP8) at C=512: 5,648 tok/s per working GPU at 22.1 tok/s/user, "
        "median TTFT 1.1 s / median TPOT 45.2 ms within the target (median TTFT <= 2 s, median TPOT <= 50 ms); "
        "verdict under-loaded: no queue on either side and decode at 28 % of its capacity. C=2,048 is faster per "
        "GPU (9,541 tok/s) but misses "
        f"median TTFT (38.8 s) and median TPOT (52.6 ms): {pts['sweep-4xdep2', 2048]['verdict']}.")
    assert pick["passed_over"]["run"] == "sweep-4xdep2" and pick["passed_over"]["concurrency"] == 2048
    for run in doc["runs"]:   # "best" per run is within the target too, never the overloaded point
        assert pts[run["label"], run["best"]["concurrency"]]["sla"]["meets"] is True


def test_c2048_of_4xdep2_misses_ttft_and_is_off_the_frontier(doc: dict) -> None:
    p = _points(doc)["sweep-4xdep2", 2048]
    assert p["sla"]["meets"] is False and p["sla"]["summary"].startswith("misses median TTFT (38.8 s)")
    assert {m["metric"]: m["value_ms"] for m in p["sla"]["misses"]} == {"ttft": 38803.64, "tpot": 52.63}
    assert p["frontier"] == {"working": False, "allocated": False}
    for d, front in doc["frontier"].items():   # the frontier holds only points within the target
        assert front and all(_points(doc)[f["run"], f["concurrency"]]["sla"]["meets"] for f in front), d
    res = _diag("--no-color", "report", *SWEEP, "--format", "text")
    assert res.returncode == 0 and res.stdout.startswith("Pick sweep-4xdep2 (4xDEP2 + 1xDEP8) at C=512")
    row = next(ln for ln in res.stdout.splitlines() if re.search(r"sweep-4xdep2 .*\b2,048\b", ln))
    assert "misses median TTFT (38.8" in row and "prefill-bound" in row


# ---------------------------------------------------------------- --sla
@pytest.mark.parametrize(("text", "limits"), [
    ("ttft=2s,tpot=50ms", [("ttft", "median", 2000.0), ("tpot", "median", 50.0)]),
    ("TTFT.p90=3s, itl=0.5s", [("ttft", "p90", 3000.0), ("itl", "median", 500.0)]),
    ("e2el.p50=90s,tpot.mean=40ms", [("e2el", "median", 90000.0), ("tpot", "mean", 40.0)]),
])
def test_sla_parses(text: str, limits: list[tuple[str, str, float]]) -> None:
    assert [(lim.metric, lim.stat, lim.ms) for lim in parse_sla(text).limits] == limits


@pytest.mark.parametrize(("text", "says"), [
    ("ttft=2", "not a duration with a unit"), ("ttfb=2s", "unknown metric 'ttfb'"),
    ("ttft.q9=2s", "unknown quantile 'q9'"), ("ttft=2s,ttft=3s", "limited twice"), ("ttft=0ms", "greater than 0"),
    ("", "is not METRIC=DURATION"),
])
def test_bad_sla_is_rejected(text: str, says: str) -> None:
    with pytest.raises(SlaError, match=re.escape(says)):
        parse_sla(text)


@pytest.mark.parametrize("bad", ["ttft=2", "tpot=fast"])
def test_bad_sla_on_the_command_line_is_one_line_exit_2(bad: str) -> None:
    res = _diag("report", *SWEEP, "--sla", bad, "--format", "json")
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("diag report: --sla: ") and res.stderr.count("\n") == 1, res.stderr


def test_sla_option_changes_the_pick() -> None:
    """A looser target admits 4xDEP2 at C=2048 (38.8 s TTFT, 52.6 ms TPOT): it becomes the pick."""
    d = build([report_of(ROOT / run) for run in SWEEP], parse_sla("ttft=60s,tpot=60ms"))
    assert (d["pick"]["run"], d["pick"]["concurrency"], d["pick"]["status"]) == ("sweep-4xdep2", 2048, "meets")
    assert d["sla"]["source"] == "--sla"
    tight = build([report_of(ROOT / run) for run in SWEEP], parse_sla("ttft=100ms"))
    assert tight["pick"]["status"] == "closest" and tight["pick"]["sentence"].startswith(
        "No valid point meets the target (median TTFT <= 100 ms); the closest is sweep-5xdep2 (5xDEP2 + 1xDEP8) "
        "at C=512")   # the lowest median TTFT of the sweep, 722.74 ms
    with_user = build([report_of(ROOT / run) for run in SWEEP], min_tok_s_user=25)
    assert (with_user["pick"]["run"], with_user["pick"]["concurrency"]) == ("sweep-4xdep2", 256)
    assert "at 25.0 tok/s/user or more" in with_user["pick"]["sentence"]


# ---------------------------------------------------------------- the recipe's goodput thresholds
def _copy_run(tmp_path: Path, name: str = "sweep-4xdep2") -> Path:
    run = tmp_path / name
    shutil.copytree(ROOT / "samples/runs" / name, run)
    return run


def test_recipe_thresholds_are_the_target_and_the_option_overrides_them(tmp_path: Path) -> None:
    run = _copy_run(tmp_path)
    recipe = run / "config.yaml"
    recipe.write_text(recipe.read_text().replace('  type: "sa-bench"\n', '  type: "sa-bench"\n'
                                                 "  ttft_threshold_ms: 1000\n  itl_threshold_ms: 40\n"))
    d = _json(str(run))
    assert d["sla"]["source"] == f"recipe {recipe}" and d["sla"]["text"] == "median TTFT <= 1 s, median ITL <= 40 ms"
    meets = {p["concurrency"]: p["sla"]["meets"] for p in d["points"]}
    assert meets == {256: True, 512: False, 1024: False, 2048: False}   # TTFT 922 ms, ITL 36.15 ms at C=256
    assert (d["pick"]["concurrency"], d["pick"]["status"]) == (256, "meets")
    over = _json(str(run), "--sla", "ttft=2s,tpot=50ms")
    assert over["sla"]["source"] == "--sla" and over["pick"]["concurrency"] == 512


# ---------------------------------------------------------------- goodput
def test_goodput_by_quantile_when_the_arrays_are_cut(doc: dict) -> None:
    """The samples' result files keep 16 entries of 1,024+ prompts: the point is judged as a whole, so
    goodput is its request rate (and total tok/s) within the target and 0 outside it."""
    pts = _points(doc)
    for key, req_s, tok_s in ((("sweep-4xdep2", 512), 10.9, 90374.5), (("sweep-5xdep2", 256), 7.1, 58865.2),
                              (("sweep-4xdep2", 1024), 0.0, 0.0), (("sweep-4xdep2", 2048), 0.0, 0.0)):
        sla = pts[key]["sla"]
        assert (sla["goodput_basis"], sla["goodput_req_s"], sla["goodput_tok_s"]) == ("quantile", req_s, tok_s), key
        assert sla["requests_judged"] is None and sla["good_requests"] is None


def test_goodput_per_request_when_the_file_holds_every_prompt(tmp_path: Path) -> None:
    """C=512 rewritten with one entry per prompt (1,024): 600 fast requests, 300 with TTFT 2.5 s, 100 with
    TPOT 60 ms, 24 of one output token (TPOT 0, vLLM's goodput rule). Good: 600 + 24 = 624 of 1,024 in
    93.945 s -> 6.642 req/s; tokens (100 in + 4 out) x 600 + (100 + 1) x 24 = 64,824 -> 690.0 tok/s."""
    run = _copy_run(tmp_path)
    path = run / RESULT_512
    data = json.loads(path.read_text())
    groups = [(600, 1.0, 4, 0.03), (300, 2.5, 4, 0.03), (100, 0.5, 4, 0.06), (24, 1.9, 1, None)]
    rows = [(ttft, osl, [gap] * (osl - 1) if gap else []) for n, ttft, osl, gap in groups for _ in range(n)]
    data.update(ttfts=[r[0] for r in rows], output_lens=[r[1] for r in rows], itls=[r[2] for r in rows],
                input_lens=[100] * len(rows), errors=[""] * len(rows), generated_texts=[""] * len(rows))
    assert len(rows) == data["num_prompts"] == 1024
    path.write_text(json.dumps(data))
    p = next(p for p in _json(str(run))["points"] if p["concurrency"] == 512)
    assert p["sla"]["goodput_basis"] == "per-request"
    assert (p["sla"]["requests_judged"], p["sla"]["good_requests"]) == (1024, 624)
    assert (p["sla"]["goodput_req_s"], p["sla"]["goodput_tok_s"]) == (6.642, 690.0)
    assert p["sla"]["meets"] is True   # the point itself is judged by the file's own quantiles


# ---------------------------------------------------------------- the HTML
def _figure(page: str, div_id: str) -> list[dict]:
    """The traces plotly is handed for ``div_id`` in the page."""
    m = re.search(rf'Plotly\.newPlot\(\s*"{div_id}",\s*', page)
    assert m, div_id
    traces, _ = json.JSONDecoder().raw_decode(page, m.end())
    return traces


def test_html_draws_missed_and_invalid_points_distinctly_with_concurrency_labels() -> None:
    d = build([report_of(ROOT / "samples/runs/sweep-4xdep2"), report_of(ROOT / "samples/runs/nixl-failures"),
               report_of(ROOT / "samples/runs/engine-crash")])
    page = render_html(d)
    assert page.index(d["pick"]["sentence"].split(":")[0]) < page.index('id="pareto"')   # the pick on top
    traces = {t["name"]: t for t in _figure(page, "pareto") if t.get("visible") is not False and "marker" in t}
    sweep, nixl = traces["sweep-4xdep2 (4xDEP2 + 1xDEP8)"], traces["nixl-failures (4xDEP2 + 1xDEP8)"]
    assert sweep["text"] == ["C=256", "C=512", "C=1,024", "C=2,048"] and "text" in sweep["mode"]
    # under-loaded, under-loaded, healthy but over the TPOT limit, prefill-bound and over both
    assert sweep["marker"]["symbol"] == ["hexagon", "hexagon", "circle-open", "triangle-up-open"]
    assert sweep["marker"]["opacity"][:2] == [1.0, 1.0] and sweep["marker"]["opacity"][3] < 1.0
    # transfer-bound (requests lost to failed KV transfers); C=1024 also over the TPOT limit
    assert nixl["marker"]["symbol"] == ["diamond", "diamond-open"] and nixl["text"] == ["C=512", "C=1,024"]
    assert "Not drawn (no result to place): engine-crash C=1,024 invalid" in page


# ---------------------------------------------------------------- no benchmark points
def test_a_run_without_benchmark_results_still_gets_a_report(tmp_path: Path) -> None:
    """startup-stall never served (no stats, no results); prefill-bound stripped of its benchmark files
    keeps its endpoint series."""
    d = _json("samples/runs/startup-stall")
    (run,) = d["runs"]
    assert run["note"].startswith("no benchmark points") and d["points"] == [] and d["pick"]["status"] == "no-points"
    assert run["health"]["prefill-w3"] == "WARN" and "DIAG-S001" in {f["code"] for f in run["finding_list"]}
    page = tmp_path / "report.html"
    res = _diag("report", "samples/runs/startup-stall", "-o", str(page))
    assert res.returncode == 1, res.stderr   # written, and the run never served: startup-stuck fails
    assert "startup-stall: no benchmark points" in page.read_text(encoding="utf-8")
    stripped = _copy_run(tmp_path, "prefill-bound")
    for path in (stripped / "logs").iterdir():
        if path.name.startswith(("benchmark", "sa-bench")):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    d = _json(str(stripped))
    (run,) = d["runs"]
    assert run["note"] and d["points"] == [] and "DIAG-B001" in {f["code"] for f in run["finding_list"]}
    assert {r["endpoint"] for r in d["series"]} == set(run["health"]) and len(run["health"]) == 5
