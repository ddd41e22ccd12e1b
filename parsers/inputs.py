"""The one way diag reaches its input files: every log, side file, recipe and index file is opened,
looked at and listed through these functions, never with ``open``, ``Path.stat`` or ``os.walk`` directly.

By default they are the operating system's own (:class:`LocalFiles`). A caller that must confine what a
command reads installs other :class:`Files` for the length of a call with :func:`reading_through`
(``diag mcp``: :class:`diag.confine.Confined`, only under its roots and within per-call limits); the
pipeline is the same. The installed files live in a context variable: threads the pipeline starts run
their work in a copy of the caller's context (:func:`in_context`), so they read through the same files.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import glob
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Protocol, TypeVar

from . import archives

StrPath = str | os.PathLike[str]
Walk = Iterator[tuple[str, list[str], list[str]]]
T = TypeVar("T")


class ReadStopped(Exception):
    """The installed files stopped the command (a path out of bounds, a limit reached): never caught as a
    bad file, it ends the whole command with its one line."""


class Refused(ReadStopped):
    """A path that is, or leads, outside what the installed files may read."""


class Files(Protocol):
    """What the pipeline asks of the file system (the semantics of the ``os``/``glob`` function named)."""

    def open(self, path: StrPath) -> IO[bytes]: ...           # open(path, "rb")
    def stat(self, path: StrPath, *, follow_symlinks: bool = True) -> os.stat_result: ...
    def walk(self, top: StrPath) -> Walk: ...                 # os.walk: symlinked directories not entered
    def glob(self, pattern: str) -> list[str]: ...            # glob.glob, not recursive
    def resolve(self, path: StrPath) -> Path: ...             # Path.resolve (not strict)
    def scannable(self, path: StrPath) -> StrPath | IO[bytes]: ...  # what polars scans for this file


class LocalFiles:
    """The operating system's own calls: what the CLI reads."""

    def open(self, path: StrPath) -> IO[bytes]:
        return open(path, "rb")

    def stat(self, path: StrPath, *, follow_symlinks: bool = True) -> os.stat_result:
        return os.stat(path, follow_symlinks=follow_symlinks)

    def walk(self, top: StrPath) -> Walk:
        return os.walk(top)

    def glob(self, pattern: str) -> list[str]:
        return glob.glob(pattern)

    def resolve(self, path: StrPath) -> Path:
        return Path(path).resolve()

    def scannable(self, path: StrPath) -> StrPath | IO[bytes]:
        return path


_LOCAL = LocalFiles()
_FILES: contextvars.ContextVar[Files | None] = contextvars.ContextVar("diag_input_files", default=None)


def _files() -> Files:
    """The installed files, with archives read as directories in front of them (:mod:`diag.parsers.archives`)."""
    return archives.over(_FILES.get() or _LOCAL)


@contextlib.contextmanager
def reading_through(files: Files) -> Iterator[None]:
    """Every input read in this context (and in the threads :func:`in_context` starts) goes through ``files``."""
    token = _FILES.set(files)
    try:
        yield
    finally:
        _FILES.reset(token)


def in_context(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` to run in a copy of the current context (one copy a task: a context is entered by one thread
    at a time), so a thread pool's task reads through the caller's files."""
    return functools.partial(contextvars.copy_context().run, fn)


def open_input(path: StrPath) -> IO[bytes]:
    return _files().open(path)


def read_bytes(path: StrPath) -> bytes:
    with open_input(path) as fh:
        return fh.read()


def read_text(path: StrPath, *, errors: str = "replace") -> str:
    """A file's UTF-8 text (``errors="strict"`` raises UnicodeDecodeError, as ``Path.read_text`` does)."""
    return read_bytes(path).decode("utf-8", errors=errors)


def stat(path: StrPath) -> os.stat_result:
    return _files().stat(path)


def lstat(path: StrPath) -> os.stat_result:
    return _files().stat(path, follow_symlinks=False)


def walk(top: StrPath) -> Walk:
    return _files().walk(top)


def glob_paths(pattern: str) -> list[str]:
    return _files().glob(pattern)


def resolve(path: StrPath) -> Path:
    return _files().resolve(path)


def scannable(path: StrPath) -> StrPath | IO[bytes]:
    """``path`` for ``pl.scan_parquet``/``pl.read_parquet``: the path itself, or its bytes already read."""
    return _files().scannable(path)


def tree(path: Path) -> Path:
    """What a path named on the command line is read as: an archive's tree (``run.tar.gz!``), else itself."""
    return archives.tree(path, _files())
