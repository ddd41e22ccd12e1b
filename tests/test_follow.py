"""`diag tail -f --format jsonl` on a run that grows while it is followed."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from schemas import validate

ROOT = Path(__file__).resolve().parents[1]
LINE = ("(APIServer pid=7) INFO 08-06 12:{mm:02d}:{ss:02d} [loggers.py:271] Engine {eng:03d}: Avg prompt throughput: "
        "{tps:.1f} tokens/s, Avg generation throughput: 10.0 tokens/s, Running: 4 reqs, Waiting: 1 reqs, "
        "GPU KV cache usage: 5.0%, Prefix cache hit rate: 0.0%\n")


def stats(i: int, eng: int = 0) -> str:
    return LINE.format(mm=i // 6, ss=(i % 6) * 10, eng=eng, tps=1000.0 + i)


class Follow:
    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "diag", "tail", "-f", "--format", "jsonl",
                                      "--heartbeat", "3600", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=ROOT)
        self.q: queue.Queue[dict] = queue.Queue()
        self.seen: list[dict] = []
        self.err: list[str] = []  # the status lines on stderr
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line.rstrip("\n"))

    def wait_err(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.err):
            assert time.monotonic() < deadline, f"no {text!r} on stderr within {timeout} s; saw {self.err}"
            time.sleep(0.05)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            row = json.loads(line)
            validate(row, "tail-jsonl")
            self.q.put(row)

    def wait_for(self, pred, timeout: float) -> tuple[dict, float]:
        start = time.monotonic()
        while True:
            left = timeout - (time.monotonic() - start)
            try:
                row = self.q.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise AssertionError(f"nothing matching within {timeout} s; saw {self.seen[-3:]}") from None
            self.seen.append(row)
            if pred(row):
                return row, time.monotonic() - start

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(timeout=30)
        finally:
            self.proc.kill()
            time.sleep(0.1)  # the stderr pump reads the last lines
        while not self.q.empty():
            self.seen.append(self.q.get())
        return rc


def _is_stats(tps: float):
    return lambda r: r.get("type") == "record" and r.get("kind") == "stats" and r.get("prompt_tps") == tps


def test_follow_appends_new_files_truncation(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    first = logs / "nodeA_prefill_w0.out"
    first.write_text(stats(0) + stats(1))
    f = Follow(str(tmp_path))
    try:
        f.wait_for(_is_stats(1001.0), 15)  # startup: the existing content
        latencies = []
        with first.open("a") as fh:
            for i in range(2, 8):
                fh.write(stats(i))
                fh.flush()
                _, dt = f.wait_for(_is_stats(1000.0 + i), 5)
                latencies.append(dt)
        second = logs / "nodeB_decode_w0.out"
        second.write_text(stats(20, eng=3))
        _, dt = f.wait_for(_is_stats(1020.0), 5)
        latencies.append(dt)
        first.write_text(stats(30))  # truncation: rewritten shorter from the start
        _, dt = f.wait_for(_is_stats(1030.0), 5)
        latencies.append(dt)
        with first.open("a") as fh:
            fh.write(stats(31)[:60])  # half a line: held until its newline arrives
            fh.flush()
            time.sleep(0.6)
            fh.write(stats(31)[60:])
        _, dt = f.wait_for(_is_stats(1031.0), 5)
        # each line shows within a poll or two: the median under 1 s, none past 3 s on a loaded CI machine
        # (bench/follow_bench.py measures the 1 s target itself on an idle one)
        assert sorted(latencies)[len(latencies) // 2] < 1.0 and max(latencies) < 3.0, latencies
    finally:
        rc = f.stop()
    assert rc == 0
    got = [r["prompt_tps"] for r in f.seen if r.get("type") == "record" and r.get("kind") == "stats"]
    want = [1000.0 + i for i in (0, 1, 2, 3, 4, 5, 6, 7, 20, 30, 31)]
    assert sorted(got) == sorted(want), got  # none lost, none twice
    assert any(r.get("type") == "source" and r["path"].endswith("nodeB_decode_w0.out") for r in f.seen)
    assert f.seen[-1]["type"] == "summary"
    assert {e["id"] for e in f.seen[-1]["endpoints"]} == {"prefill-w0", "decode-w0"}


def test_follow_idle_uses_little_cpu(tmp_path: Path) -> None:
    import resource

    (tmp_path / "nodeA_prefill_w0.out").write_text(stats(0))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    f = Follow(str(tmp_path))
    f.wait_for(_is_stats(1000.0), 15)
    time.sleep(3)
    f.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert cpu < 3.0 + 1.5  # startup (imports) plus a near-idle 3 s; a busy loop would burn ~3 s more


def test_follow_survives_rotation_and_deletion(tmp_path: Path) -> None:
    log = tmp_path / "nodeA_decode_w0.out"
    log.write_text(stats(0))
    f = Follow(str(tmp_path))
    try:
        f.wait_for(_is_stats(1000.0), 15)
        log.rename(tmp_path / "nodeA_decode_w0.out.1")  # rotation: a new file under the old name
        log.write_text(stats(1))
        f.wait_for(_is_stats(1001.0), 5)
        log.unlink()  # deletion: what was read stays, following goes on
        time.sleep(0.6)
        log.write_text(stats(2))
        f.wait_for(_is_stats(1002.0), 5)
    finally:
        rc = f.stop()
    assert rc == 0
    got = [r["prompt_tps"] for r in f.seen if r.get("type") == "record" and r.get("kind") == "stats"]
    assert sorted(got) == [1000.0, 1001.0, 1002.0]
    assert f.seen[-1]["type"] == "summary" and f.seen[-1]["endpoints"][0]["samples"] == 3


def test_follow_waits_for_a_run_directory_that_does_not_exist_yet(tmp_path: Path) -> None:
    """Like ``tail -F``: a run followed before its job starts is waited for, then read as it grows."""
    run = tmp_path / "outputs" / "5010467"
    f = Follow(str(run))
    try:
        f.wait_err(f"diag tail: waiting for {run} to appear", 60)
        (run / "logs").mkdir(parents=True)
        log = run / "logs" / "nodeA_decode_w0.out"
        log.write_text(stats(0))
        f.wait_for(_is_stats(1000.0), 15)
        with log.open("a") as fh:
            fh.write(stats(1))
        f.wait_for(_is_stats(1001.0), 15)
        f.wait_err(f"diag tail: {run} appeared; following it", 5)
    finally:
        rc = f.stop()
    assert rc == 0 and f.seen[-1]["type"] == "summary"
    assert [e["id"] for e in f.seen[-1]["endpoints"]] == ["decode-w0"]


def test_follow_of_a_path_that_never_appears_ends_like_a_batch_read_of_it(tmp_path: Path) -> None:
    f = Follow(str(tmp_path / "nope"))
    f.wait_err("to appear (like tail -F; Ctrl-C stops)", 60)
    assert f.stop() == 2
    assert f"diag tail: {tmp_path / 'nope'} never appeared" in f.err
    assert not [r for r in f.seen if r["type"] == "summary"]


def test_follow_of_an_empty_directory_waits_for_logs_and_ends_like_the_batch_read(tmp_path: Path) -> None:
    """The batch read of an empty directory is exit 2 ("no logs diag understands"); following it waits
    for logs to appear, says so, and when stopped with none read ends the same way (exit 2, same line)."""
    batch = subprocess.run([sys.executable, "-m", "diag", "tail", str(tmp_path)], capture_output=True, text=True,
                           cwd=ROOT, timeout=120)
    assert batch.returncode == 2 and f"diag tail: no logs diag understands in {tmp_path}" in batch.stderr
    f = Follow(str(tmp_path))
    f.wait_err(f"diag tail: no run logs in {tmp_path} yet; waiting for them to appear (Ctrl-C stops)", 60)
    assert f.stop() == 2
    assert f"diag tail: no logs diag understands in {tmp_path}" in f.err
    f = Follow(str(tmp_path))  # and a log that appears is followed
    try:
        f.wait_err("waiting for them to appear", 60)
        (tmp_path / "nodeA_prefill_w0.out").write_text(stats(0))
        f.wait_for(_is_stats(1000.0), 15)
        f.wait_err("diag tail: following 1 log (Ctrl-C stops)", 5)
    finally:
        assert f.stop() == 0


def _read_all(run: Path, monkeypatch, parallel_min: int) -> tuple[list, dict]:
    """One poll of a fresh follower over ``run``, the parallel catch-up switched on above ``parallel_min`` bytes."""
    import diag.follow as follow

    monkeypatch.setattr(follow, "PARALLEL_MIN_BYTES", parallel_min)
    f = follow.Follower([str(run)])
    recs, _, rows = f.poll()
    flushed, more = f.flush()
    return ([(k, r) for k, r in recs + flushed],
            {k: (s, kv) for k, s, kv in rows + more})


def test_a_backlog_is_read_on_threads_exactly_as_on_one(monkeypatch) -> None:
    """Catching up on an existing run reads its files in parallel (the batch read's speed); records come in file
    order and every record and row is the one the single-threaded read gives."""
    from polars.testing import assert_frame_equal

    run = ROOT / "samples" / "runs" / "kv-exhaustion"
    one_recs, one_rows = _read_all(run, monkeypatch, 1 << 62)
    par_recs, par_rows = _read_all(run, monkeypatch, 0)
    assert [(k, type(r).__name__, r.line) for k, r in par_recs] == [(k, type(r).__name__, r.line) for k, r in one_recs]
    assert par_recs == one_recs and len(one_recs) > 0
    assert one_rows.keys() == par_rows.keys() and one_rows
    for k, (s, kv) in one_rows.items():
        assert_frame_equal(par_rows[k][0], s)
        assert_frame_equal(par_rows[k][1], kv)


def test_a_held_back_line_is_due_after_the_hold(tmp_path: Path) -> None:
    """A followed file's last complete candidate waits HOLD_S for a continuation; the follower says when it is due,
    so the stream polls then instead of a whole poll interval later."""
    import diag.follow as follow

    log = tmp_path / "nodeA_prefill_w0.out"
    log.write_text(stats(0))
    f = follow.Follower([str(tmp_path)])
    f.poll()
    due = f.due_in()
    assert due is not None and 0 < due <= follow.HOLD_S
    time.sleep(due + 0.01)
    recs, _, rows = f.poll()
    assert f.due_in() is None   # parsed alone: nothing held
    assert sum(s.height for _, s, _ in rows) + len(recs) >= 1
