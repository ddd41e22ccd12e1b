#!/usr/bin/env python3
"""Throughput and peak memory of diag's parsers against rg, lnav and a plain Python loop.

One run builds a large, realistic worker log (default ~1 GB) from the shipped sample logs, then
times every method on that same page-cached file, round-robin, several times, and prints a table,
the ratios of diag to the other tools and a correctness check (every method must find the same
number of stats records, and the same KV-usage sum). See bench/README.md for recorded results.

    .venv/bin/python bench/run.py                 # ~1 GB, 3 repetitions
    .venv/bin/python bench/run.py --size 200 --reps 1 --only bulk,pyloop,rg-kv
    .venv/bin/python bench/run.py --size 200 --profile   # cProfile of the bulk path, top functions
    .venv/bin/python bench/run.py --input noise --noise-size-mb 100 --reps 1   # the noise-heavy run dir

``--input noise`` swaps the input for an 8-file srt-slurm run directory (bench/noise_input.py: ~6 %
record lines, the rest Dynamo ANSI tracing, HTTP/access, NIXL/UCX chatter) and the methods for
``diag tail RUN_DIR --format json`` (and a once-only ``--export`` run that feeds the checks),
``lnav``, ``rg -c`` and a plain Python loop over all files (bench/noise_bench.py).

Every method runs as its own process, so its peak RSS comes from ``os.wait4`` (the kernel's
accounting of that child) and does not mix with the others. The Python methods also report their
in-process time (without interpreter start and imports) in the "work" column.
"""

from __future__ import annotations

import argparse
import bisect
import calendar
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples" / "runs"
# Steady-state decode logs (engines 0-3) of the scenarios that log stats: plain and always-ANSI vLLM
# lines, Dynamo request/selector noise, KV-transfer metrics, NIXL failures, torn and glued records.
SOURCES = ("healthy", "kv-exhaustion", "prefill-bound", "nixl-failures")
OUT_NAME = "gb200-r01-n01_decode_w0.out"   # a worker log name diag classifies (decode, w0)
START = calendar.timegm((2026, 3, 2, 0, 0, 0))  # the generated log's first stats interval (UTC)
STATS_LIT = "Avg prompt throughput"
KV_RG = r"GPU KV cache usage: ([0-9.]+)%"
KV_RX = re.compile(KV_RG)
METHODS = ("bulk", "cli", "stream", "pyloop", "pyloop-re", "rg-kv", "rg-count", "lnav")
DESCR = {
    "bulk": "diag parse_bulk(read_blocks(FILE))",
    "cli": "diag tail FILE --format json",
    "stream": "diag StreamParser.feed, 1 MiB chunks",
    "pyloop": "Python: for line in f + literal + regex",
    "pyloop-re": "Python: for line in f + regex on every line",
    "rg-kv": "rg -o -r '$1' 'GPU KV cache usage: ([0-9.]+)%'",
    "rg-count": "rg -c 'Avg prompt throughput'",
    "lnav": "lnav -n -c ';SELECT count(*) FROM all_logs ...'",
}
# lnav indexes the whole file before it runs a command; the line count shows it saw every line.
LNAV_SQL = ";SELECT (SELECT count(*) FROM all_logs) AS messages, (SELECT sum(lines) FROM lnav_file) AS lines"

# --------------------------------------------------------------------------------------------
# Building the input
# --------------------------------------------------------------------------------------------

# vLLM "MM-DD HH:MM:SS" (no year) and Dynamo/ISO "YYYY-MM-DDTHH:MM:SS" (fraction and Z stay literal)
_TS = re.compile(r"(?<![\d-])(?P<mo>\d\d)-(?P<d>\d\d) (?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)(?!\d)"
                 r"|(?P<Y2>\d{4})-(?P<mo2>\d\d)-(?P<d2>\d\d)T(?P<H2>\d\d):(?P<M2>\d\d):(?P<S2>\d\d)")
_FIRST_ISO = re.compile(r"(\d{4})-(\d\d)-\d\dT")


@dataclass
class Chunk:
    """About one stats interval of a sample log, as a template whose timestamps can be moved."""

    parts: list[str | tuple[bool, int]]  # literal text, or (is_iso, seconds after the chunk's base)
    duration: int                        # seconds to the next chunk's base
    stats: int = 0        # stats records (occurrences of the stats literal; torn ones count once)
    stat_lines: int = 0   # physical lines holding the literal (what rg -c counts)
    kv_matches: int = 0   # KV-usage matches (what rg -o prints)
    kv_sum: float = 0.0
    lines: int = 0


