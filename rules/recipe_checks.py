"""Config checks (DIAG-C001..C016): pure functions from the recipe model to findings.

Each check is registered under the ``template`` name its catalog entry (``rules/catalog/config.toml``)
uses; thresholds come from the rule's ``params`` so ``diag.toml`` can override them. vLLM engine
flag checks only look at ``backend: vllm`` recipes; the P/D checks only at disaggregated ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from diag.parsers.recipe import Recipe

from . import recipe_checks_more  # noqa: F401  (registers C009..C016)
from .catalog import Rule, by_scope
from .finding import Finding
from .knowledge import (
    behaviour_since,
    benchmark_kinds,
    default_max_num_batched_tokens,
    fixes,
    fmt_version,
    gpu,
)
from .recipe_support import (
    CHECKS,
    as_int,
    check,
    env_mark,
    facts,
    family_of,
    finding,
    flag_mark,
    kv_consumer,
    pd_pair,
    roles,
    set_env_hint,
    set_flag_hint,
    truthy,
    vllm,
    where,
)

SSM_VAR = "VLLM_SSM_CONV_STATE_LAYOUT"


def run_checks(recipe: Recipe, rules: Mapping[str, Rule] | Iterable[Rule] | None = None) -> list[Finding]:
    """Every config finding for one job. ``rules`` defaults to the catalog's recipe-scope rules."""
    if rules is None:
        selected = by_scope("recipe")
    elif isinstance(rules, Mapping):
        selected = list(rules.values())
    else:
        selected = list(rules)
    out: list[Finding] = []
    for rule in selected:
        fn = CHECKS.get(rule.template)
        if fn is not None:
            out.extend(fn(recipe, rule))
    return out


