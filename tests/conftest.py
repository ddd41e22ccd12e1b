"""Shared test fixtures.

Tests that read the real recipes and logs in ../shared skip on a user's clone (where there is
no ../shared) and fail in CI, where `.ci/run` sets DIAG_REQUIRE_SHARED=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DIAG_SHARED", ROOT.parent / "shared"))
SAMPLES = ROOT / "samples"


def _shared_or_skip(sub: str) -> Path:
    path = SHARED / sub
    if path.is_dir():
        return path
    reason = f"{path} is absent: these tests read the real recipes/logs shipped beside the repo in ../shared"
    if os.environ.get("DIAG_REQUIRE_SHARED") == "1":
        pytest.fail(reason + " (DIAG_REQUIRE_SHARED=1: mandatory here)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return _shared_or_skip("")


@pytest.fixture(scope="session")
def real_logs() -> Path:
    return _shared_or_skip("samples/real-logs")


@pytest.fixture(scope="session")
def real_recipes() -> Path:
    return _shared_or_skip("samples/recipes")


@pytest.fixture(scope="session")
def samples_dir() -> Path:
    return SAMPLES


def _replay_selected(config: pytest.Config) -> bool:
    """Whether this session may run a test on the replay: the whole suite or one of its files named."""
    if "not prometheus" in (config.getoption("markexpr") or ""):
        return False
    args = [a for a in config.args if not a.startswith("-")]
    return any(Path(a).resolve() == ROOT / "tests" or "prometheus_al" in a for a in args) or not args


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The replay starts with the session, in the process that spawns the xdist workers: its real-time
    minute (the alert's ``for``) passes while the workers run other tests, and one server serves them all."""
    import shutil

    if hasattr(session.config, "workerinput") or os.environ.get(ENV_REPLAY) or not shutil.which("prometheus") \
            or not _replay_selected(session.config):
        return
    import contextlib
    import tempfile

    import prom_replay

    stack = contextlib.ExitStack()
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="diag-prom-replay-")))
    os.environ[ENV_REPLAY] = stack.enter_context(prom_replay.running(tmp)).to_env()
    session.config.stash[_REPLAY] = stack


def pytest_sessionfinish(session: pytest.Session) -> None:
    stack = session.config.stash.get(_REPLAY, None)
    if stack is not None:
        stack.close()
        os.environ.pop(ENV_REPLAY, None)


ENV_REPLAY = "DIAG_TEST_REPLAY"  # prom_replay.ENV, without importing it (and polars) in every session
_REPLAY = pytest.StashKey["object"]()


@pytest.fixture(scope="session")
def replayed(tmp_path_factory: pytest.TempPathFactory):
    """One real Prometheus for the session, scraping a replay of the prefill-bound scenario with the
    exported rules loaded (tests/prom_replay.py); yields a :class:`prom_replay.Replayed`. Started with the
    session (above) when the session selects its tests, else here on first use."""
    import prom_replay

    if os.environ.get(ENV_REPLAY):
        yield prom_replay.Replayed.from_env(os.environ[ENV_REPLAY])
        return
    with prom_replay.running(tmp_path_factory.mktemp("prom-replay")) as replay:
        yield replay
