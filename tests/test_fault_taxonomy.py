"""The fault taxonomy (parsers/catalog/faults.toml): every sample line classifies as declared, an
exception no entry knows still yields a finding that quotes it, and tracebacks group whatever
prefix their lines carry."""

from __future__ import annotations

import pytest
from loading import report_of

from diag.parsers import faults
from diag.parsers.records import Fault
from diag.rules.incidents import CAUSE_RANK, DEATH, FATAL

from helpers import parse_text

CASES = [(c.name, s) for c in faults.TAXONOMY for s in c.samples]


@pytest.mark.parametrize("case", CASES, ids=[f"{n}:{i}" for i, (n, _) in enumerate(CASES)])
def test_sample_classifies_as_declared(case: tuple[str, str]) -> None:
    name, sample = case
    cause = faults.CAUSES[name]
    if cause.pattern is not None or not cause.exceptions:  # a line format's, or a log site's line
        got = [r.cause for r in parse_text(sample) if isinstance(r, Fault)]
        assert got[:1] == [name], (sample, got)
    else:  # an exception-type entry: the sample is a traceback's last line
        exc = faults.exception_line(sample)
        assert exc is not None and faults.classify_exception(*exc) == name


def test_every_cause_is_ranked_and_has_a_class() -> None:
    for c in faults.TAXONOMY:
        assert c.name in CAUSE_RANK and c.cls and c.text
        assert len(c.samples) >= 2
    assert DEATH and FATAL and not DEATH & FATAL


def test_every_hand_written_cause_says_why_it_stays_and_names_the_sites_it_takes() -> None:
    """Issue 36: a hand-written cause is a named fallback beside the log sites, with its reason; its ``sites`` are
    exactly the generated rows whose lines it takes (recomputed here: a regenerated table that changes them is
    reviewed in the catalog's diff; ``python tools/site_catalog.py --fault-sites`` prints the new lists)."""
    from diag.parsers import sites

    from helpers import load_tool

    assert all(len(c.why) > 20 for c in faults.TAXONOMY)
    table = [r for path in sites.table_files() for r in sites.read_table(path)]
    known = {i for r in table for i in r.ids}
    assert {i for c in faults.TAXONOMY for i in c.sites} <= known
    expected = load_tool("site_catalog").fault_sites(table)
    assert {c.name: list(c.sites) for c in faults.TAXONOMY} == expected


def test_owners_and_teardown_are_declared_consistently() -> None:
    """A cause's own owner is one of the postmortem's owners; a teardown cause is no root cause by itself (neither
    fatal nor a death) and is of the teardown class; the infrastructure's causes state their owner."""
    from diag.rules.catalog import OWNERS

    assert all(c.owner in OWNERS for c in faults.TAXONOMY if c.owner)
    torn = [c for c in faults.TAXONOMY if c.teardown]
    assert torn and all(c.cls == "teardown" and not (c.fatal or c.death) for c in torn)
    assert all(c.owner == "infra" for c in faults.TAXONOMY if c.cls == "infra")
    assert faults.CAUSES["transport"].owner is None and faults.CAUSES["rdma_registration"].cls == "transport"


def test_a_specific_ucx_wording_is_a_fault_not_a_bare_transport_error() -> None:
    """UCX's registration and device errors carry their cause (the infrastructure's); another UCX error stays
    a KV-transport failure line."""
    ucx = "[1788408184.059691] [gb200-r05-n12:3673:0]          {}  UCX  ERROR {}"
    got = [type(r).__name__ + ":" + getattr(r, "cause", getattr(r, "ftype", "")) for r in parse_text("\n".join((
        ucx.format("ib_md.c:349", "ibv_reg_mr(address=0x7f3c1a000000, length=4096, access=0xf) failed: Bad address"),
        ucx.format("sock.c:334", "recv(fd=180) failed: Connection reset by remote peer"))))]
    assert got == ["Fault:rdma_registration", "NixlFailure:transport_error"]


