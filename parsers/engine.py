"""The engine-adapter contract: everything core may ask of a serving engine (vLLM, SGLang, TRT-LLM).

An engine is mostly data: the line formats its logs hold (declared in its own modules, each with
samples), its fault, stage and call-site catalogs, its flags and recipe fields, its Prometheus names,
and how its figures map onto diag's run model. Core (parsers, rules, the app) reads adapters only
through :mod:`diag.parsers.engines`; no module outside ``diag.engines`` names an engine's line format
or flag (``tests/test_architecture.py``). Optional parts default to empty, and core degrades.
"""

from __future__ import annotations

import importlib
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from importlib.abc import Traversable
from typing import Any

# The neutral knobs rules, the verdict, advice and catalog texts name; an adapter maps each to its own
# flag (``{knob.prefill_token_budget}`` renders as max-num-batched-tokens for vLLM, chunked-prefill-size
# for SGLang).
KNOBS: dict[str, str] = {
    "prefill_token_budget": "tokens one scheduler step may prefill",
    "running_cap": "requests an engine runs at once",
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
    "ssm_cache_dtype": "the SSM (Mamba) state cache's data type",
    "max_context_len": "the longest sequence (prompt and output) an engine accepts",
    "stats_off": "the switch that turns the engine's periodic stats logging off",
    "stats_on": "the switch that turns the engine's per-step stats logging on (off by default)",
    "scheduling_overlap": "asynchronous scheduling (the next step scheduled while this one runs)",
    "dp_hybrid_lb": "data-parallel hybrid load balancing",
}

# What an engine's own lines say, as rule texts quote them: ``{says.<name>}`` renders as the adapter's phrase
# (``phrases``, which may name knobs), else this neutral text ("": a remark only some engines need).
SAYS: dict[str, str] = {
    "capacity_line": "its KV capacity",                       # the start-up line of its KV capacity (DIAG-K003)
    "stats_lines": "Engines print periodic stats lines unless their stats logging is off ({knob.stats_off});\n"
                   "an idle engine may print none.",          # its stats lines and what silences them (DIAG-L001)
    "death_echoes": "the engine's dead-process errors",       # the errors an engine's death fans out into
    "context_too_long": "a context length the KV cache cannot hold",  # its start-up refusal of the context length
    "kv_load_failures": "failed KV loads",                    # its logged failures of a KV load on decode
    "args_dump": "argument dump",                             # its start-up dump of the arguments it ran with
    "kv_expiry_note": "",                                     # a caveat on its KV lease expiry errors (DIAG-K004)
    "invalid_blocks_caveat": "",                              # the same caveat, appended to a finding
    "metrics_failed_transfers": "failed transfers (KV transfer metric lines)",    # finding labels of counts
    "kv_load_recovered": "requests recomputed after a failed KV load",
    "stats_name": "stats lines",                              # what its periodic stats lines are called
    "build_name": "engine build",                             # what its build is called
    # what to check first on a broken KV path (the transfer-bound verdict's experiment)
    "kv_path_checks": "the findings' evidence, the KV-transfer backend, and that prefill and decode agree on the "
                      "KV cache's layout",
}


