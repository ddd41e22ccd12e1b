"""Normalise one physical line: ANSI (real and mangled), carriage returns, wrapper prefixes,
glued records.

The output of :func:`logical_lines` is a list of ``(text, ext_ts)`` pairs: each is one log record
with every decoration removed, and ``ext_ts`` is an outer RFC3339 stamp (docker, CI) when one
was peeled off.
"""

from __future__ import annotations

import re

from .formats import declare

# Real escape sequences, then the copies of them that lost their ESC byte in pastes and shipped logs.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"                 # CSI: colours, cursor moves, erase
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"      # OSC: titles, hyperlinks
    r"|\x1b[@-Z\\-_]"                          # two-byte escapes
    r"|(?:\^\[|#033|\ufffd|\\x1b|\\033|\\e)\[[0-9;]*[A-Za-z]"  # caret, syslog octal, U+FFFD, escaped text
    r"|\[\d{1,3}(?:;\d{1,3})*m"               # bare "[0;36m" with the ESC byte lost ("[m" is too often text)
    r"|\x1b"                                   # stray ESC
)
# A record torn inside an escape sequence leaves "...\x1b[0;3" at one line's end and "6m(" at the next's start.
_TORN_TAIL = re.compile(r"(?:(?:\x1b|\^\[|#033|\ufffd)\[[0-9;]*|\[\d{1,3};\d{0,3})$")
_TORN_HEAD = re.compile(r"^[\d;]{1,8}m(?=\(|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) |\d{4}-\d\d-\d\d)")
_CARET_CR = re.compile(r"(?:\^M)+$")

PROGRESS = declare(
    "progress-bar", "noise",
    r"\d{1,3}%\s*(?:Completed\s*)?\|[^|]*\|\s*\d+/\d+|\d+(?:\.\d+)?(?:it|s)/(?:s|it)\]\s*$",
    samples=[
        "Processed prompts:  45%|████▌     | 23/51 [00:04<00:05,  5.13it/s, est. speed input: 812.40 toks/s]",
        "Adding requests:  60%|██████    | 3/5 [00:07<00:04,  2.41s/it]",
    ],
    emits="progress-bar",
    triggers=("%|", "% Completed |"),
    doc="tqdm bars; rewritten in place with \\r, so several may share one physical line",
)

