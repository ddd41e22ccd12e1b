#!/usr/bin/env python3
"""The floor of the noise-heavy scan: what the engines issue 38 names cost on this machine for the least of
diag's work, timed in the same run as lnav, rg and diag itself, and set against the issue's targets.

    .venv/bin/python bench/floor.py                      # builds the 1 GB noise-heavy run (8 files) in a temp dir
    .venv/bin/python bench/floor.py --run-dir /tmp/noise1g --reps 3

Every method is its own process over the same page-cached files, the methods in turn, ``--reps`` rounds; the
table shows each method's best wall and, for the in-process workers, the work alone (the wall less the
interpreter's start and imports). Methods:

    lnav          lnav -n -c ';SELECT ...' FILES (the headless index the target divides by 3)
    rg-triggers   rg -c -F -f TRIGGERS FILES (diag's 933 trigger literals; the target multiplies by 2.5)
    diag          diag tail RUN --format json (end to end)
    diag-start    diag tail TINY --format json on a 100 kB run: start-up, discovery, rules, output
    libs          python -c 'import polars, numpy, hyperscan': the libraries' import alone
    hs-raw        Hyperscan's block scan of the raw bytes for the trigger literals, 4 MB blocks, two threads
                  (the GIL released in the scan; each hit's end collected, as the prefilter does)
    ansi-re       the ANSI pattern removed from every 4 MB block by Python's re, two threads
    ansi-polars   the ANSI pattern removed from the lines that hold an ESC, in polars (lines split by polars)
    polars-any    polars' str.contains_any of the trigger literals over every line (all files in one
                  collect_all on the streaming engine: polars' own threads, no Python per block)

The floor of a design is the sum of what it cannot skip: the libraries' import, finding the trigger lines, and
finding the triggers that escape sequences split (a trigger line diag must not miss, issue 36); neither the
extraction of the records, the stamps, the noise accounting nor the analysis is in it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from noise_input import build_noise_run

REPO = Path(__file__).resolve().parent.parent
LNAV_SQL = ";SELECT (SELECT count(*) FROM all_logs) AS messages, (SELECT sum(lines) FROM lnav_file) AS lines"
BLOCK = 4 << 20
WORKERS = ("hs-raw", "ansi-re", "ansi-polars", "polars-any", "dense-extract")
STATS_LIT = "Avg prompt throughput"
# the dense bench's stats pattern (bench/run.py's plain loop), in polars' dialect
STATS_RX = (r"(?:Engine ([0-9]+): )?Avg prompt throughput: ([0-9.]+) tokens/s, Avg generation throughput: "
            r"([0-9.]+) tokens/s, Running: ([0-9]+) reqs, Waiting: ([0-9]+) reqs.*?GPU KV cache usage: ([0-9.]+)%")


def _blocks(path: Path):
    """Newline-aligned blocks of about BLOCK bytes."""
    rest = b""
    with path.open("rb") as f:
        while chunk := f.read(BLOCK):
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            yield data[:cut]
    if rest:
        yield rest


def _threads(files: list[Path], work) -> None:
    """``work(path)`` over the files on two threads (the machine's cores), files dealt in turn."""
    ts = [threading.Thread(target=lambda part=files[i::2]: [work(p) for p in part]) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def worker(name: str, logs: Path, triggers: Path) -> dict:
    """One in-process method; returns its work time (after the imports) and what it found."""
    files = sorted(logs.glob("*.out"))
    lits = [t for t in triggers.read_text().split("\n") if t] if triggers.is_file() else []
    from diag.parsers.lineparser import ANSI_PATTERN

    found = [0]
    lock = threading.Lock()
    if name == "hs-raw":
        import hyperscan
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        db.compile(expressions=[t.encode() for t in lits], ids=list(range(len(lits))), elements=len(lits),
                   literal=True)
        t0 = time.perf_counter()

        def work(p: Path) -> None:
            scratch = hyperscan.Scratch(db)
            ends: list[int] = []
            for b in _blocks(p):
                db.scan(b, match_event_handler=lambda _i, _s, e, _f, _c: ends.append(e), scratch=scratch)
            with lock:
                found[0] += len(ends)
        _threads(files, work)
    elif name == "ansi-re":
        rx = re.compile(ANSI_PATTERN.encode())
        t0 = time.perf_counter()

        def work(p: Path) -> None:
            for b in _blocks(p):
                n = len(rx.sub(b"", b))
                with lock:
                    found[0] += len(b) - n
        _threads(files, work)
    elif name == "ansi-polars":
        import polars as pl
        t0 = time.perf_counter()

        def work(p: Path) -> None:
            for b in _blocks(p):
                s = pl.Series([b.decode("utf-8", "replace")]).str.split("\n").explode()
                esc = s.filter(s.str.contains("\x1b", literal=True))
                n = esc.str.replace_all(ANSI_PATTERN, "").str.len_bytes().sum()
                with lock:
                    found[0] += int(esc.str.len_bytes().sum() - n)
        _threads(files, work)
    elif name == "polars-any":
        import polars as pl
        t0 = time.perf_counter()
        qs = [pl.scan_csv(p, has_header=False, separator="\x1f", quote_char=None, new_columns=["line"],
                          schema={"line": pl.Utf8}, truncate_ragged_lines=True)
              .select(pl.col("line").str.contains_any(lits).sum().alias("hits")) for p in files]
        found[0] = sum(int(df["hits"][0]) for df in pl.collect_all(qs, engine="streaming"))
    elif name == "dense-extract":
        import polars as pl
        t0 = time.perf_counter()
        qs = [pl.scan_csv(p, has_header=False, separator="\x1f", quote_char=None, new_columns=["line"],
                          schema={"line": pl.Utf8}, truncate_ragged_lines=True)
              .filter(pl.col("line").str.contains(STATS_LIT, literal=True))
              .select(pl.col("line").str.extract_groups(STATS_RX).struct.field("6").cast(pl.Float64).alias("kv"))
              .select(pl.len().alias("rows"), pl.col("kv").sum()) for p in files]
        found[0] = sum(int(df["rows"][0]) for df in pl.collect_all(qs, engine="streaming"))
    else:
        raise SystemExit(f"unknown worker {name}")
    return {"work_s": time.perf_counter() - t0, "found": found[0]}


def _timed(cmd: list[str], env: dict | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, env=env, cwd=REPO, check=False)
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"{cmd[0]} exited {p.returncode}: {p.stderr.decode(errors='replace')[-500:]}")
    return wall, p.stdout.decode(errors="replace")


def _best(methods: dict[str, list[str]], reps: int, env: dict) -> dict[str, tuple[float, float | None]]:
    """Every method ``reps`` times, in turn; per method its best wall and (a worker's) work time."""
    best: dict[str, tuple[float, float | None]] = {}
    for _ in range(reps):
        for name, cmd in methods.items():
            wall, out = _timed(cmd, env=env)
            work = json.loads(out)["work_s"] if "--worker" in cmd and out.strip().startswith("{") else None
            if name not in best or wall < best[name][0]:
                best[name] = (wall, work)
    return best


def _table(title: str, best: dict[str, tuple[float, float | None]]) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=REPO).stdout.strip()
    print(f"{title}; commit {commit}; load average now {os.getloadavg()[0]:.2f}")
    print(f"{'method':<14} {'wall s':>7} {'work s':>7}")
    for name, (wall, work) in best.items():
        print(f"{name:<14} {wall:7.2f} {'' if work is None else f'{work:7.2f}':>7}")


