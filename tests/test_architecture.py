"""Dependencies point one way (diag -> rules -> parsers); only diag/tui imports textual; the TUI never
imports a CLI module; no import cycles between modules; one top-level import package."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"parsers": "diag.parsers", "rules": "diag.rules", "engines": "diag.engines", "diag": "diag"}
CLI = {"diag.cli", "diag.tail_cmd", "diag.check_cmd", "diag.watch_cmd", "diag.rules_cmd", "diag.__main__"}
THIRD_PARTY_UI = {"textual", "rich", "typer"}


def module_name(path: Path) -> str:
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = [*FOLDERS[folder].split("."), *rest]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def layer(name: str) -> str | None:
    for prefix in ("diag.parsers", "diag.rules", "diag.engines"):
        if name == prefix or name.startswith(prefix + "."):
            return prefix.split(".")[1]
    return "diag" if name == "diag" or name.startswith("diag.") else None


ALL = {module_name(p): p for f in FOLDERS for p in _modules(f)}


def test_packages_exist() -> None:
    for folder in FOLDERS:
        assert _modules(folder), folder


def test_dependency_direction() -> None:
    """parsers <- rules <- diag, and the engines beside them: an adapter may use parsers and rules (its
    recipe checks), core reaches an adapter only through diag.parsers.engines (never an import), and no
    adapter imports the app."""
    forbidden = {"parsers": {"rules", "diag", "engines"}, "rules": {"diag", "engines"}, "engines": {"diag"},
                 "diag": {"engines"}}
    bad = []
    for name, path in ALL.items():
        mine = layer(name)
        for imp in imports(path):
            top = imp.split(".")[0]
            if mine in forbidden and (layer(imp) in forbidden[mine] or (top in THIRD_PARTY_UI and mine != "diag")):
                bad.append(f"{name} imports {imp}")
    assert not bad, bad


def test_only_tui_imports_textual() -> None:
    bad = [n for n, p in ALL.items() if any(i.split(".")[0] == "textual" for i in imports(p))
           and not n.startswith("diag.tui")]
    assert not bad, bad


def test_tui_core_is_headless() -> None:
    """The snapshot, the plots' data, the cells and the record lines never import Textual."""
    core = ("diag.tui.state", "diag.tui.plotdata", "diag.tui.render", "diag.tui.records")
    bad = [f"{n} imports {i}" for n in core for i in imports(ALL[n])
           if i.split(".")[0] in ("textual", "textual_plotext", "plotext")]
    assert not bad, bad


def test_tui_imports_no_cli_module() -> None:
    bad = [f"{n} imports {i}" for n, p in ALL.items() if n.startswith("diag.tui")
           for i in imports(p) if i in CLI]
    assert not bad, bad


def test_no_import_cycles() -> None:
    """Module-level and function-level imports alike: a cycle means two modules are one."""
    graph = {n: {i for i in imports(p) if i in ALL and i != n} for n, p in ALL.items()}
    # a package's __init__ is implied by its submodules' imports; it is not a cycle
    graph = {n: {d for d in deps if not n.startswith(d + ".")} for n, deps in graph.items()}
    seen: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(n: str) -> None:
        seen[n] = 1
        stack.append(n)
        for d in sorted(graph[n]):
            if seen.get(d) == 1:
                cycles.append([*stack[stack.index(d):], d])
            elif d not in seen:
                visit(d)
        stack.pop()
        seen[n] = 2

    for n in sorted(graph):
        if n not in seen:
            visit(n)
    assert not cycles, [" -> ".join(c) for c in cycles]


def test_module_size() -> None:
    """No module over ~500 lines unless its docstring says why."""
    big = []
    for name, path in ALL.items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > 520:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "long because" not in doc.lower():
                big.append(f"{name}: {text.count(chr(10))} lines")
    assert not big, big


# ------------------------------------------------------------------ one presentation layer
PRESENT = "diag.rules.present"
# Formatters that are not presentation: a PromQL step is a wire format the server parses.
NOT_PRESENTATION = {("diag.prom", "_step_str"), ("diag.parsers.promql", "_dur")}


