"""The tools ``diag mcp`` serves, without the MCP SDK: each takes a tool call's arguments and returns the
document its CLI command writes with ``--format json`` (built by the same functions), bounded for an agent's
context, or raises :class:`ToolError` with the one line the CLI prints on stderr.

A call reads only under the server's roots (``diag mcp --root DIR``; a relative path is read under the
first), within the server's limits of bytes and seconds a call: it runs with :class:`diag.confine.Confined`
as its files, which checks every path as it is opened, not before (the guarantee is in that module's
docstring). A path refused, a limit reached, is a ToolError. :mod:`diag.mcp_server` puts these tools on
the wire.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from diag.parsers import inputs
from diag.parsers.inputs import ReadStopped, Refused
from diag.rules.postmortem import kept

from .confine import Confined, Limits, Roots
from .emit import dumps

DEFAULT_LIMIT = 50          # findings per run document a tool returns unless the call asks for more
EVIDENCE_TEXT = 400         # characters of one evidence string
EVIDENCE_ITEMS = 20         # items of one evidence list
TIMELINE_ITEMS = 120        # timeline events of one run (errors, deaths and failures kept first)
SET_ASIDE_ITEMS = 20        # consequences, and noise, of one postmortem
OUT_DIR = ".diag-mcp"       # under the first root: where the report tool writes its HTML pages
# diag report --format json without its plot tables (series, windows, steps): what an agent reads
REPORT_KEYS = ("tool", "version", "schema", "denominators", "sla", "pick", "runs", "points", "frontier", "diffs")
COMPARE_KEYS = ("tool", "version", "schema", "denominators", "sla", "runs", "diffs")


class ToolError(Exception):
    """Bad input to a tool: the message is diag's one line (``diag tail: x: no such file or directory``)."""


@dataclass(frozen=True)
class Result:
    """A tool's document and the notes on what bounding left out (shown before it)."""

    doc: dict[str, Any]
    notes: tuple[str, ...] = ()
    text: str | None = None      # a text rendering for the agent instead of the JSON (explain: the Markdown)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    run: Callable[[Workspace, dict[str, Any]], Result]


@dataclass
class Workspace:
    """The directories a server may read (held open), the settings file every tool uses and the limits
    of one call."""

    roots: Roots
    config: Path | None
    limits: Limits

    @classmethod
    def of(cls, roots: Iterable[Path], config: Path | None, limits: Limits) -> Workspace:
        return cls(Roots.open(list(roots) or [Path.cwd()]), config, limits)

    def files(self) -> Confined:
        """What one call reads through: its byte count and its deadline start now."""
        return Confined(self.roots, self.limits)

    def confine(self, arg: str) -> str:
        """``arg`` as a path under a root (a relative one under the first); ToolError when it (up to its first
        glob character) leads outside every root. The agent's first answer: what the tool reads is confined
        again as it is opened (:mod:`diag.confine`)."""
        path = Path(arg).expanduser()
        path = path if path.is_absolute() else self.roots.paths[0] / path
        fixed = Path(*itertools.takewhile(lambda part: not any(c in part for c in "*?["), path.parts))
        try:
            inputs.resolve(fixed)
        except Refused:
            raise ToolError(str(self.roots.refuse(arg))) from None
        except OSError:
            pass   # a directory on the way that cannot be searched: the command says so in its words
        return str(path)

    def settings(self, select: list[str] | None = None, ignore: list[str] | None = None) -> Any:
        from diag.rules.settings import SettingsError, resolve

        try:
            return resolve(Path.cwd(), self.config, select=select, ignore=ignore)
        except SettingsError as e:
            raise ToolError(f"config error: {e}") from None


def trim_evidence(value: Any) -> tuple[Any, bool]:
    """An evidence value with long strings and lists cut (and whether anything was)."""
    if isinstance(value, str) and len(value) > EVIDENCE_TEXT:
        return value[: EVIDENCE_TEXT - 1] + "…", True
    if isinstance(value, list):
        items = [trim_evidence(v) for v in value[:EVIDENCE_ITEMS]]
        return [v for v, _ in items], len(value) > EVIDENCE_ITEMS or any(t for _, t in items)
    if isinstance(value, dict):
        items = {k: trim_evidence(v) for k, v in value.items()}
        return {k: v for k, (v, _) in items.items()}, any(t for _, t in items.values())
    return value, False


