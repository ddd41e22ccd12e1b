"""The latency target ``diag report`` judges sweep points by, and their goodput.

A target limits latency quantiles of the benchmark: ``ttft=2s,tpot=50ms`` (the median), ``ttft.p90=3s``.
It comes from ``--sla``, else from the recipe's goodput thresholds (srt-slurm ``benchmark.ttft_threshold_ms``
/ ``itl_threshold_ms``, what AIPerf computes its goodput with), else :data:`DEFAULT_SLA`. A point meets it
when every limited quantile its result reports is within the limit (the result's own quantiles are over
all its requests). **Goodput** is the rate of the requests that meet every limit: counted request by
request when the result JSON holds one entry per prompt (sa-bench ``ttfts``, ``itls``, ``output_lens``,
``errors``), else judged by the point's quantiles, all of its requests or none (``basis``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diag.rules.present import milliseconds

if TYPE_CHECKING:  # annotations only: `diag runs` and `diag --help` import this module and not the parsers
    from diag.parsers.recipe import Recipe
    from diag.parsers.records import BenchResult

METRICS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2el": "E2EL"}
DEFAULT_SLA = "ttft=2s,tpot=50ms"
_ITEM = re.compile(r"^(?P<metric>[a-z0-9]+)(?:\.(?P<stat>[a-z0-9.]+))?=(?P<value>.*)$")
_DURATION = re.compile(r"^(?P<n>\d+(?:\.\d+)?|\.\d+)\s*(?P<unit>ms|s)$")
_STAT = re.compile(r"^(?:median|mean|p(?:[1-9]\d?(?:\.\d+)?))$")
BASES = ("per-request", "quantile")


class SlaError(ValueError):
    """A latency target that cannot be read (one line)."""


@dataclass(frozen=True)
class Limit:
    """One limit: a latency quantile of the benchmark (``median`` TTFT) at most ``ms``."""

    metric: str   # ttft | tpot | itl | e2el
    stat: str     # median | mean | p90 | p99 ...
    ms: float

    @property
    def key(self) -> str:
        """The result's field: ``median_ttft_ms``, ``p90_ttft_ms``."""
        return f"{self.stat}_{self.metric}_ms"

    @property
    def label(self) -> str:
        return f"{self.stat} {METRICS[self.metric]}"

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "stat": self.stat, "ms": self.ms}


@dataclass(frozen=True)
class Sla:
    """The latency target of a report and where it came from (``--sla``, a recipe, the default)."""

    limits: tuple[Limit, ...]
    source: str

    @property
    def text(self) -> str:
        """``median TTFT <= 2 s, median TPOT <= 50 ms``."""
        return ", ".join(f"{lim.label} <= {milliseconds(lim.ms)}" for lim in self.limits)

    def to_dict(self) -> dict[str, Any]:
        return {"limits": [lim.to_dict() for lim in self.limits], "source": self.source, "text": self.text}


def duration_ms(text: str) -> float:
    """``2s``, ``1.5s``, ``50ms`` in milliseconds; a unit is required."""
    m = _DURATION.match(text.strip())
    if not m:
        raise SlaError(f"{text!r} is not a duration with a unit (2s, 1.5s, 50ms)")
    value = float(m["n"]) * (1000.0 if m["unit"] == "s" else 1.0)
    if value <= 0:
        raise SlaError(f"{text!r} must be greater than 0")
    return value


def parse_sla(text: str, source: str = "--sla") -> Sla:
    """``ttft=2s,tpot=50ms,ttft.p90=3s``: metrics ttft, tpot, itl, e2el; the quantile after a dot
    (median when omitted; ``p50`` is the median)."""
    limits: dict[tuple[str, str], Limit] = {}
    for item in (part.strip() for part in text.split(",")):
        m = _ITEM.match(item.lower())
        if not m:
            raise SlaError(f"{item!r} is not METRIC=DURATION (e.g. ttft=2s,tpot=50ms)")
        metric, stat = m["metric"], "median" if m["stat"] in (None, "p50") else m["stat"]
        if metric not in METRICS:
            raise SlaError(f"unknown metric {metric!r} in {item!r} (one of {', '.join(METRICS)})")
        if not _STAT.match(stat):
            raise SlaError(f"unknown quantile {stat!r} in {item!r} (median, mean, p90, p99 ...)")
        if (metric, stat) in limits:
            raise SlaError(f"{stat} {metric} is limited twice")
        limits[metric, stat] = Limit(metric, stat, duration_ms(m["value"]))
    return Sla(tuple(limits.values()), source)


def recipe_sla(recipe: Recipe | None) -> Sla | None:
    """The goodput thresholds a recipe carries (``benchmark.ttft_threshold_ms``, ``itl_threshold_ms``)."""
    if recipe is None:
        return None
    bench = recipe.benchmark
    limits = [Limit(metric, "median", float(ms)) for metric, ms in (("ttft", bench.ttft_threshold_ms),
                                                                    ("itl", bench.itl_threshold_ms)) if ms]
    return Sla(tuple(limits), f"recipe {recipe.path}") if limits else None


def resolve_sla(option: Sla | None, recipes: Sequence[Recipe | None]) -> Sla:
    """``--sla`` when given, else the thresholds of the first recipe that has any, else the default."""
    return first_sla(option, [recipe_sla(r) for r in recipes])


def first_sla(option: Sla | None, recipe_slas: Sequence[Sla | None]) -> Sla:
    """``--sla`` when given, else the first of the recipes' thresholds, else the default."""
    if option is not None:
        return option
    return next((s for s in recipe_slas if s is not None), None) or parse_sla(DEFAULT_SLA, "default")


