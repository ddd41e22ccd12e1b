"""Endpoints from parsed logs: which files make one endpoint, and its frames, facts and DP ranks.

An endpoint is (role, worker index): ``nodeC_decode_w0.out`` and ``nodeD_decode_w0.out`` are the
one decode endpoint ``decode-w0``, whose engines are the union of the DP ranks logged in both.
Output interleaved in one ``slurm-<id>.out`` with srun ``N:`` labels is split per task, and each task's role
comes from its content (``kv_role``, ``--disaggregation-mode``). Each file's stats and KV rows become
frames once (:class:`FrameCache` keeps them while a run grows); :func:`build_endpoints` makes the
read-only :class:`rules.runmodel.Endpoint` of each group, called by :func:`rules.assemble.assemble` alone.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache as memo
from types import MappingProxyType
from typing import Any

import polars as pl

from diag.parsers import engines
from diag.parsers.columns import KV_VALUE_KEYS
from diag.parsers.ingest import ParsedLog
from diag.parsers.records import Fault, KVTransfer, Lifecycle, Record, StartupFact, StatsSample
from diag.parsers.stats_columns import LATENCY_COLUMNS, RUN_METRICS

from .runmodel import KV_SCHEMA, STATS_SCHEMA, Endpoint, endpoint_id, latest
from .serving import served
from .startup import build_startup
from .windows import fold_steps


@memo
def _engine_procs() -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(a.engine_proc) for a in engines.adapters() if a.engine_proc)


def engine_index(proc: str) -> str | None:
    """The engine (DP rank) a process prefix names, as its engine's adapter reads it (``engine_proc``)."""
    for rx in _engine_procs():
        if m := rx.match(proc):
            return str(int(m.group(1)))
    return None


def _role_of(records: list[Record]) -> str | None:
    for r in records:
        if isinstance(r, StartupFact) and r.key == "kv_role":
            return next((roles[r.value] for a in engines.adapters() if r.value in (roles := a.kv_roles)), None)
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


_RAW_STATS = {**STATS_SCHEMA, "prom": pl.Boolean}
# A file's frame carries the latency columns only when its rows have any (Prometheus histograms): on a
# log-only run they would be a dozen null columns as long as the stats.
_RAW_BASE = {k: v for k, v in _RAW_STATS.items() if k not in LATENCY_COLUMNS}


def _engine_key(s: StatsSample) -> str:
    if s.engine is not None:
        return str(s.engine)
    if s.n_aggregated is not None:
        return f"agg{s.n_aggregated}"
    return "0"


_ENGINE_KEY = (pl.when(pl.col("engine").is_not_null()).then(pl.col("engine").cast(pl.Utf8))
               .when(pl.col("n_aggregated").is_not_null())
               .then(pl.concat_str([pl.lit("agg"), pl.col("n_aggregated").cast(pl.Utf8)]))
               .otherwise(pl.lit("0")))


def _file_frames(file: str, records: list[Record]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One file's stats rows from its records (engine as the file names it, ``prom`` for Prometheus
    rows) and KV rows."""
    stats = [r for r in records if type(r) is StatsSample]
    data: dict[str, list[Any]] = {"ts": [r.ts for r in stats], "engine": [_engine_key(r) for r in stats],
                                  "file": [file] * len(stats), "line": [r.line for r in stats]}
    for k in RUN_METRICS:
        data[k] = [getattr(r, k) for r in stats]
    timed = any(r.latency for r in stats)
    if timed:
        for k in LATENCY_COLUMNS:
            data[k] = [(r.latency or {}).get(k) for r in stats]
    data["prom"] = [r.variant == "prom" for r in stats]
    kvs = [r for r in records if isinstance(r, KVTransfer)]
    kv: dict[str, list[Any]] = {"ts": [r.ts for r in kvs], "file": [file] * len(kvs), "line": [r.line for r in kvs]}
    for col, names in KV_VALUE_KEYS.items():
        kv[col] = [next((v for n in names if (v := r.get(n)) is not None), None) for r in kvs]
    return (pl.DataFrame(data, schema={k: v for k, v in _RAW_STATS.items() if k in data}),
            pl.DataFrame(kv, schema=KV_SCHEMA))


def _chunk_frames(file: str, stats: pl.DataFrame, kv: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The same frames from a log's extracted columns (parsers.columns), without a record per row."""
    s = stats.select(pl.col("ts"), _ENGINE_KEY.alias("engine"), pl.lit(file).alias("file"), pl.col("line"),
                     *(pl.col(c) for c in RUN_METRICS), (pl.col("variant") == "prom").alias("prom"))
    k = kv.select(pl.col("ts"), pl.lit(file).alias("file"), pl.col("line"), *(pl.col(c) for c in KV_VALUE_KEYS))
    return s.cast(_RAW_BASE), k.cast(KV_SCHEMA)  # type: ignore[arg-type]


