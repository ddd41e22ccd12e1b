"""The JSON emitters: ``diag tail --format json`` (one document, schema ``diag-tail-1``), ``--format jsonl``
(a stream, ``diag-tail-jsonl-1``) and ``diag check --format json`` (``diag-check-1``). The schemas are in
``diag/schemas/``; tests validate every output against them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from diag.parsers.records import Record
from diag.report import Report
from diag.rules.finding import Finding
from diag.rules.runmodel import Run

from . import CHECK_SCHEMA, TAIL_SCHEMA, envelope
from .findings import summarize


def source_dicts(run: Run) -> list[dict[str, Any]]:
    out = [{"path": s.path, "kind": s.kind, "role": getattr(s.info, "role", None),
            "lines": s.counts.lines, "records": s.n_records, "noise_lines": c.noise_lines,
            "ansi_lines": c.ansi_lines, "noise_exact": s.counts.exact, "bytes": s.size, "skipped": None,
            "error": s.error} for s in run.sources for c in [s.counts.estimate()]]
    out += [{"path": p, "kind": "unknown", "role": None, "lines": 0, "records": 0, "noise_lines": 0,
             "ansi_lines": 0, "noise_exact": True, "bytes": None, "skipped": reason, "error": None}
            for p, reason in run.skipped]
    return out


def _bench(b: Any) -> dict[str, Any]:
    from dataclasses import asdict, is_dataclass

    d = asdict(b) if is_dataclass(b) else dict(b)
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in d.items()
            if v is not None and not isinstance(v, (list, tuple))}


def report_dict(report: Report) -> dict[str, Any]:
    """The ``diag tail --format json`` document of one run (schema ``diag-tail-1``)."""
    run = report.run
    supports = verdict_links(report)
    return {
        **envelope(TAIL_SCHEMA),
        "root": str(run.root) if run.root else None,
        "judged_at": report.now.isoformat() if report.now else None,
        "sources": source_dicts(run),
        "endpoints": [s.to_dict() for s in report.endpoints],
        "findings": [{**f.to_dict(), "verdicts": supports.get((f.code, f.endpoint), [])} for f in report.findings],
        "verdict": report.verdict.to_dict() if report.verdict is not None else None,
        "benchmark": {"results": [_bench(b) for b in run.benchmark],
                      "accuracy": [_bench(a) for a in run.accuracy],
                      "tokens_per_gpu": report.tokens_per_gpu,
                      "points": [v.to_dict() for v in report.verdicts.points] if report.verdicts else []},
        "summary": {
            "header": dict(report.header), "topology": report.topology, "stage": report.stage,
            "engine": run.engine_name, "engine_by": run.engine_by, "build": run.build, "start": run.start.isoformat() if run.start else None,
            "end": run.clock.isoformat() if run.clock else None, "phase": report.phase, "balance": report.balance,
            "throughput": report.throughput, "findings": report.counts, "errors": list(run.errors),
        },
        "postmortem": report.postmortem.to_dict() if report.postmortem is not None else None,
        "timeline": [e.to_dict() for e in report.timeline],
    }


def verdict_links(report: Report) -> dict[tuple[str, str | None], list[str]]:
    """(code, endpoint) of a finding -> the verdicts resting on it (``run``, ``C=2048``)."""
    out: dict[tuple[str, str | None], list[str]] = {}
    if report.verdicts is None:
        return out
    for scope, v in [("run", report.verdicts.run)] + [(f"C={p.concurrency}", p) for p in report.verdicts.points]:
        for key in v.findings:
            out.setdefault(key, []).append(scope)
    return out


def document(reports: list[Report]) -> dict[str, Any]:
    """One run's document, or ``{tool, version, schema, runs: [...]}`` for several."""
    if len(reports) == 1:
        return report_dict(reports[0])
    return {**envelope(TAIL_SCHEMA), "runs": [report_dict(r) for r in reports]}


def record_dict(path: str, r: Record) -> dict[str, Any]:
    """A JSONL ``record`` line."""
    from dataclasses import asdict

    d = {k: v for k, v in asdict(r).items() if v is not None}
    return {"type": "record", "kind": r.kind, "path": path, **d}


def jsonl_lines(report: Report, *, records: bool = True) -> Iterator[dict[str, Any]]:
    """The batch JSONL stream of one run: records, endpoints, findings, then the summary."""
    if records:
        for src in report.run.sources:
            for r in src.all_records():  # extracted stats/KV rows materialise here, one source at a time
                yield record_dict(src.path, r)
    for ep in report.endpoints:
        yield {"type": "endpoint", **ep.to_dict()}
    for f in report.findings:
        yield {"type": "finding", **f.to_dict()}
    yield summary_line(report)


def summary_line(report: Report) -> dict[str, Any]:
    doc = report_dict(report)
    return {"type": "summary", **{k: v for k, v in doc.items() if k not in ("sources", "tool", "version", "schema")}}


def check_dict(findings: Sequence[Finding], *, files: int | None = None, suppressed: int = 0,
               notes: Sequence[str] = ()) -> dict[str, Any]:
    """The ``diag check --format json`` document (schema ``diag-check-1``)."""
    return {**envelope(CHECK_SCHEMA), "summary": summarize(findings, files, suppressed).to_dict(),
            "findings": [f.to_dict() for f in findings], "notes": list(notes)}


def check_document(findings: Sequence[Finding], *, files: int | None = None, suppressed: int = 0,
                   notes: Sequence[str] = ()) -> str:
    """The ``diag check --format json`` document as written."""
    return json.dumps(check_dict(findings, files=files, suppressed=suppressed, notes=notes), indent=2,
                      default=str) + "\n"