# Wrapper prefixes, peeled repeatedly from the left. Each keeps its own samples.
SRUN = declare(
    "srun-label", "prefix", r"^(?P<task>0|[1-9]\d{0,4}): ",
    samples=[
        "0: 2025-05-13T13:47:38.880Z  INFO engine._handle_process_request: Added request 1dc1.",
        "12: (EngineCore_DP3 pid=456) INFO 08-06 12:34:56 [core.py:95] Initializing a V1 LLM engine",
    ],
    emits="srun",
)
EXT_STAMP = declare(
    "container-stamp", "prefix",
    r"^\[?(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?)\]?\s+"
    r"(?=\(|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d|\[?\w+\.py:\d+\]|\d{4}-\d\d-\d\dT)",
    samples=[
        "2025-10-15T00:02:38.756689123Z (APIServer pid=1) INFO 10-14 17:02:38 [loggers.py:123] Engine 000: x",
        "[2025-03-10T15:07:20Z] INFO 03-10 08:07:20 [gpu_model_runner.py:1067] Model loading took 0.2389 GB",
    ],
    emits="container",
)
COMPOSE = declare(
    "compose-gutter", "prefix", r"^(?:[\w.-]+)?\s*\|\s(?=\S|\s+\S)\s*",
    samples=[
        "vllm  | INFO 02-12 10:01:02 [api_server.py:912] vLLM API server version 0.7.2",
        "  | [2025-03-10T15:07:20Z] ERROR 03-10 08:07:20 [core.py:302] EngineCore hit an exception",
    ],
    emits="compose",
)
JOURNALD = declare(
    "journald", "prefix",
    r"^(?:[^\W\d_]{3,5}\.? [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[+-]\d{4}|Z)) \S+ [\w.@/()-]+(?:\[\d+\])?: ",
    samples=[  # the month is the locale's abbreviation (%b): "Aug", "déc.", "août"
        "Aug 19 18:34:30 vllm vllm[8707]: (APIServer pid=8707)     return cls(",
        # https://github.com/LMCache/LMCache/issues/2106
        "déc. 19 02:07:16 s-a60003 bash[2211352]: (EngineCore_DP0 pid=2211352) [2025-12-19 02:07:16,164] LMCache "
        "WARNING: The cache block is in the storage, but it can't be retrieved (cache_engine.py:1473:lmcache.v1.cache_engine)",
        # https://github.com/tstack/lnav/issues/1086
        "nov. 29 20:23:37 uqbar rtkit-daemon[2654]: Supervising 0 threads of 0 processes of 0 users.",
        "Sep  2 07:01:12 gpu-node-3 vllm[112]: INFO 09-02 07:01:12 [loggers.py:271] Engine 000: idle",
        "2025-09-02T07:01:12+0000 gpu-node-3 vllm[112]: INFO 09-02 07:01:12 [loggers.py:271] Engine 000: idle",
    ],
    emits="journald",
)
GREP_FILE = declare(
    "grep-file", "prefix", r"^[\w./-]+\.(?:log|out|err|txt)(?::\d+)?[:-](?=\S)",
    samples=[
        "vllm_p3.log:(Worker_DP3_TP1_EP25 pid=649) ERROR 08-29 09:12:47 [mooncake_connector.py:233] Force freed",
        "logs/nodeA_decode_w0.out:INFO 08-06 12:34:56 [loggers.py:271] Engine 000: Avg prompt throughput",
    ],
    emits="grep",
)
DJL = declare(
    "djl-wrapper", "prefix", r"^\[?(?:INFO|WARN|ERROR|DEBUG) ?\] [\w.]+ - [\w-]+: ",
    samples=[
        "[INFO ] PyProcess - W-210-model-stdout: INFO 02-14 08:23:25 llm_engine.py:429] init engine took 15.79 seconds",
        "INFO ] PyProcess - W-210-model-stdout: #033[1;36m(VllmWorkerProcess pid=237)#033[0;0m INFO 02-14 08:23:25 x.py:1] y",
    ],
    emits="djl",
)
QUOTE = declare(
    "markdown-quote", "prefix", r"^> ?",
    samples=["> TYPE vllm:num_requests_running gauge", "> vllm:num_requests_running 0.0"],
    emits="quote",
)
RANK_TAG = declare(
    "rank-tag", "prefix", r"^\[(?:rank\d+|[A-Za-z][\w-]{0,30})\]:\s?",
    samples=[
        "[rank0]:   File \"/opt/vllm/vllm/entrypoints/llm.py\", line 309, in generate",
        "[vllm]: (VllmWorkerProcess pid=89) ERROR 07-28 23:29:37 multiproc_worker_utils.py:226]     return GroupCoordinator(",
    ],
    emits="rank",
    doc="torch.distributed's [rankN]: and a launcher's [name]: tag",
)
KUBECTL = declare(
    "kubectl-prefix", "prefix",
    r"^\[pod/[\w.-]+/[\w.-]+\] "
    r"|^[a-z0-9][a-z0-9.-]*-[a-z0-9]+ [a-z0-9][a-z0-9-]* (?=\(|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d|\d{4}-\d\d-\d\d|\[)",
    samples=[
        "[pod/vllm-decode-0/vllm] (APIServer pid=1) INFO 08-06 12:34:56 [loggers.py:271] Engine 000: idle",
        "vllm-prefill-7d9f8-x2x4q vllm (EngineCore_DP0 pid=7) ERROR 08-06 12:34:56 [core.py:1] EngineCore failed to start.",
    ],
    emits="kubectl",
    doc="kubectl logs --prefix and stern (pod, container) prefixes",
)
BOX = declare(
    "box-gutter", "prefix", r"^\s*[│┃║]\s?",
    samples=[
        "│ 2026-08-06T12:34:56.123456Z  INFO dynamo_llm::kv_router: selected worker │",
        "┃ (EngineCore_DP0 pid=7) ERROR 08-06 12:34:56 [core.py:1] EngineCore failed to start. ┃",
    ],
    emits="box",
    doc="text pasted from a box-drawing frame (rich panels, TUIs): the right border is removed too",
)
INLINE_CODE = declare(
    "inline-code", "prefix", r"^`+(?=\S)",
    samples=[  # https://github.com/sgl-project/sglang/issues/4602, https://github.com/vllm-project/vllm-ascend/issues/7792
        "`RuntimeError: Decode out of memory. Try to lower your batch size.",
        "`E0328 09:06:16.412760 112112 ascend_direct_transport.cpp:836] Transfer slice failed with status: 503900",
    ],
    emits="code",
    doc="a log line quoted as inline code in an issue: the opening backticks, and a closing one left unpaired",
)
CI_STAMP = declare(
    "ci-stamp", "prefix",
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z) (?!\s*(?:TRACE|DEBUG|INFO|WARN|ERROR)\s)",
    samples=[  # https://github.com/sgl-project/sglang/pull/28291 (a GitHub Actions job log)
        "2026-06-17T16:25:18.5969653Z [2026-06-17 16:25:18] Scheduler hit an exception: Traceback (most recent call last):",
        '2026-06-17T16:25:18.5971982Z   File "/actions-runner/_work/sglang/python/sglang/srt/managers/scheduler.py", '
        "line 4113, in run_scheduler_process",
    ],
    emits="ci",
    doc="GitHub Actions' stamp on every line of a job log (seven fraction digits, UTC): any text follows, a "
        "traceback's indented frames too; a Dynamo tracing head after it is no stamp of this kind",
)
STREAM_LOGGER = declare(
    "stream-logger", "prefix",
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)? \| (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \| [\w.-]+ \| ",
    samples=[  # https://github.com/vllm-project/vllm/issues/414 (FastChat's model worker)
        "2024-01-22 14:32:27 | ERROR | stderr | Traceback (most recent call last):",
        "2024-01-22 14:32:27 | INFO | stdout | INFO 01-22 14:32:19 llm_engine.py:73] Initializing an LLM engine",
    ],
    emits="stream-logger",
    doc="a launcher re-logging a process's stdout/stderr ('%(asctime)s | %(levelname)s | %(name)s | "
        "%(message)s': FastChat, gradio apps): the level word is the launcher's, the record its message",
)
SUBPROCESS_RELAY = declare(
    "dynamo-subprocess-relay", "prefix",
    r"^\s*(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) +"
    r"(?:TRACE|DEBUG|INFO|WARN|ERROR) +dynamo_run::subprocess: ",
    samples=[  # launch/dynamo-run/src/subprocess.rs start(): strip_log_prefix's own examples, relayed
        "2025-05-06T09:38:50.412Z DEBUG dynamo_run::subprocess: [async_llm.py:252] Added request 1",
        "2025-05-06T11:58:51.007Z DEBUG dynamo_run::subprocess: Capture cuda graph bs [1, 2, 4, 8]",
        '2025-05-06T11:58:52.118Z DEBUG dynamo_run::subprocess:   File "/opt/venv/lib/python3.12/site-packages/'
        'vllm/v1/engine/core.py", line 76, in __init__',
    ],
    emits="relay",
    doc="'dynamo run' relaying its engine subprocess's stdout and stderr line by line (tracing::debug! in module "
        "dynamo_run::subprocess, after strip_log_prefix took off a vLLM 'LEVEL MM-DD HH:MM:SS ' or SGLang "
        "'[YYYY-MM-DD HH:MM:SS] ' head): the level is the relay's, never the relayed line's, so the stamp is peeled "
        "and the line is read as the subprocess wrote it (a traceback's frames, an exception line)",
)
# What a launcher's stamp may stand before: a record head of an engine (a process prefix, a level and month-day, a
# file tag, glog) or a piece of a traceback.
_HEAD_AFTER_STAMP = (r"\([\w.-]+ pid=\d+|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d|\[?\w+\.py:\d+\]"
                     r"|[IWEF](?:\d{4})?\d{4} \d\d:|Traceback \(most recent|\s+File \"")
