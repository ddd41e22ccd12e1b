"""The index rows of one analysed run: its ``runs`` row, ``points``, ``findings``, ``endpoints``, and the
``series`` and ``requests`` of its report part, every table keyed by ``run_id``.

All of it is read off the pipeline's :class:`~diag.report.Report` and its
:class:`~diag.report_part.RunPart` (the numbers ``diag tail --format json`` and ``diag report`` show),
never recomputed. The column lists below are the dataset's schema (``docs/index.md`` documents them).
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from diag import __version__
from diag.emit.jsondoc import verdict_links
from diag.report import Report, model_of
from diag.report_part import REQUEST_SCHEMA, RunPart
from diag.rules.engine import sort_findings

UTC_TS = pl.Datetime("us", "UTC")
LATENCIES = [f"{stat}_{metric}_ms" for metric in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p99")]

RUNS: dict[str, Any] = {
    "run_id": pl.String, "path": pl.String, "name": pl.String, "status": pl.String, "error": pl.String,
    "job": pl.String, "job_name": pl.String, "model": pl.String, "recipe": pl.String, "backend": pl.String,
    "engine": pl.String,
    "topology": pl.String, "endpoints": pl.String, "build": pl.String, "stage": pl.String, "phase": pl.String,
    "validity": pl.String, "verdict": pl.String, "limiter": pl.String, "confidence": pl.String, "why": pl.String,
    "best_concurrency": pl.Int64, "total_tok_s": pl.Float64,
    "tok_s_gpu_working": pl.Float64, "tok_s_gpu_allocated": pl.Float64,
    "working_gpus": pl.Int64, "allocated_gpus": pl.Int64, "points": pl.Int64,
    "errors": pl.Int64, "warnings": pl.Int64, "infos": pl.Int64,
    "top_finding": pl.String, "top_finding_message": pl.String,
    "start": UTC_TS, "end": UTC_TS, "input_hash": pl.String, "diag_version": pl.String, "report_part": pl.String,
}
POINTS: dict[str, Any] = {
    "run_id": pl.String, "concurrency": pl.Int64, "complete": pl.Boolean,
    "successful_requests": pl.Int64, "failed_requests": pl.Int64, "total_token_throughput": pl.Float64,
    "output_throughput": pl.Float64, "request_throughput": pl.Float64, "tok_s_per_user": pl.Float64,
    "tok_s_gpu_working": pl.Float64, "tok_s_gpu_allocated": pl.Float64,
    "working_gpus": pl.Int64, "allocated_gpus": pl.Int64, **dict.fromkeys(LATENCIES, pl.Float64),
    "started": UTC_TS, "ended": UTC_TS, "verdict": pl.String, "limiter": pl.String, "confidence": pl.String,
    "why": pl.String,
}
FINDINGS: dict[str, Any] = {
    "run_id": pl.String, "code": pl.String, "name": pl.String, "severity": pl.String, "endpoint": pl.String,
    "message": pl.String, "first_ts": UTC_TS, "last_ts": UTC_TS, "open": pl.Boolean,
    "verdicts": pl.List(pl.String), "path": pl.String, "line": pl.Int64,
}
ENDPOINTS: dict[str, Any] = {
    "run_id": pl.String, "endpoint": pl.String, "role": pl.String, "nodes": pl.List(pl.String),
    "engines": pl.Int64, "samples": pl.Int64, "health": pl.String, "phase": pl.String,
    "first_ts": UTC_TS, "last_ts": UTC_TS, "window": pl.String,
    **dict.fromkeys(("prompt_tps_mean", "gen_tps_mean", "running_mean", "waiting_mean", "waiting_peak",
                     "kv_usage_mean", "kv_usage_peak"), pl.Float64),
    "preemptions": pl.Int64,
}
REQUESTS: dict[str, Any] = {"run_id": pl.String, **REQUEST_SCHEMA}
TABLES: dict[str, dict[str, Any]] = {"runs": RUNS, "points": POINTS, "findings": FINDINGS, "endpoints": ENDPOINTS}
PARTITIONED = ("series", "requests")   # one file per run: DIR/<table>/run_id=<id>/part-0.parquet
NOT_MEASURED = {"invalid": "invalid", "startup-stuck": "invalid", "unknown": "unknown"}   # verdict -> validity
STATUSES = ("ok", "failed")   # a run analysed, or not (its reason in ``error``)


@cache
def vocabulary() -> dict[str, tuple[str, ...]]:
    """The closed vocabulary of the ``runs`` columns that take one (``--where`` checks a value against it),
    each read from where diag defines it: the verdict catalog's classes and limiters, the confidences, the
    phases, the validities and statuses written here, the rule codes."""
    from diag.report import PHASES
    from diag.rules.catalog import catalog
    from diag.rules.verdict import CONFIDENCES
    from diag.rules.verdict_catalog import verdict_catalog

    classes = verdict_catalog().classes
    return {"status": STATUSES, "validity": ("valid", *dict.fromkeys(NOT_MEASURED.values()), "failed"),
            "verdict": tuple(c.name for c in classes), "limiter": tuple(lim for c in classes for lim in c.limiters),
            "confidence": CONFIDENCES, "phase": PHASES, "top_finding": tuple(catalog())}


def run_id_of(root: Path) -> str:
    """A run's key in every table: a digest of its absolute path."""
    return hashlib.sha256(str(root.absolute()).encode()).hexdigest()[:16]


