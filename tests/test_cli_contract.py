"""The CLI contract every command shares: exit codes, option checks, config honoured, fast start-up,
one top-level import package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from schemas import validate

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]
RUN = "samples/runs/prefill-bound"          # warnings only: exit 0 at the default fail-on
CRASH = "samples/runs/engine-crash"         # errors
RECIPES = ROOT / "rules" / "catalog"        # not recipes: used where only a path is needed


def diag(*args: str, cwd: Path | None = None, stdin: str | None = None,
         columns: int | None = None) -> subprocess.CompletedProcess[str]:
    """``diag ARGS`` in this process (tests/helpers.run_diag); the tests below of what only a real process
    shows (start-up imports, a closed pipe, signals) start one."""
    env: dict[str, str | None] = {"NO_COLOR": None, "FORCE_COLOR": None}
    if columns is not None:  # the width rich lays help out for
        env["COLUMNS"] = str(columns)
    return run_diag(*args, cwd=cwd, env=env, input=stdin)


def _abs(p: str) -> str:
    return str(ROOT / p)


@pytest.mark.parametrize("args", [
    ["tail", RUN, "--heartbeat", "0"], ["tail", RUN, "-f", "--heartbeat", "-3"], ["tail", RUN, "--format", "yaml"],
    ["tail", RUN, "--fail-on", "loud"], ["tail", RUN, "--select", "Q999"], ["rules", "--scope", "bogus"],
    ["rules", "--format", "yaml"], ["watch", "--once", RUN, "--speed", "-1"], ["watch", "--once", RUN, "--interval", "0"],
    ["watch", "--once", RUN, "--window", "7"], ["watch", "--once", RUN, "--retain", "-5"],
    ["check", "samples", "--format", "xml"], ["explain", "Z999"], ["tail", "no/such/run"], ["watch", "--once", "nope"],
])
def test_bad_values_are_one_line_usage_errors(args: list[str]) -> None:
    res = diag(*args)
    assert res.returncode == 2, (args, res.returncode, res.stdout[-300:], res.stderr[-300:])
    assert "Traceback" not in res.stderr and res.stderr.strip(), args


def test_help_version_and_short_help() -> None:
    assert diag("-h").returncode == 0 and "tail" in diag("-h").stdout
    for cmd in ("tail", "check", "watch", "rules", "explain"):
        res = diag(cmd, "-h")
        assert res.returncode == 0 and "Usage" in res.stdout, cmd
    assert diag("--version").stdout.startswith("diag ")
    assert "--show-completion" in diag("--help").stdout


def test_flags_show_no_value_placeholder() -> None:
    out = diag("tail", "--help").stdout
    for line in out.splitlines():
        if "--follow" in line or "--exit-zero" in line:
            assert "<bool>" not in line, line


def test_explain_takes_the_short_code_in_any_case() -> None:
    full, short, lower = diag("explain", "DIAG-K001"), diag("explain", "K001"), diag("explain", "k001")
    assert full.returncode == short.returncode == lower.returncode == 0
    assert full.stdout == short.stdout == lower.stdout and "kv-cache-exhaustion" in full.stdout


def test_rules_json_has_the_envelope() -> None:
    doc = json.loads(diag("rules", "--format", "json").stdout)
    validate(doc, "rules")
    assert {r["code"] for r in doc["rules"]} >= {"DIAG-E001", "DIAG-K001", "DIAG-C002"}
    assert {r["code"]: r["health"] for r in doc["rules"]}["DIAG-E001"] == "DOWN"


def test_no_color_means_no_escapes() -> None:
    res = subprocess.run([sys.executable, "-m", "diag", "--no-color", "tail", RUN], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "200"})
    assert res.returncode == 0 and "prefill-bound" in res.stdout and "\x1b[" not in res.stdout


def test_a_closed_pipe_is_not_a_finding() -> None:
    """`diag tail RUN | head -1`: output stops quietly; the status is the run's (warnings only: 0)."""
    for run, want in ((RUN, 0), (CRASH, 1)):
        res = subprocess.run(f"{sys.executable} -m diag tail {run} --format jsonl | head -1; "
                             "echo \"status=${PIPESTATUS[0]}\"", shell=True, executable="/bin/bash",
                             capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert res.stdout.splitlines()[-1] == f"status={want}", (run, res.stdout[-200:], res.stderr[-500:])
        assert "Traceback" not in res.stderr and "BrokenPipe" not in res.stderr, res.stderr[-500:]


@pytest.mark.parametrize("fail_on, want_tail, want_check", [("info", 1, 1), ("never", 0, 0), ("error", 0, 0)])
def test_config_fail_on_is_honoured_by_every_command(tmp_path: Path, fail_on: str, want_tail: int,
                                                     want_check: int) -> None:
    """diag.toml's fail-on, read the same way by tail, tail -f (its exit), watch --once and check."""
    (tmp_path / "diag.toml").write_text(f'fail-on = "{fail_on}"\n')
    recipe = next(p for p in sorted((ROOT.parent / "shared" / "samples" / "recipes").rglob("*.yaml"))
                  ) if (ROOT.parent / "shared" / "samples" / "recipes").is_dir() else None
    assert diag("tail", _abs(RUN), cwd=tmp_path).returncode == want_tail
    assert diag("watch", "--once", "--now", "end", _abs(RUN), cwd=tmp_path).returncode == want_tail
    if recipe is not None:
        checked = diag("check", str(recipe), cwd=tmp_path)
        findings = json.loads(diag("check", str(recipe), "--format", "json", cwd=tmp_path).stdout)["findings"]
        rank = {"info": 0, "warning": 1, "error": 2}
        expect = 0 if fail_on == "never" else int(any(rank[f["severity"]] >= rank[fail_on] for f in findings))
        assert checked.returncode == expect
    # the command line wins over the file
    assert diag("tail", _abs(RUN), "--fail-on", "warning", cwd=tmp_path).returncode == 1
    assert diag("tail", _abs(RUN), "--fail-on", "warning", "--exit-zero", cwd=tmp_path).returncode == 0


def test_a_broken_config_fails_before_reading_logs(tmp_path: Path) -> None:
    (tmp_path / "diag.toml").write_text('fail-on = "sometimes"\n')
    for args in (["tail", _abs(RUN)], ["check", str(tmp_path)], ["watch", "--once", _abs(RUN)]):
        res = diag(*args, cwd=tmp_path)
        assert res.returncode == 2 and "fail-on" in res.stderr and "Traceback" not in res.stderr, args


def test_follow_exits_by_fail_on_like_batch() -> None:
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "diag", "tail", CRASH, "-f", "--format", "json"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    doc = json.loads(out)  # stdout holds exactly one JSON document
    validate(doc, "tail")
    assert doc["summary"]["findings"]["error"] > 0 and proc.returncode == 1, err[-500:]


def test_watch_once_with_a_failing_scrape_exits_2() -> None:
    res = diag("watch", "--once", RUN, "--scrape", "http://127.0.0.1:9/metrics")
    assert res.returncode == 2 and "127.0.0.1:9" in res.stderr
    res = diag("tail", RUN, "--scrape", "http://127.0.0.1:9/metrics")
    assert res.returncode == 2 and "127.0.0.1:9" in res.stderr


@pytest.mark.parametrize("args", [["--help"], ["rules"], ["explain", "K001"], ["check", "--help"], ["mcp", "--help"]])
def test_start_up_imports_no_heavy_library(args: list[str]) -> None:
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "diag", *args], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert res.returncode == 0, res.stderr[-500:]
    imported = {line.split("|")[-1].strip().split(".")[0] for line in res.stderr.splitlines() if "|" in line}
    heavy = imported & {"polars", "textual", "prometheus_api_client", "prometheus_client", "pandas", "numpy",
                        "requests", "mcp", "mcp_types", "anyio"}  # the MCP SDK: diag mcp's server only
    assert not heavy, f"diag {' '.join(args)} imports {sorted(heavy)}"


def test_the_wheel_installs_one_top_level_package(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-1000:]
    wheel = next(tmp_path.glob("diag-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"diag"}, tops
    for must in ("diag/parsers/ingest.py", "diag/rules/catalog/runtime.toml", "diag/engines/vllm/data/versions.toml",
                 "diag/schemas/tail.schema.json", "diag/tui/watch.tcss"):
        assert must in names, must