def _report(target: float, floors: dict[str, float], diag: float) -> None:
    for label, s in floors.items():
        print(f"floor, {label}: {s:.2f} s ({s / target:.2f}x the target)")
    print(f"diag: {diag:.2f} s ({diag / target:.2f}x the target)")


def _tiny(tmp: Path, source: str) -> Path:
    """A 100 kB run of one log's head: diag's start-up, discovery, rules and output without the volume."""
    tiny = tmp / "tiny" / "logs"
    tiny.mkdir(parents=True)
    (tiny / Path(source).name).write_bytes(Path(source).read_bytes()[:100_000].rsplit(b"\n", 1)[0] + b"\n")
    return tiny.parent


def noise(args: argparse.Namespace, tmp: Path, env: dict) -> None:
    py = sys.executable
    run = args.run_dir
    if run is None:
        run = tmp / "run"
        build_noise_run(run, args.size_mb, 1, log=lambda m: None)
    logs = run / "logs"
    files = sorted(str(p) for p in logs.glob("*.out"))
    size = sum(os.path.getsize(f) for f in files) / 1e6
    triggers = tmp / "triggers.txt"
    triggers.write_text(subprocess.run(
        [py, "-c", "from diag.parsers.lineparser import trigger_literals as t; print(*t(), sep='\\n')"],
        capture_output=True, text=True, check=True, cwd=REPO, env=env).stdout)
    methods = {
        "lnav": ["lnav", "-n", "-c", LNAV_SQL, *files],
        "rg-triggers": ["rg", "--no-config", "-c", "-F", "-f", str(triggers), *files],
        "diag": [py, "-m", "diag", "tail", str(run), "--format", "json"],
        "diag-start": [py, "-m", "diag", "tail", str(_tiny(tmp, max(files, key=lambda f: "decode" in f))),
                       "--format", "json"],
        "libs": [py, "-c", "import polars, numpy, hyperscan"],
        **{w: [py, __file__, "--worker", w, str(logs), str(triggers)] for w in WORKERS if w != "dense-extract"},
    }
    best = _best({k: v for k, v in methods.items() if shutil.which(v[0])}, args.reps, env)
    _table(f"noise-heavy run: {len(files)} files, {size:,.0f} MB, best of {args.reps}", best)
    lnav, rg = best["lnav"][0], best["rg-triggers"][0]
    target = min(lnav / 3, rg * 2.5)
    print(f"target: diag <= {target:.2f} s (lnav / 3 = {lnav / 3:.2f} s, rg-triggers x 2.5 = {rg * 2.5:.2f} s)")
    libs, w = best["libs"][0], {k: best[k][1] or 0.0 for k in methods if k in WORKERS}
    _report(target, {"the libraries + Hyperscan + the cheaper ANSI removal":
                     libs + w["hs-raw"] + min(w["ansi-re"], w["ansi-polars"]),
                     "the libraries + Hyperscan, no ANSI removal": libs + w["hs-raw"],
                     "the libraries + polars contains_any + ANSI removal in polars":
                     libs + w["polars-any"] + w["ansi-polars"]}, best["diag"][0])


