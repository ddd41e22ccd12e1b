"""``bench/run.py --input noise``: diag against lnav, rg and a plain Python loop on a noise-heavy run dir.

The input is the 8-file run directory of ``bench/noise_input.py`` (~``--noise-size-mb`` MB, ~6 % of
the lines are records). Methods, each its own process, timed round-robin like the dense bench:

    cli         diag tail RUN_DIR --format json (end to end: discovery, parse, run model, rules, JSON)
    cli-export  the same plus --export DIR --export-format parquet, run once: its series are what the
                KV-transfer and KV-usage checks read (the JSON document has no per-record figures)
    pyloop      for line in f over every file + literal prefilter + two compiled regexes
    pyloop-re   the issue's "plain Python line loop with compiled regexes": both regexes on every line
    rg-count    rg -c -e 'Avg prompt throughput' -e 'KV Transfer metrics' FILES
    rg-triggers rg -c -F -f TRIGGERS FILES: every record trigger of diag's format registry (189 literals),
                the lines diag must find before it parses anything: the floor of any tool with diag's
                vocabulary, measured with the fastest multi-literal matcher at hand
    lnav        lnav -n -c ';SELECT count(*) ...' FILES (lnav indexes every file first)
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from noise_input import KV_LIT, STATS_LIT, NoiseTruth, build_noise_run

NOISE_METHODS = ("cli", "cli-export", "pyloop", "pyloop-re", "rg-count", "rg-triggers", "lnav")
NOISE_DESCR = {
    "cli": "diag tail RUN_DIR --format json",
    "cli-export": "  ... + --export DIR (once; feeds the checks)",
    "pyloop": "Python: for line in f + literal + 2 regexes",
    "pyloop-re": "Python: for line in f + 2 regexes, every line",
    "rg-count": "rg -c -e 'Avg prompt…' -e 'KV Transfer…' FILES",
    "rg-triggers": "rg -c -F -f TRIGGERS FILES (diag's vocabulary)",
    "lnav": "lnav -n -c ';SELECT count(*) …' FILES",
}

_PY_STATS = re.compile(r"Engine (\d+): Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: "
                       r"([\d.]+) tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs.*?GPU KV cache usage: ([\d.]+)%")
_PY_KV = re.compile(r"KV Transfer metrics: Num successful transfers=(\d+), Avg xfer time \(ms\)=([\d.]+)")


def work_pyloop_noise(logs: Path, prefilter: bool = True) -> dict:
    """The plain baseline over every file of the run dir: per file, lines, stats, KV lines and sums.
    ``prefilter``: a literal test picks the lines the regexes run on; without it (the issue's plain loop)
    both regexes run on every line."""
    t0 = time.perf_counter()
    files = {}
    for path in sorted(logs.glob("*.out")):
        lines = stats = kv_lines = xfer = 0
        kv_sum = gen_sum = 0.0
        with path.open(encoding="utf-8", errors="replace", newline="\n") as f:
            for line in f:
                lines += 1
                if not prefilter or STATS_LIT in line:
                    for _e, _p, g, _r, _w, kv in _PY_STATS.findall(line):
                        stats += 1
                        kv_sum += float(kv)
                        gen_sum += float(g)
                if not prefilter or KV_LIT in line:
                    m = _PY_KV.search(line)
                    if m:
                        kv_lines += 1
                        xfer += int(m[1])
        files[path.name] = {"lines": lines, "stats": stats, "kv_lines": kv_lines, "kv_usage_sum": kv_sum,
                            "gen_sum": gen_sum, "xfer_ok_sum": xfer}
    return {"work_s": time.perf_counter() - t0, "files": files}


def work_pyloop_re_noise(logs: Path) -> dict:
    return work_pyloop_noise(logs, prefilter=False)


def _parse_cli(p: Path) -> dict:
    d = json.loads(p.read_text())
    runs = d.get("runs") or [d]
    return {"files": {Path(s["path"]).name: {"lines": s.get("lines"), "records": s.get("records"), "kind": s.get("kind"),
                                             "role": s.get("role")} for r in runs for s in r["sources"]},
            "endpoints": {e["id"]: {"samples": e.get("samples"), "health": e.get("health")}
                          for r in runs for e in r["endpoints"]},
            "findings": [f.get("code") for r in runs for f in r.get("findings", [])]}


def _parse_rg(p: Path) -> dict:
    files = {}
    for ln in p.read_text().splitlines():
        name, _, n = ln.rpartition(":")
        files[Path(name).name] = int(n)
    return {"files": files}


def _parse_lnav(p: Path) -> dict:
    m = re.search(r"^\s*(\d+)\s+(\d+)\s*$", p.read_text(), re.M)
    return {"messages": int(m[1]), "lines": int(m[2])} if m else {}


def _export_parser(export: Path) -> Callable[[Path], dict]:
    def parse(p: Path) -> dict:
        import polars as pl

        out = _parse_cli(p)
        st = export / "stats.parquet"
        kv = export / "kv_transfer.parquet"
        per_file: dict[str, dict] = {}
        if st.exists():
            for r in pl.read_parquet(st).group_by("file").agg(pl.len().alias("n"),
                                                              pl.col("kv_usage").sum().alias("kv")).iter_rows(named=True):
                per_file.setdefault(Path(r["file"]).name, {}).update(stats=r["n"], kv_usage_sum=r["kv"])
        if kv.exists():
            for r in pl.read_parquet(kv).group_by("file").agg(pl.len().alias("n"),
                                                              pl.col("transfers").sum().alias("x")).iter_rows(named=True):
                per_file.setdefault(Path(r["file"]).name, {}).update(kv_lines=r["n"], xfer_ok_sum=r["x"])
        out["series"] = per_file
        return out
    return parse


def run_noise(args, wanted: list[str], tools: dict, work: Path, log: Callable[[str], None], R: ModuleType) -> int:
    """The whole noise-input benchmark; R is bench/run.py (its Method, run_once, machine_info ...)."""
    info = R.machine_info()
    if args.code_rev:  # the code timed is that commit's tree, whatever the work tree holds
        import subprocess
        info["diag_commit"] = subprocess.run(["git", "-C", str(R.ROOT), "rev-parse", "--short", args.code_rev],
                                             capture_output=True, text=True).stdout.strip() or args.code_rev
    log(f"machine: {info['nproc']} CPUs ({info['cpu']}), {info['mem']}; Python {info['python']}, "
        f"polars {info['polars']}, {info['rg']}, {info['lnav']}; diag at {info['diag_commit']}")
    run_dir = work / "run"
    t0 = time.perf_counter()
    truth = build_noise_run(run_dir, args.noise_size_mb, args.seed, log)
    gen_s = time.perf_counter() - t0
    log(f"  (generation took {gen_s:.1f} s)")
    files = sorted(str(p) for p in (run_dir / "logs").glob("*.out"))
    mb = truth.bytes / 1e6
    for f in files:  # page-cache every file before anything is timed
        with open(f, "rb") as fh:
            while fh.read(16 << 20):
                pass

    py = sys.executable
    me = str(Path(R.__file__).resolve())
    code = R.snapshot_code(work, args.code_rev)
    log(f"diag's code copied to {code}: every run uses that copy")
    env = {**__import__("os").environ, "HOME": str(work / "home"), "NO_COLOR": "1", "PYTHONPATH": str(code),
           "DIAG_BENCH_CODE": str(code)}
    (work / "home").mkdir(exist_ok=True)
    export = work / "export"

    methods = []
    for name in wanted:
        if name in ("rg-count", "rg-triggers") and not tools["rg"]:
            continue
        if name == "lnav" and not tools["lnav"]:
            log("lnav: not installed: skipped")
            continue
        if name == "cli":
            methods.append(R.Method(name, [py, "-m", "diag", "tail", str(run_dir), "--format", "json"],
                                    work / "cli.json", _parse_cli))
        elif name == "cli-export":
            methods.append(R.Method(name, [py, "-m", "diag", "tail", str(run_dir), "--format", "json", "--export",
                                           str(export), "--export-format", "parquet"], work / "cli-export.json",
                                    _export_parser(export)))
        elif name in ("pyloop", "pyloop-re"):
            wo = work / f"{name}.json"
            methods.append(R.Method(name, [py, me, "--worker", f"{name}-noise", str(run_dir / "logs"), str(wo)],
                                    worker_out=wo))
        elif name == "rg-count":
            methods.append(R.Method(name, ["rg", "--no-config", "-c", "-e", STATS_LIT, "-e", KV_LIT, *files],
                                    work / "rg-count.txt", _parse_rg))
        elif name == "rg-triggers":
            trig = work / "triggers.txt"
            trig.write_text(__import__("subprocess").run(
                [py, "-c", "from diag.parsers.lineparser import trigger_literals as t; print(*t(), sep='\\n')"],
                env=env, cwd=work, capture_output=True, text=True, check=True).stdout)
            methods.append(R.Method(name, ["rg", "--no-config", "-c", "-F", "-f", str(trig), *files],
                                    work / "rg-triggers.txt", _parse_rg))
        elif name == "lnav":
            methods.append(R.Method(name, ["lnav", "-n", "-c", R.LNAV_SQL, *files], work / "lnav.txt", _parse_lnav))
    for m in methods:
        m.mb = mb
    log(f"timing {', '.join(m.name for m in methods)} on {len(files)} files: {args.reps} round(s), in turn; "
        f"cli-export and any method over {args.slow:.0f} s run once")
    R.time_methods(methods, args, env, work, mb, log, once=("cli-export",), name_w=10)

    report = _report(R, methods, truth, info, mb, log)
    ok = _check(methods, truth, log)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"input": "noise", "machine": info, "generation_s": gen_s,
                                         "truth": truth.to_dict(), "report": report, "checks_ok": ok}, indent=1))
    log(f"\ncommand: .venv/bin/python bench/run.py {' '.join(sys.argv[1:])}".rstrip())
    return 0 if ok else 1


def _report(R: ModuleType, methods: list, truth: NoiseTruth, info: dict, mb: float,
            log: Callable[[str], None]) -> list[dict]:
    med = __import__("statistics").median
    log(f"\nnoise-heavy run dir: {len(truth.files)} files, {mb:,.0f} MB, {truth.lines:,} lines, {truth.records:,} "
        f"records ({100 * truth.records / truth.lines:.1f} %); {info['nproc']} CPUs; whole-process wall seconds\n")
    rows: list[dict] = R.method_rows(methods, NOISE_DESCR, truth.lines, mb, log, 10, 49)
    by = {m.name: m for m in methods if m.runs}
    if "cli" in by:
        log("\nratios of wall time, diag tail / other (median of the pair-by-pair ratios; >1 means diag takes longer):")
        for other in ("lnav", "pyloop", "pyloop-re", "rg-count", "rg-triggers"):
            if other not in by:
                continue
            pair = [x.wall / y.wall for x, y in zip(by["cli"].runs, by[other].runs, strict=False)]
            log(f"  cli / {other:<9} {med(pair):7.2f}x  (per-round {', '.join(f'{p:.2f}' for p in pair)})")
            rows.append({"ratio": f"cli/{other}", "median": med(pair), "pairs": pair})
        if "cli-export" in by:
            pair = [by["cli-export"].runs[0].wall / by["cli"].runs[0].wall]
            log(f"  cli-export / cli {pair[0]:5.2f}x  (round 1; the cost of --export)")
            rows.append({"ratio": "cli-export/cli", "median": pair[0], "pairs": pair})
    return rows


def _check(methods: list, truth: NoiseTruth, log: Callable[[str], None]) -> bool:
    """Every method against what the generator wrote, per file (and per endpoint for diag)."""
    log(f"\ncorrectness (generator wrote {int(truth.total('stats')):,} stats records, "
        f"{int(truth.total('kv_lines')):,} KV-transfer records, {truth.lines:,} lines in {len(truth.files)} files):")
    ok = True
    fails = 0

    def check(label: str, got: float | None, want: float, tol: float = 0.0, quiet: bool = False) -> None:
        nonlocal ok, fails
        good = got is not None and abs(got - want) <= tol * max(1.0, abs(want))
        ok &= good
        fails += not good
        if not good or not quiet:
            log(f"  {'ok  ' if good else 'FAIL'} {label:<52} {got!s:>14} (expected {want})")

    by = {m.name: m.runs[-1].result for m in methods if m.runs}
    for m in methods:
        if m.error:
            ok = False
    want_files = {f.name: f for f in truth.files}
    for name in ("cli", "cli-export"):
        r = by.get(name)
        if not r:
            continue
        got = r["files"]
        check(f"{name}: files read", len([n for n in got if n in want_files]), len(want_files))
        check(f"{name}: lines (all files)", sum(got.get(n, {}).get("lines") or 0 for n in want_files), truth.lines)
        for n, f in want_files.items():
            check(f"{name}: {n} lines", (got.get(n) or {}).get("lines"), f.lines, quiet=True)
            want_kind = "frontend" if f.role == "frontend" else "worker"
            if (got.get(n) or {}).get("kind") != want_kind:
                check(f"{name}: {n} kind", 0, 1)
        for ep, d in sorted(truth.by_endpoint().items()):
            check(f"{name}: {ep} stats samples", (r["endpoints"].get(ep) or {}).get("samples"), d["stats"])
    r = by.get("cli-export")
    if r:
        s = r["series"]
        for key, label in (("stats", "stats rows"), ("kv_lines", "KV-transfer rows"),
                           ("kv_usage_sum", "KV usage sum"), ("xfer_ok_sum", "transfers sum")):
            got = math.fsum((s.get(n) or {}).get(key) or 0 for n in want_files)
            check(f"cli-export: {label} (all files)", round(got, 3), round(truth.total(key), 3), 1e-9)
            for n, f in want_files.items():
                check(f"cli-export: {n} {label}", round((s.get(n) or {}).get(key) or 0, 3),
                      round(getattr(f, key), 3), 1e-9, quiet=True)
    for name in ("pyloop", "pyloop-re"):
        r = by.get(name)
        if not r:
            continue
        for key in ("lines", "stats", "kv_lines", "kv_usage_sum", "xfer_ok_sum"):
            got = math.fsum((r["files"].get(n) or {}).get(key) or 0 for n in want_files)
            check(f"{name}: {key} (all files)", round(got, 3), round(truth.total(key), 3), 1e-9)
            for n, f in want_files.items():
                check(f"{name}: {n} {key}", round((r["files"].get(n) or {}).get(key) or 0, 3),
                      round(getattr(f, key), 3), 1e-9, quiet=True)
    r = by.get("rg-count")
    if r:
        check("rg-count: record lines (all files)", sum(r["files"].values()), truth.records)
        for n, f in want_files.items():
            check(f"rg-count: {n}", r["files"].get(n, 0), f.stats + f.kv_lines, quiet=True)
    r = by.get("rg-triggers")
    if r:  # every record line holds a trigger; the rest are the rare lines diag's line parser sees
        check("rg-triggers: trigger lines >= record lines", min(sum(r["files"].values()), truth.records),
              truth.records)
    r = by.get("lnav")
    if r:
        check("lnav: lines indexed (all files)", r.get("lines"), truth.lines)
    log("all checks passed" if ok else f"SOME CHECKS FAILED ({fails})")
    return ok
