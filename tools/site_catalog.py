"""The runtime site tables: the extracted sites (tools/data/logsites/*.jsonl) joined with their classifications.

    python tools/site_catalog.py [--check | --tables]

Classifications (``engines/<engine>/catalog/sites.toml`` for vLLM, SGLang and TensorRT-LLM,
``parsers/catalog/sites/<engine>.toml`` for Dynamo, NIXL, Mooncake and LMCache; issue 36's schema): a ``[[site]]`` by id wins, else
the first ``[[scope]]`` whose every selector matches (``files``/``functions`` fnmatch globs, ``levels``,
``exceptions``, ``patterns`` regexes searched in the site's pattern). Writes one generated table per owner,
``engines/<engine>/catalog/sites.generated.jsonl`` (engine vocabulary stays in its adapter) and
``parsers/catalog/sites.generated.jsonl`` (the core engines): a header line, then one row per distinct (engine,
pattern) of the classified sites with a pattern, releases merged, benign rows kept (they suppress).

It prints coverage: per source, the error-class sites (error/exception/critical/raise) classified of all and
per engine the same counted once per id; the warning sites whose pattern matches a line of a corpus
(tests/data/real-logs, ../shared/samples/real-logs, samples/runs/**/*.out) classified of all; and writes every
unclassified one of those to ``tools/data/logsites/unclassified.txt`` (``--tables``: the tables only).
``--check`` writes nothing and exits 1 when a committed table differs from what its inputs give
(tests/test_sites.py runs the same comparison).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logsites import OUT, Site, load  # tools/ is not a package

from diag.parsers import faults
from diag.parsers import sites as site_tables
from diag.parsers.faults import PHASES
from diag.parsers.sites import (
    SITE_CLASSES,
    TABLE,
    SiteIndex,
    SiteRow,
    anchored,
    levelless_engines,
    trigger_phrases,
)

ROOT = Path(__file__).resolve().parent.parent
ENGINE_DIRS = {name: ROOT / "engines" / name / "catalog" for name in ("vllm", "sglang", "trtllm")}
CORE_DIR = ROOT / "parsers" / "catalog"
CORE_ENGINES = ("dynamo", "nixl", "mooncake", "lmcache")
ENGINES = (*ENGINE_DIRS, *CORE_ENGINES)
ERROR_LEVELS = ("error", "exception", "critical", "raise")
CORPORA = (ROOT / "tests" / "data" / "real-logs", ROOT.parent / "shared" / "samples" / "real-logs")
UNCLASSIFIED = OUT / "unclassified.txt"
SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
LEVELS = frozenset({"error", "warning", "exception", "critical", "raise"})


@dataclass(frozen=True)
class Verdict:
    """What a reader said of a site (a ``[[site]]`` or the ``[[scope]]`` that took it)."""

    cls: str
    phase: str
    severity: str
    source: str   # "site" or the scope's name


def classification_file(engine: str) -> Path:
    return ENGINE_DIRS[engine] / "sites.toml" if engine in ENGINE_DIRS else CORE_DIR / "sites" / f"{engine}.toml"


def table_file(engine: str) -> Path:
    return ENGINE_DIRS.get(engine, CORE_DIR) / TABLE


class Classification:
    """One engine's classification file: sites by id, then scopes in file order; ``problems`` lists what breaks
    the schema (a class, phase, severity or level it does not know, no ``why``, an id classified twice)."""

    def __init__(self, path: Path) -> None:
        data = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        self.problems = [p for kind in ("site", "scope") for raw in data.get(kind, []) for p in _problems(kind, raw)]
        ids = [s["id"] for s in data.get("site", [])]
        self.problems += [f"site {i}: classified twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
        self.sites = {s["id"]: Verdict(s["class"], s["phase"], s["severity"], "site")
                      for s in data.get("site", [])}
        self.scopes = [(s, [re.compile(p) for p in s.get("patterns", [])]) for s in data.get("scope", [])]

    def verdict(self, site: Site) -> Verdict | None:
        if site.id in self.sites:
            return self.sites[site.id]
        for scope, patterns in self.scopes:
            if self._takes(scope, patterns, site):
                return Verdict(scope["class"], scope["phase"], scope["severity"], scope.get("name", "scope"))
        return None

    @staticmethod
    def _takes(scope: dict, patterns: list[re.Pattern[str]], site: Site) -> bool:
        return (any(fnmatch(site.file, g) for g in scope.get("files", ["*"]))
                and any(fnmatch(site.function, g) for g in scope.get("functions", ["*"]))
                and site.level in scope.get("levels", [site.level])
                and ("exceptions" not in scope or (site.exception or "") in scope["exceptions"])
                and all(p.search(site.pattern or "") for p in patterns))


def _problems(kind: str, raw: dict) -> list[str]:
    name = raw.get("id" if kind == "site" else "name", "?")
    out = [f"{kind} {name}: {key} = {raw.get(key)!r} is not one of the schema's"
           for key, allowed in (("class", SITE_CLASSES), ("phase", PHASES), ("severity", SEVERITY_RANK))
           if raw.get(key) not in allowed]
    out += [f"{kind} {name}: unknown level in {raw['levels']}"] if set(raw.get("levels", [])) - LEVELS else []
    return out + ([] if raw.get("why") else [f"{kind} {name}: no why"])


def sources() -> dict[str, list[Site]]:
    """The sites of every extracted source, by file stem (``vllm-0.11.2``), in name order."""
    return {p.stem: load(p) for p in sorted(OUT.glob("*.jsonl"))}


def rows(sites: Iterable[Site], verdicts: dict[str, Verdict | None]) -> list[SiteRow]:
    """One row per distinct (engine, pattern) of the classified sites with a pattern; where sites of one pattern
    were classified differently, the most severe verdict wins (the tool lists such conflicts)."""
    groups: dict[tuple[str, str], list[tuple[Site, Verdict]]] = {}
    for site in sites:
        if site.pattern is not None and (v := verdicts.get(site.id)) is not None:
            groups.setdefault((site.engine, site.pattern), []).append((site, v))
    out = []
    for (engine, pattern), hits in sorted(groups.items()):
        v = min((v for _, v in hits), key=lambda v: SEVERITY_RANK.get(v.severity, 3))
        out.append(SiteRow(engine, pattern, v.cls, v.phase, v.severity,
                           tuple(sorted({s.level for s, _ in hits})),
                           tuple(sorted({s.exception for s, _ in hits if s.exception})),
                           tuple(dict.fromkeys(s.id for s, _ in hits)),
                           tuple(dict.fromkeys(s.release for s, _ in hits)),
                           at=tuple(dict.fromkeys(f"{s.file.rsplit('/', 1)[-1]}:{s.line}" for s, _ in hits))))
    return out


def conflicts(sites: Iterable[Site], verdicts: dict[str, Verdict | None]) -> list[str]:
    seen: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for s in sites:
        if s.pattern is not None and (v := verdicts.get(s.id)) is not None:
            seen.setdefault((s.engine, s.pattern), set()).add((v.cls, v.phase))
    return [f"{e}: {p!r}: {sorted(c)}" for (e, p), c in sorted(seen.items()) if len(c) > 1]


def render(table: list[SiteRow], inputs: list[str]) -> str:
    """A table's text: its header (inputs, rows, the trigger phrases of its level-less engines' error sites),
    then one row a line."""
    head: dict[str, object] = {"generated_by": "tools/site_catalog.py", "inputs": inputs, "rows": len(table)}
    if found := trigger_phrases(table, levelless_engines()):
        head["phrases"] = found
    return "\n".join([json.dumps(head, separators=(",", ":")), *(r.to_json() for r in table)]) + "\n"


def build() -> tuple[dict[Path, str], dict[str, list[Site]], dict[str, dict[str, Verdict | None]]]:
    """The text of every generated table, with the sites read and each engine's verdicts by id."""
    by_source = sources()
    by_engine: dict[str, list[Site]] = {}
    for sites in by_source.values():
        for s in sites:
            by_engine.setdefault(s.engine, []).append(s)
    verdicts: dict[str, dict[str, Verdict | None]] = {}
    tables: dict[Path, list[SiteRow]] = {}
    inputs: dict[Path, list[str]] = {}
    for engine, sites in sorted(by_engine.items()):
        rules = Classification(classification_file(engine))
        verdicts[engine] = {s.id: rules.verdict(s) for s in sites}
        path = table_file(engine)
        tables.setdefault(path, []).extend(rows(sites, verdicts[engine]))
        inputs.setdefault(path, []).append(str(classification_file(engine).relative_to(ROOT)))
    every = anchored([r for table in tables.values() for r in table])   # anchors: the rarest word of all tables
    done = iter(every)
    texts = {path: render([next(done) for _ in table], inputs[path]) for path, table in tables.items()}
    return texts, by_source, verdicts