def _formats_an_argument(fn: ast.FunctionDef) -> bool:
    """A function returning ``str`` that formats one of its own arguments with a format spec
    (``f"{x:,.1f}"``) or splits seconds into minutes/hours: a number or duration formatter."""
    if fn.returns is None or ast.unparse(fn.returns) != "str":
        return False
    args = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
    returned = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    for node in (sub for r in returned for sub in ast.walk(r)):
        if (isinstance(node, ast.FormattedValue) and node.format_spec is not None
                and isinstance(node.value, ast.Name) and node.value.id in args):
            return True
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv)
                and isinstance(node.right, ast.Constant) and node.right.value in (60, 3600)):
            return True
    return False


def test_one_formatter_per_kind() -> None:
    """Numbers, durations, latencies and times are written by diag.rules.present only (no second ``_num``)."""
    twins = [f"{name}.{fn.name}" for name, path in ALL.items() if name != PRESENT
             for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(fn, ast.FunctionDef) and _formats_an_argument(fn) and (name, fn.name) not in NOT_PRESENTATION]
    assert not twins, twins


def test_the_check_itself_catches_a_formatter() -> None:
    fn = ast.parse('def _num(x: float, nd: int = 0) -> str:\n    return f"{x:,.{nd}f}"\n').body[0]
    dur = ast.parse('def _h(s: int) -> str:\n    return f"{s // 60}m"\n').body[0]
    other = ast.parse('def _p(x: float) -> float:\n    raise ValueError(f"{x:g}")\n').body[0]
    assert _formats_an_argument(fn) and _formats_an_argument(dur) and not _formats_an_argument(other)  # type: ignore[arg-type]


def test_one_emitter_family() -> None:
    """Outputs are rendered in diag/emit (and the TUI): no other module builds rich tables, plotly figures
    or JSON documents for stdout, and the old emitter modules are gone."""
    for old in ("diag/emit.py", "diag/reports", "diag/html_report.py", "diag/report_text.py"):
        assert not (ROOT / old).exists(), old
    renderers = ("rich.table", "plotly", "plotly.graph_objects")
    bad = [f"{n} imports {i}" for n, p in ALL.items() for i in imports(p)
           if i in renderers and not n.startswith(("diag.emit", "diag.tui"))]
    assert not bad, bad
    from diag.emit import FORMATS
    assert set(FORMATS["tail"]) >= {"text", "json", "jsonl", "sarif", "github"}


_JUDGED = ("kv", "pct", "wait", "usage", "ratio", "tps", "rate", "preempt", "queue", "util", "frac", "running",
           "ttft", "itl", "latency", "stale", "health")


def test_no_threshold_literal_outside_analyze() -> None:
    """Outputs present what analyze judged: no module of the app layer outside analyze (pipeline, report,
    sweep, sla) compares a figure against a number of its own; thresholds live in the catalogs."""
    analyze = {"diag.pipeline", "diag.report", "diag.sweep", "diag.sla", "diag.report_doc"}
    bad = []
    for name, path in ALL.items():
        if layer(name) != "diag" or name in analyze:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            literal = any(isinstance(c, ast.Constant) and isinstance(c.value, (int, float))
                          and not isinstance(c.value, bool) and c.value not in (0, 1, -1) for c in sides)
            figure = any(not isinstance(c, ast.Constant) and any(w in ast.unparse(c).lower() for w in _JUDGED)
                         for c in sides)
            if literal and figure:
                bad.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    assert not bad, bad


# ------------------------------------------------------------------ engines as plug-ins
def test_no_engine_imports_another() -> None:
    bad = [f"{n} imports {i}" for n, p in ALL.items() if n.startswith("diag.engines.")
           for i in imports(p) if i.startswith("diag.engines.") and i.split(".")[2] != n.split(".")[2]]
    assert not bad, bad


