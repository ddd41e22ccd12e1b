"""The engine-adapter contract: everything core may ask of a serving engine (vLLM, SGLang, TRT-LLM).

An engine is mostly data: the line formats its logs hold (declared in its own modules, each with
samples), its fault, stage and call-site catalogs, its flags and recipe fields, its Prometheus names,
and how its figures map onto diag's run model. Core (parsers, rules, the app) reads adapters only
through :mod:`diag.parsers.engines`; no module outside ``diag.engines`` names an engine's line format
or flag (``tests/test_architecture.py``). Optional parts default to empty, and core degrades.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.abc import Traversable
from typing import Any

# The neutral knobs rules, the verdict, advice and catalog texts name; an adapter maps each to its own
# flag (``{knob.prefill_token_budget}`` renders as max-num-batched-tokens for vLLM, chunked-prefill-size
# for SGLang).
KNOBS: dict[str, str] = {
    "prefill_token_budget": "tokens one scheduler step may prefill",
    "max_running_requests": "requests an engine runs at once",
    "kv_memory_fraction": "the share of GPU memory given to weights and KV cache",
    "cuda_graph_max_batch": "the largest batch size captured as a CUDA graph",
    "kv_block_size": "tokens per KV-cache block (page)",
    "kv_dtype": "the KV cache's data type",
    "tensor_parallel": "tensor-parallel size",
    "data_parallel": "data-parallel size",
    "expert_parallel": "expert parallelism on or its size",
    "stream_chunk": "tokens buffered per streamed chunk",
    "api_servers": "API server processes",
    "pd_role": "the P/D role flag",
    "transfer_backend": "the KV-transfer backend between prefill and decode",
}


@dataclass(frozen=True)
class EngineAdapter:
    """One serving engine, as core sees it. ``name`` is the recipe's ``backend.type`` spelling."""

    name: str                                   # vllm | sglang | trtllm
    display: str                                # vLLM | SGLang | TensorRT-LLM
    backend_types: tuple[str, ...] = ()         # recipe backend.type / engine.type values it owns
    config_key: str | None = None               # backend.<config_key> holds its flags in a recipe
    launch_modules: tuple[str, ...] = ()        # how its server shows on a command line (detection)
    evidence: tuple[str, ...] = ()              # literals only its logs write (detection, in a log's head)
    header_classes: tuple[str, ...] = ()        # Header.cls values its record heads produce
    format_modules: tuple[str, ...] = ()        # modules declaring its line formats (imported on load)
    metric_prefixes: tuple[str, ...] = ()       # its Prometheus names start with these
    stats_cadence_s: float | None = None        # its periodic stats interval; None: a line per N batches
    knobs: Mapping[str, str] = field(default_factory=dict)        # KNOBS key -> its flag (kebab)
    catalogs: Mapping[str, str] = field(default_factory=dict)     # faults|startup|call_sites|config -> file
    rule_catalogs: tuple[str, ...] = ()         # its rules' TOML files (package-relative), merged with core's
    checks_module: str | None = None            # its recipe checks (module registering them), imported with the rules
    flag_names: Callable[[], frozenset[str]] | None = None        # the flags its pinned releases accept
    launcher_flags: tuple[str, ...] = ()        # flags srtctl passes to its workers by itself (snake_case): not drift
    extra: Mapping[str, Any] = field(default_factory=dict)        # adapter-specific hooks, by name

    def knob(self, key: str) -> str | None:
        """The engine's flag for a neutral knob (None: the engine has no such knob)."""
        if key not in KNOBS:
            raise KeyError(f"unknown knob {key!r}")
        return self.knobs.get(key)

    @property
    def package(self) -> str:
        """The adapter's package: its data files are resources of it."""
        return f"diag.engines.{self.name}"

    def resource(self, rel: str) -> Traversable:
        """One of the adapter's data files (``catalog/faults.toml``)."""
        return resources.files(self.package).joinpath(rel)

    def catalog_file(self, kind: str) -> Traversable | None:
        """The adapter's catalog of ``kind`` (faults, startup, call_sites), if it has one."""
        rel = self.catalogs.get(kind)
        return None if rel is None else self.resource(rel)
