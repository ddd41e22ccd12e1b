"""The campaign index (issue 26): ``diag index`` over the sample runs holds every run, point, finding and
endpoint with the verdicts ``diag tail --format json`` gives; it is incremental (reuse, change detection,
a failing run recorded, a result saved by ``tail --save`` taken as is); ``diag runs`` filters and sorts it;
``diag report INDEX`` equals the report over the runs; DuckDB reads the dataset as it is."""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from loading import shared_sample_pipelines
from schemas import validate
from test_cli_contract import ROOT, diag

from diag.index.query import QueryError, select_runs, snapshot
from diag.index.rows import PARTITIONED, TABLES

from helpers import run_diag

RUNS = ROOT / "samples" / "runs"
SMALL = ("startup-stall", "under-loaded")   # the two smallest sample runs, for the incremental tests


def _json(*args: str, cwd: Path | None = None) -> Any:
    res = diag(*args, cwd=cwd)
    assert res.returncode in (0, 1), (args, res.returncode, res.stderr[-500:])
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], dict[str, dict[str, Any]]]:
    """The sample runs indexed once, the counts it printed, and ``tail --format json`` per run: both in this
    process, each run judged once (:func:`loading.shared_sample_pipelines`; worker processes are the
    incremental tests' ``--jobs 2``)."""
    into = tmp_path_factory.mktemp("index") / "idx"
    with shared_sample_pipelines():
        counts = _in_process("index", str(RUNS), "--into", str(into), "--jobs", "1", "--format", "json")
        tail = _in_process("tail", str(RUNS), "--format", "json")
    return into, counts, {Path(doc["root"]).name: doc for doc in tail["runs"]}


def _in_process(*args: str) -> Any:
    res = run_diag(*args)
    assert res.returncode in (0, 1), (args, res.returncode, res.stderr[-500:])
    return json.loads(res.stdout)


def test_the_index_holds_every_sample_run_with_the_verdicts_of_tail(indexed: Any) -> None:
    into, counts, tail = indexed
    validate(counts, "index")
    names = sorted(p.name for p in RUNS.iterdir() if p.is_dir())
    assert {k: counts[k] for k in ("runs", "parsed", "reused", "failed")} == \
        {"runs": len(names), "parsed": len(names), "reused": 0, "failed": 0}
    assert counts["into"] == str(into) and sorted(tail) == names
    runs = pl.read_parquet(into / "runs.parquet")
    assert runs["name"].to_list() == names and set(runs["status"]) == {"ok"}
    for row in runs.iter_rows(named=True):
        doc = tail[row["name"]]
        assert row["path"] == doc["root"]
        assert row["verdict"] == doc["verdict"]["class"] and row["limiter"] == doc["verdict"]["limiter"]
        tpg = doc["benchmark"]["tokens_per_gpu"] or {}
        assert (row["tok_s_gpu_working"], row["tok_s_gpu_allocated"]) == \
            (tpg.get("per_working_gpu"), tpg.get("per_allocated_gpu"))
        assert [row["errors"], row["warnings"], row["infos"]] == list(doc["summary"]["findings"].values())
        assert row["top_finding"] == (doc["findings"][0]["code"] if doc["findings"] else None)
        assert row["validity"] == ("invalid" if doc["verdict"]["class"] in ("invalid", "startup-stuck") else "valid")
    by_run = dict(zip(runs["run_id"], runs["name"], strict=True))

    def per_run(table: str) -> dict[str, int]:
        df = pl.read_parquet(into / f"{table}.parquet")
        return {by_run[r]: n for r, n in df.group_by("run_id").len().iter_rows()}

    assert per_run("points") == {n: len(d["benchmark"]["points"]) for n, d in tail.items() if d["benchmark"]["points"]}
    assert per_run("findings") == {n: len(d["findings"]) for n, d in tail.items() if d["findings"]}
    assert per_run("endpoints") == {n: len(d["endpoints"]) for n, d in tail.items() if d["endpoints"]}
    points = pl.read_parquet(into / "points.parquet").join(runs.select("run_id", "name"), on="run_id")
    for row in points.iter_rows(named=True):
        point = next(p for p in tail[row["name"]]["benchmark"]["points"] if p["concurrency"] == row["concurrency"])
        assert row["verdict"] == point["class"], row
    series = pl.read_parquet(into / "series", hive_partitioning=True)
    assert set(series["run_id"]) == {r for r, n in by_run.items() if tail[n]["endpoints"] and
                                     any(e["samples"] for e in tail[n]["endpoints"])}
    manifest = json.loads((into / "index.json").read_text())
    assert manifest["schema"] == "diag-index-dataset-1" and manifest["tables"] == [*TABLES, *PARTITIONED]


