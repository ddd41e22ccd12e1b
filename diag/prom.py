"""Prometheus sources: srt-slurm's capture, live ``/metrics`` scrapes and a Prometheus server.

Each becomes :class:`ParsedLog` objects of kind ``prometheus`` whose info carries (role, index,
node), so :func:`rules.endpoints.build_endpoints` files their ``StatsSample(variant="prom")`` rows
under the same endpoints as the logs. A source that fails is a ParsedLog with ``error`` set (one
line), like an unreadable log.

How series find their endpoint:

* capture (``raw_prometheus.jsonl``): each row's ``role`` and ``worker_id`` (``prefill_0_<node>``
  -> ``prefill-w0``); rows of one ``worker_id`` are one process.
* scrape: ``ROLE-wN=URL`` names the endpoint. A bare URL takes its role from its labels
  (:func:`parsers.prometheus.role_from_samples`; else ``unknown``) and
  the next free index of that role, in the order the URLs were given.
* server: the role and index from the series' labels (:func:`parsers.prom_vocab.series_endpoint`, the
  one label mapping); without an index label, the position of the series' ``instance`` among that
  role's instances, sorted. Series without a role label are role ``unknown``. Queries are summed by those labels and ``engine``
  on the server; ``diag tail --prom URL`` without paths reads a server alone.

The module is long because the three sources share the endpoint naming and the error wording.

Entry points: :func:`capture_logs` (a run's files), :func:`extra_sources` (one-shot: ``diag tail``),
:func:`watch_sources` (live sources for ``diag watch``, with the pipeline's Source interface).
"""

from __future__ import annotations

import http.client
import re
import time
import urllib.error
import urllib.request
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import polars as pl

from diag import __version__
from diag.parsers import inputs
from diag.parsers.ingest import ParsedLog
from diag.parsers.layout import ROLES, FileInfo
from diag.parsers.prom_vocab import (
    COUNTS,
    METRIC_ENGINES,
    PRESENCE,
    any_series,
    engine_label,
    prefill_deployments,
    series_endpoint,
)
from diag.parsers.prometheus import (
    ExpositionError,
    PromSample,
    StatsConverter,
    count_records,
    iter_capture,
    parse_exposition,
    role_from_samples,
    worker_of,
)
from diag.parsers.promql import MAX_POINTS, choose_step, parse_duration, server_queries
from diag.parsers.records import Record

from .changes import Changes, SourceBase
from .files import Side

KIND = "prometheus"
TIMEOUT_S = 5.0
MAX_BODY = 32 << 20           # bytes read from one /metrics response
DEFAULT_SCRAPE_INTERVAL_S = 15.0
DEFAULT_WINDOW = timedelta(minutes=15)
_NAMED = re.compile(r"^(?P<role>[a-z]+)-w(?P<idx>\d+)=(?P<url>\S+)$")
MAX_CHUNKS = 20               # range queries of MAX_POINTS each before the step grows instead
_SAMPLE_METRIC = any_series(PRESENCE)   # the engines' presence gauges: their samples' spacing is the scrape interval
SPACING_LOOKBACK_S = 600   # seconds of raw samples read to measure the scrape interval


def _either(names: tuple[str, ...]) -> str:
    """'A', 'A or B', 'A, B or C'."""
    return " or ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} or {names[-1]}"


class PromSourceError(Exception):
    """A metric source that cannot be used (bad URL, unreachable, not Prometheus); one line."""


def _info(path: str, role: str | None, index: int | None, node: str | None) -> FileInfo:
    return FileInfo(Path(path), KIND, role, index, node)


def error_log(path: str, message: str) -> ParsedLog:
    """A source that failed: kept in the run's sources with its one-line error."""
    return ParsedLog(path, _info(path, None, None, None), error=message)


# ---------------------------------------------------------------- capture

