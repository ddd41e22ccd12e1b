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


@pytest.fixture(scope="session")
def replayed(tmp_path_factory: pytest.TempPathFactory):
    """One real Prometheus for the session, scraping a replay of the prefill-bound scenario with the
    exported rules loaded (tests/prom_replay.py); yields a :class:`prom_replay.Replayed`."""
    import json

    import prom_replay

    logs = json.loads(prom_replay.diag("tail", str(prom_replay.RUN), "--format", "json").stdout)
    with prom_replay.start(tmp_path_factory.mktemp("prom-replay"), logs) as running:
        yield running
