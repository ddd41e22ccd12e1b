"""Shapes of pasted logs read as the engines wrote them (issue 36, set D's classes), each built from the sources'
format strings and function names, never from one excerpt: a subprocess's lines relayed by 'dynamo run' (its
level the relay's, not the line's); a native crash report placed by the demangled symbols of its C++ stack trace;
glog's head with the year in it (log_year_in_prefix, glog 0.7's default) before Mooncake's store errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.files import find_runs
from diag.parsers.clean import peel
from diag.parsers.headers import parse_header
from diag.parsers.ingest import parse_bulk
from diag.pipeline import Pipeline
from diag.rules.settings import Settings
from diag.sources import BatchSource

SITE = "/opt/venv/lib/python3.12/site-packages/vllm/v1/engine/core.py"
# V1 EngineCoreProc.run_engine_core: constructs the engine (start-up), then runs its busy loop (serving)
STARTUP = [(SITE, "run_engine_core", "engine_core = EngineCoreProc(*args, **kwargs)"),
           (SITE, "__init__", "super().__init__(vllm_config, executor_class, log_stats,"),
           (SITE, "__init__", "self._initialize_kv_caches(vllm_config)"),
           (SITE, "_initialize_kv_caches", "available_gpu_memory = self.model_executor.determine_available_memory()")]
SERVING = [(SITE, "run_engine_core", "engine_core.run_busy_loop()"),
           (SITE, "run_busy_loop", "self._process_engine_step()"),
           (SITE, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
           (SITE, "step", "model_output = self.execute_model_with_error_logging(")]


def _traceback(calls: list[tuple[str, str, str]], exception: str | None) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for i, (path, fn, code) in enumerate(calls):
        lines += [f'  File "{path}", line {60 + i}, in {fn}', f"    {code}"]
    return lines + ([exception] if exception else [])


def _codes(tmp_path: Path, lines: list[str]) -> set[str]:
    path = tmp_path / "dynamo.log"
    path.write_text("\n".join(lines) + "\n")
    report = Pipeline(BatchSource(find_runs([str(path)])[0]), Settings()).once()
    return {f.code for f in report.findings if f.severity in ("warning", "error")}


def _relayed(lines: list[str], level: str = "DEBUG", indent: str = "") -> list[str]:
    """Lines as dynamo-run's subprocess.rs relays them: tracing's stamp, level and target before each."""
    return [f"{indent}2025-06-06T19:02:34.{100 + i:03d}Z {level} dynamo_run::subprocess: {line}"
            for i, line in enumerate(lines)]


@pytest.mark.parametrize("indent", ["", "    "])
@pytest.mark.parametrize(("calls", "exception", "code"), [
    (STARTUP, "RuntimeError: CUDA out of memory occurred when warming up sampler", "DIAG-E004"),
    (STARTUP, None, "DIAG-E004"),                                   # cut before its exception line
    (SERVING, "RuntimeError: CUDA error: an illegal memory access was encountered", "DIAG-E001"),
])
def test_relayed_traceback_read_as_the_subprocess_wrote_it(tmp_path: Path, indent: str, calls: list,
                                                           exception: str | None, code: str) -> None:
    assert code in _codes(tmp_path, _relayed(_traceback(calls, exception), indent=indent))


@pytest.mark.parametrize(("line", "rest"), [
    ("2025-05-06T09:38:50.412Z DEBUG dynamo_run::subprocess: [async_llm.py:252] Added request 1",
     "[async_llm.py:252] Added request 1"),
    ("  2025-05-06T09:38:50.412Z  INFO dynamo_run::subprocess:     raise e", "    raise e"),
    ("2025-05-06T09:38:50.412Z DEBUG dynamo_run::input::http: Starting HTTP service", None),   # its own line
])
def test_relay_peeled_with_its_stamp(line: str, rest: str | None) -> None:
    text, ts, _ = peel(line)
    assert text == (rest if rest is not None else line)
    assert ts == ("2025-05-06T09:38:50.412Z" if rest is not None else None)


# libstdc++'s terminate handler, then TllmException's what() (common/tllmException.cpp: "%s (%s:%zu)\n%s", its
# getTrace frames "%-3d %*p %s + %zu", innermost first; a library without symbols as backtrace_symbols prints it)
CRASH = ["terminate called after throwing an instance of 'tensorrt_llm::common::TllmException'",
         "  what():  [TensorRT-LLM][ERROR] Assertion failed: boom (/src/cpp/tensorrt_llm/x.cpp:10)",
         "1       0x7f0000000001 tensorrt_llm::common::throwRuntimeError(char const*, int, std::string const&) + 82",
         "2       0x7f0000000002 /usr/lib/libtensorrt_llm.so(+0x1234) [0x7f0000000002]"]


@pytest.mark.parametrize(("outer", "code"), [
    (["tensorrt_llm::plugins::GPTAttentionPlugin::initialize()"], "DIAG-E004"),
    (["tensorrt_llm::runtime::TllmRuntime::TllmRuntime(tensorrt_llm::runtime::RawEngine const&, float)"], "DIAG-E004"),
    (["tensorrt_llm::batch_manager::TrtGptModelInflightBatching::forwardAsync(std::list<int> const&)",
      "tensorrt_llm::executor::Executor::Impl::executionLoop()"], "DIAG-E001"),
    ([], "DIAG-E001"),                                     # no symbol places it: a death, as before
])
def test_native_crash_placed_by_its_frames(tmp_path: Path, outer: list[str], code: str) -> None:
    frames = [f"{3 + i:<7} 0x7f00000000{10 + i:02d} {sym} + {40 + i}" for i, sym in enumerate(outer)]
    tail = ["4       0x7f0000000099 /usr/lib/libnvinfer.so.10(+0x108c6e5) [0x7f0000000099]",
            "INFO 06-06 19:02:35 [api_server.py:1] a later line"]
    codes = _codes(tmp_path, [*CRASH, *frames, *tail])
    assert code in codes and ({"DIAG-E001", "DIAG-E004"} - {code}).isdisjoint(codes)


# glog logging.cc: level letter, then the year when FLAGS_log_year_in_prefix, month, day, time, thread id, file:line]
@pytest.mark.parametrize("year", ["", "2025"])
def test_glog_head_with_or_without_its_year(tmp_path: Path, year: str) -> None:
    # Mooncake v0.3.1 master_client.cpp MasterClient::MountSegment and store_py.cpp setup's LOG(ERROR), then vLLM
    # V1's worker start-up failure (v1/executor/multiproc_executor.py WorkerProc.worker_main, logger.exception)
    lines = [f"E{year}0417 19:46:42.567027   481 master_client.cpp:246] Failed to mount segment due to rpc error",
             f"E{year}0417 19:46:42.567034   481 store_py.cpp:203] Failed to mount segment: UNKNOWN_ERROR",
             "ERROR 04-17 19:46:42 [multiproc_executor.py:487] WorkerProc failed to start."]
    hdr = parse_header(lines[0])
    assert (hdr.cls, hdr.level, hdr.source) == ("glog", "ERROR", "master_client.cpp:246")
    recs, _ = parse_bulk(["\n".join(lines).encode() + b"\n"], year=2025)
    faults = [r for r in recs if r.kind == "fault"]
    assert [r.cause for r in faults][:2] == ["kv_connector", "kv_connector"]
    assert faults[0].ts is not None and (faults[0].ts.year, faults[0].ts.month, faults[0].ts.day) == (2025, 4, 17)
    assert {"DIAG-E002", "DIAG-E004"} <= _codes(tmp_path, lines)


@pytest.mark.parametrize("header", [True, False])
def test_a_connector_failing_to_register_the_kv_caches_is_a_start_up_failure(tmp_path: Path, header: bool) -> None:
    """The model runner hands its allocated caches to the KV connector at start-up (initialize_kv_cache ->
    register_kv_caches): a transfer library's error there is the KV path failing and the worker never serving,
    also from frames cut above them."""
    connector = "/opt/venv/lib/python3.12/site-packages/vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py"
    nixl = "/opt/venv/lib/python3.12/site-packages/nixl/_api.py"
    lines = _traceback([(connector, "register_kv_caches", "self.src_xfer_side_handle = self.nixl_wrapper.prep_xfer_dlist("),
                        (nixl, "prep_xfer_dlist", "handle = self.agent.prepXferDlist(agent_name, descs, handle_list)")],
                       "nixl._bindings.nixlNotFoundError: NIXL_ERR_NOT_FOUND")
    assert _codes(tmp_path, lines if header else lines[1:]) == {"DIAG-E002", "DIAG-E004"}
