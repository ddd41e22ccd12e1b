"""What actually ran: the recipe's jobs with the flags, environment and engine build that the run's logs
show ran laid over them, the DIAG-C catalog run on that, and the drift between recipe and run.

Sources of "what ran", per role, first process wins: the orchestrator's ``Command:`` / ``Env:`` lines
(``Endpoint.launch``), else a worker's ``non-default args`` (scalar values of the engine's flags); then
the startup facts the engine reports (its adapter's ``fact_flags`` and ``fact_env``) where no command
line said them, and the version the engines printed. Flags and variables srtctl's launcher manages itself
(ports, addresses, the model path: ``rules/data/launch.toml`` and each adapter's launch data) are
neither drift nor checked. The engine's flag defaults are its adapter's launch data. A flag or variable that
ran carries a :class:`SourceMark`, so a finding about it points into the log that shows it ran.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from diag.parsers import engines
from diag.parsers.engine import EngineAdapter
from diag.parsers.flags import normalize_flag
from diag.parsers.recipe import Build, EnvVar, Flag, Recipe, Role
from diag.parsers.recipe_yaml import SourceMark
from diag.parsers.records import Fault

from .catalog import Rule, by_scope
from .finding import Finding, Location
from .jobs import merge_jobs, trusted
from .knowledge import _data
from .present import number
from .recipe_checks import run_checks
from .runmodel import Run

_RELEASE = re.compile(r"\d+\.\d+\.\d+")
OVERRIDERS = "srtctl's topology-managed flags, a launcher script, the image's defaults"  # what overrides a recipe


@dataclass
class Ran:
    """What ran for one role."""

    flags: dict[str, tuple[Any, SourceMark]] = field(default_factory=dict)
    env: dict[str, tuple[str, SourceMark]] = field(default_factory=dict)
    version: tuple[str, SourceMark] | None = None
    differs: list[str] = field(default_factory=list)   # flags whose value differs between processes
    args_from: str | None = None   # "command" (Command: lines) | "non_default_args": absent flags ran at default
    #                                | "config file": the command names the file the recipe's flags ran from


def managed() -> tuple[frozenset[str], frozenset[str]]:
    """The flags and variables srtctl's launcher sets itself: its own names and every engine's (its launch data,
    and the flags srtctl passes its workers by itself)."""
    tables = [_data("launch.toml"), *(a.launch() for a in engines.adapters())]
    flags = frozenset().union(*(t.get("managed_flags", ()) for t in tables), *(a.launcher_flags for a in engines.adapters()))
    return flags, frozenset().union(*(t.get("managed_env", ()) for t in tables))


def what_ran(run: Run) -> dict[str, Ran]:
    """Per role (prefill, decode, agg): the flags, environment and version that ran."""
    m_flags, m_env = managed()
    engine = run.engine
    in_file = frozenset(engine.config_file_flags)
    out: dict[str, Ran] = {}
    for ep in run.endpoints.values():
        ran = out.setdefault(ep.role, Ran())
        for p in ep.launch:
            flags = p.get("flags") or {}
            ran.args_from = ran.args_from or (
                "config file" if any(normalize_flag(n)[0] in in_file for n in flags) else "command")
            mark = SourceMark(p["file"], p.get("command_line") or p["line"])
            for name, value in flags.items():
                _put(ran, name, value, mark, m_flags | in_file)
            env_mark = SourceMark(p["file"], p.get("env_line") or p["line"])
            for name, value in (p.get("env") or {}).items():
                if name not in m_env:
                    ran.env.setdefault(name, (str(value), env_mark))
        args = ep.facts.get("non_default_args")
        if not ep.launch and isinstance(args, dict) and "non_default_args" in ep.fact_lines:
            file, line = ep.fact_lines["non_default_args"]
            ran.args_from = ran.args_from or "non_default_args"
            known = engine.flag_names() if engine.flag_names else frozenset()
            per_process = set(engine.launch().get("per_process_fields", ()))
            for name, value in args.items():
                if isinstance(value, dict):   # a config object's repr: KVTransferConfig(kv_role=..., ...)
                    value = {k: v for k, v in value.items() if k != "__class__" and k not in per_process}
                if isinstance(value, (bool, int, float, str, dict)) and name in known:
                    _put(ran, name, value, SourceMark(file, line), m_flags)
        for fact, name in engine.fact_flags.items():  # what the engine reported it did, where no command line said it
            if fact in ep.facts and fact in ep.fact_lines and ep.facts[fact] is not None:
                file, line = ep.fact_lines[fact]
                _put(ran, name, ep.facts[fact], SourceMark(file, line), m_flags)
        for fact, var in engine.fact_env.items():
            if (value := ep.facts.get(fact)) and fact in ep.fact_lines:
                file, line = ep.fact_lines[fact]
                ran.env.setdefault(var, (str(value), SourceMark(file, line)))
        if (v := ep.facts.get("version")) and ran.version is None and "version" in ep.fact_lines:
            file, line = ep.fact_lines["version"]
            ran.version = (str(v), SourceMark(file, line))
    return {role: r for role, r in out.items() if r.flags or r.env or r.version}


def _put(ran: Ran, name: str, value: Any, mark: SourceMark, m_flags: frozenset[str]) -> None:
    key, negated = normalize_flag(name)
    if key in m_flags:
        return
    value = (not value) if negated and isinstance(value, bool) else value
    if key in ran.flags:
        if canon(ran.flags[key][0]) != canon(value) and key not in ran.differs:
            ran.differs.append(key)
        return
    ran.flags[key] = (value, mark)


def canon(value: Any) -> str:
    """A value as compared between recipe and command line: JSON strings parsed, scalars as text."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def same(recipe_value: Any, ran_value: Any) -> bool:
    """The recipe's value is what ran: equal, or a config object (``--kv-transfer-config``) whose every
    field the recipe sets ran with that value (what ran also lists the fields left at their defaults)."""
    if canon(recipe_value) == canon(ran_value):
        return True
    want, got = _as_dict(recipe_value), _as_dict(ran_value)
    return want is not None and got is not None and all(k in got and canon(v) == canon(got[k])
                                                        for k, v in want.items())


