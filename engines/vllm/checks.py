"""vLLM's config checks DIAG-C001..C007 (C010..C016 in :mod:`.checks_more`): pure functions from the recipe
model to findings, registered with :func:`diag.rules.recipe_support.check` under the ``template`` names of
their catalog entries (``catalog/config.toml``). They look at ``backend: vllm`` recipes only; thresholds
come from the rule's ``params`` so ``diag.toml`` can override them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

from diag.parsers.recipe import Recipe, Role
from diag.rules.catalog import Rule
from diag.rules.finding import Finding
from diag.rules.knowledge import benchmark_kinds, fmt_version, gpu
from diag.rules.present import number
from diag.rules.recipe_support import (
    as_int,
    at_most,
    check,
    env_mark,
    family_of,
    finding,
    flag_mark,
    pd_pair,
    roles,
    set_env,
    set_flag,
    truthy,
    where,
)

from . import checks_more  # noqa: F401  (registers C010..C016)
from .checks_support import facts, kv_consumer, vllm
from .knowledge import behaviour_since, default_max_num_batched_tokens, fixes

SSM_VAR = "VLLM_SSM_CONV_STATE_LAYOUT"


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
                      fix=set_env(role, {SSM_VAR: (required,)}), model_family=fam.name)


def _async_on(recipe: Recipe, value: object) -> tuple[bool | None, str, bool]:
    """Whether async scheduling is on for a role, why diag thinks so, and whether that is an assumption."""
    if value is not None:
        return truthy(value), "set in the recipe", False
    since = fmt_version(behaviour_since("async_scheduling_default_on"))
    default_on = facts(recipe).has_behaviour("async_scheduling_default_on")
    if default_on:
        return True, f"on by default since {since}", False
    if default_on is False:
        return False, f"off by default before {since}", False
    return True, f"assumed on: the default since {since}, and the build cannot be dated", True


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
        on, why, assumed = _async_on(recipe, role.value("async-scheduling"))
        if not on:
            continue
        have = {fx: build.has(fx) for fx in needed}
        missing = [fx for fx, ok in have.items() if ok is False]
        unknown = [fx for fx, ok in have.items() if ok is None]
        if not missing and not unknown:
            continue
        latest = max(fixes()[fx].first_release for fx in needed)
        fix = set_flag(role, "no-async-scheduling", True,
                       lead=f"run a build with {', '.join('#' + f for f in needed)} (vLLM >= {fmt_version(latest)}) or ")
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
                   f"it has {', '.join('#' + f for f in unknown)} (a build diag does not know: pin a release it knows, "
                   f"vLLM >= v0.26.0, to have it checked)")
        if assumed:
            sev = at_most(sev, "warning")
        yield finding(rule, recipe, msg, flag_mark(recipe, role, "async-scheduling"), role=role, fix=fix,
                      severity=sev, missing=[f"#{fx}" for fx in missing], unknown=[f"#{fx}" for fx in unknown],
                      build=build.label)   # the PRs as GitHub names them


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
                  role=decode, fix=set_flag(decode, "mamba-ssm-cache-dtype", want,
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
        msg = (f"max-num-batched-tokens {number(value)}{origin} is below the ISL {number(isl)}: every prompt needs several "
               "chunked-prefill steps, TTFT grows and prefill starves decode")
    elif value < target:
        sev = str(rule.params.get("below_ratio_severity", "info"))
        msg = (f"max-num-batched-tokens {number(value)}{origin} is below {ratio:,g}x ISL ({number(target)}): a prefill step "
               "holds fewer than two prompts (2xISL was worth ~8% TPS/GPU in the Qwen3.5 runs)")
    else:
        return
    yield finding(rule, recipe, msg, flag_mark(recipe, prefill, "max-num-batched-tokens"), role=prefill,
                  severity=sev, fix=set_flag(prefill, "max-num-batched-tokens", target, relation=">="), isl=isl, value=value)


def _compilation_config(role: Role) -> dict[str, object]:
    """The role's compilation-config as a mapping (YAML mapping or JSON string; {} when unusable)."""
    raw = role.value("compilation-config")
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            return {}
        return data if isinstance(data, dict) else {}
    return {}


