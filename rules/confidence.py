"""How sure a verdict can be of its evidence: the confidence its class's signals give (rules.verdict) is
lowered where the window's evidence is thin, incomplete or in conflict, and each cut says why.

* thin: fewer stats samples per engine in the steady window than ``min_window_samples`` (a minute of
  vLLM's 10 s stats lines) lowers it a level;
* incomplete: every input the class tests read (each side's waiting, decode's KV and running) that no
  sample in the window knows (shown ``-``) lowers it a level (prefill's waiting not where its engine logs
  its steps: how busy they keep it is the evidence then, DIAG-B001);
* in conflict: the useful tok/s the engines measured and the benchmark's result at the point differ by
  more than ``throughput_conflict_frac``.

Classes that are facts (invalid, startup-stuck) or claim nothing (unknown) keep theirs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diag.parsers.records import BenchResult

from .present import duration, number

LEVELS = ("low", "medium", "high")
UNWEIGHED = frozenset({"invalid", "startup-stuck", "unknown"})   # facts, and the class that claims nothing
# the inputs a load class's tests read: (side, figure, label)
INPUTS = (("prefill", "waiting", "waiting"), ("decode", "waiting", "waiting"), ("decode", "kv", "KV"),
          ("decode", "running", "running"))


def _per_engine(side: Mapping[str, Any]) -> float | None:
    return side["samples"] / side["engines"] if side.get("engines") else None


def thin(fig: Mapping[str, Any], p: Mapping[str, float], scraped: bool = False) -> str | None:
    """The reason to lower it when the side with the fewest samples per engine in the window has too few
    (``scraped``: every stats sample of the run is a Prometheus scrape, whose interval sets how many)."""
    per = [n for side in ("prefill", "decode") if (n := _per_engine(fig.get(side) or {})) is not None]
    if not per or min(per) >= p["min_window_samples"]:
        return None
    n = min(per)
    span = f" in the {duration(fig['window_s'])} steady window" if fig.get("window_s") else " in the window"
    return (f"{number(n, 0 if n == int(n) else 1)} {'Prometheus ' if scraped else ''}sample{'' if n == 1 else 's'}"
            f" per engine{span}")


def unknown_inputs(fig: Mapping[str, Any]) -> list[str]:
    """The inputs no sample in the window knows (``prefill waiting``, ``decode KV``); the prompt side's
    only for a P/D run (an aggregated one has none)."""
    role = fig.get("decode_role") or "decode"
    out = []
    for side, key, label in INPUTS:
        if side == "prefill" and (role != "decode" or "busy" in (fig.get(side) or {})):
            continue   # no prompt side; or one that logs its steps, whose saturation stands for its queue
        if ((fig.get(side) or {}).get(key) or {}).get("mean") is None:
            out.append(f"{role if side == 'decode' else side} {label}")
    return out


def conflict(fig: Mapping[str, Any], bench: BenchResult | None, p: Mapping[str, float]) -> str | None:
    """The engines' useful tok/s against the benchmark's at the point, when they differ too much."""
    engines = (fig.get("useful") or {}).get("tps")
    measured = bench.total_token_throughput if bench is not None and bench.complete else None
    if engines is None or not measured or abs(engines - measured) <= p["throughput_conflict_frac"] * measured:
        return None
    return (f"the engines' {number(engines)} tok/s and the benchmark's {number(measured)} differ by "
            f"{100 * abs(engines - measured) / measured:,.0f} %")


def weighed(cls: str, confidence: str, fig: Mapping[str, Any], bench: BenchResult | None,
            p: Mapping[str, float], scraped: bool = False) -> tuple[str, tuple[str, ...]]:
    """(confidence, the reasons it was lowered) of a verdict of class ``cls`` over figures ``fig``
    (``scraped``: the run's stats are Prometheus scrapes only)."""
    if cls in UNWEIGHED:
        return confidence, ()
    sparse = thin(fig, p, scraped)
    drop, reasons = (1, [sparse]) if sparse else (0, [])
    if missing := unknown_inputs(fig):
        drop += len(missing)
        reasons.append(f"{', '.join(missing)} unknown")
    if (clash := conflict(fig, bench, p)) is not None:
        drop += 1
        reasons.append(clash)
    return LEVELS[max(0, LEVELS.index(confidence) - drop)], tuple(reasons)


__all__ = ["LEVELS", "UNWEIGHED", "conflict", "thin", "unknown_inputs", "weighed"]
