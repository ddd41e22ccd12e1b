"""Every line that states a fault reaches its log site, whatever its logger's head and the paste's damage.

Lines are built from real site patterns of the generated tables (``sites.example_line``), given the heads the
engines' libraries print (glog, Rust tracing without a stamp, SGLang's level-less head, a bare exception line)
and a paste's damage (inline-code backticks, a markdown quote, a box gutter, trailing spaces), then read by the
bulk path as a file is read: the fault must carry the site's id on its own physical line.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from diag.files import find_runs
from diag.parsers import faults, sites
from diag.parsers.ingest import parse_bulk
from diag.parsers.lineparser import TRIGGER_PATTERN, TRIGGERS, is_candidate
from diag.parsers.records import Fault
from diag.pipeline import Pipeline
from diag.rules.settings import Settings
from diag.sources import BatchSource

# (head template, site id, the message's pattern): a Mooncake C++ LOG(ERROR) under glog, an SGLang logger.error
# under its level-less head (date and time, or the 2024 time alone), SGLang's raise quoted alone.
MOONCAKE_OP = ("E0328 09:06:16.413112 114360 client_service.cpp:1265] {}", "f37c5e3f0c03",
               "Operation for key {any} failed: {any}{any}")
SGLANG_BATCH = ("[2025-05-20 10:00:11 TP0] {}", "ef9babc0079d", "Error in dynamic batch loop: {any}")
SGLANG_BATCH_2024 = ("[16:43:29 TP3] {}", "ef9babc0079d", "Error in dynamic batch loop: {any}")
SGLANG_RAISE = ("RuntimeError: {}", "a390dae119a8", "Decode out of memory. Try to lower your batch size.")
# no record trigger in it: read for its phrase only (the prefilter's trigger phrases of level-less engines)
SGLANG_REGISTER = ("[2025-05-20 10:00:11 DP1 TP0] {}", "7eb5cad8aa57", "Failed to register buffer to Mooncake Store: {any}")
CASES = (MOONCAKE_OP, SGLANG_BATCH, SGLANG_BATCH_2024, SGLANG_RAISE, SGLANG_REGISTER)
DAMAGE = {
    "none": lambda s: s,
    "backticks": lambda s: f"`{s}`",
    "open backtick": lambda s: f"`{s}",
    "quote": lambda s: f"> {s}",
    "box": lambda s: f"│ {s}{' ' * 12}│",
    "trailing spaces": lambda s: s + " " * 40,
    "quoted code": lambda s: f"> `{s}`   ",
}


def _faults(text: str) -> list[Fault]:
    records, _ = parse_bulk([text.encode()], year=2025)
    return [r for r in records if isinstance(r, Fault)]


def _line(case: tuple[str, str, str]) -> str:
    head, _, pattern = case
    return head.format(sites.example_line(pattern))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(case=st.sampled_from(CASES), damage=st.sampled_from(sorted(DAMAGE)), before=st.integers(0, 3))
def test_damaged_line_reaches_its_site(case: tuple[str, str, str], damage: str, before: int) -> None:
    """A site's line, damaged as pastes damage it, after some unrelated lines: its site, on its own line number."""
    noise = ["Processing batches: 1it [00:00,  2.74it/s]", "some unrelated text", "I0328 09:06:16.412804 112112 "
             "ascend_direct_transport.cpp:843] transfer failed and disconnect to:10.0.0.1:20081"][:before]
    got = _faults("\n".join([*noise, DAMAGE[damage](_line(case))]) + "\n")
    assert [(f.line, f.site) for f in got] == [(before + 1, case[1])]
    row = next(r for es in sites.index().by_anchor.values() for e in es if (r := e.row).id == case[1])
    assert got[0].cause == faults.SITE_CAUSES[row.cls]


def test_levels_decide_where_the_head_has_one() -> None:
    """A glog warning or info line of an error site is no fault; an E or F line is (F is fatal: CRITICAL)."""
    msg = sites.example_line(MOONCAKE_OP[2])
    for letter, fault in (("I", False), ("W", False), ("E", True), ("F", True)):
        line = f"{letter}0328 09:06:16.413112 114360 client_service.cpp:1265] {msg}\n"
        assert bool(_faults(line)) is fault, letter


