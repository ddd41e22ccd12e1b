"""Things that exist once (issue 22): the label -> role mapping, the stats column spec, the Prometheus row
converter, the one way to build a Run; and the Run is read-only all the way down."""

from __future__ import annotations

import ast
import re
from dataclasses import FrozenInstanceError, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from diag.files import find_runs
from diag.parsers import columns
from diag.parsers.prom_vocab import INDEX_LABELS, ROLE_LABELS, series_endpoint
from diag.parsers.prometheus import StatsConverter, parse_exposition
from diag.parsers.records import StatsSample
from diag.parsers.stats_columns import RECORD_COLUMNS, RUN_METRICS, RUN_SCHEMA, STATS_SPEC
from diag.pipeline import Pipeline
from diag.rules import promrules, runmodel
from diag.rules.settings import Settings
from diag.sources import BatchSource, ReplaySource
from diag.tui.state import compact

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for folder in ("parsers", "rules", "diag") for p in (ROOT / folder).rglob("*.py"))


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _collections(tree: ast.AST) -> list[ast.AST]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Tuple, ast.List, ast.Set, ast.Dict))]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ------------------------------------------------------------------ the label -> role mapping

DYNAMO_LABELS = {"dynamo_component", "worker_type", "worker_role"}   # the role labels that are nothing else


def test_role_labels_are_listed_once() -> None:
    """No module but parsers/prom_vocab.py names two of the role labels: the others read its mapping."""
    assert set(ROLE_LABELS) >= DYNAMO_LABELS
    bad = []
    for path in SOURCES:
        named = {s for s in _strings(ast.parse(path.read_text(encoding="utf-8"))) if s in DYNAMO_LABELS}
        if len(named) >= 2 and _rel(path) != "parsers/prom_vocab.py":
            bad.append(f"{_rel(path)}: {sorted(named)}")
    assert not bad, bad


def _promql_endpoint(labels: dict[str, str]) -> tuple[str | None, str | None]:
    """What the exported ``label_replace`` chain gives a series (Prometheus anchors the regex)."""
    role = worker = None
    for label, repl, regex in promrules._ROLE_FROM:
        if m := re.fullmatch(regex, labels.get(label, "")):
            role = m.expand(repl.replace("$1", r"\1"))
    for label, repl, regex in promrules._WORKER_FROM:
        if m := re.fullmatch(regex, labels.get(label, "")):
            worker = m.expand(repl.replace("$1", r"\1"))
    return role, worker


@pytest.mark.parametrize("labels", [
    {"dynamo_component": "prefill", "job": "vllm", "instance": "n1:8000"},
    {"dynamo_component": "backend", "job": "decode-w2", "instance": "n1:8000"},
    {"worker_type": "decode", "instance": "n1:7500"},
    {"job": "prefill_3", "instance": "n1:7500"},
    {"worker_role": "prefill", "worker_index": "1", "job": "decode-w5", "instance": "n2:8000"},
    {"role": "agg", "worker": "w4", "job": "agg", "instance": "n3:8000"},
])
def test_python_and_promql_read_labels_alike(labels: dict[str, str]) -> None:
    role, index = series_endpoint(labels)
    assert _promql_endpoint(labels) == (role, str(index) if index is not None else labels["instance"])


def test_an_unlabelled_series_has_no_role_anywhere() -> None:
    assert series_endpoint({"job": "vllm", "instance": "n1:7500"}) == ("unknown", None)
    assert _promql_endpoint({"job": "vllm", "instance": "n1:7500"}) == (None, "n1:7500")
    assert set(INDEX_LABELS) & set(ROLE_LABELS) == {"job"}


# ------------------------------------------------------------------ the stats column spec