def frame(rows: list[dict[str, Any]], schema: dict[str, Any]) -> pl.DataFrame:
    """Rows (dicts; a missing key is null) as a frame of exactly ``schema``."""
    return pl.DataFrame([{k: r.get(k) for k in schema} for r in rows], schema=schema)


def failed_rows(root: Path, reason: str, input_hash: str | None) -> dict[str, pl.DataFrame]:
    """A run the index could not analyse: its ``runs`` row with the one-line reason, no other rows."""
    row = {"run_id": run_id_of(root), "path": str(root.absolute()), "name": root.name, "status": STATUSES[1],
           "error": reason, "validity": "failed", "input_hash": input_hash, "diag_version": __version__}
    return {"runs": frame([row], RUNS)}


def report_rows(report: Report, part: RunPart, input_hash: str | None) -> dict[str, pl.DataFrame]:
    """Every table's rows of one analysed run."""
    run = report.run
    root = run.root or Path(".")
    rid = run_id_of(root)
    v = report.verdict
    tpg = report.tokens_per_gpu or {}
    found = sort_findings(report.findings)
    top = found[0] if found else None
    row = {"run_id": rid, "path": str(root.absolute()), "name": root.name, "status": STATUSES[0],
           "job": run.job.job_id if run.job else None, "job_name": run.job.job_name if run.job else None,
           "model": model_of(run), "recipe": run.recipe.path if run.recipe else None,
           "backend": run.recipe.backend if run.recipe else None, "engine": run.engine_name, "topology": part.topology,
           "endpoints": report.topology, "build": run.build, "stage": report.stage, "phase": report.phase,
           "validity": NOT_MEASURED.get(v.cls, "valid") if v else "unknown",
           "verdict": v.cls if v else None, "limiter": v.limiter if v else None,
           "confidence": v.confidence if v else None, "why": v.why if v else None,
           "best_concurrency": tpg.get("concurrency"), "total_tok_s": tpg.get("total_token_throughput"),
           "tok_s_gpu_working": tpg.get("per_working_gpu"), "tok_s_gpu_allocated": tpg.get("per_allocated_gpu"),
           "working_gpus": tpg.get("working_gpus"), "allocated_gpus": tpg.get("allocated_gpus"),
           "points": len(part.points), "errors": report.counts["error"], "warnings": report.counts["warning"],
           "infos": report.counts["info"], "top_finding": top.code if top else None,
           "top_finding_message": top.message if top else None, "start": run.start, "end": run.clock,
           "input_hash": input_hash, "diag_version": __version__,
           "report_part": json.dumps(part.to_json(), default=str, ensure_ascii=False)}
    points = []
    for p in part.points:
        b = part.bench[p.concurrency]
        points.append({"run_id": rid, "concurrency": p.concurrency, "complete": p.complete,
                       "successful_requests": p.successful_requests, "failed_requests": p.failed_requests,
                       "total_token_throughput": p.total_token_throughput, "output_throughput": p.output_throughput,
                       "request_throughput": p.request_throughput, "tok_s_per_user": p.tok_s_per_user,
                       "tok_s_gpu_working": p.tok_s_per_gpu["working"],
                       "tok_s_gpu_allocated": p.tok_s_per_gpu["allocated"], "working_gpus": p.gpus["working"],
                       "allocated_gpus": p.gpus["allocated"], **{k: b.get(k) for k in LATENCIES},
                       "started": p.started, "ended": p.ended, "verdict": p.verdict,
                       "limiter": p.detail.get("limiter"), "confidence": p.detail.get("confidence"), "why": p.reason})
    links = verdict_links(report)
    findings = [{"run_id": rid, "code": f.code, "name": f.name, "severity": f.severity, "endpoint": f.endpoint,
                 "message": f.message, "first_ts": f.first_ts, "last_ts": f.last_ts, "open": f.open,
                 "verdicts": links.get((f.code, f.endpoint), []),
                 "path": f.location.path if f.location else None, "line": f.location.line if f.location else None}
                for f in found]
    endpoints = []
    for e in report.endpoints:
        stats = e.to_dict()["stats"]
        endpoints.append({"run_id": rid, "endpoint": e.id, "role": e.role, "nodes": list(e.nodes),
                          "engines": e.engines, "samples": e.samples, "health": e.health, "phase": e.phase,
                          "first_ts": e.first_ts, "last_ts": e.last_ts,
                          "window": (e.window or {}).get("label"),
                          **{k: stats[k] for k in ENDPOINTS if k in stats and k not in ("window", "samples")}})
    series = part.series.select(pl.lit(rid).alias("run_id"), pl.all()) if part.series.height else pl.DataFrame()
    return {"runs": frame([row], RUNS), "points": frame(points, POINTS), "findings": frame(findings, FINDINGS),
            "endpoints": frame(endpoints, ENDPOINTS), "series": series,
            "requests": part.requests_frame().select(pl.lit(rid).alias("run_id"), pl.all())}


__all__ = ["ENDPOINTS", "FINDINGS", "PARTITIONED", "POINTS", "REQUESTS", "RUNS", "STATUSES", "TABLES", "failed_rows",
           "frame", "report_rows", "run_id_of", "vocabulary"]