@dataclass
class Source:
    name: str
    header: list[Chunk | str] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)


@dataclass
class Truth:
    """What the generator wrote, counted from the sample text itself (not by any measured method)."""

    bytes: int = 0
    lines: int = 0
    stats: int = 0
    stat_lines: int = 0
    kv_matches: int = 0
    kv_sum: float = 0.0
    chunks: int = 0
    days: float = 0.0
    year: int = 0


def _epoch(m: re.Match[str], year0: int, month0: int) -> tuple[bool, int]:
    if m["Y2"]:
        return True, calendar.timegm((int(m["Y2"]), int(m["mo2"]), int(m["d2"]), int(m["H2"]), int(m["M2"]),
                                      int(m["S2"])))
    mo = int(m["mo"])
    year = year0 + 1 if mo < month0 - 6 else year0  # a month-day after a Dec -> Jan wrap
    return False, calendar.timegm((year, mo, int(m["d"]), int(m["H"]), int(m["M"]), int(m["S"])))


def _template(text: str, base: int, year0: int, month0: int) -> list[str | tuple[bool, int]]:
    parts: list[str | tuple[bool, int]] = []
    pos = 0
    for m in _TS.finditer(text):
        is_iso, t = _epoch(m, year0, month0)
        parts.append(text[pos:m.start()])
        parts.append((is_iso, t - base))
        pos = m.end()
    parts.append(text[pos:])
    return parts


def load_source(name: str) -> Source:
    """Split a sample decode log into its startup header and one chunk per stats interval.

    An interval starts at an ``Engine 000: Avg prompt throughput`` line; a torn record stays in
    its chunk with its continuation, a glued line counts its two records.
    """
    path = next((SAMPLES / name / "logs").glob("*_decode_w0.out"))
    text = path.read_bytes().decode("utf-8")
    m = _FIRST_ISO.search(text)
    assert m, path
    year0, month0 = int(m[1]), int(m[2])
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    starts = [i for i, ln in enumerate(lines) if f"Engine 000: {STATS_LIT}" in ln]
    bases = []
    for i in starts:
        md = _TS.search(lines[i])
        assert md, lines[i]
        bases.append(_epoch(md, year0, month0)[1])
    src = Source(name)
    head_text = "\n".join(lines[: starts[0]]) + "\n"
    src.header = [Chunk(_template(head_text, bases[0], year0, month0), 0, lines=starts[0])]
    ends = [*starts[1:], len(lines)]
    for k, (a, b) in enumerate(zip(starts, ends, strict=True)):
        body = lines[a:b]
        chunk_text = "\n".join(body) + "\n"
        dur = bases[k + 1] - bases[k] if k + 1 < len(bases) else 10
        c = Chunk(_template(chunk_text, bases[k], year0, month0), max(dur, 1), lines=len(body))
        c.stats = chunk_text.count(STATS_LIT)
        c.stat_lines = sum(STATS_LIT in ln for ln in body)
        for ln in body:
            vals = KV_RX.findall(ln)
            c.kv_matches += len(vals)
            c.kv_sum += sum(float(v) for v in vals)
        src.chunks.append(c)
    # The truth method (count the literal) must agree with what the sample generator says it wrote.
    manifest = json.loads((SAMPLES / name / "MANIFEST.json").read_text())
    rel = f"logs/{path.name}"
    want = sum(e["stats_records"] for e in manifest["files"][rel]["engine_stats"].values())
    head_stats = head_text.count(STATS_LIT)
    got = sum(c.stats for c in src.chunks) + head_stats
    if got != want:
        raise SystemExit(f"bench: {path}: {got} stats literals but MANIFEST says {want} records")
    return src


