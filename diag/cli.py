"""The `diag` command line. Command modules import only typer and diag.options at module level, so
``diag --help``, ``diag rules`` and ``diag explain`` start without polars, textual or a Prometheus client.

Help reads like ruff's and uv's: a usage line as it is typed (``diag tail [OPTIONS] PATH...``), flags
without a value placeholder, an Examples panel per command; a usage error is one line on stderr, exit 2.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer import _click
from typer.core import HAS_RICH, TyperArgument, TyperCommand, TyperGroup

from diag import __version__
from diag.check_cmd import EXAMPLES as CHECK_EXAMPLES
from diag.check_cmd import check
from diag.index_cmd import INDEX_EXAMPLES, RUNS_EXAMPLES, index, runs
from diag.mcp_cmd import EXAMPLES as MCP_EXAMPLES
from diag.mcp_cmd import mcp
from diag.options import CONTEXT, EXIT_USAGE, Example, no_color, printable
from diag.report_cmd import EXAMPLES as REPORT_EXAMPLES
from diag.report_cmd import report
from diag.rules_cmd import EXAMPLES as RULES_EXAMPLES
from diag.rules_cmd import EXPLAIN_EXAMPLES, EXPORT_EXAMPLES, explain, rules_export, rules_list
from diag.tail_cmd import EXAMPLES as TAIL_EXAMPLES
from diag.tail_cmd import tail
from diag.watch_cmd import EXAMPLES as WATCH_EXAMPLES
from diag.watch_cmd import watch

EXAMPLES: tuple[Example, ...] = (
    ("A run directory (srt-slurm's outputs/<jobid>): every endpoint's health and the findings",
     "diag tail outputs/5010467"),
    ("Lint the recipes under a directory before submitting them", "diag check recipes/"),
    ("The live screen over a running job (q quits)", "diag watch outputs/5010467"),
    ("Which configuration of a sweep to pick: one offline HTML page",
     "diag report outputs/5131402 outputs/5131417"),
)


def _no_type(ctx: _click.Context) -> None:
    """An argument's metavar already says what it takes (``PATH...``): no ``<list[str]>`` beside it."""


class _Help:
    """What every diag command and group adds to typer's help: flags without a value placeholder, the
    usage line as it is typed and an Examples panel."""

    examples: tuple[Example, ...] = ()

    def get_params(self, ctx: _click.Context) -> list[_click.Parameter]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for p in params:
            if getattr(p, "is_flag", False) and p.metavar is None:
                p.metavar = ""  # --follow, not --follow <bool>
            elif isinstance(p, TyperArgument) and p.metavar:
                p.display_type_rich = _no_type  # type: ignore[method-assign]
        return params

    def parse_args(self, ctx: _click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)  # type: ignore[misc]
        except _click.ClickException as e:
            if getattr(e, "ctx", None) is None:  # "--format" with no value: name the command it was given to
                e.ctx = ctx  # type: ignore[attr-defined]
            raise

    def collect_usage_pieces(self, ctx: _click.Context) -> list[str]:
        """``[OPTIONS] PATH...``: an argument's metavar as written, not typer's ``{PATH...}...``."""
        pieces = [self.options_metavar] if self.options_metavar else []  # type: ignore[attr-defined]
        pieces += [p.metavar or p.name.upper() for p in self.get_params(ctx)
                   if isinstance(p, TyperArgument) and p.name]
        if isinstance(self, TyperGroup):
            pieces.append(self.subcommand_metavar)
        return pieces

    def format_help(self, ctx: _click.Context, formatter: _click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)  # type: ignore[misc]
        if not self.examples:
            return
        if not HAS_RICH or getattr(self, "rich_markup_mode", None) is None:
            with formatter.section("Examples"):
                pad = " " * formatter.current_indent
                formatter.write("".join(f"{pad}{what}:\n{pad}  {line}\n" for what, line in self.examples))
            return
        from rich.panel import Panel
        from rich.text import Text
        from typer import rich_utils

        text = Text()
        for i, (what, line) in enumerate(self.examples):
            text.append(("\n" if i else "") + what + ":\n")
            text.append("  " + line, style="bold cyan")
        panel = Panel(text, border_style="dim", title="Examples", title_align="left")
        rich_utils._get_rich_console().print(panel)


class DiagCommand(_Help, TyperCommand):
    pass


class DiagGroup(_Help, TyperGroup):
    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        """typer's main, but a usage error (unknown option, missing argument, bad choice) is one line
        on stderr and exit 2, not a usage block and a boxed message."""
        try:
            status = super().main(args, prog_name or "diag", complete_var, standalone_mode=False, **extra)
        except _click.ClickException as e:
            if not standalone_mode:
                raise
            if not isinstance(e, _click.exceptions.NoArgsIsHelpError):  # (that one has printed the help)
                sys.stderr.write(usage_error(e) + "\n")
            status = EXIT_USAGE
        except typer.Abort:
            sys.stderr.write("diag: aborted\n")
            status = 1
        if not standalone_mode:
            return status
        sys.exit(status if isinstance(status, int) else 0)


