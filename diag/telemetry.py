"""Telemetry captures in a run directory (Tachometer Parquet, AIPerf server-metrics exports) as
Prometheus sources: one :class:`ParsedLog` of kind ``prometheus`` per scraped process, its samples from
the same :class:`~diag.parsers.prometheus.StatsConverter` as every other metric source (diag.prom)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from diag.parsers import inputs
from diag.parsers.ingest import ParsedLog
from diag.parsers.layout import FileInfo
from diag.parsers.prometheus import StatsConverter
from diag.parsers.telemetry import aiperf_jsonl, aiperf_parquet, tachometer_parquet

from .prom import KIND, error_log


def telemetry_logs(paths: list[Path], kind: str) -> list[ParsedLog]:
    """One ParsedLog per scraped process of Tachometer Parquet files (``kind`` ``tachometer``; a
    leaf's ``final.parquet`` supersedes its intermediate files) or AIPerf server-metrics exports."""
    if kind == "tachometer":
        finals = {p.parent for p in paths if p.name == "final.parquet"}
        paths = [p for p in paths if p.name == "final.parquet" or p.parent not in finals]
    logs = []
    for path in paths:
        try:
            if kind == "tachometer":
                procs = tachometer_parquet(path)
            elif path.suffix == ".parquet":
                procs = aiperf_parquet(path)
            else:
                procs, _ = aiperf_jsonl(inputs.read_text(path).splitlines())
        except (OSError, ValueError, pl.exceptions.PolarsError) as e:
            logs.append(error_log(str(path), f"{path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}"))
            continue
        size = inputs.stat(path).st_size
        for proc in procs:
            log = ParsedLog(f"{path}#{proc.key}", FileInfo(path, KIND, proc.role or "unknown", proc.index, proc.node))
            conv = StatsConverter()
            for n, (ts, samples) in enumerate(proc.scrapes, 1):
                log.records.extend(conv.add(ts, samples, n))
            log.counts.lines = log.counts.candidates = len(proc.scrapes)
            log.size = size // max(1, len(procs))
            logs.append(log)
    return logs
