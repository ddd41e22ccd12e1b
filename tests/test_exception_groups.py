"""Exception-group tracebacks read like plain ones, and uvicorn's 'Exception in ASGI application' as a request's
failure in the API server. The tracebacks are CPython's own (``traceback.format_exception`` of a raised
``ExceptionGroup``: the '  + Exception Group Traceback' head, '|' gutters, '+-+---- 1 ----' separators), the
uvicorn line its run_asgi's ``logger.error("Exception in ASGI application\\n", exc_info=exc)`` under its default
formatter ('%(levelprefix)s %(message)s')."""

from __future__ import annotations

import traceback
from pathlib import Path

from loading import report_of

from diag.parsers import faults
from diag.parsers.lineparser import LineParser
from diag.parsers.records import Fault

from helpers import parse_text

SERVING = "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/serving_chat.py"
ENGINE = "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py"
UVICORN_PY = "/usr/local/lib/python3.12/dist-packages/uvicorn/protocols/http/h11_impl.py"
UVICORN = "ERROR:    Exception in ASGI application\n"   # levelprefix 'ERROR:' padded to 9, then the message


def _group_traceback(leaf: BaseException) -> list[str]:
    """CPython's lines for an ExceptionGroup raised in a handler (frames in vLLM's serving module) around a
    sub-exception raised in the engine client (its module), caught and formatted by uvicorn's run_asgi (its
    module), as traceback.format_exception prints it."""
    scope: dict = {"leaf": leaf, "traceback": traceback}
    exec(compile("def generate():\n    raise leaf\n", ENGINE, "exec"), scope)
    exec(compile("def create_chat_completion():\n    try:\n        generate()\n    except BaseException as e:\n"
                 "        raise ExceptionGroup('unhandled errors in a TaskGroup', [e]) from None\n", SERVING, "exec"),
         scope)
    exec(compile("def run_asgi():\n    try:\n        create_chat_completion()\n    except BaseException as exc:\n"
                 "        return ''.join(traceback.format_exception(exc))\n", UVICORN_PY, "exec"), scope)
    return scope["run_asgi"]().rstrip("\n").split("\n")


def _faults(lines: list[str]) -> list[Fault]:
    parser = LineParser(2025)
    out = [r for i, raw in enumerate(lines) for r in parser.feed(i + 1, raw, None)[0]]
    return [r for r in (*out, *parser.cut_tracebacks()) if isinstance(r, Fault)]


def test_cpython_prints_the_shapes_read() -> None:
    lines = _group_traceback(RuntimeError("the widget is quuxed"))
    assert lines[0] == "  + Exception Group Traceback (most recent call last):"
    assert any(line.startswith("  |   File ") for line in lines)
    assert "  +-+---------------- 1 ----------------" in lines
    assert any(line.startswith("    | Traceback (most recent call last):") for line in lines)


def test_a_whole_group_is_its_leaf_exception_with_every_frame() -> None:
    lines = _group_traceback(RuntimeError("CUDA error: an illegal memory access was encountered"))
    (fault,) = _faults(lines)
    assert fault.exception == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert fault.cause == faults.classify_exception("RuntimeError", fault.exception.split(": ", 1)[1])
    assert fault.frames[:2] == ("run_asgi", "create_chat_completion") and fault.frames[-1] == "generate"
    assert fault.traceback_line == 1 and fault.engine == "vllm"


def test_a_group_cut_anywhere_before_its_leaf_is_a_cut_traceback_with_its_frames() -> None:
    lines = _group_traceback(RuntimeError("the widget is quuxed"))
    leaf = next(i for i, line in enumerate(lines) if "RuntimeError" in line)
    for cut in range(2, leaf):
        got = _faults(lines[:cut])
        assert [f.cause for f in got] == [faults.CUT.name], cut
        assert got[0].frames[0] == "run_asgi"


def test_uvicorns_line_is_a_caught_exception_of_the_api_server() -> None:
    (fault,) = [r for r in parse_text(UVICORN) if isinstance(r, Fault)]
    cause = faults.CAUSES[fault.cause]
    assert cause.caught and not cause.fatal and not cause.death and cause.phase == "serving"


def _report(tmp_path: Path, lines: list[str]) -> list[str]:
    log = tmp_path / "api.log"
    log.write_text(UVICORN + "\n".join(lines) + "\n")
    return [f.code for f in report_of([str(log)]).findings]


def test_an_asgi_exception_is_an_uncaught_exception_never_a_death(tmp_path: Path) -> None:
    """Whole or cut, through the engine client's serving code or not: DIAG-E005, no DIAG-E001/E004."""
    lines = _group_traceback(RuntimeError("the widget is quuxed"))
    leaf = next(i for i, line in enumerate(lines) if "RuntimeError" in line)
    for part in (lines, lines[:leaf], lines[:4]):
        codes = _report(tmp_path, part)
        assert "DIAG-E005" in codes and not {"DIAG-E001", "DIAG-E004"} & set(codes), (len(part), codes)


def test_a_cut_traceback_alone_stays_silent(tmp_path: Path) -> None:
    log = tmp_path / "api.log"
    log.write_text("\n".join(_group_traceback(RuntimeError("x"))[:4]) + "\n")
    assert "DIAG-E005" not in [f.code for f in report_of([str(log)]).findings]


def test_frames_through_a_serving_loop_decide_no_death_under_a_caught_head(tmp_path: Path) -> None:
    """The same cut traceback through a function vLLM's frames table calls its serving loop: an engine death
    alone, a request's failure behind uvicorn's line (the server caught it and went on)."""
    lines = ["Traceback (most recent call last):",
             f'  File "{UVICORN_PY}", line 403, in run_asgi', "    result = await app(",
             f'  File "{ENGINE}", line 480, in output_handler', "    outputs = await engine_core.get_output_async()"]
    log = tmp_path / "alone.log"
    log.write_text("\n".join(lines) + "\n")
    assert "DIAG-E001" in [f.code for f in report_of([str(log)]).findings]
    codes = _report(tmp_path, ["", *lines])
    assert "DIAG-E005" in codes and "DIAG-E001" not in codes