def test_docs_name_every_column_of_every_table() -> None:
    doc = (ROOT / "docs" / "index.md").read_text()
    for name, schema in TABLES.items():
        section = doc.split(f"### {name}\n", 1)[1].split("\n### ", 1)[0]
        missing = [c for c in schema if f"`{c}`" not in section]
        assert not missing, (name, missing)
    assert "diag-index-dataset-1" in doc


def test_runs_filters_sorts_and_formats(indexed: Any) -> None:
    into, _, tail = indexed
    bound = sorted((n for n, d in tail.items() if d["verdict"]["class"] == "prefill-bound"),
                   key=lambda n: -tail[n]["benchmark"]["tokens_per_gpu"]["per_working_gpu"])
    got = _json("runs", str(into), "--where", "verdict = 'prefill-bound'", "--sort=-tok_s_gpu_working",
                "--format", "json")
    validate(got, "runs")
    assert [r["name"] for r in got["runs"]] == bound and len(bound) >= 2
    assert "report_part" not in got["runs"][0]
    # and binds tighter than or; ~ is a regex; a number against a number column
    df = select_runs(into, "name ~ '^sweep-' and tok_s_gpu_working > 9000 or name = 'healthy'", "name")
    assert df["name"].to_list() == ["healthy", "sweep-4xdep2"]
    assert select_runs(into, "top_finding = null")["name"].to_list() == \
        [n for n in sorted(tail) if not tail[n]["findings"]]
    csv = diag("runs", str(into), "--where", "validity = 'invalid'", "--sort", "name", "--format", "csv")
    lines = csv.stdout.splitlines()
    assert csv.returncode == 0 and lines[0].startswith("run_id,path,name,status,")
    assert [line.split(",")[2] for line in lines[1:]] == \
        sorted(n for n, d in tail.items() if d["verdict"]["class"] in ("invalid", "startup-stuck"))
    text = diag("runs", str(into), "--where", "name = 'healthy'")
    assert text.returncode == 0 and re.search(r"valid\s+healthy\s+7,264\s+DIAG-C008\s+\S+/healthy", text.stdout)


@pytest.mark.parametrize(("args", "message"), [
    (["--where", "colour = 'red'"], "unknown column 'colour'"),
    (["--where", "verdict = "], "cannot read it"),
    (["--where", "model ~ '('"], "not a regex"),
    (["--where", "tok_s_gpu_working > 'fast'"], "is a number"),
    (["--sort", "colour"], "--sort: unknown column 'colour'"),
])
def test_a_bad_query_is_one_line_and_exit_2(indexed: Any, args: list[str], message: str) -> None:
    res = diag("runs", str(indexed[0]), *args)
    assert res.returncode == 2 and not res.stdout and len(res.stderr.splitlines()) == 1, res.stderr
    assert res.stderr.startswith("diag runs: ") and message in res.stderr
    with pytest.raises(QueryError):
        select_runs(indexed[0], *(args[1:] if args[0] == "--where" else [None, args[1]]))


def test_no_index_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["runs", str(tmp_path)], ["report", str(RUNS / "healthy"), "--where", "verdict = 'healthy'"]):
        res = diag(*args)
        assert res.returncode == 2 and len(res.stderr.splitlines()) == 1, res.stderr


def test_the_report_over_the_index_equals_the_report_over_the_runs(indexed: Any) -> None:
    over_index = diag("report", str(indexed[0]), "--where", "name ~ '^sweep-'", "--format", "json")
    over_runs = diag("report", str(RUNS / "sweep-4xdep2"), str(RUNS / "sweep-5xdep2"), "--format", "json")
    assert over_index.returncode == over_runs.returncode == 0, over_index.stderr
    assert over_index.stdout == over_runs.stdout
    assert len(json.loads(over_index.stdout)["points"]) == 8


