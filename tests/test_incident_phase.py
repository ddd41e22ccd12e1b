"""An incident's phase from evidence, not from absence (rules/incidents.py ``_phase``): a death is a start-up
failure (DIAG-E004) only when the log shows the endpoint never became ready (start-up lines and no ready
line, start-up frames, the orchestrator still waiting); a ready line, a stats line (idle or not), a KV
metrics line or request lines before it make it a runtime death (DIAG-E001); where the log cannot tell,
the cause's own catalog phase decides, then step-loop frames, and otherwise it is a runtime death. The
finding names what decided (evidence ``phase_by``, and its message)."""

from __future__ import annotations

from pathlib import Path

import pytest
from loading import report_of

STATS = ("(APIServer pid=7) INFO 09-03 19:31:{ss} [loggers.py:271] Engine 000: Avg prompt throughput: {tps} tokens/s, "
         "Avg generation throughput: {tps} tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: "
         "1.0%, Prefix cache hit rate: 0.0%\n")
KV = ("(APIServer pid=7) INFO 09-03 19:31:50 [metrics.py:98] KV Transfer metrics: Num successful transfers={n}, "
      "Avg xfer time (ms)=9.862, P90 xfer time (ms)=9.862, Avg MB per transfer=70.0, Throughput (MB/s)=7097.952\n")
# V1's run_engine_core logs it only for what escapes the busy loop of a constructed engine core: a serving cause
DEATH = "(EngineCore_DP0 pid=309) ERROR 09-03 19:31:55 [core.py:1000] EngineCore encountered a fatal error.\n"
BUSY = STATS.format(ss="40", tps="812.5", running=3)
IDLE = STATS.format(ss="40", tps="0.0", running=0)
REQUEST = ("(APIServer pid=7) INFO 09-03 19:31:40 [logger.py:37] Received request cmpl-36975907: prompt: 'Hi', "
           "params: SamplingParams(n=1)\n")
# a death of either phase (catalog phase "any"): the evidence around it decides
WORKER_DIED = ("(EngineCore_DP0 pid=309) ERROR 09-03 19:31:55 [multiproc_executor.py:154] Worker proc VllmWorker-1 "
               "died unexpectedly (exit code: 1), shutting down executor.\n")
READY = "(APIServer pid=7) INFO:     Application startup complete.\n"
STAGES = ("(Worker_TP0 pid=311) INFO 09-03 19:30:10 [gpu_model_runner.py:2602] Starting to load model /model...\n"
          "(Worker_TP0 pid=311) INFO 09-03 19:30:40 [default_loader.py:272] Loading weights took 30.12 seconds\n")
NO_KV_MEMORY = ("(EngineCore_DP0 pid=309) ERROR 09-03 19:31:55 [core.py:700] ValueError: No available memory for the "
                "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n")
WATCHDOG = "[2025-03-09 00:57:15 TP4] Watchdog timeout (self.watchdog_timeout=300)\n"
NCCL_TIMEOUT = ("[rank3]:[E903 19:31:55.123456 40 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
                "timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
                "600046 milliseconds before timing out.\n")
MQ_DEAD = "CRITICAL 09-03 19:31:55 launcher.py:101] MQLLMEngine is already dead, terminating server process\n"
REQUEST_FAULT = ("(EngineCore_DP0 pid=309) ERROR 09-03 19:31:54 [mooncake_connector.py:330] Failed to transfer KV cache "
                 "for request cmpl-118b93ed-0: Mooncake transfer failed, ret: -1\n")


def _traceback(*frames: str) -> str:
    head = "(Worker_TP0 pid=311) ERROR 09-03 19:31:54 [multiproc_executor.py:520] "
    lines = [head + "WorkerProc hit an exception.", head + "Traceback (most recent call last):"]
    lines += [head + f'  File "/usr/lib/python3.12/site-packages/vllm/{path}", line 10, in {fn}' for path, fn in frames]
    return "\n".join([*lines, head + "RuntimeError: something broke"]) + "\n"


STEP_LOOP = _traceback(("v1/executor/multiproc_executor.py", "worker_busy_loop"),
                       ("v1/worker/gpu_worker.py", "execute_model"))
LOAD_MODEL = _traceback(("v1/executor/multiproc_executor.py", "worker_main"),
                        ("v1/worker/gpu_worker.py", "load_model"))


