"""The Markdown emitter: ``diag tail --format markdown``, what a person pastes into a GitHub issue.

A failed run reads as its postmortem (:mod:`diag.rules.postmortem`): the root cause in one sentence with its
owner and why, the evidence lines (``file:line`` and the log's own text), the recipe flags of the config
findings that explain it, the fix, the timeline and what was set aside. A run that did not fail reads as its
verdict, headline figures and findings. GitHub-flavoured, bounded: every list and table is capped (the rest
counted in one line), every cell and excerpt cut, log text escaped so that it renders as written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from diag.parsers.clean import strip_ansi
from diag.report import Report
from diag.rules.finding import Finding
from diag.rules.postmortem import Postmortem, RootCause, SetAside, kept, next_step
from diag.rules.present import clock, number

TIMELINE_ROWS = 24                          # the timeline table's rows; the failure's are always among them
SET_ASIDE_ROWS = 10
FINDING_ROWS = 15
FLAG_ROWS = 8
EVIDENCE_ROWS = 5                           # root causes shown with their evidence lines
MARK_ROWS = 6
HEADER_KEYS = ("job", "model", "topology", "stage", "span", "throughput")  # and the build line, by its suffix
EXCERPT_CHARS = 240                         # an exact log line, cut
CELL_CHARS = 160                            # a table cell
TEXT_CHARS = 400                            # a sentence of prose
LINE_CHARS = 1000                           # no line is longer: the caps above add up to less
PATH_CHARS = 120                            # a file:line, cut at its start (the file's name stays)

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ufffd]")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_SPECIAL = re.compile(r"[\\*\[\]<>|~#@]|(?<!\w)_|_(?!\w)|&(?=#?\w+;)")  # @ and # would mention and link


# ------------------------------------------------------------------ escaping
def _line(text: str) -> str:
    """``text`` as one line: ANSI escapes removed, other control characters (newlines) as spaces."""
    return _CONTROL.sub(" ", strip_ansi(text)).strip()


def _cut(text: str, limit: int, *, tail: bool = False) -> str:
    """``text`` as one line of at most ``limit`` characters, ``…`` where it was cut (at its start: ``tail``)."""
    text = _line(text)
    if len(text) <= limit:
        return text
    return "…" + text[len(text) - limit + 1:] if tail else text[: limit - 1] + "…"


def _escaped(text: str) -> str:
    return _SPECIAL.sub(lambda m: "\\" + m.group(0), text).replace("`", "\\`")


def _units(text: str) -> list[str]:
    """An escaped text's characters, each with its escape."""
    return re.findall(r"\\.|.", _escaped(text), re.S)


def inline(text: str, limit: int = TEXT_CHARS, *, cell: bool = False) -> str:
    """diag's own words as Markdown of at most ``limit`` characters: its `code spans` kept whole, every other
    character that Markdown reads as markup escaped; in a table ``cell``, a pipe inside a code span escaped
    too. A longer text is cut between two characters (never inside an escape or a code span) with ``…``."""
    text, units, at = _line(text), [], 0
    for m in _CODE_SPAN.finditer(text):
        units += [*_units(text[at:m.start()]), m.group(0).replace("|", "\\|") if cell else m.group(0)]
        at = m.end()
    units += _units(text[at:])
    if sum(map(len, units)) <= limit:
        return "".join(units)
    out, size = [], 0
    for u in units:
        if size + len(u) > limit - 1:
            break
        out.append(u)
        size += len(u)
    return "".join(out) + "…"


def code(text: str, limit: int = CELL_CHARS, *, cell: bool = False, tail: bool = False) -> str:
    """``text`` as an inline code span whatever backticks it holds; ``tail`` cuts a long one at its start."""
    text = _cut(text, limit, tail=tail)
    ticks = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    span = f"{ticks}{pad}{text}{pad}{ticks}"
    return span.replace("|", "\\|") if cell else span