def _as_dict(value: Any) -> dict[str, Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def engine_defaults(engine: EngineAdapter) -> Mapping[str, Any]:
    """The engine's defaults of its flags whose default is certain (its adapter's launch data)."""
    return engine.launch().get("defaults", {})


def _overlay_role(role: Role, ran: Ran) -> Role:
    flags = dict(role.flags)
    for key, (value, mark) in ran.flags.items():
        have = flags.get(key)
        if have is None or not same(have.value, value):
            flags[key] = Flag(key.replace("_", "-"), key, value, mark, (*role.flags_path, key), source="ran")
    env = dict(role.env)
    for name, (value, mark) in ran.env.items():
        have = env.get(name)
        if have is None or have.value != value:
            env[name] = EnvVar(name, value, mark, (*role.env_path, name))
    return dataclasses.replace(role, flags=flags, env=env)


def _build_ran(recipe: Recipe, runs: Mapping[str, Ran]) -> Build:
    version = next((r.version for r in runs.values() if r.version), None)
    if version is None or not _RELEASE.fullmatch(version[0]):
        return recipe.build
    if recipe.build.kind == "release" and recipe.build.version == version[0]:
        return recipe.build
    return Build("release", version=version[0], source="log", image=recipe.build.image, engine=recipe.build.engine)


def effective(recipe: Recipe, runs: Mapping[str, Ran]) -> Recipe:
    """One job as it ran: what ran laid over each of its roles, the build the engines printed."""
    roles = {name: _overlay_role(role, runs[name]) if name in runs else role for name, role in recipe.roles.items()}
    return dataclasses.replace(recipe, roles=roles, build=_build_ran(recipe, runs))


def config_findings(run: Run, rules: Mapping[str, Rule] | Iterable[Rule] | None = None) -> list[Finding]:
    """The DIAG-C catalog on what ran (every job of the run's recipe, merged like ``diag check``)."""
    if not run.jobs:
        return []
    runs = what_ran(run)
    rules = dict(rules) if isinstance(rules, Mapping) else (list(rules) if rules is not None else None)
    per_job = [trusted(run_checks(effective(r, runs), rules)) for r in run.jobs]
    return merge_jobs(per_job, [r.variant or r.job for r in run.jobs])


def _verdicts(findings: Iterable[Finding]) -> set[tuple[str, str | None, str]]:
    return {(f.code, f.endpoint, f.severity) for f in findings}


def drift(rule: Rule, run: Run) -> list[Finding]:
    """DIAG-D001: flags, environment and build that differ between the recipe and what ran (the first
    job stands for the recipe). Info, or the rule's severity when the difference changes a C-rule's
    verdict (which ones the evidence names)."""
    recipe = run.recipe
    if recipe is None:
        return []
    runs = what_ran(run)
    if not runs:
        return []
    catalog_rules = by_scope("recipe")
    as_written = _verdicts(run_checks(recipe, catalog_rules))
    as_ran = _verdicts(run_checks(effective(recipe, runs), catalog_rules))
    changed = sorted({c for c, _, _ in as_written ^ as_ran})
    out = []
    for role_name, ran in sorted(runs.items()):
        role = recipe.roles.get(role_name)
        if role is None:
            continue
        diffs, cannot_tell = _role_drift(role, ran, run.engine)
        if not diffs:
            continue
        first = diffs[0]
        text = "; ".join(d["text"] for d in diffs[:6]) + (f"; and {number(len(diffs) - 6)} more" if len(diffs) > 6 else "")
        severity = rule.severity if changed else "info"
        verdict = f" (changes the verdict of {', '.join(changed)})" if changed else ""
        out.append(Finding(rule.code, rule.name, severity, f"{role_name}: what ran differs from the recipe: {text}"
                           f"{verdict}", endpoint=role_name,
                           location=Location(first["mark"].path, first["mark"][0], first["mark"][1]),
                           evidence={"differences": [{k: v for k, v in d.items() if k != "mark"} for d in diffs],
                                     "changes_verdict_of": changed, "recipe": recipe.path,
                                     "cannot_tell": cannot_tell},
                           fix=f"make the recipe say what runs (or find what overrides it: {OVERRIDERS})"))
    build = _build_ran(recipe, runs)
    if build is not recipe.build and recipe.build.kind != "unknown":
        version, mark = next(r.version for r in runs.values() if r.version)  # type: ignore[misc]
        out.append(Finding(rule.code, rule.name, rule.severity if changed else "info",
                           f"the engines run {run.engine.display} {version} but the recipe's image implies "
                           f"{recipe.build.label}",
                           location=Location(mark.path, mark[0], mark[1]),
                           evidence={"ran": version, "recipe": recipe.build.label, "changes_verdict_of": changed},
                           fix="pin the image that carries the build you mean to run"))
    return out


def _role_drift(role: Role, ran: Ran, engine: EngineAdapter) -> tuple[list[dict[str, Any]], list[str]]:
    """The differences between the recipe's role and what ran, and the recipe flags whose effective
    value the run does not show (a flag absent from what ran is at the engine's default: compared with
    the recipe when the default is known, else it cannot tell)."""
    m_flags, _ = managed()
    defaults = engine_defaults(engine)
    diffs: list[dict[str, Any]] = []
    cannot_tell: list[str] = []
    for key, (value, mark) in sorted(ran.flags.items()):
        have = role.flags.get(key)
        if have is None:
            if key in defaults and canon(defaults[key]) == canon(value):
                continue
            diffs.append({"kind": "flag", "name": key, "recipe": None, "ran": value, "mark": mark,
                          "text": f"--{key.replace('_', '-')} {_short(value, key)} ran but the recipe does not set it"})
        elif not same(have.value, value):
            diffs.append({"kind": "flag", "name": key, "recipe": have.value, "ran": value, "mark": mark,
                          "text": f"{have.key} {_short(value, key)} ran, the recipe says {_short(have.value, key)}"})
    ran_marks = [m for _, m in ran.flags.values()]
    for key, have in sorted(role.flags.items()):
        if key in ran.flags or key in m_flags or not ran_marks or have.source == "extra_args":
            continue
        if key in defaults:
            if canon(defaults[key]) != canon(have.value):
                diffs.append({"kind": "flag", "name": key, "recipe": have.value, "ran": defaults[key],
                              "mark": ran_marks[0], "text": f"the recipe sets {have.key} {_short(have.value, key)} but "
                              f"the engine ran at {engine.display}'s default {_short(defaults[key], key)}"})
        elif ran.args_from == "command":
            diffs.append({"kind": "flag", "name": key, "recipe": have.value, "ran": None, "mark": ran_marks[0],
                          "text": f"the recipe sets {have.key} but the command that ran does not pass it"})
        else:
            cannot_tell.append(key)
    for name, (value, mark) in sorted(ran.env.items()):
        have = role.env.get(name)
        if have is not None and have.value != value:
            diffs.append({"kind": "env", "name": name, "recipe": have.value, "ran": value, "mark": mark,
                          "text": f"{name}={value} ran, the recipe says {have.value}"})
    for key in ran.differs:
        diffs.append({"kind": "flag", "name": key, "recipe": None, "ran": "differs between processes",
                      "mark": ran.flags[key][1], "text": f"--{key.replace('_', '-')} differs between its processes"})
    return diffs, cannot_tell


NAMING_FLAG = re.compile(r"(?:^|_)(?:port|seed|rank|ids?|address)$")   # a flag whose number names something


def _short(value: Any, key: str) -> str:
    """A flag's value as a message shows it: a whole number in the number style, unless the flag's number
    names something (a port, a seed, a rank); cut at 60 characters."""
    text = canon(value)
    if re.fullmatch(r"-?\d+", text) and not NAMING_FLAG.search(key):
        text = number(int(text))
    return text if len(text) <= 60 else text[:57] + "..."


def reads_what_ran(rule: Rule) -> bool:
    """The rule judges what ran (the recipe checks, the drift): it needs every launch line and startup fact."""
    return rule.scope == "recipe" or rule.template == "drift"


def what_ran_settled(run: Run) -> bool:
    """Every endpoint's launch and startup facts are in: its orchestrator ``Command:`` lines (when the
    run's orchestrator log launches workers) and its startup lines up to ready, or it died. Until then
    a growing run's "what ran" is partial, and findings on it would open and close as it fills in."""
    launches = any(ev.event == "worker_start" for _, ev in run.lifecycle)
    for ep in run.endpoints.values():
        if ep.role not in ("prefill", "decode", "agg"):
            continue
        if launches and (not ep.launch or not all("command_line" in p for p in ep.launch)):
            return False
        if ep.startup.phase not in ("ready", "serving") and not ep.of(Fault):
            return False
    return True
