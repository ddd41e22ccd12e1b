"""Every command's text output as a pipe gets it (``diag tail RUN | cat``), over every shipped sample run and
the recipes for ``check``: no line ends in whitespace, and one number style in it and in the human-text fields
of the JSON documents: an integer of 1,000 or more always carries its thousands separators, unless its
context says it names something (a job id, a port) rather than counts or measures."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from loading import report_of, shared_sample_pipelines

from diag.emit.jsondoc import report_dict
from diag.options import console_for
from diag.rules.catalog import catalog

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(f"samples/runs/{p.name}" for p in (ROOT / "samples" / "runs").iterdir() if p.is_dir())
RECIPES = "tests/data/recipes"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Every sample run indexed (``diag index``), for ``runs`` and ``report``."""
    into = str(tmp_path_factory.mktemp("index"))
    with shared_sample_pipelines():   # each run judged once per process, by whichever asks first
        res = run_diag("index", *RUNS, "--into", into, "--jobs", "1")
    assert res.returncode == 1, res.stderr  # invalid runs among the samples: exit by the verdict (README)
    return into


def _tail(run: str) -> str:
    """``diag tail RUN`` as a pipe gets it: the command's console over the batch report the other test files
    share (one pipeline per run)."""
    from diag.emit.text import render_tail

    out = io.StringIO()
    render_tail(report_of(ROOT / run), console_for(out))
    return out.getvalue()


@pytest.fixture(scope="module")
def texts(index: str) -> dict[str, str]:
    """``diag ARGS`` -> what it writes to a pipe 80 columns wide (the narrowest terminal the outputs fit, where
    most is wrapped or cut; an xdist worker's environment says 80 too), for every command with text output."""
    with pytest.MonkeyPatch.context() as env, shared_sample_pipelines():
        env.setenv("COLUMNS", "80")
        return _texts(index)


def _texts(index: str) -> dict[str, str]:
    out = {f"tail {run}": _tail(run) for run in RUNS}
    commands = [("check", run) for run in RUNS] + [("watch", run, "--once") for run in RUNS]
    commands += [("check", RECIPES), ("report", index, "--format", "text"), ("runs", index), ("rules",),
                 ("index", *RUNS, "--into", index)]
    commands += [("explain", code) for code in catalog()]
    for args in commands:
        res = run_diag(*args)
        assert res.returncode in (0, 1) and res.stdout, (args, res.stderr)
        out[" ".join(args)] = res.stdout
    return out


def test_no_line_ends_in_whitespace(texts: dict[str, str]) -> None:
    padded = [(command, n, line) for command, text in texts.items()
              for n, line in enumerate(text.splitlines(), 1) if line != line.rstrip()]
    assert not padded, padded[:5]


def test_no_line_ends_in_whitespace_on_a_colour_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal the padding is not hidden behind a colour's closing escape either."""
    from diag.emit.text import render_tail

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("NO_COLOR", raising=False)
    screen = Terminal()
    render_tail(report_of(ROOT / "samples" / "runs" / "prefill-bound"), console_for(screen))
    text = screen.getvalue()
    assert "\x1b[" in text
    assert not [line for line in text.splitlines() if re.search(r"\s(?:\x1b\[[\d;]*m)*$", line)]


# ------------------------------------------------------------------ one number style
# A candidate: a run of four or more digits standing as a number of its own. Digits joined to a word, a
# path or a version (gb200, slurm-5090552.out, outputs/5010467, v0.21.0, a git hash, 2026-08-12, 14:05:14)
# are part of a name and no candidate.
BARE = re.compile(r"(?<![\w.,/\\])(?<!\w-)\d{4,}(?:\.\d+)?(?![\w/\\]|-\d|\.[A-Za-z_])")
CODE = re.compile(r"`[^`]*`")   # text to type into a recipe or a shell: YAML takes no separators
IDENTIFIERS = (
    # (kind, the text right before the integer, why it is written whole)
    ("job id", r"\bjobs?(?: id)?:?\s+(?:\d+,\s*)*$", "Slurm names a job by it: squeue, sacct and paths spell it"),
    ("issue or PR number", r"#$", "#45357 is how GitHub names it"),
    ("location", r"(?:\w|^):$", "host:8081, config.yaml:1024: a port or a line, not an amount (a long path folded at the "
     "terminal's edge leaves ':1024' opening the next line)"),
    ("port, seed, rank or PID", r"\b(?:port|seed|rank|pid)[ =]$",
     "a flag or log field whose number names something (rules/effective.py NAMING_FLAG formats it so too)"),
)
# The JSON fields people read (the text output shows them), as against codes, ids, paths and timestamps;
# a finding's ``verdicts`` are scope keys (``C=2048``, schema: common.schema.json), not prose.
HUMAN_TEXT = {"message", "why", "fix", "note", "text", "action", "expect", "label", "sentence", "reason", "summary",
              "topology", "delta_basis"}


def unformatted(text: str) -> list[str]:
    """The integers of 1,000 or more in ``text`` written without thousands separators, with their context,
    except identifiers (:data:`IDENTIFIERS`) and code spans."""
    text = CODE.sub("``", text)
    return [text[max(0, m.start() - 40): m.end() + 20] for m in BARE.finditer(text)
            if not any(re.search(before, text[: m.start()], re.I) for _, before, _ in IDENTIFIERS)]


