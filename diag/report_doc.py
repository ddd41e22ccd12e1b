"""The ``diag report --format json`` document (schema ``diag-report-1``): the table behind every plot
of the HTML report, built from the runs' :class:`~diag.report.Report`\\ s via :mod:`diag.sweep`.

The HTML and text renderers draw from this document only, so what a plot shows is what the JSON says.
Tables: ``points`` (Pareto, per-run curves, verdicts), ``frontier`` (per GPU denominator, in x order),
``series`` (per endpoint and 10 s interval), ``windows`` (findings' windows, shaded) and ``steps``
(each concurrency's measured window, marked), ``diffs`` (the first run against each other one); ``sla``
(the latency target every point is judged by) and ``pick`` (the configuration to run, in one sentence).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .emit import envelope
from .report import Report, gpu_counts
from .sla import Sla, resolve_sla
from .sweep import DENOMINATORS, SERIES, RunSweep, diffs, eligible, endpoint_series, pick, sweep

NO_POINTS = "no benchmark points: the run has no benchmark results (endpoint series and findings only)"

REPORT_SCHEMA = "diag-report-1"


def _series_rows(rs: RunSweep) -> list[dict[str, Any]]:
    rows = []
    for ep in sorted(rs.report.run.endpoints.values(), key=lambda e: (e.role != "prefill", e.id)):
        for row in endpoint_series(ep).iter_rows(named=True):
            rows.append({"run": rs.label, "endpoint": ep.id, "role": ep.role, "ts": row["ts"].isoformat(),
                         **{c: (round(float(row[c]), 1) if row[c] is not None else None) for c, _ in SERIES}})
    return rows


def _window_rows(rs: RunSweep) -> list[dict[str, Any]]:
    return [{"run": rs.label, "code": f.code, "name": f.name, "severity": f.severity, "endpoint": f.endpoint,
             "first_ts": f.first_ts.isoformat(), "last_ts": (f.last_ts or f.first_ts).isoformat(),
             "message": f.message}
            for f in rs.report.findings if f.first_ts is not None]


def _frontier(points: list[dict[str, Any]], denominator: str) -> list[dict[str, Any]]:
    on = [p for p in points if p["frontier"].get(denominator)]
    return [{"run": p["run"], "concurrency": p["concurrency"], "tok_s_per_user": p["tok_s_per_user"],
             "tok_s_per_gpu": p["tok_s_per_gpu"][denominator]}
            for p in sorted(on, key=lambda p: (p["tok_s_per_user"], -p["tok_s_per_gpu"][denominator]))]


def build(reports: Sequence[Report], sla: Sla | None = None, result_files: Sequence[Mapping[int, Path]] = (),
          min_tok_s_user: float | None = None) -> dict[str, Any]:
    """The report document of ``reports`` (one per run directory, in the order given), every point judged
    against ``sla`` (default: the recipes' goodput thresholds, else ``DEFAULT_SLA``); ``result_files``
    (per report: concurrency -> sa-bench result JSON) give goodput per request."""
    sla = sla or resolve_sla(None, [r.run.recipe for r in reports])
    runs = sweep(reports, sla, result_files)
    points = [p.to_dict() for rs in runs for p in rs.points]
    return {
        **envelope(REPORT_SCHEMA),
        "denominators": {"working": "GPUs the engines run on (result file gpus_<T>, else the job's resources)",
                         "allocated": "GPUs of the whole nodes the job holds"},
        "sla": sla.to_dict(),
        "pick": pick([p for rs in runs for p in rs.points], sla, min_tok_s_user),
        "runs": [{"label": rs.label, "root": str(rs.report.run.root) if rs.report.run.root else None,
                  "topology": rs.topology, "header": dict(rs.report.header),
                  "gpus": gpu_counts(rs.report.run), "tokens_per_gpu": rs.report.tokens_per_gpu,
                  "findings": rs.report.counts, "best": _best(rs), "note": None if rs.points else NO_POINTS,
                  "health": {e.id: e.health for e in rs.report.endpoints},
                  "finding_list": [{"code": f.code, "name": f.name, "severity": f.severity, "endpoint": f.endpoint,
                                    "message": f.message} for f in rs.report.findings],
                  "verdict": rs.report.verdict.to_dict() if rs.report.verdict is not None else None} for rs in runs],
        "points": points,
        "frontier": {d: _frontier(points, d) for d in DENOMINATORS},
        "series": [row for rs in runs for row in _series_rows(rs)],
        "windows": [row for rs in runs for row in _window_rows(rs)],
        "steps": [{"run": p["run"], "concurrency": p["concurrency"], "started": p["started"], "ended": p["ended"]}
                  for p in points if p["started"]],
        "diffs": diffs(runs),
    }


def _best(rs: RunSweep) -> dict[str, Any] | None:
    """The eligible point (valid, within the target) with the most total tok/s per working GPU."""
    ok = [p for p in rs.points if eligible(p) and p.tok_s_per_gpu["working"] is not None]
    if not ok:
        return None
    p = max(ok, key=lambda p: p.tok_s_per_gpu["working"] or 0.0)
    return {"concurrency": p.concurrency, "tok_s_per_gpu": p.tok_s_per_gpu, "tok_s_per_user": p.tok_s_per_user,
            "verdict": p.verdict}
