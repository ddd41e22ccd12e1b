"""Every wording of the upstream snapshots (tests/data/upstream, written by tools/upstream_vocab.py from
the released wheels) gives, as a realistic log line, the record diag must make of it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from diag.parsers.records import Fault, NixlFailure, Record, StageMark, StartupFact, StatsSample

from helpers import parse_text

DATA = Path(__file__).parent / "data" / "upstream"
SNAPSHOTS = sorted(DATA.glob("*.json"))
CASES = [(p.stem, e) for p in SNAPSHOTS for e in json.loads(p.read_text(encoding="utf-8"))["entries"]]
PREFIX = {
    "vllm": "(EngineCore_DP0 pid=123) INFO 08-12 14:05:14 [{src}] ",
    "proc": "(Worker_DP0_TP0 pid=124) ",
    "dynamo": "2026-08-12T14:05:14.123456Z  INFO dynamo_runtime::pipeline::network: ",
    "sglang": "[2026-08-12 14:05:14 DP0 TP0 EP0] ",
    "lmcache": "[2026-08-12 14:05:14,908] LMCache ERROR: ",
    "none": "",
}
_SPEC = re.compile(r"%(?:%|[-+ #0]*\d*(?:\.(?P<prec>\d+))?(?P<conv>[sdifx]))|\{\}|\$\{\w\}")
_COLORS = {"w": "\033[1m", "o": "\033[93m", "b": "\033[94m", "r": "\033[0m"}


def render(fmt: str, values: list[str], color: bool = False) -> str:
    """The message a logger call prints for ``fmt``: ``values`` in order for its fields, then plausible
    defaults (3 for an integer, 12.3 for a float, "x" for a string)."""
    vals = iter(values)

    def sub(m: re.Match[str]) -> str:
        tok = m.group()
        if tok == "%%":
            return "%"
        if tok.startswith("${"):
            return _COLORS[tok[2]] if color else ""
        value = next(vals, None)
        if value is not None:
            return value
        if tok == "{}" or m["conv"] == "s":
            return "x"
        return "3" if m["conv"] in "dix" else f"{12.3:.{int(m['prec'] or 6)}f}"

    return _SPEC.sub(sub, fmt)


def build(entry: dict[str, Any], color: bool = False) -> str:
    """A log excerpt carrying the entry's wording: its head, the message, a traceback where logged with one."""
    msg = entry.get("context", "{fmt}").replace("{fmt}", render(entry["format"], entry.get("values", []), color))
    src = f"{Path(entry['file']).name}:{entry.get('line', 1)}"
    head = PREFIX[entry.get("prefix", "vllm")].format(src=src)
    error = PREFIX["vllm"].replace("INFO", "ERROR").format(src=src)
    if re.match(r"\w+Error: ", msg):  # a raised message: the last line of a traceback
        return f"{error}Traceback (most recent call last):\n{error}  File \"/x/vllm/v1/utils.py\", line 9, in run\n" \
               f"{error}{msg}"
    if entry.get("traceback"):
        return f"{error}{msg}\n{error}Traceback (most recent call last):\n" \
               f"{error}  File \"/x/vllm/v1/worker/gpu_worker.py\", line 9, in execute_model\n{error}RuntimeError: boom"
    return head + msg


def check(expect: dict[str, Any], recs: list[Record]) -> None:
    kind = expect["kind"]
    if kind == "stats":
        stats = [r for r in recs if isinstance(r, StatsSample)]
        assert len(stats) == 1, recs
        assert getattr(stats[0], expect["field"]) == expect["value"], stats[0]
    elif kind == "stage":
        marks = [(r.stage, r.mark) for r in recs if isinstance(r, StageMark)]
        assert (expect["stage"], expect["mark"]) in marks, recs
    elif kind == "fact":
        facts = {r.key: r.value for r in recs if isinstance(r, StartupFact)}
        assert expect["key"] in facts, recs
        if "value" in expect:
            assert facts[expect["key"]] == expect["value"], facts
        if "model" in expect:
            assert facts.get("model") == expect["model"], facts
    elif kind == "fault":
        assert expect["cause"] in {r.cause for r in recs if isinstance(r, Fault)}, recs
    elif kind == "nixl_failure":
        assert expect["ftype"] in {r.ftype for r in recs if isinstance(r, NixlFailure)}, recs
    else:
        assert kind in {r.kind for r in recs}, recs


def test_snapshots_cover_the_pinned_versions() -> None:
    names = {p.stem for p in SNAPSHOTS}
    for want in ("vllm-0.31.0", "vllm-0.33.0", "ai-dynamo-1.5.1", "ai-dynamo-1.6.1", "ai-dynamo-runtime-1.5.1",
                 "ai-dynamo-runtime-1.6.1"):
        assert want in names
    for p in SNAPSHOTS:
        snap = json.loads(p.read_text(encoding="utf-8"))
        assert snap["entries"], p.name
        for e in snap["entries"]:
            assert e["expect"]["kind"] and ("line" in e or "offset" in e) and e["format"], e


@pytest.mark.parametrize("case", CASES, ids=[f"{s}:{e['id']}" for s, e in CASES])
def test_entry(case: tuple[str, dict[str, Any]]) -> None:
    _, entry = case
    check(entry["expect"], parse_text(build(entry)))
    if "${" in entry["format"]:  # the logo, as the colour formatter prints it
        check(entry["expect"], parse_text(build(entry, color=True)))


def test_render() -> None:
    assert render("Running: %d reqs, %s KV cache usage: %.1f%%", ["3", "XPU"]) == "Running: 3 reqs, XPU KV cache usage: 12.3%"
    assert render("Process {} (PID: {}) died", ["A", "7"]) == "Process A (PID: 7) died"