@dataclass(frozen=True)
class ColumnSpec:
    """A high-volume record the bulk path takes in polars, without a Python object per line: a whole clean
    physical line holding ``literal`` that one of ``patterns`` matches (full-line patterns in Python's
    syntax; core anchors them and reads ``\\d`` as ASCII). They are tried in turn, each on the lines the
    earlier ones left; the last takes every line an earlier one takes (the earlier are faster special
    cases). ``groups`` maps a pattern group to the record column it fills, ``constants`` fills columns no
    group does, ``derived`` (a function, called once) gives polars expressions over the groups for the
    columns that need more than a cast. A line stamped with its full local time instead of a month-day
    has it in the group ``stamp``, read with the ``strptime`` format ``stamp``. ``record`` builds the same
    record from the last pattern's groups on the line parser's fast path (``record(groups, line, ts, md,
    proc)``); None: such lines take the line parser's general path."""

    kind: str                                   # stats | kv_transfer: the record kind and its column schema
    literal: str
    patterns: tuple[str, ...]
    groups: Mapping[str, str] = field(default_factory=dict)
    constants: Mapping[str, Any] = field(default_factory=dict)
    derived: Callable[[], Mapping[str, Any]] | None = field(default=None, compare=False)
    stamp: str | None = None                    # strptime format of the group ``stamp`` (local time, no md)
    record: Callable[..., Any] | None = field(default=None, compare=False)


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
    stats_variants: tuple[str, ...] = ()        # StatsSample.variant values its stats lines parse as
    # the start-up fact that ends the warm-up run its per-step stats lines open with (an engine sizing its KV
    # cache by running dummy requests): a file's steps before that fact are start-up work, not service
    warmup_until: str | None = None
    knobs: Mapping[str, str] = field(default_factory=dict)        # KNOBS key -> its flag (kebab)
    catalogs: Mapping[str, str] = field(default_factory=dict)     # faults|startup|call_sites|config -> file;
                                                # srtctl_fields: its backends' sections of srtctl's recipe schema
    rule_catalogs: tuple[str, ...] = ()         # its rules' TOML files (package-relative), merged with core's
    checks_module: str | None = None            # its recipe checks (module registering them), imported with the rules
    flag_names: Callable[[], frozenset[str]] | None = None        # the flags its pinned releases accept
    # DIAG-C014: a recipe flag as known | removed | unknown (a diag.parsers.flag_table.FlagStatus)
    classify_flag: Callable[[str], Any] | None = None
    # the build a recipe's container implies: (model.container, identity.frameworks.<framework>) -> recipe.Build
    recipe_build: Callable[[str | None, str | None], Any] | None = None
    # its key in a recipe's identity.frameworks (srtctl's fingerprint names): None when it is the adapter's name
    framework: str | None = None
    # fills its own parts of a recipe.Recipe once the roles are read (connector shorthand, each role's KV transfer)
    read_recipe: Callable[[Any], None] | None = None
    # DIAG-C013: GPUs one worker's engine needs (a recipe.Role): (GPUs or None, the product spelled out, why
    # ranks that leave some of the worker's GPUs idle may be refused, or None when the engine just idles them)
    engine_gpus: Callable[[Any], tuple[int | None, str, str | None]] | None = None
    # how many engines (DP ranks) share one value of a knob, from a role's flags (snake_case -> value): a
    # server-wide budget split between ranks (1, or no hook: the value is each engine's own)
    knob_share: Callable[[str, Mapping[str, Any]], int] | None = None
    launcher_flags: tuple[str, ...] = ()        # flags srtctl passes to its workers by itself (snake_case): not drift
    # flags naming the file srtctl writes a role's recipe config into (snake_case): a command line carrying one
    # passes the recipe's flags in that file, so a recipe flag missing from the command line is no drift
    config_file_flags: tuple[str, ...] = ()
    # the ranks of one worker of a role (a recipe.Role) schedule their own batches (attention data
    # parallelism); without it, or False, ranks logging every step log one shared batch (rules.windows.fold_steps)
    own_batches: Callable[[Any], bool] | None = None
    # DIAG-C017: its numeric flags the checks read (snake_case -> lowest value), typed in its recipe config
    # beside core's engine-neutral ones (diag.parsers.recipe_schema.INT_FLAGS)
    integer_flags: Mapping[str, int] = field(default_factory=dict)
    # How core's line machinery reads its logs (all optional; an engine without them takes the general path):
    columns: tuple[ColumnSpec, ...] = ()        # records the bulk path extracts in polars (and the fast path)
    plain_head: str | None = None               # its commonest record head, whole line: groups level, md,
                                                #   proc, pid, src, msg (a Header of header_classes[0])
    connector_paths: tuple[str, ...] = ()       # a traceback frame path holding one ran in a KV connector
    tz_probe: str | None = None                 # a line with a UTC stamp (group 1) and its local time (group 2)
    # its local stamps' offset from UTC, from a log's head where no one line carries both: an object with
    # ``seconds`` (None: not settled, the stamps stay on the log's clock) and a one-line ``note``
    clock_offset: Callable[[str], Any] | None = None
    role_from_text: Callable[[str], str | None] | None = None     # prefill|decode from a worker log's head
    # what it knows, read by core through :meth:`hook` and :meth:`launch` (optional; core degrades)
    hooks_module: str | None = None             # module of its hook functions (async_scheduling, build_label, ...)
    launch_data: str | None = None              # its launch TOML: defaults, managed flags/env, per-process fields
    fact_flags: Mapping[str, str] = field(default_factory=dict)   # startup fact -> the flag it reports having run
    fact_env: Mapping[str, str] = field(default_factory=dict)     # startup fact -> the variable it reports
    engine_proc: str | None = None              # regex: a process prefix naming an engine, group 1 its DP rank
    kv_roles: Mapping[str, str] = field(default_factory=dict)     # its kv_role fact value -> prefill | decode
    waiting_kv: tuple[tuple[str, ...], ...] = ()  # stats columns of requests waiting for their KV, best first
    shown_facts: tuple[str, ...] = ()           # the startup facts a report shows, in order (() : core's)
    per_process_flags: frozenset[str] = frozenset()  # launch flags that differ between one endpoint's processes
    # words in a fault's text or frames that place it (rules.incidents), by kind: startup (start-up code),
    # runtime (serving code); merged with core's. Its catalog "frames" (parsers.frames) decides by frame instead
    frames: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # its Prometheus vocabulary, a module of the shape parsers.prom_vocab documents (FIELDS, ALIASES, ...)
    metrics_module: str | None = None
    # DIAG-L001: why an endpoint that served logged no stats lines, from its facts: (cause, why) or None
    why_no_stats: Callable[[Mapping[str, Any]], tuple[str, str] | None] | None = None
    # DIAG-L001: its startup facts (after core's stats_disabled) whose line the finding points at, the first printed
    stats_facts: tuple[str, ...] = ()
    phrases: Mapping[str, str] = field(default_factory=dict)     # SAYS key -> how its own lines say it
    fact_keys: tuple[str, ...] = ()             # the startup fact keys only it reports (core's: records.STARTUP_KEYS)

    def knob(self, key: str) -> str | None:
        """The engine's flag for a neutral knob (None: the engine has no such knob)."""
        if key not in KNOBS:
            raise KeyError(f"unknown knob {key!r}")
        return self.knobs.get(key)

    def knob_text(self, key: str) -> str:
        """How a text names a knob for this engine: its flag, else the knob's neutral description."""
        return self.knob(key) or KNOBS[key]

    def knob_key(self, key: str) -> str | None:
        """The engine's flag for a neutral knob as recipes and what ran key it (snake_case)."""
        flag = self.knob(key)
        return None if flag is None else flag.replace("-", "_")

    def says(self, key: str) -> str:
        """How rule texts quote this engine's lines for ``key`` (a :data:`SAYS` key): its phrase, else the
        neutral text."""
        if key not in SAYS:
            raise KeyError(f"unknown phrase {key!r}")
        return self.phrases.get(key, SAYS[key])

    def hook(self, name: str) -> Callable[..., Any] | None:
        """One of the adapter's hook functions (None: it has none of that name)."""
        if self.hooks_module is None:
            return None
        return getattr(importlib.import_module(self.hooks_module), name, None)

    def launch(self) -> Mapping[str, Any]:
        """Its launch data (``launch_data``), {} without."""
        return _launch(self.package, self.launch_data) if self.launch_data else {}

    @property
    def package(self) -> str:
        """The adapter's package: its data files are resources of it."""
        return f"diag.engines.{self.name}"

    def resource(self, rel: str) -> Traversable:
        """One of the adapter's data files (``catalog/faults.toml``)."""
        return resources.files(self.package).joinpath(rel)

    def catalog_file(self, kind: str) -> Traversable | None:
        """The adapter's catalog of ``kind`` (faults, startup, call_sites, sites), if it has one."""
        rel = self.catalogs.get(kind)
        return None if rel is None else self.resource(rel)


