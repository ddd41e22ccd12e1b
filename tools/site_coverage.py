"""Coverage of a log-site classification file over the extracted sites of one engine.

    python tools/site_coverage.py ENGINE [--catalog PATH] [--all] [--unclassified N]

Reads the sites of ``tools/data/logsites/<ENGINE>-*.jsonl`` (ids shared by releases count once) and a
classification file of the issue-36 schema (``[[site]]`` by id, then ``[[scope]]``s in file order, the first
whose every given selector matches). Prints, per source file, the classified/total error-class sites
(error/exception/critical/raise) and the classified/total corpus warnings (warning sites whose pattern matches a
line of a corpus: ``tests/data/real-logs/*.log``, ``../shared/samples/real-logs/*.log``,
``samples/runs/**/*.out``), then the totals per release and the unclassified sites. Also reports entries that
name no known site or match none, and values outside the schema. Standalone: the runtime matcher lives in diag.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections import Counter, defaultdict
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from logsites import PATTERN_TOKEN, Site, load, pattern_regex  # tools/ is not a package

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tools" / "data" / "logsites"
CATALOGS = {"vllm": "engines/vllm/catalog/sites.toml", "sglang": "engines/sglang/catalog/sites.toml"}
CORPORA = [(ROOT / "tests" / "data" / "real-logs", "*.log"), (ROOT.parent / "shared" / "samples" / "real-logs", "*.log"),
           (ROOT / "samples" / "runs", "**/*.out")]
CLASSES = frozenset({"oom", "kv_capacity", "config", "cuda", "collective", "transport", "kv_connector", "grammar",
                     "timeout", "death", "infra", "teardown", "weights", "request", "internal", "benign"})
PHASES = frozenset({"startup", "serving", "any"})
SEVERITIES = frozenset({"error", "warning", "info"})
LEVELS = frozenset({"error", "warning", "exception", "critical", "raise"})
MIN_LITERAL = 12  # a pattern with fewer literal characters matches too much to count as a corpus hit


@dataclass(frozen=True)
class Entry:
    """One classification: a site by id or a scope by selectors."""

    name: str
    cls: str
    phase: str
    severity: str
    files: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    levels: tuple[str, ...] = ()
    exceptions: tuple[str, ...] = ()
    patterns: tuple[re.Pattern[str], ...] = ()

    def matches(self, site: Site) -> bool:
        return ((not self.files or any(fnmatch(site.file, g) for g in self.files))
                and (not self.functions or any(fnmatch(site.function, g) for g in self.functions))
                and (not self.levels or site.level in self.levels)
                and (not self.exceptions or (site.exception or "") in self.exceptions)
                and (not self.patterns or any(p.search(site.pattern or "") for p in self.patterns)))


def read_catalog(path: Path) -> tuple[dict[str, Entry], list[Entry], list[str]]:
    """The entries by id, the scopes in order, and the schema problems found."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    problems: list[str] = []
    by_id: dict[str, Entry] = {}
    scopes: list[Entry] = []
    for kind in ("site", "scope"):
        for raw in doc.get(kind, []):
            name = raw.get("id" if kind == "site" else "name", "?")
            for key, allowed in (("class", CLASSES), ("phase", PHASES), ("severity", SEVERITIES)):
                if raw.get(key) not in allowed:
                    problems.append(f"{kind} {name}: {key} = {raw.get(key)!r} is not one of the schema's")
            if not raw.get("why"):
                problems.append(f"{kind} {name}: no why")
            if set(raw.get("levels", [])) - LEVELS:
                problems.append(f"{kind} {name}: unknown level in {raw['levels']}")
            entry = Entry(name, raw.get("class", ""), raw.get("phase", ""), raw.get("severity", ""),
                          tuple(raw.get("files", [])), tuple(raw.get("functions", [])), tuple(raw.get("levels", [])),
                          tuple(raw.get("exceptions", [])), tuple(re.compile(p) for p in raw.get("patterns", [])))
            if kind == "site":
                if name in by_id:
                    problems.append(f"site {name}: classified twice")
                by_id[name] = entry
            else:
                scopes.append(entry)
    return by_id, scopes, problems


def classify(site: Site, by_id: dict[str, Entry], scopes: list[Entry]) -> Entry | None:
    return by_id.get(site.id) or next((s for s in scopes if s.matches(site)), None)