def wrapped_lines(text: str) -> Iterator[str]:
    """The lines of ``text``, a line whose code span the wrap left open joined with the lines that close it
    (at most four: a lone backtick in prose does not swallow the output)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        j = i + 1
        while lines[i].count("`") % 2 and j < min(len(lines), i + 5):
            lines[i] += " " + lines[j].strip()
            j += 1
        yield lines[i]
        i = j


def human_texts(doc: Any, key: str | None = None, parent: str | None = None) -> Iterator[str]:
    """The prose of a JSON document: the :data:`HUMAN_TEXT` fields, and header rows as ``label value``."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from human_texts(v, k, key)
    elif isinstance(doc, list):
        for v in doc:
            yield from human_texts(v, key, parent)
    elif isinstance(doc, str):
        if parent in ("header", "denominators"):
            yield f"{key} {doc}"
        elif key in HUMAN_TEXT:
            yield doc


@pytest.fixture(scope="module")
def documents(index: str) -> dict[str, Any]:
    """The JSON document of every sample run (``tail``), of ``check`` and of ``report``."""
    docs: dict[str, Any] = {f"tail {run}": report_dict(report_of(ROOT / run)) for run in RUNS}
    for args in [("check", *RUNS, RECIPES), ("report", index)]:
        with shared_sample_pipelines():
            res = run_diag(*args, "--format", "json")
        assert res.returncode in (0, 1), (args, res.stderr)
        docs[" ".join(args)] = json.loads(res.stdout)
    return docs


def test_every_integer_in_the_text_output_is_in_the_number_style(texts: dict[str, str]) -> None:
    bare = [(command, hit) for command, text in texts.items() for line in wrapped_lines(text)
            for hit in unformatted(line)]
    assert not bare, bare[:10]


def test_every_integer_in_the_json_prose_is_in_the_number_style(documents: dict[str, Any]) -> None:
    seen = [text for doc in documents.values() for text in human_texts(doc)]
    assert len(seen) > 500 and any("1,024" in t for t in seen)     # the fields are found: the scan is not empty
    bare = [(command, hit) for command, doc in documents.items() for text in human_texts(doc)
            for hit in unformatted(text)]
    assert not bare, bare[:10]


@pytest.mark.parametrize(("text", "found"), [
    ("--data-parallel-rpc-port 13345 ran but the recipe does not set it", []),
    ("cut short at concurrency 1024: decode-w0 died", ["1024"]),
    ("C=2048 steady", ["2048"]),
    ("the recipe says 16384 (changes the verdict)", ["16384"]),
    ("carries 1234.5 tok/s", ["1234.5"]),
    ("152,608 tok/s total at concurrency 1,024", []),
    ("job 4987214 qwen35", []),
    ("[jobs: 4987214, 4987215]", []),
    ("without P/D fixes #45357 and #48481", []),
    ("set `max-num-batched-tokens: 16384` in `backend.vllm_config.prefill`", []),
    ("at samples/runs/x/logs/slurm-5090552.out:1024 on gb200-r03-n12, vLLM v0.21.0 (d223c900d8522)", []),
    ("span 2026-08-12T14:05:14+00:00, frontend on host:8000, port 20000, pid 12345", []),
])
def test_the_scan_tells_figures_from_names(text: str, found: list[str]) -> None:
    assert [re.search(r"\d[\d.]*\d", hit).group() for hit in unformatted(text)] == found  # type: ignore[union-attr]


# Modules that compose no prose: the formatter itself, and PromQL / promtool files (machine formats).
MACHINE = {"rules/present.py", "rules/promrules.py", "rules/promtests.py", "diag/prom.py"}
NUMERIC_SPEC = re.compile(r"^(?:.?[<>=^])?[+\- ]?#?0?\d*(?P<group>[,_])?(?:\.\d+)?[dfFgGeEn%]$")


def test_every_numeric_format_spec_groups_thousands() -> None:
    """An f-string that formats a number itself (``{x:.1f}``, ``{n:d}``, ``{r:g}``) in a module that writes
    prose groups its thousands (``{x:,.1f}``); a plain field goes through ``number`` or ``shown``."""
    import ast

    ungrouped = []
    for path in sorted([*ROOT.glob("rules/**/*.py"), *ROOT.glob("diag/**/*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel in MACHINE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FormattedValue) and isinstance(node.format_spec, ast.JoinedStr):
                spec = "".join(str(v.value) for v in node.format_spec.values if isinstance(v, ast.Constant))
                m = NUMERIC_SPEC.match(spec)
                if m and not m["group"]:
                    ungrouped.append(f"{rel}:{node.lineno}: {{{ast.unparse(node.value)}:{spec}}}")
    assert not ungrouped, ungrouped


def test_explain_shows_each_threshold_as_diag_toml_takes_it() -> None:
    """A threshold is code (no separators): the value to write under [rules.CODE], read back unchanged."""
    import tomllib

    from diag.explain import explain_text, toml_value

    for code, rule in catalog().items():
        text = explain_text(code)
        for name, value in rule.params.items():
            assert f"- `{name}`: `{toml_value(value)}`" in text
            want = list(value) if isinstance(value, tuple) else value
            assert tomllib.loads(f"v = {toml_value(value)}")["v"] == want, (code, name)
