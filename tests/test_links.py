"""What actually ran: the config rules on what ran, drift, and symptom -> cause links, on the derived
sample runs (samples/derived.py) and on real Qwen3.5 recipes turned into runs."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from loading import shared_sample_pipelines
from schemas import validate

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "samples" / "runs"
DERIVED = sorted(p.name for p in RUNS.iterdir() if "derived_from" in json.loads((p / "MANIFEST.json").read_text()))


def diag(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``diag ARGS`` in this process; a shipped sample run is judged once per process (its JSON, text and TUI
    views here, and other modules', present the same read-only report)."""
    with shared_sample_pipelines():
        return run_diag(*args, cwd=cwd, env={"COLUMNS": "200", "NO_COLOR": None})


def _doc(run: str) -> dict:
    doc = json.loads(diag("tail", f"samples/runs/{run}", "--format", "json").stdout)
    validate(doc, "tail")
    return doc


def test_there_is_a_derived_run_per_pair() -> None:
    pairs = {tuple(p) for r in DERIVED for p in json.loads((RUNS / r / "MANIFEST.json").read_text())["expect"]["links"]}
    assert {("DIAG-A001", "DIAG-C002"), ("DIAG-B001", "DIAG-C004"), ("DIAG-K001", "DIAG-C003"),
            ("DIAG-E001", "DIAG-C012")} <= pairs
    assert ("DIAG-E004", "DIAG-C001") in pairs
    assert any("DIAG-D001" in json.loads((RUNS / r / "MANIFEST.json").read_text())["expect"]["findings"]
               for r in DERIVED)


@pytest.mark.parametrize("run", DERIVED)
def test_links_in_json_text_and_tui(run: str) -> None:
    expect = json.loads((RUNS / run / "MANIFEST.json").read_text())["expect"]
    doc = _doc(run)
    codes = {f["code"] for f in doc["findings"]}
    assert set(expect["findings"]) <= codes, (run, sorted(codes))
    for symptom, cause in expect["links"]:
        sym = [f for f in doc["findings"] if f["code"] == symptom]
        assert any(c["code"] == cause for f in sym for c in f["caused_by"]), (run, symptom, cause)
        causes = [f for f in doc["findings"] if f["code"] == cause]
        assert any(e["code"] == symptom for f in causes for e in f["explains"]), (run, cause)
        note = next(c["note"] for f in sym for c in f["caused_by"] if c["code"] == cause)
        text = diag("tail", f"samples/runs/{run}").stdout
        assert f"caused by {cause}" in text and note.split(":")[0][:40] in " ".join(text.split())
        tui = diag("watch", "--once", f"samples/runs/{run}").stdout
        assert f"caused by {cause}" in tui and "explains " in tui


def test_drift_points_into_the_log_and_changes_a_verdict() -> None:
    doc = _doc("drift-batched-tokens")
    d001 = [f for f in doc["findings"] if f["code"] == "DIAG-D001"]
    assert len(d001) == 1 and d001[0]["severity"] == "warning"
    assert d001[0]["evidence"]["changes_verdict_of"] == ["DIAG-C004"]
    assert d001[0]["location"]["path"].endswith("sweep_4987301.log") and d001[0]["location"]["line"] == 30
    diff = d001[0]["evidence"]["differences"]
    assert diff == [{"kind": "flag", "name": "max_num_batched_tokens", "recipe": 16384, "ran": 8192,
                     "text": "max-num-batched-tokens 8,192 ran, the recipe says 16,384"}]
    c004 = next(f for f in doc["findings"] if f["code"] == "DIAG-C004")
    assert c004["location"]["path"].endswith("sweep_4987301.log"), "the finding points at what ran"
    # the base run ran what its recipe says: no drift, no C004
    base = {f["code"] for f in _doc("prefill-bound")["findings"]}
    assert "DIAG-D001" not in base and "DIAG-C004" not in base


@pytest.mark.parametrize("run", ["drift-batched-tokens", "block-size-crash", "stats-missing"])
def test_check_on_a_run_dir_is_the_config_part_of_tail(run: str) -> None:
    doc = _doc(run)
    config = sorted((f["code"], f["severity"], f["message"], json.dumps(f["location"])) for f in doc["findings"]
                    if f["code"].startswith(("DIAG-C", "DIAG-D")))
    res = diag("check", f"samples/runs/{run}", "--format", "json")
    checked = json.loads(res.stdout)
    validate(checked, "check")
    got = sorted((f["code"], f["severity"], f["message"], json.dumps(f["location"])) for f in checked["findings"])
    assert got == config and config