class _Clock:
    """Formats moved timestamps; one cache per second, since many lines share one."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[str, str]] = {}

    def fmt(self, t: int, is_iso: bool) -> str:
        got = self._cache.get(t)
        if got is None:
            g = time.gmtime(t)
            got = (f"{g.tm_mon:02d}-{g.tm_mday:02d} {g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d}",
                   f"{g.tm_year:04d}-{g.tm_mon:02d}-{g.tm_mday:02d}T{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d}")
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[t] = got
        return got[1] if is_iso else got[0]

    def render(self, chunk: Chunk, base: int) -> str:
        fmt = self.fmt
        return "".join(p if isinstance(p, str) else fmt(base + p[1], p[0]) for p in chunk.parts)


def build_input(path: Path, size_mb: float, seed: int, log: Callable[[str], None]) -> Truth:
    """Write a ~size_mb MB worker log: one startup header, then stretches of stats intervals.

    A deterministic RNG picks a sample scenario (weighted by its size) and a stretch of 30-300
    consecutive intervals from a random start, so every series stays locally coherent; each
    interval is moved to the running clock (10 s per interval, as vLLM logs them).
    """
    rng = random.Random(seed)
    sources = [load_source(n) for n in SOURCES]
    weights = [sum(c.lines for c in s.chunks) for s in sources]
    cum = [sum(weights[: i + 1]) for i in range(len(weights))]
    target = int(size_mb * 1_000_000)
    clock = _Clock()
    truth = Truth(year=time.gmtime(START).tm_year)
    now = START
    with path.open("w", encoding="utf-8", newline="") as out:
        head = sources[0].header[0]
        assert isinstance(head, Chunk)
        text = clock.render(head, START)  # the startup lines, before the first interval
        out.write(text)
        truth.bytes += len(text.encode())
        truth.lines += head.lines
        buf: list[str] = []
        pending = 0
        while truth.bytes + pending < target:
            src = sources[bisect.bisect_right(cum, rng.randrange(cum[-1]))]
            k = rng.randrange(len(src.chunks))
            for _ in range(rng.randint(30, 300)):
                c = src.chunks[k]
                text = clock.render(c, now)
                buf.append(text)
                pending += len(text)  # ASCII and ESC only; the exact byte count is taken on flush
                truth.lines += c.lines
                truth.stats += c.stats
                truth.stat_lines += c.stat_lines
                truth.kv_matches += c.kv_matches
                truth.kv_sum += c.kv_sum
                truth.chunks += 1
                now += c.duration
                k = (k + 1) % len(src.chunks)
                if pending >= 8 << 20:
                    data = "".join(buf)
                    out.write(data)
                    truth.bytes += len(data.encode())
                    buf, pending = [], 0
                if truth.bytes + pending >= target:
                    break
        data = "".join(buf)
        out.write(data)
        truth.bytes += len(data.encode())
    truth.days = (now - START) / 86400
    log(f"built {path.name}: {truth.bytes / 1e6:,.0f} MB, {truth.lines:,} lines, {truth.stats:,} stats records, "
        f"{truth.chunks:,} intervals over {truth.days:.1f} days")
    return truth


# --------------------------------------------------------------------------------------------
# Workers: each method's in-process part, run as `run.py --worker NAME FILE OUT.json`
# --------------------------------------------------------------------------------------------

def _stats_summary(records: list) -> dict:
    stats = [r for r in records if r.kind == "stats"]
    return {"stats": len(stats), "kv_sum": math.fsum(r.kv_usage or 0.0 for r in stats),
            "gen_sum": math.fsum(r.gen_tps or 0.0 for r in stats), "records": len(records)}


def _year(path: Path) -> int | None:
    """The year diag's CLI gives this log (its own first full date, else the file's mtime)."""
    from diag.files import year_of

    with path.open("rb") as fh:
        head = fh.read(64 << 10).decode("utf-8", errors="replace")
    return year_of(path, head, None)


def work_bulk(path: Path) -> dict:
    """The bulk path as diag runs it: stats/KV rows as columns, the rest as records."""
    from diag.files import read_blocks
    from diag.parsers.ingest import parse_blocks

    year = _year(path)
    t0 = time.perf_counter()
    parsed = parse_blocks(read_blocks(path), year=year)
    work = time.perf_counter() - t0
    rec = _stats_summary(parsed.records)
    cols = parsed.stats
    return {"work_s": work, "lines": parsed.counts.lines, "stats": rec["stats"] + cols.height,
            "kv_sum": math.fsum([rec["kv_sum"], float(cols["kv_usage"].fill_null(0).sum())]),
            "gen_sum": math.fsum([rec["gen_sum"], float(cols["gen_tps"].fill_null(0).sum())]),
            "records": len(parsed.records) + cols.height + parsed.kv.height}


def work_stream(path: Path) -> dict:
    from diag.parsers.ingest import StreamParser

    year = _year(path)
    t0 = time.perf_counter()
    sp = StreamParser(year=year)
    records = []
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            records.extend(sp.feed(chunk))
    records.extend(sp.finish())
    work = time.perf_counter() - t0
    rec = _stats_summary(records)
    cols = sp.stats
    return {"work_s": work, "lines": sp.counts.lines, "stats": rec["stats"] + cols.height,
            "kv_sum": math.fsum([rec["kv_sum"], float(cols["kv_usage"].fill_null(0).sum())]),
            "gen_sum": math.fsum([rec["gen_sum"], float(cols["gen_tps"].fill_null(0).sum())]),
            "records": len(records) + cols.height + sp.kv.height}


# The plain baseline: the fields diag's V1 parser needs most, one compiled regex, a literal prefilter.
_PY_RX = re.compile(r"(?:Engine (\d+): )?Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: "
                    r"([\d.]+) tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs.*?GPU KV cache usage: ([\d.]+)%")


_PY_LIT = re.compile(re.escape(STATS_LIT))


def work_pyloop(path: Path, prefilter: bool = True) -> dict:
    """The plain loop. ``prefilter``: the literal picks the lines the regex runs on; without it (the
    issue's plain loop) the regex runs on every line. A line that holds the literal but no whole record
    is a torn one: join the next line and retry."""
    t0 = time.perf_counter()
    rows = []
    lines = 0
    with path.open(encoding="utf-8", errors="replace", newline="\n") as f:
        it = iter(f)
        for line in it:
            lines += 1
            if prefilter and STATS_LIT not in line:
                continue
            found = _PY_RX.findall(line)
            if not found and (prefilter or _PY_LIT.search(line)):
                nxt = next(it, "")
                lines += bool(nxt)
                found = _PY_RX.findall(line.rstrip("\r\n") + nxt) or _PY_RX.findall(nxt)
            for eng, p, g, run, wait, kv in found:
                rows.append((int(eng) if eng else None, float(p), float(g), int(run), int(wait), float(kv)))
    work = time.perf_counter() - t0
    return {"work_s": work, "lines": lines, "stats": len(rows), "kv_sum": math.fsum(r[5] for r in rows),
            "gen_sum": math.fsum(r[2] for r in rows)}


def work_pyloop_re(path: Path) -> dict:
    return work_pyloop(path, prefilter=False)


def work_profile(path: Path) -> dict:
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    res = work_bulk(path)
    prof.disable()
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    st.sort_stats("tottime").print_stats(25)
    st.sort_stats("cumulative").print_stats(30)
    res["profile"] = s.getvalue()
    return res


WORKERS: dict[str, Callable[[Path], dict]] = {
    "bulk": work_bulk, "stream": work_stream, "pyloop": work_pyloop, "pyloop-re": work_pyloop_re,
    "profile": work_profile}


# --------------------------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------------------------

@dataclass
class Run:
    wall: float
    rss_mb: float | None
    work: float | None
    result: dict


@dataclass
class Method:
    name: str
    cmd: list[str]
    stdout: Path | None = None             # where the process's output goes (kept for checking)
    parse: Callable[[Path], dict] | None = None
    worker_out: Path | None = None
    runs: list[Run] = field(default_factory=list)
    error: str | None = None
    mb: float = 0.0


def run_once(m: Method, env: dict[str, str], timeout: float, work: Path) -> Run:
    """One timed run. Peak RSS comes from /usr/bin/time (%M): its child is forked from a small
    process, whereas ``wait4`` on a child of this (large) process would report at least this
    process's own RSS, which Linux carries over into the child's high-water mark at exec."""
    rss_file = work / f"{m.name}.rss"
    timer = shutil.which("time", path="/usr/bin:/bin")
    cmd = [timer, "-f", "%M", "-o", str(rss_file), *m.cmd] if timer else m.cmd
    out = m.stdout.open("wb") if m.stdout else subprocess.DEVNULL
    try:
        t0 = time.perf_counter()
        # cwd is the work dir: from the repo, `python -m diag` would import the live tree, not the copy
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=env, cwd=work, start_new_session=True)
        try:
            _, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise RuntimeError(f"timed out after {timeout:.0f} s (< {m.mb / timeout:.1f} MB/s)") from None
        wall = time.perf_counter() - t0
    finally:
        if m.stdout:
            out.close()  # type: ignore[union-attr]
    if p.returncode not in ((0, 1) if m.name.startswith("cli") else (0,)):  # diag tail exits 1 on an error finding
        raise RuntimeError(f"exit {p.returncode}: {err.decode(errors='replace')[-2000:]}")
    rss = None
    if timer and rss_file.exists():
        last = rss_file.read_text().split()
        rss = int(last[-1]) / 1024 if last and last[-1].isdigit() else None
    result: dict = {}
    if m.worker_out:
        result = json.loads(m.worker_out.read_text())
    elif m.parse and m.stdout:
        result = m.parse(m.stdout)
    return Run(wall, rss, result.get("work_s"), result)


def _parse_rg_kv(p: Path) -> dict:
    vals = p.read_bytes().split()
    return {"stats": len(vals), "kv_sum": math.fsum(float(v) for v in vals)}


def _parse_rg_count(p: Path) -> dict:
    return {"stat_lines": int(p.read_text().strip() or 0)}


def _parse_cli(p: Path) -> dict:
    d = json.loads(p.read_text())
    runs = d.get("runs") or [d]  # one document per run directory, or the run itself
    return {"stats": sum(e.get("samples") or 0 for r in runs for e in r["endpoints"]),
            "lines": sum(s.get("lines") or 0 for r in runs for s in r["sources"]),
            "records": sum(s.get("records") or 0 for r in runs for s in r["sources"])}


def _parse_lnav(p: Path) -> dict:
    m = re.search(r"^\s*(\d+)\s+(\d+)\s*$", p.read_text(), re.M)
    return {"messages": int(m[1]), "lines": int(m[2])} if m else {}


def ensure_tools(log: Callable[[str], None]) -> dict[str, str | None]:
    """rg and lnav from Debian's packages when missing; a tool that cannot be had is skipped."""
    missing = [pkg for tool, pkg in (("rg", "ripgrep"), ("lnav", "lnav"), ("/usr/bin/time", "time"))
               if not shutil.which(tool)]
    if missing and os.geteuid() == 0 and shutil.which("apt-get"):
        log(f"installing {' '.join(missing)} with apt-get ...")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for pkg in missing:
            r = subprocess.run(["apt-get", "install", "-y", "-qq", pkg], env=env, capture_output=True)
            if r.returncode != 0:
                subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
                subprocess.run(["apt-get", "install", "-y", "-qq", pkg], env=env, capture_output=True)
    tools: dict[str, str | None] = {"rg": shutil.which("rg"), "lnav": shutil.which("lnav")}
    for tool, path in tools.items():
        if path is None:
            log(f"NOTE: {tool} is not installed and could not be installed here: its rows are skipped")
    if not shutil.which("/usr/bin/time"):
        log("NOTE: /usr/bin/time is missing: peak RSS is not measured")
    return tools


def _version(cmd: list[str]) -> str:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
        return (r.stdout or r.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"


def diag_commit() -> str:
    """The commit the diag code under test is at, with "+dirty" when parsers/ or diag/ differ from it."""
    def git(*a: str) -> str:
        r = subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "?"
    return head + ("+dirty" if git("status", "--porcelain", "--", "parsers", "diag", "rules", "engines") else "")


def snapshot_code(work: Path, rev: str | None = None) -> Path:
    """A copy of the code under test, so every round times the same code while others keep committing.

    With ``rev`` the copy is that commit's tree (``git archive``), not the work tree."""
    dest = work / "code"
    if rev:
        dest.mkdir(parents=True, exist_ok=True)
        arc = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "parsers", "diag", "rules", "engines"], capture_output=True,
                             check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=arc, check=True)
        return dest
    for pkg in ("parsers", "diag", "rules", "engines"):
        shutil.copytree(ROOT / pkg, dest / pkg, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    return dest


def machine_info() -> dict[str, str]:
    def sh(cmd: str) -> str:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout.strip()

    import platform

    import polars as pl

    return {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "nproc": sh("nproc"),
            "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip(),
            "mem": sh("free -h | awk '/^Mem:/{print $2\" total, \"$7\" available\"}'"),
            "python": platform.python_version(), "polars": pl.__version__,
            "rg": _version(["rg", "--version"]), "lnav": _version(["lnav", "-V"]),
            "kernel": platform.release(), "diag_commit": diag_commit()}


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=float, default=1024, help="size of the generated log in MB (default 1024)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of every method, round-robin (default 3)")
    ap.add_argument("--slow", type=float, default=60,
                    help="a method whose first run takes longer than this many seconds runs only once (default 60)")
    ap.add_argument("--timeout", type=float, default=1800, help="kill a run after this many seconds (default 1800)")
    ap.add_argument("--seed", type=int, default=1, help="RNG seed of the generated log (default 1)")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(METHODS)} (dense input) or "
                         "cli,cli-export,pyloop,rg-count,lnav (--input noise)")
    ap.add_argument("--skip", default="", help="comma-separated methods to leave out")
    ap.add_argument("--workdir", type=Path, help="where to build the log (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the work dir (the log and every output)")
    ap.add_argument("--json", type=Path, help="also write all figures to this JSON file")
    ap.add_argument("--profile", action="store_true", help="cProfile the bulk path once and print the top")
    ap.add_argument("--input", choices=("dense", "noise"), default="dense",
                    help="dense: one ~--size MB decode log, ~48%% stats lines (default). noise: an 8-file srt-slurm "
                         "run directory of ~--noise-size-mb MB, ~6%% record lines (stats + NIXL KV Transfer "
                         "metrics) among Dynamo ANSI/HTTP/NIXL/UCX noise; methods then are "
                         "cli (diag tail RUN_DIR --format json), cli-export, pyloop, rg-count, lnav")
    ap.add_argument("--noise-size-mb", type=float, default=1024,
                    help="with --input noise: total size of the generated run directory in MB (default 1024)")
    ap.add_argument("--code-rev", metavar="REV",
                    help="time this commit's parsers/, diag/, rules/ (git archive) instead of a copy of the work tree")
    ap.add_argument("--worker", nargs=3, metavar=("NAME", "FILE", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        name, file, out = args.worker
        sys.path.insert(0, os.environ.get("DIAG_BENCH_CODE") or str(ROOT))
        if name in ("pyloop-noise", "pyloop-re-noise"):
            from noise_bench import work_pyloop_noise, work_pyloop_re_noise
            WORKERS[name] = work_pyloop_noise if name == "pyloop-noise" else work_pyloop_re_noise
        res = WORKERS[name](Path(file))
        mod = sys.modules.get("diag.parsers")
        res["code"] = str(Path(mod.__file__).parent.parent) if mod and mod.__file__ else None
        Path(out).write_text(json.dumps(res))
        return 0

    def log(msg: str) -> None:
        print(msg, flush=True)

    known = METHODS
    if args.input == "noise":
        from noise_bench import NOISE_METHODS
        known = NOISE_METHODS
        if args.profile:
            ap.error("--profile works with the dense input only")
    wanted = [m for m in (args.only.split(",") if args.only else known) if m and m not in args.skip.split(",")]
    bad = [m for m in wanted if m not in known]
    if bad:
        ap.error(f"unknown method(s): {', '.join(bad)}")
    tools = ensure_tools(log)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="diag-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.input == "noise":
            from noise_bench import run_noise
            return run_noise(args, wanted, tools, work, log, sys.modules[__name__])
        return _bench(args, wanted, tools, work, log)
    finally:
        if args.keep or args.workdir:
            log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _bench(args: argparse.Namespace, wanted: list[str], tools: dict[str, str | None], work: Path,
           log: Callable[[str], None]) -> int:
    info = machine_info()
    log(f"machine: {info['nproc']} CPUs ({info['cpu']}), {info['mem']}; Python {info['python']}, "
        f"polars {info['polars']}, {info['rg']}, {info['lnav']}; diag at {info['diag_commit']}")
    path = work / OUT_NAME
    t0 = time.perf_counter()
    truth = build_input(path, args.size, args.seed, log)
    log(f"  (generation took {time.perf_counter() - t0:.1f} s)")
    mb = truth.bytes / 1e6
    with path.open("rb") as fh:  # page-cache the file before anything is timed
        while fh.read(16 << 20):
            pass

    py = sys.executable
    me = str(Path(__file__).resolve())
    code = snapshot_code(work, args.code_rev)
    log(f"diag's code (parsers/, diag/, rules/, engines/) copied to {code} at {info['diag_commit']}: every run uses that copy")
    env = {**os.environ, "HOME": str(work / "home"), "NO_COLOR": "1", "PYTHONPATH": str(code),
           "DIAG_BENCH_CODE": str(code)}
    where = subprocess.run([py, "-c", "import diag.parsers, diag.rules; print(diag.__file__, diag.parsers.__file__, "
                            "diag.rules.__file__)"], env=env, cwd=work, capture_output=True, text=True).stdout.split()
    if len(where) != 3 or not all(w.startswith(str(code)) for w in where):
        raise SystemExit(f"bench: the copy of diag's code is not the one imported: {where}")
    (work / "home").mkdir(exist_ok=True)

    if args.profile:
        out = work / "profile.json"
        subprocess.run([py, me, "--worker", "profile", str(path), str(out)], env=env, cwd=work, check=True)
        res = json.loads(out.read_text())
        log(f"\ncProfile of parse_bulk on {mb:,.0f} MB ({res['work_s']:.2f} s under the profiler):\n")
        log(res["profile"])
        return 0

    methods: list[Method] = []
    for name in wanted:
        if name in ("rg-kv", "rg-count") and not tools["rg"]:
            continue
        if name == "lnav" and not tools["lnav"]:
            log("lnav: not installed (not in this machine's package sources?): skipped")
            continue
        if name in ("bulk", "stream", "pyloop", "pyloop-re"):
            wo = work / f"{name}.json"
            methods.append(Method(name, [py, me, "--worker", name, str(path), str(wo)], worker_out=wo))
        elif name == "cli":
            methods.append(Method(name, [py, "-m", "diag", "tail", str(path), "--format", "json"], work / "cli.json",
                                  _parse_cli))
        elif name == "rg-kv":
            methods.append(Method(name, ["rg", "--no-config", "-o", "-r", "$1", KV_RG, str(path)],
                                  work / "rg-kv.txt", _parse_rg_kv))
        elif name == "rg-count":
            methods.append(Method(name, ["rg", "--no-config", "-c", STATS_LIT, str(path)], work / "rg-count.txt",
                                  _parse_rg_count))
        elif name == "lnav":
            methods.append(Method(name, ["lnav", "-n", "-c", LNAV_SQL, str(path)], work / "lnav.txt", _parse_lnav))

    for m in methods:
        m.mb = mb
    log(f"timing {', '.join(m.name for m in methods)}: {args.reps} round(s), in turn; a method whose run takes "
        f"over {args.slow:.0f} s runs once")
    time_methods(methods, args, env, work, mb, log)

    end_commit = diag_commit()
    if end_commit != info["diag_commit"]:
        log(f"note: the work tree moved to {end_commit} during the run; every round used the copy of "
            f"{info['diag_commit']}")
    report = _report(methods, truth, info, mb, log)
    ok = _check(methods, truth, log)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"machine": info, "truth": truth.__dict__, "report": report,
                                         "checks_ok": ok}, indent=1))
    log(f"\ncommand: .venv/bin/python bench/run.py {' '.join(sys.argv[1:])}".rstrip())
    return 0 if ok else 1


