"""How TensorRT-LLM's own lines say what rule texts quote (``{says.<name>}``, :data:`diag.parsers.engine.SAYS`)."""

from __future__ import annotations

PHRASES: dict[str, str] = {
    # _torch/pyexecutor/py_executor.py profile_step: a line per scheduler step, only under print_iter_log
    "stats_lines": "TensorRT-LLM prints an iteration line (\"iter = N, ...\") per scheduler step only when the engine\n"
                   "config sets print_iter_log; an idle engine prints none.",
    "stats_name": "TensorRT-LLM iteration lines",
    "build_name": "TensorRT-LLM build",
}