def fenced(lines: Sequence[str]) -> list[str]:
    """Log lines as a fenced block, each cut at EXCERPT_CHARS, the fence longer than any backtick run in them."""
    body = [_cut(line, EXCERPT_CHARS) for line in lines]
    fence = "`" * max([3, *(len(r) + 1 for line in body for r in re.findall("`+", line))])
    return [f"{fence}text", *body, fence]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A GFM table of cells already escaped for a cell; every row as many cells as the header."""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        assert len(row) == len(headers), (headers, row)
        out.append("| " + " | ".join(c or "-" for c in row) + " |")
    return out


def _where(at: str | None) -> str:
    return code(at, PATH_CHARS, cell=True, tail=True) if at else "-"


def _more(n: int, what: str) -> list[str]:
    return [] if n <= 0 else ["", f"*{number(n)} more {what} not shown; `diag tail --format json` lists them all.*"]


# ------------------------------------------------------------------ the parts of a run
def _title(report: Report, index: int) -> str:
    head = dict(report.header)
    name = head.get("job") or (report.run.root.name if report.run.root else f"run {index + 1}")
    v = report.verdict
    kind = "Postmortem" if report.postmortem is not None else "Diagnosis"
    return f"## {kind} of {inline(name, CELL_CHARS)}: {inline(v.label) if v else 'no verdict'}"


def _facts(report: Report) -> list[str]:
    """The verdict (class, confidence, limiter, why, next experiment) and the header's headline rows."""
    v = report.verdict
    out = []
    if v is not None:
        at = f" at concurrency {number(v.concurrency)}" if v.concurrency else ""
        out.append(f"- **verdict**: {inline(v.cls)} ({v.confidence} confidence){at}: {inline(v.why)}")
        if v.limiter:
            out.append(f"- **limiter**: {inline(v.limiter)}")
        if v.experiments and report.postmortem is None:
            e = v.experiments[0]
            out.append(f"- **next**: {inline(e['action'])}: {inline(e['expect'])}")
    for key, value in report.header:
        if key in HEADER_KEYS or key.endswith(" build"):
            out.append(f"- **{inline(key)}**: {inline(value)}")
    return out


def _finding(report: Report, code_: str, endpoint: str | None, at: str | None = None) -> Finding | None:
    return next((f for f in report.findings if f.code == code_ and f.endpoint == endpoint
                 and (at is None or (f.location is not None and at.startswith(f.location.path)))), None)


def _config_findings(report: Report, r: RootCause) -> list[Finding]:
    """The config findings (DIAG-C) the root cause's finding names as what explains it."""
    root = _finding(report, r.code, r.endpoint, r.at)
    links = root.caused_by if root is not None else tuple({"code": c, "endpoint": None} for c in r.config)
    found = [_finding(report, link["code"], link.get("endpoint")) or next(
        (f for f in report.findings if f.code == link["code"]), None) for link in links]
    return [f for f in dict.fromkeys(found) if f is not None]


def _root_sentence(r: RootCause) -> str:
    when = f" at {clock(r.ts)}" if r.ts else ""
    build = f" ({inline(r.build)})" if r.build else ""
    return f"{inline(r.text, CELL_CHARS)}{when}; owner **{r.owner}**{build}, because {inline(r.why)}."


def _root_cause(pm: Postmortem) -> list[str]:
    if not pm.root_causes:
        return ["**Root cause**: not settled by the logs read; owner **unknown**."]
    if len(pm.root_causes) == 1:
        return [f"**Root cause**: {_root_sentence(pm.root_causes[0])}"]
    return ["**Root causes**:", "", *(f"{i}. {_root_sentence(r)}"   # numbered: no one list with the facts below
                                      for i, r in enumerate(pm.root_causes[:EVIDENCE_ROWS], 1)),
            *_more(len(pm.root_causes) - EVIDENCE_ROWS, "root causes")]


def _evidence(report: Report, pm: Postmortem) -> list[str]:
    """Each root cause's place, its finding and the exact log line; the first error when elsewhere; what marks
    the failure moment."""
    out = ["### Evidence", ""]
    places = set()
    for r in pm.root_causes[:EVIDENCE_ROWS]:
        root = _finding(report, r.code, r.endpoint, r.at)
        places.add(r.at)
        who = f" {inline(r.endpoint)}" if r.endpoint else ""
        out.append(f"- {_where(r.at)}{who} {clock(r.ts)}: {r.code} {inline(root.name if root else r.text)}"
                   if r.at else f"- {r.code}{who}: {inline(root.message if root else r.text)}")
        line = root.evidence.get("line") if root is not None else None
        if isinstance(line, str) and line.strip():
            out += ["", *("  " + x for x in fenced([line])), ""]
    e = pm.first_error
    if e is not None and e.at not in places:
        out.append(f"- first error: {_where(e.at)} {clock(e.ts)}: {inline(e.text.removeprefix('first error: '))}")
    marks = [m for m in pm.marked_by if m.at not in places]
    for m in marks[:MARK_ROWS]:
        out.append(f"- {m.kind}: {_where(m.at)} {clock(m.ts)}: {inline(m.text)}")
    out += _more(len(marks) - MARK_ROWS, "failure marks")
    return out


def _flags(report: Report, pm: Postmortem) -> list[str]:
    found = list(dict.fromkeys(f for r in pm.root_causes for f in _config_findings(report, r)))
    if not found:
        return []
    rows = [[f.code, inline(f.endpoint or "-", cell=True), inline(f.message, CELL_CHARS, cell=True),
             _where(str(f.location) if f.location else None)] for f in found[:FLAG_ROWS]]
    return ["### Recipe flags involved", "", *table(["code", "role", "what ran", "where"], rows),
            *_more(len(found) - FLAG_ROWS, "config findings")]