def corpus_lines() -> Iterator[str]:
    files = [p for d in CORPORA for p in sorted(d.glob("*.log"))]
    files += sorted((ROOT / "samples" / "runs").rglob("*.out"))
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as fh:
            yield from fh


def corpus_warnings(by_source: dict[str, list[Site]]) -> set[tuple[str, str]]:
    """(engine, id) of every warning site whose pattern matches a line of a corpus (the pattern searched in
    the line, the matcher's anchor index choosing which patterns to try)."""
    warn = {}
    for sites in by_source.values():
        for s in sites:
            if s.level == "warning" and s.pattern is not None:
                warn.setdefault((s.engine, s.pattern), set()).add((s.engine, s.id))
    index = SiteIndex(anchored([SiteRow(e, p, "", "", "", (), (), (), ()) for e, p in warn]))
    hit: set[tuple[str, str]] = set()
    for line in corpus_lines():
        for entry in index.candidates(line):
            key = (entry.row.engine, entry.row.pattern)
            if key not in hit and entry.exact().search(line):
                hit.add(key)
    return {sid for key in hit for sid in warn[key]}


def coverage(by_source: dict[str, list[Site]], verdicts: dict[str, dict[str, Verdict | None]]) -> tuple[
        list[str], list[str]]:
    """The coverage lines to print and the unclassified lines to write."""
    lines = [f"{'source':38} {'error-class classified':>24}"]
    missing: dict[tuple[str, str], Site] = {}
    per_engine: dict[str, dict[str, bool]] = {}
    for name, sites in by_source.items():
        errs = [s for s in sites if s.level in ERROR_LEVELS]
        done = sum(verdicts[s.engine][s.id] is not None for s in errs)
        lines.append(f"{name:38} {done:>10} / {len(errs):<6} {_pct(done, len(errs))}")
        for s in errs:
            per_engine.setdefault(s.engine, {})[s.id] = verdicts[s.engine][s.id] is not None
            if verdicts[s.engine][s.id] is None:
                missing.setdefault((s.engine, s.id), s)
    for engine, ids in sorted(per_engine.items()):
        done = sum(ids.values())
        lines.append(f"{engine + ' (ids once)':38} {done:>10} / {len(ids):<6} {_pct(done, len(ids))}")
    warned = corpus_warnings(by_source)
    sites_by_key = {(s.engine, s.id): s for sites in by_source.values() for s in sites}
    done = sum(verdicts[e][i] is not None for e, i in warned)
    lines.append(f"{'corpus warnings':38} {done:>10} / {len(warned):<6} {_pct(done, len(warned))}")
    for key in sorted(warned):
        if verdicts[key[0]][key[1]] is None:
            missing.setdefault(key, sites_by_key[key])
    todo = [f"{s.engine}\t{s.id}\t{s.level}\t{s.file}:{s.line}\t{s.function}\t{s.pattern or s.format}"
            for _, s in sorted(missing.items())]
    return lines, todo


