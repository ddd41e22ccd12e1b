"""The config checks over every job of a recipe file (override variants, sweep points), merged into one
finding per rule, place and role; shared by ``diag check`` and the checks of what ran in a run."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from diag.parsers.recipe import Recipe

from .catalog import Rule
from .finding import Finding
from .present import number
from .recipe_checks import run_checks

SCHEMA_CODE = "DIAG-C017"


def trusted(found: list[Finding]) -> list[Finding]:
    """A job with a schema error (DIAG-C017 at error) gets only its schema findings: nothing is coerced."""
    schema = [f for f in found if f.code == SCHEMA_CODE]
    return schema if any(f.severity == "error" for f in schema) else found


def merge_jobs(per_job: Sequence[list[Finding]], labels: Sequence[str]) -> list[Finding]:
    """One finding per rule, place and role across the jobs of a file.

    Identical findings merge first; findings of the same rule at the same key and role whose numbers
    differ per job (a grid sweep's TPxPPxDP) then merge into one that lists the combinations.
    """
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
            msg = (f"{first.message} (and {number(len(every) - len(jobs))} more of the {number(len(labels))} jobs with other "
                   f"values) [jobs: {', '.join(every)}]")
        out.append(Finding(first.code, first.name, first.severity, msg, first.endpoint, first.location,
                           evidence=ev, fix=first.fix, advice=first.advice))
    return out


def check_jobs(recipes: Sequence[Recipe], rules: Mapping[str, Rule] | Iterable[Rule] | None = None) -> list[Finding]:
    """Findings of every job, merged (``diag check`` on one file)."""
    rules = dict(rules) if isinstance(rules, Mapping) else (list(rules) if rules is not None else None)
    per_job = [trusted(run_checks(r, rules)) for r in recipes]
    return merge_jobs(per_job, [r.variant or r.job for r in recipes])
