"""The run model: endpoints, their engines and time series, startup facts, faults, lifecycle.

Built purely from parsed logs (:class:`parsers.ingest.ParsedLog`); the rules evaluate it and
diag renders it.

An endpoint is (role, worker index): ``nodeC_decode_w0.out`` and ``nodeD_decode_w0.out`` are the
one decode endpoint ``decode-w0``, whose engines are the union of the DP ranks logged in both.
Output interleaved in one ``slurm-<id>.out`` with srun ``N:`` labels is split per task, and each
task's role comes from its content (``kv_role``, ``--disaggregation-mode``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
from diag.parsers.ingest import ParsedLog
from diag.parsers.records import (
    Fault,
    KVExpiry,
    KVLoadFailure,
    KVTransfer,
    Lifecycle,
    NixlFailure,
    Preemption,
    Record,
    StartupFact,
    StatsSample,
)

STATS_SCHEMA = {
    "ts": pl.Datetime("us", "UTC"), "engine": pl.Utf8, "file": pl.Utf8, "line": pl.Int64,
    "prompt_tps": pl.Float64, "gen_tps": pl.Float64, "running": pl.Int64, "waiting": pl.Int64,
    "deferred": pl.Int64, "preemptions": pl.Int64, "kv_usage": pl.Float64, "prefix_hit": pl.Float64,
    "ext_hit": pl.Float64,
}
KV_SCHEMA = {
    "ts": pl.Datetime("us", "UTC"), "file": pl.Utf8, "line": pl.Int64, "transfers": pl.Float64,
    "avg_xfer_ms": pl.Float64, "p90_xfer_ms": pl.Float64, "mb_per_transfer": pl.Float64,
    "throughput_mbs": pl.Float64, "failed": pl.Float64, "expired": pl.Float64,
}
_DP_PROC = re.compile(r"(?:EngineCore|Worker)_DP(\d+)")


@dataclass
class Endpoint:
    id: str
    role: str
    index: int | None
    nodes: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    records: list[tuple[str, Record]] = field(default_factory=list)  # (file, record)
    stats: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=STATS_SCHEMA))
    kv: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=KV_SCHEMA))
    facts: dict[str, Any] = field(default_factory=dict)
    fact_lines: dict[str, tuple[str, int]] = field(default_factory=dict)
    dp_ranks: set[str] = field(default_factory=set)
    launch: list[dict[str, Any]] = field(default_factory=list)  # per process: node, argv, flags, env (orchestrator)

    def of(self, kind: type[Record]) -> list[tuple[str, Record]]:
        return [(f, r) for f, r in self.records if isinstance(r, kind)]

    @property
    def engines(self) -> list[str]:
        seen = set(self.stats["engine"].unique().to_list()) if self.stats.height else set()
        return sorted(seen | self.dp_ranks, key=lambda e: (len(e), e))

    @property
    def samples(self) -> int:
        return self.stats.height

    @property
    def first_ts(self) -> datetime | None:
        ts = [r.ts for _, r in self.records if r.ts is not None]
        return min(ts) if ts else None

    @property
    def last_ts(self) -> datetime | None:
        ts = [r.ts for _, r in self.records if r.ts is not None]
        return max(ts) if ts else None


@dataclass
class Run:
    root: Path | None
    sources: list[ParsedLog]
    skipped: list[tuple[str, str]]          # (path, reason)
    endpoints: dict[str, Endpoint]
    lifecycle: list[tuple[str, Lifecycle]] = field(default_factory=list)
    orchestrator_faults: list[tuple[str, Fault]] = field(default_factory=list)
    job: Any = None
    recipe: Any = None
    benchmark: list[Any] = field(default_factory=list)      # parsers.records.BenchResult
    accuracy: list[Any] = field(default_factory=list)       # parsers.records.AccuracyResult
    concurrencies: list[int] = field(default_factory=list)  # from the recipe / job, when known
    build: str | None = None                                # vLLM build (version or nightly commit)
    errors: list[str] = field(default_factory=list)

    def engine_count(self, role: str) -> int:
        return sum(len(e.engines) for e in self.endpoints.values() if e.role == role)

    def top_concurrency(self) -> int | None:
        """The highest benchmark concurrency this run sent (results first, then the recipe)."""
        seen = [b.concurrency for b in self.benchmark if getattr(b, "concurrency", None)]
        seen += self.concurrencies
        return max(seen) if seen else None

    def async_scheduling(self, ep: Endpoint) -> bool:
        if "async_scheduling" in ep.facts:
            return bool(ep.facts["async_scheduling"])
        args = ep.facts.get("non_default_args")
        return bool(isinstance(args, dict) and args.get("async_scheduling"))

    def faults(self) -> list[tuple[str, str, Fault]]:
        """(endpoint id, file, fault) in time order; the orchestrator's quoted tails only when no
        worker log had any fault (a run whose worker logs are missing)."""
        out = [(ep.id, f, r) for ep in self.endpoints.values() for f, r in ep.of(Fault)]  # type: ignore[misc]
        if not out:
            out = [("run", f, r) for f, r in self.orchestrator_faults]
        return sorted(out, key=lambda t: (t[2].ts is None, t[2].ts or datetime.min.replace(tzinfo=UTC), t[2].line))

    def ready_at(self) -> datetime | None:
        """When the orchestrator saw every worker ready (None when it never did, or no log says)."""
        for _, r in self.lifecycle:
            if r.event in ("ready", "healthy") and r.ts is not None:
                return r.ts
        return None

    def accuracy_scores(self) -> list[tuple[str, float]]:
        """(label, score 0..1) per accuracy run; one figure per run, the headline metric."""
        prefer = ("accuracy", "score", "mean_score", "exact_match", "acc")
        out = []
        for i, a in enumerate(self.accuracy):
            if a.metric in prefer:
                label = f"{a.task or 'eval'} run {a.run if a.run is not None else i}"
                out.append((label, float(a.value)))
        return out

    def async_race_hint(self) -> str | None:
        on = [e.id for e in self.endpoints.values() if self.async_scheduling(e)]
        if not on:
            return None
        return (f"async scheduling was on ({', '.join(on)}) on build {self.build or 'unknown'}: without P/D fixes "
                "#45357 and #48481 it zeroes received KV on hybrid models")

    @property
    def start(self) -> datetime | None:
        ts = [e.first_ts for e in self.endpoints.values() if e.first_ts]
        ts += [r.ts for _, r in self.lifecycle if r.ts]
        return min(ts) if ts else None

    @property
    def end(self) -> datetime | None:
        ts = [e.last_ts for e in self.endpoints.values() if e.last_ts]
        ts += [r.ts for _, r in self.lifecycle if r.ts]
        return max(ts) if ts else None


def endpoint_id(role: str, index: int | None) -> str:
    return f"{role}-w{index}" if index is not None else role


def _role_of(records: list[Record]) -> str | None:
    for r in records:
        if isinstance(r, StartupFact) and r.key == "kv_role":
            return {"kv_producer": "prefill", "kv_consumer": "decode"}.get(r.value)
        if isinstance(r, Lifecycle):
            mode = r.get("mode")
            if mode in ("prefill", "decode", "agg"):
                return mode
    return None


def _split_tasks(src: ParsedLog) -> tuple[dict[int, list[Record]], list[Record]]:
    """Records of an orchestrator file: per srun task label, and the orchestrator's own."""
    by_task: dict[int, list[Record]] = defaultdict(list)
    own: list[Record] = []
    for r in src.records:
        if r.task is not None and not isinstance(r, Lifecycle):
            by_task[r.task].append(r)
        else:
            own.append(r)
    return by_task, own


