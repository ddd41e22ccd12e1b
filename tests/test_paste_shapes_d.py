"""Shapes of pasted logs read as the engines wrote them (issue 36, set D's classes), each built from the sources'
format strings and function names, never from one excerpt: a subprocess's lines relayed by 'dynamo run' (its
level the relay's, not the line's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.files import find_runs
from diag.parsers.clean import peel
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