def test_duckdb_reads_the_dataset(indexed: Any) -> None:
    into = indexed[0]
    runs = pl.read_parquet(into / "runs.parquet")
    best = duckdb.sql(f"""
        select r.name, max(p.tok_s_gpu_working) as best
        from read_parquet('{into}/points.parquet') p join read_parquet('{into}/runs.parquet') r using (run_id)
        where p.verdict <> 'invalid' group by r.name order by best desc limit 1""").fetchall()
    points = pl.read_parquet(into / "points.parquet").join(runs, on="run_id").filter(pl.col("verdict") != "invalid")
    top = points.sort("tok_s_gpu_working", descending=True).row(0, named=True)
    assert best == [(top["name"], top["tok_s_gpu_working"])]
    [(n, ids)] = duckdb.sql(f"select count(*), count(distinct run_id) from "
                            f"read_parquet('{into}/series/*/*.parquet', hive_partitioning = true)").fetchall()
    series = pl.read_parquet(into / "series", hive_partitioning=True)
    assert (n, ids) == (series.height, series["run_id"].n_unique()) and n > 0


def _copy(dest: Path, *names: str) -> Path:
    root = dest / "outputs"
    for name in names:
        shutil.copytree(RUNS / name, root / name)
    return root


def _counts(root: Path, *extra: str) -> dict[str, int]:
    got = _json("index", str(root), "--jobs", "2", "--format", "json", *extra)
    return {k: got[k] for k in ("runs", "parsed", "reused", "failed")}


def test_an_unchanged_run_is_reused_a_changed_one_redone_a_failing_one_recorded(tmp_path: Path) -> None:
    root = _copy(tmp_path, *SMALL)
    assert _counts(root) == {"runs": 2, "parsed": 2, "reused": 0, "failed": 0}
    into = root / ".diag" / "index"
    before = pl.read_parquet(into / "runs.parquet")
    assert _counts(root) == {"runs": 2, "parsed": 0, "reused": 2, "failed": 0}
    log = next((root / SMALL[1] / "logs").glob("*_decode_w0.out"))
    with log.open("a") as fh:
        fh.write("a line appended after the index\n")
    broken = root / "zz-broken" / "logs"
    broken.mkdir(parents=True)
    (broken / "n1_decode_w0.out").write_bytes(bytes(range(256)) * 20)
    assert _counts(root) == {"runs": 3, "parsed": 1, "reused": 1, "failed": 1}
    after = pl.read_parquet(into / "runs.parquet")
    assert after["name"].to_list() == [*SMALL, "zz-broken"]
    assert after.row(0) == before.row(0)                        # the reused run: the same row
    assert after["input_hash"][1] != before["input_hash"][1]    # the changed run: analysed again
    failed = after.row(2, named=True)
    assert (failed["status"], failed["validity"]) == ("failed", "failed")
    assert "n1_decode_w0.out: binary file, not a log (no line of diag's vocabulary" in failed["error"]
    shutil.rmtree(root / SMALL[0])                              # a run gone: its rows and series go
    assert _counts(root) == {"runs": 2, "parsed": 0, "reused": 1, "failed": 1}
    assert pl.read_parquet(into / "series", hive_partitioning=True)["run_id"].unique().to_list() == \
        [after["run_id"][1]]


def test_a_result_saved_by_tail_is_taken_by_the_index(tmp_path: Path) -> None:
    root = _copy(tmp_path, SMALL[1])
    run = root / SMALL[1]
    res = diag("tail", str(run), "--save", "--format", "json")
    assert res.returncode in (0, 1) and res.stderr.strip() == f"wrote {run / '.diag'}", res.stderr
    assert json.loads((run / ".diag" / "result.json").read_text()) == json.loads(res.stdout)
    into = tmp_path / "idx"
    assert _counts(root, "--into", str(into)) == {"runs": 1, "parsed": 0, "reused": 1, "failed": 0}
    row = select_runs(into).row(0, named=True)
    assert (row["path"], row["verdict"]) == (str(run), json.loads(res.stdout)["verdict"]["class"])
    with next((run / "logs").glob("*_decode_w0.out")).open("a") as fh:
        fh.write("a line appended after the save\n")
    assert _counts(root, "--into", str(tmp_path / "idx2")) == {"runs": 1, "parsed": 1, "reused": 0, "failed": 0}


