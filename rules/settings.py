"""diag's configuration: ``diag.toml`` or ``[tool.diag]`` in ``pyproject.toml`` (shared by check and tail).

Found from the start directory upward (the first ``diag.toml``/``.diag.toml``, or ``pyproject.toml``
with a ``[tool.diag]`` table, wins), or given with ``--config``::

    select = ["DIAG-C", "DIAG-K"]      # codes or prefixes; default everything ("ALL")
    ignore = ["DIAG-C009"]
    fail-on = "warning"                # error (default) | warning | info | never
    max-recipe-bytes = 5242880         # diag check reads no bigger recipe (default 5 MiB)
    [rules.DIAG-C005]                  # threshold / param overrides, `for`, `severity`
    headroom = 256
    [[suppress]]
    code = "DIAG-C006"                 # code or prefix
    path = "recipes/qwen3.5/**"        # optional glob, relative to the config file
    endpoint = "decode*"               # optional glob on the finding's endpoint/role
    reason = "stats come from Prometheus here"   # required

A suppression without ``reason`` is not honoured and is reported as DIAG-X001; one that matched
nothing is reported as DIAG-X002 (like ruff's RUF100).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import hashlib
import json
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diag.parsers import inputs

from .catalog import Rule, catalog
from .finding import SEVERITIES, Finding, Location, severity_rank
from .params import ParamError, coerce, kind_of

TOP_KEYS = {"select", "ignore", "extend-select", "extend-ignore", "fail-on", "rules", "suppress", "max-recipe-bytes"}
MAX_RECIPE_BYTES = 5 << 20   # `diag check` reads no recipe over this (5 MiB; real recipes are a few KiB)
RULE_KEYS = {"for", "keep_firing_for", "severity"}
X_NO_REASON, X_UNUSED = "DIAG-X001", "DIAG-X002"


class SettingsError(ValueError):
    """A configuration that cannot be used (exit status 2): one or more errors, one line each."""

    def __init__(self, *lines: str) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


def normalize_code(code: str) -> str:
    """``c001`` / ``DIAG-C001`` / ``diag-c`` -> ``DIAG-C001`` / ``DIAG-C001`` / ``DIAG-C``; ``ALL`` stays."""
    code = code.strip().upper()
    if code in ("ALL", ""):
        return "ALL"
    return code if code.startswith("DIAG-") or "DIAG-".startswith(code) else "DIAG-" + code


def _specificity(code: str, patterns: Iterable[str]) -> int:
    """Length of the longest pattern that is a prefix of ``code`` (-1: none; ALL counts as 0)."""
    best = -1
    for p in patterns:
        if p == "ALL":
            best = max(best, 0)
        elif code.startswith(p):
            best = max(best, len(p))
    return best


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


@dataclass
class Suppression:
    code: str
    reason: str | None
    path: str | None = None
    endpoint: str | None = None
    line: int | None = None
    used: int = 0

    def matches(self, f: Finding, root: Path) -> bool:
        if not f.code.startswith(self.code) and self.code != "ALL":
            return False
        if self.endpoint is not None and not fnmatch.fnmatchcase(f.endpoint or "", self.endpoint):
            return False
        if self.path is not None:
            if f.location is None:
                return False
            rx = _glob_regex(self.path)
            raw = Path(f.location.path)
            candidates = {raw.as_posix()}
            with contextlib.suppress(ValueError, OSError, inputs.Refused):  # not readable here: as written
                candidates.add(inputs.resolve(raw).relative_to(root.resolve()).as_posix())
            if not any(rx.match(c) for c in candidates):
                return False
        return True


@dataclass
class Settings:
    source: Path | None = None
    root: Path = field(default_factory=Path.cwd)
    select: list[str] = field(default_factory=lambda: ["ALL"])
    ignore: list[str] = field(default_factory=list)
    fail_on: str = "error"
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    suppressions: list[Suppression] = field(default_factory=list)
    unreasoned: list[str] = field(default_factory=list)   # config `ignore` entries given without a reason
    max_recipe_bytes: int = MAX_RECIPE_BYTES

    def enabled(self, code: str) -> bool:
        return _specificity(code, self.select) > _specificity(code, self.ignore)

    def rule(self, code: str) -> Rule:
        """The catalog rule with this file's overrides applied."""
        rule = catalog()[normalize_code(code)]
        over = self.overrides.get(rule.code)
        return rule.with_params(over) if over else rule

    def rules(self, *scopes: str) -> dict[str, Rule]:
        """Enabled rules (of the given scopes), overrides applied."""
        return {c: self.rule(c) for c, r in catalog().items()
                if (not scopes or r.scope in scopes) and self.enabled(c)}

    def digest(self) -> str:
        """What in these settings changes a finding or a verdict, as a digest: every enabled rule with its
        effective severity, thresholds and durations, the suppressions (and the file and folder they are
        anchored to), the recipe size limit. Not ``fail_on``: it only sets the exit status."""
        rules = [(r.code, r.severity, r.params, r.for_s, r.keep_firing_for_s) for r in self.rules().values()]
        anchored = bool(self.suppressions or self.unreasoned)
        doc = {"rules": rules, "unreasoned": self.unreasoned, "max_recipe_bytes": self.max_recipe_bytes,
               "suppress": [(s.code, bool(s.reason), s.path, s.endpoint, s.line) for s in self.suppressions],
               "source": str(self.source) if anchored else None,
               "root": str(self.root) if any(s.path for s in self.suppressions) else None}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def with_cli(self, select: list[str] | None = None, ignore: list[str] | None = None,
                 fail_on: str | None = None, exit_zero: bool = False) -> Settings:
        """Command-line options: ``--select`` replaces, ``--ignore`` extends, ``--fail-on`` replaces,
        ``--exit-zero`` is ``--fail-on never``."""
        out = dataclasses.replace(self, suppressions=[dataclasses.replace(s) for s in self.suppressions])
        if select:
            out.select = _codes(select, "--select")
        if ignore:
            out.ignore = [*out.ignore, *_codes(ignore, "--ignore")]
        if fail_on:
            out.fail_on = _fail_on(fail_on, "--fail-on")
        if exit_zero:
            out.fail_on = "never"
        return out

    def apply(self, findings: Iterable[Finding], report_unused: bool = True) -> list[Finding]:
        """Select/ignore, severity overrides, suppressions; plus DIAG-X001/X002 about this file."""
        out: list[Finding] = []
        active = [s for s in self.suppressions if s.reason]
        for f in findings:
            if not self.enabled(f.code):
                continue
            sev = self.overrides.get(f.code, {}).get("severity")
            if sev and sev != f.severity:
                f = dataclasses.replace(f, severity=sev)
            hit = next((s for s in active if s.matches(f, self.root)), None)
            if hit is not None:
                hit.used += 1
                continue
            out.append(f)
        out.extend(m for m in self.meta_findings(report_unused) if self.enabled(m.code))
        return out

    def meta_findings(self, report_unused: bool = True) -> list[Finding]:
        metas = []
        where = str(self.source) if self.source else "diag.toml"
        for code in self.unreasoned:
            r = self.rule(X_NO_REASON)
            metas.append(Finding(r.code, r.name, r.severity, f"ignore of {code} has no reason; the rule stays on "
                                 "until the entry says why it does not apply", location=Location(where),
                                 fix=f'write it as ignore = [{{code = "{code}", reason = "..."}}]',
                                 evidence={"code": code}))
        for s in self.suppressions:
            loc = Location(where, s.line, 1 if s.line else None)
            if not s.reason:
                r = self.rule(X_NO_REASON)
                metas.append(Finding(r.code, r.name, r.severity, f"suppression of {s.code} has no reason; it is "
                                     "ignored until it says why the finding does not apply", location=loc,
                                     fix='add `reason = "..."` to this [[suppress]] entry',
                                     evidence={"code": s.code}))
            elif report_unused and s.used == 0:
                r = self.rule(X_UNUSED)
                metas.append(Finding(r.code, r.name, r.severity, f"suppression of {s.code} matched no finding",
                                     location=loc, fix="delete this [[suppress]] entry or fix its code/path",
                                     evidence={"code": s.code, "path": s.path, "endpoint": s.endpoint}))
        return metas

    def fails(self, findings: Iterable[Finding]) -> bool:
        """True when any finding is at or above ``fail_on`` (never, for ``never``)."""
        if self.fail_on == "never":
            return False
        threshold = severity_rank(self.fail_on)
        return any(severity_rank(f.severity) >= threshold for f in findings)


