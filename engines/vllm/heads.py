"""vLLM's record heads (and those of the tools that run inside or in front of it: LMCache, the vLLM router),
with the router's per-request line as noise."""

from __future__ import annotations

import re

from diag.parsers.formats import declare, record_parser
from diag.parsers.headers import DIGITS, LEVEL_ALIASES
from diag.parsers.records import Header

VLLM = declare(
    "vllm-record", "header",
    r"^(?:\((?P<proc>[^()]+?)(?: pid=(?P<pid>\d+))?(?:, ip=[^)]*)?\)\s*)*"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(?:(?P<md>\d\d-\d\d \d\d:\d\d(?::\d\d)?)|\d\d:\d\d:\d\d)"
    r"(?:[.,]\d+)?\s+"
    r"\[?(?P<src>[^\]\s]+?:\d+)(?:\[\]|\])?\s?(?P<msg>.*)$",
    samples=[
        "(EngineCore_DP3 pid=456) INFO 08-06 12:34:56 [core.py:95] Initializing a V1 LLM engine (v0.11.0) with config: model='x'",
        "INFO 02-28 21:48:18 metrics.py:161] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 9.1 tokens/s",
        "(APIServer pid=1) ERROR 10-20 03:12:01 [async_llm.py:485[] AsyncLLM output_handler failed.",
        "(APIServer pid=2640) ERROR 11-03 23:14 [serving_chat.py:1145]     async for res in result_generator:",
        # https://github.com/vllm-project/vllm/issues/54317: edited by its author (no pid, no date)
        "(Worker_TP3) ERROR 04:57:00 [multiproc_executor.py:1055]     executable(*tensor_list)",
    ],
    emits="vllm",
    doc="vLLM's formatter: optional (Proc pid=N) prefix, level, month-day time without year (a paste may drop "
        "its seconds, an edited one its pid or its date: no time then), [file:line]",
    engine="vllm", lead="", rank=50,
)
VLLM_PROC_ONLY = declare(
    "vllm-proc-line", "header",
    r"^(?:\((?P<proc>[^()]+?) pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)\s?)+(?P<msg>.*)$",
    samples=[
        "(APIServer pid=8707)   File \"/opt/vllm/lib/python3.12/site-packages/vllm/v1/engine/async_llm.py\", line 149",
        "(APIServer pid=1) INFO:     10.250.5.33:50840 - \"GET /metrics HTTP/1.1\" 200 OK",
    ],
    emits="vllm",
    doc="output of a vLLM subprocess that did not go through the logger (print, uvicorn, stderr)",
    engine="vllm", lead="(", rank=60,
)
VLLM_FILE_ONLY = declare(
    "vllm-file-tag", "header", r"^\[(?P<src>[\w./-]+\.py:\d+)\]\s(?P<msg>.*)$",
    samples=[
        "[engine.py:598] Stat logging is disabled. Set `disable_log_stats=False` argument to enable.",
        "[llm_engine.py:431] init engine (profile, create kv cache, warmup model) took 9.76 seconds",
    ],
    emits="vllm",
    doc="a vLLM record whose level and time were cut off in a paste",
    engine="vllm", lead="[", rank=32,
)
LMCACHE = declare(
    "vllm-lmcache-record", "header",
    r"^(?:\((?P<proc>[^()]+?) pid=(?P<pid>\d+)\)\s?)*\[?(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:,\d+)?\]\s*"
    r"LMCache (?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s?(?P<msg>.*?)"
    r"(?:\s\((?P<src>[\w.]+\.py:\d+):[\w.]+\))?\s*$",
    samples=[  # https://github.com/LMCache/LMCache/issues/1094, https://github.com/LMCache/LMCache/issues/1686
        "[2025-07-18 05:59:19,796] LMCache INFO: Retrieved 0 out of 130 out of total 130 tokens "
        "(cache_engine.py:508:lmcache.v1.cache_engine)",
        "(VllmWorker rank=1 pid=421) [2025-09-24 07:10:25,908] LMCache ERROR: Num retrieved tokens: 0, num expected "
        "tokens: 2560 (vllm_v1_adapter.py:480:lmcache.integration.vllm.vllm_v1_adapter)",
    ],
    emits="lmcache",
    doc="LMCache's logger (a KV connector inside vLLM's processes): full date and time, level, (file:line:module)",
    engine="vllm", lead="", rank=20, guard="LMCache ",
)
LMCACHE_EARLY = declare(
    "vllm-lmcache-early-record", "header",
    r"^(?:\((?P<proc>[^()]+?) pid=(?P<pid>\d+)\)\s?)*(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) LMCache: "
    r"(?P<msg>.*?) \[(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:,\d+)?\] -- (?:\S*/)?(?P<src>[\w.]+\.py:\d+)\s*$",
    samples=[  # LMCache lmcache/logging.py 0e65d2fc (its former basicConfig, kept as a comment)
        "INFO LMCache: Stored/updated 1 chunks, total time 0.00s [2024-11-19 20:08:43,749] -- "
        "/opt/lmcache/cache_engine.py:311",
        "ERROR LMCache: Failed to connect to the remote backend [2024-11-19 20:08:43,749] -- /opt/lmcache/backend.py:42",
    ],
    emits="lmcache",
    doc="LMCache 0.1's logger ('%(levelname)s LMCache: %(message)s [%(asctime)s] -- %(pathname)s:%(lineno)d'): the "
        "level first, the date and the source after the message",
    engine="vllm", lead="DIWEC(", rank=21, guard=" LMCache: ", triggers=(" LMCache: ",),
)
ROUTER = declare(
    "vllm-router-record", "header",
    r"^(?P<iso>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s+(?P<level>TRACE|DEBUG|INFO|WARN|ERROR)\s+"
    r"(?:\w+\{[^{}]*\}:\s)?(?P<target>\w+(?:::\w+)*):\s(?:(?P<src>\S+\.rs:\d+):\s)?(?P<msg>.*)$",
    samples=[  # https://github.com/vllm-project/router/pull/130, https://github.com/vllm-project/router/pull/47
        "2026-03-31 13:29:07  INFO vllm_router_rs::server: src/server.rs:1046: Starting server on 0.0.0.0:10001",
        '2026-01-15 02:30:17 DEBUG http_request{method=POST uri=/v1/completions version=HTTP/1.1 request_id='
        '"cmpl-Ed4lG6IlaUQRpaugWzpnIB6a"}: vllm_router_rs::routers::http::vllm_pd_router: '
        "src/routers/http/vllm_pd_router.rs:577: Prefill worker: <PREFILL_IP>:8000, Decode worker: "
        "http://<DECODE_IP>:8000, Path: /v1/completions",
    ],
    emits="router",
    doc="a P/D proxy's (vLLM router's) Rust tracing lines without the ISO 'T': date, level, span, target, file:line",
    engine="vllm", lead=DIGITS, rank=43,
)

