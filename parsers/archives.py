"""Runs packed as archives (``.tar.gz``/``.tgz``/``.tar``/``.zip``), read in place: never unpacked to disk.

An archive named on the command line is read as a directory: ``run.tar.gz!`` is its tree, and
``run.tar.gz!/logs/x_decode_w0.out`` one of its members. :class:`diag.parsers.inputs.ArchiveFiles` puts
these virtual paths in front of the installed files (the operating system's, or MCP's confined ones), so
discovery, classification, parsing, replay and the index read members through the same calls as files,
and the archive itself is opened, bounded and counted as every input is.

The members are listed once (a bounded index in memory: names, sizes, where each one's bytes start);
a member is read by decompressing the archive up to it (small members are kept, so a file read several
times is decompressed once). An archive inside an archive (a CI artifact ``.zip`` holding
``server_logs.tar.gz``) is read the same way, one level deep.

An archive is refused whole, with one line, when a member is named by an absolute path or with ``..``,
a link leads outside it, a member declares more than :data:`MAX_MEMBER_BYTES`, all of them more than
:data:`MAX_TOTAL_BYTES`, there are more than :data:`MAX_MEMBERS`, or it inflates more than
:data:`MAX_RATIO` times (a zip bomb): none of these is a log archive a CI system writes.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import lzma
import math
import os
import stat
import tarfile
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
MARK = "!"                      # run.tar.gz! is the archive's tree
MAX_MEMBERS = 100_000
MAX_MEMBER_BYTES = 4 << 30      # declared, per member
MAX_TOTAL_BYTES = 16 << 30      # declared, all members
MAX_RATIO = 200                 # inflated bytes per compressed byte, judged beyond RATIO_FLOOR
RATIO_FLOOR = 1 << 20
MAX_NESTED_BYTES = 256 << 20    # an archive inside an archive is held in memory to be read
KEEP_MEMBER_BYTES = 32 << 20    # members up to this size are kept once read ...
KEEP_TOTAL_BYTES = 256 << 20    # ... up to this much per archive
Parts = tuple[str, ...]


class ArchiveRefused(OSError):
    """An archive diag does not read (a hostile or broken one): its one line is the strerror."""

    def __init__(self, reason: str) -> None:
        super().__init__(errno.EINVAL, reason)


def is_archive_name(name: str) -> bool:
    return name.lower().endswith(SUFFIXES)


@dataclass
class Member:
    parts: Parts
    size: int
    mtime: float
    ino: int
    offset: int = 0                         # tar: where its bytes start in the inflated stream
    zinfo: zipfile.ZipInfo | None = None    # zip: its entry


@dataclass
class Archive:
    """One archive's members, listed once; ``opener`` gives its raw bytes (seekable) each time it is read."""

    label: str
    opener: Callable[[], IO[bytes]]
    nested: bool = False
    files: dict[Parts, Member] = field(default_factory=dict)
    dirs: dict[Parts, set[str]] = field(default_factory=lambda: {(): set()})
    inner: dict[Parts, Archive | ArchiveRefused] = field(default_factory=dict)
    kept: OrderedDict[Parts, bytes] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # ------------------------------------------------------------ listing
    def refuse(self, why: str) -> ArchiveRefused:
        return ArchiveRefused(f"refused archive {self.label}: {why} (nothing in it is read)")

    def list(self) -> Archive:
        try:
            with self.opener() as raw:
                head = raw.read(4)
                raw.seek(0)
                if head[:4] == b"PK\x03\x04" or head[:4] == b"PK\x05\x06":
                    self._list_zip(raw)
                else:
                    self._list_tar(raw)
        except ArchiveRefused:
            raise
        except (tarfile.TarError, zipfile.BadZipFile, EOFError, lzma.LZMAError, OSError, ValueError) as e:
            raise ArchiveRefused(f"not a readable archive: {self.label} ({e})") from None
        return self

    def _add(self, name: str, size: int, mtime: float, **where: object) -> Member | None:
        """A file member by its archive name, checked; None for a name that is only its root."""
        parts = self._parts(name)
        if not parts:
            return None
        if len(self.files) >= MAX_MEMBERS:
            raise self.refuse(f"more than {MAX_MEMBERS:,} members")
        if size > MAX_MEMBER_BYTES:
            raise self.refuse(f"member {name} declares {size:,} bytes (at most {MAX_MEMBER_BYTES:,})")
        total = sum(m.size for m in self.files.values()) + size
        if total > MAX_TOTAL_BYTES:
            raise self.refuse(f"its members declare more than {MAX_TOTAL_BYTES:,} bytes")
        m = Member(parts, size, mtime, len(self.files) + 1, **where)  # type: ignore[arg-type]
        self.files[parts] = m
        self._dir(parts[:-1]).add(parts[-1])
        return m

    def _dir(self, parts: Parts) -> set[str]:
        for k in range(len(parts)):
            self.dirs.setdefault(parts[:k], set()).add(parts[k])
        return self.dirs.setdefault(parts, set())

    def _parts(self, name: str) -> Parts:
        posix = name.replace("\\", "/")
        if posix.startswith("/") or (len(posix) > 1 and posix[1] == ":"):
            raise self.refuse(f"member {name} has an absolute path")
        parts = tuple(p for p in PurePosixPath(posix).parts if p not in ("", "."))
        if ".." in parts:
            raise self.refuse(f"member {name} leads outside it (..)")
        return parts

    def _link(self, name: str, target: str) -> Parts:
        """Where a link member points, inside the archive (refused when it leads out)."""
        if target.replace("\\", "/").startswith("/"):
            raise self.refuse(f"link {name} -> {target} leads outside it")
        out: list[str] = list(self._parts(name)[:-1])
        for p in PurePosixPath(target.replace("\\", "/")).parts:
            if p == "..":
                if not out:
                    raise self.refuse(f"link {name} -> {target} leads outside it")
                out.pop()
            elif p not in ("", "."):
                out.append(p)
        return tuple(out)

    def _list_tar(self, raw: IO[bytes]) -> None:
        stream = _inflated(raw)
        links: list[tuple[tarfile.TarInfo, Parts]] = []
        with tarfile.open(fileobj=stream, mode="r:") as tf:
            for ti in tf:
                self._ratio(raw, ti.offset_data)
                if ti.isdir():
                    self._dir(self._parts(ti.name))
                elif ti.issym() or ti.islnk():   # a hard link names its target from the archive's root
                    to = self._link(ti.name, ti.linkname) if ti.issym() else self._parts(ti.linkname)
                    links.append((ti, to))
                elif ti.isreg() and ti.sparse is None:   # devices, FIFOs, sparse files: not listed
                    self._add(ti.name, ti.size, ti.mtime, offset=ti.offset_data)
            self._ratio(raw, stream.tell())
        self._resolve_links([(ti.name, ti.mtime, to) for ti, to in links])

    def _ratio(self, raw: IO[bytes], inflated: int) -> None:
        """Refused once the tar stream read so far (``inflated`` bytes) came from too few archive bytes."""
        read = raw.tell()
        if inflated > RATIO_FLOOR and inflated > MAX_RATIO * max(read, 1):
            raise self.refuse(f"it inflates more than {MAX_RATIO} times (a zip bomb)")

    def _list_zip(self, raw: IO[bytes]) -> None:
        links = []
        with zipfile.ZipFile(raw) as zf:
            for zi in zf.infolist():
                if zi.is_dir():
                    self._dir(self._parts(zi.filename))
                elif stat.S_ISLNK(zi.external_attr >> 16):
                    target = zf.open(zi).read(4096).decode("utf-8", errors="replace")
                    links.append((zi.filename, 0.0, self._link(zi.filename, target)))
                else:
                    if zi.file_size > RATIO_FLOOR and zi.file_size > MAX_RATIO * max(zi.compress_size, 1):
                        raise self.refuse(f"member {zi.filename} inflates {zi.file_size:,} bytes from "
                                          f"{zi.compress_size:,} (more than {MAX_RATIO} times: a zip bomb)")
                    self._add(zi.filename, zi.file_size, _zip_time(zi), zinfo=zi)
        self._resolve_links(links)

    def _resolve_links(self, links: list[tuple[str, float, Parts]]) -> None:
        """Links to a file member read as that member; links to folders or to nothing are not listed."""
        for name, _, to in links:
            target = self.files.get(to)
            if target is not None:
                m = self._add(name, target.size, target.mtime, offset=target.offset, zinfo=target.zinfo)
                if m is not None:
                    m.ino = target.ino

    # ------------------------------------------------------------ reading
    def open(self, m: Member) -> IO[bytes]:
        with self.lock:
            if m.parts in self.kept:
                self.kept.move_to_end(m.parts)
                return io.BytesIO(self.kept[m.parts])
        fh = self._stream(m)
        if m.size > KEEP_MEMBER_BYTES:
            return fh
        with fh:
            data = fh.read()
        with self.lock:
            self.kept[m.parts] = data
            while sum(map(len, self.kept.values())) > KEEP_TOTAL_BYTES:
                self.kept.popitem(last=False)
        return io.BytesIO(data)

    def _stream(self, m: Member) -> IO[bytes]:
        raw = self.opener()
        try:
            if m.zinfo is not None:
                zf = zipfile.ZipFile(raw)
                return io.BufferedReader(_Window(zf.open(m.zinfo), 0, m.size, (zf, raw)))
            stream = _inflated(raw)
            return io.BufferedReader(_Window(stream, m.offset, m.size, (stream, raw)))
        except BaseException:
            raw.close()
            raise

    def nested_archive(self, parts: Parts) -> Archive:
        """The archive member ``parts`` read as an archive (one level deep), or ArchiveRefused."""
        got = self.inner.get(parts)
        if got is None:
            m = self.files[parts]
            label = f"{self.label}{MARK}/{'/'.join(parts)}"
            if self.nested:
                got = ArchiveRefused(f"{label}: an archive two levels deep (not read)")
            elif m.size > MAX_NESTED_BYTES:
                got = ArchiveRefused(f"refused archive {label}: more than {MAX_NESTED_BYTES:,} bytes "
                                     "inside an archive (unpack the outer one)")
            else:
                with self.open(m) as fh:
                    data = fh.read()
                try:
                    got = Archive(label, lambda: io.BytesIO(data), nested=True).list()
                except ArchiveRefused as e:
                    got = e
            self.inner[parts] = got
        if isinstance(got, ArchiveRefused):
            raise got
        return got