def bound(findings: list[dict[str, Any]], limit: int, what: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The first ``limit`` findings (the documents list them most severe first), evidence trimmed."""
    notes = [f"{what}: {limit} of {len(findings)} findings shown (limit {limit}); the summary counts all"] \
        if len(findings) > limit else []
    out, trimmed = [], 0
    for f in findings[:limit]:
        if "evidence" in f:
            evidence, cut = trim_evidence(f["evidence"])
            f, trimmed = {**f, "evidence": evidence}, trimmed + cut
        out.append(f)
    if trimmed:
        notes.append(f"{what}: evidence of {trimmed} finding(s) trimmed to {EVIDENCE_TEXT} characters and "
                     f"{EVIDENCE_ITEMS} items")
    return out, notes


def bound_events(run: dict[str, Any], what: str) -> tuple[dict[str, Any], list[str]]:
    """A run document's ``timeline`` (its errors, deaths and failures first, in time order) and its
    postmortem's ``consequences`` and ``noise`` cut to :data:`TIMELINE_ITEMS` and :data:`SET_ASIDE_ITEMS`."""
    notes: list[str] = []
    events = run.get("timeline") or []
    if len(events) > TIMELINE_ITEMS:
        run = {**run, "timeline": [events[i] for i in kept([e["kind"] for e in events], TIMELINE_ITEMS)]}
        notes.append(f"{what}: {TIMELINE_ITEMS} of {len(events)} timeline events shown (errors, deaths and "
                     "failures first)")
    pm = run.get("postmortem")
    for part in ("consequences", "noise"):
        if pm and len(pm[part]) > SET_ASIDE_ITEMS:
            notes.append(f"{what}: postmortem {part}: {SET_ASIDE_ITEMS} of {len(pm[part])} shown")
            pm = {**pm, part: pm[part][:SET_ASIDE_ITEMS]}
    return ({**run, "postmortem": pm} if pm is not None else run), notes


FIRST = ("verdict", "findings", "summary")   # what an agent reads first: the keys a run document starts with


def _bounded_run(doc: dict[str, Any], limit: int) -> tuple[dict[str, Any], list[str]]:
    found, notes = bound(doc["findings"], limit, doc.get("root") or "run")
    doc, more = bound_events(doc, doc.get("root") or "run")
    notes += more
    head = {k: (found if k == "findings" else doc[k]) for k in FIRST}
    return {**head, **{k: v for k, v in doc.items() if k not in head}}, notes


def _limit(args: Mapping[str, Any]) -> int:
    return int(args.get("limit") or DEFAULT_LIMIT)


def tail(ws: Workspace, args: dict[str, Any]) -> Result:
    from .emit.jsondoc import document
    from .files import InputError
    from .tail_cmd import read_reports

    paths = [ws.confine(p) for p in args.get("paths") or []]
    settings = ws.settings(args.get("select"), args.get("ignore"))
    try:
        reports = read_reports(paths, settings, args.get("prom"), args.get("since"))
    except InputError as e:
        raise ToolError(f"diag tail: {e}") from None
    doc, limit = document(reports), _limit(args)
    if "runs" not in doc:
        run, notes = _bounded_run(doc, limit)
        return Result(run, tuple(notes))
    runs = [_bounded_run(r, limit) for r in doc["runs"]]
    return Result({**doc, "runs": [r for r, _ in runs]}, tuple(n for _, ns in runs for n in ns))


def check(ws: Workspace, args: dict[str, Any]) -> Result:
    from diag.rules.engine import sort_findings

    from .check_cmd import run_check
    from .emit.jsondoc import check_dict
    from .refusal import refusal

    paths = [ws.confine(p) for p in args["paths"]]
    result = run_check([Path(p) for p in paths], ws.settings(args.get("select"), args.get("ignore")))
    if not result.files:
        raise ToolError(result.errors[0] if result.errors else f"diag check: {refusal('recipes', paths)}")
    doc = check_dict(sort_findings(result.findings), files=result.files, suppressed=result.suppressed,
                     notes=result.notes)
    found, notes = bound(doc["findings"], _limit(args), "check")
    return Result({**doc, "findings": found}, tuple(result.errors) + tuple(notes))


def explain(ws: Workspace, args: dict[str, Any]) -> Result:
    from diag.rules.catalog import CatalogError, get

    from .emit.rules import rules_dict
    from .explain import explain_text

    try:
        return Result(rules_dict([get(args["code"])]), text=explain_text(args["code"]))
    except CatalogError as e:
        raise ToolError(f"diag explain: {e}; `diag rules` lists the codes") from None


def rules(ws: Workspace, args: dict[str, Any]) -> Result:
    from .emit.rules import rules_dict
    from .rules_cmd import select_rules

    try:
        return Result(rules_dict(select_rules(args.get("scope"), args.get("select"))))
    except LookupError as e:
        raise ToolError(f"diag rules: {e}") from None


def _sweep(ws: Workspace, command: str, paths: list[str], args: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The ``diag report --format json`` document of confined run directories; ToolError on bad input."""
    from .files import InputError
    from .report_cmd import sweep_document
    from .sla import SlaError, parse_sla

    paths = [ws.confine(p) for p in paths]
    try:
        sla = parse_sla(args["sla"]) if args.get("sla") is not None else None
    except SlaError as e:
        raise ToolError(f"diag {command}: --sla: {e}") from None
    try:
        doc, errors = sweep_document(paths, ws.settings(), sla, args.get("min_tok_s_user"))
    except InputError as e:
        raise ToolError(f"diag {command}: {e}") from None
    if not doc["runs"] or not any(r["root"] for r in doc["runs"]):
        raise ToolError(f"diag {command}: no run logs in {', '.join(paths)}")
    return doc, [f"diag {command}: {e}" for e in errors]


def _bounded_runs(doc: dict[str, Any], keys: tuple[str, ...], limit: int) -> tuple[dict[str, Any], list[str]]:
    out, notes = {k: doc[k] for k in keys}, []
    runs = []
    for r in out["runs"]:
        found, more = bound(r["finding_list"], limit, r["label"])
        r, events = bound_events({**r, "finding_list": found}, r["label"])
        runs.append(r)
        notes += more + events
    return {**out, "runs": runs}, notes


def report(ws: Workspace, args: dict[str, Any]) -> Result:
    from .emit.html import render_html

    doc, errors = _sweep(ws, "report", args["paths"], args)
    try:
        fd, name = ws.roots.create(OUT_DIR, "report-", ".html")   # never through a link
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(render_html(doc))
    except OSError as e:
        raise ToolError(f"diag report: {ws.roots.paths[0] / OUT_DIR}: cannot write: {e.strerror or e}") from None
    body, notes = _bounded_runs(doc, REPORT_KEYS, _limit(args))
    return Result({"html": str(name), **body}, (f"wrote {name}", *errors, *notes))


def compare(ws: Workspace, args: dict[str, Any]) -> Result:
    doc, errors = _sweep(ws, "compare", [args["run_a"], args["run_b"]], args)
    body, notes = _bounded_runs(doc, COMPARE_KEYS, _limit(args))
    return Result(body, (*errors, *notes))


def runs(ws: Workspace, args: dict[str, Any]) -> Result:
    from .emit.runs import runs_document
    from .index.query import QueryError, select_runs

    try:
        df = select_runs(ws.confine(args["root"]), args.get("where"), args.get("sort"))
    except QueryError as e:
        raise ToolError(f"diag runs: {e}") from None
    limit = _limit(args)
    notes = (f"runs: the first {limit} of {df.height} runs (limit {limit})",) if df.height > limit else ()
    return Result(runs_document(df.head(limit)), notes)


def bundled(name: str, keys: tuple[str, ...] | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A published schema (``diag/schemas/NAME.schema.json``) made self-contained for a tool's output
    schema: common.schema.json's definitions moved in, its ``$ref``\\ s pointed at them. ``keys`` keeps only
    those properties (the report's projection), ``extra`` adds properties of the tool's own."""
    import json

    from . import schemas

    common = schemas.load("common")["$defs"]
    schema = schemas.load(name)
    schema.pop("$id", None)
    defs = schema.setdefault("$defs", {})
    assert not set(defs) & set(common), "a schema's own $defs shadow common's"
    schema["$defs"] = {**defs, **common}
    schema["type"] = "object"  # MCP: an output schema is an object at its root
    if keys is not None:
        schema["properties"] = {k: v for k, v in schema["properties"].items() if k in keys}
        schema["required"] = list(keys)
    if extra:
        schema["properties"] = {**extra, **schema["properties"]}
        schema["required"] = [*extra, *schema["required"]]
    return json.loads(json.dumps(schema).replace('"common.schema.json#/$defs/', '"#/$defs/'))


def _obj(required: tuple[str, ...], **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required), "additionalProperties": False}


_STR = {"type": "string"}
_PATHS = {"type": "array", "items": _STR, "minItems": 1,
          "description": "Run directories, log files or globs; relative paths are under the server's first root."}
_CODES = {"type": "array", "items": _STR, "description": "Only the rules with these codes or prefixes (K001, K, DIAG-E)."}
_IGNORE = {"type": "array", "items": _STR, "description": "Skip the rules with these codes or prefixes."}
_LIMIT = {"type": "integer", "minimum": 1, "default": DEFAULT_LIMIT,
          "description": "At most this many findings per run (most severe first; the summary counts all)."}
_SLA = {"type": "string", "description": "Latency target: METRIC[.QUANTILE]=DURATION,... (ttft=1s,tpot=50ms); "
                                         "default the recipe's goodput thresholds."}
_RUN = {"type": "string", "description": "A run directory (outputs/<jobid>)."}

TOOLS: tuple[Tool, ...] = (
    Tool("tail", "A run's report from its logs, as `diag tail --format json`: the verdict (what limits the run, "
         "experiments to try), findings with file:line evidence, per-endpoint health and the benchmark points; "
         "for a failed run the `postmortem` (when it failed, root causes with the owner of the fix: recipe, "
         "engine, infra or benchmark, and why; the first error; consequences and noise set aside), and every "
         "run's `timeline` (orchestrator stages, start-up, benchmark points, errors, deaths, at file:line). A "
         "run directory, log files, or a run packed as .tar.gz/.tgz/.tar/.zip.",
         _obj((), paths={**_PATHS, "minItems": 0}, select=_CODES, ignore=_IGNORE,
              since={**_STR, "description": "With prom and no paths: the last DURATION (15m, 2h)."},
              prom={**_STR, "description": "A Prometheus server URL: its vLLM metrics join the run's logs "
                                           "(or, with no paths, are the run)."},
              limit=_LIMIT),
         bundled("tail"), tail),
    Tool("check", "Lint srt-slurm recipes (or what a run directory ran) for P/D pitfalls, as "
         "`diag check --format json`.",
         _obj(("paths",), paths={**_PATHS, "description": "Recipe files, directories (searched for *.yaml) or run "
                                                          "directories; relative paths are under the first root."},
              select=_CODES, ignore=_IGNORE, limit=_LIMIT),
         bundled("check"), check),
    Tool("explain", "A rule's full entry: why it fires, what to change, its thresholds (the text), and its "
         "catalog row (`diag rules --format json` for that code).",
         _obj(("code",), code={**_STR, "description": "A rule code: DIAG-K001 or K001."}),
         bundled("rules"), explain),
    Tool("rules", "The rule catalog, as `diag rules --format json`.",
         _obj((), select=_CODES, scope={"enum": ["run", "endpoint", "engine", "recipe"]}),
         bundled("rules"), rules),
    Tool("report", "Judge a sweep: write the offline HTML report under the first root (.diag-mcp/) and return its "
         "path with `diag report --format json` minus the plot tables: the pick, every point's verdict against "
         "the latency target, run-vs-run diffs.",
         _obj(("paths",), paths={**_PATHS, "description": "Run directories; the first is the diff's baseline."},
              sla=_SLA, min_tok_s_user={"type": "number", "exclusiveMinimum": 0}, limit=_LIMIT),
         bundled("report", REPORT_KEYS, {"html": {"type": "string", "description": "the written HTML report"}}),
         report),
    Tool("compare", "What differs between two runs: configuration, verdicts, findings and tok/s per GPU at equal "
         "tok/s per user (the `diffs` and `runs` of `diag report RUN_A RUN_B --format json`).",
         _obj(("run_a", "run_b"), run_a={**_RUN, "description": "The baseline run directory."}, run_b=_RUN,
              sla=_SLA, limit=_LIMIT),
         bundled("report", COMPARE_KEYS), compare),
    Tool("runs", "The runs of a campaign index (`diag index`), one row each: validity, verdict, best tok/s per "
         "GPU, top finding, path; filtered and ordered as `diag runs --format json` (the index only, no log).",
         _obj(("root",), root={**_STR, "description": "An index directory, or a ROOT holding one in .diag/index."},
              where={**_STR, "description": "COLUMN OP VALUE joined by and/or; OP = != < <= > >= ~ (regex)."},
              sort={**_STR, "description": "A column to order by; -COL for descending."},
              limit={**_LIMIT, "description": "At most this many runs (in the order asked for)."}),
         bundled("runs"), runs),
)
TOOL = {t.name: t for t in TOOLS}


def call(ws: Workspace, name: str, args: Mapping[str, Any] | None) -> Result:
    """Run tool ``name`` on ``args`` checked against its input schema, reading only through the call's
    confined files; ToolError on bad input, a path refused or a limit reached."""
    from jsonschema import Draft202012Validator

    tool = TOOL.get(name)
    if tool is None:
        raise ToolError(f"diag mcp: no tool {name!r} (tools: {', '.join(TOOL)})")
    args = dict(args or {})
    error = next(iter(Draft202012Validator(tool.input_schema).iter_errors(args)), None)
    if error is not None:
        where = ".".join(map(str, error.absolute_path)) or "arguments"
        raise ToolError(f"diag {name}: {where}: {error.message}")
    try:
        with inputs.reading_through(ws.files()):
            result = tool.run(ws, args)
    except (ToolError, ReadStopped) as e:  # a path refused, a limit, a config error: named by the tool,
        # shaped like the CLI's lines
        from .options import printable

        head, _, message = str(e).partition(": ") if str(e).startswith("diag ") else (f"diag {name}", "", str(e))
        raise ToolError(f"{head}: {printable(message)}") from None
    return replace(result, doc=json.loads(dumps(result.doc)))  # as the CLI writes it: times as ISO strings
