"""Help like ruff's and uv's: every command's --help has an Examples panel whose examples run on the shipped
samples, a usage line as it is typed, flags without a value placeholder and one wording per shared option;
a usage error is one line on stderr and exit 2."""

from __future__ import annotations

import functools
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import typer
from loading import shared_sample_pipelines
from test_cli_contract import ROOT, diag
from typer import _click

from diag.cli import app
from diag.rules_cmd import CATALOG_SELECT

from helpers import run_diag

RUNS = ROOT / "samples" / "runs"
# The names the examples use, and the shipped sample each stands for (job ids as in the samples).
SAMPLE_FOR = {
    "outputs/5010467": RUNS / "kv-exhaustion",
    "outputs/5131402": RUNS / "sweep-4xdep2",
    "outputs/5131417": RUNS / "sweep-5xdep2",
    "slurm-*.out": ROOT / "samples" / "slurm-*.out",
    "recipe.yaml": RUNS / "healthy" / "config.yaml",
    "recipes/": RUNS,
    "outputs": RUNS,   # a campaign root (diag index); after the run names above, which it prefixes
}
# A server example (``diag mcp``) answers an MCP initialize request on stdin, then exits at its end.
MCP_INITIALIZE = ('{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", '
                  '"capabilities": {}, "clientInfo": {"name": "test_help", "version": "0"}}}\n')
USAGE = {"diag": "diag [OPTIONS] COMMAND [ARGS]...", "diag tail": "diag tail [OPTIONS] PATH...",
         "diag check": "diag check [OPTIONS] PATH...", "diag explain": "diag explain [OPTIONS] CODE",
         "diag report": "diag report [OPTIONS] RUN_DIR...", "diag watch": "diag watch [OPTIONS] [PATH]...",
         "diag rules": "diag rules [OPTIONS] [COMMAND]", "diag rules export": "diag rules export [OPTIONS]",
         "diag index": "diag index [OPTIONS] ROOT...", "diag runs": "diag runs [OPTIONS] INDEX",
         "diag mcp": "diag mcp [OPTIONS]"}
SHARED = ("--select", "--ignore", "--fail-on", "--exit-zero", "--config", "--scrape", "--prom")


def _commands(cmd: typer.core.TyperGroup | typer.core.TyperCommand, path: str = "diag") -> dict[str, object]:
    """Every command and group under ``diag``, by the words that call it."""
    out: dict[str, object] = {path: cmd}
    for name, sub in getattr(cmd, "commands", {}).items():
        if not sub.hidden:
            out.update(_commands(sub, f"{path} {name}"))
    return out


COMMANDS = _commands(typer.main.get_command(app))


@functools.cache
def _help(path: str, columns: int = 100) -> str:
    res = diag(*path.split()[1:], "--help", columns=columns)
    assert res.returncode == 0 and not res.stderr, (path, res.stderr[-500:])
    return res.stdout


def _examples(text: str) -> list[str]:
    """The command lines of the Examples panel."""
    assert "─ Examples ─" in text, text[-500:]
    panel = text.split("─ Examples ─", 1)[1].split("╰", 1)[0]
    lines = [line.strip().strip("│").strip() for line in panel.splitlines()]
    return [line for line in lines if line.startswith("diag ")]


def test_every_command_is_covered() -> None:
    assert set(COMMANDS) >= set(USAGE)


@pytest.mark.parametrize("path", COMMANDS)
def test_help_has_examples_a_clean_usage_line_and_no_bool_metavar(path: str) -> None:
    text = _help(path)
    usage = re.search(r"Usage: (.*)", text)
    assert usage is not None, text[:300]
    line = " ".join(usage.group(1).split())
    assert not re.search(r"\[\[|\]\.\.\.\]|[{}]|\.\.\.\.", line), line
    assert line == USAGE.get(path, line) and line.startswith(path + " [OPTIONS]"), line
    assert "<bool>" not in text and "<list" not in text, path
    examples = _examples(text)
    assert 2 <= len(examples) <= 4, (path, examples)
    assert path == "diag" or all(e.startswith(path + " ") or e == path for e in examples), examples
    assert _examples(_help(path, columns=80)) == examples, "an example wraps at 80 columns"


def test_flags_take_no_value() -> None:
    """No flag has a value placeholder (the help option and the completion flags included)."""
    for path, cmd in COMMANDS.items():
        for param in cmd.get_params(_click.Context(cmd, info_name=path)):  # type: ignore[attr-defined]
            if getattr(param, "is_flag", False):
                assert param.metavar == "", (path, param.opts)
    row = next(line for line in _help("diag check").splitlines() if "--allow-empty" in line)
    assert re.search(r"--allow-empty\s+Exit 0", row), row


def test_shared_options_have_one_wording() -> None:
    helps: dict[str, set[str]] = {}
    formats: list[str] = []
    for cmd in COMMANDS.values():
        for param in cmd.params:  # type: ignore[attr-defined]
            for opt in getattr(param, "opts", []):
                if opt in SHARED:
                    helps.setdefault(opt, set()).add(param.help)
                elif opt == "--format":
                    formats.append(param.help)
    assert set(helps) == set(SHARED)
    assert CATALOG_SELECT in helps["--select"]  # diag rules (export) --select filters the catalog: no config
    helps["--select"].remove(CATALOG_SELECT)
    for opt, texts in helps.items():
        assert len(texts) == 1, (opt, texts)
    assert helps["--select"].pop().startswith(CATALOG_SELECT.removesuffix("."))
    assert len(formats) >= 5 and all(f.startswith("Output format: ") for f in formats), formats


