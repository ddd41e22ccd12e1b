"""TensorRT-LLM's recipe checks (DIAG-C025..C029, catalog ``catalog/config.toml``): certain-only, like the others.

Each reads ``backend.trtllm_config.<role>`` as srtctl writes it (the LLM API's fields, snake_case; srtctl dumps
the role's mapping to the YAML ``--extra-engine-args`` reads). Every rule's ``why`` cites the TensorRT-LLM source
it rests on; a finding that rests on an assumption is at most a warning.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from diag.parsers.recipe import Recipe, Role
from diag.rules.catalog import Rule
from diag.rules.finding import Finding
from diag.rules.present import number
from diag.rules.recipe_support import (
    as_int,
    at_most,
    check,
    finding,
    flag_mark,
    pd_pair,
    roles,
    set_flag,
    truthy,
)

from .recipe import attention_dp, nested, size

ITER_LOG = "print_iter_log"


def trtllm(recipe: Recipe) -> bool:
    return recipe.backend == "trtllm"


@check("recipe.trtllm_iter_log")
def iter_log(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    """print_iter_log left at its default (False) or set false on a role: its engines print no iteration lines."""
    if not trtllm(recipe):
        return
    for role in roles(recipe, "prefill", "decode", "agg"):
        value = role.value(ITER_LOG)
        if truthy(value):
            continue
        said = "left at its default, false" if value is None else f"set to {str(value).lower()}"
        yield finding(rule, recipe, f"{ITER_LOG} {said}: TensorRT-LLM prints no iteration lines, so diag has no "
                      "per-step figures (batches, KV usage, step times) for this role", flag_mark(recipe, role, ITER_LOG),
                      role=role, fix=set_flag(role, ITER_LOG, True), value=value)


@check("recipe.trtllm_prefill_tokens")
def prefill_tokens(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    """A prefill step's token budget below one prompt: refused without chunked prefill, split with it."""
    isl = recipe.benchmark.isl
    if not trtllm(recipe) or not isl:
        return
    for role in roles(recipe, "prefill", "agg"):
        budget, cp = as_int(role.value("max_num_tokens")), size(role, "context_parallel_size") or 1
        prompt = math.ceil(isl / max(cp, 1))  # a context-parallel rank holds prompt_len / cp_size
        if budget is None or budget <= 0 or budget >= prompt:
            continue
        split = f" ({number(isl)} over context_parallel_size {number(cp)})" if cp > 1 else ""
        fix = set_flag(role, "max_num_tokens", prompt, relation=">=")
        if truthy(role.value("enable_chunked_prefill")):
            yield finding(rule, recipe, f"max_num_tokens {number(budget)} is below the ISL {number(prompt)}{split}: with "
                          f"chunked prefill every prompt takes {math.ceil(prompt / budget)} prefill steps, TTFT grows",
                          flag_mark(recipe, role, "max_num_tokens"), role=role, fix=fix,
                          severity=at_most(rule.severity, "warning"), isl=isl, max_num_tokens=budget)
            continue
        yield finding(rule, recipe, f"max_num_tokens {number(budget)} is below the ISL {number(prompt)}{split} and "
                      "enable_chunked_prefill is off: TensorRT-LLM refuses every such prompt ('The sum of prompt length "
                      "(...), query length (...) should not exceed max_num_tokens (...)')",
                      flag_mark(recipe, role, "max_num_tokens"), role=role, fix=fix, isl=isl, max_num_tokens=budget)


def _graph_cap(recipe: Recipe, role: Role) -> tuple[int | None, str]:
    """The largest batch the role captures as a CUDA graph (None: unset, or graphs off), and its key."""
    cfg = role.value("cuda_graph_config")
    if not isinstance(cfg, dict):
        return None, ""  # absent: the release's default; null: CUDA graphs off
    sizes = [as_int(v) for v in cfg.get("batch_sizes") or []]
    if sizes and all(v is not None for v in sizes):
        return max(v for v in sizes if v is not None), "cuda_graph_config.batch_sizes"
    cap = as_int(cfg.get("max_batch_size"))
    # neither given: max_batch_size 128 (llm_args.py BaseCudaGraphConfig.validate_base_cuda_graph_config)
    return (cap or 128), "cuda_graph_config.max_batch_size"


