"""The index folder on disk: one writer at a time, and every reader sees one whole generation.

    DIR/gen-000007/              one whole dataset: index.json, the tables, series/, requests/
    DIR/current -> gen-000007    the generation readers take: a link, replaced in one step
    DIR/index.json, DIR/runs.parquet, ..., DIR/series -> current/...   the stable names, links through current
    DIR/.lock                    the writers' lock; the holder writes its pid and host in it
    DIR/.gen-000008.tmp-PID/     a generation being written, renamed to gen-000008 once whole

A writer (:func:`writing`) holds an exclusive ``flock`` on ``DIR/.lock`` from before it reads the previous
generation until the new one is in place. The OS drops the lock when the process ends, however it ends:
a killed writer leaves no stale lock, only a ``.*.tmp-PID`` entry that the next writer deletes. A reader
(:func:`hold`) resolves ``current`` once and holds a shared ``flock`` on that generation's ``index.json``
while it reads; a writer deletes only generations that are neither current nor held. A folder written by
an earlier diag (the tables directly in DIR) reads as one generation.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from diag.parsers import inputs
from diag.rules.present import number

from .dataset import MANIFEST

CURRENT = "current"
LOCK = ".lock"
GENERATION = re.compile(r"gen-(\d+)\Z")
LEFTOVER = re.compile(r"\..+\.(tmp|old)-\d+\Z")   # written aside or set aside for deletion by a writer
NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)   # a filesystem without flock


class StoreError(ValueError):
    """The index folder cannot be written now, or read whole (one line)."""


# ------------------------------------------------------------------ readers
def generation(into: Path) -> Path | None:
    """The folder of the current generation of the index in ``into``: where ``current`` points, ``into``
    itself for an index of an earlier diag (or a generation named directly); None without an index."""
    link = into / CURRENT
    try:
        if stat.S_ISLNK(inputs.lstat(link).st_mode):   # a sibling gen-N (an MCP call resolves it confined)
            return into / inputs.resolve(link).name
    except FileNotFoundError:
        pass
    try:
        return into if stat.S_ISREG(inputs.stat(into / MANIFEST).st_mode) else None
    except (FileNotFoundError, NotADirectoryError):
        return None


@contextlib.contextmanager
def hold(into: Path, attempts: int = 20) -> Iterator[Path]:
    """The current generation of the index in ``into``, held while the caller reads it (a shared lock on its
    index.json): no writer deletes it meanwhile. Raises StoreError when there is none."""
    for _ in range(attempts):
        gen = generation(into)
        if gen is None:
            raise StoreError(f"{into}: no index here")
        try:
            fh = inputs.open_input(gen / MANIFEST)   # opened as every input is (confined under MCP)
        except FileNotFoundError:
            if generation(into) == gen:
                raise StoreError(f"{gen}: no {MANIFEST}: a broken index; run diag index again") from None
            continue  # replaced and deleted between the two steps: take the new one
        with fh:
            _flock(fh.fileno(), fcntl.LOCK_SH)
            if _unmoved(fh.fileno(), gen / MANIFEST):  # not deleted while this waited for the lock
                yield gen
                return
    raise StoreError(f"{into}: the index changed under each of {attempts} reads; read it again")


def _seconds(wait: float) -> str:
    """A --wait as the user gave it: ``600``, ``0``, ``2.5``."""
    return number(wait, 0 if wait == int(wait) else 1)


def _flock(fd: int, how: int) -> bool:
    """``flock``; False (unheld) on a filesystem without locks."""
    try:
        fcntl.flock(fd, how)
    except OSError as e:  # BlockingIOError (held, with LOCK_NB) goes on to the caller
        if e.errno in NO_LOCKS:
            return False
        raise
    return True


def _unmoved(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), inputs.stat(path))
    except FileNotFoundError:
        return False


# ------------------------------------------------------------------ the writer
@contextlib.contextmanager
def writing(into: Path, wait: float, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """The writers' lock of ``into`` (the folder made if need be), held until the block ends: at once, or
    after waiting up to ``wait`` seconds for the writer that holds it (``on_wait`` hears one line when the
    wait begins). Raises StoreError when that writer still holds it then, or the filesystem has no locks."""
    into.mkdir(parents=True, exist_ok=True)
    fd = os.open(into / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                if not _flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB):
                    raise StoreError(f"{into}: cannot lock it (this filesystem has no flock); "
                                     "give --into a folder on one that has")
                break
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreError(f"{into}: another diag index{_holder(fd)} is still writing it after "
                                     f"{_seconds(wait)} s (--wait)") from None
                if on_wait is not None:
                    on_wait(f"waiting for the other diag index{_holder(fd)} writing {into} (at most {_seconds(wait)} s)")
                    on_wait = None
                time.sleep(min(0.1, left))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def _holder(fd: int) -> str:
    """`` (pid N)`` / `` (pid N on HOST)`` of the writer holding the lock, when it wrote them."""
    pid, _, host = os.pread(fd, 300, 0).decode(errors="replace").strip().partition(" ")
    if not pid.isdigit():
        return ""
    return f" (pid {pid})" if host in ("", socket.gethostname()) else f" (pid {pid} on {host})"


def clean(into: Path) -> None:
    """Delete what no reader needs: what a killed writer left (``.*.tmp-PID``, ``.*.old-PID``) and the
    generations neither current nor held by a reader. Only under the writers' lock."""
    current = generation(into)
    for entry in sorted(into.iterdir()):
        if LEFTOVER.match(entry.name):
            _remove(entry)
        elif GENERATION.match(entry.name) and entry != current and not entry.is_symlink():
            _drop(entry)


