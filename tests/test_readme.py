"""The README's example output is what diag prints: the README's first command, run at 100 columns without
colour, compared byte for byte with the block shown under it (no line of diag's text ends in whitespace).

Regenerate the block after an intended change of the output (review the diff):

    DIAG_UPDATE_README=1 .venv/bin/python -m pytest -n0 tests/test_readme.py
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
INTRO = "What the first prints at 100 columns"


def _example(text: str) -> tuple[list[str], int, int]:
    """The first command's diag arguments, and where its output block starts and ends in the README."""
    first = re.search(r"```sh\n(.+?)\n```", text, re.S)
    assert first is not None, "README.md: no ```sh block"
    args = shlex.split(first.group(1).split("&&")[-1])
    assert args[0].endswith("/diag") or args[0] == "diag", args
    start = text.index("```\n", text.index(INTRO)) + len("```\n")
    return args[1:], start, text.index("```\n", start)


def test_readme_example_output_is_the_real_output() -> None:
    text = README.read_text()
    args, start, end = _example(text)
    assert args == ["tail", "samples/runs/prefill-bound"]  # the README's top command, unchanged
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"} | {"COLUMNS": "100", "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, "-m", "diag", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode in (0, 1) and res.stdout, res.stderr[-500:]
    got = res.stdout
    if os.environ.get("DIAG_UPDATE_README") == "1":
        README.write_text(text[:start] + got + text[end:])
        text = README.read_text()
    assert text[start:text.index("```\n", start)] == got, (
        "README.md's example output is not what diag prints: "
        "DIAG_UPDATE_README=1 .venv/bin/python -m pytest -n0 tests/test_readme.py")
