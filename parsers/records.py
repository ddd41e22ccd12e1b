"""Typed records that parsers produce from log lines and files.

Every record carries ``line`` (1-based physical line in its source) and ``ts`` (a UTC
``datetime`` once the year is known, else ``None``; ``md`` keeps the raw month-day time of a
vLLM header). Records are comparable, so the bulk and streaming paths can be checked for
identical output, and treated as immutable; they are not ``frozen`` dataclasses only because a
frozen ``__init__`` costs several microseconds per record on the hot path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Header:
    """The parsed head of one log record (any of the timestamped shapes)."""

    cls: str
    level: str | None = None
    md: str | None = None          # vLLM "MM-DD HH:MM:SS" (no year)
    iso: str | None = None         # full timestamp when the line carries one
    proc: str | None = None        # vLLM process prefix name, e.g. EngineCore_DP3
    pid: int | None = None
    source: str | None = None      # file.py:N, Dynamo target or SGLang rank tag
    msg: str = ""
    local: bool = False            # ``iso`` is the node's local time (the log's inferred offset applies)


def column(unit: str, doc: str, *, run: bool = False) -> dict[str, Any]:
    """A record field's column facts (unit, description; ``run``: a column of the run model's stats
    frame), its ``field`` metadata: :mod:`parsers.stats_columns` derives every stats schema from them."""
    return {"unit": unit, "doc": doc, "run": run}


@dataclass(slots=True)
class Record:
    line: int = field(metadata=column("", "1-based physical line in its source"))
    ts: datetime | None = field(default=None, kw_only=True, metadata=column("UTC", "time of the line, once the year is known"))
    md: str | None = field(default=None, kw_only=True, metadata=column("", "raw month-day time of a vLLM header"))
    proc: str | None = field(default=None, kw_only=True, metadata=column("", "vLLM process prefix, e.g. EngineCore_DP3"))
    task: int | None = field(default=None, kw_only=True, metadata=column("", "srun --label task id, when present"))

    kind = "record"


@dataclass(slots=True)
class StatsSample(Record):
    """One periodic engine stats line (vLLM V1/V0/Rust frontend, SGLang batch line, a Prometheus scrape).
    Its fields are the one column spec of the stats (:mod:`parsers.stats_columns`)."""

    variant: str = field(metadata=column("", "v1 | v0 | rust | sglang-prefill | sglang-decode | prom"))
    engine: int | None = field(default=None, metadata=column("", 'DP rank from "Engine NNN:" / "DPk"'))
    n_aggregated: int | None = field(default=None, metadata=column("", "engines one aggregated line sums"))
    prompt_tps: float | None = field(default=None, metadata=column(
        "tok/s", "prompt tokens the engine computed over the interval (not prefix-cache hits or KV received by transfer)",
        run=True))
    gen_tps: float | None = field(default=None, metadata=column("tok/s", "generation throughput over the interval", run=True))
    running: int | None = field(default=None, metadata=column("requests", "requests running", run=True))
    waiting: int | None = field(default=None, metadata=column("requests", "requests waiting", run=True))
    deferred: int | None = field(default=None, metadata=column("requests", "requests deferred", run=True))
    preemptions: int | None = field(default=None, metadata=column("count", "preemptions in the interval", run=True))
    kv_usage: float | None = field(default=None, metadata=column("%", "GPU KV cache usage, 0..100", run=True))
    prefix_hit: float | None = field(default=None, metadata=column("%", "prefix cache hit rate", run=True))
    ext_hit: float | None = field(default=None, metadata=column("%", "external / KV-connector prefix cache hit rate", run=True))
    mm_hit: float | None = field(default=None, metadata=column("%", "multi-modal cache hit rate"))
    corrupted: int | None = field(default=None, metadata=column("requests", "requests with corrupted KV"))
    swapped: int | None = field(default=None, metadata=column("requests", "requests swapped to CPU (V0)"))
    cpu_kv: float | None = field(default=None, metadata=column("%", "CPU KV cache usage (V0)"))
    kv_fetch_waiting: int | None = field(default=None, metadata=column("requests", "KV fetch: waiting to start (P/D decode)", run=True))
    kv_fetch_running: int | None = field(default=None, metadata=column("requests", "KV fetch: in progress", run=True))
    kv_fetch_done: int | None = field(default=None, metadata=column("requests", "KV fetch: completed, waiting to run"))
    prompt_all_tps: float | None = field(default=None, metadata=column(
        "tok/s", "prompt tokens of every source (computed, prefix-cache hit, KV received by transfer) where the "
        "engine does not split them (Prometheus vllm:prompt_tokens)", run=True))
    # P/D queues and batch facts an engine logs per batch (SGLang's batch lines), in the neutral model's names
    new_tokens: int | None = field(default=None, metadata=column(
        "tokens", "prompt tokens newly computed in the batch (per step; folded: summed)", run=True))
    cached_tokens: int | None = field(default=None, metadata=column("tokens", "prompt tokens taken from the prefix cache"))
    bootstrap_req: int | None = field(default=None, metadata=column(
        "requests", "prefill: requests waiting for their decode peer's handshake", run=True))
    inflight_req: int | None = field(default=None, metadata=column(
        "requests", "prefill: requests computed whose KV is being sent", run=True))
    prealloc_req: int | None = field(default=None, metadata=column(
        "requests", "decode: requests waiting for KV memory before their transfer", run=True))
    transfer_req: int | None = field(default=None, metadata=column(
        "requests", "decode: requests whose KV is being received", run=True))
    retracted_req: int | None = field(default=None, metadata=column(
        "requests", "decode: requests retracted for KV memory, waiting to resume", run=True))
    cuda_graph: bool | None = field(default=None, metadata=column("", "the batch ran as a captured (CUDA) graph"))
    # one scheduler step's batch (an engine that logs every step: TRT-LLM's iteration log), folded to the stats
    # interval by the run model (rules.endpoints: sums of tokens and requests, the longest step)
    ctx_requests: int | None = field(default=None, metadata=column(
        "requests", "requests whose prompt the step computed (per step; folded: summed)", run=True))
    gen_tokens: int | None = field(default=None, metadata=column(
        "tokens", "tokens the step generated (per step; folded: summed)", run=True))
    step_ms: float | None = field(default=None, metadata=column(
        "ms", "the scheduler step's host time (folded: the longest)", run=True))
    device_step_ms: float | None = field(default=None, metadata=column(
        "ms", "the previous step's device time (folded: the longest)", run=True))
    steps: int | None = field(default=None, metadata=column("count", "scheduler steps folded into the row", run=True))
    dp_share: bool | None = field(default=None, metadata=column(
        "", "the step's rank fetched only its share of its worker's requests (attention data parallelism: "
        "it schedules its own batch)", run=True))
    busy: float | None = field(default=None, metadata=column(
        "", "folded: the share of the interval the engine spent in its steps (their host times summed), 0..1",
        run=True))
    latency: dict[str, float] | None = field(  # one run-model column per quantile: parsers.histogram.COLUMNS
        default=None, metadata=column("s", "per-interval latency quantiles from Prometheus histograms", run=True))

    kind = "stats"


@dataclass(slots=True)
class KVTransfer(Record):
    """A ``KV Transfer metrics:`` line; ``values`` keeps every key, known or not."""

    connector: str | None
    values: tuple[tuple[str, float], ...]

    kind = "kv_transfer"

    def get(self, key: str, default: float | None = None) -> float | None:
        for k, v in self.values:
            if k == key:
                return v
        return default


@dataclass(slots=True)
class NixlFailure(Record):
    ftype: str                  # handshake_failed, transfer_failed, ..., or legacy kinds
    request_id: str | None = None
    detail: str | None = None
    context: tuple[tuple[str, str], ...] = ()

    kind = "nixl_failure"


@dataclass(slots=True)
class KVExpiry(Record):
    """P-side lease expiry / invalid-block / force-freed lines."""

    event: str                  # expired | invalid | declined | force_freed
    request_id: str | None = None
    n_workers: int | None = None

    kind = "kv_expiry"


@dataclass(slots=True)
class KVLoadFailure(Record):
    n_requests: int
    tokens: int
    recovered: bool

    kind = "kv_load_failure"


@dataclass(slots=True)
class StartupFact(Record):
    """A fact printed at startup: key is one of STARTUP_KEYS, or of the keys only its engine reports (its
    adapter's ``fact_keys``)."""

    key: str
    value: Any

    kind = "startup"


STARTUP_KEYS = (
    "version", "model", "non_default_args", "architecture", "kv_memory_gib", "kv_cache_tokens",
    "max_concurrency", "stats_disabled", "dp_rank", "kv_role", "engine_config", "serving",
)


@dataclass(slots=True)
class StageMark(Record):
    """A line that shows how far an engine's startup has got (``catalog/startup.toml``)."""

    stage: str                  # a stage of the startup catalog
    mark: str                   # start | progress | done
    fields: tuple[tuple[str, Any], ...] = ()   # took, memory_gib, tokens, concurrency, done, total, ...

    kind = "stage"

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.fields:
            if k == key:
                return v
        return default


@dataclass(slots=True)
class Fault(Record):
    """Something went wrong. ``cause`` classifies it; ``exception`` is the exception line."""

    cause: str                  # a cause of parsers/catalog/faults.toml, or "exception"
    message: str
    exception: str | None = None
    traceback_line: int | None = None  # line where the grouped traceback starts
    frames: tuple[str, ...] = ()       # innermost-last function names of the traceback (at most 12)
    where: str | None = None           # the logger's file:line (vLLM) or target (Dynamo)
    site: str | None = None            # the log site matched (parsers.sites): its id
    phase: str | None = None           # that site's phase: startup | serving | any
    engine: str | None = None          # the engine its traceback's frames ran in (parsers.frames)
    frame_phase: str | None = None     # what those frames say of an ERROR/CRITICAL or bare traceback: startup | serving
    frame_at: str | None = None        # the frame that decided it, module:function

    kind = "fault"




@dataclass(slots=True)
class Lifecycle(Record):
    """An srt-slurm orchestrator event (worker start, readiness, benchmark, exit...)."""

    event: str
    fields: tuple[tuple[str, Any], ...] = ()

    kind = "lifecycle"

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.fields:
            if k == key:
                return v
        return default


@dataclass(slots=True)
class SpecDecode(Record):
    mean_acceptance_len: float | None
    acceptance_rate: float | None
    accepted: int
    drafted: int

    kind = "spec_decode"


@dataclass(slots=True)
class Preemption(Record):
    """A V0 per-event preemption warning (V1 reports preemptions in its stats line)."""

    mode: str
    cumulative: int | None = None

    kind = "preemption"


@dataclass(frozen=True, slots=True)
class BenchResult:
    """One benchmark run at one concurrency: a ``benchmark.out`` result block, an sa-bench result
    JSON or a roll-up row. Field names follow the sa-bench JSON keys; absent values are ``None``."""

    source: str                                # benchmark.out | sa-bench-json | rollup
    concurrency: int | None = None
    successful_requests: int | None = None     # "completed"
    failed_requests: int | None = None
    num_prompts: int | None = None
    duration_s: float | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    request_throughput: float | None = None    # req/s
    request_goodput: float | None = None
    output_throughput: float | None = None     # tok/s
    peak_output_throughput: float | None = None
    total_token_throughput: float | None = None
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2el_ms: float | None = None
    median_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    total_gpus: int | None = None              # from the result file name (working GPUs)
    prefill_gpus: int | None = None
    decode_gpus: int | None = None
    isl: int | None = None
    osl: int | None = None
    model: str | None = None
    started: datetime | None = None            # the measured run's time window (UTC): bench.sh's `date`
    ended: datetime | None = None              # lines around it, else the result JSON's date - duration
    line: int | None = None                    # first line of the run's section in benchmark.out
    complete: bool = True                      # False: the run started but printed no result block
    extra: tuple[tuple[str, float], ...] = ()  # every other numeric value (p90_ttft_ms, std_*, ...)

    kind = "bench_result"

    def get(self, key: str, default: float | None = None) -> Any:
        """A named field or an ``extra`` value."""
        if key in self.__dataclass_fields__:
            value = getattr(self, key)
            return default if value is None else value
        for k, v in self.extra:
            if k == key:
                return v
        return default


@dataclass(frozen=True, slots=True)
class AccuracyResult:
    """One accuracy figure from an eval run (gsm8k, gpqa, mmlu, lm-eval...); ``value`` is 0..1."""

    task: str | None                 # gsm8k, gpqa, mmlu, ... when known
    metric: str                      # accuracy | score | mean_score | exact_match | invalid_rate | ...
    value: float
    stderr: float | None = None
    filter: str | None = None        # lm-eval filter (strict-match, flexible-extract)
    n_shot: int | None = None
    run: int | None = None           # 0-based index among repeated runs
    line: int | None = None

    kind = "accuracy"


@dataclass(slots=True)
class PrefixCacheRate(Record):
    """V0's second stats line: ``Prefix cache hit rate: GPU: X%, CPU: Y%`` (percent)."""

    gpu: float
    cpu: float | None = None

    kind = "prefix_cache"


@dataclass(slots=True)
class RequestCounts(Record):
    """Requests an endpoint finished in one metrics interval and how many of them failed (Dynamo's
    frontend and component request counters, :data:`parsers.prom_vocab.REQUEST_COUNTS`)."""

    requests: int
    errors: int

    kind = "requests"