def usage_error(e: _click.ClickException) -> str:
    """``diag tail: error: no such option: --bogus (see diag tail --help)``."""
    ctx = getattr(e, "ctx", None)
    command = ctx.command_path if ctx is not None else "diag"
    message = " ".join(e.format_message().replace("Value error, ", "").split()).removesuffix(".")
    return f"{command}: error: {printable(message[:1].lower() + message[1:])} (see {command} --help)"


def _command(examples: tuple[Example, ...], base: type = DiagCommand) -> type:
    """The command (or group) class showing these examples in its help."""
    return type(base.__name__, (base,), {"examples": examples})


# Which engines diag reads and how it tells them apart (tests/test_help.py: every registered engine named).
ENGINES_HELP = (
    "Engines: vLLM, SGLang and TensorRT-LLM, behind Dynamo or alone, launched by srt-slurm. A run's engine is its "
    "recipe's backend.type; without one, what its logs show: the launch module on a command line (dynamo.vllm, "
    "dynamo.sglang, sglang.launch_server, dynamo.trtllm), else the lines only that engine writes (vLLM's stats "
    "lines, SGLang's batch lines, TensorRT-LLM's [TRT-LLM] prefix), else the package its tracebacks' frames ran "
    "in. --format json says which and from what (summary.engine, engine_by); the index "
    "has an engine column. TensorRT-LLM is read for its iteration, start-up and executor error lines.")

app = typer.Typer(
    name="diag",
    cls=_command(EXAMPLES, DiagGroup),
    help="Tells you why a disaggregated LLM-serving benchmark run is slow or broken.\n\n" + ENGINES_HELP,
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"diag {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    plain: bool = typer.Option(False, "--no-color", callback=no_color, is_eager=True,
                               help="No colours or styles (also: the NO_COLOR environment variable)."),
) -> None:
    """diag: logs, recipes and metrics of P/D LLM-serving runs -> findings.

    Exit status: 1 when a judged run's verdict fails --fail-on (tail, watch, report, index: README's table)
    or a recipe finding is at or above it (check), else 0; 2 usage, input or configuration error.
    """


app.command("check", cls=_command(CHECK_EXAMPLES), context_settings=CONTEXT)(check)
app.command("tail", cls=_command(TAIL_EXAMPLES), context_settings=CONTEXT)(tail)
rules_app = typer.Typer(cls=_command(RULES_EXAMPLES, DiagGroup), invoke_without_command=True,
                        subcommand_metavar="[COMMAND]", context_settings=CONTEXT)
rules_app.callback()(rules_list)
rules_app.command("export", cls=_command(EXPORT_EXAMPLES), context_settings=CONTEXT)(rules_export)
app.add_typer(rules_app, name="rules")
app.command("explain", cls=_command(EXPLAIN_EXAMPLES), context_settings=CONTEXT)(explain)
app.command("watch", cls=_command(WATCH_EXAMPLES), context_settings=CONTEXT)(watch)
app.command("report", cls=_command(REPORT_EXAMPLES), context_settings=CONTEXT)(report)
app.command("index", cls=_command(INDEX_EXAMPLES), context_settings=CONTEXT)(index)
app.command("runs", cls=_command(RUNS_EXAMPLES), context_settings=CONTEXT)(runs)
app.command("mcp", cls=_command(MCP_EXAMPLES), context_settings=CONTEXT)(mcp)


# polars' allocator (jemalloc): one arena, freed pages kept 200 ms. Its default keeps them longer (a large log
# would hold every thread's high-water mark); returning them at once costs a page fault for every page of every
# block's columns (1 GB of noise: 7 s of system time, 14.2 s in all, 367 MB peak; this: 10.3 s, 406 MB; dense
# 200 MB 10.6 s / 477 MB -> 7.9 s / 562 MB: bench/README.md). A user's own setting wins.
ALLOCATOR_CONF = "narenas:1,dirty_decay_ms:200,muzzy_decay_ms:0"


def main() -> None:
    if "polars" not in sys.modules:
        os.environ.setdefault("_RJEM_MALLOC_CONF", ALLOCATOR_CONF)
    try:
        app()
    except OSError as e:
        if e.errno not in _WRITE_ERRORS:
            raise
        _output_failed(e)


_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS}


def _output_failed(e: OSError) -> None:
    """stdout on a full disk (or a failing device): one line, exit 2, and no second failure when
    Python flushes stdout at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.stderr.write(f"diag: cannot write the output: {e.strerror or e}\n")
    sys.exit(EXIT_USAGE)