def test_teardown_lines_are_no_part_of_an_incident(tmp_path) -> None:
    """An engine death followed by its teardown storm: one incident whose root is the death's cause, the lost
    keep-alive and the refused connection left out of it (the postmortem sets them aside)."""
    log = tmp_path / "engine.log"
    log.write_text("\n".join((
        "(EngineCore_DP0 pid=9) ERROR 08-06 12:44:02 [core.py:1000] torch.OutOfMemoryError: CUDA out of memory.",
        "(EngineCore_DP0 pid=9) ERROR 08-06 12:44:02 [core.py:1000] EngineCore encountered a fatal error.",
        "2026-08-06T12:44:05.100000Z  WARN dynamo_runtime::transports::etcd: Keep-alive stream unexpectedly ended",
        "(APIServer pid=1) ERROR 08-06 12:44:06 [serving.py:1] ConnectionRefusedError: [Errno 111] Connection refused",
    )) + "\n")
    found = [f for f in report_of([str(log)]).findings if f.severity != "info"]
    # nothing says whether it was ready; the busy loop's death line says it was serving
    assert [(f.code, f.evidence["root_cause"], f.evidence["phase_by"]) for f in found] == [
        ("DIAG-E001", "oom", "cause phase")]
    assert found[0].evidence["faults"] == {"oom": 1, "engine_core_fatal": 1}


@pytest.mark.parametrize("prefix", ["", "(EngineCore pid=9) ", "(EngineCore_DP0 pid=9) ERROR 08-06 12:00:00 [core.py:1] ",
                                    "ERROR 08-06 12:00:00 [v1/engine/core.py:710] ", "[rank0]: "])
def test_unknown_exception_is_unclassified_and_quoted(prefix: str) -> None:
    text = "\n".join(prefix + line for line in (
        "Traceback (most recent call last):",
        '  File "/x/vllm/v1/engine/core.py", line 10, in run_busy_loop',
        "    self.step()",
        "frobnicate.QuuxWidgetError: the widget is quuxed",
    ))
    got = [r for r in parse_text(text) if isinstance(r, Fault)]
    assert [(r.cause, r.exception) for r in got] == [("exception", "QuuxWidgetError: the widget is quuxed")]


def test_unclassified_exception_yields_a_finding(tmp_path) -> None:
    log = tmp_path / "engine.log"
    log.write_text("\n".join((
        # a request handler, no serving loop (through run_busy_loop it is the engine's death: tests/test_frames.py)
        "(EngineCore pid=9)   File \"/x/vllm/entrypoints/openai/serving_completion.py\", line 10, in create_completion",
        "(EngineCore pid=9)     self.frobnicate()",
        "(EngineCore pid=9) frobnicate.QuuxWidgetError: the widget is quuxed",
    )) + "\n")
    report = report_of([str(log)])
    hits = [f for f in report.findings if f.code == "DIAG-E005"]
    assert len(hits) == 1 and "QuuxWidgetError: the widget is quuxed" in hits[0].message
    assert hits[0].evidence["cause_class"] == "unclassified"


@pytest.mark.parametrize(("frames", "codes"), [
    (("run_mp_engine", "from_vllm_config", "__init__"), {"DIAG-E004"}),   # cut inside an engine's construction
    (("worker_main", "load_model"), {"DIAG-E004"}),
    (("run_busy_loop", "step", "execute_model"), {"DIAG-E001"}),          # cut inside the serving loop: it ended
    (("_handle_client_request", "call_utility"), set()),                  # a utility call failed: not fatal
    (("shutdown", "destroy_process_group"), set()),                       # teardown
])
def test_cut_traceback_is_judged_by_its_frames(tmp_path, frames: tuple[str, ...], codes: set[str]) -> None:
    log = tmp_path / "engine.log"
    log.write_text("".join(f'(EngineCore pid=9)   File "/x/vllm/engine.py", line {i}, in {fn}\n'
                           f"(EngineCore pid=9)     call_{i}()\n" for i, fn in enumerate(frames, 1)))
    report = report_of([str(log)])
    assert {f.code for f in report.findings if f.severity != "info"} == codes
    if codes:
        assert f"innermost frame seen: {frames[-1]}" in report.findings[0].message
