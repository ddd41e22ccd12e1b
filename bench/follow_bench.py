"""Follow mode on a large existing run: how long ``diag tail -f`` takes to catch up, and how soon an
appended stats line shows.

    python bench/follow_bench.py [--size-mb 1024] [--workdir DIR] [--keep]

It builds the noise-heavy run directory of ``bench/noise_input.py`` (or reuses ``--run-dir``), starts
``python -m diag tail -f RUN --heartbeat 0.2`` and reads its heartbeat lines (``samples=N`` per
endpoint). Caught up: the samples of every endpoint add up to the generator's stats records. Then
one stats line (10 s after the last interval, engine 0) is appended to the first decode file; the
latency is the time until a heartbeat shows one more sample. Follow mode re-analyses at most once a
second, and heartbeats come every 0.2 s: both are in the latency.
"""

from __future__ import annotations

import argparse
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

_BEAT = re.compile(r"^(\S+)\s+\S+\s+.*?samples=([\d,]+)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="diag-follow-"))
    run = work / "noise-run"
    try:
        t0 = time.perf_counter()
        truth = build_noise_run(run, args.size_mb, args.seed, log=lambda *_: None)
        want = int(truth.total("stats"))
        size = sum(p.stat().st_size for p in (run / "logs").glob("*.out"))
        print(f"input: {size / 1e6:,.0f} MB in 8 files, {want:,} stats records (built in {time.perf_counter() - t0:.0f} s)")
        repo = Path(__file__).resolve().parents[1]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "diag", "tail", "-f", str(run), "--heartbeat", "0.2"],
                                cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        latest: dict[str, int] = {}
        seen: list[tuple[float, dict[str, int]]] = []
        lock = threading.Lock()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                m = _BEAT.match(line.strip())
                if m:
                    with lock:
                        latest[m.group(1)] = int(m.group(2).replace(",", ""))
                        seen.append((time.perf_counter(), dict(latest)))

        threading.Thread(target=pump, daemon=True).start()

        def wait(pred, timeout: float) -> float | None:
            end = time.perf_counter() + timeout
            while time.perf_counter() < end:
                with lock:
                    if seen and pred(seen[-1][1]):
                        return seen[-1][0]
                time.sleep(0.01)
            return None

        caught = wait(lambda s: sum(s.values()) >= want, args.timeout)
        if caught is None:
            print(f"FAILED: not caught up after {args.timeout:.0f} s (saw {latest})")
            proc.kill()
            return 1
        print(f"caught up: {caught - start:.2f} s for {size / 1e6:,.0f} MB ({size / 1e6 / (caught - start):,.0f} MB/s), "
              f"whole process from its start")
        time.sleep(1.5)
        with lock:
            before = dict(latest)
        dec = sorted((run / "logs").glob("*decode_w0.out"))[0]
        last = truth.last_ts  # ISO of the last interval
        when = time.strftime("%m-%d %H:%M:%S", time.gmtime(
            time.mktime(time.strptime(last[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + 10))
        line = (f"(APIServer pid=4874) INFO {when} [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
                "Avg generation throughput: 1000.0 tokens/s, Running: 64 reqs, Waiting: 0 reqs, GPU KV cache usage: "
                "40.0%, Prefix cache hit rate: 0.0%\n")
        t_app = time.perf_counter()
        with dec.open("a") as fh:
            fh.write(line)
        shown = wait(lambda s: sum(s.values()) > sum(before.values()), 10)
        proc.send_signal(2)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if shown is None:
            print("FAILED: the appended stats line did not show within 10 s")
            return 1
        print(f"appended stats line shown after {shown - t_app:.2f} s")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
