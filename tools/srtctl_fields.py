"""srtctl's recipe fields, read from srt-slurm's own schema: writes ``parsers/catalog/srtctl_fields.toml`` and
each engine adapter's ``engines/<engine>/data/srtctl_fields.toml``.

    python tools/srtctl_fields.py GIT_DIR [--rev HEAD] [--root CHECKOUT]

``GIT_DIR`` is a clone (or bare mirror) of NVIDIA/srt-slurm. srtctl loads a recipe with
``marshmallow_dataclass`` schemas (``src/srtctl/core/schema.py``, backends in
``src/srtctl/backends/*.py``); marshmallow's default ``unknown=RAISE`` rejects any key that is not a
field, at every level. The script parses those files with :mod:`ast` (nothing of srt-slurm runs): every
``@dataclass`` class, its annotated fields (``ClassVar`` skipped; a ``data_key=`` in the field's
metadata is the YAML name), and which fields hold another dataclass (a nested section to check).
``SrtConfig`` is the root; ``backend`` is dispatched on ``type`` (srtctl's ``BackendConfigField``,
default ``sglang``) to the ``*Protocol`` class of that backend. Fields typed as plain ``dict`` stay
open (environment maps, engine flags, ``frontend.args``).

The sections of a backend an engine adapter owns (its ``*Protocol`` fields and nested sections) are written
to that adapter's data (``OWNERS``; read through its ``catalogs["srtctl_fields"]``); srtctl's own sections
and the backends without an adapter stay in core's file. Every file names the source it was read from.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
from pathlib import Path

SCHEMA = "src/srtctl/core/schema.py"
BACKENDS = {"sglang": "SGLangProtocol", "vllm": "VLLMProtocol", "trtllm": "TRTLLMProtocol",
            "mocker": "MockerProtocol"}
CORE = "parsers/catalog/srtctl_fields.toml"
# backend type -> the adapter data file holding its sections; Dynamo's mocker simulates a vLLM-style
# scheduler configured with vLLM's engine-argument names (its MockEngineArgs default engine_type is vllm)
OWNERS = {"sglang": "engines/sglang/data/srtctl_fields.toml", "vllm": "engines/vllm/data/srtctl_fields.toml",
          "mocker": "engines/vllm/data/srtctl_fields.toml"}


def _show(git_dir: Path, rev: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(git_dir), "show", f"{rev}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any((isinstance(d, ast.Name) and d.id == "dataclass")
               or (isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "dataclass")
               for d in node.decorator_list)


def _data_key(value: ast.expr | None) -> str | None:
    if value is None:
        return None
    for node in ast.walk(value):
        if isinstance(node, ast.keyword) and node.arg == "data_key" and isinstance(node.value, ast.Constant):
            return str(node.value.value)
    return None


def classes(source: str) -> dict[str, list[tuple[str, str]]]:
    """Each dataclass of a module: its (YAML name, annotation text) fields, in order."""
    out: dict[str, list[tuple[str, str]]] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.ClassDef) and _is_dataclass(node)):
            continue
        fields: list[tuple[str, str]] = []
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                annotation = ast.unparse(item.annotation)
                if "ClassVar" in annotation:
                    continue
                fields.append((_data_key(item.value) or item.target.id, annotation))
        out[node.name] = fields
    return out


def sections(known: dict[str, list[tuple[str, str]]], root: str, prefix: str = "") -> dict[str, list[str]]:
    """Dotted section path -> its field names, descending into fields typed as another dataclass."""
    out = {prefix: sorted(name for name, _ in known[root])}
    for name, annotation in known[root]:
        nested = [c for c in re.findall(r"[A-Za-z_]\w*", annotation) if c in known and c != root]
        if nested and name != "backend":
            out |= sections(known, nested[0], f"{prefix}.{name}" if prefix else name)
    return out


def _toml_list(names: list[str]) -> str:
    return "[" + ", ".join(f'"{n}"' for n in names) + "]"


def _backends(known: dict[str, list[tuple[str, str]]], backends: list[str]) -> list[str]:
    lines = ["", "[backend]  # backend.type -> the fields of its *Protocol class (default sglang)"]
    lines += [f"{b} = {_toml_list(sorted(n for n, _ in known[BACKENDS[b]]))}" for b in backends]
    lines += ["", "[backend_sections]  # nested dataclasses under backend, by backend type"]
    for backend in backends:
        for path, names in sections(known, BACKENDS[backend]).items():
            if path:
                lines.append(f'"{backend}.{path}" = {_toml_list(names)}')
    return lines


def render(git_dir: Path, rev: str) -> dict[str, str]:
    """Each file's text, by its path in the checkout: core's (srtctl's sections, the backends no adapter
    owns) and each owning adapter's (its backends)."""
    commit = subprocess.run(["git", "-C", str(git_dir), "rev-parse", rev], check=True, capture_output=True,
                            text=True).stdout.strip()
    date = subprocess.run(["git", "-C", str(git_dir), "show", "-s", "--format=%cs", commit], check=True,
                          capture_output=True, text=True).stdout.strip()
    paths = [SCHEMA, *(f"src/srtctl/backends/{b}.py" for b in BACKENDS)]
    known: dict[str, list[tuple[str, str]]] = {}
    for path in paths:
        known |= classes(_show(git_dir, commit, path))
    head = [
        "# srtctl's recipe fields: generated by tools/srtctl_fields.py from srt-slurm's own schema; do not edit.",
        "# marshmallow (unknown=RAISE) rejects any other key at these levels; plain-dict fields stay open.",
        "[source]",
        'repo = "NVIDIA/srt-slurm"',
        f'commit = "{commit}"',
        f'date = "{date}"',
        f"paths = {_toml_list(paths)}",
    ]
    core = [*head, "", "[sections]  # dotted path in the recipe -> its fields (\"\" is the top level, SrtConfig)"]
    core += [f'"{path}" = {_toml_list(names)}' for path, names in sections(known, "SrtConfig").items()]
    files = {CORE: core + _backends(known, [b for b in BACKENDS if b not in OWNERS])}
    for out in dict.fromkeys(OWNERS.values()):
        files[out] = head + _backends(known, [b for b in BACKENDS if OWNERS.get(b) == out])
    return {path: "\n".join(lines) + "\n" for path, lines in files.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", type=Path)
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                        help="the diag checkout to write into")
    args = parser.parse_args()
    for rel, text in render(args.git_dir, args.rev).items():
        (args.root / rel).write_text(text)
        print(f"wrote {args.root / rel}")


if __name__ == "__main__":
    main()