def _frontend_flags() -> set[str]:
    """The Dynamo frontend's flags srt-slurm's recipes pass (``frontend.args``, tests/data/recipes)."""
    import yaml

    out: set[str] = set()
    for path in sorted((ROOT / "tests" / "data" / "recipes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            args = ((doc or {}).get("frontend") or {}).get("args") if isinstance(doc, dict) else None
            out.update(str(k).replace("_", "-") for k in (args if isinstance(args, dict) else ()))
    return out


def _engine_vocabulary() -> dict[str, re.Pattern[str]]:
    """What only an engine adapter may name, from the registered adapters themselves: the trigger literals
    (8+ characters) of the line formats each declares that no other engine's or core's formats share, and
    its multi-word flags (kebab and snake spellings) that no other engine accepts. A flag the Dynamo
    frontend also owns is not an engine's: ``dynamo.<engine>`` parses Dynamo's shared router groups
    (``dynamo/common/configuration/groups/router_args.py``, ``--router-mode``) as ``dynamo.frontend`` does,
    so an engine's flag list holds them, yet a recipe sets them for the frontend (``frontend.args``)."""
    from diag.parsers import engines, lineparser  # noqa: F401  (lineparser: every format declared, catalogs too)
    from diag.parsers.formats import REGISTRY

    adapters = engines.adapters()
    owned: dict[str, set[str]] = {a.name: set() for a in adapters}
    shared: set[str] = set()
    for fmt in REGISTRY.values():
        bucket = owned.get(fmt.engine or "")
        for t in fmt.triggers:
            (bucket if bucket is not None else shared).add(t)
    words: dict[str, re.Pattern[str]] = {}
    for a in adapters:
        others = set().union(*(owned[b.name] for b in adapters if b is not a), shared)
        for t in owned[a.name] - others:
            if len(t.strip()) >= 8 and " " in t.strip():  # a phrase of the engine's, not a word ("version ")
                words[t] = re.compile(re.escape(t))
    frontend = _frontend_flags()
    flags = {a.name: {f.replace("_", "-") for f in (a.flag_names() if a.flag_names else ())} - frontend
             for a in adapters}
    for a in adapters:
        others = set().union(*(flags[b.name] for b in adapters if b is not a))
        for flag in flags[a.name] - others:
            if "-" in flag:
                for form in (flag, flag.replace("-", "_")):
                    words[form] = re.compile(rf"(?<![\w-])(?:--)?{re.escape(form)}(?![\w-])")
    return words


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant of a module but its docstrings and the sample lines of its format
    declarations (``samples=[...]``: what real lines look like, Dynamo's re-formatted engine records
    included), f-string parts included, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    skip |= {id(c) for n in ast.walk(tree) if isinstance(n, ast.keyword) and n.arg == "samples"
             for c in ast.walk(n.value)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def _toml_strings(path: Path) -> list[tuple[int, str]]:
    return [(i, line) for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if not line.lstrip().startswith("#")]


_TOKEN = re.compile(r"[\w-]+")


def engine_vocabulary_outside_adapters() -> set[tuple[str, str]]:
    """(module or catalog, word) for every engine word named outside diag.engines."""
    words = _engine_vocabulary()
    hits: set[tuple[str, str]] = set()
    sources = [(n, _strings(p)) for n, p in ALL.items() if not n.startswith("diag.engines")]
    sources += [(str(p.relative_to(ROOT)), _toml_strings(p))
                for folder in ("parsers", "rules", "diag") for p in sorted((ROOT / folder).rglob("*.toml"))]
    # a word matches only where its own text is there: a flag as a whole [\w-] token, a phrase as a substring
    phrases = [w for w in words if " " in w]
    flags = {w for w in words if " " not in w}
    for where, strings in sources:
        for _, text in strings:
            present = (flags & {t.lstrip("-") for t in _TOKEN.findall(text)}).union(w for w in phrases if w in text)
            hits.update((where, w) for w in present if words[w].search(text))
    return hits


def test_no_engine_vocabulary_outside_adapters() -> None:
    """Nothing outside an engine adapter names an engine's line format or flag: rules, the verdict, the
    app and core's catalogs read the run model, neutral knobs ({knob.X}) and phrases ({says.X}) only."""
    hits = engine_vocabulary_outside_adapters()
    assert not hits, sorted(hits)


def test_the_vocabulary_check_catches_an_engine_word(tmp_path: Path) -> None:
    words = _engine_vocabulary()
    rogue = tmp_path / "rogue.py"
    rogue.write_text('"""Avg prompt throughput in a docstring is fine."""\nX = f"raise --max-num-batched-tokens {1}"\n')
    found = {w for _, text in _strings(rogue) for w, rx in words.items() if rx.search(text)}
    assert "max-num-batched-tokens" in found and not any("Avg prompt" in w for w in found)
