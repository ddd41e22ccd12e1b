"""SGLang's command-line flags per release, and the ``python -m dynamo.sglang`` flags, read from the wheels.

    python tools/sglang_flags.py [--sglang VERSION=DIR ...] [--dynamo VERSION=DIR] [--out PATH]

Nothing is imported: the sources are read with :mod:`ast`. An SGLang release is the unpacked wheel
directory (the one holding ``sglang/``):

* 0.5.x with ``sglang/srt/arg_groups/fields/``: every field of a namespace class (one that sets
  ``_NS_PATH``) annotated ``A[T, "help"]`` or ``A[T, Arg(...)]`` is a flag, ``--field-name`` or the
  ``cli_name``, plus its ``aliases``, unless ``no_cli=True`` (``arg_utils.add_cli_args_from_dataclass``);
  and every ``parser.add_argument("--x", ...)`` of ``ServerArgs.add_cli_args`` (dynamic choices,
  deprecated spellings: their ``new_flag`` is kept).
* older releases: every ``parser.add_argument("--x", ...)`` of ``sglang/srt/server_args.py``. A flag whose
  action is ``DeprecatedAction`` is deprecated, or rejected where that action raises ``ValueError(help)``
  (0.4.6). ``BooleanOptionalAction`` adds a ``--no-`` form.

Releases are given oldest first; for each neighbouring pair the flags one has and the other lacks are
written as ``[changes."OLD..NEW"]``. The wheels: ``pip download --no-deps sglang==VER`` (unzip
``sglang/srt/server_args.py`` and, from 0.5.2x, ``sglang/srt/arg_groups/``), ``ai-dynamo==VER``.

Dynamo (the unpacked ai-dynamo wheel): the flags ``dynamo.sglang`` parses before SGLang's own parser sees
the rest (``dynamo/sglang/args.py`` ``parse_args``): its runtime, router, KV-router and frontend-decoding
groups, its SGLang group and compatibility aliases. ``add_negatable_bool_argument`` adds a ``--no-`` form.

The output (default ``engines/sglang/data/flags.toml``) is what ``diag.engines.sglang.flags`` reads.
"""

from __future__ import annotations

import argparse
import ast
import itertools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "engines" / "sglang" / "data" / "flags.toml"
SGLANG = {"0.4.6.post5": Path("/work/wheels/sgl-0.4.6"), "0.5.8": Path("/work/wheels/sgl-0.5.8"),
          "0.5.23": Path("/work/wheels/sgl-0.5.23")}  # oldest first
DYNAMO = ("1.6.1", Path("/work/wheels/dynamo/ai-dynamo-1.6.1"))
DYNAMO_FILES = ("dynamo/sglang/backend_args.py", "dynamo/sglang/_compat.py",
                "dynamo/common/configuration/groups/runtime_args.py",
                "dynamo/common/configuration/groups/router_args.py",
                "dynamo/common/configuration/groups/kv_router_args.py",
                "dynamo/common/configuration/groups/frontend_decoding_args.py")


def _const(node: ast.AST | None) -> object:
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def _name(node: ast.AST | None) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _options(call: ast.Call, names: dict[str, str] | None = None) -> list[str]:
    """The ``--x`` strings of an ``add_argument`` call (positional option strings; a variable holding one
    counts when ``names`` maps it)."""
    vals = [a.value if isinstance(a, ast.Constant) else (names or {}).get(_name(a)) for a in call.args]
    return [str(v) for v in vals if isinstance(v, str) and v.startswith("--")]


def _string_names(tree: ast.AST) -> dict[str, str]:
    """``legacy_flag = "--x"``: variables a module assigns a flag string to."""
    return {t.id: str(n.value.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
            for t in n.targets if isinstance(t, ast.Name)}


def _add_argument_calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == "add_argument"]


def _field_flags(path: Path) -> dict[str, str]:
    """Flags of the ``A[T, ...]`` fields of the namespace classes in one ``fields/*.py`` file."""
    out: dict[str, str] = {}
    for cls in ast.walk(ast.parse(path.read_text())):
        if not isinstance(cls, ast.ClassDef):
            continue
        body = cls.body
        if not any(isinstance(s, ast.Assign) and any(_name(t) == "_NS_PATH" for t in s.targets) for s in body):
            continue
        for stmt in body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            ann = stmt.annotation
            if not (isinstance(ann, ast.Subscript) and _name(ann.value) in ("A", "Annotated")):
                continue
            parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            meta = parts[1:]
            arg = next((m for m in meta if isinstance(m, ast.Call) and _name(m.func) == "Arg"), None)
            if arg is None and not any(isinstance(m, ast.Constant) and isinstance(m.value, str) for m in meta):
                continue  # no CLI metadata: not registered
            kw = _keywords(arg) if arg is not None else {}
            if _const(kw.get("no_cli")) is True:
                continue
            where = f"{path.name}:{stmt.lineno}"
            cli = _const(kw.get("cli_name")) or "--" + stmt.target.id.replace("_", "-")
            names = [str(cli), *map(str, _const(kw.get("aliases")) or [])]
            if _name(kw.get("action")) == "BooleanOptionalAction":
                names += ["--no-" + n[2:] for n in names]
            out.update(dict.fromkeys(names, where))
    return out