def _merge(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    """Record rows and extracted rows of one file, in line order."""
    if a.height == 0:
        return b
    if b.height == 0:
        return a
    return pl.concat([a, b], how="diagonal").sort("line", maintain_order=True)


@dataclass
class _Cached:
    n: int
    last: Record | None
    rec_stats: pl.DataFrame
    rec_kv: pl.DataFrame
    src: tuple[pl.DataFrame, pl.DataFrame] | None = None     # the log's extracted columns ...
    conv: tuple[pl.DataFrame, pl.DataFrame] | None = None    # ... as run-model frames


class FrameCache:
    """Per-file stats/KV frames kept between assemblies of a growing run (follow, watch): a file whose
    records only grew gets the frame of its new records appended; any other change rebuilds it. A
    file's extracted columns are converted again only when they are another frame."""

    def __init__(self) -> None:
        self._by: dict[str, _Cached] = {}

    def frames(self, file: str, records: list[Record], stats_cols: pl.DataFrame | None = None,
               kv_cols: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
        n = len(records)
        hit = self._by.get(file)
        if hit is not None and 0 < hit.n <= n and records[hit.n - 1] is hit.last:
            stats, kv = hit.rec_stats, hit.rec_kv
            if hit.n < n:
                more_s, more_k = _file_frames(file, records[hit.n:])
                stats, kv = pl.concat([stats, more_s], how="diagonal"), pl.concat([kv, more_k])
        else:
            stats, kv = _file_frames(file, records)
        entry = _Cached(n, records[-1] if n else None, stats, kv)
        if stats_cols is not None and kv_cols is not None and (stats_cols.height or kv_cols.height):
            if hit is not None and hit.src is not None and hit.conv is not None \
                    and hit.src[0] is stats_cols and hit.src[1] is kv_cols:
                conv = hit.conv
            else:
                conv = _chunk_frames(file, stats_cols, kv_cols)
            entry.src, entry.conv = (stats_cols, kv_cols), conv
            stats, kv = _merge(stats, conv[0]), _merge(kv, conv[1])
        self._by[file] = entry
        return stats, kv


@dataclass
class _Part:
    file: str
    records: Sequence[Record]
    stats: pl.DataFrame | None = None   # the log's extracted columns (None: records only)
    kv: pl.DataFrame | None = None


@dataclass
class _Group:
    """An endpoint's sources while :func:`build_endpoints` groups them (the builder; the Endpoint is
    made once, read-only)."""

    role: str
    index: int | None
    nodes: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    parts: list[_Part] = field(default_factory=list)
    last_line: datetime | None = None
    requests: bool = False              # request or access lines counted in its logs


def _after_warmup(records: Sequence[Record], ends: set[str], stats: pl.DataFrame,
                  kv: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A file's stats rows without the steps of its engine's warm-up run: those logged before a fact in ``ends``
    (the engines' ``EngineAdapter.warmup_until``), in the file's line order."""
    if not ends or not stats.height:
        return stats, kv
    end = min((r.line for r in records if isinstance(r, StartupFact) and r.key in ends), default=None)
    return (stats if end is None else stats.filter(pl.col("line") > end)), kv


def _finish(g: _Group, cache: FrameCache, own_batches: bool = False) -> dict[str, Any]:
    """The facts, DP ranks, time span, variants and frames of a group's sources (Endpoint fields);
    ``own_batches``: its workers' ranks each schedule their own batch (rules.windows.fold_steps)."""
    procs: set[str] = set()
    variants: dict[str, int] = {}
    facts: dict[str, Any] = {}
    fact_lines: dict[str, tuple[str, int]] = {}
    dp_ranks: set[str] = set()
    first: datetime | None = None
    last: datetime | None = None
    for part in g.parts:
        file = part.file
        for r in part.records:
            if isinstance(r, StartupFact):
                if r.key == "dp_rank":
                    dp_ranks.add(str(r.value))
                elif r.key not in facts:
                    facts[r.key] = r.value
                    fact_lines[r.key] = (file, r.line)
            elif type(r) is StatsSample:
                variants[r.variant] = variants.get(r.variant, 0) + 1
            if r.proc:
                procs.add(r.proc)
            if r.ts is not None:
                if first is None or r.ts < first:
                    first = r.ts
                if last is None or r.ts > last:
                    last = r.ts
        for cols in (part.stats, part.kv):
            if cols is None or cols.height == 0:
                continue
            procs.update(p for p in cols["proc"].unique().to_list() if p)
            lo, hi = cols["ts"].min(), cols["ts"].max()
            if lo is not None and (first is None or lo < first):  # type: ignore[operator]
                first = lo  # type: ignore[assignment]
            if hi is not None and (last is None or hi > last):  # type: ignore[operator]
                last = hi  # type: ignore[assignment]
        if part.stats is not None and part.stats.height:
            for v, c in part.stats["variant"].value_counts().iter_rows():
                variants[v] = variants.get(v, 0) + c
    for proc in procs:
        if (rank := engine_index(proc)) is not None:
            dp_ranks.add(rank)
    ends = {a.warmup_until for v in variants if (a := engines.by_stats_variant(v)) is not None and a.warmup_until}
    frames = [_after_warmup(p.records, ends, *cache.frames(p.file, p.records, p.stats, p.kv)) for p in g.parts]
    fold_s = next((a.stats_cadence_s for v in variants if (a := engines.by_stats_variant(v)) and a.stats_cadence_s),
                  None)
    stats = pl.concat([fold_steps(s, fold_s, own_batches) if fold_s else s for s, _ in frames], how="diagonal") if frames \
        else pl.DataFrame(schema=_RAW_BASE)
    own = stats.filter(~pl.col("prom")).group_by("engine").agg(pl.col("file").n_unique().alias("n"))
    if len(g.files) > 1 and own.height and own["n"].max() > 1:  # type: ignore[operator]
        # each file numbers its engines from 0: keep them apart by node (Prometheus rows name engines)
        node = pl.col("file").str.extract(r"([^/]*)$").str.split("_").list.first()
        stats = stats.with_columns(pl.when(pl.col("prom")).then(pl.col("engine"))
                                   .otherwise(pl.concat_str([node, pl.lit("/"), pl.col("engine")])).alias("engine"))
        dp_ranks = set()
    # one engine logs one stats line per interval: the same record twice in one file at the same second
    # (copies glued onto one line, a line written to stdout and stderr) is one sample, not a doubled rate
    same = [c for c in stats.columns if c != "line"]
    stats = stats.filter(pl.col("ts").is_null() | pl.struct(same).is_first_distinct())
    if g.role != "decode":
        # no KV arrives here by transfer: where the engine counts its prompt tokens unsplit (Prometheus
        # vllm:prompt_tokens), they are its computed ones, cache hits included as vLLM's log counted them
        # before it split them; a P/D decode's unsplit count is mostly transferred KV and stays apart
        stats = stats.with_columns(pl.coalesce("prompt_tps", "prompt_all_tps").alias("prompt_tps"))
    kv = pl.concat([k for _, k in frames]) if frames else pl.DataFrame(schema=KV_SCHEMA)
    return {"stats": stats.drop("prom").sort("ts", "engine", nulls_last=True, maintain_order=True),
            "kv": kv.sort("ts", nulls_last=True, maintain_order=True),
            "facts": MappingProxyType(facts), "fact_lines": MappingProxyType(fact_lines),
            "dp_ranks": frozenset(dp_ranks), "variants": MappingProxyType(dict(sorted(variants.items()))),
            "first_seen": first, "last_seen": last}


def _launches(lifecycle: list[tuple[str, Lifecycle]]) -> dict[str, list[Mapping[str, Any]]]:
    """The orchestrator's ``Starting <mode> worker <i> on <node>`` + ``Env:`` + ``Command:`` triplets:
    the flags and environment that actually ran, per endpoint id, one read-only mapping per process."""
    from diag.parsers.flags import parse_flag_string

    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    cur: dict[str, Any] | None = None
    for file, ev in lifecycle:
        if ev.event == "worker_start":
            eid = endpoint_id(ev.get("mode"), ev.get("index"))
            cur = {"endpoint": eid, "node": ev.get("node"), "line": ev.line, "file": file}
            out[eid].append(cur)
        elif cur is not None and ev.event == "worker_env":
            cur["env"] = ev.get("env") or {}
            cur["env_line"] = ev.line
        elif cur is not None and ev.event == "command":
            cur["command_line"] = ev.line
            cur["argv"] = ev.get("argv")
            try:
                cur["flags"] = parse_flag_string(ev.get("argv") or "")
            except ValueError:
                cur["flags"] = {}
    return {eid: [MappingProxyType(p) for p in procs] for eid, procs in out.items()}


def build_endpoints(sources: Sequence[ParsedLog], cache: FrameCache | None = None,
                    own_batches: frozenset[str] = frozenset(),
                    ) -> tuple[dict[str, Endpoint], list[tuple[str, Lifecycle]], list[tuple[str, Fault]]]:
    """Group worker records into endpoints; keep orchestrator lifecycle and quoted faults apart.
    Prometheus sources (kind ``prometheus``, diag.prom) join their role/index's endpoint like a worker
    log; a frontend's are not an endpoint, like its log. ``own_batches``: the roles whose workers' ranks
    each schedule their own batch (the recipe's, by the engine's adapter)."""
    groups: dict[str, _Group] = {}
    lifecycle: list[tuple[str, Lifecycle]] = []
    quoted: list[tuple[str, Fault]] = []
    next_index: dict[str, int] = defaultdict(int)
    cache = cache or FrameCache()

    def add(role: str, index: int | None, node: str | None, file: str, recs: Sequence[Record],
            log: ParsedLog | None = None) -> None:
        g = groups.setdefault(endpoint_id(role, index), _Group(role, index))
        if node and node not in g.nodes:
            g.nodes.append(node)
        if file not in g.files:
            g.files.append(file)
        if log is not None:
            g.last_line = latest(g.last_line, log.last_ts)
            g.requests |= bool(log.counts.noise.get("request", 0) or log.counts.noise.get("access-log", 0))
        g.parts.append(_Part(file, recs, log.stats if log else None, log.kv if log else None))

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
        add(role, info.index, info.node, name, src.records, src)
    launches = _launches(lifecycle)
    watched = latest(*(r.ts for _, r in lifecycle))   # the orchestrator's last word on the endpoints
    endpoints: dict[str, Endpoint] = {}
    for eid, g in groups.items():
        done = _finish(g, cache, g.role in own_batches)
        records = tuple((p.file, r) for p in g.parts for r in p.records)
        until = latest(done["last_seen"], g.last_line, watched)
        startup = build_startup(eid, records, done["stats"], done["kv"], lifecycle, until=until)
        evidence = served(records, done["stats"], done["kv"], lifecycle, g.requests)
        endpoints[eid] = Endpoint(eid, g.role, g.index, tuple(g.nodes), tuple(g.files), records,
                                  launch=tuple(launches.get(eid, ())), last_line=g.last_line, startup=startup,
                                  served=evidence, **done)
    order = {"prefill": 0, "decode": 1, "agg": 2}
    endpoints = dict(sorted(endpoints.items(), key=lambda kv: (order.get(kv[1].role, 9), kv[1].index or 0)))
    return endpoints, lifecycle, quoted


__all__ = ["FrameCache", "build_endpoints"]
