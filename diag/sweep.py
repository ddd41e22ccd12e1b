"""The sweep behind ``diag report``: one point per run and benchmark concurrency, its verdict, the
Pareto frontier, and run-vs-run differences — all read off the :class:`~diag.report.Report` of
each run (``Pipeline(...).once()``), never re-parsed, so every number equals ``diag tail --format json``.

* A point's x is output tok/s per user (1000 / median TPOT), its y total tok/s per GPU, for both
  denominators: ``working`` (GPUs the engines use: the result file's ``gpus_<T>``, else the job's
  resources) and ``allocated`` (whole nodes the job holds). The frontier is computed per denominator.
* The **verdict** of a point is the one ``analyze`` computed over the point's steady window
  (``diag.rules.verdict``): its class, limiter, confidence, evidence and next experiment.
* Each point is judged against the latency target (:mod:`diag.sla`); the frontier holds only valid points
  that meet it, and :func:`pick` names the configuration to run and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import pairwise
from typing import Any, Protocol

import polars as pl

from diag.parsers.engine import EngineAdapter
from diag.parsers.records import BenchResult
from diag.rules.present import milliseconds, number
from diag.rules.runmodel import Endpoint
from diag.rules.verdict import Verdict
from diag.rules.verdict_catalog import verdict_catalog
from diag.rules.windows import per_engine

from .report import Report, facts_of
from .sla import Judgement, Request, Sla, judge
from .throughput import gpu_counts

DENOMINATORS = ("working", "allocated")
VERDICTS = verdict_catalog().names


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
    sla: Judgement | None = None            # against the report's latency target
    run_invalid: str | None = None          # why the whole run is invalid (a crash cut it short), else None

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
                "experiments": self.detail.get("experiments", []), "ruled_out": self.detail.get("ruled_out", []),
                "sla": self.sla.to_dict() if self.sla else None, "run_invalid": self.run_invalid}


class RunPart(Protocol):
    """What the sweep reads of a run (:class:`diag.report_part.RunPart`)."""

    @property
    def name(self) -> str | None: ...
    topology: str
    points: tuple[Point, ...]
    bench: dict[int, BenchResult]
    requests: dict[int, tuple[Request, ...]]
    config: dict[str, Any]
    findings: tuple[dict[str, Any], ...]
    verdict: dict[str, Any] | None


@dataclass(frozen=True)
class RunSweep:
    """One run's points, the part of its report they came from (:class:`~diag.report_part.RunPart`), and
    its label."""

    label: str
    topology: str
    part: RunPart
    points: tuple[Point, ...]


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def _round(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(float(x), nd)


# ------------------------------------------------------------------ topology
def role_shape(ep: Endpoint, engine: EngineAdapter) -> str:
    """DEP8, DP4, TP4, DP2TP2 ... from the flags that ran (the engine's parallelism knobs), else the engine
    count."""
    flags = ep.launch[0].get("flags", {}) if ep.launch else {}

    def knob(key: str) -> Any:
        name = engine.knob_key(key)
        return None if name is None else flags.get(name)

    dp = int(knob("data_parallel") or len(ep.engines) or 1)
    tp = int(knob("tensor_parallel") or 1)
    expert = bool(knob("expert_parallel"))
    if dp > 1 and tp > 1:
        return f"{'DEP' if expert else 'DP'}{dp}TP{tp}"
    if dp > 1:
        return f"{'DEP' if expert else 'DP'}{dp}"
    return f"TP{tp}"


def topology_label(report: Report) -> str:
    """e.g. '4xDEP2 + 1xDEP8' (endpoints per role and shape, prefill first)."""
    parts = []
    for role in ("prefill", "decode", "agg", "unknown"):
        shapes: dict[str, int] = {}
        for ep in report.run.endpoints.values():
            if ep.role == role:
                shape = role_shape(ep, report.run.engine)
                shapes[shape] = shapes.get(shape, 0) + 1
        parts += [f"{n}x{shape}" for shape, n in sorted(shapes.items())]
    return " + ".join(parts) or "no endpoints"


# ------------------------------------------------------------------ verdict
def point_verdict(report: Report, concurrency: int) -> Verdict | None:
    """The verdict analyze computed for the run's point at ``concurrency``."""
    return report.verdicts.at(concurrency) if report.verdicts is not None else None


# ------------------------------------------------------------------ points and frontier
def points_of(report: Report, label: str) -> tuple[Point, ...]:
    """The run's benchmark results as sweep points (numbers as in ``diag tail --format json``)."""
    counts = gpu_counts(report.run)
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


def eligible(p: Point) -> bool:
    """A point that can be run as it is: valid, of a run that is valid (a point measured before its run
    crashed is not a configuration to run), no request lost, and within the latency target when it was
    judged."""
    return p.verdict != "invalid" and p.run_invalid is None and not p.failed_requests and \
        (p.sla is None or p.sla.meets is True)


def run_invalid(part: RunPart) -> str | None:
    """Why the run is invalid, from its verdict (None for a valid run)."""
    v = part.verdict
    return (v.get("why") or "invalid") if v and v.get("class") == "invalid" else None


def with_frontier(points: Sequence[Point]) -> tuple[Point, ...]:
    """The points with ``frontier`` set per denominator (across all runs; only :func:`eligible` points)."""
    flags: dict[int, dict[str, bool]] = {i: {} for i in range(len(points))}
    for d in DENOMINATORS:
        usable = [i for i, p in enumerate(points) if eligible(p) and p.tok_s_per_user is not None
                  and p.tok_s_per_gpu.get(d) is not None]
        on = pareto_front([(points[i].tok_s_per_user, points[i].tok_s_per_gpu[d]) for i in usable])  # type: ignore[misc]
        for i in range(len(points)):
            flags[i][d] = False
        for i, flag in zip(usable, on, strict=True):
            flags[i][d] = flag
    return tuple(replace(p, frontier=flags[i]) for i, p in enumerate(points))


def labels_of(parts: Sequence[RunPart]) -> list[str]:
    """Short unique names for the runs: their directory names (job id appended on a clash)."""
    names = [p.name or f"run{i}" for i, p in enumerate(parts)]
    if len(set(names)) < len(names):
        names = [f"{n}#{i}" for i, n in enumerate(names)]
    return names


def judged(part: RunPart, points: Sequence[Point], sla: Sla) -> tuple[Point, ...]:
    """``points`` of a run judged against ``sla``; per request where the run's result files held one
    entry per prompt (:attr:`RunPart.requests`)."""
    return tuple(replace(p, sla=judge(part.bench[p.concurrency], sla, part.requests.get(p.concurrency)))
                 for p in points)


def sweep(parts: Sequence[RunPart], sla: Sla | None = None) -> tuple[RunSweep, ...]:
    """One RunSweep per run, its points labelled and judged against ``sla`` (when given), the frontier
    computed across all of them."""
    labels = labels_of(parts)
    per_run = [tuple(replace(p, run=label, run_invalid=run_invalid(part)) for p in part.points)
               for part, label in zip(parts, labels, strict=True)]
    if sla is not None:
        per_run = [judged(part, pts, sla) for part, pts in zip(parts, per_run, strict=True)]
    flat = with_frontier([p for pts in per_run for p in pts])
    out, k = [], 0
    for part, label, pts in zip(parts, labels, per_run, strict=True):
        out.append(RunSweep(label, part.topology, part, flat[k:k + len(pts)]))
        k += len(pts)
    return tuple(out)


# ------------------------------------------------------------------ the pick
def _at(p: Point, other: Point | None = None) -> str:
    """``C=2,048`` beside a point of the same run, else ``sweep-5xdep2 at C=2,048``."""
    at = f"C={number(p.concurrency)}"
    return at if other is not None and other.run == p.run else f"{p.run} at {at}"


def _latencies(p: Point) -> str:
    """``median TTFT 1.1 s / median TPOT 45.2 ms`` (the limited quantiles the point reports)."""
    values = p.sla.values if p.sla else {}
    return " / ".join(f"{label} {milliseconds(v)}" for label, v in values.items() if v is not None)


def _verdict_text(p: Point) -> str:
    """``under-loaded (no queue on either side and decode at 28 % of its capacity)``: the class and the
    first clause of its why (the figures behind it are in the point's row)."""
    label = p.verdict + (f" ({p.detail['limiter']})" if p.detail.get("limiter") else "")
    return f"{label}: {p.reason.split(' (', 1)[0]}"


def _figures(p: Point) -> str:
    return (f"{number(p.tok_s_per_gpu['working'])} tok/s per working GPU at "
            f"{number(p.tok_s_per_user, 1)} tok/s/user")


def _why_not(p: Point, min_tok_s_user: float | None) -> str:
    """Why a point is not the pick: invalid, missing the target, unjudged, or too slow per user."""
    if p.verdict == "invalid":
        return f"is invalid ({p.reason})"
    if p.run_invalid is not None:
        return f"is from an invalid run ({p.run_invalid})"
    if p.sla is not None and p.sla.meets is not True:
        return f"{p.sla.summary}: {p.verdict}"
    return f"gives {number(p.tok_s_per_user, 1)} tok/s/user, below {number(min_tok_s_user, 1)}"


def _overshoot(p: Point) -> float:
    """How far the point is from the target: its worst value / limit (1.0 or less: within)."""
    assert p.sla is not None
    ratios = [(p.sla.values[lim.label] or 0.0) / lim.ms for lim in p.sla.misses]
    return max(ratios, default=1.0)


def pick(points: Sequence[Point], sla: Sla, min_tok_s_user: float | None = None) -> dict[str, Any]:
    """The configuration to run: among valid points within ``sla`` (and at ``min_tok_s_user`` or more,
    when given) the most total tok/s per working GPU, with the faster point it passes over and why.
    When none qualifies: the closest one (the smallest overshoot of the target; with ``min_tok_s_user``,
    the point within the target that comes nearest to it)."""
    rated = [p for p in points if p.tok_s_per_gpu["working"] is not None]
    base = {"sla": sla.text, "min_tok_s_user": min_tok_s_user}
    if not rated:
        return {**base, "status": "no-points", "run": None, "concurrency": None, "verdict": None,
                "sentence": "No benchmark points: nothing to pick."}
    fast_enough = [p for p in rated if min_tok_s_user is None or (p.tok_s_per_user or 0.0) >= min_tok_s_user]
    ok = [p for p in fast_enough if eligible(p)]
    at = f" at {number(min_tok_s_user, 1)} tok/s/user or more" if min_tok_s_user is not None else ""
    if ok:
        chosen = max(ok, key=lambda p: p.tok_s_per_gpu["working"] or 0.0)
        faster = [p for p in rated if (p.tok_s_per_gpu["working"] or 0.0) > (chosen.tok_s_per_gpu["working"] or 0.0)]
        passed = max(faster, key=lambda p: p.tok_s_per_gpu["working"] or 0.0) if faster else None
        sentence = (f"Pick {chosen.run} ({chosen.topology}) at C={number(chosen.concurrency)}: {_figures(chosen)}, "
                    f"{_latencies(chosen)} within the target ({sla.text}){at}; verdict {_verdict_text(chosen)}.")
        if passed is not None:
            sentence += (f" {_at(passed, chosen)} is faster per GPU ({number(passed.tok_s_per_gpu['working'])}"
                         f" tok/s) but {_why_not(passed, min_tok_s_user)}.")
        status = "meets"
    else:
        within = [p for p in rated if eligible(p)]
        judged_points = [p for p in rated if p.verdict != "invalid" and p.run_invalid is None and p.sla is not None
                         and p.sla.misses]
        if within and min_tok_s_user is not None:
            chosen = max(within, key=lambda p: p.tok_s_per_user or 0.0)
            lead = f"No point within the target ({sla.text}) reaches {number(min_tok_s_user, 1)} tok/s/user"
        elif judged_points:
            chosen = min(judged_points, key=lambda p: (_overshoot(p), -(p.tok_s_per_gpu["working"] or 0.0)))
            lead = f"No valid point meets the target ({sla.text}){at}"
        else:
            chosen = max(rated, key=lambda p: p.tok_s_per_gpu["working"] or 0.0)
            lead = f"No point can be judged against the target ({sla.text}){at}"
        passed = None
        sentence = (f"{lead}; the closest is {chosen.run} ({chosen.topology}) at C={number(chosen.concurrency)}: "
                    f"{_figures(chosen)}, {_latencies(chosen) or 'no latency reported'}"
                    + ("" if eligible(chosen) else f", which {_why_not(chosen, min_tok_s_user)}")
                    + f"; verdict {_verdict_text(chosen)}.")
        status = "closest"
    crashed = sorted({p.run for p in rated if p.run_invalid is not None})
    if crashed:
        sentence += f" Set aside as invalid runs: {', '.join(crashed)}."
    return {**base, "status": status, "run": chosen.run, "topology": chosen.topology,
            "concurrency": chosen.concurrency, "verdict": chosen.verdict, "reason": chosen.reason,
            "tok_s_per_gpu": chosen.tok_s_per_gpu, "tok_s_per_user": chosen.tok_s_per_user,
            "passed_over": {"run": passed.run, "concurrency": passed.concurrency,
                            "why": _why_not(passed, min_tok_s_user)} if passed else None,
            "sentence": sentence}


# ------------------------------------------------------------------ time series
SERIES = (("prompt_tps", "sum"), ("gen_tps", "sum"), ("running", "sum"), ("waiting", "sum"), ("kv_usage", "mean"))


def endpoint_series(ep: Endpoint) -> pl.DataFrame:
    """Per 10 s interval: prompt/gen tok/s, running, waiting (engines summed) and KV % (engines averaged)."""
    aggs = [getattr(pl.col(c), how)().alias(c) for c, how in SERIES]
    return (per_engine(ep.stats, 10).group_by("bucket").agg(aggs).sort("bucket")
            .rename({"bucket": "ts"}))


# ------------------------------------------------------------------ run vs run
def effective_config(report: Report, topology: str) -> dict[str, Any]:
    """What ran, flattened to ``section.key`` -> value: topology, resources, benchmark, build, and per
    role the launch flags and startup facts of its first endpoint."""
    run = report.run
    out: dict[str, Any] = {"topology": topology, "build": run.build}
    for k, v in sorted(gpu_counts(run).items()):
        out[f"gpus.{k}"] = v
    if run.recipe is not None:
        out["benchmark.isl"], out["benchmark.osl"] = run.recipe.benchmark.isl, run.recipe.benchmark.osl
        out["benchmark.concurrencies"] = list(run.recipe.benchmark.concurrencies)
    for role in ("prefill", "decode", "agg"):
        eps = sorted((e for e in run.endpoints.values() if e.role == role), key=lambda e: e.id)
        if not eps:
            continue
        ep = eps[0]
        flags = ep.launch[0].get("flags", {}) if ep.launch else {}
        for k, v in sorted(flags.items()):
            # per-process flags differ between its processes by construction; srtctl passes its launcher's own
            if k not in run.engine.per_process_flags and k not in run.engine.launcher_flags:
                out[f"{role}.flag.{k}"] = v
        for k, v in sorted(facts_of(ep, run.engine).items()):
            if k != "launch":
                out[f"{role}.fact.{k}"] = v
    return out


def config_diff(a: RunSweep, b: RunSweep) -> list[dict[str, Any]]:
    ca, cb = a.part.config, b.part.config
    return [{"key": k, "a": ca.get(k), "b": cb.get(k)} for k in sorted(set(ca) | set(cb)) if ca.get(k) != cb.get(k)]


def findings_diff(a: RunSweep, b: RunSweep) -> list[dict[str, Any]]:
    """Findings (by code and endpoint) that one run has and the other has not."""
    def keyed(rs: RunSweep) -> dict[tuple[str, str | None], dict[str, Any]]:
        return {(f["code"], f["endpoint"]): f for f in rs.part.findings}

    ka, kb = keyed(a), keyed(b)
    rows = []
    for key in sorted(set(ka) ^ set(kb), key=lambda k: (k[0], k[1] or "")):
        f = ka.get(key) or kb[key]
        rows.append({"code": f["code"], "name": f["name"], "severity": f["severity"], "endpoint": f["endpoint"],
                     "only_in": a.label if key in ka else b.label, "message": f["message"]})
    return rows


DELTA_BASIS = ("at equal output tok/s per user: each run's tok/s per GPU is read off its own frontier of valid "
               "points (linear between them) at every tok/s/user either run measured within the range both reach")


def run_curve(rs: RunSweep) -> list[Point]:
    """The run's own frontier by tok/s/user: its valid points (no request lost) that no other of its points
    beats in both tok/s/user and tok/s per working GPU, the latency target aside (it is a capacity curve)."""
    usable = [p for p in rs.points if p.verdict != "invalid" and not p.failed_requests
              and p.tok_s_per_user is not None and p.tok_s_per_gpu["working"] is not None]
    on = pareto_front([(p.tok_s_per_user, p.tok_s_per_gpu["working"]) for p in usable])  # type: ignore[misc]
    return sorted((p for p, flag in zip(usable, on, strict=True) if flag), key=lambda p: p.tok_s_per_user or 0.0)


def interpolate(curve: Sequence[Point], x: float, denominator: str) -> float | None:
    """The curve's tok/s per ``denominator`` GPU at ``x`` tok/s/user, linear between its points; None
    outside the curve."""
    for lo, hi in list(pairwise(curve)) or [(p, p) for p in curve]:
        x0, x1 = lo.tok_s_per_user or 0.0, hi.tok_s_per_user or 0.0
        y0, y1 = lo.tok_s_per_gpu[denominator], hi.tok_s_per_gpu[denominator]
        if y0 is None or y1 is None or not x0 <= x <= x1:
            continue
        return y0 if x1 == x0 else y0 + (x - x0) / (x1 - x0) * (y1 - y0)
    return None


def tps_delta(a: RunSweep, b: RunSweep) -> list[dict[str, Any]]:
    """Total tok/s per GPU (both denominators), b - a, at equal tok/s/user (:data:`DELTA_BASIS`): one row
    per tok/s/user either run measured on its curve, within the range both curves cover; ``measured``
    names the point(s) behind the row, the other run's figure is interpolated."""
    ca, cb = run_curve(a), run_curve(b)
    if not ca or not cb:
        return []
    lo = max(ca[0].tok_s_per_user or 0.0, cb[0].tok_s_per_user or 0.0)
    hi = min(ca[-1].tok_s_per_user or 0.0, cb[-1].tok_s_per_user or 0.0)
    rows = []
    measured = (*ca, *cb)
    for x in sorted({p.tok_s_per_user for p in measured if lo <= (p.tok_s_per_user or 0.0) <= hi}):
        row: dict[str, Any] = {"tok_s_per_user": x, "measured": [
            {"run": p.run, "concurrency": p.concurrency} for p in measured if p.tok_s_per_user == x]}
        for d in DENOMINATORS:
            va, vb = _round(interpolate(ca, x, d)), _round(interpolate(cb, x, d))
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
             "findings": findings_diff(base, other), "delta_basis": DELTA_BASIS,
             "tps_per_gpu": tps_delta(base, other)} for other in runs[1:]]


__all__ = ["DELTA_BASIS", "DENOMINATORS", "VERDICTS", "Point", "RunSweep", "config_diff", "diffs", "effective_config",
           "eligible", "endpoint_series", "findings_diff", "interpolate", "judged", "pareto_front", "pick",
           "point_verdict", "points_of", "run_curve", "sweep", "topology_label", "tps_delta", "with_frontier"]