def _deprecation_raises(tree: ast.AST) -> bool:
    """Whether the module's ``DeprecatedAction.__call__`` raises (0.4.6) rather than warns (0.5.x)."""
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and cls.name == "DeprecatedAction":
            return any(isinstance(n, ast.Raise) for n in ast.walk(cls))
    return False


def sglang_release(root: Path) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(flag -> file:line, deprecated flag -> its replacement, rejected flag -> SGLang's message)."""
    srt = root / "sglang" / "srt"
    flags: dict[str, str] = {}
    deprecated: dict[str, str] = {}
    rejected: dict[str, str] = {}
    fields = srt / "arg_groups" / "fields"
    if fields.is_dir():
        for path in sorted(fields.glob("*.py")):
            flags.update(_field_flags(path))
    tree = ast.parse((srt / "server_args.py").read_text())
    raises = _deprecation_raises(tree)
    for call in _add_argument_calls(tree):
        kw = _keywords(call)
        action = _name(kw.get("action"))
        for opt in _options(call):
            flags[opt] = f"server_args.py:{call.lineno}"
            if action == "BooleanOptionalAction":
                flags["--no-" + opt[2:]] = flags[opt]
            if action == "DeprecatedAction" and raises:
                rejected[opt] = str(_const(kw.get("help")) or "deprecated")
            elif action.startswith("Deprecated"):
                deprecated[opt] = str(_const(kw.get("new_flag")) or _const(kw.get("help")) or "")
    return flags, deprecated, rejected


def dynamo_flags(root: Path) -> dict[str, str]:
    """The flags ``dynamo.sglang`` itself parses (flag -> file:line)."""
    out: dict[str, str] = {}
    for rel in DYNAMO_FILES:
        tree = ast.parse((root / rel).read_text())
        consts = _string_names(tree)
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            fn = _name(call.func)
            if fn not in ("add_argument", "add_negatable_bool_argument"):
                continue
            kw = _keywords(call)
            names = _options(call, consts) + [str(v) for k in ("flag_name", "obsolete_flag")
                                      if isinstance(v := _const(kw.get(k)), str) and v.startswith("--")]
            for opt in names:
                out[opt] = f"{Path(rel).name}:{call.lineno}"
                if fn == "add_negatable_bool_argument":
                    out["--no-" + opt[2:]] = f"{Path(rel).name}:{call.lineno}"
    return out


def _toml_list(names: list[str]) -> str:
    lines = []
    line = ""
    for n in names:
        item = f'"{n}", '
        if len(line) + len(item) > 108:
            lines.append(line.rstrip())
            line = ""
        line += item
    lines.append(line.rstrip().rstrip(","))
    return "[\n  " + "\n  ".join(lines) + ",\n]" if names else "[]"


def _toml_table(items: dict[str, str]) -> str:
    return "\n".join(f'"{k}" = {_q(v)}' for k, v in sorted(items.items()))


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def render(releases: dict[str, Path], dynamo: tuple[str, Path]) -> str:
    read = {version: sglang_release(root) for version, root in releases.items()}
    out = ["# The flags each SGLang release accepts, and the ones `python -m dynamo.sglang` adds.",
           "# Generated by tools/sglang_flags.py from the released wheels' source (read, not imported);",
           "# do not edit: rerun the script. Names are kebab-case without the leading `--`.", ""]
    for version, (flags, deprecated, rejected) in read.items():
        out += [f'[release."{version}"]',
                f"flags = {_toml_list(sorted(f[2:] for f in flags))}", ""]
        if deprecated:
            out += [f'[release."{version}".deprecated]  # accepted with a warning; the replacement',
                    _toml_table({k[2:]: v for k, v in deprecated.items()}), ""]
        if rejected:
            out += [f'[release."{version}".rejected]  # DeprecatedAction: raises ValueError(help) when given',
                    _toml_table({k[2:]: v for k, v in rejected.items()}), ""]
    versions = list(read)
    for old, new in itertools.pairwise(versions):
        gone = sorted(f[2:] for f in set(read[old][0]) - set(read[new][0]))
        added = sorted(f[2:] for f in set(read[new][0]) - set(read[old][0]))
        out += [f'[changes."{old}..{new}"]  # flags {old} accepts and {new} does not, and the reverse',
                f"removed = {_toml_list(gone)}", f"added = {_toml_list(added)}", ""]
    version, root = dynamo
    out += [f'[dynamo."{version}"]',
            f"flags = {_toml_list(sorted(f[2:] for f in dynamo_flags(root)))}", ""]
    return "\n".join(out)


def _pair(text: str) -> tuple[str, Path]:
    version, _, path = text.partition("=")
    if not path:
        raise argparse.ArgumentTypeError(f"expected VERSION=DIR, got {text!r}")
    return version, Path(path)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sglang", type=_pair, action="append", help="VERSION=DIR of an unpacked sglang wheel")
    ap.add_argument("--dynamo", type=_pair, help="VERSION=DIR of an unpacked ai-dynamo wheel")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    releases = dict(args.sglang) if args.sglang else SGLANG
    args.out.write_text(render(releases, args.dynamo or DYNAMO))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
