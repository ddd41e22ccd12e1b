"""Hostile input (issue 11): every case ends within a timeout, in one clear line naming the file and the
reason, with no traceback; exit 2 only when nothing usable was read, and the rest of the input is still
processed. diag runs in a child process (``subprocess`` timeouts: a hang fails the test, never the run)."""

from __future__ import annotations

import gzip
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ROOT / "samples" / "runs" / "healthy"
STATS = ("(EngineCore_DP0 pid=1) INFO {md} [loggers.py:271] Engine 000: Avg prompt throughput: 100.0 tokens/s, "
         "Avg generation throughput: 200.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, "
         "Prefix cache hit rate: 0.0%")
LINE = STATS.format(md="08-06 12:34:56")


def diag(*args: str, timeout: float = 60, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run([sys.executable, "-m", "diag", *args], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          cwd=ROOT, timeout=timeout, env=env)


def clean(res: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in res.stderr, res.stderr[-800:]
    assert "\x1b" not in res.stderr and "\ufffd" not in res.stderr, res.stderr[-300:]


def run_dir(tmp_path: Path) -> Path:
    """A copy of the healthy sample's logs to spoil."""
    run = tmp_path / "run"
    shutil.copytree(HEALTHY, run)
    return run


def doc(res: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(res.stdout)


def skipped(d: dict) -> dict[str, str]:
    return {Path(s["path"]).name: s["skipped"] for s in d["sources"] if s["skipped"]}


# ------------------------------------------------------------------ bytes that are not a log

def test_random_bytes_alone_exit_2_and_beside_a_run_are_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "nodeX_decode_w3.out"
    junk.write_bytes(os.urandom(200_000))
    alone = diag("tail", str(junk))
    clean(alone)
    assert alone.returncode == 2 and "nodeX_decode_w3.out: binary file" in alone.stderr
    run = run_dir(tmp_path)
    shutil.copy(junk, run / "logs" / junk.name)
    res = diag("tail", str(run), "--format", "json")
    clean(res)
    assert res.returncode == 0 and res.stderr.count("binary file") == 1
    assert {e["id"] for e in doc(res)["endpoints"]} >= {"prefill-w0", "decode-w0"}


def test_invalid_utf8_around_a_record_keeps_the_record(tmp_path: Path) -> None:
    log = tmp_path / "n1_decode_w0.out"
    log.write_bytes(b"hello \xff\xfe world\n" + LINE.encode() + b"\n\xc3\x28 bad \xed\xa0\x80\n")
    res = diag("tail", str(log), "--format", "json")
    clean(res)
    assert res.returncode == 0 and doc(res)["endpoints"][0]["samples"] == 1


def test_a_200_mb_line_costs_no_copy_of_itself(tmp_path: Path) -> None:
    log = tmp_path / "big_decode_w0.out"
    with log.open("wb") as fh:
        fh.write(LINE.encode() + b"\n")
        block = b"x" * (8 << 20)
        for _ in range(25):
            fh.write(block)
        fh.write(b"\n" + STATS.format(md="08-06 12:35:06").encode() + b"\n")
    # a fresh parent whose only child is diag: RUSAGE_CHILDREN is then diag's own peak
    measure = ("import json, resource, subprocess, sys; "
               "r = subprocess.run([sys.executable, '-m', 'diag', 'tail', sys.argv[1], '--format', 'json'], "
               "capture_output=True, text=True); "
               "print(json.dumps([r.returncode, r.stdout, r.stderr, "
               "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss]))")
    res = subprocess.run([sys.executable, "-c", measure, str(log)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    code, out, err, peak_kb = json.loads(res.stdout)
    assert code == 0 and "Traceback" not in err, err[-500:]
    assert json.loads(out)["endpoints"][0]["samples"] == 2  # the records either side of the long line
    assert peak_kb / 1024 < 600, f"peak RSS {peak_kb / 1024:.0f} MB for a 200 MB line"


# ------------------------------------------------------------------ files that are not regular files

@pytest.mark.parametrize("cmd", [["tail"], ["watch", "--once"]])
def test_a_fifo_named_like_a_log_is_never_opened(tmp_path: Path, cmd: list[str]) -> None:
    fifo = tmp_path / "nodeY_decode_w1.out"
    os.mkfifo(fifo)
    alone = diag(*cmd, str(fifo), timeout=30)
    clean(alone)
    assert alone.returncode == 2 and "nodeY_decode_w1.out: a FIFO" in alone.stderr
    run = run_dir(tmp_path)
    os.mkfifo(run / "logs" / "nodeZ_prefill_w9.out")
    res = diag(*cmd, str(run), timeout=30)
    clean(res)
    assert res.returncode in (0, 1) and "prefill-w0" in res.stdout
    assert cmd[0] == "watch" or "nodeZ_prefill_w9.out: a FIFO" in res.stdout


def test_follow_skips_a_fifo_and_ends_on_sigterm(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    os.mkfifo(run / "logs" / "nodeZ_prefill_w9.out")
    proc = subprocess.Popen([sys.executable, "-m", "diag", "tail", str(run), "-f", "--format", "json"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_until_reading(proc.pid, run, timeout_s=60)   # its SIGTERM handler is set before the first read
    proc.terminate()
    out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "a FIFO" in json.dumps(skipped(json.loads(out)))


def _wait_until_reading(pid: int, run: Path, timeout_s: float) -> None:
    """Until the process has one of the run's files open (or has read them all once): a fixed sleep is too
    short on a loaded machine, where the interpreter alone can take seconds to start."""
    deadline = time.monotonic() + timeout_s
    fds = Path(f"/proc/{pid}/fd")
    while time.monotonic() < deadline:
        try:
            if any(str(run) in os.readlink(fd) for fd in fds.iterdir()):
                break
        except OSError:   # a descriptor closed while we looked
            pass
        time.sleep(0.05)
    time.sleep(1.0)       # a poll or two more, as a user's Ctrl-C would come


def test_directory_named_like_a_log_symlink_loops_and_rotated_copies_are_listed(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    logs = run / "logs"
    (logs / "nodeQ_decode_w7.out").mkdir()
    (logs / "a").symlink_to("b")
    (logs / "b").symlink_to("a")
    (logs / "up").symlink_to("..")  # a directory loop: not followed
    (logs / "gone_prefill_w5.out").symlink_to("nowhere")
    decode = next(logs.glob("*_decode_w0.out"))
    shutil.copy(decode, logs / (decode.name + ".1"))
    res = diag("tail", str(run), "--format", "json", timeout=30)
    clean(res)
    s = skipped(doc(res))
    assert res.returncode == 0
    assert s["nodeQ_decode_w7.out"] == "a directory named like a log"
    assert s["a"] == s["b"] == "a symlink loop" and s["gone_prefill_w5.out"] == "a broken symlink"
    assert s[decode.name + ".1"].startswith(f"a rotated copy of {decode.name}")
    assert doc(res)["endpoints"] == doc(diag("tail", str(HEALTHY), "--format", "json"))["endpoints"]


def test_ten_thousand_empty_files(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    for i in range(10_000):
        (run / "logs" / f"e{i}.log").touch()
    t0 = time.monotonic()
    res = diag("tail", str(run), timeout=120)
    clean(res)
    assert res.returncode == 0 and "skipped 9,980 more: empty file" in res.stdout
    assert len(res.stdout.splitlines()) < 200 and time.monotonic() - t0 < 60


def test_a_gzip_log_is_read_through_gzip(tmp_path: Path) -> None:
    run = run_dir(tmp_path)
    for log in (run / "logs").glob("*_decode_w0.out"):
        log.with_name(log.name + ".gz").write_bytes(gzip.compress(log.read_bytes()))
        log.unlink()
    res = diag("tail", str(run), "--format", "json")
    clean(res)
    want = doc(diag("tail", str(HEALTHY), "--format", "json"))
    assert [e["samples"] for e in doc(res)["endpoints"]] == [e["samples"] for e in want["endpoints"]]
    broken = run / "logs" / "nodeB_decode_w4.out.gz"
    broken.write_bytes(gzip.compress(LINE.encode() * 100)[:60])
    res = diag("tail", str(run))
    clean(res)
    assert res.returncode == 0 and "nodeB_decode_w4.out.gz: cannot read: broken gzip data" in res.stderr


# ------------------------------------------------------------------ output that cannot be written

def test_export_onto_a_file_or_an_uncreatable_path_is_one_line(tmp_path: Path) -> None:
    afile = tmp_path / "taken"
    afile.write_text("x")
    for target, why in ((afile, "is a file (give a directory)"), (afile / "sub", "not a directory")):
        res = diag("tail", str(HEALTHY), "--export", str(target))
        clean(res)
        assert res.returncode == 2 and why in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
@pytest.mark.parametrize("fmt", ["text", "json", "jsonl"])
def test_stdout_on_a_full_disk_is_one_line(fmt: str) -> None:
    with open("/dev/full", "w") as full:
        res = subprocess.run([sys.executable, "-m", "diag", "tail", str(HEALTHY), "--format", fmt], cwd=ROOT,
                             stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    clean(res)
    assert res.returncode == 2 and res.stderr.strip() == "diag: cannot write the output: No space left on device"


# ------------------------------------------------------------------ records and their times

def test_identical_stats_records_glued_on_one_line_count_once(tmp_path: Path) -> None:
    """One engine logs one stats line per interval: three copies of one record at the same second in
    one file are one sample (a glued copy), not three engines' worth of tok/s."""
    log = tmp_path / "g_decode_w0.out"
    log.write_text(LINE * 3 + "\n" + STATS.format(md="08-06 12:35:06") + "\n")
    ep = doc(diag("tail", str(log), "--format", "json"))["endpoints"][0]
    assert ep["samples"] == 2 and ep["stats"]["gen_tps_mean"] == 200.0 and ep["stats"]["prompt_tps_mean"] == 100.0


def test_the_year_guess_never_places_records_after_the_files_mtime(tmp_path: Path) -> None:
    log = tmp_path / "old_decode_w0.out"
    log.write_text(LINE + "\n")
    mtime = datetime(2025, 3, 1, tzinfo=UTC).timestamp()
    os.utime(log, (mtime, mtime))
    ep = doc(diag("tail", str(log), "--format", "json"))["endpoints"][0]
    assert ep["first_ts"].startswith("2024-08-06")  # August before the March mtime: the year before


def test_truncation_after_new_year_keeps_the_new_year(tmp_path: Path) -> None:
    from diag.follow import Follower

    log = tmp_path / "n_decode_w0.out"
    iso = "2025-12-31T23:58:00.000000Z  INFO dynamo_runtime::x: started\n"
    log.write_text(iso + "".join(STATS.format(md=md) + "\n" for md in ("12-31 23:59:40", "12-31 23:59:50",
                                                                           "01-01 00:00:00")))
    f = Follower([str(log)])
    f.poll()
    log.write_text(STATS.format(md="01-01 00:05:00") + "\n")  # truncated (shorter): read again from the start
    f.poll()
    f.flush()
    ts = sorted(r.ts for r in f.logs()[0].all_records() if r.kind == "stats")
    assert [t.year for t in ts] == [2025, 2025, 2026, 2026], ts


# ------------------------------------------------------------------ diag check on hostile YAML

BOMB = "\n".join(["a: &a [" + ",".join(['"lol"'] * 9) + "]"]
                 + [f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
                 + ["name: x", "resources: *i"]) + "\n"


@pytest.mark.parametrize("name, content, want", [
    ("bomb.yaml", BOMB.encode(), "alias bomb"),
    ("deep.yaml", ("name: x\nbackend: " + "[" * 10_000 + "]" * 10_000 + "\n").encode(), "nests too deeply"),
    ("types.yaml", b"name: x\nmodel: {path: 3}\nresources: {gpus_per_node: eight, prefill_workers: [1]}\n",
     "must be an integer"),
    ("binary.yaml", bytes(range(256)) * 20, "not UTF-8"),
])
def test_check_on_hostile_yaml(tmp_path: Path, name: str, content: bytes, want: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    res = diag("check", str(path), timeout=30)
    clean(res)
    assert res.returncode == 2 and want in res.stdout + res.stderr


# ------------------------------------------------------------------ metric sources that misbehave

@contextmanager
def server(mode: str) -> Iterator[int]:
    """A local HTTP endpoint on 127.0.0.1 that hangs, answers garbage, raw bytes or 500."""
    stop = threading.Event()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if mode == "hang":
                stop.wait(30)
                return
            if mode == "raw":
                self.wfile.write(bytes(range(256)) * 8)
                return
            self.send_response(500 if mode == "500" else 200)
            self.end_headers()
            self.wfile.write(b"oops" if mode == "500" else bytes(range(256)) * 20 + b"\x1b]0;title\x07\x1b[2J")

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv.server_address[1]
    finally:
        stop.set()
        srv.shutdown()
        srv.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("flag", ["--scrape", "--prom"])
@pytest.mark.parametrize("mode, why", [("closed", "cannot connect"), ("hang", "no response within"),
                                       ("garbage", ""), ("raw", ""), ("500", "500")])
def test_metric_sources_that_misbehave(flag: str, mode: str, why: str) -> None:
    @contextmanager
    def closed() -> Iterator[int]:
        yield _closed_port()

    with (closed() if mode == "closed" else server(mode)) as port:
        url = f"http://127.0.0.1:{port}/metrics" if flag == "--scrape" else f"http://127.0.0.1:{port}"
        t0 = time.monotonic()
        res = diag("tail", str(HEALTHY), flag, url, timeout=60)
        took = time.monotonic() - t0
    clean(res)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("diag tail:")]
    assert res.returncode == 2 and len(errors) == 1 and f"127.0.0.1:{port}" in errors[0], res.stderr
    assert why in errors[0] and len(errors[0]) <= 320 and errors[0].isprintable()
    assert "prefill-w0" in res.stdout  # the logs were still read and reported
    assert took < 20, f"{mode} took {took:.1f} s"


def test_a_short_literal_in_random_bytes_does_not_make_them_a_log(tmp_path: Path) -> None:
    """'UCX' (three characters, a record trigger) turns up in about one in a hundred 200 kB random files: such
    bytes are still binary, not a log."""
    import random

    data = bytearray(random.Random(7).randbytes(200_000))
    data[100_000:100_003] = b"UCX"
    junk = tmp_path / "nodeX_decode_w3.out"
    junk.write_bytes(bytes(data))
    res = diag("tail", str(junk))
    clean(res)
    assert res.returncode == 2 and "nodeX_decode_w3.out: binary file" in res.stderr