LAUNCHER_STAMP = declare(
    "launcher-stamp", "prefix",
    r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)? "
    r"(?:(?:\[[A-Za-z]{3,8}\] +)?(?:\([A-Za-z][\w .-]{0,40}\) +)?(?=" + _HEAD_AFTER_STAMP + r")"
    r"|(?!\s*(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|CRITICAL)\b|\s*[\[|,(<{-]|\s*$))",
    samples=[  # https://github.com/lemonade-sdk/vllm-rocm/issues/5, https://github.com/vllm-project/vllm/issues/5371
        "2026-06-09 14:01:54.604 [Info] (Process) (APIServer pid=42406)     return func(*args, **kwargs)",
        "2024-06-10 13:26:25 Exception in callback functools.partial(<function _raise_exception_on_finish>)",
        "2024-06-10 13:26:25     task.result()",
    ],
    emits="launcher",
    doc="a launcher's or a log viewer's own date and time on each line (docker desktop, a desktop app's process "
        "log): with its bracketed level and parenthesised tag before an engine's head or a traceback line; a bare "
        "stamp (one space, no level word, no bracket after it: no head of the engines or of srtctl) before any text",
)
_BOX_RIGHT = re.compile(r"\s*[│┃║]\s*$")
_CODE_CLOSE = re.compile(r"`+\s*$")
_PEELERS = (SRUN.regex, EXT_STAMP.regex, CI_STAMP.regex, SUBPROCESS_RELAY.regex, STREAM_LOGGER.regex, JOURNALD.regex, GREP_FILE.regex, DJL.regex, KUBECTL.regex, RANK_TAG.regex,
            BOX.regex, COMPOSE.regex, QUOTE.regex, INLINE_CODE.regex, LAUNCHER_STAMP.regex)