def fault_sites(table: Iterable[SiteRow]) -> dict[str, list[str]]:
    """Each hand-written fault cause's ``sites``: the ids of the generated rows whose example line the cause's
    pattern takes (its triggers first, as a line is read; patterns of fewer than 8 literal characters are left
    out, a hole-only message says nothing of its own)."""
    table = [r for r in table if len(site_tables.literal_text(r.pattern)) >= 8]
    lines = [site_tables.example_line(r.pattern) for r in table]
    out: dict[str, list[str]] = {}
    for cause in faults.TAXONOMY:
        if not cause.pattern:
            out[cause.name] = []
            continue
        rx = re.compile(cause.pattern)
        hit = {r.id for r, line in zip(table, lines, strict=True)
               if (not cause.triggers or any(t in line for t in cause.triggers)) and rx.search(line)}
        out[cause.name] = sorted(hit)
    return out


def _sites_lines(ids: list[str]) -> list[str]:
    """``sites = [...]`` wrapped at 118 columns (no line when there is no id)."""
    if not ids:
        return []
    out, cur = [], "sites = ["
    for i, tok in enumerate(f'"{x}"' for x in ids):
        add = tok + (", " if i < len(ids) - 1 else "]")
        if len(cur) + len(add) > 118:
            out.append(cur.rstrip())
            cur = "  "
        cur += add
    return [*out, cur]


