"""Line accounting: how many lines a log has, how many were record candidates, and how many were
noise (per category) or carried ANSI escapes. Lines, candidates and ANSI lines are counted on every
line; noise is classified on every line of a small log and on a fixed sample of the lines of a large
one (:func:`classified_spans`)."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass, field, fields
from datetime import datetime
from types import MappingProxyType
from typing import Any

import polars as pl

from .noise import NOISE

ANSI_PATTERN = r"\x1b\[|\^\[\[|#033\[|\[[0-9]{1,3}(?:;[0-9]{1,3})*m"
NOISE_NAMES = tuple(f.emits for f in NOISE)


# Noise is classified per line by regexes, which costs more than finding the records. On a large log
# it is classified on a sample of lines, fixed by line number (so every path and every block size
# samples the same lines): the first CLASSIFY_HEAD lines, then the first CLASSIFY_WINDOW lines of every
# CLASSIFY_EVERY. The noise counts of the rest are estimated from the sample (``exact`` false).
CLASSIFY_HEAD = 1 << 16     # 65,536 lines, then 16,384 of every 262,144 (6.25 %)
CLASSIFY_WINDOW = 1 << 14
CLASSIFY_EVERY = 1 << 18


def classified_spans(first_line: int, n: int) -> list[tuple[int, int]]:
    """Row spans ``[a, b)`` of a block of ``n`` lines starting at line ``first_line`` whose noise is
    classified (the whole block, for the first lines of a file and for every small log)."""
    spans: list[tuple[int, int]] = []
    end = first_line + n                        # line numbers [first_line, end)
    if first_line <= CLASSIFY_HEAD:
        spans.append((0, min(n, CLASSIFY_HEAD + 1 - first_line)))
    k = max(first_line - 1, CLASSIFY_HEAD) // CLASSIFY_EVERY
    while k * CLASSIFY_EVERY + 1 < end:
        a = max(k * CLASSIFY_EVERY + 1, first_line, CLASSIFY_HEAD + 1)
        b = min(k * CLASSIFY_EVERY + 1 + CLASSIFY_WINDOW, end)
        if a < b:
            spans.append((a - first_line, b - first_line))
        k += 1
    return spans


@dataclass
class Counts:
    """Per-source line accounting. ``lines``, ``candidates`` and ``ansi_lines`` are exact; ``noise``
    counts the classified lines, all but ``unclassified`` of them: :meth:`estimate` scales it up."""

    lines: int = 0
    candidates: int = 0
    ansi_lines: int = 0
    noise: dict[str, int] = field(default_factory=lambda: dict.fromkeys(NOISE_NAMES, 0))
    unclassified: int = 0
    last: tuple[str, bool] | None = field(default=None, repr=False, compare=False)  # a block's last line
    last_ts: datetime | None = None   # the time of the last stamped line, noise included: the log's clock
    _frozen: bool = field(default=False, init=False, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise FrozenInstanceError(f"cannot assign to {name!r}: these counts are a run's, read-only")
        object.__setattr__(self, name, value)

    def frozen(self) -> Counts:
        """A read-only copy (noise a read-only mapping): the counts as of now, in a Run."""
        if self._frozen:
            return self
        copy = Counts(**{f.name: getattr(self, f.name) for f in fields(self) if f.init})
        object.__setattr__(copy, "noise", MappingProxyType(dict(self.noise)))
        object.__setattr__(copy, "_frozen", True)
        return copy

    @property
    def noise_lines(self) -> int:
        return sum(self.noise.values())

    @property
    def exact(self) -> bool:
        """Every line's noise was classified."""
        return self.unclassified == 0

    def estimate(self) -> Counts:
        """The counts with noise scaled from the classified lines to all of them."""
        seen = self.lines - self.unclassified
        if self.exact or seen <= 0:
            return self
        f = self.lines / seen
        return Counts(self.lines, self.candidates, self.ansi_lines,
                      {k: round(v * f) for k, v in self.noise.items()}, self.unclassified, last_ts=self.last_ts)

    def add(self, other: Counts) -> None:
        self.lines += other.lines
        self.candidates += other.candidates
        self.ansi_lines += other.ansi_lines
        self.unclassified += other.unclassified
        self.last_ts = other.last_ts or self.last_ts   # the later lines' stamp, when they have one
        for k, v in other.noise.items():
            self.noise[k] = self.noise.get(k, 0) + v


# A progress bar (the last noise category) holds "%" or ends in "/s]" / "/it]": its regex, the only
# costly one, runs on those lines only.
_PROGRESS_LITERALS = ["%", "/s]", "/it]"]


def ansi_lines(lines: pl.Series) -> int:
    """Lines the ANSI pattern matches (every line: the bulk path counts them from the bytes)."""
    return int(lines.str.contains(ANSI_PATTERN).sum())


def classify_span(df: pl.DataFrame, counts: Counts) -> None:
    """Noise per category of a span of lines: a non-candidate line counts for the first category it
    matches (the progress-bar regex, the costly one, only on lines that may be one); so does a candidate
    read only for its level (an ERROR or glog E line, for its log site: parsers.sites), which is still noise."""
    from .lineparser import FORMAT_TRIGGER_PATTERN, site_literals

    col = pl.col("line")
    _count_noise(df.filter(~pl.col("cand"))[["line"]], counts)
    # the level literals first (one literal scan), the format triggers' regex only on the few lines holding one
    level_only = df.filter(pl.col("cand") & col.str.contains_any(list(site_literals()))).filter(
        ~col.str.contains(FORMAT_TRIGGER_PATTERN))
    if level_only.height:
        _count_noise(level_only[["line"]], counts)


def _count_noise(df: pl.DataFrame, counts: Counts) -> None:
    col = pl.col("line")
    flags = df.select(col, *[col.str.contains(f.regex.pattern).alias(f"noise{i}")
                             for i, f in enumerate(NOISE[:-1])],
                      col.str.contains_any(_PROGRESS_LITERALS).alias("maybe_progress"))
    free = pl.lit(True)
    sums = []
    for i in range(len(NOISE) - 1):
        sums.append((free & pl.col(f"noise{i}")).sum().alias(str(i)))
        free = free & ~pl.col(f"noise{i}")
    row = flags.select(*sums).row(0)
    for i, v in enumerate(row):
        counts.noise[NOISE[i].emits] += int(v)
    rest = flags.filter(free & pl.col("maybe_progress"))["line"]
    if rest.len():
        counts.noise[NOISE[-1].emits] += int(rest.str.contains(NOISE[-1].regex.pattern).sum())