def _drop(gen: Path) -> None:
    """A generation out of use: set aside under the writers' lock and its own (no reader waits on it
    then), deleted after; left for the next writer while a reader holds it."""
    aside = gen.with_name(f".{gen.name}.old-{os.getpid()}")
    try:
        fd = os.open(gen / MANIFEST, os.O_RDONLY)
    except FileNotFoundError:  # half deleted: nobody can hold it
        os.rename(gen, aside)
    else:
        try:
            _flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.rename(gen, aside)
        except BlockingIOError:
            return
        finally:
            os.close(fd)
    _remove(aside)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextlib.contextmanager
def staging(into: Path) -> Iterator[Path]:
    """A new, empty folder for the next generation (a dot folder: no reader looks into it), deleted when the
    block fails before :func:`publish` (a killed process leaves it to the next writer's :func:`clean`)."""
    number = 1 + max((int(m[1]) for p in into.iterdir() if (m := GENERATION.match(p.name))), default=0)
    staged = into / f".gen-{str(number).zfill(6)}.tmp-{os.getpid()}"   # a name, not a figure
    staged.mkdir()
    try:
        yield staged
    except BaseException:  # an error or Ctrl-C half-way: nothing of it stays
        _remove(staged)
        raise


def publish(into: Path, staged: Path, manifest: dict[str, Any]) -> Path:
    """The whole generation in ``staged`` becomes the current one: its ``index.json`` (``manifest`` and the
    generation's number) written last, the folder renamed to ``gen-N``, ``current`` pointed at it in one
    step and the stable names linked through ``current``. Returns the generation's folder."""
    name = staged.name[1:].partition(".")[0]
    manifest = {**manifest, "generation": int(name.removeprefix("gen-"))}
    (staged / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    gen = into / name
    os.rename(staged, gen)
    _link(into / CURRENT, name)
    for entry in sorted(gen.iterdir()):
        _link(into / entry.name, f"{CURRENT}/{entry.name}")
    return gen


def _link(path: Path, target: str) -> None:
    """``path`` a link to ``target``, replaced in one step (a new link renamed over the old one)."""
    if path.is_symlink() and os.readlink(path) == target:
        return
    if path.is_dir() and not path.is_symlink():  # a table folder of an earlier diag's index
        aside = path.with_name(f".{path.name}.old-{os.getpid()}")
        os.rename(path, aside)
        _remove(aside)
    fresh = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fresh.unlink(missing_ok=True)
    os.symlink(target, fresh)
    os.replace(fresh, path)


__all__ = ["CURRENT", "LOCK", "StoreError", "clean", "generation", "hold", "publish", "staging", "writing"]