# Where a second record starts inside one physical line (glued records).
_GLUE = re.compile(
    r"(?:\((?:[A-Za-z][\w .=-]*?) pid=\d+(?:, ip=[^)]*)?\)\s*)+(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"
    r"|(?<![\w)=])(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[?[\w./-]+:\d+"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\s+(?:TRACE|DEBUG|INFO|WARN|ERROR)\s"
)


def strip_ansi(text: str) -> str:
    """Remove real and mangled ANSI escapes (no other change)."""
    if "[" not in text and "\x1b" not in text:
        return text
    return _ANSI.sub("", text)


def peel(text: str) -> tuple[str, str | None, int | None]:
    """Remove wrapper prefixes (srun, docker stamp, compose, journald, grep, DJL, quote).

    Returns the text, the outer RFC3339 stamp if one was peeled, and the srun task label.
    """
    ext_ts = None
    task = None
    for _ in range(6):
        for rx in _PEELERS:
            m = rx.match(text)
            if m and m.end() > 0:
                if rx in (EXT_STAMP.regex, CI_STAMP.regex, SUBPROCESS_RELAY.regex):
                    ext_ts = m.group("ts")
                elif rx is SRUN.regex and task is None:
                    task = int(m.group("task"))
                elif rx is BOX.regex:
                    text = _BOX_RIGHT.sub("", text)
                text = text[m.end():]
                break
        else:
            break
    return text, ext_ts, task


def close_code(text: str) -> str:
    """``text`` without the backticks closing an inline-code quote (a closing run left unpaired on the line: a
    message's own `quoted` words keep theirs)."""
    if "`" not in text or text.count("`") % 2 == 0:
        return text
    return _CODE_CLOSE.sub("", text)


def split_glued(text: str) -> list[str]:
    """Split a line that holds several records written without a newline between them."""
    starts = [m.start() for m in _GLUE.finditer(text) if m.start() > 0]
    if not starts:
        return [text]
    parts, prev = [], 0
    for s in starts:
        if s > prev:
            piece = text[prev:s]
            if piece.strip():
                parts.append(piece.rstrip())
            prev = s
    parts.append(text[prev:])
    return parts


def logical_lines(raw: str) -> list[tuple[str, str | None, int | None]]:
    """Turn one physical line into its records: (cleaned text, outer timestamp, srun task)."""
    line = raw.rstrip("\r\n")
    line = _CARET_CR.sub("", line)
    segments = line.split("\r") if "\r" in line else [line]
    out: list[tuple[str, str | None, int | None]] = []
    for seg in segments:
        if not seg.strip():
            continue
        seg = strip_ansi(seg)
        seg = _TORN_TAIL.sub("", seg)
        seg = _TORN_HEAD.sub("", seg)
        seg, ext_ts, task = peel(seg)
        for piece in split_glued(close_code(seg)):
            piece, inner_ts, inner_task = peel(piece)
            if piece.strip():
                out.append((piece, inner_ts or ext_ts, task if inner_task is None else inner_task))
    return out


def continuation(raw: str, task: int | None = None) -> str:
    """A physical line taken as the rest of a torn record: decorations off, prefixes kept."""
    line = _CARET_CR.sub("", raw.rstrip("\r\n"))
    if task is not None and line.startswith(f"{task}: "):
        line = line[len(f"{task}: "):]
    return _TORN_HEAD.sub("", strip_ansi(line))


def clean(raw: str) -> str:
    """The text of a physical line with decorations removed (records joined by newlines)."""
    return "\n".join(t for t, _, _ in logical_lines(raw))
