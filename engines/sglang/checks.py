"""SGLang's recipe checks (DIAG-C018..C023, catalog ``catalog/config.toml``): certain-only, like vLLM's.

Each reads ``backend.sglang_config`` as srtctl passes it (``key: value`` -> ``--key value``; ``key: true``
-> ``--key``; ``false`` and null dropped). Release-dependent facts come from the releases diag has a flag
list for (``flags.releases()``); an image naming another release, or none (``dev``, nightlies, Dynamo
runtime images), gets a warning at most, saying so. Every rule's ``why`` cites the SGLang source it rests on.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from diag.parsers.recipe import Recipe, Role
from diag.rules.catalog import Rule
from diag.rules.finding import Finding
from diag.rules.present import number
from diag.rules.recipe_support import (
    as_int,
    at_most,
    check,
    dynamo,
    finding,
    flag_mark,
    pd_pair,
    roles,
    set_flag,
    truthy,
    where,
)

from . import flags

TP = ("tp-size", "tensor-parallel-size", "tp")
DP = ("dp-size", "data-parallel-size", "dp")
ATTN_DP = ("attn-dp-size",)
DP_ATTENTION = "enable-dp-attention"
TRANSFER_DEFAULT = "mooncake"  # every listed release's default for disaggregation-transfer-backend
# Attention backends whose resolution replaces the page size (0.5.23 arg_groups/overrides.py:1146-1199,
# 1284-1336; 0.4.6 server_args.py:286-296): with one of them an explicit page-size is not what runs.
PAGE_FORCING = frozenset({"flashmla", "cutlass_mla", "trtllm_mla", "trtllm_mha", "cutedsl_mla", "fa4", "hpc"})
BACKEND_FLAGS = ("attention-backend", "prefill-attention-backend", "decode-attention-backend")


def sglang(recipe: Recipe) -> bool:
    return recipe.backend == "sglang"


def _int_flag(role: Role, names: tuple[str, ...], default: int = 1) -> int:
    f = role.flag(*names)
    return default if f is None else (as_int(f.value) or default)


def attention_dp(role: Role) -> int:
    """Attention data-parallel ranks: ``attn-dp-size`` (0.5.23), else ``dp-size`` with dp attention
    (which 0.5.23 turns into ``attn-dp-size``: arg_groups/parallel_hook.py:39-61); 1 without."""
    attn = _int_flag(role, ATTN_DP)
    if attn > 1:
        return attn
    return _int_flag(role, DP) if truthy(role.value(DP_ATTENTION)) else 1


def dp_ranks(role: Role) -> int:
    """Schedulers one worker runs, each with its own batch: attention-DP ranks or DP replicas."""
    return max(attention_dp(role), _int_flag(role, DP))


def release(recipe: Recipe) -> str | None:
    """The listed SGLang release the recipe's image pins (None: another release, or none named)."""
    v = flags.image_version(recipe.container)
    return v if v in flags.releases() else None


def _image(recipe: Recipe) -> str:
    v = flags.image_version(recipe.container)
    return f"SGLang {v}" if v else f"image {recipe.container or '(none)'}"


def _page_forced(role: Role) -> bool:
    return any(str(role.value(n) or "").lower() in PAGE_FORCING for n in BACKEND_FLAGS)


