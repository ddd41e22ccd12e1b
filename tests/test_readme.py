"""The README's examples are what diag prints: every output block the README marks with the command it shows
(``<!-- output of `diag ...` -->``, optionally ``, until the line `TEXT` ``: the lines before that one) is
that command's output at 100 columns without colour, compared byte for byte (no line of diag's text ends in
whitespace). The commands table lists every command the CLI has.

Regenerate the blocks after an intended change of the output (review the diff):

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
MARK = re.compile(r"<!-- output of `(?P<cmd>diag [^`]+)`(?:, until the line `(?P<until>[^`]+)`)? -->\n```\n")


def examples(text: str) -> list[tuple[list[str], str | None, int, int]]:
    """Each marked block: the diag arguments, the line its output is cut before, where the block starts and
    ends in the README."""
    out = []
    for m in MARK.finditer(text):
        end = text.index("```\n", m.end())
        out.append((shlex.split(m["cmd"])[1:], m["until"], m.end(), end))
    return out


def printed(args: list[str], until: str | None) -> str:
    """What ``diag ARGS`` prints at 100 columns without colour, up to the line ``until`` (not included)."""
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"} | {"COLUMNS": "100", "NO_COLOR": "1"}
    res = subprocess.run([sys.executable, "-m", "diag", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode in (0, 1) and res.stdout, (args, res.stderr[-500:])
    if until is None:
        return res.stdout
    lines = res.stdout.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if line.rstrip("\n") == until)
    return "".join(lines[:cut])


def test_readme_examples_are_the_real_output() -> None:
    text = README.read_text()
    found = examples(text)
    assert len(found) >= 2, "the tail and the report examples are marked"
    first = re.search(r"```sh\n(.+?)\n```", text, re.S)
    assert first is not None, "README.md: no ```sh block"
    top = shlex.split(first.group(1).split("&&")[-1])
    assert top[0].endswith("/diag") and top[1:] == ["tail", "samples/runs/prefill-bound"] == found[0][0], \
        "the README's top command, unchanged, is the first example shown"
    got = [printed(args, until) for args, until, _, _ in found]
    if os.environ.get("DIAG_UPDATE_README") == "1":
        for (_, _, start, end), out in sorted(zip(found, got, strict=True), key=lambda x: -x[0][2]):
            text = text[:start] + out + text[end:]
        README.write_text(text)
        found = examples(text)
    for (args, _, start, end), out in zip(found, got, strict=True):
        assert text[start:end] == out, (
            f"README.md's example of diag {' '.join(args)} is not what diag prints: "
            "DIAG_UPDATE_README=1 .venv/bin/python -m pytest -n0 tests/test_readme.py")


def test_the_commands_table_lists_every_command() -> None:
    import typer.main

    from diag.cli import app

    group = typer.main.get_command(app)
    commands = set(group.commands)  # type: ignore[attr-defined]
    text = README.read_text()
    table = text[text.index("## Commands"):]
    table = table[:table.index("\n\n", table.index("| command |"))]
    listed = set(re.findall(r"^\| `diag (\w+)", table, re.M))
    assert listed == commands, f"README's commands table: missing {sorted(commands - listed)}, extra {sorted(listed - commands)}"
