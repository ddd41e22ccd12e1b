"""The one way diag reaches its input files: every log, side file, recipe and index file is opened,
looked at and listed through these functions, never with ``open``, ``Path.stat`` or ``os.walk`` directly.

By default they are the operating system's own (:class:`LocalFiles`). A caller that must confine what a
command reads installs other :class:`Files` for the length of a call with :func:`reading_through`
(``diag mcp``: :class:`diag.confine.Confined`, only under its roots and within per-call limits); the
pipeline is the same. The installed files live in a context variable: threads the pipeline starts run
their work in a copy of the caller's context (:func:`in_context`), so they read through the same files.

Whatever files are installed, :class:`ArchiveFiles` stands in front of them: a path inside an archive
(``run.tar.gz!/logs/x.out``, :mod:`diag.parsers.archives`) is a member read in place, the archive itself
opened through the installed files (confined and counted under ``diag mcp``); worker processes get it too.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import glob
import io
import os
import stat as stat_module
import threading
import weakref
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


class ArchiveFiles:
    """The installed files, with archives read as directories (see the module docstring)."""

    def __init__(self, base: Files) -> None:
        self.base = base
        self.cache: dict[tuple[str, int, int], archives.Archive | archives.ArchiveRefused] = {}

    def archive(self, real: str) -> archives.Archive:
        st = self.base.stat(real)
        if not stat_module.S_ISREG(st.st_mode):
            raise OSError(errno.ENOTDIR, "not an archive file", real)
        key = (str(self.base.resolve(real)), st.st_size, st.st_mtime_ns)
        got = self.cache.get(key)
        if got is None:
            try:
                got = archives.Archive(real, lambda: self.base.open(real)).list()
            except archives.ArchiveRefused as e:   # looked at once: a walk and the stat after it say why
                got = e
            self.cache[key] = got
        if isinstance(got, archives.ArchiveRefused):
            raise got
        return got

    def locate(self, path: StrPath) -> tuple[archives.Archive, archives.Parts, archives.Member | None]:
        """The archive holding ``path``, its parts there and its member (None: a folder); OSError if none."""
        real, parts = archives.split(path)  # type: ignore[misc]
        arch = self.archive(real)
        for k, p in enumerate(parts):
            packed = (*parts[:k], p[:-1])
            if p.endswith(archives.MARK) and archives.is_archive_name(p[:-1]) and packed in arch.files:
                arch, parts = arch.nested_archive(packed), parts[k + 1:]
                break
        if parts in arch.files:
            return arch, parts, arch.files[parts]
        if parts in arch.dirs:
            return arch, parts, None
        raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(path))

    # ------------------------------------------------------------ diag.parsers.inputs.Files
    def open(self, path: StrPath) -> IO[bytes]:
        if archives.split(path) is None:
            return self.base.open(path)
        arch, _, m = self.locate(path)
        if m is None:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        return arch.open(m)

    def stat(self, path: StrPath, *, follow_symlinks: bool = True) -> os.stat_result:
        if archives.split(path) is None:
            return self.base.stat(path, follow_symlinks=follow_symlinks)
        m = self.locate(path)[2]
        if m is not None:
            return archives.stat_result(archives.FILE_MODE, m.size, m.mtime, m.ino)
        return archives.stat_result(archives.DIR_MODE, 0, 0.0, 0)

    def walk(self, top: StrPath) -> Walk:
        if archives.split(top) is None:
            yield from self._walk_folder(top)
            return
        try:
            arch, parts, m = self.locate(top)
        except OSError:
            return
        if m is None:
            yield from self._walk(os.fspath(top), arch, parts)

    def _walk_folder(self, top: StrPath) -> Walk:
        """The installed walk with each archive in it (a regular file named like one) listed as the folder
        it packs (``run.tar.gz!``) and walked there, its own nested archives one level; one refused is
        listed as a file (``x.tar.gz!``) whose stat says why."""
        for dirpath, dirnames, filenames in self.base.walk(top):
            trees, refused = [], []
            for name in filenames:
                if archives.is_archive_name(name):
                    try:
                        self.archive(os.path.join(dirpath, name))
                        trees.append(name + archives.MARK)
                    except archives.ArchiveRefused:
                        refused.append(name + archives.MARK)
                    except OSError:
                        pass   # not a regular file: listed as it is
            if not trees and not refused:
                yield dirpath, dirnames, filenames
                continue
            packed = {n[:-1] for n in trees + refused}
            shown = dirnames + trees
            yield dirpath, shown, [n for n in filenames if n not in packed] + refused
            dirnames[:] = [d for d in shown if not d.endswith(archives.MARK)]   # the caller's choice kept
            for d in shown:
                if d.endswith(archives.MARK):
                    yield from self._walk(os.path.join(dirpath, d), self.archive(os.path.join(dirpath, d[:-1])), ())

    def _walk(self, top: str, arch: archives.Archive, parts: archives.Parts) -> Walk:
        dirnames, filenames = [], []
        for name in sorted(arch.dirs.get(parts, ())):
            here = (*parts, name)
            if here in arch.dirs:
                dirnames.append(name)
            elif archives.is_archive_name(name) and not arch.nested:
                try:
                    arch.nested_archive(here)
                    dirnames.append(name + archives.MARK)
                except archives.ArchiveRefused:
                    filenames.append(name + archives.MARK)   # looked at, it says why
            else:
                filenames.append(name)
        yield top, dirnames, filenames
        for d in dirnames:
            sub = os.path.join(top, d)
            if d.endswith(archives.MARK) and (*parts, d[:-1]) in arch.files:
                yield from self._walk(sub, arch.nested_archive((*parts, d[:-1])), ())
            else:
                yield from self._walk(sub, arch, (*parts, d))

    def glob(self, pattern: str) -> list[str]:
        return self.base.glob(pattern)

    def resolve(self, path: StrPath) -> Path:
        got = archives.split(path)
        if got is None:
            return self.base.resolve(path)
        real, parts = got
        base = self.base.resolve(real)
        return base.with_name(base.name + archives.MARK).joinpath(*parts)

    def scannable(self, path: StrPath) -> StrPath | IO[bytes]:
        if archives.split(path) is None:
            return self.base.scannable(path)
        with self.open(path) as fh:
            return io.BytesIO(fh.read())


_OVER: weakref.WeakKeyDictionary[object, ArchiveFiles] = weakref.WeakKeyDictionary()
_OVER_LOCK = threading.Lock()


def over(base: Files) -> ArchiveFiles:
    """``base`` with archives read as directories: one per installed files, so its listings are kept as
    long as they are (one MCP call's confined files, or the process's own)."""
    with _OVER_LOCK:
        got = _OVER.get(base)
        if got is None:
            got = _OVER[base] = ArchiveFiles(base)
        return got


_LOCAL = LocalFiles()
_FILES: contextvars.ContextVar[Files | None] = contextvars.ContextVar("diag_input_files", default=None)


def _files() -> Files:
    """The installed files, with archives read as directories in front of them (:mod:`diag.parsers.archives`)."""
    return over(_FILES.get() or _LOCAL)


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
    if archives.is_archive_name(path.name):
        try:
            if stat_module.S_ISREG(_files().stat(path).st_mode):
                return path.with_name(path.name + archives.MARK)
        except OSError:
            pass
    return path
