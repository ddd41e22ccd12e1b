"""The config checks every engine shares, beside C008 (:mod:`.recipe_checks`): the recipe's schema (C017),
the log-noise environment (C009) and the GPUs the parallel sizes need (C013). An engine's own GPU maths
comes from its adapter (``engine_gpus``)."""

from __future__ import annotations

from collections.abc import Iterator

from diag.parsers import engines
from diag.parsers import recipe_schema as recipe_schema_module
from diag.parsers.recipe import Recipe, Role

from .catalog import Rule
from .finding import Finding
from .present import number
from .recipe_support import (
    at_most,
    check,
    dynamo,
    env_mark,
    finding,
    flag_mark,
    set_env,
    where,
)


@check("recipe.schema")
def recipe_schema(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    for v in recipe_schema_module.validate(recipe.data):
        yield finding(rule, recipe, v.message, v.mark, severity=at_most(v.severity, rule.severity),
                      fix=f"fix `{'.'.join(map(str, v.path))}` (see `diag explain {rule.code}`)",
                      key=".".join(map(str, v.path)))


@check("recipe.log_noise_env")
def log_noise_env(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    backends = set(rule.params.get("backends", ["vllm", "sglang", "trtllm"]))
    if recipe.backend not in backends:
        return
    wanted: dict[str, list[str]] = {}
    if dynamo(recipe):  # DYN_* only reach workers that run under Dynamo
        wanted |= {k: [str(x) for x in v] for k, v in rule.params.get("env", {}).items()}
    # the engine's own logging variables: params `<backend>_env`
    wanted |= {k: [str(x) for x in v] for k, v in rule.params.get(f"{recipe.backend}_env", {}).items()}
    for role in recipe.roles.values():
        missing = [name for name, ok in wanted.items()
                   if (role.env_value(name) or "").lower() not in [x.lower() for x in ok]]
        if "VLLM_LOGGING_COLOR" in missing and (role.env_value("NO_COLOR") or "0") != "0":
            missing.remove("VLLM_LOGGING_COLOR")
        if not missing:
            continue
        noise = ("Dynamo INFO noise and ANSI colour codes" if any(n.startswith("DYN_") for n in missing)
                 else "ANSI colour codes")
        yield finding(rule, recipe, f"{', '.join(missing)} not set as recommended: worker logs keep {noise} "
                      "(slower, harder to read, torn records)",
                      env_mark(recipe, role, missing[0]), role=role,
                      fix=set_env(role, {n: tuple(wanted[n]) for n in missing}), missing=missing)


def _engine_gpus(recipe: Recipe, role: Role) -> tuple[int | None, str, str | None]:
    """GPUs one worker's engine needs, the product spelled out, and why ranks that leave some of the
    worker's GPUs idle may be refused (None: the engine just idles them): the adapter's ``engine_gpus``."""
    adapter = engines.get(recipe.backend)
    if adapter is not None and adapter.engine_gpus is not None:
        return adapter.engine_gpus(role)
    return None, "", None


def _tensor_parallel() -> tuple[str, ...]:
    """The tensor-parallel flag as each engine spells it (a C013 finding points at it)."""
    return tuple(k for a in engines.adapters() if (k := a.knob("tensor_parallel")))


def _gpu_key(recipe: Recipe, role: Role) -> str:
    return f"roles.{role.name}.gpus" if recipe.layout == "schema2" else f"resources.gpus_per_{role.name}"


@check("recipe.parallelism_gpus")
def parallelism_gpus(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    gpn = recipe.gpus_per_node
    for role in recipe.roles.values():
        if not role.flags:
            continue
        need, spelled, underfill = _engine_gpus(recipe, role)
        have = role.gpus
        gmark = role.resource_marks.get("gpus") or role.resource_marks.get("nodes")
        if have is not None and have <= 0:
            yield finding(rule, recipe, f"{number(role.workers)} worker(s) on {number(role.nodes)} node(s) of {number(gpn)} GPUs leaves "
                          "no GPU per worker", gmark, role=role,
                          fix=f"raise the {role.name} node count or lower its worker count")
            continue
        tmark = flag_mark(recipe, role, *_tensor_parallel())
        if need is not None and have is not None and need > have:
            yield finding(rule, recipe, f"engine needs {spelled} = {number(need)} GPUs per worker but the worker gets "
                          f"{number(have)}", tmark, role=role,
                          fix=f"make the parallel sizes in `{where(role)}` multiply to {have}, or set "
                              f"`{_gpu_key(recipe, role)}: {need}`", need=need, have=have)
        elif need is not None and have is not None and need < have and underfill:
            # an engine whose launcher may expect the ranks to fill the worker, which diag cannot confirm
            # from the recipe alone
            yield finding(rule, recipe, f"engine uses {spelled} = {number(need)} of the worker's {number(have)} GPUs: "
                          f"{underfill}", tmark, role=role,
                          severity=at_most(rule.severity, "warning"),
                          fix=f"make the parallel sizes in `{where(role)}` multiply to {have}, or set "
                              f"`{_gpu_key(recipe, role)}: {need}`", need=need, have=have)
        if have is not None and ((have > gpn and have % gpn) or (have < gpn and gpn % have)):
            yield finding(rule, recipe, f"{number(have)} GPUs per worker do not tile {number(gpn)}-GPU nodes: workers would "
                          "straddle nodes", gmark, role=role,
                          fix=f"use a divisor or multiple of {gpn} for `{_gpu_key(recipe, role)}`")
    yield from _allocation(recipe, rule)


def _allocation(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    gpn = recipe.gpus_per_node
    hosts = [r for r in recipe.roles.values() if not r.colocated]
    guests = [r for r in recipe.roles.values() if r.colocated]
    for role in hosts:
        if not (role.nodes and role.workers and role.gpus):
            continue
        group = [role, *guests] if role is hosts[0] else [role]
        need = sum((r.workers or 0) * (r.gpus or 0) for r in group)
        avail = role.nodes * gpn
        if need > avail:
            names = " + ".join(f"{r.workers}x{r.gpus} ({r.name})" for r in group)
            yield finding(rule, recipe, f"{names} = {number(need)} GPUs but {role.name} has {number(role.nodes)} node(s) x {number(gpn)} "
                          f"= {number(avail)}", role.resource_marks.get("nodes") or role.resource_marks.get("gpus"),
                          role=role, fix=f"raise the {role.name} node count to {number(-(-need // gpn))} or use fewer "
                                         "workers/GPUs", need=need, avail=avail)
