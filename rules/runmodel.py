"""The run model: endpoints, their engines and time series, startup facts, faults, lifecycle.

Built purely from parsed logs (:class:`parsers.ingest.ParsedLog`) by :func:`rules.assemble.assemble`;
the rules evaluate it and diag renders it. Nothing in it changes once built: a source that goes on
reading (follow, replay, the TUI's compaction) changes its own logs, never a Run's. Which files make
an endpoint, and its frames, are :mod:`rules.endpoints`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import polars as pl

from diag.parsers import engines
from diag.parsers.callsites import name_cut, release
from diag.parsers.columns import KV_VALUE_KEYS
from diag.parsers.ingest import ParsedLog
from diag.parsers.records import AccuracyResult, BenchResult, Fault, Lifecycle, Record, RequestCounts
from diag.parsers.stats_columns import RUN_SCHEMA, TS

from .serving import Served
from .startup import Startup

if TYPE_CHECKING:
    from diag.parsers.engine import EngineAdapter
    from diag.parsers.jobmeta import JobMeta
    from diag.parsers.recipe import Recipe

# the run model's stats frame: where a row comes from, then the one spec's run columns (parsers.stats_columns)
STATS_SCHEMA = {"ts": TS, "engine": pl.Utf8, "file": pl.Utf8, "line": pl.Int64, **RUN_SCHEMA}
KV_SCHEMA = {"ts": TS, "file": pl.Utf8, "line": pl.Int64, **dict.fromkeys(KV_VALUE_KEYS, pl.Float64)}

T = TypeVar("T")


def _frozen_map(d: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    """A read-only view of a copy of ``d``."""
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class Endpoint:
    """One endpoint of a run, read-only (built once by :func:`rules.endpoints.build_endpoints`): tuples,
    frozensets and read-only mappings; its records are the parsers' values and its frames are never
    changed in place."""

    id: str
    role: str
    index: int | None
    nodes: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    records: tuple[tuple[str, Record], ...] = ()   # (file, record)
    stats: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=STATS_SCHEMA))
    kv: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=KV_SCHEMA))
    facts: Mapping[str, Any] = field(default_factory=_frozen_map)
    fact_lines: Mapping[str, tuple[str, int]] = field(default_factory=_frozen_map)
    dp_ranks: frozenset[str] = frozenset()
    variants: Mapping[str, int] = field(default_factory=_frozen_map)  # stats samples per variant (v1, v0, ..., prom)
    launch: tuple[Mapping[str, Any], ...] = ()  # per process: node, argv, flags, env (orchestrator)
    first_seen: datetime | None = None      # earliest / latest timestamp of any of its records
    last_seen: datetime | None = None
    last_line: datetime | None = None       # the latest of its files' last stamped lines, noise included
    startup: Startup = field(default_factory=Startup)  # stages reached, their times, the phase
    served: Served = field(default_factory=Served)     # from when it had served (rules.serving)

    def of(self, kind: type[Record]) -> list[tuple[str, Record]]:
        return [(f, r) for f, r in self.records if isinstance(r, kind)]

    @property
    def engines(self) -> list[str]:
        seen = set(self.stats["engine"].unique().to_list()) if self.stats.height else set()
        return sorted(seen | self.dp_ranks, key=lambda e: (len(e), e))

    @property
    def per_batch_stats(self) -> bool:
        """Its engine logs stats per batch (every N steps), not on a clock (the adapter's cadence)."""
        return any((a := engines.by_stats_variant(v)) is not None and a.stats_cadence_s is None
                   for v in self.variants)

    @property
    def samples(self) -> int:
        """Its stats lines: a row folded from an engine's per-step lines counts its steps."""
        if not self.stats.height:
            return 0
        if "steps" not in self.stats.columns:
            return self.stats.height
        return int(self.stats.select(pl.col("steps").fill_null(1).sum()).item())

    @property
    def first_ts(self) -> datetime | None:
        return self.first_seen

    @property
    def last_ts(self) -> datetime | None:
        return self.last_seen

    @property
    def clock(self) -> datetime | None:
        """How far its own logs go: its last record or its files' last stamped line, whichever is later."""
        return latest(self.last_seen, self.last_line)


@dataclass(frozen=True)
class Run:
    """Everything diag knows about one run; built once by :func:`rules.assemble.assemble`, read-only all the
    way down (frozen endpoints, frozen copies of the logs, read-only mappings)."""

    root: Path | None
    sources: tuple[ParsedLog, ...]
    skipped: tuple[tuple[str, str], ...]     # (path, reason)
    endpoints: Mapping[str, Endpoint]
    lifecycle: tuple[tuple[str, Lifecycle], ...] = ()
    orchestrator_faults: tuple[tuple[str, Fault], ...] = ()
    job: JobMeta | None = None
    benchmark: tuple[BenchResult, ...] = ()
    accuracy: tuple[AccuracyResult, ...] = ()
    concurrencies: tuple[int, ...] = ()      # from the recipe, when known
    build: str | None = None                 # the engine's build (recipe's image, else the version a log printed)
    engine_name: str | None = None           # the serving engine's adapter name (rules.assemble.engine_of_run)
    engine_by: str = ""                      # what told it: "recipe", "logs", "frames", "recipe default" or ""
    errors: tuple[str, ...] = ()
    jobs: tuple[Recipe, ...] = ()            # every job of the run's recipe file

    def derived(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """A frame or figure derived from the run, computed once while the run lives (rules that share it, as
        B001 and B002 share the roles' joined series, ask by the same key); never part of its fields."""
        memo = self.__dict__.setdefault("_derived", {})
        if key not in memo:
            memo[key] = compute()
        return memo[key]

    @property
    def recipe(self) -> Recipe | None:
        """The run's recipe: the first job of its file (what the header and the drift rule read)."""
        return self.jobs[0] if self.jobs else None

    def engine_count(self, role: str) -> int:
        return sum(len(e.engines) for e in self.endpoints.values() if e.role == role)

    def top_concurrency(self) -> int | None:
        """The highest benchmark concurrency this run sent (results first, then the recipe)."""
        seen = [b.concurrency for b in self.benchmark if b.concurrency]
        seen += self.concurrencies
        return max(seen) if seen else None

    def isl_osl(self) -> tuple[int | None, int | None]:
        """The benchmark's input/output lengths: recipe, then job metadata, then the results."""
        pairs = [(self.recipe.benchmark.isl, self.recipe.benchmark.osl)] if self.recipe is not None else []
        if self.job is not None:
            pairs.append((self.job.isl, self.job.osl))
        pairs += [(b.isl, b.osl) for b in self.benchmark]
        return next(((int(i), int(o)) for i, o in pairs if i and o), (None, None))

    @property
    def engine(self) -> EngineAdapter:
        """The serving engine the run used (:attr:`engine_name`: the recipe's ``backend.type``, else its logs'
        evidence), else the one its recipe names, else the default engine."""
        return engines.get(self.engine_name) or recipe_engine(self.recipe)

    def async_scheduling(self, ep: Endpoint) -> bool:
        """Whether the endpoint scheduled asynchronously, as its engine tells from its startup facts (False
        for an engine without the notion)."""
        hook = self.engine.hook("schedules_async")
        return bool(hook(ep.facts)) if hook is not None else False

    def faults(self) -> list[tuple[str, str, Fault]]:
        """(endpoint id, file, fault) in time order, a cut traceback named by its call site where that decides
        (parsers.callsites); the orchestrator's quoted tails only when no worker log had any fault."""
        out = [(ep.id, f, name_cut(r, release(str(ep.facts.get("version") or ""))))  # type: ignore[arg-type]
               for ep in self.endpoints.values() for f, r in ep.of(Fault)]
        if not out:
            out = [("run", f, r) for f, r in self.orchestrator_faults]
        return sorted(out, key=lambda t: (t[2].ts is None, t[2].ts or datetime.min.replace(tzinfo=UTC), t[2].line))

    def request_counts(self) -> pl.DataFrame:
        """Per metrics interval and endpoint (frontends too): requests finished and failed, by Dynamo's counters."""
        rows = [(r.ts, endpoint_id(src.info.role or "unknown", src.info.index), r.requests, r.errors)
                for src in self.sources if src.kind == "prometheus" for r in src.records if isinstance(r, RequestCounts)]
        return pl.DataFrame(rows, schema={"ts": TS, "endpoint": pl.Utf8, "requests": pl.Int64, "errors": pl.Int64}, orient="row")

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

    @property
    def clock(self) -> datetime | None:
        """The run's clock: the latest time any line of its logs carries (noise included) or any record.
        A finished run is judged as of it: time that passes with only noise lines is still time."""
        return latest(self.end, *(s.last_ts for s in self.sources))


def recipe_engine(recipe: Recipe | None) -> EngineAdapter:
    """The engine a recipe names itself, else the default engine."""
    return engines.get(_written_backend(recipe.data) if recipe is not None else None) or engines.default()


def _written_backend(data: Mapping[str, Any]) -> str | None:
    """The engine a recipe names itself (``backend.type``, schema 2's ``engine.type`` or ``engine``), None
    when it leaves it to srtctl's default."""
    for key in ("backend", "engine"):
        value = data.get(key)
        value = value.get("type") if isinstance(value, Mapping) else value if key == "engine" else None
        if value:
            return str(value)
    return None


def latest(*times: datetime | None) -> datetime | None:
    """The latest of some times (None when none is known)."""
    known = [t for t in times if t is not None]
    return max(known) if known else None


def endpoint_id(role: str, index: int | None) -> str:
    return f"{role}-w{index}" if index is not None else role


__all__ = ["KV_SCHEMA", "STATS_SCHEMA", "Endpoint", "Run", "endpoint_id", "latest", "recipe_engine"]