def test_levelless_lines_take_only_error_sites_of_their_engine() -> None:
    """An SGLang line is an error only by a site of SGLang's that logs one (another engine's error site is no
    fault on it); a bare exception line needs a site raising that very type."""
    assert not _faults("[2025-05-20 10:00:11 TP0] Operation for key k failed: TRANSFER_FAIL\n")
    assert not _faults("ValueError: Decode out of memory. Try to lower your batch size.\n")
    assert not _faults("RuntimeError: something no site raises\n")


def test_rust_tracing_without_stamp() -> None:
    """Dynamo's Rust tracing line pasted without its stamp keeps its level: an etcd failure at start-up."""
    got = _faults("ERROR dynamo_runtime::worker: Application shutdown with error: Failed to connect to etcd server "
                  'with config ClientOptions { etcd_url: ["http://localhost:2379"] }\n')
    assert [(f.cause, f.where) for f in got] == [("control_plane_unreachable", "dynamo_runtime::worker")]
    assert faults.CAUSES["control_plane_unreachable"].fatal


def test_phrases_are_candidates_alike_in_python_and_polars() -> None:
    """The streaming path's candidate test (format triggers, then the phrases by the line's words) gives what the
    native scan of every trigger literal gives, for a phrase whole, glued to other words or broken."""
    phrase = sites.phrase(SGLANG_REGISTER[2])
    assert phrase is not None and phrase in sites.phrases() and phrase not in TRIGGERS.pattern
    lines = [f"[2025-05-20 10:00:11 TP0] {phrase} x", f"x{phrase}y", phrase[:-1], phrase.replace(" ", "  "),
             f"\x1b[31m{phrase}\x1b[0m", "[2025-05-20 10:00:11 TP0] nothing to see here"]
    native = pl.Series(lines).str.contains(TRIGGER_PATTERN).to_list()
    assert [is_candidate(t) for t in lines] == native == [True, True, False, False, True, False]


def _codes(tmp_path: Path, name: str, text: str) -> set[str]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    report = Pipeline(BatchSource(find_runs([str(path)])[0]), Settings()).once()
    return {f.code for f in report.findings if f.severity in ("warning", "error")}


def test_kv_transfer_sites_give_the_kv_transfer_finding(tmp_path: Path) -> None:
    """KV-transfer class sites under any head give DIAG-E002: NIXL's C++ under glog, Mooncake's C++ under glog,
    a KV connector's SGLang error read for its phrase; Dynamo's etcd failure at start is a start-up failure."""
    nixl = "E0328 09:06:16.412760 112112 nixl_agent.cpp:836] " + sites.example_line("Error posting transfer: {any}")
    mooncake = _line(MOONCAKE_OP)
    assert _codes(tmp_path, "nixl.log", nixl + "\n") == {"DIAG-E002"}
    assert _codes(tmp_path, "mooncake.log", f"`{mooncake}\n") == {"DIAG-E002"}
    assert _codes(tmp_path, "sglang.log", _line(SGLANG_REGISTER) + "\n") == {"DIAG-E002"}
    etcd = ("ERROR dynamo_runtime::worker: Application shutdown with error: Failed to connect to etcd server with "
            'config ClientOptions { etcd_url: ["http://localhost:2379"] }\n')
    assert _codes(tmp_path, "dynamo.log", etcd) == {"DIAG-E004"}


def test_levelless_error_after_a_cut_traceback_of_another_process() -> None:
    """A traceback left open by another process (frames with no head, never closed) does not hide a level-less
    error line of the scheduler from its site."""
    text = ('Traceback (most recent call last):\n  File "/x/y.py", line 3, in run\n'
            + _line(SGLANG_REGISTER) + "\n")
    assert SGLANG_REGISTER[1] in [f.site for f in _faults(text)]
