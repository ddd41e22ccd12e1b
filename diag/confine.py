"""What one ``diag mcp`` tool call may read: files under the server's roots only, checked when each is
opened (not before), at most ``max_bytes`` of them and for at most ``max_seconds``.

The guarantee. A tool call runs the CLI's own pipeline with :class:`Confined` installed as its files
(:func:`diag.parsers.inputs.reading_through`), and the pipeline opens, stats, lists and globs its inputs
only through :mod:`diag.parsers.inputs`. Each root was opened once, as a directory, when the server
started. A path is walked from its root's descriptor one component at a time: each directory opened with
``O_DIRECTORY|O_NOFOLLOW`` relative to the one before (openat), the file itself with ``O_NOFOLLOW``. A
symbolic link met on the way is read (readlinkat) and its target walked the same way: a link that stays
under a root is followed, one that leads out of every root, like a ``..`` above a root, raises
:class:`~diag.parsers.inputs.Refused` and the call answers with that one line. The kernel is never handed a path to resolve,
so a component swapped for a link after diag looked at it changes nothing: the open meets the link
itself (and walks it, or refuses), or the directory diag already holds. Hence no byte of a file outside
the roots, and no listing of a directory outside them, reaches a tool's answer, whatever changes under
the roots while the call runs. Polars is handed the bytes of a Parquet file read this way, never its path.

Outside the guarantee: the server's own settings file (``--config``, or the nearest diag.toml of its
working directory) and diag's package data, which the operator chose, not the agent; a hard link under a
root is a file under the root; a ``--prom`` URL is fetched from the network (bounded by the deadline).

The limits. Every byte read from a file counts against ``max_bytes`` for the whole call (all its threads);
the read that goes over raises :class:`OverLimit` naming the file. ``max_seconds`` is a deadline checked
at every read and every path step here; the server also answers at the deadline while the call is still
computing (:mod:`diag.mcp_server`), and the call's thread then stops at its next read.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import io
import os
import secrets
import stat
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from diag.parsers.inputs import ReadStopped, Refused, StrPath, Walk
from diag.rules.present import number, seconds

MAX_LINKS = 40   # symbolic links followed in one path (the kernel's own bound)
DIR = os.O_RDONLY | os.O_DIRECTORY


class OverLimit(ReadStopped):
    """A call that reads more bytes, or takes longer, than the server allows one call."""


def over_time(max_seconds: float) -> str:
    return f"takes more than {seconds(max_seconds)} s (limit: diag mcp --max-seconds {seconds(max_seconds)})"


def over_bytes(path: StrPath, max_bytes: int) -> str:
    return (f"{path}: reads more than {number(max_bytes)} bytes in this call "
            f"(limit: diag mcp --max-read-bytes {number(max_bytes)})")


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_seconds: float


@dataclass(frozen=True)
class Roots:
    """The directories a server reads, resolved, each held open as a directory for the server's life."""

    paths: tuple[Path, ...]
    fds: tuple[int, ...]

    @classmethod
    def open(cls, paths: Iterable[StrPath]) -> Roots:
        resolved = tuple(dict.fromkeys(Path(p).resolve() for p in paths))
        return cls(resolved, tuple(os.open(p, DIR | os.O_CLOEXEC) for p in resolved))

    def refuse(self, path: StrPath) -> Refused:
        """A path that is, or leads, outside every root."""
        return Refused(f"{path}: outside the directories this server reads ({', '.join(map(str, self.paths))}); "
                       "start diag mcp with --root DIR to add one")

    def under(self, path: Path) -> tuple[int, list[str]] | None:
        """The root ``path`` names lexically (the deepest, roots may nest) and the components after it."""
        inside = [i for i, r in enumerate(self.paths) if path.parts[: len(r.parts)] == r.parts]
        if not inside:
            return None
        k = max(inside, key=lambda i: len(self.paths[i].parts))
        return k, list(path.parts[len(self.paths[k].parts):])

    def create(self, folder: str, prefix: str, suffix: str) -> tuple[int, Path]:
        """A new file ``FOLDER/PREFIX…SUFFIX`` under the first root, made (the folder too) without following
        a link: its descriptor, open for writing, and its path."""
        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, dir_fd=self.fds[0])
        into = os.open(folder, DIR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fds[0])
        try:
            while True:
                name = f"{prefix}{secrets.token_hex(4)}{suffix}"
                with contextlib.suppress(FileExistsError):
                    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                    return os.open(name, flags, 0o600, dir_fd=into), self.paths[0] / folder / name
        finally:
            os.close(into)