def capture_logs(path: Path) -> list[ParsedLog]:
    """One ParsedLog per scraped process of a ``raw_prometheus.jsonl``, streamed; torn or
    unparsable rows are skipped (they count in ``lines``, not in ``candidates``)."""
    logs: dict[str, tuple[ParsedLog, StatsConverter]] = {}
    problems: list[str] = []
    try:
        size = inputs.stat(path).st_size
        with inputs.open_input(path) as fh:
            for item in iter_capture(fh):
                if isinstance(item, str):
                    problems.append(item)
                    continue
                key = item.worker_id or item.endpoint_url or "?"
                if key not in logs:
                    role, idx, node = worker_of(item)
                    src = ParsedLog(f"{path}#{key}", _info(str(path), role, idx, node))
                    logs[key] = (src, StatsConverter())
                src, conv = logs[key]
                src.counts.lines += 1
                try:
                    samples = parse_exposition(item.text, fields_only=True)
                except ExpositionError:
                    continue
                src.counts.candidates += 1
                src.size += len(item.text)
                src.records.extend(conv.add(item.ts, samples, item.line))
    except OSError as e:
        return [error_log(str(path), f"{path}: cannot read: {e.strerror or e}")]
    if not logs and size:
        why = problems[0] if problems else "no rows"
        return [error_log(str(path), f"{path}: not a Prometheus capture: {why}")]
    return [src for src, _ in logs.values()]


def exposition_log(path: Path) -> ParsedLog:
    """A saved ``/metrics`` response (or a pasted one): a single scrape, dated by the file's mtime."""
    try:
        text = inputs.read_text(path)
        mtime = datetime.fromtimestamp(inputs.stat(path).st_mtime, tz=UTC)
    except OSError as e:
        return error_log(str(path), f"{path}: cannot read: {e.strerror or e}")
    try:
        samples = parse_exposition(text, fields_only=True)
    except ExpositionError as e:
        return error_log(str(path), f"{path}: {e}")
    src = ParsedLog(str(path), _info(str(path), role_from_samples(samples) or "unknown", 0, None),
                    size=len(text))
    src.counts.lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    src.counts.candidates = 1
    src.records.extend(StatsConverter(baseline_rows=True).add(mtime, samples, 1))
    return src


# ---------------------------------------------------------------- live scrapes

class Target:
    """A ``/metrics`` URL, optionally named ``ROLE-wN=URL``."""

    def __init__(self, spec: str) -> None:
        spec = spec.strip()
        m = _NAMED.match(spec)
        self.url = m["url"] if m else spec
        self.role: str | None = m["role"] if m else None
        self.index: int | None = int(m["idx"]) if m else None
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PromSourceError(f"{spec}: not an http(s) URL (give URL or ROLE-wN=URL)")
        if self.role is not None and self.role not in (*ROLES, "unknown"):
            raise PromSourceError(f"{spec}: unknown role {self.role!r} (one of {', '.join(ROLES)})")


