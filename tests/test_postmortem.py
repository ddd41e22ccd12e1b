"""The postmortem of a failed run (rules/postmortem.py, rules/catalog/postmortem.toml): for every failing sample
run, the failure moment, the first error, the root cause and its owner, and what was set aside; the owner
catalog's fire/pass examples; a healthy run has none and its text output shows none."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import ROOT
from loading import report_of
from rich.console import Console

from diag.emit.text import render_tail
from diag.pipeline import analyze
from diag.rules.examples import build_example_run
from diag.rules.finding import Finding
from diag.rules.postmortem import _set_aside, fault_owner, policy
from diag.rules.settings import Settings

RUNS = ROOT / "samples" / "runs"

# name -> failed at, first error's file:line (under logs/), [(code, endpoint, fault cause, owner)],
#         consequences (entries, codes, fault lines after the failure, of them teardown lines), noise entries
# The busy-loop death line (vLLM's "EngineCore encountered a fatal error.") is its own cause, engine_core_fatal
# (phase serving), so the crash samples set aside one more row than when it was folded into engine_dead.
EXPECT = {
    "engine-crash": ("2026-09-03T04:03:01+00:00", "gb200-r05-n15_decode_w0.out:703",
                     [("DIAG-E001", "decode-w0", "oom", "engine")], (16, {"DIAG-E002", "DIAG-E003"}, 14, 5), 0),
    "block-size-crash": ("2026-09-03T04:03:01+00:00", "gb200-r05-n15_decode_w0.out:735",
                         [("DIAG-E001", "decode-w0", "kv_block_size", "recipe")],
                         (17, {"DIAG-E002", "DIAG-E003"}, 14, 5), 0),
    "ds-layout-crash": ("2026-09-03T04:03:01+00:00", "gb200-r05-n15_decode_w0.out:731",
                        [("DIAG-E004", "decode-w0", "ds_layout", "recipe")], (16, {"DIAG-E002", "DIAG-E003"}, 14, 5), 0),
    "startup-stuck": ("2026-08-27T18:15:44+00:00", None, [("DIAG-S001", "decode-w0", None, "unknown")],
                      (0, set(), 0, 0), 0),
    "startup-stall": ("2026-08-27T18:13:37+00:00", "sweep_5010560.log:71",
                      [("DIAG-E004", None, None, "unknown"), ("DIAG-S001", "prefill-w3", None, "unknown")],
                      (0, set(), 0, 0), 0),
    "sglang-startup-failure": ("2026-12-05T07:55:07+00:00", "gb200-r25-n43_decode_w0.out:15",
                               [("DIAG-E004", "decode-w0", "sglang_no_kv_memory", "recipe")], (3, set(), 3, 3), 0),
    "sglang-transfer-failure": ("2026-12-04T15:30:00+00:00", "gb200-r24-n40_prefill_w0.out:131",
                                [("DIAG-E002", "prefill-w0", None, "unknown"), ("DIAG-E002", "prefill-w1", None, "unknown"),
                                 ("DIAG-E002", "decode-w0", None, "unknown")], (6, set(), 11, 4), 0),
    "nixl-failures": ("2026-09-24T11:28:29+00:00", "gb200-r02-n14_decode_w0.out:153",
                      [("DIAG-E002", "decode-w0", None, "unknown")], (10, {"DIAG-E003"}, 9, 6), 0),
    # the derived failure samples (samples/derived.py)
    "oom-teardown-storm": ("2026-09-03T04:03:01+00:00", "gb200-r05-n15_decode_w0.out:703",
                           [("DIAG-E001", "decode-w0", "oom", "engine")], (26, {"DIAG-E002", "DIAG-E003"}, 54, 40), 0),
    "kv-registration-zero-tokens": ("2026-09-24T11:27:06.404118+00:00", "gb200-r02-n15_decode_w0.out:126",
                                    [("DIAG-E002", "decode-w0", "rdma_registration", "infra"),
                                     ("DIAG-V001", None, None, "benchmark"), ("DIAG-V002", None, None, "unknown"),
                                     ("DIAG-V001", None, None, "benchmark")], (11, {"DIAG-E003"}, 13, 6), 0),
    "nixl-registration-startup": ("2026-08-27T18:15:44.603311+00:00", "gb200-r11-n15_decode_w0.out:65",
                                  [("DIAG-E004", "decode-w0", "rdma_registration", "infra")], (9, {"DIAG-E002"}, 8, 4), 0),
    "removed-flag": ("2026-08-27T18:13:37+00:00", "gb200-r11-n14_decode_w0.out:6",
                     [("DIAG-E004", "decode-w0", "bad_argument", "recipe")], (4, set(), 4, 4), 0),
}


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_failing_sample(name: str) -> None:
    failed_at, first_at, roots, (n_after, codes, lines_after, teardown), n_noise = EXPECT[name]
    report = report_of(RUNS / name)
    pm = report.postmortem
    assert pm is not None
    assert pm.failed_at is not None and pm.failed_at.isoformat() == failed_at
    assert (pm.first_error.at.split("/logs/")[-1] if pm.first_error else None) == first_at
    assert [(r.code, r.endpoint, r.cause, r.owner) for r in pm.root_causes] == roots
    assert all(r.why for r in pm.root_causes)
    assert len(pm.consequences) == n_after
    assert {c.code for c in pm.consequences if c.code} == codes
    assert sum(c.count for c in pm.consequences if c.code is None) == lines_after
    assert sum(c.count for c in pm.consequences if c.reason.split(": ", 1)[-1].startswith("teardown (")) == teardown
    assert all(c.ts is None or c.ts >= pm.failed_at for c in pm.consequences)
    assert len(pm.noise) == n_noise
    # the timeline is in time order and every entry says where it comes from
    stamped = [e.ts for e in report.timeline if e.ts is not None]
    assert stamped == sorted(stamped) and all(
        e.at for e in report.timeline if e.kind in ("stage", "startup", "error", "death", "failure", "teardown"))


def test_engine_owner_names_the_engine_and_build() -> None:
    root = report_of(RUNS / "engine-crash").postmortem.root_causes[0]
    assert (root.engine, root.build) == ("vllm", "vLLM v0.26.1")
    assert "the owner of its class, oom" in root.why
    recipe = report_of(RUNS / "block-size-crash").postmortem.root_causes[0]
    assert recipe.config == ("DIAG-C012",) and recipe.engine is None and recipe.why.startswith("DIAG-C012 on what ran")


def test_crash_marks_come_from_the_incident_and_the_orchestrator() -> None:
    pm = report_of(RUNS / "engine-crash").postmortem
    assert [(e.kind, e.at.rsplit("/", 1)[-1]) for e in pm.marked_by] == [
        ("failure", "gb200-r05-n15_decode_w0.out:703"), ("death", "sweep_5044719.log:70"),
        ("failure", "sweep_5044719.log:71"), ("failure", "sweep_5044719.log:146")]


@pytest.mark.parametrize("name", ["healthy", "kv-exhaustion", "sglang-healthy", "prefill-bound"])
def test_no_postmortem_for_a_run_that_did_not_fail(name: str) -> None:
    report = report_of(RUNS / name)
    assert report.postmortem is None and report.timeline
    console = Console(width=160, record=True, color_system=None)
    render_tail(report, console)
    assert "root cause" not in console.export_text() and "failed at" not in console.export_text()


def test_failed_run_text_shows_the_short_form_under_the_verdict() -> None:
    console = Console(width=200, record=True, color_system=None)
    render_tail(report_of(RUNS / "engine-crash"), console)
    text = console.export_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("verdict"))
    below = "\n".join(lines[at:at + 12])
    assert "failed at    09-03 04:03:01: DIAG-E001 decode-w0: CUDA out of memory" in below
    assert "root cause   decode-w0: CUDA out of memory — owner engine" in below
    assert "set aside    16 consequence(s) after the failure, 0 warning(s)" in below
    assert "04:03:36 benchmark failed with exit code 1" in below


CASES = [(i, ex) for i, ex in enumerate(policy()["examples"])]


@pytest.mark.parametrize("case", CASES, ids=[f"{ex['owner']}-{i}-{ex['expect']}" for i, ex in CASES])
def test_owner_example(case) -> None:
    _, ex = case
    report = analyze(build_example_run(ex.get("run", {})), Settings(), None)
    owner = report.postmortem.owner if report.postmortem else None
    if ex["expect"] == "fire":
        assert owner == ex["owner"], (owner, report.postmortem)
    else:
        assert owner != ex["owner"]


def test_owner_catalog_covers_every_fault_class_and_owner() -> None:
    from diag.parsers.faults import CLASSES

    assert set(CLASSES) <= set(policy()["owner"]["fault_class"])
    examples = {(ex["owner"], ex["expect"]) for ex in policy()["examples"]}
    for owner in ("recipe", "engine", "infra", "benchmark", "unknown"):
        assert {(owner, "fire"), (owner, "pass")} <= examples, owner
    assert fault_owner("oom")[0] == "engine" and fault_owner("ds_layout")[0] == "recipe"
    assert fault_owner("engine_dead")[0] == "unknown"
    assert fault_owner("rdma_registration")[0] == "infra" and fault_owner("transport")[0] == "unknown"
    assert fault_owner("peer_refused")[0] == "unknown"


def _f(code: str, sev: str, minute: int, endpoint: str = "decode-w0") -> Finding:
    return Finding(code, code.lower(), sev, f"{endpoint}: {code}", endpoint,
                   first_ts=datetime(2026, 1, 1, 10, minute, tzinfo=UTC))


def test_warnings_before_the_failure_are_noise_and_errors_after_are_consequences() -> None:
    root = _f("DIAG-E001", "error", 30)
    early, late, info = _f("DIAG-K002", "warning", 10), _f("DIAG-E002", "error", 31, "prefill-w0"), \
        _f("DIAG-L002", "info", 5)
    after, before = _set_aside([early, root, late, info], [root], root.first_ts)
    assert [(s.code, s.reason) for s in before] == [
        ("DIAG-K002", "a warning the run survived: it began at 01-01 10:10:00, before the failure at 01-01 10:30:00")]
    assert [(s.code, s.reason) for s in after] == [
        ("DIAG-E002", "began at 01-01 10:31:00, at or after the failure at 01-01 10:30:00: teardown or fan-out")]


def test_teardown_storm_is_set_aside_not_counted_as_causes() -> None:
    """The storm after the OOM (refused connections, NATS/etcd going away, SIGTERM) is teardown: the incident
    is the base run's, untouched, and every storm line is a consequence with that reason."""
    storm, base = report_of(RUNS / "oom-teardown-storm"), report_of(RUNS / "engine-crash")
    e001 = [(f.message, f.evidence["faults"]) for r in (storm, base) for f in r.findings if f.code == "DIAG-E001"]
    assert len(e001) == 2 and e001[0][1] != e001[1][1] and "peer_refused" not in e001[0][1]
    torn = {(c.endpoint, c.text.split(": ", 1)[1]) for c in storm.postmortem.consequences if "teardown (" in c.reason}
    assert {e for e, _ in torn} == {"prefill-w0", "prefill-w1", "prefill-w2", "prefill-w3", "decode-w0"}
    assert {t for _, t in torn} == {"a peer refused the connection (it is gone)", "the NATS/etcd connection went away",
                                    "a process was told to stop (SIGTERM, the job step cancelled)"}
    fanout = [c for c in storm.postmortem.consequences if c.reason.endswith("the death's fan-out")]
    assert fanout and all(c.endpoint == "decode-w0" for c in fanout)


