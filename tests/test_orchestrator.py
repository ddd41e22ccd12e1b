"""srtctl orchestrator log: lifecycle events, banners, stage detection."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from diag.parsers.formats import REGISTRY
from diag.parsers.headers import parse_header
from diag.parsers.orchestrator import (
    BANNER_FORMATS,
    EVENTS,
    parse_banner,
    parse_env,
    parse_lifecycle,
    process_name_fields,
    stage_of,
)

from helpers import parse_orchestrator_text, unexpected_exits, worker_progress


@pytest.fixture(scope="module")
def e07(real_logs: Path) -> str:
    return (real_logs / "e-07.log").read_text(encoding="utf-8")


def test_e07_events(e07: str) -> None:
    evs = parse_orchestrator_text(e07)
    kinds = [e.event for e in evs]
    assert kinds.count("not_ready") == 15
    assert kinds.count("srun_task") == 15
    assert kinds.count("health_wait") == 2
    for name in ("health_poll", "ready", "healthy", "benchmark_start", "benchmark_done", "cleanup",
                 "cleanup_processes", "sweep_done", "banner_time", "command", "log_path"):
        assert kinds.count(name) == 1, name
    assert set(kinds) <= set(EVENTS)

    by = {e.event: e for e in evs}
    poll = by["health_poll"]
    got = (poll.line, poll.get("url"), poll.get("interval_s"), poll.get("prefills"), poll.get("decodes"))
    assert got == (3, "http://theia0044:8000/health", 10.0, 4, 1)
    wait = [e for e in evs if e.event == "health_wait"][1]
    assert (wait.get("expected"), wait.get("expected_prefill"), wait.get("expected_decode")) == (5, 4, 1)

    not_ready = [e for e in evs if e.event == "not_ready"]
    first, last = not_ready[0], not_ready[-1]
    assert first.ts == datetime(2026, 4, 21, 14, 11, 37, tzinfo=UTC)
    assert (first.get("waiting_prefill"), first.get("waiting_decode"), first.get("have_prefill"),
            first.get("have_decode")) == (4, 1, 0, 0)
    got = (last.line, last.get("waiting_prefill"), last.get("have_prefill"), last.get("have_decode"))
    assert got == (19, 0, 4, 0)
    # prefills became ready after ~7 minutes, the decode after ~16
    first_all_prefill = next(e for e in not_ready if e.get("have_prefill") == 4)
    assert first_all_prefill.ts == datetime(2026, 4, 21, 14, 17, 37, tzinfo=UTC)
    ready = by["ready"]
    assert (ready.line, ready.get("have_prefill"), ready.get("have_decode")) == (20, 4, 1)
    assert ready.ts == datetime(2026, 4, 21, 14, 26, 38, tzinfo=UTC)

    assert by["benchmark_start"].get("name") == "SA-Bench"
    assert by["command"].get("argv").startswith("bash /srtctl-benchmarks/sa-bench/bench.sh http://localhost:8000")
    assert by["command"].get("mode") is None
    assert by["log_path"].get("file") == "benchmark.out"
    assert by["benchmark_done"].ts == datetime(2026, 4, 21, 14, 46, 43, tzinfo=UTC)
    assert by["cleanup_processes"].get("count") == 12
    assert by["sweep_done"].line == 89 and by["sweep_done"].ts is None
    assert (by["banner_time"].get("which"), by["banner_time"].get("tz")) == ("end", "PDT")


def test_e07_stage_and_teardown_is_not_a_failure(e07: str) -> None:
    evs = parse_orchestrator_text(e07)
    assert stage_of(evs) == "completed"
    assert stage_of(evs, slurm_state="COMPLETED") == "completed"
    assert worker_progress(evs) == (4, 4, 1, 1)
    sruns = [e for e in evs if e.event == "srun_task"]
    assert {e.get("status") for e in sruns} == {"killed"}
    assert {e.get("node") for e in sruns} == {f"theia00{n}" for n in (43, 44, 45, 47, 48, 49, 50)}
    assert sruns[0].get("tasks") == "0" and sruns[5].get("tasks") == "8-11"
    assert unexpected_exits(evs) == []     # every srun kill comes after "Cleanup"
    assert not any(e.event in ("process_exit", "benchmark_failed", "sweep_failed") for e in evs)


def test_e07_stage_while_running(e07: str) -> None:
    lines = e07.splitlines()
    assert stage_of(parse_orchestrator_text("\n".join(lines[:2]))) == "awaiting-workers"
    mid = parse_orchestrator_text("\n".join(lines[:15]))
    assert stage_of(mid) == "awaiting-workers"
    assert worker_progress(mid) == (4, 4, 0, 1)
    assert stage_of(mid, slurm_state="CANCELLED") == "killed"
    assert stage_of(mid, slurm_state="TIMEOUT") == "timeout"
    bench = parse_orchestrator_text("\n".join(lines[:26]))
    assert stage_of(bench) == "benchmarking"   # the newest line is the benchmark's Log:, not a worker event
    assert stage_of([]) == "unknown"


_FAILED_RUN = """\
🚀 srtctl Sweep Orchestrator
Job ID: 2752632
Start: Fri Aug 21 02:22:50 UTC 2026
2026-08-21 02:22:58 [INFO] Sweep Orchestrator
2026-08-21 02:22:58 [INFO] Job ID: 2752632
2026-08-21 02:22:58 [INFO] Worker nodes: gb200-r07-n12, gb200-r07-n13, nodeC
2026-08-21 02:23:02 [INFO] Starting infrastructure services (NATS, etcd)
2026-08-21 02:23:10 [INFO] NATS is ready
2026-08-21 02:23:11 [INFO] etcd is ready
2026-08-21 02:23:19 [INFO] Starting backend workers
2026-08-21 02:23:19 [INFO] Starting prefill worker 3 on gb200-r07-n13
2026-08-21 02:23:19 [INFO] Env: CUDA_VISIBLE_DEVICES=2,3 DYN_LOG=info,dynamo_runtime::pipeline::network::ingress::push_handler=warn DYN_SYSTEM_PORT=7503 NCCL_DEBUG_SUBSYS=INIT ENV VLLM_SSM_CONV_STATE_LAYOUT=DS
2026-08-21 02:23:19 [INFO] Command: python3 -m dynamo.vllm --model /model --served-model-name qwen35 --disaggregation-mode prefill --data-parallel-size 2
2026-08-21 02:23:19 [INFO] Log: /lustre/u/outputs/2752632/logs/gb200-r07-n13_prefill_w3.out
2026-08-21 02:23:20 [INFO] Starting decode worker 0 on nodeC
2026-08-21 02:23:20 [INFO] Started 5 worker processes
2026-08-21 02:23:21 [INFO] Starting frontend layer
2026-08-21 02:23:40 [INFO] Waiting for server health (expecting 6 health entries: 4P + 2D Dynamo generate instances; logical workers: 4P + 1D)...
2026-08-21 02:23:40 [INFO] Polling http://gb200-r07-n12:8000/health every 10.0s for 4 prefills and 2 decodes
2026-08-21 02:40:02 [ERROR] Critical process 'decode_0_nodeC' exited with code 1
2026-08-21 02:40:02 [ERROR] Critical process failure detected!
2026-08-21 02:40:03 [WARNING] Wait for model aborted by stop event
2026-08-21 02:40:03 [ERROR] Server did not become healthy
2026-08-21 02:40:03 [INFO] Cleanup
2026-08-21 02:40:03 [INFO] Cleaning up 6 processes (4 running)...
srun: error: gb200-r07-n13: task 0: Killed
2026-08-21 02:40:15 [ERROR] ============================================================
2026-08-21 02:40:15 [ERROR] FAILURE DETAILS
2026-08-21 02:40:15 [ERROR] ============================================================
2026-08-21 02:40:15 [ERROR] \n--- Process: decode_0_nodeC ---
2026-08-21 02:40:15 [ERROR] Exit code: 1
2026-08-21 02:40:15 [ERROR] Node: nodeC
2026-08-21 02:40:15 [ERROR] Log file: /lustre/u/outputs/2752632/logs/nodeC_decode_w0.out
2026-08-21 02:40:15 [ERROR] \nLast 50 lines of log:
2026-08-21 02:40:15 [ERROR]   (EngineCore_DP0 pid=812) ERROR 08-21 02:39:58 [core.py:1099] EngineCore failed to start.
2026-08-21 02:40:15 [ERROR]   Critical process 'fake' exited with code 9
2026-08-21 02:40:15 [ERROR] ============================================================

