"""Native crash reports and the C++ stack traces printed after them.

libstdc++'s terminate handler ('terminate called after throwing an instance of ...', catalog cause
``native_crash``) prints the exception's what(), and TensorRT-LLM's TllmException carries its own stack trace in
it (cpp/tensorrt_llm/common/tllmException.cpp getTrace: "%-3d %*p %s + %zu" per frame, innermost first,
demangled; a library without symbols as backtrace_symbols prints it). The report is held while its trace goes on
(the next physical line is one of its lines) and given back with what the frames' symbols say
(:func:`parsers.frames.judge_native`): its engine and phase, as a Python traceback's frames give them.
"""

from __future__ import annotations

import re
from dataclasses import replace

from . import frames
from .clean import logical_lines
from .formats import declare
from .headers import parse_header
from .records import Fault, Record

NATIVE_FRAME = declare(
    "native-frame", "record", r"^\s*\d{1,3}\s+0x[0-9a-fA-F]+\s+(?P<sym>[A-Za-z_(][^/\[]*?\)(?: const)?) \+ \d+\s*$",
    samples=[  # TensorRT-LLM cpp/tensorrt_llm/common/tllmException.cpp getTrace: "%-3d %*p %s + %zu", demangled
        "1       0x7f00aebbeb71 tensorrt_llm::common::throwRuntimeError(char const*, int, std::string const&) + 82",
        "12      0x7f00a1e0c3b2 tensorrt_llm::runtime::TllmRuntime::TllmRuntime(tensorrt_llm::runtime::RawEngine "
        "const&, nvinfer1::ILogger*, float, bool) + 1234",
    ],
    emits="traceback",
    triggers=(") + ",),
    doc="a symbolised frame of a C++ stack trace (innermost first) after a native crash report: its demangled "
        "symbol places the crash (:func:`parsers.frames.judge_native`); a frame of a library without symbols "
        "(`lib.so(+0x..) [0x..]`) names nothing",
)
# Any line of a native crash report's trace: an uncaught exception's what(), a numbered frame (symbolised or not).
NATIVE_CRASH = "native_crash"   # the catalog's cause of a native crash report, which such a trace follows
NATIVE_TRACE = re.compile(r"^\s*(?:what\(\):\s|\d{1,3}\s+0x[0-9a-fA-F]+\s+\S)")
MAX_SYMBOLS = 256    # a trace's frames kept for judging it
MAX_LINE = 1 << 14   # a physical line longer than this is no frame of a trace


def trace_line(raw: str | None) -> bool:
    """Whether a physical line goes on a native crash report's trace (its heads peeled)."""
    if not raw or len(raw) > MAX_LINE:
        return False
    pieces = logical_lines(raw)
    return len(pieces) == 1 and NATIVE_TRACE.match(parse_header(pieces[0][0]).msg) is not None


class NativeReports:
    """A parser's native crash report held while its stack trace is read (one at a time: a process prints its
    report and trace together on stderr)."""

    def __init__(self) -> None:
        self.fault: Fault | None = None
        self.symbols: list[str] = []

    def feed(self, msg: str, recs: list[Record], nxt: str | None) -> list[Record]:
        """``recs`` of a line whose message is ``msg`` (``nxt``: the physical line after it): a native crash
        report among them held while its trace goes on, and the one held given back where the trace ends."""
        if self.fault is None and not any(isinstance(r, Fault) and r.cause == NATIVE_CRASH for r in recs):
            return recs
        if self.fault is not None and NATIVE_TRACE.match(msg):
            if (m := NATIVE_FRAME.regex.match(msg)) and len(self.symbols) < MAX_SYMBOLS:
                self.symbols.append(m["sym"])
            return recs if trace_line(nxt) else [*self.flush(), *recs]
        out: list[Record] = [*self.flush()]
        for i, r in enumerate(recs):
            if isinstance(r, Fault) and r.cause == NATIVE_CRASH and trace_line(nxt):
                self.fault = r
                return out + recs[:i] + recs[i + 1:]
        return out + recs

    def flush(self) -> list[Fault]:
        """The report held (none, or one), judged by the symbols of the frames read; nothing is held after."""
        fault, symbols = self.fault, self.symbols
        self.fault, self.symbols = None, []
        if fault is None:
            return []
        v = frames.judge_native(symbols)
        if v.engine is None and v.phase is None:
            return [fault]
        names = tuple(frames.native_name(s).rsplit("::", 1)[-1] for s in symbols[::-1][-12:])
        return [replace(fault, engine=v.engine, frame_phase=v.phase, frame_at=v.at, frames=names)]
