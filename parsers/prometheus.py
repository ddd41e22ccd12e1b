"""Prometheus exposition text -> vLLM engine samples -> :class:`StatsSample` rows (pure, no I/O).

* :func:`parse_exposition` parses ``/metrics`` text with ``prometheus_client``'s parser after
  :func:`clean_exposition` has undone markdown pastes (``> `` quoting, the ``#`` of HELP/TYPE lost,
  code fences). Bad text raises :class:`ExpositionError` (a ``ValueError``) with one line. Sample
  names are read by the vocabulary of :mod:`parsers.prom_vocab` (``_total`` dropped, old names aliased).
* :class:`StatsConverter` turns successive scrapes of one endpoint into one ``StatsSample(variant=
  "prom")`` per engine (``engine`` label) per scrape (and a Prometheus server's computed values into the
  same rows, :meth:`StatsConverter.from_rates`): gauges as they are (KV 0..1 -> percent),
  counters as per-interval rates (tok/s), deltas (preemptions) and hit ratios (prefix and external
  prefix cache, percent of queried tokens in the interval), a counter that went down
  counting as reset (the increase since the reset is its new value), and the latency histograms
  (``_bucket`` series) as per-interval quantiles from bucket deltas (:mod:`parsers.histogram`). A
  scrape only sets the baseline for an engine whose counters have no previous value, so every row
  has its rates.
* :func:`read_capture` reads srt-slurm's ``raw_prometheus.jsonl`` (srt-dynamo.md §3.1):
  one scrape per line ``{timestamp_ns, endpoint_url, role, worker_id, text}``.

The PromQL side (a Prometheus server computing the same rows) is :mod:`parsers.promql`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from .columns import KV_VALUE_KEYS
from .histogram import COLUMNS as LATENCY_COLUMNS
from .histogram import FALLBACK as LATENCY_FALLBACK
from .histogram import Buckets, buckets, interval_quantiles, parse_le
from .prom_vocab import (
    BACKEND,
    COUNTERS,
    COUNTS,
    FIELDS,
    LATENCY,
    REQUEST_COUNTS,
    ROLE_LABELS,
    backend_role,
    canonical,
    engine_label,
    family_names,
    member_of,
    role_of_label,
)
from .records import KVExpiry, KVTransfer, Record, RequestCounts, StatsSample

__all__ = [
    "CaptureRow", "ExpositionError", "PromSample", "StatsConverter", "clean_exposition", "count_records",
    "engine_counters", "engine_histograms", "engine_values", "hit_rate", "iter_capture", "parse_exposition",
    "read_capture", "role_from_samples", "scrapes_to_stats", "signal_increase", "worker_of",
]

VARIANT = "prom"


class ExpositionError(ValueError):
    """Text that is not Prometheus exposition format; the message is one line."""


@dataclass(frozen=True, slots=True)
class PromSample:
    """One sample: ``name`` as exposed, ``metric`` its current name (no ``_total``, aliases applied),
    ``legacy`` when ``metric`` came from an old alias."""

    name: str
    metric: str
    labels: dict[str, str]
    value: float
    type: str
    legacy: bool = False



_NEEDS_CLEAN = re.compile(r"^(?:[ \t]*>|[ \t]+\S|HELP |TYPE |```)", re.M)
_QUOTE = re.compile(r"^(?:[ \t]*>[ \t]?)+")


def clean_exposition(text: str) -> str:
    """Undo markdown pastes: ``> `` quoting, ``HELP``/``TYPE`` without ``#``, fences, indentation, CR."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not _NEEDS_CLEAN.search(text):
        return text
    out = []
    for line in text.split("\n"):
        line = _QUOTE.sub("", line).strip()
        if line.startswith("```"):
            continue
        if line.startswith(("HELP ", "TYPE ")):
            line = "# " + line
        out.append(line)
    return "\n".join(out)


