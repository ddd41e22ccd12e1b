"""`diag rules` lists the catalog; `diag explain CODE` prints one rule in full."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from diag.rules.catalog import CatalogError, catalog, get


def rules_list(
    scope: str | None = typer.Option(None, "--scope", help="run, endpoint, engine or recipe."),
    fmt: str = typer.Option("text", "--format", help="text or json."),
) -> None:
    """List every rule: code, name, severity, scope and what it means in one line."""
    rows = [r for r in catalog().values() if scope is None or r.scope == scope]
    if fmt == "json":
        import json

        sys.stdout.write(json.dumps([{"code": r.code, "name": r.name, "severity": r.severity, "scope": r.scope,
                                      "summary": r.summary} for r in rows], indent=1) + "\n")
        return
    console = Console(highlight=False)
    if not console.is_terminal:
        w = max(len(r.name) for r in rows) if rows else 10
        for r in rows:
            sys.stdout.write(f"{r.code}  {r.name:<{w}}  {r.severity:<7}  {r.scope:<8}  {r.summary}\n")
        return
    t = Table(box=None, pad_edge=False)
    for col in ("code", "name", "severity", "scope", "summary"):
        t.add_column(col, no_wrap=col != "summary")
    for r in rows:
        t.add_row(r.code, r.name, r.severity, r.scope, r.summary)
    console.print(t)


def explain_text(code: str) -> str:
    """The full entry of a rule as Markdown (also used by the TUI)."""
    r = get(code)
    lines = [f"# {r.code} {r.name}", "", f"**severity** {r.severity} · **scope** {r.scope} · "
             f"**template** `{r.template}`", "", r.summary, "", "## Why", "", r.why, "", "## What to change", "",
             r.remediation]
    params = {k: v for k, v in r.params.items()}
    if r.for_s or r.keep_firing_for_s or params:
        lines += ["", "## Thresholds", ""]
        if r.for_s:
            lines.append(f"- `for`: {r.for_s:g} s")
        if r.keep_firing_for_s:
            lines.append(f"- `keep_firing_for`: {r.keep_firing_for_s:g} s")
        lines += [f"- `{k}`: {v}" for k, v in params.items()]
        lines += ["", f"Override in diag.toml: `[rules.{r.code}]` with any of these keys."]
    if r.docs:
        lines += ["", r.docs]
    return "\n".join(lines)


def explain(code: str = typer.Argument(..., help="A rule code, e.g. DIAG-K001.")) -> None:
    """Print a rule's full entry: why it fires, what to change, its thresholds."""
    try:
        text = explain_text(code)
    except CatalogError as e:
        typer.echo(f"diag explain: {e}; `diag rules` lists the codes", err=True)
        raise typer.Exit(2) from None
    console = Console(highlight=False)
    if console.is_terminal:
        console.print(Markdown(text))
    else:
        sys.stdout.write(text + "\n")
