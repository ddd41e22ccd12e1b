"""Config checks (DIAG-C001..C017): pure functions from the recipe model to findings.

Each check is registered under the ``template`` name its catalog entry uses; thresholds come from the
rule's ``params`` so ``diag.toml`` can override them. The checks every engine shares are core's
(stream-interval here; log env, parallelism and the schema in :mod:`.recipe_checks_more`); an engine's
own checks live in its adapter (``checks_module``, with their entries in its ``rule_catalogs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from diag.parsers import engines
from diag.parsers.recipe import Recipe

from . import recipe_checks_more  # noqa: F401  (registers C009, C013, C017)
from .catalog import Rule, by_scope
from .finding import Finding
from .knowledge import benchmark_kinds
from .present import number
from .recipe_support import CHECKS, as_int, check, finding, roles, set_flag


def run_checks(recipe: Recipe, rules: Mapping[str, Rule] | Iterable[Rule] | None = None) -> list[Finding]:
    """Every config finding for one job. ``rules`` defaults to the catalog's recipe-scope rules."""
    if rules is None:
        selected = by_scope("recipe")
    elif isinstance(rules, Mapping):
        selected = list(rules.values())
    else:
        selected = list(rules)
    engines.load_checks()
    out: list[Finding] = []
    for rule in selected:
        fn = CHECKS.get(rule.template)
        if fn is not None:
            out.extend(fn(recipe, rule))
    return out


def stream_chunk_flag(backend: str) -> str | None:
    """The engine's flag for the ``stream_chunk`` knob (tokens buffered per streamed chunk)."""
    adapter = engines.get(backend)
    return adapter.knob("stream_chunk") if adapter is not None else None


@check("recipe.stream_interval")
def stream_interval(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    bench = recipe.benchmark
    reports_itl = bench.type in benchmark_kinds().latency or bench.itl_threshold_ms is not None
    knob = stream_chunk_flag(recipe.backend)
    if knob is None or not reports_itl:
        return
    what = f"{bench.type}" + (f" (ITL goodput threshold {bench.itl_threshold_ms:,g} ms)"
                              if bench.itl_threshold_ms is not None else "")
    limit = int(rule.params.get("max_interval", 1))
    for role in roles(recipe, "decode", "agg"):
        flag = role.flag(knob)
        value = as_int(flag.value) if flag is not None else None
        if flag is None or value is None or value <= limit:
            continue
        yield finding(rule, recipe, f"{flag.key} {number(value)} buffers tokens in chunks of {number(value)}: the ITL/TPOT "
                      f"that {what} reports are distorted (fine for throughput, wrong for latency)",
                      flag.mark, role=role,
                      fix=set_flag(role, flag.key, limit, " when the sweep is about latency", relation="<="))


__all__ = ["run_checks"]
