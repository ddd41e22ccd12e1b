"""TensorRT-LLM's parts of a recipe: the build its container implies, the GPUs its parallel sizes need
(DIAG-C013), the attention-DP ranks a worker schedules on, and a nested LLM API field's value and mark."""

from __future__ import annotations

import re
from typing import Any

from diag.parsers.recipe import Build, Recipe, Role
from diag.parsers.recipe_yaml import Mark, mark_of
from diag.rules.recipe_support import as_int, truthy

DISPLAY = "TensorRT-LLM"
# nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc18 (a release or its release candidate)
_RELEASE_TAG = re.compile(r"v?(\d+\.\d+\.\d+(?:rc\d+)?(?:\.post\d+)?)")


def parse_build(image: str | None, declared: str | None = None) -> Build:
    """``identity.frameworks.tensorrt_llm`` when declared, else the release a ``tensorrt-llm/release`` tag names;
    a Dynamo ``tensorrtllm-runtime`` image keeps its (Dynamo's) tag; aliases such as ``dynamo-trtllm`` name none."""
    if declared and (m := _RELEASE_TAG.match(str(declared).strip())):
        return Build("release", m.group(1), source="identity.frameworks.tensorrt_llm", image=image, engine=DISPLAY)
    if not image:
        return Build("unknown", engine=DISPLAY)
    ref = image.split("@", 1)[0]
    repo, _, tag = ref.rpartition(":") if ":" in ref.rsplit("/", 1)[-1] else (ref, "", "")
    if repo.endswith("tensorrtllm-runtime") and tag:
        return Build("unknown", runtime_tag=tag, source="model.container", image=image, engine=DISPLAY)
    if "tensorrt-llm" in repo.lower() and (m := _RELEASE_TAG.fullmatch(tag)):
        return Build("release", m.group(1), source="model.container", image=image, engine=DISPLAY)
    return Build("unknown", source="model.container", image=image, engine=DISPLAY)


def size(role: Role, name: str) -> int | None:
    """A parallel size of the LLM API (1 when unset, None when not a number)."""
    f = role.flag(name)
    return 1 if f is None else as_int(f.value)


def engine_gpus(role: Role) -> tuple[int | None, str, str | None]:
    """GPUs one worker's engine needs: its world size, tensor x pipeline x context parallel (llm_args.py
    ``_ParallelConfig.world_size``). Expert parallelism (``moe_expert_parallel_size``) and attention DP
    (``enable_attention_dp``) split the tensor-parallel ranks, they add none. Fewer ranks than the worker's
    GPUs is not judged: srtctl starts an MPI rank per GPU (srt-slurm worker_stage.py, ntasks = the worker's
    GPUs), and what TensorRT-LLM makes of the spare ones is not settled by the source diag read."""
    tp, pp, cp = (size(role, n) for n in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size"))
    if tp is None or pp is None or cp is None or min(tp, pp, cp) < 1:
        return None, "", None
    spelled = f"tensor_parallel_size {tp} x pipeline_parallel_size {pp}" + (
        f" x context_parallel_size {cp}" if cp > 1 else "")
    return tp * pp * cp, spelled, None


def attention_dp(role: Role) -> int:
    """Ranks that each schedule their own batch: the tensor-parallel size with ``enable_attention_dp``, else 1."""
    if not truthy(role.value("enable_attention_dp")):
        return 1
    return max(size(role, "tensor_parallel_size") or 1, 1)


def own_batches(role: Role) -> bool:
    """A worker's ranks each schedule their own batch (attention DP over more than one rank): each is an engine."""
    return attention_dp(role) > 1


def nested(recipe: Recipe, role: Role, block: str, key: str) -> tuple[Any, Mark | None]:
    """``<block>.<key>`` of a role's LLM API args (None when the block or key is absent), and its mark."""
    value = role.value(block)
    got = value.get(key) if isinstance(value, dict) else None
    return got, mark_of(recipe.data, (*role.flags_path, block, key))
