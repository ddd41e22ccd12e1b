"""srt-slurm's Tachometer Parquet and AIPerf's server-metrics exports -> per-process scrapes (pure).

Both are long-format captures of the workers' ``/metrics`` (telemetry-formats.md §1, §2). polars scans
them lazily and keeps only the rows of the metrics diag uses (:data:`parsers.prom_vocab.FIELDS`, old
names included), so a multi-GB capture full of histograms costs a filter, not a read. Each process's
rows become ``(ts, samples)`` scrapes that :class:`parsers.prometheus.StatsConverter` turns into
``StatsSample(variant="prom")`` rows: the same counters-to-rates and histograms-to-quantiles code
(resets included) as ``raw_prometheus.jsonl``, live ``/metrics`` scrapes and pasted expositions.
Histogram buckets (Tachometer: the family name with ``le`` inline) become ``<family>_bucket`` samples.

* Tachometer: labels are flattened into ``metric_name`` (``vllm:prompt_tokens_total{engine="0",…}``),
  counters keep ``_total``; ``scraper_endpoint`` names the process and the metadata columns
  ``worker_role``/``worker_index``/``hostname`` say what it is (else the endpoint name
  ``backend_<mode><index>_rank<r>``/``frontend<N>``). Old captures without ``timestamp_ns`` are
  skipped with a reason (they are relative to a start only ``tachometer.out`` knows).
* AIPerf Parquet: one column per label key, ``value`` (histograms: a row per bucket, ``bucket_le``,
  ``bucket_count``); AIPerf JSONL: ``metrics: {name: [{labels, value} | {labels, buckets: {le: count}}]}``. Counter names have no ``_total`` and Parquet counters are deltas from a reference scrape
  (rates are unchanged). The role comes from Dynamo's ``dynamo_component`` label (``backend``: decode
  when an endpoint of the export is ``prefill``, else agg); the worker index
  from the order of the role's endpoint URLs, where a process whose lowest ``engine`` rank is not 0
  continues the previous one (a data-parallel group spread over nodes is one endpoint).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from . import inputs
from .prom_vocab import BACKEND, ROLE_LABELS, backend_role, canonical, family_names, role_of_label
from .prometheus import PromSample

__all__ = ["Scrapes", "aiperf_jsonl", "aiperf_parquet", "is_tachometer_path", "metric_names",
           "tachometer_parquet"]

_LABEL = re.compile(r'([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"')
_ENDPOINT = re.compile(r"^backend_(?P<role>[a-z]+?)(?P<idx>\d+)_rank(?P<rank>\d+)$|^frontend(?P<fe>\d+)$")
COMPONENT = ROLE_LABELS[0]   # Dynamo's component label names an AIPerf endpoint's role


def metric_names() -> set[str]:
    """Every family name diag reads: current and old names, bare and with ``_total`` (histogram rows
    carry the bare family name and their ``le`` inline or in a column)."""
    names = family_names()
    return names | {f"{n}_total" for n in names}


@dataclass
class Scrapes:
    """One scraped process: where it belongs and its scrapes in time order."""

    key: str
    role: str | None
    index: int | None
    node: str | None
    scrapes: list[tuple[datetime, list[PromSample]]]


def is_tachometer_path(path: Path) -> bool:
    return path.suffix == ".parquet" and "tachometer" in path.parts[:-1]


def _sample(name: str, labels: dict[str, str], value: float) -> PromSample | None:
    """A sample of a family as the captures name it; a row with ``le`` is a bucket of its histogram."""
    if "le" in labels and not name.endswith("_bucket"):
        name += "_bucket"
    canon = canonical(name)
    if canon is None:
        return None
    kind = "histogram" if name.endswith("_bucket") else "counter" if name.endswith("_total") else "gauge"
    return PromSample(name, canon[0], labels, value, kind, canon[1])


def _group(df: pl.DataFrame, key: str) -> Iterator[tuple[str, pl.DataFrame]]:
    for (k,), part in df.partition_by(key, as_dict=True, maintain_order=True).items():
        yield str(k), part


def _scrapes(part: pl.DataFrame, make: list[PromSample | None]) -> list[tuple[datetime, list[PromSample]]]:
    by_ts: dict[int, list[PromSample]] = {}
    for ts, s in zip(part["timestamp_ns"].to_list(), make, strict=True):
        if s is not None:
            by_ts.setdefault(ts, []).append(s)
    return [(datetime.fromtimestamp(ts / 1e9, tz=UTC), by_ts[ts]) for ts in sorted(by_ts)]


def tachometer_parquet(path: Path) -> list[Scrapes]:
    """The processes of one Tachometer Parquet file. Raises ValueError with one line."""
    lf = pl.scan_parquet(inputs.scannable(path))
    schema = lf.collect_schema()
    missing = {"scraper_endpoint", "metric_name", "metric_value"} - set(schema.names())
    if missing:
        raise ValueError(f"not a Tachometer capture: no {', '.join(sorted(missing))} column")
    if "timestamp_ns" not in schema.names():
        raise ValueError("a Tachometer capture without timestamp_ns (times relative to the scraper's start)")
    meta = [c for c in ("worker_role", "worker_index", "hostname") if c in schema.names()]
    df = (lf.filter(pl.col("metric_name").str.extract(r"^([^{]*)").is_in(list(metric_names())))
          .select("scraper_endpoint", "timestamp_ns", "metric_name", pl.col("metric_value").cast(pl.Float64), *meta)
          .collect())
    out = []
    for key, part in _group(df, "scraper_endpoint"):
        samples = []
        for name, value in zip(part["metric_name"].to_list(), part["metric_value"].to_list(), strict=True):
            family, _, rest = name.partition("{")
            samples.append(_sample(family, dict(_LABEL.findall(rest)), float(value)))
        first = part.row(0, named=True)
        m = _ENDPOINT.match(key)
        role = role_of_label(first.get("worker_role")) or (role_of_label(m["role"]) if m and m["role"] else None)
        if role is None and m and m["fe"] is not None:
            role = "frontend"
        idx_text = first.get("worker_index") or (m["idx"] or m["fe"] if m else None)
        out.append(Scrapes(key, role, int(idx_text) if idx_text and idx_text.isdigit() else None,
                           first.get("hostname") or None, _scrapes(part, samples)))
    return out


_AIPERF_FIXED = {"endpoint_url", "metric_name", "metric_type", "unit", "description", "timestamp_ns", "value",
                 "sum", "count", "bucket_le", "bucket_count"}


def aiperf_parquet(path: Path) -> list[Scrapes]:
    """The endpoints of an AIPerf ``server_metrics_export.parquet``. Raises ValueError with one line."""
    lf = pl.scan_parquet(inputs.scannable(path))
    names = lf.collect_schema().names()
    missing = {"endpoint_url", "metric_name", "timestamp_ns", "value"} - set(names)
    if missing:
        raise ValueError(f"not an AIPerf server-metrics export: no {', '.join(sorted(missing))} column")
    labels = [c for c in names if c not in _AIPERF_FIXED]
    buckets = [c for c in ("bucket_le", "bucket_count") if c in names]
    has_bucket = pl.col("bucket_count").is_not_null() if len(buckets) == 2 else pl.lit(False)
    df = (lf.filter(pl.col("metric_name").is_in(list(metric_names())) & (pl.col("value").is_not_null() | has_bucket))
          .select("endpoint_url", "timestamp_ns", "metric_name", "value", *buckets, *labels).collect())
    per_url: dict[str, list[tuple[int, PromSample | None]]] = {}
    for row in df.iter_rows(named=True):
        lab = {k: str(row[k]) for k in labels if row[k] is not None}
        if row.get("bucket_count") is not None:  # a histogram row: one bucket, cumulative
            lab["le"] = str(row["bucket_le"])
            value = float(row["bucket_count"])
        else:
            value = float(row["value"])
        per_url.setdefault(row["endpoint_url"], []).append((row["timestamp_ns"], _sample(row["metric_name"], lab, value)))
    return _aiperf_endpoints(per_url)


def aiperf_jsonl(lines: list[str]) -> tuple[list[Scrapes], list[str]]:
    """The endpoints of an AIPerf ``server_metrics_export.jsonl``, and one problem per bad line."""
    wanted = metric_names()
    per_url: dict[str, list[tuple[int, PromSample | None]]] = {}
    problems = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            url, ts, metrics = str(rec["endpoint_url"]), int(rec["timestamp_ns"]), rec["metrics"]
        except (ValueError, KeyError, TypeError) as e:
            problems.append(f"line {n}: not a server-metrics record ({type(e).__name__})")
            continue
        rows = per_url.setdefault(url, [])
        for name, samples in metrics.items():
            if name not in wanted:
                continue
            for s in samples or []:
                if not isinstance(s, dict):
                    continue
                labels = dict(s.get("labels") or {})
                if isinstance(s.get("value"), (int, float)):
                    rows.append((ts, _sample(name, labels, float(s["value"]))))
                hist = s.get("buckets") or s.get("histogram")  # older AIPerf: "histogram"
                if isinstance(hist, dict):
                    rows += [(ts, _sample(name, {**labels, "le": str(le)}, float(c)))
                             for le, c in hist.items() if isinstance(c, (int, float))]
    return _aiperf_endpoints(per_url), problems


def _aiperf_endpoints(per_url: dict[str, list[tuple[int, PromSample | None]]]) -> list[Scrapes]:
    found = []
    for url, rows in per_url.items():
        by_ts: dict[int, list[PromSample]] = {}
        for ts, s in rows:
            if s is not None:
                by_ts.setdefault(ts, []).append(s)
        samples = [s for ss in by_ts.values() for s in ss]
        comps = {r for s in samples if (r := role_of_label(s.labels.get(COMPONENT), COMPONENT))}
        engines = [int(e) for s in samples if (e := s.labels.get("engine", "")).isdigit()]
        scrapes = [(datetime.fromtimestamp(ts / 1e9, tz=UTC), by_ts[ts]) for ts in sorted(by_ts)]
        found.append((url, comps.pop() if len(comps) == 1 else None, min(engines, default=0), scrapes))
    found.sort(key=lambda f: _url_order(f[0]))
    with_prefill = any(role == "prefill" for _, role, _, _ in found)
    out: list[Scrapes] = []
    nxt: dict[str | None, int] = {}
    for url, comp, low, scrapes in found:
        role = backend_role(with_prefill) if comp == BACKEND else comp
        if low > 0 and role in nxt:
            idx = nxt[role] - 1  # a later node of the previous process's data-parallel group
        else:
            idx = nxt.get(role, 0)
            nxt[role] = idx + 1
        out.append(Scrapes(url, role, idx, _host(url), scrapes))
    return out


def _host(url: str) -> str | None:
    m = re.match(r"^\w+://([^/:]+)", url)
    return m.group(1) if m else None


def _url_order(url: str) -> tuple[tuple[tuple[int, int, str], ...], int]:
    m = re.match(r"^\w+://([^/:]+)(?::(\d+))?", url)
    host = m.group(1) if m else url
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in host.split("."))
    return parts, int(m.group(2)) if m and m.group(2) else 0