def _stats_frame(rows: list[tuple[str, str, StatsSample]]) -> pl.DataFrame:
    recs = [r for _, _, r in rows]
    data: dict[str, list[Any]] = {"ts": [r.ts for r in recs], "engine": [e for e, _, _ in rows],
                                  "file": [f for _, f, _ in rows], "line": [r.line for r in recs]}
    for k in ("prompt_tps", "gen_tps", "running", "waiting", "deferred", "preemptions", "kv_usage",
              "prefix_hit", "ext_hit"):
        data[k] = [getattr(r, k) for r in recs]
    return pl.DataFrame(data, schema=STATS_SCHEMA).sort("ts", "engine", nulls_last=True, maintain_order=True)


def _kv_frame(rows: list[tuple[str, KVTransfer]]) -> pl.DataFrame:
    keys = {"transfers": ("Num successful transfers", "num_successful_transfers"),
            "avg_xfer_ms": ("Avg xfer time (ms)",), "p90_xfer_ms": ("P90 xfer time (ms)",),
            "mb_per_transfer": ("Avg MB per transfer",), "throughput_mbs": ("Throughput (MB/s)",),
            "failed": ("Num failed transfers",), "expired": ("Num KV expired reqs",)}
    data: dict[str, list[Any]] = {k: [] for k in KV_SCHEMA}
    for file, r in rows:
        data["ts"].append(r.ts)
        data["file"].append(file)
        data["line"].append(r.line)
        for col, names in keys.items():
            data[col].append(next((v for n in names if (v := r.get(n)) is not None), None))
    return pl.DataFrame(data, schema=KV_SCHEMA).sort("ts", nulls_last=True, maintain_order=True)


def _engine_key(s: StatsSample) -> str:
    if s.engine is not None:
        return str(s.engine)
    if s.n_aggregated is not None:
        return f"agg{s.n_aggregated}"
    return "0"


