"""The recipe schema: every field diag reads, with its type and range, checked without coercion.

srtctl validates recipes with marshmallow only when a job is submitted; diag reads the same YAML and
must not turn ``data-parallel-size: "eight"`` into DP 1 or ``resources: [...]`` into an aggregated job.
:func:`validate` walks one resolved job document and returns one :class:`Violation` per problem, each at
the key's ``line:col``. The checks run only on jobs without error-level violations.

Types are spelled as small functions so that one table (``TOP``, ``RESOURCES``, ``BENCHMARK``,
``INT_FLAGS``) is the schema. Engine flag maps stay open (vLLM grows flags; DIAG-C014 owns their
names) but the numeric flags the checks read are typed here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .flags import normalize_flag
from .recipe_yaml import Mark, mark_of

Path_ = tuple[str | int, ...]
Check = Callable[[Any], str | None]  # None when the value fits, else what it should be


@dataclass(frozen=True)
class Violation:
    path: Path_
    message: str
    mark: Mark | None
    severity: str = "error"   # unknown keys are warnings (forks add keys srtctl may accept)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(low: int) -> Check:
    def check(value: Any) -> str | None:
        if _is_int(value) and value >= low:
            return None
        if isinstance(value, str) and re.fullmatch(r"\d+", value.strip()) and int(value) >= low:
            return None  # passed on a command line: argparse reads "8" as 8
        return f"an integer >= {low}"
    return check


def string(value: Any) -> str | None:
    return None if isinstance(value, str) else "a string"


def one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        return None if isinstance(value, str) and value.lower() in choices else f"one of {', '.join(choices)}"
    return check


def mapping(value: Any) -> str | None:
    return None if isinstance(value, dict) else "a mapping"


def concurrencies(value: Any) -> str | None:
    want = "a list of integers >= 1 or a string like \"64x128\""
    if _is_int(value):
        return None if value >= 1 else want
    if isinstance(value, str):
        return None if re.fullmatch(r"\s*\d+(\s*[x,]\s*\d+)*\s*", value) and "0" not in re.split(r"[x,\s]+", value.strip()) else want
    if isinstance(value, list):
        return None if value and all(integer(1)(v) is None for v in value) else want
    return want


def _env_check(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "a mapping of variable names to scalar values"
    bad = [k for k, v in value.items() if isinstance(v, dict | list)]
    return f"scalar values (not a nested value at {bad[0]!r})" if bad else None


KNOWN_TOP = frozenset({
    "name", "model", "resources", "slurm", "backend", "frontend", "dynamo", "benchmark", "profiling", "output",
    "health_check", "infra", "observability", "telemetry", "environment", "container_mounts", "extra_mount",
    "srun_options", "sbatch_directives", "enable_config_dump", "setup_script", "identity", "reporting",
    "sweep", "base", "schema", "engine", "roles",
})  # srtctl's SrtConfig fields (src/srtctl/core/schema.py) plus the sweep/override/schema-2 wrappers

TOP: dict[str, Check] = {"name": string, "model": mapping, "resources": mapping, "backend": mapping,
                         "benchmark": mapping, "frontend": mapping, "environment": _env_check}
MODEL: dict[str, Check] = {"path": string, "container": string, "precision": string}
RESOURCES: dict[str, Check] = {
    "gpu_type": string, "gpus_per_node": integer(1),
    **{f"{r}_nodes": integer(0) for r in ("prefill", "decode", "agg")},
    **{f"{r}_workers": integer(0) for r in ("prefill", "decode", "agg")},
    **{f"gpus_per_{r}": integer(1) for r in ("prefill", "decode", "agg")},
}
BACKEND_TYPES = ("vllm", "sglang", "trtllm", "mocker")
BENCHMARK: dict[str, Check] = {"type": string, "isl": integer(1), "osl": integer(1),
                               "concurrencies": concurrencies}
ROLE_KEYS = ("prefill", "decode", "aggregated")
# Numeric engine flags the checks read; canonical snake_case names (kebab/snake/negation all map here).
INT_FLAGS: dict[str, int] = {
    "tensor_parallel_size": 1, "data_parallel_size": 1, "pipeline_parallel_size": 1,
    "prefill_context_parallel_size": 1, "tp_size": 1, "dp_size": 1, "pp_size": 1, "ep_size": 1,
    "max_num_batched_tokens": 1, "max_num_seqs": 1, "max_cudagraph_capture_size": 1, "api_server_count": 1,
    "block_size": 1, "stream_interval": 1, "moe_expert_parallel_size": 1, "context_parallel_size": 1,
}


def _field(data: Any, path: Path_, value: Any, check: Check) -> Iterator[Violation]:
    want = check(value)
    if want is not None:
        yield Violation(path, f"`{'.'.join(map(str, path))}` must be {want}, not {value!r}", mark_of(data, path))


def _fields(data: Any, path: Path_, node: dict[str, Any], table: dict[str, Check],
            required: tuple[str, ...] = ()) -> Iterator[Violation]:
    for key in required:
        if node.get(key) is None:
            yield Violation((*path, key), f"`{'.'.join(map(str, (*path, key)))}` is required",
                            mark_of(data, path))
    for key, check in table.items():
        if node.get(key) is not None:
            yield from _field(data, (*path, key), node[key], check)


def _flags(data: Any, path: Path_, flags: Any) -> Iterator[Violation]:
    if flags is None:
        return
    if not isinstance(flags, dict):
        yield from _field(data, path, flags, mapping)
        return
    for key, value in flags.items():
        name, negated = normalize_flag(str(key))
        low = INT_FLAGS.get(name)
        if low is not None and value is not None and not negated:
            yield from _field(data, (*path, key), value, integer(low))


def _unknown(data: Any, node: dict[str, Any], known: frozenset[str], path: Path_ = ()) -> Iterator[Violation]:
    for key in node:
        if key not in known and not str(key).startswith(("override_", "zip_override_")):
            where = ".".join(map(str, (*path, key)))
            yield Violation((*path, key), f"unknown key `{where}` (not an srtctl recipe field; typo?)",
                            mark_of(data, (*path, key)), severity="warning")


def validate(data: dict[str, Any]) -> list[Violation]:
    """Every schema violation of one resolved v1 job document (schema-2 documents: top level only)."""
    out: list[Violation] = []
    out += _unknown(data, data, KNOWN_TOP)
    out += _fields(data, (), data, {k: v for k, v in TOP.items() if k != "environment"}, ("model",))
    if data.get("environment") is not None:
        out += _field(data, ("environment",), data["environment"], _env_check)
    model = data.get("model")
    if isinstance(model, dict):
        out += _fields(data, ("model",), model, MODEL, ("path",) if data.get("schema") != 2 else ())
    if data.get("schema") == 2:
        return out
    res = data.get("resources")
    if isinstance(res, dict):
        out += _fields(data, ("resources",), res, RESOURCES)
    backend = data.get("backend")
    if isinstance(backend, dict):
        if backend.get("type") is not None:
            out += _field(data, ("backend", "type"), backend["type"], one_of(*BACKEND_TYPES))
        for key, value in backend.items():
            if key.endswith("_environment") and value is not None:
                out += _field(data, ("backend", key), value, _env_check)
            elif key.endswith("_config") and key.split("_")[0] in BACKEND_TYPES and value is not None:
                if not isinstance(value, dict):
                    out += _field(data, ("backend", key), value, mapping)
                    continue
                for role in ROLE_KEYS:
                    out += _flags(data, ("backend", key, role), value.get(role))
    bench = data.get("benchmark")
    if isinstance(bench, dict):
        out += _fields(data, ("benchmark",), bench, BENCHMARK)
    return out


__all__ = ["Violation", "validate"]
