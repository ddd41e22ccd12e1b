"""Bad input and output paths: one line on stderr and exit 2 before any work, never a traceback
(issue 24): report -o into a missing directory or onto a directory, check on a device or a FIFO, a
log behind a directory without the x bit (run as an unprivileged user through setpriv)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from diag.cli import app

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ROOT / "samples" / "runs" / "healthy"


def _run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize(("output", "why"), [
    ("/nonexistent/dir/r.html", "-o /nonexistent/dir/r.html: cannot write into /nonexistent/dir: "
                                "no such file or directory"),
    ("{tmp}", "-o {tmp}: is a directory (give a file name)"),
    ("{tmp}/file.txt/r.html", "-o {tmp}/file.txt/r.html: cannot write into {tmp}/file.txt: not a directory"),
])
@pytest.mark.parametrize("fmt", ["html", "json", "text"])
def test_report_output_is_checked_before_the_work(tmp_path: Path, output: str, why: str, fmt: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import diag.files

    def never(_paths: list[str]) -> None:
        raise AssertionError("the runs were read before the output path was checked")

    monkeypatch.setattr(diag.files, "find_runs", never)
    (tmp_path / "file.txt").write_text("x")
    code, out, err = _run("report", str(HEALTHY), "-o", output.format(tmp=tmp_path), "--format", fmt)
    assert (code, out, err) == (2, "", f"diag report: {why.format(tmp=tmp_path)}\n")


def test_tail_export_onto_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert _run("tail", str(HEALTHY), "--export", str(tmp_path / "f")) == (
        2, "", f"diag tail: --export {tmp_path / 'f'}: is a file (give a directory)\n")


def test_check_names_a_device_and_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "recipe.yaml"
    os.mkfifo(fifo)
    code, out, err = _run("check", "/dev/null", str(fifo))
    assert code == 2 and "no such file" not in out + err
    assert "/dev/null: a character device, not a regular file (not opened)" in out + err
    assert f"{fifo}: a FIFO, not a regular file (not opened)" in out + err


def _unprivileged() -> list[str] | None:
    """The command prefix that runs as nobody (None: not root, or no setpriv)."""
    if os.geteuid() == 0 and shutil.which("setpriv"):
        return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    return [] if os.geteuid() != 0 else None


@pytest.fixture
def locked_dir() -> Iterator[Path]:
    """A world-readable directory without the x bit holding a worker log (outside pytest's 0700 tmp)."""
    top = Path(tempfile.mkdtemp(prefix="diag-locked-"))
    os.chmod(top, 0o755)
    locked = top / "locked"
    locked.mkdir()
    shutil.copy(next((HEALTHY / "logs").glob("*_decode_w0.out")), locked / "n1_decode_w0.out")
    os.chmod(locked, 0o644)
    yield locked
    os.chmod(locked, 0o755)
    shutil.rmtree(top)


@pytest.mark.parametrize("command", ["tail", "check", "report", "watch"])
@pytest.mark.parametrize("arg", ["{d}/n1_decode_w0.out", "{d}/*.out"])
def test_a_log_behind_a_directory_without_the_x_bit(locked_dir: Path, command: str, arg: str) -> None:
    prefix = _unprivileged()
    if prefix is None:
        pytest.skip("running as root without setpriv: no unprivileged user to hit EACCES with")
    extra = ["--once"] if command == "watch" else ["--format", "json"] if command == "report" else []
    res = subprocess.run([*prefix, sys.executable, "-m", "diag", command, arg.format(d=locked_dir), *extra],
                         capture_output=True, text=True, timeout=120, cwd="/", env={**os.environ, "COLUMNS": "100"})
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    lines = (res.stderr + res.stdout).strip().splitlines()
    named = arg.format(d=locked_dir) if command == "check" else f"{locked_dir}/n1_decode_w0.out"  # check: no globs
    assert any(line.endswith(f"{named}: permission denied (a directory on its path cannot "
                             "be searched: its x bit is off)") for line in lines), lines