def _codes(values: Any, what: str) -> list[str]:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SettingsError(f"{what} must be a list of rule codes or prefixes")
    out = [normalize_code(p) for v in values for p in v.split(",") if p.strip()]
    known = catalog()
    for code in out:
        if code != "ALL" and not any(c.startswith(code) for c in known):
            raise SettingsError(f"{what}: {code} matches no rule")
    return out


def _ignores(values: Any, what: str) -> tuple[list[str], list[str]]:
    """A config file disables rules only with a reason: ``{code = "...", reason = "..."}`` entries are
    honoured, bare codes are reported (DIAG-X001) and not applied."""
    if isinstance(values, str | dict):
        values = [values]
    if not isinstance(values, list):
        raise SettingsError(f"{what} must be a list of {{code, reason}} tables")
    reasoned: list[str] = []
    bare: list[str] = []
    for v in values:
        if isinstance(v, dict):
            if set(v) - {"code", "reason"} or not isinstance(v.get("code"), str):
                raise SettingsError(f"{what}: entries are {{code = ..., reason = ...}} tables")
            target = reasoned if str(v.get("reason") or "").strip() else bare
            target.extend(_codes(v["code"], what))
        else:
            bare.extend(_codes(v, what))
    return reasoned, bare


FAIL_ON = (*SEVERITIES, "never")