def _bad_line(text: str) -> tuple[int, str, str] | None:
    """The first line the parser rejects on its own: (1-based number, line, error)."""
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except Exception as e:  # the parser raises ValueError, IndexError, KeyError...
            return n, line, str(e).splitlines()[0] if str(e) else type(e).__name__
    return None



_FIELD_LINES = re.compile(
    r"^(?:# (?:HELP|TYPE) )?(?:" + "|".join(re.escape(n) for n in sorted(family_names(), key=len, reverse=True))
    + r")(?:_total|_bucket)?[{ \t].*$", re.M)


def parse_exposition(text: str, *, fields_only: bool = False) -> list[PromSample]:
    """Every sample of an exposition (``_created`` series dropped). Raises ExpositionError.

    ``fields_only`` keeps only the lines of the FIELDS metrics before parsing (a full vLLM scrape
    is mostly histograms): much faster on large captures."""
    clean = clean_exposition(text)
    if fields_only:
        clean = "\n".join(m.group() for m in _FIELD_LINES.finditer(clean)) + "\n"
    try:
        families = list(text_string_to_metric_families(clean))
    except Exception as e:
        bad = _bad_line(clean)
        if bad:
            n, line, why = bad
            raise ExpositionError(f"not Prometheus text: line {n} {line[:80]!r}: {why}") from None
        raise ExpositionError(f"not Prometheus text: {str(e).splitlines()[0] if str(e) else e!r}") from None
    out = []
    for fam in families:
        for s in fam.samples:
            canon = canonical(s.name)
            if canon is None:
                continue
            out.append(PromSample(s.name, canon[0], dict(s.labels), float(s.value), fam.type, canon[1]))
    return out



def engine_values(samples: Iterable[PromSample]) -> dict[str | None, dict[str, float]]:
    """Per ``engine`` label (None when absent): the FIELDS values present, best source first."""
    rank: dict[tuple[str | None, str], tuple[int, bool]] = {}
    out: dict[str | None, dict[str, float]] = {}
    for s in samples:
        for fname, (_, sources) in FIELDS.items():
            for pos, (metric, need) in enumerate(sources):
                if s.metric != metric or (need and s.labels.get(need[0]) != need[1]):
                    continue
                eng = engine_label(s.labels)
                r = (pos, s.legacy)
                if rank.get((eng, fname), (99, True)) > r:
                    rank[(eng, fname)] = r
                    out.setdefault(eng, {})[fname] = s.value
    return out


_LATENCY_KEY = {family: key for key, families in LATENCY.items() for family in families}


def engine_histograms(samples: Iterable[PromSample]) -> dict[str | None, dict[str, Buckets]]:
    """Per engine (:func:`engine_label`): the LATENCY histograms present (:data:`parsers.prom_vocab.LATENCY`
    key -> cumulative buckets), label sets of one engine summed; the current name preferred over an old
    one, the engine's over Dynamo's (:data:`parsers.histogram.FALLBACK`)."""
    acc: dict[tuple[str | None, str, int], dict[float, float]] = {}
    for s in samples:
        if not s.name.endswith("_bucket") or "le" not in s.labels:
            continue
        canon = canonical(s.name.removesuffix("_bucket"))
        if canon is None:
            continue
        key = _LATENCY_KEY.get(canon[0]) or LATENCY_FALLBACK.get(canon[0])
        if key is None:
            continue
        try:
            le = parse_le(s.labels["le"])
        except ValueError:
            continue
        rank = 2 if canon[0] in LATENCY_FALLBACK else int(canon[1])
        counts = acc.setdefault((engine_label(s.labels), key, rank), {})
        counts[le] = counts.get(le, 0.0) + s.value
    out: dict[str | None, dict[str, Buckets]] = {}
    for (eng, key, _), counts in sorted(acc.items(), key=lambda kv: kv[0][2], reverse=True):
        out.setdefault(eng, {})[key] = buckets(counts.items())  # the preferred names last: they win
    return out



