"""The `diag` command line. Command modules import only typer and diag.options at module level, so
``diag --help``, ``diag rules`` and ``diag explain`` start without polars, textual or a Prometheus client."""

from __future__ import annotations

import errno
import os
import sys

import typer

from diag import __version__
from diag.check_cmd import check
from diag.options import CONTEXT, EXIT_USAGE, no_color
from diag.report_cmd import report
from diag.rules_cmd import explain, rules_list
from diag.tail_cmd import tail
from diag.watch_cmd import watch

app = typer.Typer(
    name="diag",
    help="Tells you why a disaggregated LLM-serving benchmark run is slow or broken.",
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
    version: bool = typer.Option(False, "--version", "-V", metavar="", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    plain: bool = typer.Option(False, "--no-color", metavar="", callback=no_color, is_eager=True,
                               help="No colours or styles (also: the NO_COLOR environment variable)."),
) -> None:
    """diag: logs, recipes and metrics of vLLM + Dynamo P/D runs -> findings.

    Exit status in every command: 0 nothing at or above --fail-on, 1 findings at or above it,
    2 usage, input or configuration error.
    """


app.command("check", context_settings=CONTEXT)(check)
app.command("tail", context_settings=CONTEXT)(tail)
app.command("rules", context_settings=CONTEXT)(rules_list)
app.command("explain", context_settings=CONTEXT)(explain)
app.command("watch", context_settings=CONTEXT)(watch)
app.command("report", context_settings=CONTEXT)(report)


# polars' allocator (jemalloc) keeps freed pages for 10 s by default: block after block, a large log
# would hold every thread's high-water mark. Return them at once (a user's own setting wins).
ALLOCATOR_CONF = "dirty_decay_ms:0,muzzy_decay_ms:0"


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