def _fail_on(value: Any, what: str) -> str:
    if value not in FAIL_ON:
        raise SettingsError(f"{what} must be one of {', '.join(FAIL_ON)}, not {value!r}")
    return str(value)


def resolve(start: Path, config: Path | None = None, *, select: list[str] | None = None,
            ignore: list[str] | None = None, fail_on: str | None = None, exit_zero: bool = False) -> Settings:
    """The one settings resolution of every command: CLI options over the config file
    (``--config`` or the nearest diag.toml / [tool.diag]) over the defaults."""
    return load_settings(start, config).with_cli(select, ignore, fail_on, exit_zero)


def _overrides(table: Any, text: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The [rules.<CODE>] tables, every value checked against its kind (rules/catalog/params.toml);
    the errors of all of them, one line each (``LINE: [rules.CODE] key: expected ..., got ...``)."""
    if not isinstance(table, dict):
        return {}, ["[rules] must be a table of [rules.<CODE>] tables"]
    out: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    for raw, values in table.items():
        code = normalize_code(raw)
        rule = catalog().get(code)
        where = _key_line(text, raw, None)
        if rule is None:
            errors.append(f"{where}[rules.{raw}]: no such rule")
            continue
        if not isinstance(values, dict):
            errors.append(f"{where}[rules.{raw}] must be a table")
            continue
        checked: dict[str, Any] = {}
        for key, value in values.items():
            at = _key_line(text, raw, key)
            kind = kind_of(code, key) if key in RULE_KEYS or key in rule.params else None
            if kind is None:
                known = ", ".join(sorted(RULE_KEYS | {k for k in rule.params
                                                      if getattr(kind_of(code, k), "type", "fixed") != "fixed"}))
                errors.append(f"{at}[rules.{raw}]: unknown key {key!r} (known: {known})")
                continue
            try:
                checked[key] = coerce(kind, value)
            except ParamError as exc:
                errors.append(f"{at}[rules.{raw}] {key}: {exc}")
        out[code] = checked
    return out, errors


_HEADER = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")


def _key_line(text: str, rule: str, key: str | None) -> str:
    """``LINE: `` of ``key`` in the file's [rules.<rule>] table (of its header when ``key`` is None),
    found by reading the lines (tomllib keeps no positions); empty when it is not written plainly."""
    heads = {f"rules.{rule}", f'rules."{rule}"', f"tool.diag.rules.{rule}", f'tool.diag.rules."{rule}"'}
    inside = False
    for n, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            inside = m.group(1).replace(" ", "") in heads
            if inside and key is None:
                return f"{n}: "
            continue
        if inside and key is not None and re.match(rf"\s*[\"']?{re.escape(key)}[\"']?\s*=", line):
            return f"{n}: "
    return ""


def _suppress_lines(text: str) -> list[int]:
    return [i for i, line in enumerate(text.splitlines(), 1)
            if re.match(r"\s*\[\[\s*(tool\s*\.\s*diag\s*\.\s*)?suppress\s*\]\]", line)]


def _suppressions(entries: Any, text: str) -> list[Suppression]:
    if not isinstance(entries, list):
        raise SettingsError("suppress must be an array of tables ([[suppress]])")
    lines = _suppress_lines(text)
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("code"), str):
            raise SettingsError(f"[[suppress]] #{i + 1} needs a `code` (rule code or prefix)")
        extra = set(e) - {"code", "path", "endpoint", "reason"}
        if extra:
            raise SettingsError(f"[[suppress]] #{i + 1}: unknown key(s) {', '.join(sorted(extra))}")
        reason = str(e["reason"]).strip() if e.get("reason") is not None else None
        out.append(Suppression(normalize_code(e["code"]), reason or None, e.get("path"), e.get("endpoint"),
                               lines[i] if i < len(lines) else None))
    return out


def settings_from(table: dict[str, Any], source: Path | None = None, text: str = "") -> Settings:
    """Settings from an already-parsed table (the body of diag.toml or [tool.diag]); every error of
    the table is reported at once, one line each, prefixed with ``source`` (and the line, when known)."""
    errors: list[str] = []

    def checked(part: Callable[[], Any], default: Any) -> Any:
        try:
            return part()
        except SettingsError as exc:
            errors.extend(exc.lines)
            return default

    unknown = set(table) - TOP_KEYS - {"fail_on"}
    if unknown:
        errors.append(f"unknown setting(s): {', '.join(sorted(unknown))} (known: {', '.join(sorted(TOP_KEYS))})")
    s = Settings(source=source, root=source.parent if source else Path.cwd())
    if "select" in table:
        s.select = checked(lambda: _codes(table["select"], "select"), s.select)
    s.select += checked(lambda: _codes(table.get("extend-select", []), "extend-select"), [])
    for key in ("ignore", "extend-ignore"):
        reasoned, bare = checked(lambda key=key: _ignores(table.get(key, []), key), ([], []))
        s.ignore += reasoned
        s.unreasoned += bare
    fail_on = table.get("fail-on", table.get("fail_on"))
    if fail_on is not None:
        s.fail_on = checked(lambda: _fail_on(fail_on, "fail-on"), s.fail_on)
    limit = table.get("max-recipe-bytes")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            errors.append(f"max-recipe-bytes must be a whole number of bytes >= 1, not {limit!r}")
        else:
            s.max_recipe_bytes = limit
    s.overrides, rule_errors = _overrides(table.get("rules", {}), text)
    errors += rule_errors
    s.suppressions = checked(lambda: _suppressions(table.get("suppress", []), text), [])
    if errors:
        prefix = f"{source}:" if source else ""
        raise SettingsError(*(f"{prefix}{e}" if e[:1].isdigit() else f"{prefix}{' ' if prefix else ''}{e}"
                              for e in errors))
    return s


def _read(path: Path) -> tuple[dict[str, Any] | None, str]:
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: invalid TOML: {exc}") from None
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        return (tool.get("diag") if isinstance(tool, dict) else None), text
    return data, text


def find_config(start: Path) -> Path | None:
    """The nearest diag.toml / .diag.toml / pyproject.toml with [tool.diag], from ``start`` upward."""
    here = start.resolve()
    if here.is_file():
        here = here.parent
    for d in (here, *here.parents):
        for name in ("diag.toml", ".diag.toml"):
            if (d / name).is_file():
                return d / name
        py = d / "pyproject.toml"
        if py.is_file():
            table, _ = _read(py)
            if table is not None:
                return py
    return None


def load_settings(start: Path, explicit: Path | None = None) -> Settings:
    """Settings from ``--config PATH`` or the nearest config file; defaults when there is none."""
    path = explicit if explicit is not None else find_config(start)
    if path is None:
        return Settings(root=start.resolve() if start.is_dir() else start.resolve().parent)
    if explicit is not None and not explicit.is_file():
        raise SettingsError(f"{explicit}: no such config file")
    table, text = _read(path)
    if table is None:
        if explicit is not None:
            raise SettingsError(f"{path}: has no [tool.diag] table")
        return Settings(root=path.parent)
    return settings_from(table, path, text)
