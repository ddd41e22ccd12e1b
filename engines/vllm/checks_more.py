"""vLLM's config checks DIAG-C010..C016 (registered like :mod:`.checks`; C013, parallelism, is core's and
reads this engine's GPU maths through the adapter's ``engine_gpus``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from diag.parsers.recipe import Recipe, Role
from diag.rules.catalog import Rule
from diag.rules.finding import Finding
from diag.rules.knowledge import benchmark_kinds, fmt_version, gpu, parse_version
from diag.rules.present import number
from diag.rules.recipe_support import (
    as_int,
    check,
    env_mark,
    family_of,
    finding,
    flag_mark,
    pd_pair,
    set_env,
    set_flag,
    truthy,
    where,
)

from . import ADAPTER
from .checks_support import facts, transports, vllm
from .knowledge import behaviour_since


@check("recipe.language_model_only")
def language_model_only(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    fam = family_of(recipe)
    if not vllm(recipe) or fam is None or not fam.multimodal or recipe.benchmark.type not in benchmark_kinds().text_only:
        return
    for role in recipe.roles.values():
        if truthy(role.value("language-model-only")):
            continue
        limits = role.value("limit-mm-per-prompt")
        if isinstance(limits, dict) and limits and all(as_int(v) == 0 for v in limits.values()):
            continue
        yield finding(rule, recipe, f"{fam.name} is multimodal but {recipe.benchmark.type} sends text only: the "
                      "vision tower still loads and takes memory from the KV cache",
                      flag_mark(recipe, role, "language-model-only"), role=role,
                      fix=set_flag(role, "language-model-only", True))


@check("recipe.gdn_prefill_backend")
def gdn_prefill_backend(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    fam, g = family_of(recipe), gpu(recipe.gpu_type)
    if not vllm(recipe) or fam is None or not fam.gdn or g is None or not g.blackwell:
        return
    good = [str(x).lower() for x in rule.params.get("good", ["flashinfer", "auto"])]
    for role in recipe.roles.values():
        value = role.value("gdn-prefill-backend")
        if value is None or str(value).lower() in good:
            continue
        yield finding(rule, recipe, f"gdn-prefill-backend {value!r} on {recipe.gpu_type} (Blackwell): the "
                      "FlashInfer GDN prefill kernel is up to 5.9x faster there (1.13x prefill throughput)",
                      flag_mark(recipe, role, "gdn-prefill-backend"), role=role,
                      fix=set_flag(role, "gdn-prefill-backend", "flashinfer", " (or remove the flag)",
                                   accepts=tuple(good)))


@check("recipe.block_size_mismatch")
def block_size_mismatch(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    pair = pd_pair(recipe)
    if not vllm(recipe) or pair is None:
        return
    p, d = pair
    pb, db = as_int(p.value("block-size")), as_int(d.value("block-size"))
    if pb is not None and db is not None:
        if pb != db:
            yield finding(rule, recipe, f"block-size differs: prefill {number(pb)}, decode {number(db)}; NIXL copies KV blocks "
                          "one-to-one, so the transfer fails", flag_mark(recipe, d, "block-size"), role=d,
                          fix=set_flag(d, "block-size", pb, " (equal to prefill)"), prefill=pb, decode=db)
        return
    if pb is not None or db is not None:
        setter, unset = (p, d) if pb is not None else (d, p)
        value = pb if pb is not None else db
        yield finding(rule, recipe, f"{setter.name} sets block-size {number(value)} but {unset.name} leaves it to vLLM "
                      "(16, or computed for MLA/hybrid models): the sides may disagree and KV transfer fails",
                      flag_mark(recipe, unset, "block-size"), role=unset,
                      fix=set_flag(unset, "block-size", value, f" (equal to {setter.name})"))
        return
    fam = family_of(recipe)
    ptp, dtp = (as_int(r.value("tensor-parallel-size", 1)) or 1 for r in pair)
    if fam is not None and fam.hybrid and ptp != dtp and rule.params.get("hybrid_tp_mismatch", True):
        yield finding(rule, recipe, f"hybrid model with prefill TP{ptp} and decode TP{dtp} and no block-size: each "
                      "side computes its hybrid block size from its own shard, and they must be equal",
                      flag_mark(recipe, d, "block-size"), role=d,
                      fix=f"set the same `block-size` in `{where(p)}` and `{where(d)}`")


@check("recipe.unknown_engine_flag")
def unknown_engine_flag(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    classify = ADAPTER.classify_flag
    if not vllm(recipe) or classify is None:
        return
    b = facts(recipe)
    for role in recipe.roles.values():
        for flag in role.flags.values():
            st = classify(flag.key)
            if st.status == "known":
                continue
            if st.status == "unknown":
                hint = (f"rename `{flag.key}` to `{st.suggestion}` in `{where(role)}`" if st.suggestion
                        else f"remove `{flag.key}` from `{where(role)}` (see `vllm serve --help`)")
                near = f"; did you mean `{st.suggestion}`?" if st.suggestion else ""
                yield finding(rule, recipe, f"vLLM has no flag `{flag.key}`{near} (the worker would exit with "
                              "'unrecognized arguments')", flag.mark, role=role, fix=hint, flag=flag.key)
                continue
            rem = st.removed
            assert rem is not None
            gone = parse_version(rem.removed_in)
            newer = b.at_least(gone) if gone else None
            if newer is None and recipe.build.kind == "nightly" and b.identified:
                newer = True  # a known nightly is newer than every removal diag lists
            if newer is False:
                continue
            repl = f"replace `{flag.key}` with `{rem.replacement}`" if rem.replacement else f"remove `{flag.key}`"
            sev = rule.severity if newer else str(rule.params.get("unknown_build_severity", "warning"))
            tail = "" if newer else f"; {b.label} cannot be dated, so this fails unless it predates v{rem.removed_in}"
            yield finding(rule, recipe, f"`{flag.key}` was removed in vLLM v{rem.removed_in} ({rem.note}){tail}",
                          flag.mark, role=role, severity=sev, fix=f"{repl} in `{where(role)}`", flag=flag.key)


KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
POLICIES = ("fail", "recompute")


def _kv_problem(role: Role) -> str | None:
    kv = role.kv
    assert kv is not None
    if kv.error:
        return f"kv-transfer-config is not usable: {kv.error}"
    if not kv.connector:
        return "kv-transfer-config has no kv_connector"
    if kv.role is None:
        return "kv-transfer-config has a kv_connector but no kv_role (vLLM refuses to start)"
    if kv.role not in KV_ROLES:
        return f"kv_role {kv.role!r} is not one of {', '.join(KV_ROLES)}"
    if role.name == "prefill" and kv.role == "kv_consumer":
        return "prefill is a kv_consumer: it never sends KV, so decode waits forever"
    if role.name == "decode" and kv.role == "kv_producer":
        return "decode is a kv_producer: it never loads the prefilled KV"
    if kv.failure_policy is not None and kv.failure_policy not in POLICIES:
        return f"kv_load_failure_policy {kv.failure_policy!r} is not one of {', '.join(POLICIES)}"
    return None


def _kv_role_for(role: Role) -> str:
    return {"prefill": "kv_producer", "decode": "kv_consumer"}.get(role.name, "kv_both")


def _kv_example(role: Role) -> str:
    return f'{{"kv_connector": "NixlConnector", "kv_role": "{_kv_role_for(role)}"}}'


def _nixl_kv_both(role: Role) -> bool:
    return role.kv is not None and any(c in ("NixlConnector", "NixlPullConnector", "NixlPushConnector")
                                       and r == "kv_both" for c, r in role.kv.parts)


@check("recipe.kv_transfer_config")
def kv_transfer_config(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    if not vllm(recipe):
        return
    pair = pd_pair(recipe)
    deprecated = facts(recipe).has_behaviour("kv_both_nixl_deprecated")
    for role in recipe.roles.values():
        if role.kv is None:
            if pair is not None:
                cmark = recipe.mark(*recipe.connector_path) if recipe.connector_path else None
                yield finding(rule, recipe, "disaggregated vLLM without a KV connector: no kv-transfer-config and "
                              "`connector: null`, so prefilled KV never reaches decode",
                              flag_mark(recipe, role, "kv-transfer-config") if role.flags else cmark, role=role,
                              fix=f"set `kv-transfer-config: '{_kv_example(role)}'` in `{where(role)}` "
                                  "(or `connector: nixl`)")
            continue
        if pair is None and role.kv.error is None:
            continue
        problem = _kv_problem(role)
        if problem:
            yield finding(rule, recipe, problem, role.kv.mark, role=role,
                          fix=f"set `kv-transfer-config: '{_kv_example(role)}'` in `{where(role)}`")
        elif (role.kv.source == "flag" and _nixl_kv_both(role) and deprecated
              and rule.params.get("report_kv_both", True)):
            yield finding(rule, recipe, f"kv_role kv_both with NixlConnector is deprecated since "
                          f"{fmt_version(behaviour_since('kv_both_nixl_deprecated'))} ({facts(recipe).label} has the "
                          "deprecation); NIXL P/D roles are explicit", role.kv.mark, role=role, severity="info",
                          fix=f'use `"kv_role": "{_kv_role_for(role)}"` in the kv-transfer-config of `{where(role)}`')
    if pair is not None and all(r.kv and r.kv.connector for r in pair):
        p, d = pair
        assert p.kv and d.kv
        if _kv_problem(p) or _kv_problem(d):
            return
        pt, dt = transports(p), transports(d)
        if pt and dt and not (pt & dt):
            yield finding(rule, recipe, f"prefill transfers KV with {', '.join(sorted(pt))} but decode with "
                          f"{', '.join(sorted(dt))}: the two sides share no transfer connector", d.kv.mark, role=d,
                          fix=f"use kv_connector {sorted(pt)[0]!r} on both sides (directly or inside MultiConnector)")
        elif not pt and not dt and p.kv.connector != d.kv.connector:
            yield finding(rule, recipe, f"prefill uses {p.kv.connector} but decode uses {d.kv.connector}: the "
                          "two sides cannot talk", d.kv.mark, role=d,
                          fix=f"use kv_connector {p.kv.connector!r} on both sides")


def _norm(value: Any, default: str) -> str:
    return default if value is None else str(value).strip().lower()


@check("recipe.role_env_mismatch")
def role_env_mismatch(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    pair = pd_pair(recipe)
    if not vllm(recipe) or pair is None:
        return
    p, d = pair
    fam = family_of(recipe)
    env_defaults: dict[str, str] = {k: str(v) for k, v in rule.params.get("env", {}).items()}
    for name, default in env_defaults.items():
        if name == "VLLM_SSM_CONV_STATE_LAYOUT" and fam is not None and fam.hybrid:
            continue  # DIAG-C001 owns this variable for hybrid models
        pv, dv = _norm(p.env_value(name), default.lower()), _norm(d.env_value(name), default.lower())
        if pv != dv:
            shown = p.env_value(name) or default
            yield finding(rule, recipe, f"{name} differs: prefill {p.env_value(name)!r}, decode {d.env_value(name)!r};"
                          " both sides must lay out the transferred state the same way",
                          env_mark(recipe, d, name), role=d, fix=set_env(d, {name: (shown,)}, " (equal to prefill)"), variable=name)
    for key, default in rule.params.get("flags", {}).items():
        pv, dv = _norm(p.value(key), str(default)), _norm(d.value(key), str(default))
        if pv != dv:
            shown = p.value(key) if p.value(key) is not None else default
            yield finding(rule, recipe, f"{key} differs: prefill {p.value(key)!r}, decode {d.value(key)!r}; the KV/"
                          "state bytes are copied as-is, so both sides must use the same", flag_mark(recipe, d, key),
                          role=d, fix=set_flag(d, key, shown, " (equal to prefill)"),
                          flag=key)