def test_stats_columns_come_from_one_spec() -> None:
    record_fields = [f.name for f in fields(StatsSample) if f.name != "latency"]
    assert list(RECORD_COLUMNS) == record_fields
    assert columns.STATS_COLUMNS is RECORD_COLUMNS
    assert list(runmodel.STATS_SCHEMA) == ["ts", "engine", "file", "line", *RUN_SCHEMA]
    assert RUN_METRICS == ("prompt_tps", "gen_tps", "running", "waiting", "deferred", "preemptions", "kv_usage",
                           "prefix_hit", "ext_hit", "kv_fetch_waiting", "kv_fetch_running", "prompt_all_tps",
                           "new_tokens", "bootstrap_req", "inflight_req", "prealloc_req", "transfer_req",
                           "retracted_req", "ctx_requests", "gen_tokens", "step_ms", "device_step_ms", "steps",
                           "dp_share", "busy")
    assert RECORD_COLUMNS["kv_usage"] == pl.Float64 and RECORD_COLUMNS["running"] == pl.Int64
    assert all(c.doc for c in STATS_SPEC) and {c.unit for c in STATS_SPEC if c.name == "kv_usage"} == {"%"}


def test_no_module_lists_the_stats_fields_again() -> None:
    """No collection literal outside the spec holds every run metric (a second list of the fields)."""
    bad = []
    for path in SOURCES:
        for node in _collections(ast.parse(path.read_text(encoding="utf-8"))):
            if set(RUN_METRICS) <= set(_strings(node)):
                bad.append(f"{_rel(path)}:{node.lineno}")  # type: ignore[attr-defined]
    assert not bad, bad


# ------------------------------------------------------------------ one Prometheus row converter

def test_server_rows_and_scrapes_give_the_same_sample() -> None:
    """A Prometheus server's rates over a step and two scrapes a step apart are one row, one converter."""
    t0 = datetime(2026, 8, 6, 12, 0, tzinfo=UTC)
    t1 = t0 + timedelta(seconds=10)

    def scrape(prompt: float, gen: float, preempt: float, q: float, h: float) -> str:
        return (f'vllm:prompt_tokens_total{{engine="1"}} {prompt}\nvllm:generation_tokens_total{{engine="1"}} {gen}\n'
                f'vllm:num_preemptions_total{{engine="1"}} {preempt}\nvllm:prefix_cache_queries_total{{engine="1"}} {q}\n'
                f'vllm:prefix_cache_hits_total{{engine="1"}} {h}\nvllm:num_requests_running{{engine="1"}} 3\n'
                'vllm:num_requests_waiting{engine="1"} 1\nvllm:kv_cache_usage_perc{engine="1"} 0.5\n')

    conv = StatsConverter()
    assert conv.add(t0, parse_exposition(scrape(0, 0, 0, 0, 0)), 7) == []
    (scraped,) = conv.add(t1, parse_exposition(scrape(1000, 500, 2, 100, 25)), 7)
    served = StatsConverter.from_rates(t1, 7, "1", {
        "prompt_all": 100.0, "gen": 50.0, "preempt": 0.2, "prefix_q": 10.0, "prefix_h": 2.5, "running": 3.0,
        "waiting": 1.0, "kv": 0.5, "ext_q": None, "ttft_p90_s": float("nan"), "role": "decode"}, 10.0)
    assert served == scraped
    assert (served.prompt_all_tps, served.preemptions, served.kv_usage, served.prefix_hit) == (100.0, 2, 50.0, 25.0)


def test_only_the_converter_makes_prometheus_rows() -> None:
    for rel in ("diag/prom.py", "diag/telemetry.py"):
        calls = [n for n in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8")))
                 if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "StatsSample"]
        assert not calls, rel


# ------------------------------------------------------------------ one way to build a Run

def test_only_assemble_builds_a_run() -> None:
    """``Run(...)`` and ``build_endpoints(...)`` are called in rules/assemble.py alone: ``diag check RUN_DIR``
    and the catalog examples go through the pipeline's assemble and judge."""
    bad = []
    for path in SOURCES:
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Call) and getattr(n.func, "id", None) in ("Run", "build_endpoints") \
                    and _rel(path) != "rules/assemble.py":
                bad.append(f"{_rel(path)}:{n.lineno}")
    assert not bad, bad


# ------------------------------------------------------------------ the Run is read-only

