"""Tracebacks judged by their frames (diag.parsers.frames): the engine whose package they ran in and the phase the
outermost known frame decides, over stacks built from the engines' real function names (the adapters' and core's
frames tables), then end to end: a cut or whole traceback at ERROR or bare is a death while serving (E001) or a
start-up failure (E004), one at WARNING none, and a run without any other evidence takes its engine from them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diag.files import find_runs
from diag.parsers import engines, frames
from diag.parsers.ingest import parse_bulk
from diag.pipeline import Pipeline
from diag.rules.settings import Settings
from diag.sources import BatchSource

SITE = "/usr/local/lib/python3.12/dist-packages/"
PY = "/usr/lib/python3.12/"
ENTRY = [(f"{PY}multiprocessing/process.py", "_bootstrap"), (f"{PY}multiprocessing/process.py", "run"),
         (f"{PY}asyncio/runners.py", "run"), ("uvloop/loop.pyx", "uvloop.loop.Loop.run_until_complete")]


def _functions(owner: str) -> dict[str, list[tuple[str, str]]]:
    """(module, function) of every startup/serving function a table names, by phase (a module its ``files``
    allow, else one under the table's package)."""
    tabs = {t.owner: t for t in frames.tables()[0]}
    t = tabs[owner]
    out: dict[str, list[tuple[str, str]]] = {"startup": [], "serving": [], "neutral": []}
    for fs in t.functions.values():
        for f in fs:
            if not f.innermost:
                out[f.phase].append((f.files[0] if f.files else f"{t.packages[0]}/x/mod.py", f.name))
    return out


ENGINES = ("vllm", "sglang", "trtllm")
TABLES = {e: _functions(e) for e in ENGINES}


def test_every_table_row_names_its_source_and_a_known_phase() -> None:
    paths = [frames.CORE_TABLE, *(p for _, p in engines.catalog_files("frames"))]
    for path in paths:
        data = tomllib.loads(Path(str(path)).read_text(encoding="utf-8"))
        rows = data.get("function", []) + [f for t in data.get("table", []) for f in t.get("function", [])]
        assert rows, path
        assert all(r["phase"] in frames.PHASES and r["source"].strip() for r in rows), path


def test_adapters_own_their_tables() -> None:
    """vLLM's and SGLang's functions come from their adapters; TRT-LLM's from core's table until its adapter."""
    owners = {t.owner: t for t in frames.tables()[0]}
    assert owners["vllm"].packages == ("vllm",) and owners["sglang"].packages == ("sglang",)
    assert owners["trtllm"].engine and not owners["dynamo"].engine and not owners["neutral"].packages


@settings(max_examples=150, deadline=None)
@given(engine=st.sampled_from(ENGINES), data=st.data())
def test_outermost_known_frame_decides(engine: str, data: st.DataObject) -> None:
    """Entry points, neutral frames and unknown library frames around, then one decisive frame, then any of the
    engine's other functions inside: the decisive one names the phase, the package the engine."""
    table = TABLES[engine]
    phase = data.draw(st.sampled_from(("startup", "serving")))
    module, fn = data.draw(st.sampled_from(table[phase]))
    outer = data.draw(st.lists(st.sampled_from(ENTRY + [(f"{SITE}{m}", f) for m, f in table["neutral"]]),
                               max_size=4))
    inner = data.draw(st.lists(st.sampled_from(table["startup"] + table["serving"]), max_size=5))
    lib = [(f"{SITE}torch/nn/modules/module.py", "_call_impl"), (f"{SITE}torch/nn/modules/module.py", "forward")]
    calls = [*outer, (f"{SITE}{module}", fn), *[(f"{SITE}{m}", f) for m, f in inner], *lib]
    v = frames.judge(calls, whole=data.draw(st.booleans()))
    assert (v.engine, v.phase, v.at) == (engine, phase, f"{module}:{fn}")


@pytest.mark.parametrize(("calls", "want"), [
    # construction in an engine's package, entered through its neutral entry point: start-up
    ([(f"{SITE}vllm/v1/engine/core.py", "run_engine_core"), (f"{SITE}vllm/v1/engine/core.py", "__init__"),
      (f"{SITE}vllm/v1/executor/abstract.py", "__init__")], ("vllm", "startup")),
    # an object built while a request was handled (an unknown engine frame outside it): no phase
    ([(f"{SITE}vllm/entrypoints/openai/serving_chat.py", "create_chat_completion"),
      (f"{SITE}vllm/sampling_params.py", "__init__")], ("vllm", None)),
    # a worker's RPC loop runs both phases: the method it ran decides
    ([(f"{SITE}vllm/v1/executor/multiproc_executor.py", "worker_busy_loop"),
      (f"{SITE}vllm/v1/worker/gpu_worker.py", "determine_available_memory")], ("vllm", "startup")),
    ([(f"{SITE}vllm/v1/executor/multiproc_executor.py", "worker_busy_loop"),
      (f"{SITE}vllm/v1/worker/gpu_worker.py", "execute_model")], ("vllm", "serving")),
    # a generic name counts only in the module that defines it
    ([(f"{SITE}vllm/entrypoints/openai/chat_completion/stream_processor.py", "step")], ("vllm", None)),
    # a source checkout (no site-packages): the package from the path's directories
    ([("/opt/src/sglang/python/sglang/srt/managers/scheduler.py", "event_loop_overlap")], ("sglang", "serving")),
    # Dynamo's worker wrapper decides only when its own body raised (innermost of a whole traceback)
    ([(f"{SITE}dynamo/runtime/__init__.py", "wrapper")], (None, None)),
    # library frames alone: nothing
    ([(f"{SITE}torch/nn/modules/module.py", "forward"), (f"{SITE}flashinfer/sampling.py", "sample")], (None, None)),
])
def test_stacks(calls: list[tuple[str, str]], want: tuple[str | None, str | None]) -> None:
    v = frames.judge(calls)
    assert (v.engine, v.phase) == want


CORE = f"{SITE}vllm/v1/engine/core.py"
SCHED = f"{SITE}sglang/srt/managers/scheduler.py"


@pytest.mark.parametrize(("calls", "callees", "whole", "want"), [
    # a call an entry makes before it builds the engine (SGLang's faulthandler.enable(): a C function, no frame)
    ([(SCHED, "run_scheduler_process")], ["enable"], True,
     ("startup", f"{SCHED[len(SITE):]}:run_scheduler_process -> enable")),
    # the entry's code line calls its loop, the traceback cut there: the loop died
    ([(CORE, "run_engine_core")], ["run_busy_loop"], False,
     ("serving", f"{CORE[len(SITE):]}:run_engine_core -> run_busy_loop")),
    # its loop reached through a decorator's wrapper: the code line names the loop, the walk goes on into it
    ([(SCHED, "run_scheduler_process"), (f"{SITE}torch/utils/_contextlib.py", "decorate_context"),
      (SCHED, "event_loop_normal")], ["event_loop_normal", "func", None], False,
     ("serving", f"{SCHED[len(SITE):]}:event_loop_normal")),
    # its teardown (except/finally) is no start-up; an entry that raised itself says nothing
    ([(CORE, "run_engine_core"), (CORE, "shutdown")], [None, None], False, (None, None)),
    ([(CORE, "run_engine_core")], [None], True, (None, None)),
    # no code lines: the next frame is the callee (an unknown helper of the process's set-up)
    ([(f"{SITE}vllm/v1/executor/multiproc_executor.py", "worker_main"),
      (f"{SITE}vllm/utils/system_utils.py", "set_process_title")], [], False,
     ("startup", "vllm/v1/executor/multiproc_executor.py:worker_main -> set_process_title")),
])
def test_process_entry_decides_by_its_callee(calls: list, callees: list, whole: bool,
                                             want: tuple[str | None, str | None]) -> None:
    """A process entry's callees are start-up unless its ``loops`` (loop, teardown) or a table name them."""
    v = frames.judge(calls, whole, callees)
    assert (v.phase, v.at) == want


def test_code_line_callee() -> None:
    assert [frames.callee(c) for c in ("    engine_core.run_busy_loop()", "    scheduler = Scheduler(",
                                       "    faulthandler.enable()", "    raise TimeoutError(msg)",
                                       "    return await self.engine.step()", "    x = 1")] == [
        "run_busy_loop", "Scheduler", "enable", None, "step", None]


def test_innermost_only_when_whole() -> None:
    calls = [(f"{PY}asyncio/runners.py", "run"), (f"{SITE}dynamo/runtime/__init__.py", "wrapper")]
    assert frames.judge(calls, whole=True).phase == "startup"
    assert frames.judge(calls, whole=False).phase is None
    assert frames.judge([*calls, (f"{SITE}dynamo/vllm/main.py", "worker")], whole=True).phase is None


# ---------------------------------------------------------------- end to end: a file read as a user reads it

def _tb(prefix: str, calls: list[tuple[str, str]], exc: str | None) -> str:
    lines = [f"{prefix}Traceback (most recent call last):"]
    for i, (path, fn) in enumerate(calls):   # each code line calls the next frame's function, the last one a helper
        call = calls[i + 1][1] if i + 1 < len(calls) else "do_it"
        lines += [f'{prefix}  File "{path}", line {100 + i}, in {fn}', f"{prefix}    self.{call}()"]
    if exc:
        lines.append(f"{prefix}{exc}")
    return "\n".join(lines) + "\n"


SERVING = [(f"{SITE}vllm/v1/engine/core.py", "run_engine_core"), (f"{SITE}vllm/v1/engine/core.py", "run_busy_loop"),
           (f"{SITE}vllm/v1/engine/core.py", "_process_engine_step"), (f"{SITE}vllm/v1/engine/core.py", "step"),
           (f"{SITE}torch/nn/modules/module.py", "forward")]
STARTUP = [(f"{SITE}sglang/srt/managers/scheduler.py", "run_scheduler_process"),
           (f"{SITE}sglang/srt/managers/scheduler.py", "__init__"),
           (f"{SITE}sglang/srt/model_executor/model_runner.py", "init_memory_pool")]


def _codes(tmp_path: Path, text: str) -> tuple[set[str], dict, str | None]:
    path = tmp_path / "worker.log"
    path.write_text(text)
    runs = find_runs([str(path)])
    report = Pipeline(BatchSource(runs[0]), Settings()).once()
    found = [f for f in report.findings if f.severity in ("warning", "error")]
    ev = next((f.evidence for f in found if f.code in ("DIAG-E001", "DIAG-E004")), {})
    return {f.code for f in found}, ev, report.run.engine_name


@pytest.mark.parametrize(("prefix", "calls", "exc", "code", "engine"), [
    ("(EngineCore_DP0 pid=7) ERROR 05-13 11:32:54 [core.py:710] ", SERVING, None, "DIAG-E001", "vllm"),
    ("", SERVING, "ZeroDivisionError: division by zero", "DIAG-E001", "vllm"),
    ("", STARTUP, None, "DIAG-E004", "sglang"),
    ("", STARTUP, "KeyError: 'no_such_key'", "DIAG-E004", "sglang"),
])
def test_error_tracebacks_are_deaths_by_their_frames(tmp_path: Path, prefix: str, calls: list, exc: str | None,
                                                     code: str, engine: str) -> None:
    codes, ev, run_engine = _codes(tmp_path, _tb(prefix, calls, exc))
    assert codes == {code}
    assert ev["phase_by"] == "frames" and ev["frame"] == frames.judge(calls).at
    assert run_engine == engine


RUNPY = [(f"{PY}runpy.py", "_run_module_as_main"), (f"{PY}runpy.py", "_run_code")]


@pytest.mark.parametrize(("start", "exc", "codes"), [
    ("", None, {"DIAG-E001"}),   # cut: the exception escaped the program, which ended (no readiness evidence)
    ("INFO 01-22 14:32:19 llm_engine.py:73] Initializing an LLM engine with config: model='m'\n", None,
     {"DIAG-E004"}),            # ... after the engine began and before it was ready
    ("", "frob.FrobError: quux", {"DIAG-E005"}),   # whole: its exception names it, as before
])
def test_traceback_from_a_programs_top(tmp_path: Path, start: str, exc: str | None, codes: set[str]) -> None:
    found, ev, _ = _codes(tmp_path, start + _tb("", RUNPY, exc))
    assert found == codes
    assert not ev or ev["root_cause"] == "escaped_traceback"


def test_warning_traceback_is_no_failure(tmp_path: Path) -> None:
    prefix = "(EngineCore_DP0 pid=7) WARNING 05-13 11:32:54 [core.py:710] "
    codes, _, run_engine = _codes(tmp_path, _tb(prefix, SERVING, None))
    assert codes == set() and run_engine == "vllm"   # the engine still told by the frames


def test_parsed_fault_carries_the_verdict() -> None:
    recs, _ = parse_bulk([_tb("", STARTUP, None).encode()], year=2025)
    (fault,) = recs
    assert (fault.engine, fault.frame_phase, fault.frame_at) == (
        "sglang", "startup", "sglang/srt/managers/scheduler.py:__init__")


def test_headers_and_chained_tracebacks_are_one_failure(tmp_path: Path) -> None:
    """'Exception in <Name>:' before a traceback and the chaining line between two are part of it: the cause's
    traceback (a worker's execute_model) and the one it caused (the busy loop) are one death, no E005 beside it."""
    worker = [(f"{SITE}vllm/v1/worker/gpu_worker.py", "execute_model"), (f"{SITE}torch/nn/modules/module.py", "forward")]
    text = ("Exception in thread Thread-3 (process_output):\n" + _tb("", worker, "frob.FrobError: quux")
            + "\nThe above exception was the direct cause of the following exception:\n\n"
            + _tb("", SERVING[:3], "RuntimeError: Worker failed with error 'quux'"))
    codes, ev, _ = _codes(tmp_path, text)
    assert codes == {"DIAG-E001"} and ev["phase_by"] == "frames"