def _fix(report: Report, pm: Postmortem) -> list[str]:
    """Per root cause: its config findings' fixes (a recipe's), else its owner's next step and the finding's
    own fix."""
    fixes: dict[str, str] = {}   # the text -> its label: a fix two causes share is written once
    for r in pm.root_causes[:EVIDENCE_ROWS]:
        config = [f for f in _config_findings(report, r) if f.fix]
        for f in config:
            fixes.setdefault(f.fix or "", f"**{f.code}** ({inline(f.endpoint or 'run')})")
        if config:
            continue
        fixes.setdefault(next_step(r), f"**{r.owner}**")
        root = _finding(report, r.code, r.endpoint, r.at)
        if root is not None and root.fix:
            fixes.setdefault(root.fix, f"**{r.code}** says")
    return ["### Fix", "", *(f"- {label}: {inline(text)}" for text, label in fixes.items())] if fixes else []


def _timeline(report: Report) -> list[str]:
    events = report.timeline
    if not events:
        return []
    shown = [events[i] for i in kept([e.kind for e in events], TIMELINE_ROWS)]
    rows = [[clock(e.ts), e.kind, inline(e.endpoint or "-", cell=True), inline(e.text, CELL_CHARS, cell=True),
             _where(e.at)] for e in shown]
    left: dict[str, int] = {}
    for e in events:
        left[e.kind] = left.get(e.kind, 0) + 1
    for e in shown:
        left[e.kind] -= 1
    rest = ", ".join(f"{number(n)} {kind}" for kind, n in left.items() if n)
    more = [] if not rest else ["", f"*{number(len(events) - len(shown))} more events not shown ({rest}); "
                                    "`diag tail --format json` lists them all.*"]
    return ["### Timeline", "", *table(["time", "kind", "endpoint", "event", "where"], rows), *more]


def _set_aside(pm: Postmortem) -> list[str]:
    items: list[tuple[str, SetAside]] = [*(("consequence", s) for s in pm.consequences),
                                         *(("noise", s) for s in pm.noise)]
    if not items:
        return []
    rows = [[clock(s.ts), kind, inline(s.text, CELL_CHARS, cell=True), inline(s.reason, CELL_CHARS, cell=True),
             _where(s.at)] for kind, s in items[:SET_ASIDE_ROWS]]
    head = (f"{number(len(pm.consequences))} consequence(s) after the failure, {number(len(pm.noise))} "
            "warning(s) the run survived before it.")
    return ["### Set aside", "", head, "", *table(["time", "as", "what", "why", "where"], rows),
            *_more(len(items) - SET_ASIDE_ROWS, "set aside")]


def _findings(report: Report) -> list[str]:
    if not report.findings:
        return ["No findings."]
    rows = [[f.code, f.severity, inline(f.endpoint or "-", cell=True), inline(f.message, CELL_CHARS, cell=True),
             _where(str(f.location) if f.location else None)] for f in report.findings[:FINDING_ROWS]]
    return ["### Findings", "", *table(["code", "severity", "endpoint", "finding", "where"], rows),
            *_more(len(report.findings) - FINDING_ROWS, "findings")]


def _section(parts: Sequence[list[str]]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part:
            out += [*part, ""]
    return out


def run_markdown(report: Report, index: int = 0) -> list[str]:
    """One run's section: a failed run's postmortem, else its verdict, headline figures and findings."""
    pm = report.postmortem
    if pm is None:
        return _section([[_title(report, index)], _facts(report), _findings(report)])
    mark = next((e for e in pm.marked_by if e.ts == pm.failed_at), None)
    when = clock(pm.failed_at) if pm.failed_at else "no time in the logs read"
    failed = [f"- **failed at**: {when}" + (f": {inline(mark.text)} ({_where(mark.at)})" if mark else "")]
    return _section([[_title(report, index)], _root_cause(pm), [*_facts(report), *failed], _evidence(report, pm),
                     _flags(report, pm), _fix(report, pm), _timeline(report), _set_aside(pm)])


def render_markdown(reports: Sequence[Report]) -> str:
    """The runs as one Markdown document: one section per run (several under a line that counts them)."""
    lines = [f"# diag: {number(len(reports))} runs", ""] if len(reports) > 1 else []
    for i, rep in enumerate(reports):
        lines += run_markdown(rep, i)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


__all__ = ["LINE_CHARS", "code", "fenced", "inline", "render_markdown", "run_markdown", "table"]