def write_fault_sites(changed: dict[str, list[str]]) -> list[Path]:
    """Rewrite the ``sites`` of the causes in ``changed`` in their catalogs (after each cause's ``why``)."""
    files = [CORE_DIR / "faults.toml", *(d / "faults.toml" for d in ENGINE_DIRS.values())]
    written = []
    for path in (f for f in files if f.is_file()):
        lines, out, cause = path.read_text(encoding="utf-8").split("\n"), [], None
        skipping = False
        for line in lines:
            if skipping:
                skipping = not line.rstrip().endswith("]")
                continue
            if m := re.match(r'^name = "(\w+)"$', line):
                cause = m[1]
            if cause in changed and line.startswith("sites = ["):
                skipping = not line.rstrip().endswith("]")
                continue
            out.append(line)
            if cause in changed and line.startswith("why = "):
                out += _sites_lines(changed[cause])
        text = "\n".join(out)
        if text != path.read_text(encoding="utf-8"):
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f} %" if whole else "    - "


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare the committed tables, write nothing")
    ap.add_argument("--tables", action="store_true", help="write the tables only (no coverage: the corpus scan)")
    ap.add_argument("--fault-sites", action="store_true",
                    help="print the hand-written fault causes whose `sites` differ from the committed tables")
    ap.add_argument("--write", action="store_true", help="with --fault-sites: rewrite those `sites` in the catalogs")
    args = ap.parse_args(argv)
    if args.fault_sites:
        table = [r for path in site_tables.table_files() for r in site_tables.read_table(path)]
        changed = {n: ids for n, ids in fault_sites(table).items() if tuple(ids) != faults.CAUSES[n].sites}
        for name, ids in changed.items():
            print(f"{name}: sites = [{', '.join(repr(i).replace(chr(39), chr(34)) for i in ids)}]")
        if args.write:
            for path in write_fault_sites(changed):
                print(f"wrote {path.relative_to(ROOT)}")
            return 0
        return 1 if changed else 0
    problems = [f"{f.relative_to(ROOT)}: {p}" for f in sorted({classification_file(e) for e in ENGINES})
                for p in Classification(f).problems]
    for line in problems:
        print(f"schema: {line}", file=sys.stderr)
    if problems:
        return 1
    texts, by_source, verdicts = build()
    stale = [p for p, text in texts.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if args.check:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)} (run python tools/site_catalog.py)")
        return 1 if stale else 0
    for path, text in texts.items():
        path.write_text(text, encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {text.count(chr(10)) - 1} rows")
    if args.tables:
        return 0
    lines, todo = coverage(by_source, verdicts)
    print("\n".join(lines))
    for engine in verdicts:
        mine = (s for sites in by_source.values() for s in sites if s.engine == engine)
        for line in conflicts(mine, verdicts[engine]):
            print(f"conflict: {line}")
    UNCLASSIFIED.write_text("# engine\tid\tlevel\tfile:line\tfunction\tpattern (tools/site_catalog.py)\n"
                            + "".join(t + "\n" for t in todo), encoding="utf-8")
    print(f"{UNCLASSIFIED.relative_to(ROOT)}: {len(todo)} unclassified")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
