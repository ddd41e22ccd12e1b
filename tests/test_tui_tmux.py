"""`diag watch` in a real terminal: a tmux session runs it, keys go in, capture-pane comes out.

Skips when tmux is not installed, unless DIAG_REQUIRE_TMUX=1 makes it mandatory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENDPOINTS = ("prefill-w0", "prefill-w1", "prefill-w2", "prefill-w3", "decode-w0")


@pytest.fixture
def tmux():
    exe = shutil.which("tmux")
    if exe is None:
        reason = "tmux is not installed (apt-get install -y tmux); this test drives diag watch in a real terminal"
        if os.environ.get("DIAG_REQUIRE_TMUX") == "1":
            pytest.fail(reason + " (DIAG_REQUIRE_TMUX=1: mandatory here)")
        pytest.skip(reason)
    sock = f"diag-watch-test-{os.getpid()}"

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run([exe, "-L", sock, "-f", "/dev/null", *args], capture_output=True, text=True,
                              check=check, timeout=20)

    yield run
    run("kill-server", check=False)


def _wait(cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return False


def test_watch_in_tmux_shows_endpoints_and_quits(tmux) -> None:
    env = f"env -u NO_COLOR TERM=xterm-256color COLUMNS= LINES= {sys.executable}"
    cmd = f"cd {ROOT} && {env} -m diag watch --now end samples/runs/prefill-bound"
    tmux("new-session", "-d", "-s", "w", "-x", "120", "-y", "40", cmd)

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "w", check=False).stdout

    assert _wait(lambda: "decode-w0" in screen()), screen()
    text = screen()
    for ep in ENDPOINTS:
        assert ep in text, text
    assert "DIAG-B001" in text and "LIMITS" in text and "quit" in text and "? help" in text
    assert text.lstrip().startswith("■ finished"), "a completed run is not live"

    tmux("send-keys", "-t", "w", "1")
    assert _wait(lambda: "window 1 min" in screen(), 10), screen()
    tmux("send-keys", "-t", "w", "?")
    assert _wait(lambda: "sparkline and plot window" in screen(), 10), screen()
    tmux("send-keys", "-t", "w", "Escape")
    assert _wait(lambda: "sparkline and plot window" not in screen(), 10), screen()

    tmux("send-keys", "-t", "w", "q")
    assert _wait(lambda: tmux("has-session", "-t", "w", check=False).returncode != 0, 15), "q did not quit"


def test_replay_in_tmux_through_the_plot_screens(tmux) -> None:
    """A fast replay in a real terminal: the run's plots, then an endpoint's, redrawn as it plays."""
    env = f"env -u NO_COLOR TERM=xterm-256color COLUMNS= LINES= {sys.executable}"
    cmd = f"cd {ROOT} && {env} -m diag watch --replay samples/runs/kv-exhaustion --speed 400"
    tmux("new-session", "-d", "-s", "p", "-x", "160", "-y", "48", cmd)

    def screen() -> str:
        return tmux("capture-pane", "-p", "-t", "p", check=False).stdout

    assert _wait(lambda: "decode-w0" in screen()), screen()
    tmux("send-keys", "-t", "p", "p")
    assert _wait(lambda: "prefill vs decode req/s" in screen() and "run · 5 endpoints" in screen(), 15), screen()
    assert _wait(lambda: "DIAG-K001 kv_usage 95 %" in screen(), 15), screen()
    text = screen()
    assert "running / waiting per role" in text and "preemptions per 10 s" in text
    assert _wait(lambda: "decode gen/OSL 1,024" in screen() and "prefill prompt/ISL 8,192" in screen(), 20), screen()
    assert "■ finished" not in screen() and "● live" not in screen(), "a replay is not live"
    tmux("send-keys", "-t", "p", "Escape")
    assert _wait(lambda: "prefill vs decode req/s" not in screen() and "findings" in screen(), 10), screen()
    tmux("send-keys", "-t", "p", "K")  # sort by KV %: the selection stays on the first row's endpoint
    assert _wait(lambda: "sort KV % ▼" in screen(), 10), screen()
    tmux("send-keys", "-t", "p", "g")
    assert _wait(lambda: "KV % per engine" in screen(), 15), screen()
    assert _wait(lambda: "replay finished" in screen() or "engine" in screen(), 30), screen()
    tmux("send-keys", "-t", "p", "Escape")
    assert _wait(lambda: "KV % per engine" not in screen(), 10), screen()
    tmux("send-keys", "-t", "p", "q")
    assert _wait(lambda: tmux("has-session", "-t", "p", check=False).returncode != 0, 15), "q did not quit"
