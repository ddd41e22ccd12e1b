"""TensorRT-LLM's iteration log (``print_iter_log``): one line per scheduler step, as the run model's stats.

``tensorrt_llm/_torch/pyexecutor/py_executor.py`` ``profile_step`` logs, when the LLM args set
``print_iter_log`` and on the ranks ``TLLM_PROFILE_LOG_RANKS`` names (rank 0 by default)::

    iter = {iter_counter}, global_rank = G, rank = R, num_scheduled_requests = S, kv_cache_util = {1 - free/max
    blocks:.3f | N/A}, currank_total_requests = {fetched on this rank}/{fetched}, host_step_time = {ms}ms,
    prev_device_step_time = {ms}ms | N/A, timestamp = {datetime.now(): %Y-%m-%d %H:%M:%S}, states = {iter_states}

(the stored version with ``kv_cache_util``); the release-1.0 form (9521caf4) has no ``kv_cache_util`` and puts
``num_scheduled_requests: S`` after the timestamp. ``iter_states`` is a dict: ``num_ctx_requests``,
``num_ctx_tokens``, ``num_generation_tokens`` (and ``cached_kv_tokens`` in newer releases). The device time is
the previous step's (``N/A`` on an engine's first step); ``iter`` restarts with every engine lifecycle (the
KV-sizing dry run, then the real engine), so it orders nothing; ``timestamp`` is the worker's local time.

Neutral mapping, per step: running = num_scheduled_requests, kv_usage = kv_cache_util x 100, new_tokens =
num_ctx_tokens, ctx_requests = num_ctx_requests, gen_tokens = num_generation_tokens, step_ms / device_step_ms
the two times; the engine is the line's ``rank``. ``currank_total_requests`` is this rank's fetched requests
over the worker's: with attention DP each rank takes its share (``_fetch_new_requests`` adds its own part to
the first count, every new request to the second), so a line where the two differ is a rank scheduling its
own batch (``dp_share``); without it every rank of the tensor-parallel group fetches them all and runs rank
0's batch, and ``TLLM_PROFILE_LOG_RANKS=all`` has each log that one batch again. The run model folds the steps into the stats interval
(:func:`diag.rules.endpoints` ``fold_steps``): throughputs are the interval's tokens over its length.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from diag.parsers.engine import ColumnSpec
from diag.parsers.formats import declare, record_parser
from diag.parsers.records import Header, StatsSample

ITER = declare(
    "trtllm-iter-log", "record",
    r"iter = (?P<iter>\d+), global_rank = (?P<grank>\d+), rank = (?P<rank>\d+), (?P<body>.*?)"
    r"states = (?P<states>\{[^}]*\})\s*$",
    samples=[
        # the stored py_executor.py: kv_cache_util, num_scheduled_requests first
        "[08/19/2026-14:11:49] [TRT-LLM] [I] [_torch][RANK 0] iter = 2, global_rank = 0, rank = 0, "
        "num_scheduled_requests = 0, kv_cache_util = 0.000, currank_total_requests = 0/1, host_step_time = 4.08ms, "
        "prev_device_step_time = 243.13ms, timestamp = 2026-08-19 14:11:49, states = {'num_ctx_requests': 1, "
        "'num_ctx_tokens': 4, 'num_generation_tokens': 0, 'cached_kv_tokens': 0}",
        # an engine's first step: no device time yet, no KV manager
        "[08/19/2026-14:11:48] [TRT-LLM] [I] [_torch][RANK 0] iter = 1, global_rank = 0, rank = 0, "
        "num_scheduled_requests = 1, kv_cache_util = N/A, currank_total_requests = 1/1, "
        "host_step_time = 812.5ms, prev_device_step_time = N/A, timestamp = 2026-08-19 14:11:48, "
        "states = {'num_ctx_requests': 1, 'num_ctx_tokens': 8192, 'num_generation_tokens': 0}",
        # release-1.0 form (9521caf4): num_scheduled_requests after the timestamp, no kv_cache_util
        "[TRT-LLM] [I] iter = 57, global_rank = 0, rank = 0, currank_total_requests = 0/256, "
        "host_step_time = 11.2ms, prev_device_step_time = 10.9ms, timestamp = 2025-09-01 03:04:05, "
        "num_scheduled_requests: 64, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
        "'num_generation_tokens': 64}",
    ],
    emits="stats",
    triggers=("iter = ",),
    engine="trtllm",
    doc="TensorRT-LLM's iteration log: one line per scheduler step (print_iter_log)",
)

_FIELD = re.compile(r"(\w+)(?: =|:) ([^,]+)")
_STATE = re.compile(r"'(\w+)': (\d+)")
_MS = re.compile(r"^([\d.]+)ms$")


def _ms(text: str | None) -> float | None:
    m = _MS.match(text or "")
    return float(m.group(1)) if m else None


def fields(body: str) -> dict[str, str]:
    """The ``key = value`` (and ``key: value``) segments between the ranks and the states."""
    return {k: v.strip() for k, v in _FIELD.findall(body)}


def step_of(m: re.Match[str]) -> dict[str, object]:
    """One iteration line's figures in the neutral names (None where the line says N/A or lacks one)."""
    f = fields(m["body"])
    states = {k: int(v) for k, v in _STATE.findall(m["states"])}
    kv = f.get("kv_cache_util")
    sched = f.get("num_scheduled_requests")
    mine, _, fetched = f.get("currank_total_requests", "").partition("/")
    return _figures(int(m["rank"]), int(sched) if sched and sched.isdigit() else None,
                    kv if kv and kv != "N/A" else None, states.get("num_ctx_tokens"),
                    states.get("num_ctx_requests"), states.get("num_generation_tokens"),
                    _ms(f.get("host_step_time")), _ms(f.get("prev_device_step_time")),
                    mine.isdigit() and fetched.isdigit() and mine != fetched)


