"""``diag check PATH...``: lint srt-slurm recipes for the P/D pitfalls (DIAG-C001..C017).

Files and directories (searched recursively for ``*.yaml``/``*.yml``; YAML that is not a recipe is
skipped with a note on stderr). Every job of a file (override variants, sweep points) is checked;
a finding several jobs share is reported once. Exit status: 0 clean, 1 findings at or above
``--fail-on``, 2 usage, config or parse errors (``path:line:col: parse error: ...``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .options import (
    EXIT_USAGE,
    CheckFormat,
    ConfigFile,
    Example,
    ExitZero,
    FailOnOption,
    Ignore,
    Select,
    console_for,
    fail,
    fail_all,
    quiet_pipe,
)

if TYPE_CHECKING:
    from diag.rules.catalog import Rule
    from diag.rules.finding import Finding
    from diag.rules.settings import Settings

DRIFT = "DIAG-D001"   # what ran against the recipe: a run rule that belongs to the config part
YAML = (".yaml", ".yml")
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
    from diag.parsers import inputs

    from .files import is_dir, not_readable, path_problem

    for p in paths:
        why = path_problem(p) or (None if is_dir(p) else not_readable(p))  # a FIFO or device: never opened
        if why is not None:
            errors.append(f"{p}: {why}")
        elif is_dir(p):
            found = [f for d, _, names in inputs.walk(p) for f in (Path(d) / n for n in names)
                     if f.suffix in YAML and not SKIP_DIRS.intersection(f.relative_to(p).parts[:-1])]
            files.extend((f, False) for f in sorted(found))
        else:
            files.append((p, True))
    return files, errors


def check_file(path: Path, rules: dict[str, Rule] | Iterable[Rule] | None = None,
               display: str | None = None) -> list[Finding]:
    """Findings of every job in one recipe file (raises RecipeError / NotARecipe), their fixes checked
    against what the file's first job sets (as on a run)."""
    from diag.parsers.recipe import load_recipes
    from diag.rules.advice import RunConfig, check_fixes
    from diag.rules.jobs import check_jobs

    recipes = load_recipes(path, display)
    found = check_jobs(recipes, rules)
    return check_fixes(found, RunConfig.of_recipe(recipes[0])) if recipes else found


def check_run(run_dir: Path, settings: Settings) -> list[Finding] | None:
    """The config part of ``diag tail RUN_DIR``: the one pipeline's report on the run, its findings on
    what ran (the config rules on its recipe with the flags, environment and build its logs show ran)
    and the drift between the two."""
    from diag.rules.catalog import catalog

    from .files import find_runs
    from .pipeline import Pipeline
    from .sources import BatchSource

    runs = find_runs([str(run_dir)])
    if len(runs) != 1:
        return None
    report = Pipeline(BatchSource(runs[0]), settings).once()
    if not report.run.jobs:
        return None
    rules = catalog()
    return [f for f in report.findings if f.code == DRIFT or (f.code in rules and rules[f.code].scope == "recipe")]


def no_recipe(path: Path, *, parsed: bool) -> str | None:
    """What a file given to ``check`` is when it is plainly no recipe: the note names it (an HTML page,
    binary data, a run log, text that is not YAML) instead of a C017 parse error. None for a ``*.yaml``
    file that does not parse (a broken recipe: C017) and for YAML that parsed but is not a recipe when
    nothing plainer is to be said (its own note says why)."""
    from .refusal import plainly

    if not parsed and path.suffix in YAML:
        return None
    what = plainly(path)
    if what is not None and not what.startswith("a recipe"):
        return what
    return None if parsed else "text that is not YAML"


def parse_error_finding(path: str, message: str, line: int | None, col: int | None) -> Finding:
    """A file diag cannot read as a recipe, as a finding (so JSON, SARIF and GitHub output carry it)."""
    from diag.rules.catalog import catalog
    from diag.rules.finding import Finding, Location
    from diag.rules.jobs import SCHEMA_CODE

    rule = catalog()[SCHEMA_CODE]
    return Finding(rule.code, rule.name, "error", f"parse error: {message}", None, Location(path, line or 1, col or 1),
                   evidence={"parse_error": True}, fix="make the file valid YAML in the srt-slurm recipe layout")


