"""One run's share of the ``diag report`` document: everything :func:`diag.report_doc.build` reads off a run,
taken from its :class:`~diag.report.Report` once (:meth:`RunPart.of`).

``diag report RUN_DIR...`` builds the parts from the pipeline's reports; ``diag report INDEX`` loads the
same parts from the index (``diag index`` stored them: :meth:`RunPart.to_json` in the ``runs`` table, the
series and the per-request latencies as Parquet), so both reports are one computation over one shape.
What depends on the other runs or on the latency target (labels, judgements, the frontier, the pick, the
diffs) is computed in :func:`diag.sweep.sweep` and :func:`diag.report_doc.build`, never stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from diag.parsers.records import BenchResult
from diag.rules.outcome import fails, outcome_of, worst_severity

from .report import Report
from .sla import Limit, Request, Sla, read_requests, recipe_sla
from .sweep import SERIES, Point, effective_config, endpoint_series, points_of, topology_label
from .throughput import gpu_counts

REQUEST_MS = ("ttft", "tpot", "itl", "e2el")


@dataclass(frozen=True)
class RunPart:
    """A run as the report sees it. ``points`` are unjudged and unlabelled (``run`` is empty)."""

    root: str | None
    topology: str                                   # topology_label: 4xDEP2 + 1xDEP8
    header: dict[str, str]
    gpus: dict[str, Any]
    tokens_per_gpu: dict[str, Any] | None
    counts: dict[str, int]
    health: dict[str, str]
    findings: tuple[dict[str, Any], ...]           # code, name, severity, endpoint, message, first_ts, last_ts
    verdict: dict[str, Any] | None
    config: dict[str, Any]                          # effective_config: what ran, flattened
    sla: Sla | None                                 # the recipe's goodput thresholds
    points: tuple[Point, ...]
    bench: dict[int, BenchResult]                  # concurrency -> its result (the judge reads it)
    errors: tuple[str, ...] = ()                    # files that could not be read (the report says so)
    requests: dict[int, tuple[Request, ...]] = field(default_factory=dict)  # per-request latencies
    series: pl.DataFrame = field(default_factory=pl.DataFrame)  # endpoint, role, ts, SERIES (10 s)
    postmortem: dict[str, Any] | None = None        # a failed run's (Postmortem.to_dict), None otherwise
    timeline: tuple[dict[str, Any], ...] = ()       # the run's events (Event.to_dict), in time order

    @property
    def name(self) -> str | None:
        return Path(self.root).name if self.root else None

    def fails(self, fail_on: str) -> bool:
        """The run fails ``fail_on`` by its verdict, as its report did (:attr:`diag.report.Report.fails`)."""
        return fails(outcome_of((self.verdict or {}).get("class")),
                     worst_severity(f["severity"] for f in self.findings), fail_on)

    @classmethod
    def of(cls, report: Report, result_files: Mapping[int, Path] | None = None) -> RunPart:
        """The part of ``report``; ``result_files`` (concurrency -> sa-bench result JSON) give the
        per-request latencies goodput is counted from."""
        run = report.run
        bench = {int(b.concurrency): b for b in run.benchmark if b.concurrency}
        requests = {}
        for c, path in (result_files or {}).items():
            b = bench.get(c)
            if b is not None and b.source == "sa-bench-json" and (got := read_requests(path, b.num_prompts)):
                requests[c] = got
        eps = sorted(run.endpoints.values(), key=lambda e: (e.role != "prefill", e.id))
        frames = [endpoint_series(ep).select(pl.lit(ep.id).alias("endpoint"), pl.lit(ep.role).alias("role"),
                                             pl.all()) for ep in eps]
        frames = [f for f in frames if f.height]
        series = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
        topo = topology_label(report)
        return cls(str(run.root) if run.root else None, topo, dict(report.header), gpu_counts(run),
                   report.tokens_per_gpu, report.counts, {e.id: e.health for e in report.endpoints},
                   tuple({k: f.to_dict()[k] for k in ("code", "name", "severity", "endpoint", "message",
                                                       "first_ts", "last_ts")} for f in report.findings),
                   report.verdict.to_dict() if report.verdict is not None else None,
                   effective_config(report, topo), recipe_sla(run.recipe), points_of(report, ""), bench,
                   tuple(run.errors), requests, series,
                   report.postmortem.to_dict() if report.postmortem is not None else None,
                   tuple(e.to_dict() for e in report.timeline))

    # ------------------------------------------------------------------ stored form
    def to_json(self) -> dict[str, Any]:
        """Everything but the series and the requests (:meth:`requests_frame`), as JSON values."""
        return {"root": self.root, "topology": self.topology, "header": self.header, "gpus": self.gpus,
                "tokens_per_gpu": self.tokens_per_gpu, "counts": self.counts, "health": self.health,
                "findings": list(self.findings), "verdict": self.verdict, "config": self.config,
                "sla": None if self.sla is None else {"limits": [lim.to_dict() for lim in self.sla.limits],
                                                      "source": self.sla.source},
                "points": [_plain(asdict(p)) for p in self.points],
                "bench": [_plain(asdict(b)) for b in self.bench.values()], "errors": list(self.errors),
                "postmortem": self.postmortem, "timeline": list(self.timeline)}

    def requests_frame(self) -> pl.DataFrame:
        rows = [{"concurrency": c, "ok": r.ok, "tokens": r.tokens, **{f"{k}_ms": r.ms[k] for k in REQUEST_MS}}
                for c, reqs in self.requests.items() for r in reqs]
        return pl.DataFrame(rows, schema=REQUEST_SCHEMA)

    @classmethod
    def from_json(cls, d: dict[str, Any], series: pl.DataFrame | None = None,
                  requests: pl.DataFrame | None = None) -> RunPart:
        sla = d["sla"]
        bench = [_bench(b) for b in d["bench"]]
        reqs: dict[int, list[Request]] = {}
        if requests is not None:
            for row in requests.iter_rows(named=True):
                reqs.setdefault(row["concurrency"], []).append(
                    Request(row["ok"], row["tokens"], {k: row[f"{k}_ms"] for k in REQUEST_MS}))
        return cls(d["root"], d["topology"], d["header"], d["gpus"], d["tokens_per_gpu"], d["counts"], d["health"],
                   tuple(d["findings"]), d["verdict"], d["config"],
                   None if sla is None else Sla(tuple(Limit(**lim) for lim in sla["limits"]), sla["source"]),
                   tuple(_point(p) for p in d["points"]), {int(b.concurrency or 0): b for b in bench},
                   tuple(d["errors"]), {c: tuple(r) for c, r in reqs.items()},
                   series if series is not None else pl.DataFrame(), d.get("postmortem"),
                   tuple(d.get("timeline") or ()))


REQUEST_SCHEMA = {"concurrency": pl.Int64, "ok": pl.Boolean, "tokens": pl.Int64,
                  **{f"{k}_ms": pl.Float64 for k in REQUEST_MS}}
SERIES_COLUMNS = ("endpoint", "role", "ts", *(c for c, _ in SERIES))


def _plain(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in d.items()}


def _when(v: str | None) -> datetime | None:
    return datetime.fromisoformat(v) if v else None


def _bench(d: dict[str, Any]) -> BenchResult:
    names = {f.name for f in fields(BenchResult)}
    b = BenchResult(**{k: v for k, v in d.items() if k in names})
    return replace(b, started=_when(d.get("started")), ended=_when(d.get("ended")),
                   extra=tuple((k, v) for k, v in d.get("extra") or ()))


def _point(d: dict[str, Any]) -> Point:
    return Point(**{**d, "started": _when(d["started"]), "ended": _when(d["ended"]),
                    "evidence": tuple(d["evidence"]), "sla": None})


__all__ = ["REQUEST_SCHEMA", "SERIES_COLUMNS", "RunPart"]
