"""The sweep behind ``diag report``: one point per run and benchmark concurrency, its verdict, the
Pareto frontier, and run-vs-run differences — all read off the :class:`~diag.report.Report` of
each run (``Pipeline(...).once()``), never re-parsed, so every number equals ``diag tail --format json``.

* A point's x is output tok/s per user (1000 / median TPOT), its y total tok/s per GPU, for both
  denominators: ``working`` (GPUs the engines use: the result file's ``gpus_<T>``, else the job's
  resources) and ``allocated`` (whole nodes the job holds). The frontier is computed per denominator.
* The **verdict** of a point is the one ``analyze`` computed over the point's steady window
  (``diag.rules.verdict``): its class, limiter, confidence, evidence and next experiment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import polars as pl

from diag.rules.finding import Finding
from diag.rules.runmodel import Endpoint
from diag.rules.verdict import Verdict
from diag.rules.verdict_catalog import verdict_catalog

from . import report as R

DENOMINATORS = ("working", "allocated")
VERDICTS = verdict_catalog().names
# launch flags that differ between processes of one endpoint by construction, not by configuration
PER_PROCESS_FLAGS = frozenset({"data_parallel_address", "data_parallel_start_rank", "device_ids",
                               "data_parallel_rpc_port", "data_parallel_size_local"})


@dataclass(frozen=True)
class Point:
    """One run at one concurrency."""

    run: str
    topology: str
    concurrency: int
    complete: bool
    successful_requests: int | None
    failed_requests: int | None
    total_token_throughput: float | None
    output_throughput: float | None
    request_throughput: float | None
    median_tpot_ms: float | None
    mean_tpot_ms: float | None
    median_ttft_ms: float | None
    mean_ttft_ms: float | None
    median_itl_ms: float | None
    tok_s_per_user: float | None            # 1000 / median TPOT
    gpus: dict[str, int | None]             # working, allocated
    tok_s_per_gpu: dict[str, float | None]  # working, allocated
    started: datetime | None
    ended: datetime | None
    verdict: str                            # the class (diag.rules.verdict vocabulary)
    reason: str                             # the verdict's one-sentence why
    evidence: tuple[dict[str, Any], ...]
    frontier: dict[str, bool] = field(default_factory=dict)
    detail: dict[str, Any] = field(default_factory=dict)   # the whole verdict (Verdict.to_dict)

    def to_dict(self) -> dict[str, Any]:
        return {"run": self.run, "topology": self.topology, "concurrency": self.concurrency,
                "complete": self.complete, "successful_requests": self.successful_requests,
                "failed_requests": self.failed_requests, "total_token_throughput": self.total_token_throughput,
                "output_throughput": self.output_throughput, "request_throughput": self.request_throughput,
                "median_tpot_ms": self.median_tpot_ms, "mean_tpot_ms": self.mean_tpot_ms,
                "median_ttft_ms": self.median_ttft_ms, "mean_ttft_ms": self.mean_ttft_ms,
                "median_itl_ms": self.median_itl_ms, "tok_s_per_user": self.tok_s_per_user,
                "gpus": self.gpus, "tok_s_per_gpu": self.tok_s_per_gpu,
                "started": _iso(self.started), "ended": _iso(self.ended), "verdict": self.verdict,
                "reason": self.reason, "evidence": list(self.evidence), "frontier": self.frontier,
                "limiter": self.detail.get("limiter"), "confidence": self.detail.get("confidence"),
                "experiments": self.detail.get("experiments", []), "ruled_out": self.detail.get("ruled_out", [])}


@dataclass(frozen=True)
class RunSweep:
    """One run's points, the report they came from, and its label."""

    label: str
    topology: str
    report: R.Report
    points: tuple[Point, ...]


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def _round(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(float(x), nd)


# ------------------------------------------------------------------ topology
def role_shape(ep: Endpoint) -> str:
    """DEP8, DP4, TP4, DP2TP2 ... from the flags that ran, else the engine count."""
    flags = ep.launch[0].get("flags", {}) if ep.launch else {}
    dp = int(flags.get("data_parallel_size") or len(ep.engines) or 1)
    tp = int(flags.get("tensor_parallel_size") or 1)
    expert = bool(flags.get("enable_expert_parallel"))
    if dp > 1 and tp > 1:
        return f"{'DEP' if expert else 'DP'}{dp}TP{tp}"
    if dp > 1:
        return f"{'DEP' if expert else 'DP'}{dp}"
    return f"TP{tp}"


def topology_label(report: R.Report) -> str:
    """e.g. '4xDEP2 + 1xDEP8' (endpoints per role and shape, prefill first)."""
    parts = []
    for role in ("prefill", "decode", "agg", "unknown"):
        shapes: dict[str, int] = {}
        for ep in report.run.endpoints.values():
            if ep.role == role:
                shape = role_shape(ep)
                shapes[shape] = shapes.get(shape, 0) + 1
        parts += [f"{n}x{shape}" for shape, n in sorted(shapes.items())]
    return " + ".join(parts) or "no endpoints"


# ------------------------------------------------------------------ verdict
def point_verdict(report: R.Report, concurrency: int) -> Verdict | None:
    """The verdict analyze computed for the run's point at ``concurrency``."""
    return report.verdicts.at(concurrency) if report.verdicts is not None else None


# ------------------------------------------------------------------ points and frontier
def points_of(report: R.Report, label: str) -> tuple[Point, ...]:
    """The run's benchmark results as sweep points (numbers as in ``diag tail --format json``)."""
    counts = R.gpu_counts(report.run)
    topo = topology_label(report)
    out = []
    for b in sorted((b for b in report.run.benchmark if b.concurrency), key=lambda b: b.concurrency or 0):
        working = b.total_gpus or counts.get("working_gpus")
        allocated = counts.get("allocated_gpus") or working
        gpus = {"working": working, "allocated": allocated}
        total = b.total_token_throughput
        per_gpu = {d: (_round(total / n) if total is not None and n else None) for d, n in gpus.items()}
        tpot = b.median_tpot_ms
        pv = point_verdict(report, int(b.concurrency or 0))
        v, reason = (pv.cls, pv.why) if pv is not None else ("unknown", "no verdict for this point")
        evidence = pv.evidence if pv is not None else ()
        out.append(Point(label, topo, int(b.concurrency or 0), b.complete, b.successful_requests, b.failed_requests,
                         total, b.output_throughput, b.request_throughput, tpot, b.mean_tpot_ms, b.median_ttft_ms,
                         b.mean_ttft_ms, b.median_itl_ms, _round(1000.0 / tpot, 2) if tpot else None, gpus,
                         per_gpu, b.started, b.ended, v, reason, tuple(evidence),
                         detail=pv.to_dict() if pv is not None else {}))
    return tuple(out)


def pareto_front(xy: Sequence[tuple[float, float]]) -> list[bool]:
    """Which of ``xy`` (both to maximise) are on the frontier: a point is off it when another is at
    least as good in both and better in one. Exact ties both stay on; a point with the same
    throughput but fewer tok/s per user (or the same tok/s per user, less throughput) is dominated."""
    order = sorted(range(len(xy)), key=lambda i: (-xy[i][0], -xy[i][1]))
    on = [False] * len(xy)
    best_y = float("-inf")
    k = 0
    while k < len(order):   # walk x from high to low; a group of equal x is judged together
        group = [order[k]]
        while k + len(group) < len(order) and xy[order[k + len(group)]][0] == xy[order[k]][0]:
            group.append(order[k + len(group)])
        top = max(xy[i][1] for i in group)
        if top > best_y:
            for i in group:
                on[i] = xy[i][1] == top
            best_y = top
        k += len(group)
    return on


def with_frontier(points: Sequence[Point]) -> tuple[Point, ...]:
    """The points with ``frontier`` set per denominator (across all runs; invalid points, and points that
    lost requests, never on it)."""
    flags: dict[int, dict[str, bool]] = {i: {} for i in range(len(points))}
    for d in DENOMINATORS:
        usable = [i for i, p in enumerate(points) if p.verdict != "invalid" and not p.failed_requests
                  and p.tok_s_per_user is not None
                  and p.tok_s_per_gpu.get(d) is not None]
        on = pareto_front([(points[i].tok_s_per_user, points[i].tok_s_per_gpu[d]) for i in usable])  # type: ignore[misc]
        for i in range(len(points)):
            flags[i][d] = False
        for i, flag in zip(usable, on, strict=True):
            flags[i][d] = flag
    return tuple(replace(p, frontier=flags[i]) for i, p in enumerate(points))


def labels_of(reports: Sequence[R.Report]) -> list[str]:
    """Short unique names for the runs: their directory names (job id appended on a clash)."""
    names = [r.run.root.name if r.run.root else f"run{i}" for i, r in enumerate(reports)]
    if len(set(names)) < len(names):
        names = [f"{n}#{i}" for i, n in enumerate(names)]
    return names


def sweep(reports: Sequence[R.Report]) -> tuple[RunSweep, ...]:
    """One RunSweep per report, the frontier computed across all of them."""
    labels = labels_of(reports)
    per_run = [points_of(r, label) for r, label in zip(reports, labels, strict=True)]
    flat = with_frontier([p for pts in per_run for p in pts])
    out, k = [], 0
    for r, label, pts in zip(reports, labels, per_run, strict=True):
        out.append(RunSweep(label, topology_label(r), r, flat[k:k + len(pts)]))
        k += len(pts)
    return tuple(out)


# ------------------------------------------------------------------ time series
SERIES = (("prompt_tps", "sum"), ("gen_tps", "sum"), ("running", "sum"), ("waiting", "sum"), ("kv_usage", "mean"))


def endpoint_series(ep: Endpoint) -> pl.DataFrame:
    """Per 10 s interval: prompt/gen tok/s, running, waiting (engines summed) and KV % (engines averaged)."""
    stats = ep.stats.filter(pl.col("ts").is_not_null())
    aggs = [getattr(pl.col(c), how)().alias(c) for c, how in SERIES]
    return stats.group_by(pl.col("ts").dt.truncate("10s")).agg(aggs).sort("ts")


# ------------------------------------------------------------------ run vs run
def effective_config(rs: RunSweep) -> dict[str, Any]:
    """What ran, flattened to ``section.key`` -> value: topology, resources, benchmark, build, and per
    role the launch flags and startup facts of its first endpoint."""
    run = rs.report.run
    out: dict[str, Any] = {"topology": rs.topology, "build": run.build}
    for k, v in sorted(R.gpu_counts(run).items()):
        out[f"gpus.{k}"] = v
    if run.recipe is not None:
        out["benchmark.isl"], out["benchmark.osl"] = run.recipe.benchmark.isl, run.recipe.benchmark.osl
        out["benchmark.concurrencies"] = "x".join(map(str, run.recipe.benchmark.concurrencies))
    for role in ("prefill", "decode", "agg"):
        eps = sorted((e for e in run.endpoints.values() if e.role == role), key=lambda e: e.id)
        if not eps:
            continue
        ep = eps[0]
        flags = ep.launch[0].get("flags", {}) if ep.launch else {}
        for k, v in sorted(flags.items()):
            if k not in PER_PROCESS_FLAGS:
                out[f"{role}.flag.{k}"] = v
        for k, v in sorted(R.facts_of(ep).items()):
            if k != "launch":
                out[f"{role}.fact.{k}"] = v
    return out


def config_diff(a: RunSweep, b: RunSweep) -> list[dict[str, Any]]:
    ca, cb = effective_config(a), effective_config(b)
    return [{"key": k, "a": ca.get(k), "b": cb.get(k)} for k in sorted(set(ca) | set(cb)) if ca.get(k) != cb.get(k)]


def findings_diff(a: RunSweep, b: RunSweep) -> list[dict[str, Any]]:
    """Findings (by code and endpoint) that one run has and the other has not."""
    def keyed(rs: RunSweep) -> dict[tuple[str, str | None], Finding]:
        return {(f.code, f.endpoint): f for f in rs.report.findings}

    ka, kb = keyed(a), keyed(b)
    rows = []
    for key in sorted(set(ka) ^ set(kb), key=lambda k: (k[0], k[1] or "")):
        f = ka.get(key) or kb[key]
        rows.append({"code": f.code, "name": f.name, "severity": f.severity, "endpoint": f.endpoint,
                     "only_in": a.label if key in ka else b.label, "message": f.message})
    return rows


def tps_delta(a: RunSweep, b: RunSweep) -> list[dict[str, Any]]:
    """Total tok/s per GPU (both denominators) per concurrency both runs measured: b - a."""
    pa, pb = {p.concurrency: p for p in a.points}, {p.concurrency: p for p in b.points}
    rows = []
    for c in sorted(set(pa) & set(pb)):
        row: dict[str, Any] = {"concurrency": c}
        for d in DENOMINATORS:
            va, vb = pa[c].tok_s_per_gpu[d], pb[c].tok_s_per_gpu[d]
            delta = _round(vb - va) if va is not None and vb is not None else None
            row[d] = {"a": va, "b": vb, "delta": delta,
                      "delta_pct": _round(100.0 * (vb - va) / va, 1) if delta is not None and va else None}
        rows.append(row)
    return rows


def diffs(runs: Sequence[RunSweep]) -> list[dict[str, Any]]:
    """The first run against each other one."""
    if len(runs) < 2:
        return []
    base = runs[0]
    return [{"a": base.label, "b": other.label, "config": config_diff(base, other),
             "findings": findings_diff(base, other), "tps_per_gpu": tps_delta(base, other)} for other in runs[1:]]


__all__ = [
    "DENOMINATORS",
    "VERDICTS",
    "Point",
    "RunSweep",
    "config_diff",
    "diffs",
    "effective_config",
    "endpoint_series",
    "findings_diff",
    "pareto_front",
    "point_verdict",
    "points_of",
    "sweep",
    "topology_label",
    "tps_delta",
    "with_frontier",
]