def time_methods(methods: list[Method], args: argparse.Namespace, env: dict[str, str], work: Path, mb: float,
                 log: Callable[[str], None], once: tuple[str, ...] = (), name_w: int = 9) -> None:
    """``args.reps`` rounds, methods in turn; a method in ``once`` or slower than ``args.slow`` runs once.
    Shared by the dense and the noise-heavy inputs."""
    for rep in range(args.reps):
        for m in methods:
            if m.error or (rep and m.runs and (m.name in once or m.runs[0].wall > args.slow)):
                continue
            try:
                r = run_once(m, env, args.timeout, work)
            except RuntimeError as e:
                m.error = str(e)
                log(f"  {m.name}: FAILED: {e}")
                continue
            m.runs.append(r)
            rss = f"{r.rss_mb:6.0f} MB" if r.rss_mb is not None else "?"
            log(f"  round {rep + 1}/{args.reps} {m.name:<{name_w}} {r.wall:8.2f} s  {mb / r.wall:7.1f} MB/s  "
                f"peak {rss}")


def method_rows(methods: list[Method], descr: dict[str, str], lines: int, mb: float, log: Callable[[str], None],
                name_w: int = 9, what_w: int = 47) -> list[dict]:
    """One table row per method (runs, min and median wall, MB/s, Mline/s, work, peak RSS), logged and
    returned; shared by the dense and the noise-heavy inputs."""
    rows: list[dict] = []
    hdr = (f"{'method':<{name_w}} {'what':<{what_w}} {'runs':>4} {'min s':>7} {'med s':>7} {'MB/s':>7} "
           f"{'Mline/s':>7} {'work s':>7} {'peak RSS':>9}")
    log(hdr)
    log("-" * len(hdr))
    for m in methods:
        if not m.runs:
            log(f"{m.name:<{name_w}} {descr[m.name]:<{what_w}} {'FAILED: ' + m.error if m.error else 'no runs'}")
            continue
        walls = [r.wall for r in m.runs]
        works = [r.work for r in m.runs if r.work is not None]
        med = _med(walls)
        row = {"method": m.name, "what": descr[m.name], "min_s": min(walls), "median_s": med,
               "mb_s": mb / med, "mlines_s": lines / med / 1e6,
               "work_median_s": _med(works) if works else None,
               "peak_rss_mb": max((r.rss_mb for r in m.runs if r.rss_mb is not None), default=None),
               "walls": walls}
        rows.append(row)
        work = f"{row['work_median_s']:7.2f}" if works else f"{'-':>7}"
        rss = f"{row['peak_rss_mb']:6.0f} MB" if row["peak_rss_mb"] is not None else f"{'?':>9}"
        log(f"{m.name:<{name_w}} {descr[m.name]:<{what_w}} {len(walls):4d} {min(walls):7.2f} {med:7.2f} "
            f"{row['mb_s']:7.1f} {row['mlines_s']:7.3f} {work} {rss}")
    return rows