def role_from_samples(samples: Iterable[PromSample], with_prefill: bool = False) -> str | None:
    """An endpoint's role from the labels of its scrape: the first of :data:`ROLE_LABELS` whose values
    name exactly one role, Dynamo frontend metrics right after the component label (a frontend exposes
    per-worker gauges of both ``worker_type`` values); :data:`BACKEND` only when no other label names a
    role, then :func:`backend_role` (``with_prefill``: the scrape set has a prefill endpoint)."""
    values: dict[str, set[str]] = {label: set() for label in ROLE_LABELS}
    frontend = False
    for s in samples:
        for label in ROLE_LABELS:
            if label in s.labels:
                values[label].add(s.labels[label])
        frontend = frontend or s.name.startswith("dynamo_frontend_")
    backend = False
    for label in ROLE_LABELS:
        roles = {r for v in values[label] if (r := role_of_label(v, label))}
        backend = backend or roles == {BACKEND}
        roles.discard(BACKEND)
        if len(roles) == 1:
            return roles.pop()
        if label == ROLE_LABELS[0] and frontend:
            return "frontend"
    return backend_role(with_prefill) if backend else None


def _engine_int(label: str | None) -> int | None:
    m = re.search(r"\d+", label or "")
    return int(m.group()) if m else None


_COUNTED = [m for groups in COUNTS.values() for group in groups for m in group]