def capture_size(role: Role) -> tuple[int | None, str]:
    """The largest CUDA-graph batch size a role sets, and where it is set (None: vLLM's default).

    Sources, as vLLM resolves them: ``max-cudagraph-capture-size``, ``cudagraph-capture-sizes`` (its
    largest entry), and the same two inside ``compilation-config``.
    """
    cc = _compilation_config(role)
    for (max_key, max_value), (sizes_key, sizes) in (
            (("max-cudagraph-capture-size", role.value("max-cudagraph-capture-size")),
             ("cudagraph-capture-sizes", role.value("cudagraph-capture-sizes"))),
            (("compilation-config.max_cudagraph_capture_size", cc.get("max_cudagraph_capture_size")),
             ("compilation-config.cudagraph_capture_sizes", cc.get("cudagraph_capture_sizes")))):
        explicit = as_int(max_value)
        if explicit is not None:
            return explicit, max_key
        if isinstance(sizes, list) and sizes and all(as_int(x) is not None for x in sizes):
            return max(as_int(x) or 0 for x in sizes), sizes_key
    return None, ""


@check("recipe.cudagraph_capture_size")
def cudagraph_capture_size(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    top = max(recipe.benchmark.concurrencies, default=0)
    if not vllm(recipe) or not top:
        return
    default = int(rule.params.get("default_capture_size", 512))
    headroom = int(rule.params.get("headroom", 128))
    for role in roles(recipe, "decode", "agg"):
        if truthy(role.value("enforce-eager")):
            continue  # no CUDA graphs at all: a deliberate choice, not a capture-size gap
        dp = as_int(role.value("data-parallel-size", 1)) or 1
        workers = role.workers or 1
        per_rank = math.ceil(top / (dp * workers))
        seqs = as_int(role.value("max-num-seqs"))
        if seqs is not None:
            per_rank = min(per_rank, seqs)
        explicit, source = capture_size(role)
        cap = explicit if explicit is not None else default
        if cap >= per_rank:
            continue
        want = int(math.ceil((per_rank + headroom) / 16) * 16)
        origin = f" (from {source})" if explicit is not None else " (the default)"
        yield finding(rule, recipe, f"max CUDA-graph capture size {number(cap)}{origin} is below the per-rank batch "
                      f"{number(per_rank)} (top concurrency {number(top)} / (DP {dp} x {workers} worker(s))): larger decode "
                      "batches run without CUDA graphs", flag_mark(recipe, role, "max-cudagraph-capture-size",
                                                                    "compilation-config"),
                      role=role, fix=set_flag(role, "max-cudagraph-capture-size", want,
                                              f" (C/DP + {number(headroom)})", relation=">="), per_rank=per_rank, capture=cap)


@check("recipe.stats_logging")
def stats_logging(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    if not vllm(recipe):
        return
    missed = str(rule.params.get("missed", "the 10 s `Engine NNN: Avg prompt throughput ... Running ... Waiting "
                                 "... GPU KV cache usage ... Prefix cache hit rate` lines"))
    backend = recipe.data.get("backend") if isinstance(recipe.data.get("backend"), dict) else {}
    per_gpu = str(backend.get("dp_launch_mode", "")).lower() == "per_gpu"
    newer = facts(recipe).has_behaviour("api_server_count_defaults_to_dp")
    since = fmt_version(behaviour_since("api_server_count_defaults_to_dp"))
    for role in recipe.roles.values():
        if truthy(role.value("disable-log-stats")):
            yield finding(rule, recipe, f"disable-log-stats turns off vLLM's stats logger; diag tail will miss "
                          f"{missed}", flag_mark(recipe, role, "disable-log-stats"), role=role,
                          fix=f"remove `disable-log-stats` from `{where(role)}`")
            continue
        dp = as_int(role.value("data-parallel-size", 1)) or 1
        asc = as_int(role.value("api-server-count"))
        if dp <= 1 or asc == 1 or per_gpu or (asc is None and newer is False):
            continue
        count = asc if asc is not None else dp
        origin = ("" if asc is not None else f" (vLLM defaults to the DP size since {since})" if newer
                  else f" (assuming vLLM >= {since}, where it defaults to the DP size; {facts(recipe).label} "
                       "cannot be dated)")
        yield finding(rule, recipe, f"DP{dp} endpoint with {number(count)} API servers{origin}: with more than one, "
                      f"vLLM disables its stats logging, so diag tail will miss {missed} (queue depth, KV "
                      "usage, throughput per engine)", flag_mark(recipe, role, "api-server-count",
                                                                 "data-parallel-size"),
                      role=role, fix=set_flag(role, "api-server-count", 1), dp=dp)


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
                      fix=set_flag(role, "no-enable-prefix-caching", True))
