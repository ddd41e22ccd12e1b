"""Dependencies point one way (diag -> rules -> parsers); only diag/tui imports textual; the TUI never
imports a CLI module; no import cycles between modules; one top-level import package."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"parsers": "diag.parsers", "rules": "diag.rules", "diag": "diag"}
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
    for prefix in ("diag.parsers", "diag.rules"):
        if name == prefix or name.startswith(prefix + "."):
            return prefix.split(".")[1]
    return "diag" if name == "diag" or name.startswith("diag.") else None


ALL = {module_name(p): p for f in FOLDERS for p in _modules(f)}


def test_packages_exist() -> None:
    for folder in FOLDERS:
        assert _modules(folder), folder


def test_dependency_direction() -> None:
    forbidden = {"parsers": {"rules", "diag"}, "rules": {"diag"}}
    bad = []
    for name, path in ALL.items():
        mine = layer(name)
        for imp in imports(path):
            top = imp.split(".")[0]
            if mine in forbidden and (layer(imp) in forbidden[mine] or top in THIRD_PARTY_UI):
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