def dense(args: argparse.Namespace, tmp: Path, env: dict) -> None:
    py = sys.executable
    logs = tmp / "dense" / "logs"
    logs.mkdir(parents=True)
    (logs / args.dense.name).symlink_to(args.dense.resolve())
    size = args.dense.stat().st_size / 1e6
    out = tmp / "pyloop.json"
    methods = {
        "pyloop": [py, str(REPO / "bench" / "run.py"), "--worker", "pyloop", str(args.dense), str(out)],
        "diag": [py, "-m", "diag", "tail", str(logs.parent), "--format", "json"],
        "libs": [py, "-c", "import polars, numpy, hyperscan"],
        "dense-extract": [py, __file__, "--worker", "dense-extract", str(logs), "-"],
    }
    best = _best(methods, args.reps, env)
    _table(f"dense-stats log: {size:,.0f} MB, best of {args.reps}", best)
    target = best["pyloop"][0] / 2
    print(f"target: diag <= {target:.2f} s (the plain regex loop / 2)")
    _report(target, {"the libraries + polars extracting the stats lines": best["libs"][0]
                     + (best["dense-extract"][1] or 0.0)}, best["diag"][0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", type=Path, help="an existing noise-heavy run (bench/noise_input.py); default: built")
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--dense", type=Path, metavar="LOG", help="a dense-stats log (bench/run.py's input) instead")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--worker", nargs=3, metavar=("NAME", "LOGS", "TRIGGERS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], Path(args.worker[1]), Path(args.worker[2]))))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="diag-floor-"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    try:
        (dense if args.dense else noise)(args, tmp, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