@dataclass
class StatsConverter:
    """Successive scrapes of one endpoint -> ``StatsSample`` rows (see the module docstring).
    ``baseline_rows``: a baseline scrape still yields its gauges (rates None), for single snapshots."""

    baseline_rows: bool = False
    resets: int = 0
    _prev: dict[str | None, tuple[datetime, dict[str, float], dict[str, Buckets]]] = field(default_factory=dict)
    _kv_prev: dict[str | None, tuple[datetime, dict[str, float]]] = field(default_factory=dict)

    def add(self, ts: datetime, samples: Iterable[PromSample], line: int) -> list[Record]:
        """The rows of one scrape: a ``StatsSample`` per engine, and the KV-transfer failures and lease
        expiries counted since the previous scrape as the logs' records (:func:`kv_records`)."""
        samples = list(samples)
        out: list[Record] = list(self._stats(ts, samples, line))
        for eng, cur in engine_counters(samples, _COUNTED).items():
            prev = self._kv_prev.get(eng)
            if prev is not None and (ts - prev[0]).total_seconds() <= 0:
                continue
            self._kv_prev[eng] = (ts, cur)
            if prev is not None:
                out.extend(count_records(line, ts, {signal: signal_increase(groups, prev[1], cur)
                                                    for signal, groups in COUNTS.items()}))
        return out

    def _stats(self, ts: datetime, samples: list[PromSample], line: int) -> list[StatsSample]:
        out = []
        hists = engine_histograms(samples)
        for eng, vals in sorted(engine_values(samples).items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
            prev = self._prev.get(eng)
            if prev is not None and (ts - prev[0]).total_seconds() <= 0:
                continue  # a repeated or out-of-order scrape says nothing new
            self._prev[eng] = (ts, vals, hists.get(eng, {}))
            counters = [c for c in COUNTERS if c in vals]
            baseline = counters and (prev is None or not any(c in prev[1] for c in counters))
            if baseline and not self.baseline_rows:
                continue  # baseline only
            rates: dict[str, float] = {}
            latency = interval_quantiles(prev[2], hists.get(eng, {})) if prev is not None else {}
            if prev is not None:
                dt = (ts - prev[0]).total_seconds()
                for c in counters:
                    if c in prev[1]:
                        delta = vals[c] - prev[1][c]
                        if delta < 0:
                            self.resets += 1
                            delta = vals[c]
                        rates[c] = delta if c == "preempt" else delta / dt
            out.append(_sample(line, ts, eng, vals, rates, latency))
        return out

    @staticmethod
    def from_rates(ts: datetime, line: int, engine: str | None, values: Mapping[str, Any],
                   step_s: float) -> StatsSample:
        """The row of values a Prometheus server computed over one ``step_s`` step (:func:`parsers.promql.server_queries`):
        gauges, counters as per-second rates (preemptions become the step's count), latency quantiles."""
        vals = {k: float(v) for k in (*FIELDS, *LATENCY_COLUMNS) if (v := values.get(k)) is not None and v == v}
        rates = {c: vals[c] * (step_s if c == "preempt" else 1.0) for c in COUNTERS if c in vals}
        latency = {c: vals[c] for c in LATENCY_COLUMNS if c in vals}
        return _sample(line, ts, engine, vals, rates, latency)


def engine_counters(samples: Iterable[PromSample], members: Iterable[str]) -> dict[str | None, dict[str, float]]:
    """Per engine (:func:`engine_label`): the value of each counter-group member present
    (:func:`member_of`), label sets summed."""
    by_metric: dict[str, list[tuple[str, tuple[str, str] | None]]] = {}
    for m in members:
        name, need = member_of(m)
        by_metric.setdefault(name, []).append((m, need))
    out: dict[str | None, dict[str, float]] = {}
    for s in samples:
        for m, need in by_metric.get(s.metric, ()):
            if need is None or s.labels.get(need[0]) == need[1]:
                vals = out.setdefault(engine_label(s.labels), {})
                vals[m] = vals.get(m, 0.0) + s.value
    return out


def signal_increase(groups: tuple[tuple[str, ...], ...], prev: Mapping[str, float], cur: Mapping[str, float]) -> float:
    """A KV signal's increase between two scrapes of one engine (:data:`KV_SIGNALS`): the largest member
    increase of each group, summed over the groups; a counter that went down restarted from zero."""
    def delta(m: str) -> float:
        return cur[m] - prev[m] if cur[m] >= prev[m] else cur[m]
    return sum(max((delta(m) for m in group if m in cur and m in prev), default=0.0) for group in groups)


_TRANSFER_KEYS = {"kv_transfers": KV_VALUE_KEYS["transfers"][0], "kv_failures": KV_VALUE_KEYS["failed"][0]}


def count_records(line: int, ts: datetime | None, increases: Mapping[str, float]) -> list[Record]:
    """The records the increases of :data:`COUNTS` in an interval stand for: successful and failed KV
    transfers as a ``KV Transfer metrics`` row, each expired lease as a ``KVExpiry`` (``expired``), the
    requests finished and failed as ``RequestCounts``."""
    out: list[Record] = []
    counts = {key: float(round(increases.get(signal, 0.0))) for signal, key in _TRANSFER_KEYS.items()}
    if any(counts.values()):
        out.append(KVTransfer(line, connector=None, values=tuple(counts.items()), ts=ts))
    out.extend(KVExpiry(line, event="expired", ts=ts) for _ in range(round(increases.get("kv_expiry", 0.0))))
    requests, errors = (round(increases.get(k, 0.0)) for k in REQUEST_COUNTS)
    if requests or errors:
        out.append(RequestCounts(line, requests=max(requests, errors), errors=errors, ts=ts))
    return out


def _sample(line: int, ts: datetime, engine: str | None, gauges: Mapping[str, float], rates: Mapping[str, float],
            latency: Mapping[str, float]) -> StatsSample:
    """One ``StatsSample(variant="prom")`` from an engine's gauges (FIELDS names), per-interval counter rates
    (per second; ``preempt`` a count) and latency quantiles: KV 0..1 -> percent, hit ratios in percent. The
    prompt tokens: the computed ones where the engine splits them by source, else every source's (``prompt_all_tps``)."""
    return StatsSample(
        line, variant=VARIANT, engine=_engine_int(engine), ts=ts,
        prompt_tps=rates.get("prompt"), prompt_all_tps=None if "prompt" in rates else rates.get("prompt_all"),
        gen_tps=rates.get("gen"),
        running=_int(gauges.get("running")), waiting=_int(gauges.get("waiting")),
        preemptions=_int(rates.get("preempt")), deferred=_int(gauges.get("deferred")),
        kv_fetch_waiting=_int(gauges.get("kv_fetch_waiting")), kv_fetch_running=_int(gauges.get("kv_fetch_running")),
        kv_fetch_done=_int(gauges.get("kv_fetch_done")),
        kv_usage=None if "kv" not in gauges else gauges["kv"] * 100.0,
        prefix_hit=hit_rate(rates, "prefix"), ext_hit=hit_rate(rates, "ext"),
        latency=dict(latency) or None)


def hit_rate(rates: Mapping[str, float], which: str) -> float | None:
    """Percent of queried tokens that hit in the interval (``prefix`` or ``ext``); None without queries."""
    q, h = rates.get(f"{which}_q"), rates.get(f"{which}_h")
    return None if not q or h is None else 100.0 * h / q


def _int(x: float | None) -> int | None:
    return None if x is None or math.isnan(x) else round(x)


def scrapes_to_stats(scrapes: Iterable[tuple[datetime, int, list[PromSample]]]) -> list[Record]:
    """Rows of one endpoint's scrapes ``(ts, line, samples)``, taken in time order."""
    conv = StatsConverter()
    out: list[Record] = []
    for ts, line, samples in sorted(scrapes, key=lambda t: (t[0], t[1])):
        out.extend(conv.add(ts, samples, line))
    return out


# ---------------------------------------------------------------- raw_prometheus.jsonl

@dataclass(frozen=True, slots=True)
class CaptureRow:
    """One scrape of srt-slurm's capture; ``line`` is its 1-based line in the file."""

    line: int
    timestamp_ns: int
    endpoint_url: str
    role: str | None
    worker_id: str | None
    text: str

    @property
    def ts(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp_ns / 1e9, tz=UTC)


def read_capture(lines: Iterable[str | bytes]) -> tuple[list[CaptureRow], list[str]]:
    """Rows of a capture, and one problem line per line that is not a scrape (torn, not JSON...)."""
    rows: list[CaptureRow] = []
    problems: list[str] = []
    for item in iter_capture(lines):
        (rows if isinstance(item, CaptureRow) else problems).append(item)  # type: ignore[arg-type]
    return rows, problems


def iter_capture(lines: Iterable[str | bytes]) -> Iterator[CaptureRow | str]:
    """Streaming :func:`read_capture`: a row, or a problem line, per non-blank line."""
    for n, raw in enumerate(lines, 1):
        line = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            ts = int(d["timestamp_ns"])
            text = d["text"]
            if not isinstance(text, str):
                raise TypeError("text is not a string")
        except (ValueError, KeyError, TypeError) as e:
            yield f"line {n}: not a scrape record ({type(e).__name__}: {str(e)[:60]})"
            continue
        yield CaptureRow(n, ts, str(d.get("endpoint_url") or ""), d.get("role") or None,
                         d.get("worker_id") or None, text)


_WORKER_ID = re.compile(r"^(?P<role>[A-Za-z]+)_(?P<idx>\d+)(?:_(?P<node>.+))?$")


def worker_of(row: CaptureRow) -> tuple[str | None, int | None, str | None]:
    """(role, worker index, node) of a capture row: ``prefill_0_gb200-r09-n12``, ``frontend_0``; the
    node falls back to the endpoint URL's host."""
    m = _WORKER_ID.match(row.worker_id or "")
    role = role_of_label(row.role) or (role_of_label(m["role"]) if m else None) or row.role
    host = urlsplit(row.endpoint_url).hostname if row.endpoint_url else None
    return role, int(m["idx"]) if m else None, (m["node"] if m and m["node"] else host)