@check("recipe.sglang_pd_agree")
def pd_agree(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    pair = pd_pair(recipe)
    if not sglang(recipe) or pair is None:
        return
    p, d = pair
    pb, db = (str(r.value("disaggregation-transfer-backend") or TRANSFER_DEFAULT).lower() for r in pair)
    if pb != db:
        yield finding(rule, recipe, f"prefill transfers KV with {pb} but decode with {db}: the two sides speak "
                      "different transfer protocols and no KV arrives", flag_mark(recipe, d, "disaggregation-"
                      "transfer-backend"), role=d, fix=set_flag(d, "disaggregation-transfer-backend", pb,
                                                                " (equal to prefill)"), prefill=pb, decode=db)
    pk, dk = (r.value("kv-cache-dtype") for r in pair)
    pks, dks = (str(v).lower() if v is not None else "auto" for v in (pk, dk))
    if pks != dks:
        both = "auto" not in (pks, dks)
        sev = rule.severity if both else at_most(rule.severity, "warning")
        tail = "" if both else " (assumed: `auto` follows the model's dtype, which diag does not resolve)"
        yield finding(rule, recipe, f"kv-cache-dtype differs: prefill {pks}, decode {dks}; decode refuses a prefill "
                      f"with another KV dtype ('KV cache dtype mismatch'){tail}", flag_mark(recipe, d, "kv-cache-dtype"),
                      role=d, severity=sev, fix=set_flag(d, "kv-cache-dtype", pk if pk is not None else "auto",
                                                         " (equal to prefill)"), prefill=pks, decode=dks)
    ps, ds = (as_int(r.value("page-size")) for r in pair)
    if ps != ds and (ps is not None or ds is not None):
        forced = _page_forced(p) or _page_forced(d)
        certain = ps is not None and ds is not None and not forced
        why = ("" if certain else " (assumed: an unset page-size is resolved per model and attention backend"
               if ps is None or ds is None else " (assumed: the attention backend may replace both page sizes)")
        shown = [str(number(v)) if v is not None else "unset" for v in (ps, ds)]
        yield finding(rule, recipe, f"page-size differs: prefill {shown[0]}, decode {shown[1]}; decode refuses a "
                      f"prefill with another page size ('Page size mismatch'){why}", flag_mark(recipe, d, "page-size"),
                      role=d, severity=rule.severity if certain else at_most(rule.severity, "warning"),
                      fix=set_flag(d, "page-size", ps if ps is not None else ds, " (equal to prefill)"))


@check("recipe.sglang_chunked_prefill")
def chunked_prefill(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    isl = recipe.benchmark.isl
    if not sglang(recipe) or not isl:
        return
    for role in roles(recipe, "prefill", "agg"):
        chunk = as_int(role.value("chunked-prefill-size"))
        if chunk is None or chunk <= 0:
            continue  # unset: a default per GPU and release; <= 0: chunking off
        ranks = attention_dp(role)
        per_rank = chunk // ranks
        if per_rank >= isl:
            continue
        split = f" / {number(ranks)} attention-DP ranks = {number(per_rank)} per rank" if ranks > 1 else ""
        yield finding(rule, recipe, f"chunked-prefill-size {number(chunk)}{split} is below the ISL {number(isl)}: every "
                      f"prompt takes {math.ceil(isl / max(per_rank, 1))} prefill steps, TTFT grows",
                      flag_mark(recipe, role, "chunked-prefill-size"), role=role,
                      severity=str(rule.params.get("below_isl_severity", rule.severity)),
                      fix=set_flag(role, "chunked-prefill-size", isl * ranks, relation=">="),
                      isl=isl, per_rank=per_rank)


def _per_rank_concurrency(recipe: Recipe, role: Role) -> tuple[int, int]:
    """(requests per DP rank at the top concurrency, DP ranks x workers)."""
    top = max(recipe.benchmark.concurrencies, default=0)
    ranks = dp_ranks(role) * (role.workers or 1)
    return math.ceil(top / ranks), ranks


def _graph_cap(role: Role) -> tuple[int | None, str]:
    """The largest decode batch a role captures as a CUDA graph, and the flag that says so."""
    for key in ("cuda-graph-max-bs-decode", "cuda-graph-max-bs"):
        v = as_int(role.value(key))
        if v is not None:
            return v, key
    for key in ("cuda-graph-bs-decode", "cuda-graph-bs"):
        sizes = role.value(key)
        vals = [as_int(x) for x in (sizes if isinstance(sizes, list) else str(sizes or "").split())]
        if vals and all(v is not None for v in vals):
            return max(v for v in vals if v is not None), key
    return None, ""


def _running_per_rank(role: Role) -> int | None:
    """max-running-requests per DP rank: divided by the attention-DP size (0.5.8
    model_executor/model_runner.py:558-565), whole on each replica without dp attention."""
    mrr = as_int(role.value("max-running-requests"))
    return None if mrr is None else mrr // attention_dp(role)


@check("recipe.sglang_cuda_graph_bs")
def cuda_graph_bs(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    if not sglang(recipe) or not recipe.benchmark.concurrencies:
        return
    for role in roles(recipe, "decode", "agg"):
        if truthy(role.value("disable-cuda-graph")):
            continue
        cap, key = _graph_cap(role)
        if cap is None:
            continue  # the default depends on GPU memory and release
        per_rank, ranks = _per_rank_concurrency(recipe, role)
        running = _running_per_rank(role)
        batch = min(per_rank, running) if running is not None else per_rank
        if cap >= batch:
            continue
        yield finding(rule, recipe, f"{key} {number(cap)} is below the decode batch a rank can reach, {number(batch)} (top "
                      f"concurrency over {number(ranks)} DP ranks x workers, within max-running-requests): batches "
                      f"above {number(cap)} run without CUDA graphs",
                      flag_mark(recipe, role, key), role=role, fix=set_flag(role, key, batch, relation=">="),
                      per_rank=batch, capture=cap)


@check("recipe.sglang_max_running")
def max_running(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    if not sglang(recipe) or not recipe.benchmark.concurrencies:
        return
    for role in roles(recipe, "decode", "agg"):
        running = _running_per_rank(role)
        if running is None:
            continue
        per_rank, ranks = _per_rank_concurrency(recipe, role)
        if running >= per_rank:
            continue
        ranks_dp = attention_dp(role)
        split = f" / {number(ranks_dp)} attention-DP ranks" if ranks_dp > 1 else ""
        mrr = as_int(role.value("max-running-requests")) or 0
        yield finding(rule, recipe, f"max-running-requests {number(mrr)}{split} = {number(running)} per rank but the top "
                      f"concurrency puts {number(per_rank)} on each rank ({number(ranks)} DP ranks x workers): the rest "
                      "wait in the engine's queue and inflate TTFT", flag_mark(recipe, role, "max-running-requests"),
                      role=role, fix=set_flag(role, "max-running-requests", per_rank * ranks_dp, relation=">="),
                      per_rank=per_rank, running=running)


@check("recipe.sglang_dp_attention")
def dp_attention(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    if not sglang(recipe):
        return
    rel = release(recipe)
    for role in recipe.roles.values():
        tp, dp, attn = _int_flag(role, TP), _int_flag(role, DP), attention_dp(role)
        if attn > 1 and tp % attn:
            yield finding(rule, recipe, f"dp attention with {number(attn)} ranks needs tp-size divisible by it, but tp-size is "
                          f"{number(tp)}: SGLang asserts tp_size % dp_size == 0 at start", flag_mark(recipe, role, *DP),
                          role=role, fix=f"make tp-size a multiple of dp-size in `{where(role)}`", tp=tp, dp=attn)
        if attn > 1 and as_int(role.value("attn-dp-size")) and dp > 1:
            yield finding(rule, recipe, f"attn-dp-size {number(attn)} with dp-size {number(dp)}: SGLang 0.5.23 refuses DP "
                          "replicas combined with attention DP", flag_mark(recipe, role, *DP), role=role,
                          severity=rule.severity if rel == "0.5.23" else at_most(rule.severity, "warning"),
                          fix=f"drop dp-size from `{where(role)}`")
        multi = role.gpus is not None and role.gpus > recipe.gpus_per_node
        if dp > 1 and attn == 1 and multi:
            certain = rel in ("0.5.8", "0.5.23")
            tail = "" if certain else f" (in 0.5.8 and 0.5.23; {_image(recipe)} is not a release diag has checked)"
            yield finding(rule, recipe, f"dp-size {number(dp)} without dp attention on a worker of {number(role.gpus)} GPUs "
                          f"({number(recipe.gpus_per_node)} per node): SGLang refuses multi-node data parallelism "
                          f"unless dp attention is on{tail}", flag_mark(recipe, role, *DP), role=role,
                          severity=rule.severity if certain else at_most(rule.severity, "warning"),
                          fix=set_flag(role, DP_ATTENTION, True, " (or keep each DP replica on one node)"))


@check("recipe.sglang_chunk_page")
def chunk_page(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    if not sglang(recipe):
        return
    for role in recipe.roles.values():
        if role.name == "decode" or _page_forced(role):
            continue  # decode skips the check (0.5.8, 0.5.23); a forcing backend replaces page-size
        chunk, page = as_int(role.value("chunked-prefill-size")), as_int(role.value("page-size"))
        if chunk is None or chunk <= 0 or page is None or page <= 1:
            continue
        per_rank = chunk // attention_dp(role)
        if per_rank % page == 0:
            continue
        split = f" (per attention-DP rank: {number(per_rank)})" if per_rank != chunk else ""
        want = max(page, per_rank // page * page) * attention_dp(role)
        yield finding(rule, recipe, f"chunked-prefill-size {number(chunk)}{split} is not a multiple of page-size "
                      f"{number(page)}: SGLang asserts chunked_prefill_size % page_size == 0 at start",
                      flag_mark(recipe, role, "chunked-prefill-size"), role=role,
                      fix=set_flag(role, "chunked-prefill-size", want), chunk=chunk, page=page)


@check("recipe.sglang_unknown_flag")
def unknown_flag(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    if not sglang(recipe):
        return
    rel, under = release(recipe), dynamo(recipe)
    for role in recipe.roles.values():
        for flag in role.flags.values():
            if rel is not None:
                yield from _against_release(rule, recipe, role, flag.key, flag.mark, rel, under)
            elif not flags.in_any_release(flag.key):
                near = flags.closest(flag.key.replace("_", "-").lower(), flags.releases()[-1], dynamo=under)
                hint = f"; did you mean `{near}`?" if near else ""
                yield finding(rule, recipe, f"`{flag.key}` is not a flag of any SGLang release diag knows "
                              f"({', '.join(flags.releases())}){hint}; {_image(recipe)} is not one of them, so it may "
                              "still exist there", flag.mark, role=role,
                              severity=str(rule.params.get("unlisted_release_severity", "info")),
                              fix=f"check `{flag.key}` against `python -m sglang.launch_server --help` of the image",
                              flag=flag.key)


def _against_release(rule: Rule, recipe: Recipe, role: Role, key: str, mark: object, rel: str,
                     under: bool) -> Iterator[Finding]:
    st = flags.classify(key, rel, dynamo=under)
    if st.status == "known":
        return
    if st.status == "ambiguous":
        msg = (f"SGLang {rel} has no flag `{key}`, and argparse refuses it as an ambiguous abbreviation of "
               f"{', '.join('`' + m + '`' for m in st.matches)}")
        fix = f"replace `{key}` with one of {', '.join(st.matches)} in `{where(role)}`"
    elif st.status == "rejected":
        msg = f"SGLang {rel} refuses `{key}` at start: {st.note}"
        fix = f"remove `{key}` from `{where(role)}`"
    else:
        older = flags.removed_since(st.flag, rel)
        gone = f" (SGLang {older} had it)" if older else ""
        near = f"; did you mean `{st.suggestion}`?" if st.suggestion else ""
        msg = f"SGLang {rel} has no flag `{key}`{gone}{near} (the worker exits with 'unrecognized arguments')"
        fix = (f"rename `{key}` to `{st.suggestion}` in `{where(role)}`" if st.suggestion
               else f"remove `{key}` from `{where(role)}`")
    yield finding(rule, recipe, msg, mark, role=role, fix=fix, flag=key)  # type: ignore[arg-type]
