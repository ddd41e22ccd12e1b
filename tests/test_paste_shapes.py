"""Shapes of pasted logs read as the engines wrote them (issue 36, set C's classes), each built from the sources'
format strings and function names, never from one excerpt: V0's background-loop deaths (its done-callback's
frames and 'Engine background task failed'), a launcher's stamp before an engine's lines, a terminal's hard wrap,
Dynamo's TRT-LLM worker set-up, Mooncake's store client errors with coro_rpc's easylog head, and the heads of
LMCache 0.1 and of TensorRT-LLM's early C++ logger."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.files import find_runs
from diag.parsers import engines, frames
from diag.parsers.clean import peel
from diag.parsers.headers import parse_header
from diag.parsers.ingest import parse_bulk
from diag.parsers.wraps import unwrap, wrap_width
from diag.pipeline import Pipeline
from diag.rules.settings import Settings
from diag.sources import BatchSource

SITE = "/usr/local/lib/python3.10/dist-packages/"
ENGINE = f"{SITE}vllm/engine/async_llm_engine.py"
# V0 AsyncLLMEngine (0.4.3 / 0.5.4): the loop task's done-callback re-raises how run_engine_loop ended
V0_LOOP = [(ENGINE, "_raise_exception_on_finish", "task.result()"),
           (ENGINE, "run_engine_loop", "has_requests_in_progress = await asyncio.wait_for("),
           ("/usr/lib/python3.10/asyncio/tasks.py", "wait_for", "return fut.result()"),
           (ENGINE, "engine_step", "request_outputs = await self.engine.step_async()")]
# CPython asyncio events.Handle._run: 'Exception in callback {cb}' with the handle as a context line
ASYNCIO = ["Exception in callback functools.partial(<function _raise_exception_on_finish at 0x7f00>, "
           "error_callback=<bound method AsyncLLMEngine._error_callback of <vllm.engine.async_llm_engine."
           "AsyncLLMEngine object at 0x7f01>>)",
           "handle: <Handle functools.partial(<function _raise_exception_on_finish at 0x7f00>)>"]


def _traceback(calls: list[tuple[str, str, str]]) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for i, (path, fn, code) in enumerate(calls):
        lines += [f'  File "{path}", line {40 + i}, in {fn}', f"    {code}"]
    return lines


def _codes(tmp_path: Path, lines: list[str]) -> tuple[set[str], list[tuple[str, str]]]:
    path = tmp_path / "worker.log"
    path.write_text("\n".join(lines) + "\n")
    report = Pipeline(BatchSource(find_runs([str(path)])[0]), Settings()).once()
    return ({f.code for f in report.findings if f.severity in ("warning", "error")},
            list(report.run.skipped))


def test_v0_loop_callback_frames_are_serving() -> None:
    verdict = frames.judge([(p, f) for p, f, _ in V0_LOOP])
    assert (verdict.engine, verdict.phase) == ("vllm", "serving")
    assert frames.judge([(ENGINE, "_log_task_completion")]).phase == "serving"   # 0.5.4's callback, cut at once


def test_v0_background_task_failed_is_a_death(tmp_path: Path) -> None:
    head = "ERROR 08-15 03:15:55 async_llm_engine.py:56] "   # V0's head; the site logs with exc_info
    lines = [f"{head}Engine background task failed", f"{head}Traceback (most recent call last):",
             f'{head}  File "{ENGINE}", line 46, in _log_task_completion']
    assert _codes(tmp_path, lines)[0] == {"DIAG-E001"}


@pytest.mark.parametrize("stamp", ["2024-06-10 13:26:25 ", "2026-06-09 14:01:54.604 [Info] (Process) "])
def test_launcher_stamp_peeled(tmp_path: Path, stamp: str) -> None:
    assert _codes(tmp_path, [stamp + line for line in [*ASYNCIO, *_traceback(V0_LOOP)]])[0] == {"DIAG-E001"}


@pytest.mark.parametrize(("line", "rest"), [
    ("2026-06-09 14:01:54.604 [Info] (Process) (APIServer pid=7) INFO 06-09 14:01:54 [api_server.py:1] up",
     "(APIServer pid=7) INFO 06-09 14:01:54 [api_server.py:1] up"),
    ("2024-06-10 13:26:25     task.result()", "    task.result()"),
    ("2026-04-21 14:11:37 [INFO] Model is not ready", None),                 # srtctl's own head
    ("2026-06-07 10:59:31,843 [INFO] sglang.srt.entrypoints.http_server: Warmup ended", None),
    ("2026-03-31 13:29:07  INFO vllm_router_rs::server: src/server.rs:1046: Starting server", None),
])
def test_launcher_stamp_keeps_heads_that_start_with_a_date(line: str, rest: str | None) -> None:
    assert peel(line)[0] == (rest if rest is not None else line)


def _wrapped(lines: list[str], width: int) -> list[str]:
    return [line[i:i + width] for line in lines for i in range(0, max(len(line), 1), width)]


def test_terminal_wrap_joined(tmp_path: Path) -> None:
    lines = ["ERROR:asyncio:" + ASYNCIO[0], ASYNCIO[1], *_traceback(V0_LOOP)]
    wrapped = _wrapped(lines, 96)
    assert wrap_width("\n".join(wrapped).encode() + b"\n") == 96
    joined = unwrap(("\n".join(wrapped) + "\n").encode(), 96).decode().split("\n")
    assert [x for x in joined if x] == lines and len(joined) == len(wrapped) + 1   # line numbers kept
    assert _codes(tmp_path, wrapped)[0] == {"DIAG-E001"}


def test_no_wrap_signature_leaves_the_file() -> None:
    stats = "INFO 08-15 03:15:51 metrics.py:396] Avg prompt throughput: 1.0 tokens/s, Running: 3 reqs"
    text = "\n".join([stats] * 5 + _traceback(V0_LOOP)).encode() + b"\n"
    assert wrap_width(text) is None


DYNAMO = "/opt/dynamo/venv/lib/python3.12/site-packages/"


@pytest.mark.parametrize(("tail", "loop"), [
    ([(f"{DYNAMO}dynamo/trtllm/main.py", "worker")], "init"),          # 0.6.1: worker -> init -> serve_endpoint
    ([(f"{DYNAMO}dynamo/trtllm/workers/__init__.py", "init_worker"),
      (f"{DYNAMO}dynamo/trtllm/workers/llm_worker.py", "init_llm_worker")], "serve_endpoint"),   # 1.5.1, 1.6.1
])
def test_dynamo_trtllm_worker_cut_in_its_setup(tail: list[tuple[str, str]], loop: str) -> None:
    calls = [("<frozen runpy>", "_run_module_as_main"), ("<frozen runpy>", "_run_code"),
             (f"{DYNAMO}dynamo/trtllm/__main__.py", "<module>"), (f"{DYNAMO}dynamo/trtllm/main.py", "main"),
             (f"{DYNAMO}dynamo/runtime/__init__.py", "wrapper"), *tail]
    assert frames.judge(calls).phase == "startup"          # cut at the entry, its callee unseen: it was setting up
    seen = [None] * (len(calls) - 1)
    assert frames.judge(calls, callees=[*seen, loop]).phase is None              # ... into what serves: no telling
    assert frames.judge(calls, callees=[*seen, "fetch_model"]).phase == "startup"   # ... into its set-up


def test_mooncake_store_client_errors_are_kv_connector_failures(tmp_path: Path) -> None:
    # master_client.cpp MasterClient::MountSegment and store_py.cpp setup's LOG(ERROR) (Mooncake v0.3.1),
    # behind yalantinglibs' easylog line of coro_rpc_client.hpp (appender.hpp write_record)
    lines = ["2025-04-17 19:46:42.566927 ERROR    [975] [coro_rpc_client.hpp:978] read rpc body failed, error "
             "msg:End of file. close the socket.",
             "E0417 19:46:42.567027   481 master_client.cpp:246] Failed to mount segment due to rpc error",
             "E0417 19:46:42.567034   481 store_py.cpp:203] Failed to mount segment: UNKNOWN_ERROR"]
    assert parse_header(lines[0]).level == "ERROR"
    recs, _ = parse_bulk(["\n".join(lines).encode() + b"\n"], year=2025)
    assert [r.cause for r in recs if r.kind == "fault"] == ["kv_connector", "kv_connector"]
    assert _codes(tmp_path, lines)[0] == {"DIAG-E002"}


@pytest.mark.parametrize("lines", [
    # LMCache 0.1: '%(levelname)s LMCache: %(message)s [%(asctime)s] -- %(pathname)s:%(lineno)d'
    ["INFO LMCache: Using default batched implementation of the put() method [2024-11-19 20:08:49,265] -- "
     "/opt/lmcache/storage_backend/abstract_backend.py:99"],
    # TensorRT-LLM's C++ logger, '%s[%s] ' / '%s[%s][%d] ' with kPREFIX '[TensorRT-LLM]'
    ["[TensorRT-LLM][INFO] Set logger level by INFO", "[TensorRT-LLM][WARNING][1] Invalid logger level"],
])
def test_early_logger_heads_are_read(tmp_path: Path, lines: list[str]) -> None:
    engines.adapters()
    assert all(parse_header(line).cls != "unknown" for line in lines)
    assert _codes(tmp_path, lines) == (set(), [])   # read, nothing found, not refused
