"""The shipped sample runs parse into exactly what their generator wrote (its MANIFEST)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from loading import load_run, report_of

from diag.parsers.records import KVTransfer, StatsSample

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
RUNS = sorted(p for p in (SAMPLES / "runs").iterdir() if p.is_dir())
FIELDS = ("prompt_tps", "gen_tps", "running", "waiting", "preemptions", "kv_usage", "prefix_hit", "ext_hit", "md")


def _manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "MANIFEST.json").read_text())


@pytest.fixture(scope="module", params=RUNS, ids=[p.name for p in RUNS])
def loaded(request):
    run_dir = request.param
    return run_dir, _manifest(run_dir), load_run([str(run_dir)])


def _stats_by_engine(records) -> dict[int, list[StatsSample]]:
    out: dict[int, list[StatsSample]] = {}
    for r in records:
        if isinstance(r, StatsSample):
            out.setdefault(r.engine, []).append(r)
    return out


def test_stats_records_match_manifest(loaded) -> None:
    run_dir, man, run = loaded
    by_path = {Path(s.path).resolve(): s for s in run.sources}
    for rel, spec in man["files"].items():
        src = by_path[(run_dir / rel).resolve()]
        assert src.error is None
        got = _stats_by_engine(src.all_records())
        want = spec["engine_stats"]
        assert sorted(got) == sorted(int(e) for e in want) or (not got and all(
            w["stats_records"] == 0 for w in want.values())), rel
        for eng, w in want.items():
            recs = got.get(int(eng), [])
            assert len(recs) == w["stats_records"], f"{rel} engine {eng}"
            for which, rec in (("first", recs[0] if recs else None), ("last", recs[-1] if recs else None)):
                if w.get(which) is None:
                    continue
                assert {k: getattr(rec, k) for k in FIELDS} == w[which], f"{rel} engine {eng} {which}"
        kv = [r for r in src.all_records() if isinstance(r, KVTransfer)]
        assert len(kv) == spec["kv_transfer_lines"], rel


def test_endpoints_match_manifest(loaded) -> None:
    run_dir, man, run = loaded
    want = {e["id"]: e for e in man["expect"]["endpoints"]}
    assert list(run.endpoints) == list(want)
    for eid, w in want.items():
        ep = run.endpoints[eid]
        assert ep.role == w["role"]
        assert len(ep.engines) == w["engines"], eid
        # the manifest describes the logs; a raw_prometheus.jsonl capture adds "prom" samples and sources
        log_samples = sum(n for variant, n in ep.variants.items() if variant != "prom")
        assert log_samples == w["stats_samples"], eid
        logs = [f for f in ep.files if "raw_prometheus.jsonl#" not in f]
        assert sorted(Path(f).resolve() for f in logs) == sorted((run_dir / f).resolve() for f in w["files"])


def test_expected_findings(loaded) -> None:
    run_dir, man, _ = loaded
    findings = list(report_of(run_dir).findings)  # runtime rules and the config rules on what ran
    codes = {f.code for f in findings}
    expect = man["expect"]
    name = run_dir.name
    for code in expect["findings"]:
        assert code in codes, f"{run_dir.name}: {code} missing, got {sorted(codes)}"
    if name.startswith(("sglang-", "trtllm-")):   # every warning and error, exactly, and the verdict
        assert {f.code for f in findings if f.severity in ("warning", "error")} == set(expect["findings"]), name
        verdict = report_of(run_dir).verdict
        assert verdict is not None and {"class": verdict.cls, "limiter": verdict.limiter} == expect["verdict"], name
    if name == "healthy":
        assert not [f for f in findings if f.severity in ("warning", "error")], [f.message for f in findings]
    if name == "prefill-bound":
        assert not codes & {"DIAG-B002", "DIAG-K001"}
    if name == "engine-crash":
        e001 = [f for f in findings if f.code == "DIAG-E001"]
        assert len(e001) == 1 and e001[0].evidence["root_cause"] == "oom" and "out of memory" in e001[0].message
        assert e001[0].endpoint == "decode-w0"
        after = [f for f in findings if f.code in ("DIAG-E002", "DIAG-E003") and f.endpoint.startswith("prefill")]
        assert after and all(f.evidence["after_engine_death"]["endpoint"] == "decode-w0" for f in after)
    if name == "stats-missing":
        l001 = [f for f in findings if f.code == "DIAG-L001"]
        assert l001 and all(f.evidence["cause"] == "api_server_count" for f in l001)
        assert "API server" in l001[0].message
    if name == "kv-exhaustion":
        assert {"DIAG-K001", "DIAG-K002"} <= codes


def test_new_year_run_stays_ordered() -> None:
    run = load_run([str(SAMPLES / "runs" / "healthy")])
    for ep in run.endpoints.values():
        ts = ep.stats["ts"].to_list()
        assert ts == sorted(ts) and ts[0].year == 2026 and ts[-1].year == 2027, ep.id


def test_interleaved_slurm_out_splits_into_endpoints() -> None:
    path = next(SAMPLES.glob("slurm-*.out"))
    man = json.loads(path.with_suffix(".manifest.json").read_text())
    run = load_run([str(path)])
    want = {}
    for label in man["labels"].values():
        eid = f"{label['role']}-w{label['worker']}"
        want[eid] = sum(e["stats_records"] for e in label["engine_stats"].values())
    got = {eid: ep.samples for eid, ep in run.endpoints.items()}
    assert got == want


def test_readme_counts_the_sample_runs() -> None:
    """The README's layout block says how many sample run directories there are: a count, kept true."""
    import re

    root = Path(__file__).resolve().parents[1]
    runs = [p for p in (root / "samples" / "runs").iterdir() if p.is_dir()]
    said = re.search(r"^samples/\s+(\d+) realistic srt-slurm run directories", (root / "README.md").read_text(), re.M)
    assert said is not None and int(said.group(1)) == len(runs)