# ------------------------------------------------------------------ per-request results
@dataclass(frozen=True)
class Request:
    """One request of a result file: succeeded, its tokens (input + output) and latencies in ms."""

    ok: bool
    tokens: int
    ms: dict[str, float]


_BRACKET = re.compile(r"[\[\]]")
_INNER = re.compile(r"\[([^\[\]]*)\]")


def _array_at(text: str, key: str) -> tuple[int, int] | None:
    """Where the JSON array of ``key`` starts (its ``[``) and ends (after its ``]``)."""
    m = re.search(rf'"{key}"\s*:\s*\[', text)
    if not m:
        return None
    start = m.end() - 1
    if key != "itls":
        return start, json.JSONDecoder().raw_decode(text, start)[1]
    depth = 0   # lists of numbers: no string can hide a bracket
    for b in _BRACKET.finditer(text, start):
        depth += 1 if b.group() == "[" else -1
        if depth == 0:
            return start, b.end()
    raise ValueError("unterminated itls")


def read_requests(path: str | Path, num_prompts: int | None) -> tuple[Request, ...] | None:
    """The per-request latencies of an sa-bench result JSON, or None when it does not hold one entry
    per prompt (arrays absent, or cut to a few entries). ``itls`` is summed list by list, never held."""
    from diag.parsers import inputs

    try:
        text = inputs.read_text(path)
        spans = {key: _array_at(text, key) for key in ("ttfts", "output_lens", "input_lens", "errors", "itls")}
        if not num_prompts or any(span is None for span in spans.values()):
            return None
        flat = {key: json.loads(text[s[0]:s[1]]) for key, s in spans.items() if s and key != "itls"}
        start, end = spans["itls"]  # type: ignore[misc]
        gaps = [(sum(values), len(values)) for values in
                ([float(x) for x in body.split(",") if x.strip()] for body in _INNER.findall(text, start + 1, end))]
    except (OSError, ValueError, TypeError):
        return None
    n = len(flat["ttfts"])
    if n != num_prompts or any(len(v) != n for v in (*flat.values(), gaps)):
        return None
    out = []
    for ttft, osl, isl, error, (decode_s, chunks) in zip(flat["ttfts"], flat["output_lens"], flat["input_lens"],
                                                         flat["errors"], gaps, strict=True):
        ok = not error and bool(osl)
        ttft_ms, decode_ms = 1000.0 * float(ttft or 0.0), 1000.0 * decode_s
        out.append(Request(ok, int(isl or 0) + int(osl or 0), {   # vLLM's goodput: TPOT 0 for one token
            "ttft": ttft_ms, "tpot": decode_ms / (osl - 1) if ok and osl > 1 else 0.0,
            "itl": decode_ms / chunks if chunks else 0.0, "e2el": ttft_ms + decode_ms}))
    return tuple(out)


# ------------------------------------------------------------------ judging a point
@dataclass(frozen=True)
class Judgement:
    """A sweep point against the target: whether it meets it, the limits it misses (with the value),
    and its goodput (req/s and total tok/s of the requests that meet every limit)."""

    meets: bool | None                    # None: within every limit it reports, but one is not reported
    values: dict[str, float | None]       # limit label -> the point's value (ms)
    misses: tuple[Limit, ...]
    unreported: tuple[Limit, ...]         # limited quantiles the result does not report
    basis: str                            # per-request | quantile
    requests_judged: int | None
    good_requests: int | None
    goodput_req_s: float | None
    goodput_tok_s: float | None

    @property
    def summary(self) -> str:
        """``within the target``, ``misses median TTFT (38.8 s)``, ``does not report p90 TTFT``."""
        if self.misses:
            return "misses " + " and ".join(f"{lim.label} ({milliseconds(self.values[lim.label] or 0.0)})"
                                            for lim in self.misses)
        if self.unreported:
            return "does not report " + ", ".join(lim.label for lim in self.unreported)
        return "within the target"

    def to_dict(self) -> dict[str, Any]:
        return {"meets": self.meets, "summary": self.summary, "values_ms": self.values,
                "misses": [{**lim.to_dict(), "value_ms": self.values[lim.label]} for lim in self.misses],
                "unreported": [lim.to_dict() for lim in self.unreported], "goodput_basis": self.basis,
                "requests_judged": self.requests_judged, "good_requests": self.good_requests,
                "goodput_req_s": self.goodput_req_s, "goodput_tok_s": self.goodput_tok_s}


def judge(bench: BenchResult, sla: Sla, requests: Sequence[Request] | None = None) -> Judgement:
    """``bench`` against ``sla``; goodput per request when ``requests`` (one per prompt) are given."""
    values = {lim.label: bench.get(lim.key) for lim in sla.limits}
    unreported = tuple(lim for lim in sla.limits if values[lim.label] is None)
    misses = tuple(lim for lim in sla.limits if (values[lim.label] or 0.0) > lim.ms)
    meets = False if misses else None if unreported else True
    duration = bench.duration_s
    if requests and duration:
        good = [r for r in requests if r.ok and all(r.ms[lim.metric] <= lim.ms for lim in sla.limits)]
        return Judgement(meets, values, misses, unreported, "per-request", len(requests), len(good),
                         round(len(good) / duration, 3), round(sum(r.tokens for r in good) / duration, 1))
    share = 1.0 if meets else 0.0
    rate, tok = bench.request_throughput, bench.total_token_throughput
    return Judgement(meets, values, misses, unreported, "quantile", None, None,
                     None if rate is None or meets is None else round(share * rate, 3),
                     None if tok is None or meets is None else round(share * tok, 1))