@check("recipe.trtllm_decode_batch")
def decode_batch(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    """max_batch_size and the CUDA-graph batch cap against the requests the top concurrency puts on a rank."""
    top = max(recipe.benchmark.concurrencies, default=0)
    if not trtllm(recipe) or not top:
        return
    for role in roles(recipe, "decode", "agg"):
        ranks = attention_dp(role) * (role.workers or 1)
        per_rank = math.ceil(top / ranks)
        over = f"top concurrency {number(top)} over {number(ranks)} attention-DP ranks x workers"
        batch = as_int(role.value("max_batch_size"))
        # disaggregated, part of the requests in flight are in prefill or KV transfer: a margin above
        # max_batch_size is deliberate there (TensorRT-LLM's recipes keep 1.05-3x), so only aggregated is judged
        if role.name == "agg" and batch is not None and 0 < batch < per_rank:
            yield finding(rule, recipe, f"max_batch_size {number(batch)} is below the {number(per_rank)} requests per rank "
                          f"({over}): the excess waits in the engine's queue and inflates TTFT",
                          flag_mark(recipe, role, "max_batch_size"), role=role,
                          fix=set_flag(role, "max_batch_size", per_rank, relation=">="),
                          per_rank=per_rank, max_batch_size=batch)
        cap, key = _graph_cap(recipe, role)
        reach = min(per_rank, batch) if batch is not None and batch > 0 else per_rank
        if cap is not None and cap < reach:
            _, mark = nested(recipe, role, "cuda_graph_config", key.rpartition(".")[2])
            yield finding(rule, recipe, f"{key} caps CUDA graphs at batch {number(cap)} but a rank's batch can reach "
                          f"{number(reach)} ({over}, within max_batch_size): larger batches run without CUDA graphs",
                          mark, role=role, fix=set_flag(role, key, reach, relation=">="), per_rank=reach, capture=cap)


def _transceiver(role: Role) -> dict[str, Any] | None:
    cfg = role.value("cache_transceiver_config")
    return cfg if isinstance(cfg, dict) else None


@check("recipe.trtllm_cache_transceiver")
def cache_transceiver(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    """cache_transceiver_config on both sides of a P/D recipe, with the same backend and buffer size."""
    pair = pd_pair(recipe)
    if not trtllm(recipe) or pair is None:
        return
    p, d = pair
    conf = {r.name: _transceiver(r) for r in pair}
    for role in pair:
        if conf[role.name] is None:
            yield finding(rule, recipe, "no cache_transceiver_config: the role builds no KV cache transceiver "
                          "(assumed: neither Dynamo nor the release fills one in), so no KV moves between prefill "
                          "and decode", flag_mark(recipe, role, "cache_transceiver_config"), role=role,
                          severity=at_most(rule.severity, "warning"),
                          fix=set_flag(role, "cache_transceiver_config", conf[p.name if role is d else d.name]
                                       or {"backend": "UCX"}, " (as on the other side)"))
    pc, dc = conf[p.name], conf[d.name]
    if pc is None or dc is None:
        return
    pb, db = (str(c.get("backend") or "DEFAULT").upper() for c in (pc, dc))
    if pb != db:
        certain = "DEFAULT" not in (pb, db)
        why = "" if certain else " (assumed: DEFAULT resolves per release)"
        yield finding(rule, recipe, f"cache_transceiver_config.backend differs: prefill {pb}, decode {db}; the two "
                      f"sides move KV over different transports and no KV arrives{why}",
                      nested(recipe, d, "cache_transceiver_config", "backend")[1], role=d,
                      severity=rule.severity if certain else at_most(rule.severity, "warning"),
                      fix=set_flag(d, "cache_transceiver_config.backend", pb, " (equal to prefill)"),
                      prefill=pb, decode=db)
    pt, dt = (as_int(c.get("max_tokens_in_buffer")) for c in (pc, dc))
    if pt is not None and dt is not None and pt != dt:
        yield finding(rule, recipe, f"cache_transceiver_config.max_tokens_in_buffer differs: prefill {number(pt)}, "
                      f"decode {number(dt)}; the two sides size their transfer buffers differently",
                      nested(recipe, d, "cache_transceiver_config", "max_tokens_in_buffer")[1], role=d,
                      severity=str(rule.params.get("buffer_severity", "info")),
                      fix=set_flag(d, "cache_transceiver_config.max_tokens_in_buffer", pt, " (equal to prefill)"))


@check("recipe.trtllm_kv_fraction")
def kv_fraction(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    """kv_cache_config.free_gpu_memory_fraction outside [0, 1] (refused at start), or 0 (no KV cache)."""
    if not trtllm(recipe):
        return
    for role in recipe.roles.values():
        value, mark = nested(recipe, role, "kv_cache_config", "free_gpu_memory_fraction")
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        key = "kv_cache_config.free_gpu_memory_fraction"
        if not 0 <= value <= 1:
            yield finding(rule, recipe, f"{key} {number(value)} is outside [0, 1]: TensorRT-LLM refuses the LLM args at "
                          "start ('kv_cache_config.free_gpu_memory_fraction must be a float between 0 and 1')", mark,
                          role=role, fix=set_flag(role, key, 0.9 if value > 1 else 0.1), value=value)
        elif value == 0 and nested(recipe, role, "kv_cache_config", "max_tokens")[0] is None:
            yield finding(rule, recipe, f"{key} 0 leaves the KV cache no GPU memory and no "
                          "kv_cache_config.max_tokens sizes it otherwise: the engine has no room for a request's KV", mark, role=role,
                          severity=at_most(rule.severity, "warning"), fix=set_flag(role, key, 0.1, relation=">="),
                          value=value)
