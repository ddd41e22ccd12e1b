"""The CLI contract every command shares: option types, value checks, exit codes, output streams.

Exit status: ``1`` when a judged run fails ``--fail-on`` by its verdict (``tail``, ``watch``, ``report``,
``index``: the table of :mod:`diag.rules.outcome`, README's "Exit status") or, in ``check``, a finding is at
or above it; else ``0``; ``2`` a usage, input or configuration error (one line on stderr, never a
traceback). A closed pipe (``diag tail … | head -1``) is not an error: output stops quietly and the status
is what it would have been. Imports nothing heavy: ``diag --help`` must start fast.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TextIO

import typer

from .emit import FORMATS

if TYPE_CHECKING:
    from rich.console import Console

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
CONTEXT = {"help_option_names": ["-h", "--help"]}


def run_status(fails: Iterable[bool]) -> int:
    """The exit status of the runs a command judged: 1 when any fails ``--fail-on`` by its verdict
    (``Report.fails``), else 0."""
    return EXIT_FINDINGS if any(fails) else EXIT_OK


class FailOn(StrEnum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


TailFormat = StrEnum("TailFormat", {f: f for f in FORMATS["tail"]})     # one emitter family: diag.emit
CheckFormat = StrEnum("CheckFormat", {f: f for f in FORMATS["check"]})
ReportFormat = StrEnum("ReportFormat", {f: f for f in FORMATS["report"]})
RunsFormat = StrEnum("RunsFormat", {f: f for f in FORMATS["runs"]})


class ListFormat(StrEnum):
    text = "text"
    json = "json"


Example = tuple[str, str]  # (what it shows, the command line): a row of a command's Examples panel

# The options several commands share, each defined once so its wording is one (``x: Select = None``).
CODES = "codes or prefixes (K001, K, DIAG-E); repeat the option or separate with commas"
Select = Annotated[list[str] | None, typer.Option(
    "--select", metavar="CODE", help=f"Only the rules with these {CODES}. Replaces the config's select.")]
Ignore = Annotated[list[str] | None, typer.Option(
    "--ignore", metavar="CODE", help=f"Skip the rules with these {CODES}. Adds to the config's ignore.")]
FailOnOption = Annotated[FailOn | None, typer.Option(
    "--fail-on", help="Exit 1 at this severity or above: a run's verdict (invalid, startup-stuck: error; a "
                      "bottleneck: warning), a recipe's findings (default: the config's fail-on, else error).")]
ExitZero = Annotated[bool, typer.Option("--exit-zero", help="Exit 0 whatever --fail-on would fail.")]
ConfigFile = Annotated[Path | None, typer.Option(
    "--config", metavar="FILE", help="Settings file (diag.toml, or pyproject.toml with a tool.diag table) to use "
                                     "instead of the nearest one upward from the current directory.")]
Scrape = Annotated[list[str] | None, typer.Option(
    "--scrape", metavar="URL", help="Also read an engine's Prometheus /metrics URL (ROLE-wN=URL names its "
                                    "endpoint, as in decode-w0=http://host:8081/metrics); repeatable.")]
Prom = Annotated[str | None, typer.Option(
    "--prom", metavar="URL", help="Also query this Prometheus server for the engines' vLLM metrics; "
                                  "with no PATH, read the server alone.")]


def printable(text: str, limit: int = 300) -> str:
    """One line safe for a terminal: control characters, escapes and undecodable bytes of a hostile
    input shown as ``?``, newlines as spaces, cut at ``limit`` characters."""
    out = "".join(c if c.isprintable() and c != "\ufffd" else (" " if c in "\n\r\t" else "?") for c in text)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def fail(command: str, message: str) -> NoReturn:
    """A usage or input error: one line on stderr, exit 2."""
    fail_all(command, [message])


def fail_all(command: str, messages: Sequence[str]) -> NoReturn:
    """Several errors of one input (a config file's): one line each on stderr, exit 2."""
    for message in messages:
        typer.echo(f"diag {command}: {printable(message)}", err=True)
    raise typer.Exit(EXIT_USAGE)


def positive(name: str, lo: float = 0.0, hi: float | None = None):
    """A callback that rejects values outside (lo, hi] with a usage error."""

    def check(value: float | None) -> float | None:
        if value is not None and (value <= lo or (hi is not None and value > hi)):
            bound = f"greater than {lo:,g}" + (f" and at most {hi:,g}" if hi is not None else "")
            raise typer.BadParameter(f"{name} must be {bound}, not {value:,g}")
        return value

    return check


def on_terminal(stream: TextIO | None = None) -> bool:
    """Whether ``stream`` (stdout) is a terminal: what decides every output's form, a rendered page or table
    there, plain text when piped, whatever FORCE_COLOR or TTY_COMPATIBLE say (they choose colours only)."""
    try:
        return (stream or sys.stdout).isatty()
    except (ValueError, OSError):   # a closed or detached stream
        return False


def console_for(stream: TextIO | None = None) -> Console:
    """The console every text output writes through: colour only on a terminal; NO_COLOR (or
    ``--no-color``) means no escapes at all; no line ends in whitespace (:mod:`diag.emit.console`)."""
    from .emit.console import OutputConsole, TrimLines

    out = stream or sys.stdout
    tty = on_terminal(out)
    plain = bool(os.environ.get("NO_COLOR"))
    console = OutputConsole(file=out, highlight=False, soft_wrap=False, no_color=plain,
                            color_system=None if plain else "auto",
                            width=None if tty or "COLUMNS" in os.environ else 160)
    console.push_render_hook(TrimLines())
    return console


class _Pipe:
    closed = False


@contextlib.contextmanager
def quiet_pipe() -> Iterator[None]:
    """Stop writing quietly when the reader of stdout went away (``| head``); the exit status is
    then whatever the command decides, not an error."""
    try:
        yield
    except BrokenPipeError:
        _Pipe.closed = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's own flush at exit must not fail either


def pipe_closed() -> bool:
    return _Pipe.closed


def no_color(value: bool) -> None:
    if value:
        os.environ["NO_COLOR"] = "1"
