"""An incident's phase from the endpoint's serving evidence (rules/serving.py): the same engine death
is a runtime death (DIAG-E001) once the endpoint served (work in a stats interval, a KV transfer that
moved blocks) and a start-up failure (DIAG-E004) before any of it, whichever path read its stats."""

from __future__ import annotations

from pathlib import Path

import pytest
from loading import report_of

STATS = ("(APIServer pid=7) INFO 09-03 19:31:{ss} [loggers.py:271] Engine 000: Avg prompt throughput: {tps} tokens/s, "
         "Avg generation throughput: {tps} tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: "
         "1.0%, Prefix cache hit rate: 0.0%\n")
KV = ("(APIServer pid=7) INFO 09-03 19:31:50 [metrics.py:98] KV Transfer metrics: Num successful transfers={n}, "
      "Avg xfer time (ms)=9.862, P90 xfer time (ms)=9.862, Avg MB per transfer=70.0, Throughput (MB/s)=7097.952\n")
DEATH = "(EngineCore_DP0 pid=309) ERROR 09-03 19:31:55 [core.py:1000] EngineCore encountered a fatal error.\n"
BUSY = STATS.format(ss="40", tps="812.5", running=3)
IDLE = STATS.format(ss="40", tps="0.0", running=0)
REQUEST = ("(APIServer pid=7) INFO 09-03 19:31:40 [logger.py:37] Received request cmpl-36975907: prompt: 'Hi', "
           "params: SamplingParams(n=1)\n")


def codes_of(tmp_path: Path, text: str) -> list[str]:
    log = tmp_path / "nodeA_decode_w0.out"
    log.write_text(text, encoding="utf-8")
    return sorted(f.code for f in report_of([str(log)]).findings if f.severity in ("warning", "error"))


@pytest.mark.parametrize(("before", "after", "codes"), [
    ("", "", ["DIAG-E004", "DIAG-L001"]),               # nothing says it served (nor that stats are on)
    (BUSY, "", ["DIAG-E001"]),                          # requests running, tokens flowing: it served
    (STATS.format(ss="40", tps="0.0", running=1), "", ["DIAG-E001"]),   # a request running is serving
    (IDLE, "", ["DIAG-E004"]),                          # its server logs idle intervals: no request yet
    ("", STATS.format(ss="58", tps="812.5", running=3), ["DIAG-E004"]),  # work only after the death
    (KV.format(n=4), "", ["DIAG-E001"]),                # a KV transfer moved a request's blocks
    (KV.format(n=0), "", ["DIAG-E004", "DIAG-L001"]),
    (REQUEST, "", ["DIAG-E001", "DIAG-L001"]),          # a request received (counted, not placed)
], ids=["nothing", "busy", "running", "idle", "busy-after", "kv", "kv-none", "request"])
def test_a_death_after_serving_is_a_runtime_death(tmp_path: Path, before: str, after: str,
                                                  codes: list[str]) -> None:
    assert codes_of(tmp_path, before + DEATH + after) == codes


def test_unstamped_lines_are_ordered_by_their_place_in_the_file(tmp_path: Path) -> None:
    busy, death = BUSY.split("] ", 1)[1], DEATH.split("] ", 1)[1]
    assert codes_of(tmp_path, busy + death) == ["DIAG-E001"]
    assert codes_of(tmp_path, death + busy) == ["DIAG-E004"]
