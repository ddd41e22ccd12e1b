"""`diag tail` as users run it: real sample runs, bad input, JSON schema, exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from schemas import validate

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "samples" / "runs"


def diag(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run diag (in this process); JSON and JSONL output is validated against the shipped schemas on the way."""
    res = run_diag(*args, cwd=cwd)
    if "--format" in args and res.stdout.strip():
        fmt = args[args.index("--format") + 1]
        if fmt == "json":
            validate(json.loads(res.stdout), "tail" if args[0] == "tail" else args[0])
        elif fmt == "jsonl":
            for line in res.stdout.splitlines():
                validate(json.loads(line), "tail-jsonl")
    return res


@pytest.mark.parametrize("scenario", sorted(p.name for p in RUNS.iterdir()))
def test_json_document(scenario: str) -> None:
    res = diag("tail", str(RUNS / scenario), "--format", "json")
    assert res.returncode in (0, 1), res.stderr
    doc = json.loads(res.stdout)
    assert set(doc) == {"tool", "version", "schema", "root", "judged_at", "sources", "endpoints", "findings",
                        "verdict", "benchmark", "summary", "postmortem", "timeline"}
    assert (doc["tool"], doc["schema"]) == ("diag", "diag-tail-1")
    man = json.loads((RUNS / scenario / "MANIFEST.json").read_text())
    want = {e["id"]: e for e in man["expect"]["endpoints"]}
    got = {e["id"]: e for e in doc["endpoints"]}
    assert set(got) == set(want)
    prom = (RUNS / scenario / "logs" / "raw_prometheus.jsonl").exists()  # its samples add to the logs'
    for eid, w in want.items():
        assert (got[eid]["role"], got[eid]["engines"]) == (w["role"], w["engines"])
        n = got[eid]["samples"]   # its stats lines the figures rest on (a TensorRT-LLM dry run's are start-up work)
        want_n = w.get("samples", w["stats_samples"])
        assert n == want_n or (prom and want_n == 0 < n), eid
        assert {"first_ts", "last_ts", "nodes", "stats", "health"} <= set(got[eid])
    for f in doc["findings"]:
        assert {"code", "name", "severity", "endpoint", "message", "first_ts", "last_ts", "evidence", "location"} <= set(f)
    for s in doc["sources"]:
        assert {"path", "kind", "role", "lines", "records", "noise_lines", "skipped"} <= set(s)
    codes = {f["code"] for f in doc["findings"]}
    assert set(man["expect"]["findings"]) <= codes
    # exit by the verdict (README's table, --fail-on error): a run that cannot be used or never served fails
    assert res.returncode == (1 if doc["verdict"]["class"] in ("invalid", "startup-stuck") else 0)


def test_text_output_names_endpoints_and_findings() -> None:
    res = diag("tail", str(RUNS / "prefill-bound"))
    assert res.returncode == 0, res.stderr
    for eid in ("prefill-w0", "prefill-w3", "decode-w0"):
        assert eid in res.stdout
    assert "DIAG-B001" in res.stdout and "prefill-bound" in res.stdout
    assert "\x1b[" not in res.stdout  # not a terminal: no colour
    assert "verdict     prefill-bound" in res.stdout and "balance     queue on prefill" in res.stdout
    assert "balanced" not in res.stdout


def test_fail_on_warning() -> None:
    assert diag("tail", str(RUNS / "prefill-bound"), "--fail-on", "warning").returncode == 1
    assert diag("tail", str(RUNS / "healthy"), "--fail-on", "warning").returncode == 0


def test_missing_path(tmp_path: Path) -> None:
    res = diag("tail", str(tmp_path / "nope"))
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "no such file" in res.stderr
    assert "Traceback" not in res.stderr


