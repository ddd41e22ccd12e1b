"""TensorRT-LLM's record heads: its Python logger's and its C++ logger's, both in the node's local time.

``tensorrt_llm/logger.py`` (027cd518) ``Logger.log`` prefixes every message with ``[TRT-LLM] {severity} ``
(``[TRT-LLM] [MPI_Rank N] {severity} `` when the MPI world has more than one rank), the severity one of
``[F] [E] [W] [I] [V]``, and ``logging.basicConfig(format='[%(asctime)s] %(message)s',
datefmt='%m/%d/%Y-%H:%M:%S')`` stamps it; the PyTorch backend's records add ``[_torch][RANK N] `` after the
severity (as srt-slurm's real worker logs show). ``cpp/include/tensorrt_llm/common/logger.h`` (00f83d1b)
prefixes ``{timestamp} [TRT-LLM] {severity} `` (``[D]`` for debug, `` [rank]`` after the severity when it
logs one), the stamp from ``common/timestampUtils.cpp`` (3585984b): ``%m-%d-%Y %H:%M:%S.ffffff`` of
``std::localtime``. Under Dynamo's own logging the same message follows a UTC Dynamo head instead.
"""

from __future__ import annotations

import re

from diag.parsers.formats import LineFormat, declare, record_parser
from diag.parsers.records import Header

_LEVELS = {"F": "CRITICAL", "E": "ERROR", "W": "WARNING", "I": "INFO", "V": "DEBUG", "D": "DEBUG"}
# what follows [TRT-LLM]: the MPI rank (Python, world > 1), the severity, the PyTorch backend's rank tag
# or the C++ logger's rank
_BODY = (r"\[TRT-LLM\] (?:\[MPI_Rank (?P<mpi>\d+)\] )?\[(?P<sev>[FEWIVD])\] "
         r"(?:(?:\[_torch\])?\[RANK (?P<rank>\d+)\] |\[(?P<crank>\d+)\] )?(?P<msg>.*)$")


def _declare(name: str, pattern: str, samples: list[str], lead: str, rank: int, doc: str) -> LineFormat:
    return declare(name, "header", pattern + _BODY, samples=samples, emits="trtllm", engine="trtllm", lead=lead,
                   rank=rank, guard="[TRT-LLM]", doc=doc)


PYTHON = _declare(
    "trtllm-record", r"^\[(?P<mon>\d\d)/(?P<day>\d\d)/(?P<year>\d{4})-(?P<time>\d\d:\d\d:\d\d)\] ",
    ["[08/19/2026-14:11:49] [TRT-LLM] [I] [_torch][RANK 0] iter = 2, global_rank = 0, rank = 0, "
     "num_scheduled_requests = 0, kv_cache_util = 0.000, currank_total_requests = 0/1, host_step_time = 4.08ms, "
     "prev_device_step_time = 243.13ms, timestamp = 2026-08-19 14:11:49, states = {'num_ctx_requests': 1, "
     "'num_ctx_tokens': 4, 'num_generation_tokens': 0, 'cached_kv_tokens': 0}",
     "[08/19/2026-14:02:10] [TRT-LLM] [MPI_Rank 3] [W] Logger level already set from environment. Discard new "
     "verbosity: info",
     "[08/19/2026-14:02:11] [TRT-LLM] [E] Requested log level debug2 is invalid. Using 'warning' instead"],
    "[", 32, "TensorRT-LLM's Python logger: local month/day/year time, [TRT-LLM], its MPI rank, severity, rank tag")
NATIVE = _declare(
    "trtllm-native-record",
    r"^(?P<mon>\d\d)-(?P<day>\d\d)-(?P<year>\d{4}) (?P<time>\d\d:\d\d:\d\d(?:\.\d{1,6})?) ",
    ["08-19-2026 14:02:31.123456 [TRT-LLM] [I] Set logger level to [I]",
     "08-19-2026 14:02:31.200001 [TRT-LLM] [W] [3] Set logger level to [W]"],
    "0123456789", 39, "TensorRT-LLM's C++ logger: local month-day-year time with microseconds, [TRT-LLM], severity, rank")
BARE = _declare(
    "trtllm-bare-record", "^",
    ["[TRT-LLM] [I] [_torch][RANK 0] iter = 5, global_rank = 0, rank = 0, num_scheduled_requests = 1, "
     "kv_cache_util = 0.100, currank_total_requests = 1/1, host_step_time = 5.0ms, prev_device_step_time = 5.2ms, "
     "timestamp = 2026-07-22 00:00:00, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
     "'num_generation_tokens': 256, 'cached_kv_tokens': 0}",
     "[TRT-LLM] [W] Logger level already set from environment. Discard new verbosity: info"],
    "[", 33, "TensorRT-LLM's logger message without a stamp (a handler that prints the message alone)")


# The C++ logger before the short prefix (cpp/include/tensorrt_llm/common/logger.h as of 2023-24, index id 3300805310:
# kPREFIX "[TensorRT-LLM]", getPrefix "%s[%s] " / "%s[%s][%d] " with the level's name; logger.cpp 23bc5b7c prints
# "[TensorRT-LLM][WARNING] Invalid logger level ..."), no stamp.
_WORDS = {"TRACE": "DEBUG", "DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARNING", "ERROR": "ERROR"}
LEGACY = declare(
    "trtllm-legacy-record", "header",
    r"^\[TensorRT-LLM\]\[(?P<word>TRACE|DEBUG|INFO|WARNING|ERROR)\](?:\[(?P<crank>\d+)\])? (?P<msg>.*)$",
    samples=["[TensorRT-LLM][INFO] Loaded engine size: 3404 MiB",
             "[TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp (/src/tensorrt_llm/cpp/runtime/worldConfig.cpp:99)",
             "[TensorRT-LLM][WARNING][1] Invalid logger level TLLM_LOG_LEVEL=x."],
    emits="trtllm", engine="trtllm", lead="[", rank=34, guard="[TensorRT-LLM]", triggers=("[TensorRT-LLM][",),
    doc="TensorRT-LLM's C++ runtime logger before 2024's short prefix (Triton's tensorrtllm backend prints it): "
        "[TensorRT-LLM], the level's name, the rank it logs, no stamp",
)


def _legacy(m: re.Match[str], text: str) -> Header:
    rank = m["crank"]
    return Header("trtllm", _WORDS[m["word"]], source=f"RANK {rank}" if rank else None, msg=m["msg"],
                  proc=f"RANK {rank}" if rank else None)


record_parser(LEGACY)(_legacy)


def _header(m: re.Match[str], text: str) -> Header:
    rank = m["rank"] or m["crank"] or m["mpi"]
    iso = None
    if "year" in m.re.groupindex:
        iso = f"{m['year']}-{m['mon']}-{m['day']}T{m['time']}"
    return Header("trtllm", _LEVELS[m["sev"]], iso=iso, source=f"RANK {rank}" if rank else None, msg=m["msg"],
                  proc=f"RANK {rank}" if rank else None, local=True)


for _fmt in (PYTHON, NATIVE, BARE):
    record_parser(_fmt)(_header)

_RANK = re.compile(r"\bRANK (\d+)\b")


def rank_of(source: str | None) -> int:
    """The rank a record's head names, else 0 (only rank 0 logs the iteration lines by default)."""
    m = _RANK.search(source or "")
    return int(m.group(1)) if m else 0
