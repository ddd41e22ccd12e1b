"""A newline-aligned block's lines as polars splits them, without numpy or Hyperscan (those load only
for the large blocks the compiled prefilter takes: a small log's process never imports them)."""

from __future__ import annotations

import io

import polars as pl


def compressed_magic(block: bytes) -> bool:
    """polars' line reader inflates a buffer that starts like gzip, zlib or zstd data."""
    return block[:2] == b"\x1f\x8b" or block[:4] == b"\x28\xb5\x2f\xfd" or \
        (block[:1] == b"\x78" and block[1:2] in (b"\x01", b"\x5e", b"\x9c", b"\xda"))


def decode(block: bytes) -> str:
    return block.decode("utf-8", errors="replace")


def lines_frame(block: bytes) -> pl.LazyFrame:
    """A block's lines as ``scan_lines`` splits them (one ``\\r`` off each line end)."""
    if not compressed_magic(block):
        return pl.scan_lines(io.BytesIO(block))
    lines = decode(block).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return pl.LazyFrame({"line": [x.removesuffix("\r") for x in lines]}, schema={"line": pl.Utf8})


def split_lines(block: bytes) -> pl.Series:
    """Every line of a block (decoded as the streaming path does when it is not UTF-8)."""
    try:
        return lines_frame(block).collect()["line"]
    except pl.exceptions.ComputeError:
        return lines_frame(decode(block).encode("utf-8")).collect()["line"]
