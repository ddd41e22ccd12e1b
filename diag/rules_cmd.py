"""`diag rules` lists the catalog; `diag explain CODE` prints one rule in full."""

from __future__ import annotations

import sys
from enum import StrEnum

import typer

from .options import console_for, fail, quiet_pipe

SCOPES = ("run", "endpoint", "engine", "recipe")


def _scope(value: str | None) -> str | None:
    if value is not None and value not in SCOPES:
        raise typer.BadParameter(f"must be one of {', '.join(SCOPES)}, not {value!r}")
    return value


class RulesFormat(StrEnum):
    text = "text"
    json = "json"
    prometheus = "prometheus"


def rules_list(
    action: str | None = typer.Argument(None, metavar="[export]", help="export: write the runtime rules as a "
                                        "Prometheus rule file (--format prometheus) to stdout."),
    select: list[str] | None = typer.Option(None, "--select", metavar="CODE", help="export: only these codes or prefixes."),
    scope: str | None = typer.Option(None, "--scope", metavar="SCOPE", callback=_scope, help="run, endpoint, engine or recipe."),
    fmt: RulesFormat = typer.Option(RulesFormat.text, "--format", help="text or json; prometheus with export."),
) -> None:
    """List every rule: code, name, severity, scope and what it means in one line."""
    from diag.rules.catalog import catalog

    if action not in (None, "export"):
        fail("rules", f"unknown action {action!r} (give none, or export)")
    if (action == "export") != (fmt is RulesFormat.prometheus):
        fail("rules", "export writes --format prometheus; listing is --format text or json")
    rows = [r for r in catalog().values() if scope is None or r.scope == scope]
    if select:
        wanted = [s.upper().removeprefix("DIAG-") for s in select]
        rows = [r for r in rows if any(r.code.removeprefix("DIAG-").startswith(w) for w in wanted)]
        if not rows:
            fail("rules", f"--select {' '.join(select)}: matches no rule")
    if action == "export":
        from diag.rules.promrules import export

        with quiet_pipe():
            sys.stdout.write(export(rows))
        return
    with quiet_pipe():
        if fmt is RulesFormat.json:
            from .emit.rules import rules_document

            sys.stdout.write(rules_document(rows))
            return
        from .emit.rules import render_rules

        render_rules(rows, console_for())


def explain(code: str = typer.Argument(..., metavar="CODE", help="A rule code: DIAG-K001 or K001.")) -> None:
    """Print a rule's full entry: why it fires, what to change, its thresholds."""
    from diag.rules.catalog import CatalogError

    from .explain import explain_text

    try:
        text = explain_text(code)
    except CatalogError as e:
        fail("explain", f"{e}; `diag rules` lists the codes")
    with quiet_pipe():
        console = console_for()
        if console.is_terminal:
            from rich.markdown import Markdown

            console.print(Markdown(text))
        else:
            sys.stdout.write(text + "\n")
