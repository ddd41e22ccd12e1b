"""``diag check PATH...``: lint srt-slurm recipes for the P/D pitfalls (DIAG-C001..C017).

Files and directories (searched recursively for ``*.yaml``/``*.yml``; YAML that is not a recipe is
skipped with a note on stderr). Every job of a file (override variants, sweep points) is checked;
a finding several jobs share is reported once. Exit status: 0 clean, 1 findings at or above
``--fail-on``, 2 usage, config or parse errors (``path:line:col: parse error: ...``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .options import EXIT_USAGE, CheckFormat, FailOn, fail, quiet_pipe

if TYPE_CHECKING:
    from diag.rules.catalog import Rule
    from diag.rules.finding import Finding
    from diag.rules.settings import Settings

SCHEMA_CODE = "DIAG-C017"
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".mypy_cache"}
Format = CheckFormat


@dataclass
class CheckResult:
    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    notes: list[str] = field(default_factory=list)     # skipped files
    errors: list[str] = field(default_factory=list)    # parse / usage errors (exit 2)
    suppressed: int = 0


def collect_files(paths: Sequence[Path]) -> tuple[list[tuple[Path, bool]], list[str]]:
    """(file, explicitly named) pairs in a stable order, and errors for paths that do not exist."""
    files: list[tuple[Path, bool]] = []
    errors: list[str] = []
    for p in paths:
        if p.is_file():
            files.append((p, True))
        elif p.is_dir():
            found = [f for f in p.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file()
                     and not SKIP_DIRS.intersection(f.relative_to(p).parts[:-1])]
            files.extend((f, False) for f in sorted(found))
        else:
            errors.append(f"{p}: no such file or directory")
    return files, errors


def _merge_jobs(per_job: list[list[Finding]], labels: list[str]) -> list[Finding]:
    """One finding per rule, place and role across the jobs of a file (override variants, sweep points).

    Identical findings merge first; findings of the same rule at the same key and role whose numbers
    differ per job (a grid sweep's TPxPPxDP) then merge into one that lists the combinations.
    """
    from diag.rules.finding import Finding

    if len(per_job) == 1:
        return per_job[0]
    groups: dict[tuple[object, ...], list[tuple[Finding, list[str]]]] = {}
    for label, found in zip(labels, per_job, strict=True):
        for f in found:
            variants = groups.setdefault((f.code, f.severity, f.location, f.endpoint), [])
            same = next((v for v in variants if (v[0].message, v[0].fix) == (f.message, f.fix)), None)
            if same is not None:
                same[1].append(label)
            else:
                variants.append((f, [label]))
    out = []
    for variants in groups.values():
        first, jobs = variants[0]
        every = [j for _, js in variants for j in js]
        ev = {k: v for k, v in first.evidence.items() if k not in ("job", "variant")} | {"jobs": every}
        if len(variants) == 1:
            msg = first.message if len(jobs) == len(labels) else f"{first.message} [jobs: {', '.join(jobs)}]"
        else:
            ev["per_job"] = {j: f.message for f, js in variants for j in js}
            msg = (f"{first.message} (and {len(every) - len(jobs)} more of the {len(labels)} jobs with other "
                   f"values) [jobs: {', '.join(every)}]")
        out.append(Finding(first.code, first.name, first.severity, msg, first.endpoint, first.location,
                           evidence=ev, fix=first.fix))
    return out


def check_file(path: Path, rules: dict[str, Rule] | Iterable[Rule] | None = None,
               display: str | None = None) -> list[Finding]:
    """Findings of every job in one recipe file (raises RecipeError / NotARecipe)."""
    from diag.parsers.recipe import load_recipes
    from diag.rules.recipe_checks import run_checks

    recipes = load_recipes(path, display)
    rules = dict(rules) if isinstance(rules, dict) else (list(rules) if rules is not None else None)
    per_job = [_trusted(run_checks(r, rules)) for r in recipes]
    return _merge_jobs(per_job, [r.variant or r.job for r in recipes])


def _trusted(found: list[Finding]) -> list[Finding]:
    """A job with a schema error (DIAG-C017 at error) gets only its schema findings: nothing is coerced."""
    schema = [f for f in found if f.code == SCHEMA_CODE]
    return schema if any(f.severity == "error" for f in schema) else found


def parse_error_finding(path: str, message: str, line: int | None, col: int | None) -> Finding:
    """A file diag cannot read as a recipe, as a finding (so JSON, SARIF and GitHub output carry it)."""
    from diag.rules.catalog import catalog
    from diag.rules.finding import Finding, Location

    rule = catalog()[SCHEMA_CODE]
    return Finding(rule.code, rule.name, "error", f"parse error: {message}", None, Location(path, line or 1, col or 1),
                   evidence={"parse_error": True}, fix="make the file valid YAML in the srt-slurm recipe layout")


def run_check(paths: Sequence[Path], settings: Settings) -> CheckResult:
    """Check files/directories with the given settings (no printing, no exit)."""
    from diag.parsers.recipe import NotARecipe, RecipeError

    result = CheckResult()
    files, result.errors = collect_files(paths)
    rules = settings.rules("recipe")
    raw: list[Finding] = []
    parse_errors: list[Finding] = []  # never filtered by select/ignore/suppressions: the file was not checked
    for path, explicit in files:
        shown = str(path)
        try:
            raw.extend(check_file(path, rules, shown))
            result.files += 1
        except NotARecipe as exc:
            if explicit or path.suffix in (".yaml", ".yml"):
                result.notes.append(f"{exc}; skipped")
        except RecipeError as exc:
            result.errors.append(f"{shown}:{exc.line or 1}:{exc.col or 1}: parse error: {exc}")
            parse_errors.append(parse_error_finding(shown, str(exc), exc.line, exc.col))
            result.files += 1
        except OSError as exc:
            result.errors.append(f"{shown}: cannot read: {exc.strerror}")
            parse_errors.append(parse_error_finding(shown, f"cannot read: {exc.strerror}", None, None))
        except Exception as exc:  # a bug in diag: report it like ruff does (exit 2), never a traceback
            result.errors.append(f"{shown}:1:1: internal error: {type(exc).__name__}: {exc} (please report)")
            parse_errors.append(parse_error_finding(shown, f"internal error: {type(exc).__name__}: {exc}", None, None))
    result.findings = parse_errors + settings.apply(raw)
    result.suppressed = sum(s.used for s in settings.suppressions)
    return result


def check(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH...", help="Recipe files or directories (searched for *.yaml/*.yml).")],
    format: Annotated[CheckFormat, typer.Option("--format", help="Output format.")] = CheckFormat.text,
    select: Annotated[list[str] | None, typer.Option(
        "--select", metavar="CODE", help="Only these codes or prefixes (comma-separated or repeated); replaces the config.")] = None,
    ignore: Annotated[list[str] | None, typer.Option(
        "--ignore", metavar="CODE", help="Skip these codes or prefixes; adds to the config.")] = None,
    fail_on: Annotated[FailOn | None, typer.Option(
        "--fail-on", help="Exit 1 when a finding is at or above this severity "
                          "(default: the config's fail-on, else error).")] = None,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", metavar="", help="Exit 0 even when findings fail the run.")] = False,
    config: Annotated[Path | None, typer.Option(
        "--config", metavar="FILE", help="Config file (diag.toml or pyproject.toml); default: nearest one upward.")] = None,
    allow_empty: Annotated[bool, typer.Option(
        "--allow-empty", help="Exit 0 when no recipe is found (default: exit 2, a mistyped path must not pass).")] = False,
) -> None:
    """Lint srt-slurm recipes (v1, override, sweep and schema-2 files) for P/D pitfalls."""
    from diag.rules.settings import SettingsError, resolve

    from .reports import render

    try:
        settings = resolve(Path.cwd(), config, select=select, ignore=ignore,
                           fail_on=fail_on.value if fail_on is not None else None, exit_zero=exit_zero)
    except SettingsError as exc:
        fail("check", f"config error: {exc}")
    result = run_check(paths, settings)
    if not result.files and not result.errors and not allow_empty:
        shown = ", ".join(map(str, paths))
        result.errors.append(f"no recipes found in {shown} (pass --allow-empty to accept that)")
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    for err in result.errors:
        typer.echo(err, err=True)
    if result.errors and not result.files and format is CheckFormat.text:
        raise typer.Exit(EXIT_USAGE)  # nothing was checked: no "All checks passed" line under the errors
    with quiet_pipe():
        typer.echo(render(format.value, result.findings, files=result.files, suppressed=result.suppressed,
                          notes=result.notes), nl=False)
    if result.errors:
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(1 if settings.fails(result.findings) else 0)