def _zip_time(zi: zipfile.ZipInfo) -> float:
    import datetime as dt

    try:
        return dt.datetime(*zi.date_time).timestamp()
    except ValueError:
        return 0.0


def _inflated(raw: IO[bytes]) -> IO[bytes]:
    """The archive's tar stream: gzip, bzip2 and xz inflated as they are read (seekable, never on disk)."""
    head = raw.read(6)
    raw.seek(0)
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if head[:3] == b"BZh":
        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if head == b"\xfd7zXZ\x00":
        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    return raw


class _Window(io.RawIOBase):
    """``size`` bytes of ``stream`` from ``start``: a member read without reading past it."""

    def __init__(self, stream: IO[bytes], start: int, size: int, owned: tuple[object, ...]) -> None:
        self.stream, self.start, self.size, self.owned, self.pos = stream, start, size, owned, 0
        self.at: int | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buf) -> int:  # type: ignore[no-untyped-def]
        n = min(len(buf), self.size - self.pos)
        if n <= 0:
            return 0
        if self.at != self.pos:
            self.stream.seek(self.start + self.pos)
        data = self.stream.read(n)
        buf[: len(data)] = data
        self.pos += len(data)
        self.at = self.pos
        return len(data)

    def close(self) -> None:
        if not self.closed:
            for o in (self.stream, *self.owned):
                o.close()  # type: ignore[attr-defined]
        super().close()


# ------------------------------------------------------------------ virtual paths (diag.parsers.inputs)
def split(path: str | os.PathLike[str]) -> tuple[str, Parts] | None:
    """``(archive file, member parts)`` of a path inside an archive (``x.tar.gz!/logs/a.out``), else None."""
    s = os.fspath(path)
    if MARK not in s:
        return None
    parts = Path(s).parts
    for k, p in enumerate(parts):
        if p.endswith(MARK) and is_archive_name(p[:-1]):
            return str(Path(*parts[:k], p[:-1])), tuple(q for q in parts[k + 1:] if q not in ("", "."))
    return None


DIR_MODE = stat.S_IFDIR | 0o555
FILE_MODE = stat.S_IFREG | 0o444


def stat_result(mode: int, size: int, mtime: float, ino: int) -> os.stat_result:
    """A member's (or folder's) stat, as an unpacked copy's would read."""
    frac, whole = math.modf(mtime)   # the nanoseconds an unpacked copy gets (os.utime floors the fraction)
    ns = int(whole) * 10**9 + math.floor(frac * 1e9)
    return os.stat_result((mode, ino, 0, 1, 0, 0, size, int(mtime), int(mtime), int(mtime),
                           mtime, mtime, mtime, ns, ns, ns))
