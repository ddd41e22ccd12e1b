"""The verdict catalog (``rules/catalog/verdicts.toml``): the closed vocabulary of classes, the thresholds
they are judged with and the next experiment per class, with the run's figures filled in and checked
against what ran (:mod:`rules.advice`)."""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from diag.parsers import engines
from diag.parsers.engine import EngineAdapter, render_all

from .advice import Note, RunConfig, changes_of, check, holds, notes_text, run_context
from .effective import what_ran
from .present import number, prose
from .proposal import Proposal, catalog_errors
from .runmodel import Run

DECODING = ("decode", "agg", "unknown")   # the side that generates: decode, else an aggregated endpoint
OUTCOMES = ("invalid", "startup-stuck", "bottleneck", "healthy", "unknown")   # what a class means for the run
SIDES = ("prefill", "decode", "kv-transfer")   # what a bottleneck class names as the limit


def _r(x: Any, nd: int = 1) -> float | None:
    return None if x is None else round(float(x), nd)




# ------------------------------------------------------------------ catalog
@dataclass(frozen=True)
class VerdictClass:
    name: str
    summary: str
    outcome: str                  # OUTCOMES: the run's exit status follows it (rules/outcome.py)
    side: str | None = None       # SIDES: the limit a bottleneck class names
    findings: tuple[str, ...] = ()
    limiters: tuple[str, ...] = ()
    examples: tuple[dict[str, Any], ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class Experiment:
    id: str
    cls: str
    action: str
    expect: str
    limiter: str | None = None
    when: str | None = None
    config: str | None = None     # the config rule whose fix this is (left out when that finding is linked)
    set: Mapping[str, Any] | None = field(default=None, compare=False)   # the setting it changes (rules.advice)
    basis: str = ""               # what the value stands for (``2 x ISL``), said when it is in place


@dataclass(frozen=True)
class VerdictCatalog:
    params: Mapping[str, float]
    classes: tuple[VerdictClass, ...]
    experiments: tuple[Experiment, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.classes)

    def get(self, name: str) -> VerdictClass:
        return next(c for c in self.classes if c.name == name)


def verdict_catalog() -> VerdictCatalog:
    """The verdict vocabulary, its thresholds and experiments (``rules/catalog/verdicts.toml``), its texts
    naming knobs as the engine being judged spells them (:func:`diag.parsers.engines.using`)."""
    return engine_verdict_catalog(engines.current().name)


@cache
def engine_verdict_catalog(engine: str) -> VerdictCatalog:
    """:func:`verdict_catalog` with the knob placeholders as ``engine`` spells them."""
    text = resources.files("diag.rules").joinpath("catalog", "verdicts.toml").read_text(encoding="utf-8")
    data = render_all(tomllib.loads(text), engines.get(engine))
    classes = tuple(VerdictClass(c["name"], c["summary"].strip(), c.get("outcome", ""), c.get("side"),
                                 tuple(c.get("findings", ())), tuple(c.get("limiters", ())),
                                 tuple(c.get("examples", ())))
                    for c in data["class"])
    names = {c.name for c in classes}
    for c in classes:
        if c.outcome not in OUTCOMES or c.side not in (None, *SIDES):
            raise ValueError(f"verdicts.toml: class {c.name} has outcome {c.outcome!r} (one of {', '.join(OUTCOMES)}) "
                             f"and side {c.side!r} (none, or one of {', '.join(SIDES)})")
    experiments = tuple(Experiment(e["id"], e["class"], e["action"].strip(), e["expect"].strip(),
                                   e.get("limiter"), e.get("when"), e.get("config"), e.get("set"), e.get("basis", ""))
                        for e in data.get("experiment", ()))
    unknown = sorted({e.cls for e in experiments} - names)
    if unknown:
        raise ValueError(f"verdicts.toml: experiments for unknown classes {unknown}")
    for e in experiments:
        if errors := catalog_errors(e.set, e.when):
            raise ValueError(f"verdicts.toml: experiment {e.id}: {'; '.join(errors)}")
    return VerdictCatalog(dict(data["params"]), classes, experiments)


def _v(d: Mapping[str, Any], *keys: str) -> float | None:
    for k in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(k)  # type: ignore[assignment]
    return d if isinstance(d, (int, float)) else None




# ------------------------------------------------------------------ capacity and experiments
def _flag(ran: Mapping[str, Any], role: str, name: str | None) -> Any:
    """The value of a flag that ran on a role (None: not shown, or the engine has no such knob)."""
    r = ran.get(role)
    return r.flags[name][0] if r is not None and name is not None and name in r.flags else None


def _num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _share(ran: Mapping[str, Any], role: str, engine: EngineAdapter, knob: str) -> int:
    """How many engines of ``role`` share one value of ``knob`` (the engine splits some budgets between ranks)."""
    r = ran.get(role)
    if engine.knob_share is None or r is None:
        return 1
    return engine.knob_share(knob, {k: v[0] for k, v in r.flags.items()})


def _per_engine(ran: Mapping[str, Any], role: str, engine: EngineAdapter, knob: str) -> float | None:
    """A knob's value that ran on ``role``, per engine."""
    v = _num(_flag(ran, role, engine.knob_key(knob)))
    return None if v is None else v / _share(ran, role, engine, knob)


def token_budget(run: Run, role: str) -> float | None:
    """The prompt tokens one engine of ``role`` may compute in a step (knob ``prefill_token_budget``): what
    ran, else the recipe's (an engine whose flags run from a config file shows none on its command line)."""
    engine = run.engine
    got = _per_engine(what_ran(run), role, engine, "prefill_token_budget")
    key = engine.knob_key("prefill_token_budget")
    spec = run.recipe.roles.get(role) if run.recipe is not None else None
    return got if got is not None or spec is None or key is None else _num(spec.value(key))


def capacity(run: Run) -> dict[str, Any]:
    """What the sides can hold, from the startup facts and the flags that ran."""
    ran = what_ran(run)
    dec = next((eps for role in DECODING if (eps := [ep for ep in run.endpoints.values() if ep.role == role])), [])
    per_engine = []
    for ep in dec:
        mc = ep.facts.get("max_concurrency")
        c = _num(mc.get("concurrency")) if isinstance(mc, dict) else _num(mc)
        if c:
            per_engine += [c] * max(1, len(ep.engines))
    dec_role = dec[0].role if dec else "decode"
    isl, osl = run.isl_osl()
    dp = max((len(ep.engines) for ep in dec), default=0)
    engine = run.engine
    return {
        "isl": isl, "osl": osl,
        "prefill_workers": sum(1 for ep in run.endpoints.values() if ep.role == "prefill"),
        "decode_engines": run.engine_count(dec_role), "decode_dp": dp or None,
        "decode_capacity": _r(sum(per_engine), 0) if per_engine else None,
        "decode_capacity_per_engine": _r(min(per_engine), 2) if per_engine else None,
        "batch_cap": _per_engine(ran, dec_role, engine, "running_cap"),
        "batch_knob": engine.knob_text("running_cap"),   # how the texts name the batch cap
        "capture_size": _num(_flag(ran, dec_role, engine.knob_key("cuda_graph_max_batch"))),
        "prefill_mbt": _num(_flag(ran, "prefill", engine.knob_key("prefill_token_budget"))),
        "prefill_share": _share(ran, "prefill", engine, "prefill_token_budget"),
    }


def _context(v_cls: str, fig: Mapping[str, Any], cap: Mapping[str, Any], concurrency: int | None,
             cause: str, stage: str | None) -> dict[str, Any]:
    ctx: dict[str, Any] = {}

    def put(k: str, x: Any) -> None:
        if x is not None:
            ctx[k] = x

    isl, n = cap.get("isl"), cap.get("prefill_workers") or 0
    put("isl", isl)
    share = int(cap.get("prefill_share") or 1)   # ranks one prefill budget is split between
    put("two_isl", 2 * isl * share if isl else None)
    put("per_rank", f" per rank x {share} ranks" if share > 1 else "")
    put("prefill_mbt", int(cap["prefill_mbt"]) if cap.get("prefill_mbt") else None)
    if n:
        put("prefill_workers", n)
        put("prefill_workers_next", n + 1)
        put("prefill_gain_pct", round(100.0 / n))
    pt = _v(fig, "prefill", "prompt_tps")
    if pt and n:
        put("prefill_tps", round(pt))
        put("prefill_tps_next", round(pt * (n + 1) / n))
    put("decode_kv", number(_v(fig, "decode", "kv", "mean"), 1) if _v(fig, "decode", "kv", "mean") is not None else None)
    put("decode_capacity", round(cap["decode_capacity"]) if cap.get("decode_capacity") else None)
    put("concurrency", concurrency or None)
    if concurrency and cap.get("decode_dp"):
        put("decode_batch", -(-concurrency // int(cap["decode_dp"])))
    put("capture_size", int(cap["capture_size"]) if cap.get("capture_size") else None)
    put("batch_cap", int(cap["batch_cap"]) if cap.get("batch_cap") else None)
    put("decode_waiting", number(_v(fig, "decode", "waiting", "mean"), 1) if _v(fig, "decode", "waiting", "mean") else None)
    util = fig.get("decode_util")
    put("decode_util_pct", round(util * 100) if util is not None else None)
    put("cause", cause or None)
    put("stage", stage)
    return ctx


@dataclass(frozen=True)
class Advised:
    """A verdict's experiments (the first is "the next experiment") and the changes its class would
    propose that are already in place."""

    experiments: list[dict[str, str]]
    in_place: list[str]


def experiments(cls: str, limiter: str | None, run: Run, fig: Mapping[str, Any], cap: Mapping[str, Any],
                concurrency: int | None, cause: str = "", stage: str | None = None,
                linked: frozenset[str] = frozenset(), config: RunConfig | None = None) -> Advised:
    """The catalog's experiments for a class, in order, with the run's figures filled in in the number
    style, each checked against what ran (``config``): one whose change is in place is left out and
    said, one the recipe asks for while something else ran is rewritten. An experiment whose figures
    the run lacks is left out, and so is one whose config rule is ``linked`` already."""
    ctx = run_context(run) | _context(cls, fig, cap, concurrency, cause, stage)
    config = config if config is not None else RunConfig.of_run(run)
    out: list[dict[str, str]] = []
    notes: list[Note] = []
    for e in verdict_catalog().experiments:
        if e.cls != cls or (e.limiter is not None and e.limiter != limiter) or e.config in linked \
                or not holds(e.when, run, concurrency):
            continue
        try:
            proposal = Proposal(changes=changes_of(e.set, ctx, None), basis=e.basis, id=e.id)
        except KeyError:
            continue
        result = check(proposal, config)
        notes += result.in_place
        if not result.stands:
            continue
        try:
            action, expect = prose(e.action, ctx), prose(e.expect, ctx)
        except KeyError:
            continue
        worded = dataclasses.replace(result, proposal=dataclasses.replace(result.proposal, text=action))
        out.append({"id": e.id, "action": worded.text, "expect": expect})
    return Advised(out, notes_text(notes))


__all__ = ["DECODING", "OUTCOMES", "SIDES", "Experiment", "VerdictCatalog", "VerdictClass", "capacity", "experiments", "verdict_catalog"]