# ------------------------------------------------------------------ safe writes (issue 32)
def _whole(into: Path) -> tuple[int, list[str]]:
    """The generation the index reads as and its runs' names, once every table is checked to be of it: the
    points and findings of each run as many as its ``runs`` row counts, no row or partition of another run."""
    with snapshot(into) as whole:
        generation = json.loads((whole / "index.json").read_text())["generation"]
        assert whole.name == f"gen-{generation:06d}"
        runs = pl.read_parquet(whole / "runs.parquet")
        ids = set(runs["run_id"])
        counted = {"points": runs["points"], "findings": runs["errors"] + runs["warnings"] + runs["infos"]}
        for table, counts in counted.items():
            rows = dict(pl.read_parquet(whole / f"{table}.parquet").group_by("run_id").len().iter_rows())
            assert rows == {r: n for r, n in zip(runs["run_id"], counts.fill_null(0), strict=True) if n}, table
        assert set(pl.read_parquet(whole / "endpoints.parquet")["run_id"]) <= ids
        for name in PARTITIONED:
            assert {p.name.removeprefix("run_id=") for p in (whole / name).iterdir()} <= ids, name
        return generation, sorted(runs["name"])


def _start(root: Path, into: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "diag", "index", str(root), "--into", str(into), "--jobs", "1",
                             "--format", "json", *extra], cwd=root.parent, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _until(ready: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"never saw {what}"
        time.sleep(0.005)


def _finished(proc: subprocess.Popen[str]) -> dict[str, int]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), err   # 1: by the runs' verdicts (startup-stall's is startup-stuck)
    got = json.loads(out)
    return {k: got[k] for k in ("runs", "parsed", "reused", "failed")}


def test_a_second_writer_waits_for_the_first_and_both_finish(tmp_path: Path) -> None:
    root, into = _copy(tmp_path, *SMALL), tmp_path / "idx"
    first = _start(root, into)
    _until(lambda: (into / ".lock").exists() and (into / ".lock").read_text().split()[:1] == [str(first.pid)],
           "the first writer holding the lock")
    os.kill(first.pid, signal.SIGSTOP)   # it holds the lock until it goes on, however slow this machine is
    try:
        busy = diag("index", str(root), "--into", str(into), "--wait", "0")
        second = _start(root, into)
        assert select.select([second.stderr], [], [], 60)[0], "the second writer never said it waits"
        waiting = second.stderr.readline() if second.stderr else ""
    finally:
        os.kill(first.pid, signal.SIGCONT)
    assert (busy.returncode, busy.stdout, busy.stderr) == (2, "", f"diag index: {into}: another diag index (pid "
                                                                  f"{first.pid}) is still writing it after 0 s (--wait)\n")
    assert waiting == f"diag index: waiting for the other diag index (pid {first.pid}) writing {into} (at most 600 s)\n"
    assert _finished(first) == {"runs": 2, "parsed": 2, "reused": 0, "failed": 0}
    assert _finished(second) == {"runs": 2, "parsed": 0, "reused": 2, "failed": 0}   # it read what the first wrote
    assert _whole(into) == (1, sorted(SMALL))


def test_a_writer_killed_half_way_leaves_the_previous_index_whole(tmp_path: Path) -> None:
    root, into = _copy(tmp_path, SMALL[0]), tmp_path / "idx"
    assert _counts(root, "--into", str(into)) == {"runs": 1, "parsed": 1, "reused": 0, "failed": 0}
    _copy(tmp_path, SMALL[1], "healthy")
    writer = _start(root, into)

    def half_way() -> bool:   # the new generation holds the partitions of a run analysed now, and more are to come
        return any(p.name.startswith("run_id=") for p in into.glob(".gen-000002.tmp-*/series/*"))

    _until(half_way, "a run's partition in the generation being written")
    os.kill(writer.pid, signal.SIGSTOP)
    assert (into / "current").readlink() == Path("gen-000001")   # not swapped in yet
    os.kill(writer.pid, signal.SIGKILL)
    writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    assert _whole(into) == (1, [SMALL[0]]) and select_runs(into)["name"].to_list() == [SMALL[0]]
    assert _counts(root, "--into", str(into), "--jobs", "1") == {"runs": 3, "parsed": 2, "reused": 1, "failed": 0}
    assert _whole(into) == (2, sorted([*SMALL, "healthy"]))
    assert sorted(p.name for p in into.iterdir() if not p.is_symlink()) == [".lock", "gen-000002"]