def _death(tmp_path: Path, text: str) -> tuple[list[str], dict[str, object]]:
    """The warning/error codes of a decode worker's log ``text``, and its E001/E004 finding's evidence."""
    log = tmp_path / "nodeA_decode_w0.out"
    log.write_text(text, encoding="utf-8")
    findings = [f for f in report_of([str(log)]).findings if f.severity in ("warning", "error")]
    deaths = [f for f in findings if f.code in ("DIAG-E001", "DIAG-E004")]
    assert len(deaths) == 1, [f.message for f in deaths]
    assert f"phase by {deaths[0].evidence['phase_by']}" in deaths[0].message
    return sorted(f.code for f in findings), dict(deaths[0].evidence)


@pytest.mark.parametrize(("before", "after", "codes", "by"), [
    ("", "", ["DIAG-E001", "DIAG-L001"], "cause phase"),  # nothing either way: the busy loop's death is serving's
    (BUSY, "", ["DIAG-E001"], "readiness"),               # requests running, tokens flowing
    (STATS.format(ss="40", tps="0.0", running=1), "", ["DIAG-E001"], "readiness"),
    (IDLE, "", ["DIAG-E001"], "readiness"),               # only a running server logs intervals, idle ones too
    ("", STATS.format(ss="58", tps="812.5", running=3), ["DIAG-E001"], "cause phase"),  # stats only after it
    (KV.format(n=4), "", ["DIAG-E001"], "readiness"),
    (KV.format(n=0), "", ["DIAG-E001", "DIAG-L001"], "readiness"),   # the metrics logger of a running engine
    (REQUEST, "", ["DIAG-E001", "DIAG-L001"], "serving evidence"),   # a request received (counted, not placed)
], ids=["nothing", "busy", "running", "idle", "busy-after", "kv", "kv-none", "request"])
def test_a_busy_loop_death_is_a_runtime_death(tmp_path: Path, before: str, after: str, codes: list[str],
                                              by: str) -> None:
    found, evidence = _death(tmp_path, before + DEATH + after)
    assert (found, evidence["phase_by"]) == (codes, by)


@pytest.mark.parametrize(("text", "code", "by"), [
    (READY + WORKER_DIED, "DIAG-E001", "readiness"),           # the server said it was up
    (STAGES + WORKER_DIED, "DIAG-E004", "never ready"),        # start-up lines, no ready line after them
    (STAGES + DEATH, "DIAG-E004", "never ready"),              # ... which outranks the cause's own phase
    (NO_KV_MEMORY, "DIAG-E004", "cause phase"),                # neither: a start-up-only cause
    (READY + NO_KV_MEMORY, "DIAG-E004", "cause phase"),        # a start-up-only cause is one, whatever came before
    (WATCHDOG, "DIAG-E001", "cause phase"),                    # neither: a serving-only cause (SGLang's watchdog)
    (NCCL_TIMEOUT.format(seq=53281), "DIAG-E001", "cause phase"),   # ... the 53,281st collective: the step loop's
    (NCCL_TIMEOUT.format(seq=2), "DIAG-E001", "no evidence: default"),   # the 2nd: the line places nothing
    (STAGES + NCCL_TIMEOUT.format(seq=2), "DIAG-E004", "never ready"),
    (MQ_DEAD, "DIAG-E001", "cause phase"),                     # ... V0's front end meeting a dead engine on a request
    (REQUEST_FAULT + WORKER_DIED, "DIAG-E001", "serving evidence"),   # a request id in the incident's lines
    (STEP_LOOP, "DIAG-E001", "frames"),                        # neither: a traceback through the step loop
    (LOAD_MODEL, "DIAG-E004", "frames"),                       # neither: a traceback through load_model
    (WORKER_DIED, "DIAG-E001", "no evidence: default"),        # nothing at all: a runtime death, said so
], ids=["ready", "stages", "stages-over-cause", "startup-cause", "startup-cause-after-ready", "serving-cause",
        "nccl-high-seq", "nccl-low-seq", "nccl-low-seq-starting", "mq-dead", "request-id", "step-loop", "load-model", "nothing"])
def test_the_phase_names_its_evidence(tmp_path: Path, text: str, code: str, by: str) -> None:
    codes, evidence = _death(tmp_path, text)
    assert code in codes and evidence["phase_by"] == by, (codes, evidence)


def test_unstamped_lines_are_ordered_by_their_place_in_the_file(tmp_path: Path) -> None:
    ready, died = READY.split(") ", 1)[1], WORKER_DIED.split("] ", 1)[1]
    assert _death(tmp_path, ready + died)[1]["phase_by"] == "readiness"
    assert _death(tmp_path, died + ready)[1]["phase_by"] == "no evidence: default"
