"""The committed sample runs are exactly what samples/make_samples.py writes, and they stay usable."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
SCENARIOS = {
    "healthy": [], "prefill-bound": ["DIAG-B001"], "kv-exhaustion": ["DIAG-K001", "DIAG-K002"],
    "engine-crash": ["DIAG-E001"], "stats-missing": ["DIAG-L001"], "nixl-failures": ["DIAG-E002", "DIAG-E003"],
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")
STATS = re.compile(r"Engine (\d{3}): Avg prompt throughput")


def _generated(root: Path) -> dict[str, bytes]:
    files = [*root.glob("runs/**/*"), *root.glob("telemetry/**/*"), *root.glob("slurm-*")]
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in files if p.is_file()}


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("samples")
    subprocess.run([sys.executable, str(SAMPLES / "make_samples.py"), "--out", str(out)], check=True)
    return out


def _manifest(name: str) -> dict:
    return json.loads((SAMPLES / "runs" / name / "MANIFEST.json").read_text())


def test_regeneration_is_byte_identical(regenerated: Path) -> None:
    new, old = _generated(regenerated), _generated(SAMPLES)
    assert sorted(new) == sorted(old)
    differing = [k for k in new if new[k] != old[k]]
    assert not differing, f"regenerate with `python samples/make_samples.py`: {differing[:5]}"


@pytest.mark.parametrize("name", SCENARIOS)
def test_run_dir_layout_and_size(name: str) -> None:
    run = SAMPLES / "runs" / name
    job = _manifest(name)["job_id"]
    for rel in ("config.yaml", f"{job}.json", f"logs/sweep_{job}.log", "logs/benchmark.out"):
        assert (run / rel).is_file(), rel
    assert sum(p.stat().st_size for p in run.rglob("*") if p.is_file()) < 3_000_000
    decode = sorted(p.name for p in (run / "logs").glob("*_decode_w*.out"))
    assert len(decode) == 2 and all(n.endswith("_decode_w0.out") for n in decode)
    assert len(list((run / "logs").glob("*_prefill_w*.out"))) == 4


@pytest.mark.parametrize("name", SCENARIOS)
def test_worker_files_carry_real_escape_bytes(name: str) -> None:
    logs = SAMPLES / "runs" / name / "logs"
    workers = [*logs.glob("*_prefill_w*.out"), *logs.glob("*_decode_w*.out")]
    assert workers
    for p in workers:
        assert b"\x1b[" in p.read_bytes(), p.name


@pytest.mark.parametrize("name", SCENARIOS)
def test_manifest_matches_files(name: str) -> None:
    man = _manifest(name)
    run = SAMPLES / "runs" / name
    assert man["expect"]["findings"] == SCENARIOS[name]
    for rel, info in man["files"].items():
        raw = (run / rel).read_bytes().decode()
        text = ANSI.sub("", raw)
        counts: dict[int, int] = {}
        for m in STATS.finditer(text):
            counts[int(m[1])] = counts.get(int(m[1]), 0) + 1
        for eng, es in info["engine_stats"].items():
            assert counts.get(int(eng), 0) == es["stats_records"], (rel, eng)
            if es["first"]:
                assert set(es["first"]) >= {"prompt_tps", "gen_tps", "running", "waiting", "preemptions",
                                            "kv_usage", "prefix_hit", "ext_hit", "md"}
        assert text.count("KV Transfer metrics:") == info["kv_transfer_lines"], rel
        assert text.count("NIXL transfer failure:") == info["nixl_failure_lines"], rel
        assert text.count("Releasing expired KV blocks") == info["kv_expiry_lines"], rel
        if info["role"] in ("prefill", "decode"):
            assert info["torn_records"] == info["glued_lines"] == 1, rel
            assert info["crlf_records"] >= 1 and "\r\n" in raw, rel
    total = sum(e["stats_samples"] for e in man["expect"]["endpoints"])
    assert (total == 0) == (name == "stats-missing")


def test_healthy_crosses_new_year() -> None:
    eng = _manifest("healthy")["files"]
    dec = next(v for k, v in eng.items() if "_decode_w0" in k)["engine_stats"]["0"]
    assert dec["first"]["md"].startswith("12-31") and dec["last"]["md"].startswith("01-01")


def test_scenario_specific_facts() -> None:
    crash = _manifest("engine-crash")["expect"]
    assert crash["root_cause"] == "oom" and crash["crash"]["engine"] == 5
    sweep = (SAMPLES / "runs/engine-crash/logs/sweep_5044719.log").read_text()
    assert f"Critical process '{crash['crash']['critical_process']}' exited with code 1" in sweep
    assert "Benchmark failed with exit code 1" in sweep and "FAILURE DETAILS" in sweep
    assert _manifest("stats-missing")["expect"]["cause"] == "api_server_count"
    prom = (SAMPLES / "runs/stats-missing/logs/raw_prometheus.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in prom]
    assert {r["role"] for r in rows} == {"prefill", "decode", "frontend"}
    assert any("vllm:kv_cache_usage_perc{engine=" in r["text"] for r in rows)


def test_slurm_out_labels_match_manifest() -> None:
    man = json.loads(next(SAMPLES.glob("slurm-*.manifest.json")).read_text())
    text = ANSI.sub("", (SAMPLES / man["file"]).read_text())
    assert set(man["labels"]) == {"0", "1", "2"}
    for label, info in man["labels"].items():
        lines = [ln[len(label) + 2:] for ln in text.split("\n") if ln.startswith(f"{label}: ")]
        found = [m[1] for ln in lines for m in STATS.finditer(ln)]
        for eng, es in info["engine_stats"].items():
            assert found.count(f"{int(eng):03d}") == es["stats_records"], (label, eng)