def run_check(paths: Sequence[Path], settings: Settings) -> CheckResult:
    """Check files/directories with the given settings (no printing, no exit)."""
    from diag.parsers.inputs import ReadStopped
    from diag.parsers.recipe import NotARecipe, RecipeError

    result = CheckResult()
    from .files import file_size, is_dir

    runs = [p for p in paths if is_dir(p) and is_dir(p / "logs")]  # run directories: check what ran
    paths = [p for p in paths if p not in runs]
    files, result.errors = collect_files(paths)
    rules = settings.rules("recipe")
    raw: list[Finding] = []
    parse_errors: list[Finding] = []  # never filtered by select/ignore/suppressions: the file was not checked
    for path, explicit in files:
        shown = str(path)
        size = file_size(path)
        if size > settings.max_recipe_bytes:   # before parsing: a huge YAML costs minutes and gigabytes
            message = (f"{size:,} bytes, over the recipe size limit of {settings.max_recipe_bytes:,} "
                       "(max-recipe-bytes in diag.toml); not read")
            result.errors.append(f"{shown}: {message}")
            parse_errors.append(parse_error_finding(shown, message, None, None))
            continue
        try:
            raw.extend(check_file(path, rules, shown))
            result.files += 1
        except NotARecipe as exc:
            if explicit or path.suffix in YAML:
                what = no_recipe(path, parsed=True)
                result.notes.append(f"{shown}: not an srt-slurm recipe ({what}); skipped" if what else f"{exc}; skipped")
        except RecipeError as exc:
            what = no_recipe(path, parsed=False) if explicit else None
            if what is not None:   # an HTML page, a log, binary data: not a broken recipe (no C017)
                result.notes.append(f"{shown}: not an srt-slurm recipe ({what}); skipped")
                continue
            for message, line, col in exc.violations or [(str(exc), exc.line, exc.col)]:  # all of them
                result.errors.append(f"{shown}:{line or 1}:{col or 1}: parse error: {message}")
                parse_errors.append(parse_error_finding(shown, message, line, col))
            result.files += 1
        except OSError as exc:
            result.errors.append(f"{shown}: cannot read: {exc.strerror}")
            parse_errors.append(parse_error_finding(shown, f"cannot read: {exc.strerror}", None, None))
        except ReadStopped:   # out of the server's roots or over its limits: the whole command stops
            raise
        except Exception as exc:  # a bug in diag: report it like ruff does (exit 2), never a traceback
            result.errors.append(f"{shown}:1:1: internal error: {type(exc).__name__}: {exc} (please report)")
            parse_errors.append(parse_error_finding(shown, f"internal error: {type(exc).__name__}: {exc}", None, None))
    for run_dir in runs:
        found = check_run(run_dir, settings)
        if found is None:
            result.errors.append(f"{run_dir}: a run directory without a recipe (config.yaml) or logs diag reads")
            continue
        raw.extend(found)
        result.files += 1
    result.findings = parse_errors + settings.apply(raw)
    result.suppressed = sum(s.used for s in settings.suppressions)
    return result


EXAMPLES: tuple[Example, ...] = (
    ("One recipe", "diag check recipe.yaml"),
    ("Every *.yaml under a directory, only the config rules (C)", "diag check recipes/ --select C"),
    ("What ran: a run directory's recipe with the flags its logs show", "diag check outputs/5010467"),
    ("Annotations for a GitHub Actions job", "diag check recipes/ --format github"),
)


def check(
    paths: Annotated[list[Path], typer.Argument(
        metavar="PATH...", help="Recipe files, directories (searched for *.yaml/*.yml) or run directories.")],
    format: Annotated[CheckFormat, typer.Option(
        "--format", help="Output format: text, json, sarif (code scanning) or github (workflow annotations).")
    ] = CheckFormat.text,
    select: Select = None,
    ignore: Ignore = None,
    fail_on: FailOnOption = None,
    exit_zero: ExitZero = False,
    config: ConfigFile = None,
    allow_empty: Annotated[bool, typer.Option(
        "--allow-empty", help="Exit 0 when no recipe is found (default: exit 2, a mistyped path must not pass).")
    ] = False,
) -> None:
    """Lint srt-slurm recipes (v1, override, sweep and schema-2 files) for P/D pitfalls."""
    from diag.rules.settings import SettingsError, resolve

    try:
        settings = resolve(Path.cwd(), config, select=select, ignore=ignore,
                           fail_on=fail_on.value if fail_on is not None else None, exit_zero=exit_zero)
    except SettingsError as exc:
        fail_all("check", [f"config error: {line}" for line in exc.lines])
    result = run_check(paths, settings)
    if not result.files and not result.errors and not allow_empty:   # nothing given is a recipe: one line
        from .files import is_dir
        from .refusal import refusal

        searched = " (pass --allow-empty to accept that)" if any(is_dir(p) for p in paths) else ""
        fail("check", refusal("recipes", paths) + searched)
    for note in result.notes:
        typer.echo(f"note: {note}", err=True)
    for err in result.errors:
        typer.echo(err, err=True)
    if result.errors and not result.files and format is CheckFormat.text:
        raise typer.Exit(EXIT_USAGE)  # nothing was checked: no "All checks passed" line under the errors
    with quiet_pipe():
        emit_check(format, result)
    if result.errors:
        raise typer.Exit(EXIT_USAGE)
    raise typer.Exit(1 if settings.fails(result.findings) else 0)


def emit_check(fmt: CheckFormat, result: CheckResult) -> None:
    """Write the findings to stdout in ``fmt`` (one order: :func:`diag.rules.engine.sort_findings`)."""
    from diag.rules.engine import sort_findings

    found = sort_findings(result.findings)
    if fmt is CheckFormat.text:
        from .emit.text import render_check

        render_check(found, console_for(), files=result.files, suppressed=result.suppressed)
        return
    if fmt is CheckFormat.json:
        from .emit.jsondoc import check_document

        out = check_document(found, files=result.files, suppressed=result.suppressed, notes=result.notes)
    elif fmt is CheckFormat.sarif:
        from .emit.sarif import render_sarif

        out = render_sarif(found)
    else:
        from .emit.github import render_github

        out = render_github(found)
    sys.stdout.write(out)
    sys.stdout.flush()