def test_directory_without_logs(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("hello\n")
    res = diag("tail", str(tmp_path))
    assert res.returncode == 2 and "no logs" in res.stderr and "Traceback" not in res.stderr


def test_binary_file_is_reported_and_others_still_processed(tmp_path: Path) -> None:
    binary = tmp_path / "nodeX_decode_w0.out"
    binary.write_bytes(bytes(range(256)) * 400)
    res = diag("tail", str(binary), str(RUNS / "healthy" / "logs"), "--format", "json")
    assert res.returncode == 0  # the rest was read (issue 11: exit 2 only when nothing usable was)
    alone = diag("tail", str(binary))
    assert alone.returncode == 2 and "binary file" in alone.stderr
    assert "binary file" in res.stderr and "Traceback" not in res.stderr
    docs = json.loads(res.stdout)["runs"]  # two run directories: two runs
    assert {e["id"] for d in docs for e in d["endpoints"]} >= {"prefill-w0", "decode-w0"}
    bad = [s for d in docs for s in d["sources"] if s["path"] == str(binary)]
    assert bad and bad[0]["error"]


def test_two_runs_never_share_endpoints() -> None:
    res = diag("tail", str(RUNS / "kv-exhaustion"), str(RUNS / "healthy"), "--format", "json", "--fail-on", "warning")
    docs = json.loads(res.stdout)["runs"]
    assert [len(d["endpoints"]) for d in docs] == [5, 5]
    assert [d["endpoints"][4]["samples"] for d in docs] == [952, 984]
    assert res.returncode == 1  # the worst run decides: decode-bound fails --fail-on warning, healthy does not


def test_fifty_megabyte_single_line(tmp_path: Path) -> None:
    log = tmp_path / "nodeY_prefill_w0.out"
    stats = ("(APIServer pid=1) INFO 08-06 12:00:00 [loggers.py:271] Engine 000: Avg prompt throughput: 812.5 tokens/s, "
             "Avg generation throughput: 1.0 tokens/s, Running: 3 reqs, Waiting: 9 reqs, GPU KV cache usage: 4.0%, "
             "Prefix cache hit rate: 0.0%\n")
    with log.open("w") as fh:
        fh.write(stats)
        fh.write("y" * (50 << 20) + "\n")
        fh.write(stats.replace("12:00:00", "12:00:10"))
    res = diag("tail", str(log), "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["sources"][0]["lines"] == 3
    assert doc["endpoints"][0]["samples"] == 2


def test_skipped_files_are_listed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    src = RUNS / "healthy" / "logs"
    for p in src.glob("*_prefill_w0.out"):
        (run / "logs" / p.name).write_bytes(p.read_bytes())
    (run / "logs" / "mystery.log").write_text("nothing to see\n")
    doc = json.loads(diag("tail", str(run), "--format", "json").stdout)
    skipped = [s for s in doc["sources"] if s["skipped"]]
    assert [Path(s["path"]).name for s in skipped] == ["mystery.log"]


def test_export_parquet_and_csv(tmp_path: Path) -> None:
    import polars as pl

    res = diag("tail", str(RUNS / "kv-exhaustion"), "--export", str(tmp_path / "pq"))
    assert res.returncode == 0  # decode-bound: a bottleneck fails --fail-on warning only
    df = pl.read_parquet(tmp_path / "pq" / "stats.parquet")
    assert df.height == 238 * 4 + 952 and {"endpoint", "engine", "kv_usage", "ts"} <= set(df.columns)
    res = diag("tail", str(RUNS / "kv-exhaustion"), "--export", str(tmp_path / "csv"), "--export-format", "csv")
    assert (tmp_path / "csv" / "stats.csv").read_text().count("\n") == df.height + 1


def test_jsonl_stream() -> None:
    res = diag("tail", str(RUNS / "engine-crash"), "--format", "jsonl")
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert {r["type"] for r in rows} == {"stream", "record", "endpoint", "finding", "summary"}
    assert rows[0] == {"type": "stream", "tool": "diag", "version": rows[0]["version"], "schema": "diag-tail-jsonl-1"}
    man = json.loads((RUNS / "engine-crash" / "MANIFEST.json").read_text())
    written = sum(e["stats_records"] for f in man["files"].values() for e in f["engine_stats"].values())
    assert sum(r["type"] == "record" and r["kind"] == "stats" for r in rows) == written
    assert sum(r["type"] == "finding" and r["code"] == "DIAG-E001" for r in rows) == 1


def test_settings_override_and_suppression(tmp_path: Path) -> None:
    (tmp_path / "diag.toml").write_text(
        '[rules.DIAG-B001]\nwaiting_high = 100000\nwaiting_min = 100000\n\n'
        '[[suppress]]\ncode = "DIAG-K003"\nreason = "capacity is known to be short in this sample"\n')
    doc = json.loads(diag("tail", str(RUNS / "prefill-bound"), "--format", "json", cwd=tmp_path).stdout)
    codes = {f["code"] for f in doc["findings"]}
    assert "DIAG-B001" not in codes and "DIAG-K003" not in codes


def test_version_and_help() -> None:
    assert diag("--version").stdout.startswith("diag ")
    assert "tail" in diag("--help").stdout
    res = diag("explain", "DIAG-K001")
    assert "kv-cache-exhaustion" in res.stdout and "What to change" in res.stdout
    assert "DIAG-E001" in diag("rules").stdout


def _l001(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["code"] == "DIAG-L001"]


def test_an_empty_endpoint_log_is_reported_not_a_silent_zero_engine_endpoint(tmp_path: Path) -> None:
    """A 0-byte worker log: the endpoint says "log empty" (text stage, JSON ``log``) and DIAG-L001 names the
    file; alone in a directory, or beside a healthy run whose other endpoints are judged as before."""
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "nodeA_decode_w0.out").write_bytes(b"")
    doc = json.loads(diag("tail", str(tmp_path / "alone"), "--format", "json").stdout)
    (ep,) = doc["endpoints"]
    assert (ep["id"], ep["engines"], ep["log"], ep["phase"], ep["health"]) == ("decode-w0", 0, "empty", "unknown", "WARN")
    (f,) = _l001(doc)
    assert f["message"] == ("decode-w0 has no stats lines: its log is empty (nodeA_decode_w0.out: 0 bytes): the worker "
                            "wrote nothing there (it never started, or its output went elsewhere)")
    assert f["severity"] == "warning" and f["evidence"]["cause"] == "log_empty"
    text = run_diag("tail", str(tmp_path / "alone"), env={"COLUMNS": "160"})
    row = next(line for line in text.stdout.splitlines() if line.startswith("decode-w0"))
    assert "log empty" in row and "WARN" in row and f["message"][:40] in text.stdout

    run = tmp_path / "run"
    shutil.copytree(ROOT / "samples" / "runs" / "healthy", run)
    (run / "logs" / "gb200-r07-n16_decode_w1.out").write_bytes(b"")
    doc, healthy = (json.loads(diag("tail", str(r), "--format", "json").stdout)
                    for r in (run, ROOT / "samples" / "runs" / "healthy"))
    assert [(e["id"], e.get("log")) for e in doc["endpoints"]][-2:] == [("decode-w0", None), ("decode-w1", "empty")]
    assert doc["endpoints"][:-1] == healthy["endpoints"]
    assert [f["endpoint"] for f in _l001(doc)] == ["decode-w1"] and not _l001(healthy)


def test_one_empty_file_of_a_two_node_endpoint_is_named(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(ROOT / "samples" / "runs" / "healthy", run)
    (run / "logs" / "gb200-r07-n15_decode_w0.out").write_bytes(b"")
    doc = json.loads(diag("tail", str(run), "--format", "json").stdout)
    (f,) = _l001(doc)
    assert f["message"] == ("decode-w0: gb200-r07-n15_decode_w0.out is empty (0 bytes): the engines logging there "
                            "are missing from its figures")
    assert "log" not in doc["endpoints"][-1] and doc["endpoints"][-1]["engines"] == 4