def _finish(ep: Endpoint) -> None:
    stats_rows: list[tuple[str, str, StatsSample]] = []
    owners: dict[str, str] = {}
    clash = False
    procs: set[str] = set()
    for file, r in ep.records:
        if type(r) is StatsSample:
            key = _engine_key(r)
            if r.variant != "prom" and owners.setdefault(key, file) != file:  # Prometheus rows name engines
                clash = True
            stats_rows.append((key, file, r))
        elif isinstance(r, StartupFact):
            if r.key == "dp_rank":
                ep.dp_ranks.add(str(r.value))
            elif r.key not in ep.facts:
                ep.facts[r.key] = r.value
                ep.fact_lines[r.key] = (file, r.line)
        if r.proc:
            procs.add(r.proc)
    for proc in procs:
        if m := _DP_PROC.match(proc):
            ep.dp_ranks.add(str(int(m.group(1))))
    if clash:  # each file numbers its engines from 0: keep them apart by node
        node_of = dict.fromkeys(ep.files)
        stats_rows = [(f"{Path(file).name.split('_')[0]}/{key}" if len(node_of) > 1 and r.variant != "prom"
                       else key, file, r) for key, file, r in stats_rows]
        ep.dp_ranks = set()
    ep.stats = _stats_frame(stats_rows)
    ep.kv = _kv_frame([(f, r) for f, r in ep.of(KVTransfer)])  # type: ignore[misc]


def _attach_launches(endpoints: dict[str, Endpoint], lifecycle: list[tuple[str, Lifecycle]]) -> None:
    """The orchestrator's ``Starting <mode> worker <i> on <node>`` + ``Env:`` + ``Command:`` triplets:
    the flags and environment that actually ran, per endpoint process."""
    from diag.parsers.flags import parse_flag_string

    cur: dict[str, Any] | None = None
    for _, ev in lifecycle:
        if ev.event == "worker_start":
            eid = endpoint_id(ev.get("mode"), ev.get("index"))
            cur = {"endpoint": eid, "node": ev.get("node"), "line": ev.line}
            if eid in endpoints:
                endpoints[eid].launch.append(cur)
        elif cur is not None and ev.event == "worker_env":
            cur["env"] = ev.get("env") or {}
        elif cur is not None and ev.event == "command":
            cur["argv"] = ev.get("argv")
            try:
                cur["flags"] = parse_flag_string(ev.get("argv") or "")
            except ValueError:
                cur["flags"] = {}


def build_endpoints(sources: list[ParsedLog]) -> tuple[dict[str, Endpoint], list[tuple[str, Lifecycle]],
                                                    list[tuple[str, Fault]]]:
    """Group worker records into endpoints; keep orchestrator lifecycle and quoted faults apart.
    Prometheus sources (kind ``prometheus``, diag.prom) join their role/index's endpoint like a worker
    log; a frontend's are not an endpoint, like its log."""
    endpoints: dict[str, Endpoint] = {}
    lifecycle: list[tuple[str, Lifecycle]] = []
    quoted: list[tuple[str, Fault]] = []
    next_index: dict[str, int] = defaultdict(int)

    def add(role: str, index: int | None, node: str | None, file: str, recs: list[Record]) -> None:
        eid = endpoint_id(role, index)
        ep = endpoints.setdefault(eid, Endpoint(eid, role, index))
        if node and node not in ep.nodes:
            ep.nodes.append(node)
        if file not in ep.files:
            ep.files.append(file)
        ep.records.extend((file, r) for r in recs)

    for src in sources:
        if src.error or src.kind not in ("worker", "orchestrator", "prometheus"):
            continue
        if src.kind == "prometheus" and src.info.role == "frontend":
            continue
        name = src.path
        info = src.info
        if src.kind == "orchestrator":
            by_task, own = _split_tasks(src)
            for r in own:
                if isinstance(r, Lifecycle):
                    lifecycle.append((name, r))
                elif isinstance(r, Fault):
                    quoted.append((name, r))
            for task in sorted(by_task):
                recs = by_task[task]
                role = _role_of(recs) or "unknown"
                idx = next_index[role]
                next_index[role] += 1
                add(role, idx, f"task{task}", f"{name}#task{task}", recs)
            continue
        role = info.role or _role_of(src.records) or "unknown"
        add(role, info.index, info.node, name, src.records)
    for ep in endpoints.values():
        _finish(ep)
    _attach_launches(endpoints, lifecycle)
    order = {"prefill": 0, "decode": 1, "agg": 2}
    endpoints = dict(sorted(endpoints.items(), key=lambda kv: (order.get(kv[1].role, 9), kv[1].index or 0)))
    return endpoints, lifecycle, quoted


__all__ = ["Endpoint", "KVExpiry", "KVLoadFailure", "NixlFailure", "Preemption", "Run", "build_endpoints",
           "endpoint_id"]
