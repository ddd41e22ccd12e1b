"""Record heads: the timestamped shapes a line in a run directory can start with."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache

from .formats import REGISTRY, LineFormat, declare, formats
from .records import Header

DIGITS = "0123456789"

DYNAMO = declare(
    "dynamo-tracing", "header",
    r"^(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d))\s+"
    r"(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR)\s+(?:(?P<src>[^\s:]\S*?):\s)?(?P<msg>.*)$",
    samples=[
        "2026-08-06T12:34:56.123456Z  INFO dynamo_runtime::distributed: Initialized distributed runtime",
        "2025-06-25T10:49:23.881Z  WARN serving.save_dynamo_state: state file not found  ",
        "2025-05-13T13:47:39.069Z  INFO metrics.log: Avg prompt throughput: 0.0 tokens/s, Avg generation "
        "throughput: 30273.6 tokens/s, Running: 8 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 1.4%, "
        "CPU KV cache usage: 0.0%.",
    ],
    emits="dynamo",
    doc="Dynamo's Rust tracing text (and vLLM main-process records re-formatted by Dynamo)",
)
DYNAMO_JSONL = declare(
    "dynamo-jsonl", "header", r'^\{.*"(?:level|lvl|levelname)"\s*:',
    samples=[
        '{"time":"2026-08-06T12:34:56.123456Z","level":"INFO","target":"dynamo_llm::kv_router","message":"Selected worker"}',
        '{"time":"2026-08-06T12:35:06.000001Z","level":"ERROR","target":"log","message":"EngineCore failed to start."}',
        # vLLM --logging-config with python-json-logger's JsonFormatter (keys named after LogRecord attributes)
        '{"asctime": "2026-08-12 14:05:14,123", "levelname": "INFO", "name": "vllm.v1.metrics.loggers", "message": '
        '"Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 3 reqs, '
        'Waiting: 0 reqs, GPU KV cache usage: 4.0%"}',
    ],
    emits="dynamo-jsonl",
    doc="JSON-lines records: Dynamo's tracing (time, level, target) and vLLM's JSON formatter (asctime or "
        "created, levelname, filename:lineno or name)",
)
PYTHON_LOGGING = declare(
    "python-logging-record", "header",
    r"^(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:,\d+)? \[(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\] "
    r"(?P<src>[A-Za-z_]\w*(?:\.\w+)+): (?P<msg>.*)$",
    samples=[  # sglang/srt/entrypoints/http_server.py:425 and :2520 (0.5.23) under a logging config
        "2026-06-07 10:59:31,843 [INFO] sglang.srt.entrypoints.http_server: Warmup ended",
        "2026-06-07 10:59:32,140 [INFO] sglang.srt.entrypoints.http_server: End of disaggregation warmup",
    ],
    emits="python",
    doc="an engine under Python logging with its logger's dotted name ('%(asctime)s [%(levelname)s] %(name)s: "
        "%(message)s'); srtctl's orchestrator lines carry no logger name",
)
ORCHESTRATOR = declare(
    "srtctl-orchestrator", "header",
    r"^(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:,\d+)? \[(?P<level>[A-Z]+)\] (?P<msg>.*)$",
    samples=[
        "2026-04-21 14:11:37 [INFO] Model is not ready, waiting for 4 prefills and 1 decodes. Have 0 prefills and 0 decodes.",
        "2026-04-21 14:40:02 [ERROR] Critical process 'decode_0_nodeC' exited with code 1",
    ],
    emits="orchestrator",
)

UCX = declare(
    "ucx-record", "header",
    r"^\[(?P<epoch>\d{10}\.\d{1,9})\]\s+\[(?P<src>[^\]]+)\]\s+(?P<msg>.*)$",
    samples=[
        "[1784621081.896649] [pod-0:537  :1]       srd_iface.c:221  UCX  ERROR send completion[0] with error on "
        "rdmap132s0/0x55cf4425cfb0: Work Request Flushed Error, vendor_err 0x1",
        "[1788408183.906419] [gb200-r05-n12:3673:0]          sock.c:334  UCX  ERROR recv(fd=180) failed: "
        "Connection reset by remote peer",
    ],
    emits="ucx",
    doc="UCX's own log lines (NIXL's transport): epoch-seconds time, host:pid:thread",
)

GLOG = declare(
    "glog-record", "header",
    r"^\[?(?P<level>[IWEF])(?:(?P<year>\d{4})?(?P<mo>\d\d)(?P<day>\d\d) (?P<time>\d\d:\d\d:\d\d)(?:\.\d+)?\s+\d+\s)?\s*"
    r"(?P<src>[\w.-]+:\d+)\]\s?(?P<msg>.*)$",
    samples=[  # https://github.com/vllm-project/vllm-ascend/issues/7792, https://github.com/kvcache-ai/Mooncake/issues/292
        "E0328 09:06:16.412760 112112 ascend_direct_transport.cpp:836] Transfer slice failed with status: 503900",
        "W0423 16:34:48.911494 217200 client.cpp:353] Transfer incomplete, retrying... (attempt 1/3)",
        "[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3)",
        # glog 0.7's default FLAGS_log_year_in_prefix (logging.cc: the year before month and day)
        "E20250417 19:46:42.567034   481 master_client.cpp:246] Failed to mount segment due to rpc error",
    ],
    emits="glog",
    triggers=(".cpp:", ".cc:", ".cu:"),
    doc="glog and its kin (the C++ of Mooncake, NIXL, UCX wrappers, torch's c10 logging): a level letter "
        "(I W E F: F is fatal), the year when glog's log_year_in_prefix is on (0.7's default), month-day and time, thread id, file:line] message; c10's short '[E file:line]'. Its "
        "triggers (a C++ source's file:line) make its lines candidates: an E or F line is matched to its log site",
)
RUST_TRACING = declare(
    "rust-tracing-bare", "header",
    r"^(?P<level>TRACE|DEBUG|INFO|WARN|ERROR)\s+(?:\w+\{[^{}]*\}:\s)?(?P<src>[A-Za-z_]\w*(?:::\w+)+):\s(?P<msg>.*)$",
    samples=[  # https://github.com/ai-dynamo/dynamo/issues/1188
        "ERROR dynamo_runtime::worker: Application shutdown with error: Failed to connect to etcd server",
        "INFO dynamo_llm::http::service::service_v2: Starting HTTP service on: 0.0.0.0:8080",
    ],
    emits="dynamo",
    doc="Dynamo's Rust tracing lines pasted without their stamp: level, target (a Rust path), message",
)
EASYLOG = declare(
    "easylog-record", "header",
    r"^(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?) (?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL|FATAL)"
    r" *\[\d+\] \[(?P<src>[\w.-]+:\d+)\] ?(?P<msg>.*)$",
    samples=[  # https://github.com/vllm-project/vllm/pull/12957 (Mooncake store over coro_rpc)
        "2025-04-17 19:46:42.566927 ERROR    [975] [coro_rpc_client.hpp:978] read rpc body failed, error msg:End of "
        "file. close the socket.",
        "2025-04-17 19:46:40.100 INFO     [953] [coro_rpc_server.hpp:289] begin to listen",
    ],
    emits="easylog",
    doc="yalantinglibs' easylog (coro_rpc, under Mooncake's store and master): appender.hpp write_record, local "
        "time, the severity padded to 8 characters, '[tid] ', '[file:line] ', message",
)
# A level letter of a glog head as the level word of the others.
GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
LEVEL_ALIASES = {"WARN": "WARNING", "TRACE": "DEBUG"}
_LEVEL = {**LEVEL_ALIASES, "FATAL": "CRITICAL"}


def _json_time(obj: dict) -> str | None:
    """ISO time of a JSON record: ``time`` (Dynamo), ``asctime`` ("2026-08-12 14:05:14,123", logging's
    default, local time taken as UTC like every zone-less stamp), else ``created`` (epoch seconds)."""
    if isinstance(obj.get("time"), str):
        return obj["time"]
    asc = obj.get("asctime")
    if isinstance(asc, str) and len(asc) >= 19 and asc[4] == "-" and asc[10] in " T":
        return asc[:10] + "T" + asc[11:].replace(",", ".")
    created = obj.get("created")
    if isinstance(created, int | float) and not isinstance(created, bool):
        return datetime.fromtimestamp(float(created), tz=UTC).isoformat()
    return None


def _json_source(obj: dict) -> str | None:
    if obj.get("filename") and obj.get("lineno") is not None:
        return f"{obj['filename']}:{obj['lineno']}"
    src = obj.get("target") or obj.get("name")
    return str(src) if src else None


def _jsonl_head(m: re.Match[str], text: str) -> Header | None:
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    msg = obj.get("message") or (obj.get("fields") or {}).get("message") or ""
    lvl = str(obj.get("level") or obj.get("lvl") or obj.get("levelname") or "").upper()
    return Header("dynamo-jsonl", LEVEL_ALIASES.get(lvl, lvl) or None, iso=_json_time(obj), source=_json_source(obj),
                  msg=str(msg))


def _ucx_head(m: re.Match[str], text: str) -> Header:
    iso = datetime.fromtimestamp(float(m["epoch"]), tz=UTC).isoformat()
    lvl = "ERROR" if " ERROR " in m["msg"] else ("WARNING" if " WARN " in m["msg"] else None)
    return Header("ucx", lvl, iso=iso, source=m["src"].strip(), msg=m["msg"].strip())


def _glog_head(m: re.Match[str], text: str) -> Header:
    """glog's head: local time, with its year (an ISO stamp) or without (a month-day the log's year completes)."""
    if m["year"]:
        return Header("glog", GLOG_LEVELS[m["level"]], iso=f"{m['year']}-{m['mo']}-{m['day']}T{m['time']}",
                      source=m["src"], msg=m["msg"], local=True)
    md = f"{m['mo']}-{m['day']} {m['time']}" if m["mo"] else None
    return Header("glog", GLOG_LEVELS[m["level"]], md=md, source=m["src"], msg=m["msg"])


_HEADS: dict[LineFormat, tuple[str, int, str, Callable[[re.Match[str], str], Header | None]]] = {
    DYNAMO_JSONL: ("{", 10, "", _jsonl_head),
    UCX: ("[", 31, "", _ucx_head),
    GLOG: ("IWEF[", 33, "", _glog_head),
    RUST_TRACING: ("TDIWE", 44, "", lambda m, t: Header("dynamo", LEVEL_ALIASES.get(m["level"], m["level"]),
                                                        source=m["src"], msg=m["msg"])),
    DYNAMO: (DIGITS, 40, "", lambda m, t: Header("dynamo", LEVEL_ALIASES.get(m["level"], m["level"]), iso=m["iso"],
                                                 source=m["src"], msg=m["msg"])),
    PYTHON_LOGGING: (DIGITS, 41, "", lambda m, t: Header("python", m["level"], iso=m["iso"], source=m["src"],
                                                         msg=m["msg"])),
    ORCHESTRATOR: (DIGITS, 42, "", lambda m, t: Header("orchestrator", m["level"], iso=m["iso"], msg=m["msg"])),
    EASYLOG: (DIGITS, 43, "", lambda m, t: Header("easylog", _LEVEL.get(m["level"], m["level"]), iso=m["iso"],
                                                  source=m["src"], msg=m["msg"], local=True)),
}
for _fmt, (_lead, _rank, _guard, _head) in _HEADS.items():
    object.__setattr__(_fmt, "lead", _lead)
    object.__setattr__(_fmt, "rank", _rank)
    object.__setattr__(_fmt, "guard", _guard)
    object.__setattr__(_fmt, "parse", _head)


@cache
def _dispatch(first: str, registered: int) -> tuple[LineFormat, ...]:
    """The header formats a line starting with ``first`` can have, in rank order (``registered`` keys the
    cache to the registry's size: an engine loaded later adds its heads)."""
    heads = [f for f in formats("header") if f.parse is not None
             and (not f.lead or first in f.lead)]
    return tuple(sorted(heads, key=lambda f: f.rank))


def parse_header(text: str) -> Header:
    """Classify a cleaned line and split off its head: the first declared head (by rank) that matches."""
    for fmt in _dispatch(text[:1], len(REGISTRY)):
        if fmt.guard and fmt.guard not in text[:120]:
            continue
        m = fmt.regex.match(text)
        if m is not None:
            hdr = fmt.parse(m, text)  # type: ignore[misc]
            if hdr is not None:
                return hdr
    return Header("unknown", msg=text)