def _report(methods: list[Method], truth: Truth, info: dict, mb: float, log: Callable[[str], None]) -> list[dict]:
    log(f"\n{mb:,.0f} MB, {truth.lines:,} lines, {truth.stats:,} stats records; {info['nproc']} CPUs; "
        f"times are whole-process wall seconds over {max((len(m.runs) for m in methods), default=0)} runs\n")
    rows = method_rows(methods, DESCR, truth.lines, mb, log)
    by = {m.name: m for m in methods if m.runs}
    lines = []
    for diag_name in ("bulk", "cli"):
        if diag_name not in by:
            continue
        for other in ("rg-kv", "rg-count", "lnav", "pyloop", "pyloop-re", "stream"):
            if other not in by or other == diag_name:
                continue
            a, b = by[diag_name].runs, by[other].runs
            pair = [x.wall / y.wall for x, y in zip(a, b, strict=False)]
            lines.append(f"  {diag_name:<5} / {other:<9} {_med(pair):6.2f}x  (per-rep ratios "
                         f"{', '.join(f'{p:.2f}' for p in pair)}; >1 means diag takes longer)")
            rows.append({"ratio": f"{diag_name}/{other}", "median": _med(pair), "pairs": pair})
    if lines:
        log("\nratios of wall time, diag / other (median of the pair-by-pair ratios, runs alternate):")
        for ln in lines:
            log(ln)
    return rows


