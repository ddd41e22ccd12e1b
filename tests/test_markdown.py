"""`diag tail --format markdown`: every sample run's postmortem (or diagnosis) is golden, and every golden reads
cleanly as GitHub-flavoured Markdown (markdown-it-py's GFM-like preset): tables square, fences closed, no
escapes, lines and length bounded. Regenerate with ``DIAG_UPDATE_GOLDEN=1 python -m pytest tests/test_markdown.py``.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from golden_io import GOLDEN, check_golden_text
from loading import report_of
from markdown_it import MarkdownIt

from diag.emit.markdown import LINE_CHARS, code, fenced, inline, render_markdown, table

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(p.name for p in (ROOT / "samples" / "runs").iterdir())
PAIR = ("sweep-4xdep2", "nixl-failures")   # several runs in one document: a diagnosis and a postmortem
MAX_RUN_CHARS = 16_000                     # one run's section
PARSER = MarkdownIt("gfm-like", {"linkify": False})


def _cells(row: str) -> int:
    """The cells of a GFM table row: split at the pipes no backslash escapes, outer pipes dropped."""
    return len(re.split(r"(?<!\\)\|", row.strip().removeprefix("|").removesuffix("|")))


def lint(text: str) -> None:
    """What renders cleanly on GitHub: every table row as many cells as its header, every fence closed, no
    terminal escape or control character, no line over LINE_CHARS."""
    lines = text.splitlines()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text), "a raw escape or control character"
    assert max(map(len, lines)) <= LINE_CHARS
    tokens = PARSER.parse(text)
    tables = [t for t in tokens if t.type == "table_open"]
    assert text.count("\n|---") == len(tables), "a table the parser did not read as one"
    for t in tables:
        assert t.map is not None
        rows = lines[t.map[0]:t.map[1]]
        assert len(rows) >= 3 and {_cells(r) for r in rows} == {_cells(rows[0])}, rows
    for t in (t for t in tokens if t.type == "fence"):
        assert t.map is not None
        last = lines[t.map[1] - 1].strip()
        assert t.map[1] - t.map[0] >= 2 and last == t.markup, f"fence opened at line {t.map[0] + 1} is not closed"


@pytest.mark.parametrize("run", RUNS)
def test_markdown_is_golden(run: str) -> None:
    text = render_markdown([report_of(ROOT / "samples" / "runs" / run)])
    check_golden_text(f"tail-{run}.md", text)
    assert len(text) <= MAX_RUN_CHARS


def test_the_command_writes_the_golden_and_several_runs_one_section_each() -> None:
    res = run_diag("tail", "samples/runs/engine-crash", "--format", "markdown")
    assert res.returncode == 1 and res.stderr == ""
    assert res.stdout == (GOLDEN / "tail-engine-crash.md").read_text(encoding="utf-8")
    res = run_diag("tail", *(f"samples/runs/{r}" for r in PAIR), "--format", "markdown")
    assert res.returncode == 0, res.stderr
    check_golden_text("tail-two-runs.md", res.stdout)
    assert res.stdout.startswith("# diag: 2 runs\n")
    heads = [line for line in res.stdout.splitlines() if line.startswith("## ")]
    assert [h.split()[1] for h in heads] == ["Diagnosis", "Postmortem"]


def test_every_golden_lints_clean() -> None:
    goldens = sorted(GOLDEN.glob("*.md"))
    assert len(goldens) == len(RUNS) + 1
    for path in goldens:
        lint(path.read_text(encoding="utf-8"))


def _golden(run: str, heading: str | None = None) -> str:
    """A run's golden Markdown, or its part under ``### heading`` (up to the next one)."""
    text = (GOLDEN / f"tail-{run}.md").read_text(encoding="utf-8")
    return text if heading is None else text.split(f"### {heading}\n", 1)[1].split("\n### ", 1)[0]


def test_engine_crash_names_its_root_cause_owner_and_failure_time() -> None:
    text = _golden("engine-crash")
    root = next(line for line in text.splitlines() if line.startswith("**Root cause**"))
    assert "decode-w0: CUDA out of memory at 09-03 04:03:01" in root and "owner **engine** (vLLM v0.26.1)" in root
    assert "- **failed at**: 09-03 04:03:01" in text
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB." in text  # the log's own line
    assert "`samples/runs/engine-crash/logs/gb200-r05-n15_decode_w0.out:703`" in text
    assert "report it to the vllm maintainers with the build (vLLM v0.26.1)" in text      # the engine's next step
    assert "16 consequence(s) after the failure" in _golden("engine-crash", "Set aside")  # busy-loop death: its own
    timeline = _golden("engine-crash", "Timeline")
    assert "| 09-03 04:03:01 | error | decode-w0 | first error: CUDA out of memory |" in timeline
    assert "\n*39 more events not shown (1 stage, 35 startup, 1 benchmark, 2 teardown);" in timeline


def test_a_recipe_cause_shows_its_flags_and_their_fix() -> None:
    assert "owner **recipe**" in _golden("block-size-crash")
    assert "| DIAG-C012 | decode | decode: block-size differs: prefill 16, decode 32" in _golden(
        "block-size-crash", "Recipe flags involved")
    assert _golden("block-size-crash", "Fix").startswith(
        "\n- **DIAG-C012** (decode): set `block-size: 16` in `backend.vllm_config.decode`")


def test_several_root_causes_are_a_list_of_their_own() -> None:
    text = _golden("startup-stall")
    kinds = [t.type for t in PARSER.parse(text) if t.type.endswith("list_open") and t.level == 0]
    assert kinds[:2] == ["ordered_list_open", "bullet_list_open"]   # the causes, then the verdict and facts
    assert "2. prefill-w3 has been in CUDA-graph capture for 10m25s at 08-27 18:15:12; owner **unknown**" in text


def test_hostile_text_stays_inside_its_cell_and_fence() -> None:
    nasty = "a | b `c` ``d\x1b[31m red\x1b[0m <b>*x*</b> [l](u) _y_\nz"
    cells = [inline(nasty, cell=True), code(nasty, cell=True), code("`" + nasty, cell=True, tail=True)]
    block = fenced(["```", nasty, "x" * 5000])
    text = "\n".join([*table(["a", "b", "c"], [cells]), "", *block, ""])
    lint(text)
    html = PARSER.render(text)
    assert "<b>" not in html and "<em>" not in html and "<a " not in html and "\x1b" not in text
    assert html.count("<td>") == 3 and "red" in html
    assert len(block[2]) <= 240 and block[0].startswith("````") and block[-1] == "````"
    cut = inline("*|" * 300 + "`a|b`", 41, cell=True)
    assert len(cut) <= 41 and cut.endswith("\\|…") and inline("x `a|b`", cell=True) == "x `a\\|b`"


def test_follow_writes_the_postmortem_when_stopped() -> None:
    """``tail -f --format markdown``: the finding events go to stderr, stdout holds only the document."""
    proc = subprocess.Popen([sys.executable, "-m", "diag", "tail", "samples/runs/engine-crash", "-f", "--format",
                             "markdown", "--heartbeat", "3600"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = [proc.stderr.readline() for _ in range(3)]   # following …, then the findings as they open
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert any("DIAG-E001" in line for line in seen + err.splitlines()), seen
    assert proc.returncode == 1 and out.startswith("## Postmortem of 5044719 "), err[-500:]
    assert "owner **engine**" in out
    lint(out)


def test_bad_input_is_one_line_and_exit_2() -> None:
    res = run_diag("tail", "no/such/run", "--format", "markdown")
    assert res.returncode == 2 and res.stdout == ""
    assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith("diag tail: ")
