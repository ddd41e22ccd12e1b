"""Dependencies point one way (diag -> rules -> parsers); only diag/tui imports textual."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("parsers", "rules", "diag")
FORBIDDEN = {"parsers": {"rules", "diag", "textual", "rich", "typer"}, "rules": {"diag", "textual", "rich", "typer"}}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _modules(pkg: str) -> list[Path]:
    return sorted((ROOT / pkg).rglob("*.py"))


def test_packages_exist() -> None:
    for pkg in PACKAGES:
        assert _modules(pkg), pkg


def test_dependency_direction() -> None:
    bad = []
    for pkg, forbidden in FORBIDDEN.items():
        for mod in _modules(pkg):
            hit = _imports(mod) & forbidden
            if hit:
                bad.append(f"{mod.relative_to(ROOT)} imports {sorted(hit)}")
    assert not bad, bad


def test_only_tui_imports_textual() -> None:
    bad = [str(m.relative_to(ROOT)) for m in _modules("diag")
           if "textual" in _imports(m) and "tui" not in m.relative_to(ROOT).parts]
    assert not bad, bad


def test_module_size() -> None:
    """No module over ~500 lines unless its docstring says why."""
    big = []
    for pkg in PACKAGES:
        for mod in _modules(pkg):
            text = mod.read_text(encoding="utf-8")
            if text.count("\n") > 520:
                doc = ast.get_docstring(ast.parse(text)) or ""
                if "long because" not in doc.lower():
                    big.append(f"{mod.relative_to(ROOT)}: {text.count(chr(10))} lines")
    assert not big, big
