"""The one refusal every command gives when nothing it was given is what it takes (a run's logs, a recipe):
one line naming each file with what it plainly is, so that an HTML page given to ``diag check`` is said to
be a page, not reported as a broken recipe, and a recipe given to ``diag tail`` points at ``diag check``."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from diag.parsers.layout import holds_vocabulary

from .files import LOG_KINDS, classify, is_binary, is_dir, not_readable, open_log
from .options import printable

if TYPE_CHECKING:
    from .report import Report

_MARKUP = re.compile(rb"\s*(?:<!doctype\s+html|<html|<head|<body|<\?xml|<svg)", re.I)
HEAD_BYTES = 65536   # what the refusal reads of a file to say what it is


def plainly(path: Path) -> str | None:
    """What a regular file a command cannot take plainly is, from its name and head (the refusal names it):
    an empty file, an HTML page, binary data, a run log or a recipe (with the command that reads it); None
    for other text, or a path that is not a readable file."""
    if is_dir(path) or not_readable(path) is not None:
        return None
    try:
        with open_log(path) as fh:
            head = fh.read(HEAD_BYTES)
    except (OSError, EOFError):
        return None
    if not head.strip():
        return "an empty file"
    if _MARKUP.match(head):
        return "an HTML page" if b"html" in head[:1024].lower() else "XML markup"
    try:
        head[:4096].decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < min(len(head), 4096) - 3:   # not a character cut at the end of the sample
            return "binary data"
    if is_binary(head[:4096]):
        return "binary data"
    kind = classify(path).kind
    if kind in LOG_KINDS or holds_vocabulary(head):
        return "a run log: diag tail reads it"
    if kind == "recipe":
        return "a recipe: diag check reads it"
    return None


def refusal(wanted: str, paths: Sequence[str | Path]) -> str:
    """The one line every command gives when nothing it was given is what it takes (``wanted``: ``logs``,
    ``recipes``), each file named with what it plainly is: ``no recipes diag understands in page.html (an
    HTML page)``. The command exits 2."""
    named = []
    for p in paths:
        what = plainly(Path(p))
        named.append(f"{p} ({what})" if what else str(p))
    return f"no {wanted} diag understands in {', '.join(named)}"


def nothing_read(reports: Sequence[Report]) -> bool:
    """No run read a log or found a benchmark result (:attr:`Report.read_nothing`): an input error, not an
    empty report (tail, report)."""
    return all(r.read_nothing for r in reports)


def unread_lines(paths: Sequence[str], reports: Sequence[Report]) -> list[str]:
    """Why nothing was read: the runs' errors, else that no file was a log diag reads (:func:`refusal`)."""
    errors = [printable(e) for r in reports for e in r.run.errors]
    return errors or [printable(refusal("logs", paths))]
