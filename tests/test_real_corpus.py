"""The real excerpts (issue-thread pastes): the ones gathered for issue 11 in tests/data/real-logs
(sources in its MANIFEST.md) and every excerpt of ../shared/samples/real-logs (read in place; its
MANIFEST.md says what each shows and the diagnosis its thread reached). For each: the exact number of
stats records, and the set of warning/error codes diag reports equals the expected set (derived from
the thread's diagnosis): an expected code missing or any extra finding fails. tests/README.md shows
the same table. An own row may carry `known_miss` (why diag does not reach the thread's diagnosis yet):
its check is a strict xfail, so the gap stays visible and the test fails once diag gets it right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import ROOT
from loading import report_of

from diag.files import NOT_DIAGS
from diag.parsers.ingest import parse_bulk

from helpers import load_tool

DATA = Path(__file__).parent / "data"
OWN = DATA / "real-logs"
OWN_ROWS = json.loads((OWN / "expected.json").read_text())
SHARED_ROWS = json.loads((DATA / "shared-real-logs.json").read_text())
score_corpus = load_tool("score_corpus")   # the same check, as the tool scores a corpus


def check(path: Path, row: dict) -> None:
    """One excerpt read alone: its stats records, its warning/error codes (exactly), and where the
    diagnosis is a state rather than a finding (stats absent or disabled), the endpoint's health and facts."""
    recs, _ = parse_bulk([path.read_bytes()], year=score_corpus.LOG_YEAR)
    report = report_of([str(path)])
    assert score_corpus.judge(row, recs, report).problems == []   # refused, stats, codes exactly, health
    assert not set(row["forbidden"]) & set(row["expected"])
    endpoints = {e.id: e for e in report.endpoints}
    for eid, facts in row.get("facts", {}).items():
        assert {k: endpoints[eid].facts.get(k) for k in facts} == facts


def test_corpora_are_complete_and_sourced(real_logs: Path) -> None:
    assert len(OWN_ROWS) >= 40
    assert {r["file"] for r in OWN_ROWS} == {p.name for p in OWN.glob("*.log")}
    assert {r["file"] for r in SHARED_ROWS} == {p.name for p in real_logs.glob("*.log")}
    manifest = {line.split("|")[1].strip(): line for line in (real_logs / "MANIFEST.md").read_text().splitlines()
                if line.startswith("| ")}
    for r in (*OWN_ROWS, *SHARED_ROWS):
        assert r["source"], r
    for r in SHARED_ROWS:
        assert manifest[r["file"]].startswith(f"| {r['file']} | {r['source']}"), r["file"]
    assert all(r["source"].startswith("https://github.com/") for r in OWN_ROWS)
    assert all(r["known_miss"].strip() for r in OWN_ROWS if "known_miss" in r)


def own_param(row: dict) -> object:
    """A row, marked as a strict expected failure where diag is known to miss the thread's diagnosis."""
    if "known_miss" not in row:
        return row
    return pytest.param(row, marks=pytest.mark.xfail(reason=row["known_miss"], raises=AssertionError, strict=True))


@pytest.mark.parametrize("row", [own_param(r) for r in OWN_ROWS], ids=[r["file"] for r in OWN_ROWS])
def test_own_excerpt(row: dict) -> None:
    check(OWN / row["file"], row)


@pytest.mark.parametrize("row", SHARED_ROWS, ids=[r["file"] for r in SHARED_ROWS])
def test_shared_excerpt(row: dict, real_logs: Path) -> None:
    check(real_logs / row["file"], row)


def test_readme_table_matches_the_expectations() -> None:
    text = (ROOT / "tests" / "README.md").read_text()
    for r in (*OWN_ROWS, *SHARED_ROWS):
        want = ", ".join(r["expected"]) or "-"
        got = f"known miss: {r['known_miss']}" if "known_miss" in r else want
        assert re.search(rf"^\| {re.escape(r['file'])} \| {r['stats']} \| {re.escape(want)} \| {re.escape(got)} \|$",
                         text, re.M), r["file"]