@cache
def _launch(package: str, rel: str) -> Mapping[str, Any]:
    return tomllib.loads(resources.files(package).joinpath(rel).read_text(encoding="utf-8"))


_KNOB = re.compile(r"\{knob(_key)?\.(\w+)\}")


def render_knobs(text: str, adapter: EngineAdapter | None) -> str:
    """``{knob.<name>}`` (the flag, kebab) and ``{knob_key.<name>}`` (snake, as flags and facts are keyed)
    placeholders in a catalog text as ``adapter`` spells them; the knob's neutral description from
    :data:`KNOBS` where there is no engine or it has no such knob."""
    def one(m: re.Match[str]) -> str:
        flag = adapter.knob(m.group(2)) if adapter is not None else KNOBS[m.group(2)]
        if flag is None:
            return KNOBS[m.group(2)]
        return flag.replace("-", "_") if m.group(1) else flag
    return _KNOB.sub(one, text) if "{knob" in text else text


_SAYS = re.compile(r"\{says\.(\w+)\}")


def render_says(text: str, adapter: EngineAdapter | None) -> str:
    """``{says.<name>}`` placeholders in a catalog text as ``adapter``'s phrase (:meth:`EngineAdapter.says`),
    the neutral text of :data:`SAYS` where there is no engine."""
    if "{says" not in text:
        return text
    return _SAYS.sub(lambda m: adapter.says(m.group(1)) if adapter is not None else SAYS[m.group(1)], text)


def render_text(text: str, adapter: EngineAdapter | None) -> str:
    """A catalog text as ``adapter`` says it: its phrases, then every knob (a phrase may name knobs)."""
    return render_knobs(render_says(text, adapter), adapter)


def render_all(value: Any, adapter: EngineAdapter | None) -> Any:
    """:func:`render_text` over every string (keys too) of a catalog entry."""
    if isinstance(value, str):
        return render_text(value, adapter)
    if isinstance(value, dict):
        return {render_text(k, adapter): render_all(v, adapter) for k, v in value.items()}
    if isinstance(value, list):
        return [render_all(v, adapter) for v in value]
    return value