@check("recipe.ssm_conv_layout")
def ssm_conv_layout(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    pair, fam = pd_pair(recipe), family_of(recipe)
    if not vllm(recipe) or pair is None or fam is None or not fam.hybrid:
        return
    required = str(rule.params.get("value", "DS"))
    for role in pair:
        other = pair[1] if role is pair[0] else pair[0]
        have = role.env_value(SSM_VAR)
        if (have or "").upper() == required:
            continue
        state = f"is {have!r}" if have is not None else "is not set (vLLM defaults to SD)"
        peer = " (the other side has it)" if (other.env_value(SSM_VAR) or "").upper() == required else ""
        yield finding(rule, recipe, f"hybrid model ({fam.name}) served disaggregated but {SSM_VAR} {state}"
                      f"{peer}; NIXL conv-state transfer needs {SSM_VAR}={required} on both prefill and "
                      "decode", env_mark(recipe, role, SSM_VAR), role=role,
                      fix=set_env_hint(role, SSM_VAR, required), model_family=fam.name)


def _async_on(recipe: Recipe, value: object) -> tuple[bool | None, str]:
    """Whether async scheduling is on for a role, and why diag thinks so."""
    if value is not None:
        on = truthy(value)
        return on, "set in the recipe"
    default_on = facts(recipe).at_least(behaviour_since("async_scheduling_default_on"))
    if default_on:
        return True, f"on by default since {fmt_version(behaviour_since('async_scheduling_default_on'))}"
    return None, "default unknown for this build"


@check("recipe.async_scheduling_race")
def async_scheduling_race(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    pair, fam = pd_pair(recipe), family_of(recipe)
    if not vllm(recipe) or pair is None:
        return
    hybrid = bool(fam and fam.hybrid)
    needed = [str(x) for x in rule.params.get("hybrid_fixes" if hybrid else "fixes", ["45357"])]
    build = facts(recipe)
    for role in pair:
        if not kv_consumer(role):
            continue
        on, why = _async_on(recipe, role.value("async-scheduling"))
        if not on:
            continue
        have = {fx: build.has(fx) for fx in needed}
        missing = [fx for fx, ok in have.items() if ok is False]
        unknown = [fx for fx, ok in have.items() if ok is None]
        if not missing and not unknown:
            continue
        latest = max(fixes()[fx].first_release for fx in needed)
        fix = (f"run a build with {', '.join('#' + f for f in needed)} (vLLM >= {fmt_version(latest)}) or "
               + set_flag_hint(role, "no-async-scheduling", True))
        kv_role = role.kv.role if role.kv else "?"
        if missing:
            firsts = ", ".join(f"#{fx} (first in {fmt_version(fixes()[fx].first_release)})" for fx in missing)
            sev = str(rule.params.get("hybrid_severity" if hybrid else "severity_missing",
                                      "error" if hybrid else "warning"))
            what = ("received KV can be zeroed or freed while an in-flight step uses it (GSM8K accuracy "
                    "collapsed to zero in the Qwen3.5 runs)" if hybrid else
                    "KV blocks can be freed while an in-flight step still uses them")
            msg = (f"async scheduling ({why}) with a KV consumer ({kv_role}) on {build.label}, which lacks "
                   f"{firsts}: {what}")
        else:
            sev = str(rule.params.get("unknown_severity", "warning"))
            msg = (f"async scheduling ({why}) with a KV consumer ({kv_role}) on {build.label}: cannot verify "
                   f"it has {', '.join('#' + f for f in unknown)}; add the build to rules/data/versions.toml")
        yield finding(rule, recipe, msg, flag_mark(recipe, role, "async-scheduling"), role=role, fix=fix,
                      severity=sev, missing=missing, unknown=unknown, build=build.label)


@check("recipe.mamba_cache_dtype")
def mamba_cache_dtype(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    pair, fam = pd_pair(recipe), family_of(recipe)
    if not vllm(recipe) or pair is None or fam is None or not fam.bf16_ssm:
        return
    decode = pair[1]
    want = str(rule.params.get("dtype", "bfloat16"))
    have = decode.value("mamba-ssm-cache-dtype")
    if str(have).lower() == want:
        return
    state = f"is {have!r}" if have is not None else "is unset (float32 from the model config)"
    yield finding(rule, recipe, f"{fam.name} decode keeps the SSM state in higher precision: "
                  f"mamba-ssm-cache-dtype {state}; {want} leaves more memory for KV cache (more concurrent "
                  "requests per decode rank)", flag_mark(recipe, decode, "mamba-ssm-cache-dtype"),
                  role=decode, fix=set_flag_hint(decode, "mamba-ssm-cache-dtype", want,
                                                 " (and the same on prefill: they must match)"))


@check("recipe.prefill_batched_tokens")
def prefill_batched_tokens(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    pair, isl = pd_pair(recipe), recipe.benchmark.isl
    if not vllm(recipe) or pair is None or not isl:
        return
    prefill = pair[0]
    explicit = as_int(prefill.value("max-num-batched-tokens"))
    value = explicit if explicit is not None else default_max_num_batched_tokens(gpu(recipe.gpu_type))
    if value is None:
        return
    ratio = float(rule.params.get("ratio", 2.0))
    target = math.ceil(ratio * isl)
    origin = "" if explicit is not None else f" (vLLM's default on {recipe.gpu_type})"
    if value < isl:
        sev = str(rule.params.get("below_isl_severity", "warning"))
        msg = (f"max-num-batched-tokens {value}{origin} is below the ISL {isl}: every prompt needs several "
               "chunked-prefill steps, TTFT grows and prefill starves decode")
    elif value < target:
        sev = str(rule.params.get("below_ratio_severity", "info"))
        msg = (f"max-num-batched-tokens {value}{origin} is below {ratio:g}x ISL ({target}): a prefill step "
               "holds fewer than two prompts (2xISL was worth ~8% TPS/GPU in the Qwen3.5 runs)")
    else:
        return
    yield finding(rule, recipe, msg, flag_mark(recipe, prefill, "max-num-batched-tokens"), role=prefill,
                  severity=sev, fix=set_flag_hint(prefill, "max-num-batched-tokens", target), isl=isl, value=value)


@check("recipe.cudagraph_capture_size")
def cudagraph_capture_size(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    top = max(recipe.benchmark.concurrencies, default=0)
    if not vllm(recipe) or not top:
        return
    default = int(rule.params.get("default_capture_size", 512))
    headroom = int(rule.params.get("headroom", 128))
    for role in roles(recipe, "decode", "agg"):
        dp = as_int(role.value("data-parallel-size", 1)) or 1
        workers = role.workers or 1
        per_rank = math.ceil(top / (dp * workers))
        seqs = as_int(role.value("max-num-seqs"))
        if seqs is not None:
            per_rank = min(per_rank, seqs)
        explicit = as_int(role.value("max-cudagraph-capture-size"))
        cap = explicit if explicit is not None else default
        if cap >= per_rank:
            continue
        want = int(math.ceil((per_rank + headroom) / 16) * 16)
        origin = "" if explicit is not None else " (the default)"
        yield finding(rule, recipe, f"max-cudagraph-capture-size {cap}{origin} is below the per-rank batch "
                      f"{per_rank} (top concurrency {top} / (DP {dp} x {workers} worker(s))): larger decode "
                      "batches run without CUDA graphs", flag_mark(recipe, role, "max-cudagraph-capture-size"),
                      role=role, fix=set_flag_hint(role, "max-cudagraph-capture-size", want,
                                                   f" (C/DP + {headroom})"), per_rank=per_rank, capture=cap)


@check("recipe.stats_logging")
def stats_logging(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    if not vllm(recipe):
        return
    missed = str(rule.params.get("missed", "the 10 s `Engine NNN: Avg prompt throughput ... Running ... Waiting "
                                 "... GPU KV cache usage ... Prefix cache hit rate` lines"))
    backend = recipe.data.get("backend") if isinstance(recipe.data.get("backend"), dict) else {}
    per_gpu = str(backend.get("dp_launch_mode", "")).lower() == "per_gpu"
    older = facts(recipe).at_least(behaviour_since("api_server_count_defaults_to_dp")) is False
    for role in recipe.roles.values():
        if truthy(role.value("disable-log-stats")):
            yield finding(rule, recipe, f"disable-log-stats turns off vLLM's stats logger; diag tail will miss "
                          f"{missed}", flag_mark(recipe, role, "disable-log-stats"), role=role,
                          fix=f"remove `disable-log-stats` from `{where(role)}`")
            continue
        dp = as_int(role.value("data-parallel-size", 1)) or 1
        asc = as_int(role.value("api-server-count"))
        if dp <= 1 or asc == 1 or per_gpu or (asc is None and older):
            continue
        count = asc if asc is not None else dp
        yield finding(rule, recipe, f"DP{dp} endpoint with {count} API servers"
                      f"{'' if asc is not None else ' (vLLM defaults to the DP size)'}: with more than one, "
                      f"vLLM disables its stats logging, so diag tail will miss {missed} (queue depth, KV "
                      "usage, throughput per engine)", flag_mark(recipe, role, "api-server-count",
                                                                 "data-parallel-size"),
                      role=role, fix=set_flag_hint(role, "api-server-count", 1), dp=dp)


@check("recipe.prefix_cache_random")
def prefix_cache_random(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    kinds, bench = benchmark_kinds(), recipe.benchmark
    if not vllm(recipe) or bench.type not in kinds.random_data or (bench.dataset or "") not in kinds.random_datasets:
        return
    for role in roles(recipe, "prefill", "agg"):
        value = role.value("enable-prefix-caching")
        if value is not None and truthy(value) is False:
            continue
        state = "enabled" if value is not None else "on by default"
        yield finding(rule, recipe, f"prefix caching is {state} but {bench.type} sends random prompts: no hits, "
                      "only hashing/eviction overhead and a misleading hit-rate", flag_mark(
                          recipe, role, "enable-prefix-caching"), role=role,
                      fix=set_flag_hint(role, "no-enable-prefix-caching", True))


@check("recipe.stream_interval")
def stream_interval(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    bench = recipe.benchmark
    if not vllm(recipe) or bench.type not in benchmark_kinds().latency:
        return
    limit = int(rule.params.get("max_interval", 1))
    for role in roles(recipe, "decode", "agg"):
        value = as_int(role.value("stream-interval"))
        if value is None or value <= limit:
            continue
        yield finding(rule, recipe, f"stream-interval {value} buffers tokens in chunks of {value}: the ITL/TPOT "
                      f"that {bench.type} reports are distorted (fine for throughput, wrong for latency)",
                      flag_mark(recipe, role, "stream-interval"), role=role,
                      fix=set_flag_hint(role, "stream-interval", 1, " when the sweep is about latency"))


__all__ = ["SSM_VAR", "env_mark", "run_checks"]
