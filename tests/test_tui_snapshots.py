"""SVG snapshots of the `diag watch` main screen (pytest-textual-snapshot).

Deterministic: "now" is pinned to the end of the run, the run is read through a relative path from
the repository root, no poll happens after the first (interval 1 h), and the main screen has no
blinking cursor and no clock. Regenerate with ``pytest tests/test_tui_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.sources import FollowSource
from diag.tui.app import WatchApp
from diag.tui.screens import MainScreen
from diag.tui.state import WatchState

ROOT = Path(__file__).resolve().parents[1]


def _app(scenario: str) -> WatchApp:
    src = FollowSource([f"samples/runs/{scenario}"])
    src.label = f"following {scenario}"
    return WatchApp(WatchState(src, clock=lambda run: run.end), interval=3600.0)


async def _settled(pilot, agree: int = 3) -> None:
    """Wait until ``agree`` screenshots 0.1 s apart are the same: the layout settles in a few refreshes (the
    findings pane grows as they arrive, then the spare rows refill), later on a loaded machine than on an idle
    one, where a starved event loop can leave two shots alike while a refresh is still due."""
    shot, same = None, 0
    for _ in range(150):
        await pilot.pause(0.1)
        now = pilot.app.export_screenshot()
        same = same + 1 if now == shot else 0
        if same == agree - 1:
            return
        shot = now
    raise AssertionError("the screen did not settle in 15 s")


async def _loaded(pilot) -> None:
    while pilot.app.snapshot is None or not isinstance(pilot.app.screen, MainScreen):
        await pilot.pause(0.05)
    await _settled(pilot)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
@pytest.mark.parametrize("scenario", ["prefill-bound", "kv-exhaustion"])
def test_main_screen(snap_compare, monkeypatch: pytest.MonkeyPatch, scenario: str, size: tuple[int, int]) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert snap_compare(_app(scenario), terminal_size=size, run_before=_loaded)


async def _plots(pilot) -> None:
    from diag.tui.plotscreen import PlotScreen

    await _loaded(pilot)
    await pilot.press("down", "down", "down", "down", "g")
    while not isinstance(pilot.app.screen, PlotScreen) or pilot.app.screen.plots is None:
        await pilot.pause(0.05)
    await _settled(pilot)


@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["160x48", "80x24"])
def test_endpoint_plot_screen(snap_compare, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert snap_compare(_app("kv-exhaustion"), terminal_size=size, run_before=_plots)