@dataclass
class _Spot:
    """Where a walk ended: ``fd`` the directory holding ``name`` (the caller closes it), or, with no
    name, the directory the path names itself; ``st`` the entry's lstat; ``real`` its path."""

    fd: int
    name: str | None
    real: Path
    st: os.stat_result | None = None


def _error(code: int | None, path: StrPath) -> OSError:
    """The OSError of ``code`` naming the path the pipeline asked for (not the component that failed)."""
    code = code or errno.EIO
    return OSError(code, os.strerror(code), os.fspath(path))


def _magic(part: str) -> bool:
    return any(c in part for c in "*?[")


class Confined:
    """The files of one tool call: under ``roots`` only, resolved component by component from the roots'
    descriptors, within ``limits`` (its byte count and deadline start when it is made)."""

    def __init__(self, roots: Roots, limits: Limits) -> None:
        self.roots, self.limits = roots, limits
        self.deadline = time.monotonic() + limits.max_seconds
        self.read = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------ the limits
    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            raise OverLimit(over_time(self.limits.max_seconds))

    def count(self, n: int, path: str) -> None:
        with self._lock:
            self.read += n
            over = self.read > self.limits.max_bytes
        if over:
            raise OverLimit(over_bytes(path, self.limits.max_bytes))

    # ------------------------------------------------------------ the walk
    def _root_of(self, path: Path, asked: StrPath) -> tuple[int, list[str]]:
        found = self.roots.under(path if path.is_absolute() else Path.cwd() / path)
        if found is None:
            raise self.roots.refuse(asked)
        return found

    def _locate(self, path: StrPath, *, follow: bool, strict: bool = True) -> _Spot:
        """Walk ``path`` from its root, each directory opened from the one before without following a link;
        a link met is read and its target walked on (the last component's only with ``follow``). Not
        ``strict``: what does not exist is taken as written, as ``Path.resolve`` does."""
        self.tick()
        k, rest = self._root_of(Path(os.fspath(path)), path)
        todo, chain, names, links = deque(rest), [os.dup(self.roots.fds[k])], [], 0
        try:
            while todo:
                part = todo.popleft()
                if part in ("", "."):
                    continue
                if part == "..":
                    if not names:
                        raise self.roots.refuse(path)   # above its root
                    os.close(chain.pop())
                    names.pop()
                    continue
                try:
                    st = os.stat(part, dir_fd=chain[-1], follow_symlinks=False)
                except FileNotFoundError:
                    if strict:
                        raise _error(errno.ENOENT, path) from None
                    return _Spot(chain.pop(), None, self._as_written(k, names, [part, *todo], path))
                except OSError as e:
                    raise _error(e.errno, path) from None
                if stat.S_ISLNK(st.st_mode) and (follow or todo):
                    links += 1
                    if links > MAX_LINKS:
                        raise _error(errno.ELOOP, path)
                    try:
                        target = Path(os.readlink(part, dir_fd=chain[-1]))
                    except OSError as e:
                        if e.errno != errno.EINVAL:
                            raise _error(e.errno, path) from None
                        todo.appendleft(part)   # no longer a link: look again
                        continue
                    if target.is_absolute():    # walked from the root it names
                        k, parts = self._root_of(target, path)
                        for fd in chain:
                            os.close(fd)
                        chain, names = [os.dup(self.roots.fds[k])], []
                    else:
                        parts = list(target.parts)
                    todo.extendleft(reversed(parts))
                    continue
                if not todo:
                    return _Spot(chain.pop(), part, self.roots.paths[k].joinpath(*names, part), st)
                try:
                    chain.append(os.open(part, DIR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=chain[-1]))
                except OSError as e:
                    links += 1
                    if e.errno != errno.ELOOP or links > MAX_LINKS:
                        raise _error(e.errno, path) from None
                    todo.appendleft(part)   # a link since it was looked at: look again
                    continue
                names.append(part)
            return _Spot(chain.pop(), None, self.roots.paths[k].joinpath(*names))
        finally:
            for fd in chain:
                os.close(fd)

    def _as_written(self, k: int, names: list[str], rest: list[str], asked: StrPath) -> Path:
        for part in rest:
            if part == "..":
                if not names:
                    raise self.roots.refuse(asked)
                names = names[:-1]
            elif part not in ("", "."):
                names = [*names, part]
        return self.roots.paths[k].joinpath(*names)

    def _open(self, path: StrPath, flags: int) -> int:
        """A descriptor of ``path`` opened with ``flags`` where the walk ended, never through a link."""
        for _ in range(MAX_LINKS):
            spot = self._locate(path, follow=True)
            try:
                if spot.name is None:
                    if not flags & os.O_DIRECTORY:
                        raise _error(errno.EISDIR, path)
                    return os.dup(spot.fd)
                return os.open(spot.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=spot.fd)
            except OSError as e:
                if e.errno != errno.ELOOP:   # ELOOP: a link since the walk looked at it: walk again
                    raise _error(e.errno, path) from None
            finally:
                os.close(spot.fd)
        raise _error(errno.ELOOP, path)

    # ------------------------------------------------------------ diag.parsers.inputs.Files
    def open(self, path: StrPath) -> IO[bytes]:
        fd = self._open(path, os.O_RDONLY | os.O_NONBLOCK)   # never blocks on a FIFO
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):   # swapped in since the pipeline looked: not read
            os.close(fd)
            raise _error(errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL, path)
        return io.BufferedReader(_Metered(fd, os.fspath(path), self))

    def stat(self, path: StrPath, *, follow_symlinks: bool = True) -> os.stat_result:
        spot = self._locate(path, follow=follow_symlinks)
        try:
            return spot.st if spot.st is not None else os.fstat(spot.fd)
        finally:
            os.close(spot.fd)

    def resolve(self, path: StrPath) -> Path:
        spot = self._locate(path, follow=True, strict=False)
        os.close(spot.fd)
        return spot.real

    def scannable(self, path: StrPath) -> IO[bytes]:
        with self.open(path) as fh:
            return io.BytesIO(fh.read())

    def listdir(self, path: StrPath) -> list[str]:
        fd = self._open(path, DIR)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def walk(self, top: StrPath) -> Walk:
        try:
            fd = self._open(top, DIR)
        except OSError:
            return   # as os.walk: a top that cannot be listed yields nothing
        yield from self._walk(os.fspath(top), fd)

    def _walk(self, dirpath: str, fd: int) -> Walk:
        """``os.walk`` over a held directory: subdirectories opened from it, a linked one listed in the
        directory names (by what it leads to, under the roots) and not entered."""
        try:
            self.tick()
            try:
                with os.scandir(fd) as it:
                    entries = list(it)
            except OSError:
                return
            dirs, files, linked = [], [], set()
            for e in entries:
                if e.is_symlink():
                    try:
                        to_dir = stat.S_ISDIR(self.stat(os.path.join(dirpath, e.name)).st_mode)
                    except OSError:
                        to_dir = False   # a broken link is a file name to os.walk
                    (dirs if to_dir else files).append(e.name)
                    if to_dir:
                        linked.add(e.name)
                else:
                    (dirs if e.is_dir(follow_symlinks=False) else files).append(e.name)
            yield dirpath, dirs, files
            for name in dirs:   # what the caller left in them (topdown)
                if name in linked:
                    continue
                try:
                    sub = os.open(name, DIR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError:
                    continue   # gone, or a link since it was listed
                yield from self._walk(os.path.join(dirpath, name), sub)
        finally:
            os.close(fd)

    def glob(self, pattern: str) -> list[str]:
        """``glob.glob`` (not recursive; names starting with a dot only for a pattern that does), each
        directory listed through the roots."""
        parts = Path(pattern).parts
        first = next((i for i, p in enumerate(parts) if _magic(p)), len(parts))
        found = [Path(*parts[:first])]
        for part in parts[first:]:
            if not _magic(part):
                found = [base / part for base in found]
                continue
            matched = []
            for base in found:
                try:
                    names = self.listdir(base)
                except OSError:
                    continue
                matched += [base / n for n in sorted(fnmatch.filter(names, part))
                            if part.startswith(".") or not n.startswith(".")]
            found = matched
        return [str(p) for p in found if self._lexists(p)]

    def _lexists(self, path: Path) -> bool:
        try:
            self.stat(path, follow_symlinks=False)
            return True
        except OSError:
            return False


class _Metered(io.RawIOBase):
    """A file's descriptor read with every byte counted, and the deadline checked, by its call."""

    def __init__(self, fd: int, path: str, files: Confined) -> None:
        self.file, self.path, self.files = io.FileIO(fd, "rb"), path, files

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        self.files.tick()
        n = self.file.readinto(buffer) or 0
        self.files.count(n, self.path)
        return n

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self.file.seek(offset, whence)

    def tell(self) -> int:
        return self.file.tell()

    def fileno(self) -> int:   # the descriptor itself: a reader's shared lock on an index generation
        return self.file.fileno()

    def close(self) -> None:
        self.file.close()
        super().close()