@pytest.fixture(scope="module")
def kv_run():
    return Pipeline(BatchSource(find_runs([str(ROOT / "samples/runs/kv-exhaustion")])[0]), Settings()).once().run


def test_a_run_cannot_be_mutated(kv_run) -> None:
    run = kv_run
    ep = next(iter(run.endpoints.values()))
    log = next(lg for lg in run.sources if lg.records)
    with pytest.raises(FrozenInstanceError):
        run.build = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        run.endpoints["x"] = ep  # type: ignore[index]
    with pytest.raises(FrozenInstanceError):
        ep.role = "x"  # type: ignore[misc]
    for mapping in (ep.facts, ep.fact_lines, ep.variants, *ep.launch):
        with pytest.raises(TypeError):
            mapping["x"] = 1  # type: ignore[index]
    assert isinstance(ep.records, tuple) and isinstance(ep.nodes, tuple) and isinstance(ep.dp_ranks, frozenset)
    assert ep.launch, "the sample's orchestrator launches its workers"
    with pytest.raises(FrozenInstanceError):
        log.records = []
    assert isinstance(log.records, tuple)
    with pytest.raises(FrozenInstanceError):
        log.counts.lines = 0
    with pytest.raises(TypeError):
        log.counts.noise["request"] = 0  # type: ignore[index]


def test_what_rules_derive_from_a_run_is_computed_once_and_is_no_field(kv_run) -> None:
    """B001 and B002 share the roles' joined series through ``Run.derived``: computed on the first ask, the same
    object after; a run copied with ``dataclasses.replace`` starts without it, and equality ignores it."""
    from dataclasses import replace

    calls = []
    first = kv_run.derived(("test", 1), lambda: calls.append(1) or pl.DataFrame({"a": [1]}))
    assert kv_run.derived(("test", 1), lambda: calls.append(1) or pl.DataFrame()) is first and calls == [1]
    copy = replace(kv_run)
    assert copy == kv_run and "_derived" not in vars(copy)
    assert "_derived" not in {f.name for f in fields(kv_run)}


def _contents(run) -> tuple:
    return (tuple((lg.path, len(lg.records), lg.stats.height, lg.counts.lines) for lg in run.sources),
            tuple((ep.id, len(ep.records), ep.stats.height) for ep in run.endpoints.values()))


def test_later_polls_and_compaction_leave_an_earlier_run_alone() -> None:
    """A replay's next step appends to the source's logs and the TUI compacts them (the source adopts the
    trimmed copies): a Run assembled before holds its own read-only copy."""
    t = [0.0]
    replay = ReplaySource(find_runs([str(ROOT / "samples/runs/kv-exhaustion")])[0], speed=60.0,
                          monotonic=lambda: t[0])
    pipeline = Pipeline(replay, Settings())
    replay.now()          # the replay's clock starts
    t[0] = 10.0           # 10 min into the run
    pipeline.step(force=True)
    assert pipeline.report is not None
    earlier = pipeline.report.run
    before = _contents(earlier)
    assert any(n for _, n, _, _ in before[0]), "the first step released records"
    t[0] = 1e6
    pipeline.step(force=True)
    later = pipeline.report.run
    trimmed = compact(replay.logs(), datetime.max.replace(tzinfo=UTC), cap=0)
    assert trimmed
    replay.adopt(trimmed)
    assert _contents(earlier) == before
    assert _contents(later) != before


# ------------------------------------------------------------------ domain names, not letters

# one-letter aliases left in modules other sessions own (issue 22): none may be added
ALIASES_LEFT: set[str] = set()


def test_no_one_letter_module_aliases() -> None:
    """``from . import report as R``: ``R`` is ``report`` in one file and ``sweep`` in another."""
    found = set()
    for path in SOURCES:
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, (ast.Import, ast.ImportFrom)) and any(a.asname and len(a.asname) == 1 for a in n.names):
                found.add(_rel(path))
    assert found <= ALIASES_LEFT, sorted(found - ALIASES_LEFT)
