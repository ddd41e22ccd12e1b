"""A traceback cut before its exception line, named by its logging call site (parsers/catalog/call_sites.toml,
written by ``tools/upstream_vocab.py --call-sites`` from the released vLLM wheels)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from loading import report_of

from diag.parsers.callsites import CALL_SITES_PATH, message_at, name_cut
from diag.parsers.records import Fault

UPSTREAM = Path(__file__).parent / "data" / "upstream"
TABLE = tomllib.loads(CALL_SITES_PATH.read_text(encoding="utf-8"))
FRAMES = """\
(EngineCore pid=309) ERROR 09-03 19:31:55 [{at}]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 91, in result
(EngineCore pid=309) ERROR 09-03 19:31:55 [{at}]     return super().result()
(EngineCore pid=309) ERROR 09-03 19:31:55 [{at}]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 95, in _wait_for_response
(EngineCore pid=309) ERROR 09-03 19:31:55 [{at}]     response = self.aggregate(self.get_response())
"""


@pytest.mark.parametrize("snapshot", ["vllm-0.31.0", "vllm-0.33.0"])
def test_the_table_agrees_with_the_snapshots_on_every_traceback_entry(snapshot: str) -> None:
    """Each snapshot entry logged with a traceback is a row of the table, at its line, in its release."""
    snap = json.loads((UPSTREAM / f"{snapshot}.json").read_text(encoding="utf-8"))
    version = snap["version"]
    assert version in TABLE["versions"]
    rows = {(s["at"], s["message"]) for s in TABLE["site"] if version in s["versions"]}
    logged = [e for e in snap["entries"] if e.get("traceback")]
    assert len(logged) == 4
    for e in logged:
        assert (f"{Path(e['file']).name}:{e['line']}", e["format"]) in rows, e["id"]


def test_a_site_decides_only_when_the_releases_agree() -> None:
    assert message_at("core.py:1330", None) == "EngineCore failed to start."          # 0.26.0 alone
    assert message_at("core.py:1330", (0, 26, 0)) == "EngineCore failed to start."
    assert message_at("core.py:1330", (0, 33, 0)) is None                             # nothing logged there
    assert message_at("core.py:1330", (0, 27, 0)) is None                             # a release not in the table
    assert message_at("core.py:1759", None) is None                                   # two messages across releases
    assert message_at("core.py:1759", (0, 34, 0)) == "EngineCore encountered a fatal error."
    assert message_at("v1/engine/core.py:1584", (0, 33, 0)) == "EngineCore failed to start."


def test_a_non_fatal_call_site_names_nothing() -> None:
    """'Invocation of %s method failed' (a collective_rpc failure the engine survives) is no fault cause."""
    assert message_at("core.py:1849", (0, 33, 0)) == "Invocation of %s method failed"
    cut = Fault(1, cause="cut_traceback", message="cut", frames=("result",), where="core.py:1849")
    assert name_cut(cut, (0, 33, 0)) is cut
    named = name_cut(Fault(1, cause="cut_traceback", message="cut", frames=("result",), where="core.py:1584"),
                     (0, 33, 0))
    assert (named.cause, named.message.split(" (")[0]) == ("engine_failed_start", "EngineCore failed to start.")


@pytest.mark.parametrize(("at", "version", "codes"), [
    ("core.py:1330", None, ["DIAG-E004"]),          # n-77's site, no release printed: 0.26.0 alone logs there
    ("core.py:1584", "0.33.0", ["DIAG-E004"]),      # 0.33's 'EngineCore failed to start.'
    ("core.py:1330", "0.33.0", []),                 # the same frames, a release with nothing at that line
    ("core.py:1849", "0.33.0", []),                 # 0.33's 'Invocation of %s method failed'
])
def test_cut_frames_are_judged_by_their_call_site(tmp_path: Path, at: str, version: str | None,
                                                   codes: list[str]) -> None:
    head = (f"(EngineCore pid=309) INFO 09-03 19:31:40 [core.py:101] Initializing a V1 LLM engine (v{version}) with "
            "config: model='Qwen/Qwen3-30B-A3B'\n") if version else ""
    log = tmp_path / "decode_w0.out"
    log.write_text(head + FRAMES.format(at=at), encoding="utf-8")
    report = report_of([str(log)])
    assert sorted(f.code for f in report.findings if f.severity in ("warning", "error")) == codes


SERVING = ("(APIServer pid=7) INFO 09-03 19:31:{ss} [loggers.py:271] Engine 000: Avg prompt throughput: 812.5 tokens/s, "
           "Avg generation throughput: 96.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.2%, "
           "Prefix cache hit rate: 0.0%\n")


@pytest.mark.parametrize(("at", "version", "served", "codes"), [
    ("core.py:1759", "0.34.0", True, ["DIAG-E001"]),      # 'EngineCore encountered a fatal error.' after serving
    ("core.py:1759", "0.34.0", False, ["DIAG-E004"]),     # the same death after its start-up line, no ready line
    ("core.py:1584", "0.33.0", True, ["DIAG-E004"]),      # 'EngineCore failed to start.': start-up by its cause
])
def test_a_named_death_after_serving_is_a_runtime_death(tmp_path: Path, at: str, version: str, served: bool,
                                                         codes: list[str]) -> None:
    """The endpoint's stats show requests running before the frames: the death ended a serving engine."""
    head = (f"(EngineCore pid=309) INFO 09-03 19:31:40 [core.py:101] Initializing a V1 LLM engine (v{version}) with "
            "config: model='Qwen/Qwen3-30B-A3B'\n")
    stats = "".join(SERVING.format(ss=ss) for ss in (42, 47, 52)) if served else ""
    log = tmp_path / "decode_w0.out"
    log.write_text(head + stats + FRAMES.format(at=at), encoding="utf-8")
    report = report_of([str(log)])
    assert sorted(f.code for f in report.findings if f.severity in ("warning", "error")) == codes
    assert report.findings[0].evidence["root_cause"] == ("engine_core_fatal" if at == "core.py:1759"
                                                         else "engine_failed_start")