def fetch(url: str, *, timeout_s: float = TIMEOUT_S, max_bytes: int = MAX_BODY) -> str:
    """The body of one GET, within ``timeout_s`` overall and ``max_bytes``; PromSourceError otherwise."""
    req = urllib.request.Request(url, headers={"Accept": "text/plain;version=0.0.4;q=1,*/*;q=0.1",
                                               "User-Agent": f"diag/{__version__}"})
    deadline = time.monotonic() + timeout_s
    chunks: list[bytes] = []
    got = 0
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            while chunk := resp.read(1 << 16):
                got += len(chunk)
                if got > max_bytes:
                    raise PromSourceError(f"{url}: response larger than {max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise PromSourceError(f"{url}: no complete response within {timeout_s:,g} s")
                chunks.append(chunk)
    except urllib.error.HTTPError as e:
        raise PromSourceError(f"{url}: HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        why = getattr(e.reason, "strerror", None) or e.reason
        raise PromSourceError(f"{url}: cannot connect: {why}") from None
    except TimeoutError:
        raise PromSourceError(f"{url}: no response within {timeout_s:,g} s") from None
    except http.client.HTTPException as e:  # not HTTP at all (a garbage answer)
        raise PromSourceError(f"{url}: not an HTTP response ({type(e).__name__})") from None
    except OSError as e:
        raise PromSourceError(f"{url}: {e.strerror or e}") from None
    return b"".join(chunks).decode("utf-8", errors="replace")


class Scraper:
    """Scrapes its targets once per :meth:`poll`; counters become rates against the previous poll."""

    def __init__(self, specs: list[str], *, timeout_s: float = TIMEOUT_S, max_bytes: int = MAX_BODY) -> None:
        self.targets = [Target(s) for s in specs]
        self.timeout_s, self.max_bytes = timeout_s, max_bytes
        self.polls = 0
        self._conv = [StatsConverter() for _ in self.targets]
        self._logs: list[ParsedLog | None] = [None] * len(self.targets)
        self._errors: list[str | None] = [None] * len(self.targets)
        self._taken: dict[str, set[int]] = defaultdict(set)
        for t in self.targets:
            if t.role and t.index is not None:
                self._taken[t.role].add(t.index)

    def _log_for(self, i: int, samples: list[PromSample], with_prefill: bool) -> ParsedLog:
        log = self._logs[i]
        if log is None:
            t = self.targets[i]
            role = t.role or role_from_samples(samples, with_prefill) or "unknown"
            idx = t.index
            if idx is None:
                taken = self._taken[role]
                idx = next(n for n in range(len(taken) + 1) if n not in taken)
                taken.add(idx)
            log = self._logs[i] = ParsedLog(t.url, _info(t.url, role, idx, urlsplit(t.url).hostname))
        return log

    def poll(self) -> list[str]:
        """Scrape every target once; the errors of this poll (one line each)."""
        self.polls += 1
        errors = []
        got: list[tuple[int, str, list[PromSample]]] = []
        for i, t in enumerate(self.targets):
            try:
                text = fetch(t.url, timeout_s=self.timeout_s, max_bytes=self.max_bytes)
                samples = parse_exposition(text)
            except (PromSourceError, ExpositionError) as e:
                msg = str(e) if str(e).startswith(t.url) else f"{t.url}: {e}"
                self._errors[i] = msg
                errors.append(msg)
                continue
            self._errors[i] = None
            got.append((i, text, samples))
        # a bare URL's Dynamo ``backend`` is decode when the scrape set has a prefill endpoint
        with_prefill = any((self.targets[i].role or role_from_samples(samples)) == "prefill" for i, _, samples in got)
        with_prefill = with_prefill or any(log is not None and log.info.role == "prefill" for log in self._logs)
        for i, text, samples in got:
            log = self._log_for(i, samples, with_prefill)
            log.counts.lines += 1
            log.counts.candidates += 1
            log.size += len(text)
            log.records.extend(self._conv[i].add(datetime.now(tz=UTC), samples, self.polls))
        return errors

    def logs(self) -> list[ParsedLog]:
        """A ParsedLog per target: its samples so far, or its error when it never answered."""
        out = []
        for t, log, err in zip(self.targets, self._logs, self._errors, strict=True):
            out.append(log if log is not None else error_log(t.url, err or f"{t.url}: not scraped yet"))
        return out


# ---------------------------------------------------------------- Prometheus server

def _scrape_interval(prom: Any, start: datetime, end: datetime) -> float:
    """The scrape interval of the data queried: the median spacing of the stored samples of the last
    minutes of the range (what the series hold, whatever the configuration says now: a backfilled,
    federated or replayed TSDB), else the median of the active targets' configured interval, else 15 s.
    Also the probe of a server that does not answer: a refused connection or a hang raises here, within
    the probe's short timeout, before any long query."""
    import requests

    look = max(1, min(round((end - start).total_seconds()), SPACING_LOOKBACK_S))
    gaps: list[float] = []
    try:
        res = prom.custom_query(f"{_SAMPLE_METRIC}[{look}s]", params={"time": end.timestamp()})
        for series in res:
            ts = [float(t) for t, _ in series.get("values") or []]
            gaps += [b - a for a, b in pairwise(ts) if b > a]
    except (requests.ConnectionError, requests.Timeout):
        raise
    except Exception:  # a proxy that refuses range vectors: fall back to the configuration
        gaps = []
    if gaps:
        return max(0.001, round(sorted(gaps)[len(gaps) // 2], 3))
    try:
        active = prom.get_targets(state="active").get("activeTargets") or []
        seen = sorted(parse_duration(t["scrapeInterval"]) for t in active if t.get("scrapeInterval"))
    except (requests.ConnectionError, requests.Timeout):
        raise
    except Exception:  # an older server without the field, or a proxy that hides the API
        seen = []
    return seen[len(seen) // 2] if seen else DEFAULT_SCRAPE_INTERVAL_S


def _step_str(step: float) -> str:
    return f"{step:.3f}".rstrip("0").rstrip(".")


def _series_frames(field: str, result: list[dict[str, Any]]) -> list[tuple[dict[str, str], pl.DataFrame]]:
    out = []
    for series in result:
        values = series.get("values") or []
        if values:
            df = pl.DataFrame(values, schema={"ts": pl.Float64, "value": pl.Utf8}, orient="row")
            out.append((series.get("metric") or {}, df.with_columns(pl.col("value").cast(pl.Float64),
                                                                    field=pl.lit(field))))
    return out


def chunks(start: datetime, end: datetime, step: float,
           max_points: int = MAX_POINTS) -> list[tuple[datetime, datetime]]:
    """[start, end] cut into consecutive ranges of at most ``max_points`` steps each."""
    out = []
    width = timedelta(seconds=step * (max_points - 1))
    t = start
    while t <= end:
        out.append((t, min(end, t + width)))
        t = t + width + timedelta(seconds=step)
    return out


def query_server(url: str, start: datetime, end: datetime, *, step_s: float | None = None,
                 scrape_interval_s: float | None = None, timeout_s: float = 10.0) -> list[ParsedLog]:
    """Engine gauges, counter rates and latency quantiles per engine from a Prometheus server, one
    ParsedLog per (role, index, instance). Rates, sums by engine and ``histogram_quantile`` of the
    buckets' ``irate`` are computed by the server; the step is the scrape interval (coarser only past MAX_CHUNKS x 11,000 points) and each range query holds at most
    11,000 points per series (longer ranges are chunked); rates use a window of
    max(4 scrape intervals, step + 1 scrape interval). Raises PromSourceError (one line), also when
    the range holds no engine series."""
    import requests
    from prometheus_api_client import PrometheusApiClientException, PrometheusConnect

    if urlsplit(url).scheme not in ("http", "https"):
        raise PromSourceError(f"{url}: not an http(s) URL")
    if end <= start:
        raise PromSourceError(f"{url}: empty time range {start.isoformat()} .. {end.isoformat()}")
    from urllib3.util.retry import Retry

    once = Retry(total=0, raise_on_status=False)  # the client's default retries a dead server for ~13 s
    try:
        prom = PrometheusConnect(url=url, timeout=timeout_s, retry=once)
        probe = PrometheusConnect(url=url, timeout=TIMEOUT_S, retry=once)
        si = scrape_interval_s or _scrape_interval(probe, start, end)
        span = (end - start).total_seconds() + 2  # the client rounds start and end to seconds
        step = choose_step(span, step_s or si, MAX_POINTS * MAX_CHUNKS)
        window = max(4 * si, step + si)
        series = []
        for field, query in server_queries(window).items():
            for a, b in chunks(start, end, step):
                res = prom.custom_query_range(query, start_time=a, end_time=b, step=_step_str(step))
                series.extend(_series_frames(field, res))
    except requests.Timeout:
        raise PromSourceError(f"{url}: no response within {TIMEOUT_S:,g} s") from None
    except requests.ConnectionError as e:
        if "ReadTimeout" in str(e) or "timed out" in str(e):  # urllib3 wraps the read timeout of a hung server
            raise PromSourceError(f"{url}: no response within {TIMEOUT_S:,g} s") from None
        raise PromSourceError(f"{url}: cannot connect: {_why(e)}") from None
    except (PrometheusApiClientException, requests.RequestException, ValueError, KeyError) as e:
        raise PromSourceError(f"{url}: Prometheus query failed: {_why(e)}") from None
    if not series:
        raise PromSourceError(f"{url}: no {_either(METRIC_ENGINES)} series between {start.isoformat(timespec='seconds')} and "
                              f"{end.isoformat(timespec='seconds')}")
    return _server_logs(url, series, step)


def _why(e: Exception) -> str:
    """The reason inside a requests/urllib3 error chain ("Connection refused"), not its repr."""
    text = str(e)
    m = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if m:
        return m.group(1).strip()
    m = re.search(r"\(Caused by (\w+)", text)
    if m:
        return m.group(1)
    return text.splitlines()[0][:200] if text else type(e).__name__


def _server_logs(url: str, series: list[tuple[dict[str, str], pl.DataFrame]], step: float) -> list[ParsedLog]:
    keyed = []
    with_prefill = prefill_deployments(labels for labels, _ in series)
    for labels, df in series:
        role, idx = series_endpoint(labels, with_prefill)
        keyed.append((role, idx, labels.get("instance") or "", labels, df))
    # an index from the instance's position among its role's instances, when no label gives one
    instances: dict[str, list[str]] = defaultdict(list)
    for role, idx, inst, _, _ in keyed:
        if idx is None and inst not in instances[role]:
            instances[role].append(inst)
    frames = []
    for role, idx, inst, labels, df in keyed:
        if idx is None:
            idx = sorted(instances[role]).index(inst)
        frames.append(df.with_columns(role=pl.lit(role), index=pl.lit(idx, pl.Int64), instance=pl.lit(inst),
                                      engine=pl.lit(engine_label(labels), pl.Utf8)))
    if not frames:
        return []
    wide = (pl.concat(frames).pivot(on="field", index=["role", "index", "instance", "engine", "ts"],
                                    values="value", aggregate_function="first")
            .sort("role", "index", "instance", "ts", "engine"))
    logs = []
    for (role, idx, inst), part in wide.group_by(["role", "index", "instance"], maintain_order=True):
        path = f"{url}#{role}-w{idx}" + (f"@{inst}" if inst else "")
        node = urlsplit(f"//{inst}").hostname if inst else None
        log = ParsedLog(path, _info(url, str(role), int(idx), node))  # type: ignore[arg-type]
        for n, row in enumerate(part.iter_rows(named=True), 1):
            ts = datetime.fromtimestamp(row["ts"], tz=UTC)
            log.records.append(StatsConverter.from_rates(ts, n, row["engine"], row, step))
            log.records.extend(count_records(n, ts, {k: v * step for k in COUNTS if (v := row.get(k)) is not None and v == v}))
        log.counts.lines = log.counts.candidates = part.height
        logs.append(log)
    return logs


# ---------------------------------------------------------------- entry points

def extra_sources(scrape: list[str] | None, prom: str | None, *, start: datetime | None = None,
                  end: datetime | None = None, rounds: int = 2, interval_s: float = 1.0,
                  timeout_s: float = TIMEOUT_S) -> list[ParsedLog]:
    """One-shot sources: ``rounds`` scrapes ``interval_s`` apart of every URL (two, so counters have
    rates), and the Prometheus server at ``prom`` over [start, end] (default: the last 15 min).
    Raises PromSourceError only for a malformed URL; a failing source is a ParsedLog with ``error``."""
    logs: list[ParsedLog] = []
    if scrape:
        sc = Scraper(scrape, timeout_s=timeout_s)
        for i in range(max(1, rounds)):
            if i:
                time.sleep(interval_s)
            if len(sc.poll()) == len(sc.targets):
                break  # no target answered: a second round would only wait for them again
        logs.extend(sc.logs())
    if prom:
        end = end or datetime.now(tz=UTC)
        start = start or end - DEFAULT_WINDOW
        try:
            logs.extend(query_server(prom, start, end, timeout_s=max(timeout_s, 10.0)))
        except PromSourceError as e:
            logs.append(error_log(prom, str(e)))
    return logs


def _due(src: ScrapeSource | ServerSource) -> bool:
    """Whether a live source may poll again (at most every ``min_interval_s``); marks the poll."""
    now = time.monotonic()
    if src._last is not None and now - src._last < src.min_interval_s:
        return False
    src._last = now
    return True


class ScrapeSource(SourceBase):
    """``diag watch --scrape``: the follower's interface (``poll``/``logs``/``flush``) over a
    :class:`Scraper`; scrapes at most every ``min_interval_s``; ``errors`` holds the last poll's."""

    def __init__(self, specs: list[str], *, min_interval_s: float = 1.0,
                 timeout_s: float = TIMEOUT_S) -> None:
        self.scraper = Scraper(specs, timeout_s=timeout_s)
        self.label = "scraping " + " ".join(t.url for t in self.scraper.targets)
        self.min_interval_s = min_interval_s
        self.errors: list[str] = []
        self._last: float | None = None

    finished = False

    def poll(self) -> Changes:
        if not _due(self):
            return Changes([], [])
        before = {id(lg): len(lg.records) for lg in self.logs()}
        self.errors = self.scraper.poll()
        new: list[tuple[str, Record]] = []
        added = []
        for lg in self.logs():
            if id(lg) not in before:
                added.append(lg.path)
            new += [(lg.path, r) for r in lg.records[before.get(id(lg), 0):]]
        return Changes(new, added)

    def logs(self) -> list[ParsedLog]:
        return [lg for lg in self.scraper.logs() if not lg.error]

    def side(self) -> Side:
        return Side()


class ServerSource(SourceBase):
    """``diag watch --prom``: re-queries the server over the last ``window`` at most every
    ``min_interval_s`` and passes on the samples newer than those it already has."""

    def __init__(self, url: str, *, window: timedelta = DEFAULT_WINDOW, min_interval_s: float = 5.0,
                 timeout_s: float = 10.0) -> None:
        self.url, self.window, self.min_interval_s, self.timeout_s = url, window, min_interval_s, timeout_s
        self.label = f"Prometheus {url}"
        self.errors: list[str] = []
        self._logs: dict[str, ParsedLog] = {}
        self._last: float | None = None

    finished = False

    def poll(self) -> Changes:
        if not _due(self):
            return Changes([], [])
        end = datetime.now(tz=UTC)
        try:
            got = query_server(self.url, end - self.window, end, timeout_s=self.timeout_s)
            self.errors = []
        except PromSourceError as e:
            self.errors = [str(e)]
            return Changes([], [])
        new: list[tuple[str, Record]] = []
        added = []
        for lg in got:
            have = self._logs.get(lg.path)
            if have is None:
                self._logs[lg.path] = lg
                added.append(lg.path)
                new += [(lg.path, r) for r in lg.records]
                continue
            last = max((r.ts for r in have.records if r.ts), default=None)
            fresh = [r for r in lg.records if r.ts and (last is None or r.ts > last)]
            have.records.extend(fresh)
            have.counts.lines = have.counts.candidates = len(have.records)
            new += [(lg.path, r) for r in fresh]
        return Changes(new, added)

    def logs(self) -> list[ParsedLog]:
        return list(self._logs.values())

    def side(self) -> Side:
        return Side()


def watch_sources(scrape: list[str] | None = None,
                  prom: str | None = None) -> list[ScrapeSource | ServerSource]:
    """The live sources of ``diag watch``. Raises PromSourceError for a malformed URL."""
    out: list[ScrapeSource | ServerSource] = []
    if scrape:
        out.append(ScrapeSource(scrape))
    if prom:
        if urlsplit(prom).scheme not in ("http", "https"):
            raise PromSourceError(f"{prom}: not an http(s) URL")
        out.append(ServerSource(prom))
    return out