==========================================
✗ Sweep failed (exit code: 1)
End: Fri Aug 21 02:40:20 UTC 2026
==========================================
""".replace("\\n", "\n")


def test_failed_run() -> None:
    evs = parse_orchestrator_text(_FAILED_RUN)
    kinds = [e.event for e in evs]
    assert kinds[:3] == ["orchestrator_start", "job_id", "banner_time"]
    assert kinds.count("job_id") == 2 and {e.get("job_id") for e in evs if e.event == "job_id"} == {"2752632"}
    nodes = next(e for e in evs if e.event == "job_info")
    assert nodes.get("key") == "worker_nodes"
    assert nodes.get("value") == ("gb200-r07-n12", "gb200-r07-n13", "nodeC")
    assert [e.get("service") for e in evs if e.event == "infra_ready"] == ["NATS", "etcd"]

    start = next(e for e in evs if e.event == "worker_start")
    assert (start.get("mode"), start.get("index"), start.get("node")) == ("prefill", 3, "gb200-r07-n13")
    env = next(e for e in evs if e.event == "worker_env").get("env")
    assert env == {
        "CUDA_VISIBLE_DEVICES": "2,3",
        "DYN_LOG": "info,dynamo_runtime::pipeline::network::ingress::push_handler=warn",
        "DYN_SYSTEM_PORT": "7503",
        "NCCL_DEBUG_SUBSYS": "INIT ENV",
        "VLLM_SSM_CONV_STATE_LAYOUT": "DS",
    }
    cmd = next(e for e in evs if e.event == "command")
    assert (cmd.get("mode"), cmd.get("module")) == ("prefill", "dynamo.vllm")
    assert next(e for e in evs if e.event == "log_path").get("file") == "gb200-r07-n13_prefill_w3.out"
    assert next(e for e in evs if e.event == "workers_started").get("count") == 5
    wait = next(e for e in evs if e.event == "health_wait")
    assert (wait.get("expected"), wait.get("expected_prefill"), wait.get("expected_decode")) == (6, 4, 2)

    exits = [e for e in evs if e.event == "process_exit"]
    assert len(exits) == 1      # the indented FAILURE DETAILS tail line is the worker's text, not an event
    ex = exits[0]
    assert (ex.get("name"), ex.get("code"), ex.get("role"), ex.get("index"), ex.get("node")) == (
        "decode_0_nodeC", 1, "decode", 0, "nodeC")
    assert ex.ts == datetime(2026, 8, 21, 2, 40, 2, tzinfo=UTC)
    assert [e.get("reason") for e in evs if e.event == "health_failed"] == ["aborted", "unhealthy"]
    proc = next(e for e in evs if e.event == "failure_process")
    assert (proc.get("role"), proc.get("index"), proc.get("node")) == ("decode", 0, "nodeC")
    fields = {e.get("key"): e.get("value") for e in evs if e.event == "failure_field"}
    assert fields == {"exit_code": "1", "node": "nodeC",
                      "log_file": "/lustre/u/outputs/2752632/logs/nodeC_decode_w0.out"}
    assert next(e for e in evs if e.event == "failure_tail").get("lines") == 50
    assert next(e for e in evs if e.event == "sweep_failed").get("code") == 1
    assert next(e for e in evs if e.event == "cleanup_processes").get("running") == 4

    assert stage_of(evs) == "failed"
    assert [e.event for e in unexpected_exits(evs)] == ["process_exit"]   # the srun kill is teardown
    # before the crash the run was waiting for workers; the decode never registered
    upto = [e for e in evs if e.line < 20]
    assert stage_of(upto) == "awaiting-workers"
    assert stage_of([e for e in evs if e.line < 18]) == "frontend"
    assert stage_of([e for e in evs if e.line < 12]) == "workers"
    assert stage_of([e for e in evs if e.line < 10]) == "head-ready"
    assert stage_of([e for e in evs if e.line < 8]) == "infra"
    assert stage_of([e for e in evs if e.line < 7]) == "starting"


def test_signal_and_benchmark_failure() -> None:
    killed = parse_orchestrator_text(
        "2026-04-21 15:10:00 [INFO] Running SA-Bench benchmark\n"
        "2026-04-21 15:10:00 [WARNING] Received signal SIGTERM, initiating cleanup...\n"
        "2026-04-21 15:10:00 [INFO] Cleaning up 12 processes...\n"
        "srun: error: nodeC: task 0: Exited with exit code 1\n")
    assert stage_of(killed) == "killed"
    assert killed[1].get("signal") == "SIGTERM"
    assert (killed[3].get("status"), killed[3].get("code")) == ("exited", 1)
    assert unexpected_exits(killed) == []
    failed = parse_orchestrator_text("2026-04-21 15:10:00 [ERROR] Benchmark failed with exit code 2\n"
                                     "2026-04-21 15:10:00 [INFO] Cleanup\n")
    assert stage_of(failed) == "failed" and failed[0].get("code") == 2
    cleanup = parse_orchestrator_text("2026-04-21 15:10:00 [INFO] Cleanup\n")
    assert stage_of(cleanup) == "cleanup"
    early = parse_orchestrator_text("srun: error: nodeC: task 0: Exited with exit code 1\n"
                                    "2026-04-21 15:10:00 [INFO] Cleanup\n")
    assert [e.get("node") for e in unexpected_exits(early)] == ["nodeC"]


def test_parse_lifecycle_direct() -> None:
    ts = datetime(2026, 8, 21, 2, 23, 19, tzinfo=UTC)
    msg = "Starting decode worker 0 on 2 nodes (nodeC,nodeD) with 8 total GPUs (MPI mode)"
    ev = parse_lifecycle(msg, 7, ts)
    assert ev is not None and ev.ts == ts and ev.line == 7
    assert (ev.get("node"), ev.get("nodes"), ev.get("gpus")) == ("nodeC", ("nodeC", "nodeD"), 8)
    assert parse_lifecycle("Model did not get healthy in 1800 seconds", 1, None).get("seconds") == 1800.0
    assert parse_lifecycle("Copied config.yaml to log directory", 1, None) is None
    assert parse_lifecycle("  Starting backend workers", 1, None) is None   # FAILURE DETAILS tail line
    assert parse_lifecycle("", 1, None) is None
    assert parse_banner("srun: Job step aborted: Waiting up to 122 seconds for job step to finish.", 1) \
        is None
    assert parse_banner("   ", 1) is None


def test_parse_env_edge_cases() -> None:
    assert parse_env("") == {}
    assert parse_env("A=1") == {"A": "1"}
    assert parse_env("A= B=2") == {"A": "", "B": "2"}
    quoted = parse_env('EXTRA="--foo bar Z=1" HF_HOME=/lustre/hf')
    assert quoted == {"EXTRA": "--foo bar Z=1", "HF_HOME": "/lustre/hf"}
    # a lower-case token that would break the sorted order stays inside the value
    assert parse_env("http_proxy=x --y abc=1 no_proxy=z") == {"http_proxy": "x --y abc=1", "no_proxy": "z"}
    assert parse_env("A=1 http_proxy=http://p:3128") == {"A": "1", "http_proxy": "http://p:3128"}


def test_process_names() -> None:
    assert process_name_fields("prefill_3_gb200-r07-n13") == {
        "role": "prefill", "index": 3, "node": "gb200-r07-n13", "component": "prefill"}
    assert process_name_fields("decode_0_slurm_node_7") == {
        "role": "decode", "index": 0, "node": "slurm_node_7", "component": "decode"}
    assert process_name_fields("frontend_0") == {
        "role": "frontend", "index": 0, "node": None, "component": "frontend"}
    assert process_name_fields("nats")["role"] is None


def test_declared_samples_parse() -> None:
    lifecycle = [f for f in REGISTRY.values() if f.emits == "lifecycle" and f not in BANNER_FORMATS]
    assert len(lifecycle) >= 25
    for fmt in lifecycle:
        assert len(fmt.samples) >= 2
        for sample in fmt.samples:
            hdr = parse_header(sample)
            assert hdr.cls == "orchestrator", sample
            assert any(t in sample for t in fmt.triggers), sample
            assert parse_lifecycle(hdr.msg, 1, None) is not None, sample
    for fmt in BANNER_FORMATS:
        assert len(fmt.samples) >= 2
        for sample in fmt.samples:
            assert parse_header(sample).cls == "unknown", sample
            assert parse_banner(sample, 1) is not None, sample