def _qwen35_recipes(shared: Path) -> list[Path]:
    return sorted(p for p in (shared / "samples" / "recipes").rglob("*.yaml")
                  if "qwen3.5" in p.read_text(encoding="utf-8", errors="replace").lower()
                  or "qwen3_5" in p.name.lower() or "qwen3.5" in p.name.lower())


def test_real_qwen35_recipes_as_runs_match_diag_check(real_recipes: Path, tmp_path: Path) -> None:
    """A run directory holding a real recipe as its config.yaml (and no log that says otherwise): the
    config findings of `diag tail` equal `diag check` on the recipe, line for line."""
    recipes = _qwen35_recipes(real_recipes.parents[1])
    assert len(recipes) >= 3, recipes
    frontend = next((RUNS / "healthy" / "logs").glob("*_frontend_*.out"))
    compared = 0
    for recipe in recipes:
        run = tmp_path / recipe.stem
        (run / "logs").mkdir(parents=True)
        shutil.copy(recipe, run / "config.yaml")
        shutil.copy(frontend, run / "logs" / frontend.name)
        checked = json.loads(diag("check", str(recipe), "--format", "json").stdout)
        if any(f["evidence"].get("parse_error") for f in checked["findings"]):
            continue
        tail = json.loads(diag("tail", str(run), "--format", "json").stdout)

        def key(f: dict) -> tuple:
            loc = f["location"] or {}
            return f["code"], f["severity"], f["message"], loc.get("line"), loc.get("col"), f["fix"]

        want = sorted(key(f) for f in checked["findings"])
        got = sorted(key(f) for f in tail["findings"] if f["code"].startswith("DIAG-C"))
        assert got == want, recipe.name
        compared += 1
    assert compared >= 3


def _without_command_lines(tmp_path: Path, recipe_edit: tuple[str, str] | None = None) -> dict:
    """The healthy sample without its sweep log: what ran comes from the workers' `non-default args`."""
    run = tmp_path / "healthy"
    shutil.copytree(RUNS / "healthy", run)
    for log in (run / "logs").glob("sweep_*.log"):
        log.unlink()
    if recipe_edit:
        cfg = run / "config.yaml"
        text = cfg.read_text()
        assert recipe_edit[0] in text
        cfg.write_text(text.replace(recipe_edit[0], recipe_edit[1], 1))
    doc = json.loads(diag("tail", str(run), "--format", "json").stdout)
    return doc


def test_no_drift_from_non_default_args_when_the_recipe_ran(tmp_path: Path) -> None:
    """The KVTransferConfig(...) repr of `non-default args` is the recipe's kv-transfer-config having run,
    and TP/PP absent from it ran at their vLLM default, which the recipe also says: no DIAG-D001."""
    doc = _without_command_lines(tmp_path)
    assert [f["message"] for f in doc["findings"] if f["code"] == "DIAG-D001"] == []


def test_drift_from_non_default_args_against_vllm_defaults(tmp_path: Path) -> None:
    doc = _without_command_lines(tmp_path, ('      tensor-parallel-size: 1\n      pipeline-parallel-size: 1\n'
                                            '      data-parallel-size: 8\n',
                                            '      tensor-parallel-size: 2\n      pipeline-parallel-size: 1\n'
                                            '      data-parallel-size: 8\n'))
    (d001,) = [f for f in doc["findings"] if f["code"] == "DIAG-D001"]
    assert d001["endpoint"] == "decode" and d001["evidence"]["differences"] == [
        {"kind": "flag", "name": "tensor_parallel_size", "recipe": 2, "ran": 1,
         "text": "the recipe sets tensor-parallel-size 2 but the engine ran at vLLM's default 1"}]
    assert d001["evidence"]["cannot_tell"] == ["disable_hybrid_kv_cache_manager"]
    assert d001["location"]["path"].endswith("_decode_w0.out")
    doc = _without_command_lines(tmp_path / "b", ('"kv_role": "kv_consumer"', '"kv_role": "kv_both"'))
    (d001,) = [f for f in doc["findings"] if f["code"] == "DIAG-D001"]
    assert [d["name"] for d in d001["evidence"]["differences"]] == ["kv_transfer_config"]