def test_a_generation_a_reader_holds_outlives_the_writes_after_it(tmp_path: Path) -> None:
    root, into = _copy(tmp_path, *SMALL), tmp_path / "idx"
    _counts(root, "--into", str(into), "--jobs", "1")
    with snapshot(into) as held:
        shutil.rmtree(root / SMALL[0])
        assert _counts(root, "--into", str(into)) == {"runs": 1, "parsed": 0, "reused": 1, "failed": 0}
        assert _whole(into) == (2, [SMALL[1]])
        assert pl.read_parquet(held / "runs.parquet")["name"].to_list() == list(SMALL)   # still there, whole
    _copy(tmp_path, SMALL[0])
    _counts(root, "--into", str(into), "--jobs", "1")
    assert sorted(p.name for p in into.glob("gen-*")) == ["gen-000003"]   # let go: deleted by the next writer


WRITER = """
import sys
from pathlib import Path
from diag.index.build import build_index
root, into, aside = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
for _ in range(int(sys.argv[4])):   # a run gone, then back: two new generations a turn
    (root / aside.name).rename(aside)
    build_index([str(root)], into)
    aside.rename(root / aside.name)
    build_index([str(root)], into)
"""


def test_a_reader_always_reads_one_whole_generation_while_a_writer_writes(tmp_path: Path) -> None:
    root, into = _copy(tmp_path, *SMALL), tmp_path / "idx"
    _counts(root, "--into", str(into), "--jobs", "1")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(into), str(tmp_path / SMALL[0]), "3"],
                              cwd=tmp_path, text=True, stderr=subprocess.PIPE)
    seen: set[int] = set()
    while writer.poll() is None:
        generation, names = _whole(into)
        assert names in ([SMALL[1]], sorted(SMALL)) and names == ([SMALL[1]] if generation % 2 == 0 else sorted(SMALL))
        assert select_runs(into)["name"].to_list() in ([SMALL[1]], list(SMALL))
        seen.add(generation)
    assert writer.returncode == 0, writer.communicate()[1]
    assert _whole(into) == (7, sorted(SMALL)) and len(seen) >= 3, seen


def test_changed_thresholds_judge_the_runs_again_the_same_settings_reuse_them(tmp_path: Path) -> None:
    root, into, here = _copy(tmp_path, SMALL[1]), tmp_path / "idx", tmp_path / "here"
    here.mkdir()

    def index(*extra: str) -> tuple[dict[str, int], list[str]]:
        got = _json("index", str(root), "--into", str(into), "--format", "json", *extra, cwd=here)
        return ({k: got[k] for k in ("parsed", "reused")},
                pl.read_parquet(into / "findings.parquet")["code"].unique().sort().to_list())

    first, codes = index()
    assert first == {"parsed": 1, "reused": 0} and "DIAG-C008" in codes   # stream-interval 100 > max_interval 1
    (here / "diag.toml").write_text("fail-on = 'info'\n[rules.DIAG-C008]\nmax_interval = 1\n")   # the defaults
    assert index() == ({"parsed": 0, "reused": 1}, codes)
    (here / "diag.toml").write_text("[rules.DIAG-C008]\nmax_interval = 100\n")
    assert index() == ({"parsed": 1, "reused": 0}, [c for c in codes if c != "DIAG-C008"])
    assert index()[0] == {"parsed": 0, "reused": 1}
    (tmp_path / "strict.toml").write_text("[rules.DIAG-C008]\nseverity = 'error'\n")
    assert index("--config", str(tmp_path / "strict.toml")) == ({"parsed": 1, "reused": 0}, codes)
    assert select_runs(into)["errors"].to_list() == [1]


def test_an_index_of_an_earlier_diag_is_read_then_rewritten_as_generations(tmp_path: Path) -> None:
    root, into, flat = _copy(tmp_path, *SMALL), tmp_path / "idx", tmp_path / "flat"
    _counts(root, "--into", str(into), "--jobs", "1")
    shutil.copytree(into / "current", flat)   # the tables directly in DIR, as diag wrote them before generations
    manifest = json.loads((flat / "index.json").read_text())
    (flat / "index.json").write_text(json.dumps({k: v for k, v in manifest.items() if k != "generation"}))
    assert select_runs(flat)["name"].to_list() == list(SMALL)
    shutil.rmtree(root / SMALL[0])
    assert _counts(root, "--into", str(flat), "--jobs", "1") == {"runs": 1, "parsed": 0, "reused": 1, "failed": 0}
    assert _whole(flat) == (1, [SMALL[1]])
    assert sorted(p.name for p in flat.iterdir() if not p.is_symlink()) == [".lock", "gen-000001"]
    assert pl.read_parquet(flat / "series", hive_partitioning=True)["run_id"].unique().to_list() == \
        select_runs(flat)["run_id"].to_list()