@pytest.mark.parametrize("name", ["n-12.log", "n-41.log", "n-44.log", "n-45.log"])
def test_file_of_unknown_kind_with_a_recognised_record_is_an_unknown_role_source(name: str) -> None:
    """LMCache-only logs and a P/D proxy's request log: read as an `unknown`-role source, not refused."""
    report = report_of([str(OWN / name)])
    assert report.run.skipped == ()
    assert [ep.role for ep in report.run.endpoints.values()] == ["unknown"]


def test_lmcache_lines_carry_their_time_and_the_proxy_log_counts_requests() -> None:
    e002 = [f for f in report_of([str(OWN / "n-41.log")]).findings if f.code == "DIAG-E002"]
    assert len(e002) == 1 and e002[0].first_ts is not None
    assert e002[0].first_ts.strftime("%Y-%m-%d %H:%M:%S") == "2025-07-18 05:59:19"
    for name, routed in (("n-44.log", 1), ("n-45.log", 1)):
        src = report_of([str(OWN / name)]).run.sources[0]
        assert src.counts.noise["request"] == routed, name


def test_a_file_with_no_recognised_record_is_still_refused(tmp_path: Path) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("hello world\nnothing a log format knows\n")
    report = report_of([str(f)])
    assert [(p, why) for p, why in report.run.skipped] == [(str(f), NOT_DIAGS)]
    assert "no line of its vocabulary (engine stats" in NOT_DIAGS
    assert not report.run.endpoints


def test_kv_load_failures_of_lmcache_and_vllm_are_one_e002(tmp_path: Path) -> None:
    """LMCache's 'failed to load' (wording of lmcache/integration/vllm/vllm_v1_adapter.py) and vLLM's
    'Recovered from KV load failure' (v1/core/sched/scheduler.py) are KV-load-failure evidence."""
    log = tmp_path / "decode.log"
    log.write_text(
        "(EngineCore_DP0 pid=7) [2026-01-27 01:40:16,922] LMCache WARNING: Request chatcmpl-a55b failed to load 256 "
        "tokens across 16 blocks (vllm_v1_adapter.py:1125:lmcache.integration.vllm.vllm_v1_adapter)\n"
        "(EngineCore_DP0 pid=7) WARNING 01-27 01:40:17 [scheduler.py:1816] Recovered from KV load failure: 215 "
        "request(s) rescheduled (373752 tokens affected).\n")
    hits = [f for f in report_of([str(log)]).findings if f.code == "DIAG-E002"]
    assert len(hits) == 1
    assert hits[0].evidence["counts"] == {"kv_connector": 1, "kv_load_recovered": 215}


@pytest.mark.parametrize(("name", "counts"), [
    ("n-57.log", {"sglang_kv_transfer": 2}),
    ("n-58.log", {"sglang_kv_transfer": 1}),
    ("n-65.log", {"mooncake_transfer": 8, "v0_kv_receive": 1}),
    ("n-66.log", {"mooncake_transfer": 2}),
    ("n-82.log", {"mooncake_transfer": 3, "ascend_mooncake_transfer": 2}),
    ("n-83.log", {"ascend_mooncake_transfer": 2, "transport": 1}),   # its glog lines carry the year (glog 0.7)
])
def test_kv_transfer_failures_of_other_stacks_are_one_e002(name: str, counts: dict[str, int]) -> None:
    """SGLang (KVTransferError, also inside an abort response), Mooncake's engine and store glog lines,
    vllm-ascend's MooncakeConnector and vLLM's V0 connectors: each wording counted once per line."""
    hits = [f for f in report_of([str(OWN / name)]).findings if f.code == "DIAG-E002"]
    assert len(hits) == 1
    assert hits[0].evidence["counts"] == counts


@pytest.mark.parametrize(("name", "code"), [("n-64.log", "DIAG-E004"), ("n-85.log", "DIAG-E001"),
                                            ("n-86.log", "DIAG-E001")])
def test_sglang_scheduler_exception_is_a_death_phased_by_its_frames(name: str, code: str) -> None:
    """'Scheduler hit an exception' kills the SGLang server: in Scheduler.__init__ a start-up failure, in
    the event loop (run_event_loop, event_loop_overlap, run_batch) an engine death."""
    hits = [f for f in report_of([str(OWN / name)]).findings if f.code in ("DIAG-E001", "DIAG-E004")]
    assert [f.code for f in hits] == [code]
    assert hits[0].evidence["faults"].get("sglang_process_died") == 1
