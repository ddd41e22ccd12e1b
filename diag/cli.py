"""The `diag` command line."""

from __future__ import annotations

import typer

from diag import __version__
from diag.check_cmd import check
from diag.rules_cmd import explain, rules_list
from diag.tail_cmd import tail
from diag.watch_cmd import watch

app = typer.Typer(
    name="diag",
    help="Tells you why a disaggregated LLM-serving benchmark run is slow or broken.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"diag {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """diag: logs, recipes and metrics of vLLM + Dynamo P/D runs -> findings."""


app.command("check")(check)
app.command("tail")(tail)
app.command("rules")(rules_list)
app.command("explain")(explain)
app.command("watch")(watch)


def main() -> None:
    app()