def corpus_lines() -> list[str]:
    lines: set[str] = set()
    for folder, glob in CORPORA:
        for path in sorted(folder.glob(glob)):
            lines.update(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return sorted(lines)


def _literal(pattern: str) -> tuple[str, int]:
    """The longest whitespace-free literal run of a pattern (a cheap prefilter before the regex) and how many
    literal characters the pattern has."""
    literal = PATTERN_TOKEN.sub("\x00", pattern).replace("{{", "{").replace("}}", "}")
    runs = re.split(r"[\s\x00]+", literal)
    return max(runs, key=len, default=""), sum(map(len, runs))


def corpus_hits(sites: list[Site], lines: list[str]) -> dict[str, str]:
    """Warning site id -> the first corpus line its pattern matches."""
    blob = "\n".join(lines)
    hits = {}
    for site in sites:
        anchor, size = _literal(site.pattern or "")
        if size < MIN_LITERAL or anchor not in blob:
            continue
        regex = pattern_regex(site.pattern or "")
        hit = next((line for line in lines if anchor in line and regex.search(line)), None)
        if hit is not None:
            hits[site.id] = hit
    return hits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine")
    ap.add_argument("--catalog", type=Path, help="the classification file (default: the engine's)")
    ap.add_argument("--all", action="store_true", help="every source file, not only those with a gap")
    ap.add_argument("--unclassified", type=int, default=50, metavar="N", help="list at most N unclassified sites")
    ap.add_argument("--explain", nargs="*", default=[], metavar="ID", help="print the entry that classifies each site id")
    args = ap.parse_args(argv)
    catalog = args.catalog or ROOT / CATALOGS.get(args.engine, f"parsers/catalog/sites/{args.engine}.toml")
    releases = {p.stem.removeprefix(f"{args.engine}-"): load(p) for p in sorted(DATA.glob(f"{args.engine}-*.jsonl"))}
    if not releases or not catalog.exists():
        print(f"site_coverage: no sites for {args.engine!r} or no catalog at {catalog}", file=sys.stderr)
        return 2
    sites = {s.id: s for table in releases.values() for s in table}
    by_id, scopes, problems = read_catalog(catalog)
    for site_id in args.explain:
        entry = classify(sites[site_id], by_id, scopes) if site_id in sites else None
        print(f"{site_id}: " + (f"{entry.name} -> {entry.cls}/{entry.phase}/{entry.severity}" if entry else "unclassified"))
    if args.explain:
        return 0
    hits = corpus_hits([s for s in sites.values() if s.level == "warning"], corpus_lines())
    verdict = {i: classify(s, by_id, scopes) for i, s in sites.items()}

    counted = [s for s in sites.values() if s.level != "warning" or s.id in hits]
    per_file: dict[str, Counter[str]] = defaultdict(Counter)
    for s in counted:
        kind = "warn" if s.level == "warning" else "err"
        per_file[s.file][kind] += 1
        per_file[s.file][kind + "_ok"] += verdict[s.id] is not None
    print(f"{'file':70} {'error-class':>12} {'corpus warn':>12}")
    for file, c in sorted(per_file.items()):
        if args.all or c["err_ok"] < c["err"] or c["warn_ok"] < c["warn"]:
            print(f"{file:70} {c['err_ok']:5}/{c['err']:<6} {c['warn_ok']:5}/{c['warn']:<6}")
    print()
    for name, table in [*releases.items(), ("all (unique ids)", list(sites.values()))]:
        ids = {s.id for s in table}
        err = [i for i in ids if sites[i].level != "warning"]
        warn = [i for i in ids if i in hits]
        ok_err, ok_warn = sum(verdict[i] is not None for i in err), sum(verdict[i] is not None for i in warn)
        print(f"{name:18} error-class {ok_err}/{len(err)} = {100 * ok_err / max(len(err), 1):.1f} %   "
              f"corpus warnings {ok_warn}/{len(warn)} = {100 * ok_warn / max(len(warn), 1):.1f} %")
    for label, wanted in (("error-class", lambda s: s.level != "warning"), ("warning", lambda s: s.level == "warning")):
        chosen = [verdict[s.id] for s in sites.values() if wanted(s)]
        classes = Counter(v.cls for v in chosen if v is not None)
        print(f"classes of {label} sites ({len(chosen) - sum(v is None for v in chosen)}/{len(chosen)} classified):",
              ", ".join(f"{k} {n}" for k, n in classes.most_common()))
    used = Counter(v.name for v in verdict.values() if v is not None)
    print(f"entries: {len(by_id)} sites, {len(scopes)} scopes")
    problems += [f"site {i}: no such site id" for i in by_id if i not in sites]
    problems += [f"scope {s.name}: matches no site" for s in scopes if not used[s.name]]
    for problem in problems:
        print("problem:", problem)
    missing = sorted((s for s in counted if verdict[s.id] is None), key=lambda s: (s.file, s.line))
    print(f"\nunclassified: {len(missing)} (showing {min(len(missing), args.unclassified)})")
    for s in missing[:args.unclassified]:
        extra = f"   <- {hits[s.id][:120]}" if s.id in hits else ""
        print(f"  {s.id} {s.level:9} {s.exception or '-':18} {s.file}:{s.line} {s.function}: {s.pattern}{extra}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