PROXY_REQUEST = declare(
    "vllm-proxy-request-noise", "noise", r"Prefill worker: \S+, Decode worker: \S+|route_completion called",
    samples=[  # https://github.com/vllm-project/router/pull/47, https://github.com/vllm-project/router/pull/130
        '2026-01-15 02:30:17 DEBUG http_request{method=POST uri=/v1/completions version=HTTP/1.1 request_id='
        '"cmpl-Ed4lG6IlaUQRpaugWzpnIB6a"}: vllm_router_rs::routers::http::vllm_pd_router: '
        "src/routers/http/vllm_pd_router.rs:577: Prefill worker: <PREFILL_IP>:8000, Decode worker: "
        "http://<DECODE_IP>:8000, Path: /v1/completions",
        "2026-03-31 13:30:20  INFO vllm_router_rs::routers::http::vllm_pd_router: "
        "src/routers/http/vllm_pd_router.rs:1454: vLLM route_completion called, use_discovery=false",
    ],
    emits="request",
    doc="a P/D proxy routing one request to a prefill and a decode worker: a request served",
    engine="vllm",
)

# The commonest head, a whole plain record (nothing to peel, split or unmangle), for the line parser's
# one-match shortcut; its groups are the Header's.
PLAIN_HEAD = (r"(?:\((?P<proc>[^()]+?) pid=(?P<pid>\d+)\) )?(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
              r"(?P<md>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<src>[^\]\s]+:\d+)\] (?P<msg>[^\r\x1b]*)")


def _seconds(md: str) -> str:
    """A month-day time with its seconds (a paste that dropped them: the minute's start)."""
    return md if len(md) == 14 else f"{md}:00"


def _pid(m: re.Match[str]) -> int | None:
    return int(m["pid"]) if m["pid"] else None


record_parser(VLLM)(lambda m, t: Header("vllm", m["level"], md=m["md"] and _seconds(m["md"]), proc=m["proc"], pid=_pid(m),
                                        source=m["src"], msg=m["msg"]))
record_parser(VLLM_PROC_ONLY)(lambda m, t: Header("vllm", None, proc=m["proc"], pid=int(m["pid"]), msg=m["msg"]))
record_parser(VLLM_FILE_ONLY)(lambda m, t: Header("vllm", None, source=m["src"], msg=m["msg"]))
record_parser(LMCACHE)(lambda m, t: Header("lmcache", m["level"], iso=m["iso"], proc=m["proc"], pid=_pid(m),
                                           source=m["src"], msg=m["msg"]))
record_parser(LMCACHE_EARLY)(lambda m, t: Header("lmcache", m["level"], iso=m["iso"], proc=m["proc"], pid=_pid(m),
                                                 source=m["src"], msg=m["msg"]))
record_parser(ROUTER)(lambda m, t: Header("router", LEVEL_ALIASES.get(m["level"], m["level"]), iso=m["iso"],
                                          source=m["src"] or m["target"], msg=m["msg"]))

# A container runtime's UTC stamp before a vLLM head's local month-day time: the node's offset from UTC.
TZ_PROBE = (r"^\[?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\]?\s+(?:\([^)]*\)\s*)*"
            r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d)")