def _figures(rank: int, running: int | None, kv: str | None, new_tokens: int | None, ctx_requests: int | None,
             gen_tokens: int | None, step_ms: float | None, device_ms: float | None, shared: bool) -> dict[str, object]:
    return {"engine": rank, "running": running, "kv_usage": None if kv is None else round(float(kv) * 100, 6),
            "new_tokens": new_tokens, "ctx_requests": ctx_requests, "gen_tokens": gen_tokens, "step_ms": step_ms,
            "device_step_ms": device_ms, "steps": 1, "dp_share": True if shared else None}


@record_parser(ITER)
def _iteration(m: re.Match[str], line: int, hdr: Header, **kw: object) -> StatsSample:
    return StatsSample(line, variant="trtllm-iter", **step_of(m), **kw)  # type: ignore[arg-type]


LOCAL_TIME = re.compile(r"timestamp = (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d), ")


# The bulk path's and the line parser's fast path: a whole physical line that is exactly one iteration line of the
# stored py_executor.py under the Python logger's plain head (the PyTorch backend's rank tag, INFO), nothing around
# it. It gives the same record as the general path, which takes every other form (the release-1.0 order, Dynamo's
# head, pastes, torn and glued lines).
_FAST_HEAD = (r"\[(?P<stamp>\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d)\] \[TRT-LLM\] (?:\[MPI_Rank \d+\] )?\[I\] "
              r"\[_torch\]\[(?P<proc>RANK \d+)\] ")
_NUM = r"\d+(?:\.\d+)?"
_FAST_BODY = (
    r"iter = \d+, global_rank = \d+, rank = (?P<rank>\d+), num_scheduled_requests = (?P<sched>\d+), "
    r"kv_cache_util = (?:(?P<kv>\d+\.\d+)|N/A), currank_total_requests = (?P<mine>\d+)/(?P<fetched>\d+), "
    rf"host_step_time = (?P<host>{_NUM})ms, prev_device_step_time = (?:(?P<dev>{_NUM})ms|N/A), "
    r"timestamp = \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, states = \{'num_ctx_requests': (?P<ctx>\d+), "
    r"'num_ctx_tokens': (?P<ctx_tokens>\d+), 'num_generation_tokens': (?P<gen>\d+)(?:, 'cached_kv_tokens': \d+)?\}\s*")


def iter_from_groups(g: Mapping[str, str | None], line: int, ts: object, md: str | None,
                     proc: str | None) -> StatsSample:
    """The fast path's constructor: the same record as the general path's."""
    dev = g["dev"]
    return StatsSample(line, variant="trtllm-iter", **_figures(  # type: ignore[arg-type]
        int(g["rank"]), int(g["sched"]), g["kv"], int(g["ctx_tokens"]), int(g["ctx"]),  # type: ignore[arg-type]
        int(g["gen"]), float(g["host"]), None if dev is None else float(dev),  # type: ignore[arg-type]
        g["mine"] != g["fetched"]), ts=ts, md=md, proc=proc)


def _derived() -> dict[str, Any]:
    """The columns the groups give only through a sum, a scale or a comparison (as :func:`_figures`)."""
    import polars as pl

    return {"kv_usage": (pl.col("kv").cast(pl.Float64) * 100).round(6),
            "dp_share": pl.when(pl.col("mine") != pl.col("fetched")).then(True)}


ITER_COLUMNS = ColumnSpec(
    "stats", "currank_total_requests = ", (_FAST_HEAD + _FAST_BODY,),
    groups={"rank": "engine", "proc": "proc", "sched": "running", "ctx_tokens": "new_tokens",
            "ctx": "ctx_requests", "gen": "gen_tokens", "host": "step_ms", "dev": "device_step_ms"},
    constants={"variant": "trtllm-iter", "steps": 1},
    stamp="%m/%d/%Y-%H:%M:%S",
    derived=_derived,
    record=iter_from_groups,
)
