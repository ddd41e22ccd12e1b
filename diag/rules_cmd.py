"""`diag rules` lists the catalog, `diag rules export` writes it for Prometheus; `diag explain CODE` prints
one rule in full."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING

import typer

from .options import CODES, Example, console_for, fail, on_terminal, quiet_pipe

if TYPE_CHECKING:
    from diag.rules.catalog import Rule

SCOPES = ("run", "endpoint", "engine", "recipe")


def _scope(value: str | None) -> str | None:
    if value is not None and value not in SCOPES:
        raise typer.BadParameter(f"must be one of {', '.join(SCOPES)}, not {value!r}")
    return value


class RulesFormat(StrEnum):
    text = "text"
    json = "json"


class ExportFormat(StrEnum):
    prometheus = "prometheus"


EXAMPLES: tuple[Example, ...] = (
    ("Every rule, one line each", "diag rules"),
    ("The rules judging single engines", "diag rules --scope engine"),
    ("The catalog as JSON, for scripts", "diag rules --format json"),
)
EXPORT_EXAMPLES: tuple[Example, ...] = (
    ("Alerting and recording rules for a Prometheus server", "diag rules export > diag-rules.yml"),
    ("Only the KV-cache rules", "diag rules export --select K"),
)
EXPLAIN_EXAMPLES: tuple[Example, ...] = (
    ("Why a rule fires, what to change, its thresholds", "diag explain K001"),
    ("The full code works too", "diag explain DIAG-E001"),
)
CATALOG_SELECT = f"Only the rules with these {CODES}."


def select_rules(scope: str | None, select: list[str] | None) -> list[Rule]:
    """The catalog's rules of a scope whose codes start with one of ``select``; LookupError when none."""
    from diag.rules.catalog import catalog

    rows = [r for r in catalog().values() if scope is None or r.scope == scope]
    if select:
        wanted = [w.strip().upper().removeprefix("DIAG-") for s in select for w in s.split(",") if w.strip()]
        rows = [r for r in rows if any(r.code.removeprefix("DIAG-").startswith(w) for w in wanted)]
        if not rows:
            raise LookupError(f"--select {' '.join(select)}: matches no rule")
    return rows


def _rows(command: str, scope: str | None, select: list[str] | None) -> list[Rule]:
    """:func:`select_rules`, a usage error when none matches."""
    try:
        return select_rules(scope, select)
    except LookupError as e:
        fail(command, str(e))


def rules_list(
    ctx: typer.Context,
    select: list[str] | None = typer.Option(None, "--select", metavar="CODE", help=CATALOG_SELECT),
    scope: str | None = typer.Option(None, "--scope", metavar="SCOPE", callback=_scope,
                                     help="Only the rules of this scope: run, endpoint, engine or recipe."),
    fmt: RulesFormat = typer.Option(RulesFormat.text, "--format", help="Output format: text or json."),
) -> None:
    """List every rule: code, name, severity, scope and what it means in one line."""
    if ctx.invoked_subcommand is not None:
        return
    rows = _rows("rules", scope, select)
    with quiet_pipe():
        if fmt is RulesFormat.json:
            from .emit.rules import rules_document

            sys.stdout.write(rules_document(rows))
            return
        from .emit.rules import render_rules

        render_rules(rows, console_for(), table=on_terminal())


def rules_export(
    select: list[str] | None = typer.Option(None, "--select", metavar="CODE", help=CATALOG_SELECT),
    fmt: ExportFormat = typer.Option(ExportFormat.prometheus, "--format",
                                     help="Output format: prometheus (a rule file for promtool and Prometheus)."),
) -> None:
    """Write the runtime rules as a Prometheus rule file (alerts and recording rules) to stdout.

    The thresholds are the catalog's; without --select the verdict's alerts (failed requests, the decode
    waiting split) come too. Check the file with promtool check rules."""
    from diag.rules.promrules import export

    rows = _rows("rules export", None, select)
    with quiet_pipe():
        sys.stdout.write(export(rows, verdicts=not select))


def explain(code: str = typer.Argument(..., metavar="CODE", help="A rule code: DIAG-K001 or K001.")) -> None:
    """Print a rule's full entry: why it fires, what to change, its thresholds."""
    from diag.rules.catalog import CatalogError

    from .explain import explain_text

    try:
        text = explain_text(code)
    except CatalogError as e:
        fail("explain", f"{e}; `diag rules` lists the codes")
    with quiet_pipe():
        if on_terminal():   # rendered for a person; piped, the Markdown itself (for a file, an issue, an agent)
            from rich.markdown import Markdown

            console_for().print(Markdown(text))
        else:
            sys.stdout.write(text + "\n")