def _check(methods: list[Method], truth: Truth, log: Callable[[str], None]) -> bool:
    """Every method finds what the generator wrote (counts from the sample text, not from diag)."""
    log(f"\ncorrectness (generator wrote {truth.stats:,} stats records on {truth.stat_lines:,} lines, "
        f"KV sum {truth.kv_sum:,.1f}, {truth.lines:,} lines):")
    ok = True

    def check(label: str, got: float | None, want: float, tol: float = 0.0) -> None:
        nonlocal ok
        good = got is not None and abs(got - want) <= tol * max(1.0, abs(want))
        ok &= good
        log(f"  {'ok  ' if good else 'FAIL'} {label:<38} {got!s:>16} (expected {want})")

    for m in methods:
        if not m.runs:
            if m.error:
                ok = False
            continue
        r = m.runs[-1].result
        if m.name in ("bulk", "stream", "pyloop", "pyloop-re", "cli"):
            check(f"{m.name}: stats records", r.get("stats"), truth.stats)
            check(f"{m.name}: lines", r.get("lines"), truth.lines)
        if m.name in ("bulk", "stream", "pyloop", "pyloop-re", "rg-kv"):
            check(f"{m.name}: KV usage sum", round(r.get("kv_sum", math.nan), 3), round(truth.kv_sum, 3), 1e-9)
        if m.name == "rg-kv":
            check("rg-kv: matches (= stats records)", r.get("stats"), truth.stats)
        if m.name == "rg-count":
            check("rg-count: lines (glued lines count once)", r.get("stat_lines"), truth.stat_lines)
        if m.name == "lnav":
            check("lnav: lines indexed", r.get("lines"), truth.lines)
    by = {m.name: m.runs[-1].result for m in methods if m.runs}
    if "bulk" in by and "pyloop" in by:
        check("bulk vs pyloop: generation tok/s sum", round(by["bulk"].get("gen_sum", 0), 3),
              round(by["pyloop"].get("gen_sum", 0), 3), 1e-9)
    if "bulk" in by and "stream" in by:
        check("bulk vs stream: records", by["stream"].get("records"), by["bulk"].get("records"))
    if "bulk" in by and "cli" in by:
        check("bulk vs cli: records", by["cli"].get("records"), by["bulk"].get("records"))
    log("all checks passed" if ok else "SOME CHECKS FAILED")
    return ok


if __name__ == "__main__":
    sys.exit(main())