def test_zero_tokens_with_every_transfer_failed_is_the_infrastructures() -> None:
    pm = report_of(RUNS / "kv-registration-zero-tokens").postmortem
    root = pm.root_causes[0]
    assert pm.owner == "infra" and root.why.startswith("fault cause rdma_registration") and "follow from it" in root.why
    assert pm.first_error.text.startswith("first error: the NIC could not register memory for RDMA")


def test_startup_failures_timelines() -> None:
    """The infra start-up failure and the rejected flag: the first error, the death and the orchestrator's
    failure in the timeline, in order; a line without a clock (argparse's) last."""
    report = report_of(RUNS / "nixl-registration-startup")
    kinds = [(e.kind, e.text) for e in report.timeline if e.kind in ("error", "death", "failure")]
    assert kinds[0][0] == "error" and ("death", "critical process decode_0_gb200-r11-n15 exited with code 1") in kinds
    assert report.postmortem.marked_by[0].kind == "failure" and report.postmortem.marked_by[0].at.endswith(
        "gb200-r11-n15_decode_w0.out:65")
    flag = report_of(RUNS / "removed-flag")
    root = flag.postmortem.root_causes[0]
    assert root.config == ("DIAG-C014",) and root.why.startswith("DIAG-C014 on what ran explains it")
    assert [e.kind for e in flag.timeline if e.ts is None] == ["stage", "error", "failure"]
    deaths = [e.text for e in flag.timeline if e.kind == "death"]
    assert deaths[:2] == ["critical process decode_0_gb200-r11-n14 exited with code 2",
                          "critical process decode_0_gb200-r11-n15 exited with code 2"]
