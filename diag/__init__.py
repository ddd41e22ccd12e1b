"""diag: why a disaggregated LLM-serving benchmark run is slow or broken.

One import namespace: the repository keeps ``parsers/`` and ``rules/`` beside ``diag/`` (the project's
layout); a wheel installs them as ``diag.parsers`` and ``diag.rules`` (``package-dir`` in
pyproject.toml). Run from a source tree, this package's path also covers the repository root so the
same names resolve there.
"""

from pathlib import Path as _Path

__version__ = "0.1.0"

_here = _Path(__file__).resolve().parent
if not (_here / "parsers").is_dir() and (_here.parent / "parsers" / "__init__.py").is_file():
    __path__.append(str(_here.parent))  # source tree: diag.parsers -> ../parsers, diag.rules -> ../rules
