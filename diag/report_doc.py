"""The ``diag report --format json`` document (schema ``diag-report-1``): the table behind every plot
of the HTML report, built from the runs' :class:`~diag.report.Report`\\ s via :mod:`diag.sweep`.

The HTML and text renderers draw from this document only, so what a plot shows is what the JSON says.
Tables: ``points`` (Pareto, per-run curves, verdicts), ``frontier`` (per GPU denominator, in x order),
``series`` (per endpoint and 10 s interval), ``windows`` (findings' windows, shaded) and ``steps``
(each concurrency's measured window, marked), ``diffs`` (the first run against each other one); ``sla``
(the latency target every point is judged by) and ``pick`` (the configuration to run, in one sentence).
Each of ``runs`` carries its ``postmortem`` (a failed run's, as ``diag tail --format json``) and ``timeline``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .emit import envelope
from .report import Report
from .report_part import RunPart
from .sla import Sla, first_sla
from .sweep import DENOMINATORS, SERIES, RunSweep, diffs, eligible, pick, sweep

NO_POINTS = "no benchmark points: the run has no benchmark results (endpoint series and findings only)"

REPORT_SCHEMA = "diag-report-1"


def _series_rows(rs: RunSweep, part: RunPart) -> list[dict[str, Any]]:
    return [{"run": rs.label, "endpoint": row["endpoint"], "role": row["role"], "ts": row["ts"].isoformat(),
             **{c: (round(float(row[c]), 1) if row[c] is not None else None) for c, _ in SERIES}}
            for row in part.series.iter_rows(named=True)]


def _window_rows(rs: RunSweep) -> list[dict[str, Any]]:
    return [{"run": rs.label, "code": f["code"], "name": f["name"], "severity": f["severity"],
             "endpoint": f["endpoint"], "first_ts": f["first_ts"], "last_ts": f["last_ts"] or f["first_ts"],
             "message": f["message"]}
            for f in rs.part.findings if f["first_ts"] is not None]


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
    files = list(result_files) or [{}] * len(reports)
    return build_parts([RunPart.of(r, f) for r, f in zip(reports, files, strict=True)], sla, min_tok_s_user)


def build_parts(parts: Sequence[RunPart], sla: Sla | None = None,
                min_tok_s_user: float | None = None) -> dict[str, Any]:
    """The report document of the runs' parts (from their reports, or as ``diag index`` stored them)."""
    sla = sla or first_sla(None, [p.sla for p in parts])
    runs = sweep(parts, sla)
    points = [p.to_dict() for rs in runs for p in rs.points]
    return {
        **envelope(REPORT_SCHEMA),
        "denominators": {"working": "GPUs the engines run on (result file gpus_<T>, else the job's resources)",
                         "allocated": "GPUs of the whole nodes the job holds"},
        "sla": sla.to_dict(),
        "pick": pick([p for rs in runs for p in rs.points], sla, min_tok_s_user),
        "runs": [{"label": rs.label, "root": part.root, "topology": rs.topology, "header": part.header,
                  "gpus": part.gpus, "tokens_per_gpu": part.tokens_per_gpu,
                  "findings": part.counts, "best": _best(rs), "note": None if rs.points else NO_POINTS,
                  "health": part.health,
                  "finding_list": [{k: f[k] for k in ("code", "name", "severity", "endpoint", "message")}
                                   for f in part.findings],
                  "verdict": part.verdict, "postmortem": part.postmortem, "timeline": list(part.timeline)}
                 for rs, part in zip(runs, parts, strict=True)],
        "points": points,
        "frontier": {d: _frontier(points, d) for d in DENOMINATORS},
        "series": [row for rs, part in zip(runs, parts, strict=True) for row in _series_rows(rs, part)],
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