@pytest.mark.parametrize("args", [
    ["tail", "--bogus"], ["check"], ["explain"], ["tail", "samples/runs/healthy", "--format", "yaml"],
    ["rules", "--format", "prometheus"], ["rules", "export", "--format"], ["bogus"], ["--bogus"],
    ["watch", "--once", "samples/runs/healthy", "--window", "7"], ["rules", "nope"],
])
def test_a_usage_error_is_one_line_and_exit_2(args: list[str]) -> None:
    res = diag(*args)
    assert res.returncode == 2 and not res.stdout, (args, res.stdout[-300:])
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    command = " ".join(["diag", *[a for a in args[:2] if a in ("tail", "check", "explain", "rules", "watch",
                                                               "export")]])
    assert re.fullmatch(rf"{command}: error: \S.* \(see {command} --help\)", lines[0]), lines[0]


def test_rules_export_defaults_to_prometheus() -> None:
    alone, explicit = diag("rules", "export"), diag("rules", "export", "--format", "prometheus")
    assert alone.returncode == 0 and alone.stdout == explicit.stdout
    assert alone.stdout.startswith("# Generated by") and "groups:" in alone.stdout and "alert: " in alone.stdout


def _shown_examples() -> list[str]:
    seen: dict[str, None] = {}
    for path in COMMANDS:
        seen.update(dict.fromkeys(_examples(_help(path))))
    return list(seen)


def _on_samples(line: str) -> list[str]:
    out = []
    for word in shlex.split(line)[1:]:
        for name, sample in SAMPLE_FOR.items():
            if word == name or word.startswith(name + "/"):
                word = str(sample) + word[len(name):]
        out.append(word)
    return out


def _follow_then_interrupt(cmd: list[str], cwd: Path, deadline_s: float = 180.0) -> subprocess.CompletedProcess:
    """Ctrl-C as a user would: after ``diag tail -f`` says it follows its logs (its first read is done
    and its handler set), not after a fixed sleep that a loaded machine outlasts before diag starts."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: list[str] = []
    err: list[str] = []
    pumps = [threading.Thread(target=lambda s=s, into=into: into.extend(s), daemon=True)
             for s, into in ((proc.stdout, out), (proc.stderr, err))]
    for t in pumps:
        t.start()
    end = time.monotonic() + deadline_s
    while not any(line.startswith("diag tail: following ") for line in err) and proc.poll() is None:
        assert time.monotonic() < end, f"{cmd}: no 'following' line within {deadline_s} s; stderr {err}"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    for t in pumps:
        t.join(timeout=10)
    return subprocess.CompletedProcess(cmd, proc.returncode, "".join(out), "".join(err))


@pytest.fixture(scope="module")
def examples() -> list[str]:
    return _shown_examples()


def test_each_example_shown_in_help_runs_on_the_samples(examples: list[str], tmp_path: Path) -> None:
    """0 or 1 (findings), never 2. A live screen runs as its --once snapshot, a follow is stopped with
    Ctrl-C once it says it follows its logs, ``> FILE`` is written by the test."""
    assert len(examples) >= 15
    for line in examples:
        args = _on_samples(line)
        redirect = args[args.index(">") + 1] if ">" in args else None
        args = args[: args.index(">")] if redirect else args
        if args[0] == "watch" and "--once" not in args:
            args.append("--once")
        cmd = [sys.executable, "-m", "diag", *args]
        serves = args[0] == "mcp" and "--list-tools" not in args
        if "-f" in args or "--follow" in args:
            res = _follow_then_interrupt(cmd, tmp_path)
        elif serves:  # a server: its own process, answering an initialize on stdin until stdin ends
            res = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180, input=MCP_INITIALIZE)
            assert '"serverInfo"' in res.stdout, (line, res.stdout[-300:], res.stderr[-500:])
        else:
            with shared_sample_pipelines():   # a sample run judged once in this process
                res = run_diag(*args, cwd=tmp_path)
        assert res.returncode in (0, 1), (line, args, res.returncode, res.stderr[-500:])
        assert res.stdout or args[0] == "report", line
        if redirect:
            (tmp_path / redirect).write_text(res.stdout)
    assert "groups:" in (tmp_path / "diag-rules.yml").read_text()
    assert (tmp_path / "report.html").stat().st_size > 0 and (tmp_path / "sweep.json").stat().st_size > 0


def test_help_says_which_engines_and_how_they_are_told_apart() -> None:
    """Every registered engine is named in ``diag --help``, with how a run's engine is decided."""
    from diag.parsers import engines

    text = " ".join(_help("diag").replace("│", " ").split())
    assert all(a.display in text for a in engines.adapters()), text[:600]
    assert "backend.type" in text and "summary.engine" in text
