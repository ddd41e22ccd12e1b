"""The endpoint table's refresh cost, held down without changing what it shows: ``LiveTable`` re-renders
only the cells that changed (Textual's DataTable re-renders every visible cell on any update), and the
collecting thread hands the screen ready cells (``render.with_table``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from test_tui_app import make_app, ready, rows
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from diag.tui import render
from diag.tui.render import shown_cells, table_cells
from diag.tui.table import LiveTable

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "samples" / "runs"
COLS = ("name", "a", "b", "c")


class Counted(Text):
    """A cell that counts how often a table renders it."""

    renders = 0

    def __rich_console__(self, console: Any, options: Any) -> Any:
        Counted.renders += 1
        return super().__rich_console__(console, options)


class Tables(App[None]):
    def __init__(self, table: DataTable[Any]) -> None:
        super().__init__()
        self.table = table

    def compose(self) -> ComposeResult:
        yield self.table


def grid(n: int, version: int) -> dict[str, list[Text]]:
    return {f"r{i}": [Counted(f"row {i}"), *(Counted(f"{100 * i + 10 * j + version:4d}", justify="right")
                                            for j in range(3))] for i in range(n)}


def fill(table: DataTable[Any], data: dict[str, list[Text]]) -> None:
    for c in COLS:
        table.add_column(c, key=c)
    for k, cells in data.items():
        table.add_row(*cells, key=k)


def lines(table: DataTable[Any]) -> list[list[Any]]:
    return [list(table.render_line(y)) for y in range(table.size.height)]


async def refresh_cost(table: DataTable[Any], change: Any) -> tuple[int, list[list[Any]]]:
    """How many cells a refresh after ``change(table)`` renders, and the lines it shows."""
    async with Tables(table).run_test(size=(60, 12)) as pilot:
        fill(table, grid(20, 0))
        await pilot.pause()
        table.refresh()  # painted once more now that it has the focus (the first paint had not)
        await pilot.pause()
        before = Counted.renders
        change(table)
        await pilot.pause()
        return Counted.renders - before, lines(table)


def test_a_changed_cell_re_renders_itself_not_the_table() -> None:
    new = Counted("  99", justify="right")
    cost, shown = asyncio.run(refresh_cost(LiveTable(), lambda t: t.update_rows({"r3": {"b": new}})))
    assert cost == 1
    assert "  99" in Text.assemble(*(s.text for s in shown[4])).plain  # header, r0, r1, r2, r3
    stock, _ = asyncio.run(refresh_cost(DataTable(), lambda t: t.update_cell("r3", "b", new)))
    assert stock >= 11 * 4, "Textual's DataTable re-renders every visible cell (why LiveTable exists)"


@pytest.mark.parametrize("width", [4, 9])  # as wide as the column, and wider: the column must grow
def test_updated_rows_show_what_a_table_rendered_from_scratch_shows(width: int) -> None:
    async def run() -> None:
        table = LiveTable(cursor_type="row")
        async with Tables(table).run_test(size=(60, 12)) as pilot:
            fill(table, grid(20, 0))
            table.move_cursor(row=2)
            await pilot.pause()
            table.refresh()  # painted with the focus: the caches hold what the update must drop
            await pilot.pause()
            changed = {f"r{i}": {"a": Text(f"{i:>{width}}", justify="right"), "c": Text("x" * width)}
                       for i in range(0, 20, 2)}
            table.update_rows(changed)
            await pilot.pause()
            updated = pilot.app.export_screenshot()  # what the terminal shows
            table.update_cell("r1", "name", Text("row 1"))  # the stock path: every cached render is dropped
            await pilot.pause()
            assert updated == pilot.app.export_screenshot()
            assert table.get_row("r4")[1].plain == f"{4:>{width}}" and table.get_row("r5")[1].plain == " 500"
            assert table.ordered_columns[1].content_width == max(4, width)

    asyncio.run(run())


def test_the_collecting_thread_hands_over_the_cells_for_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> None:
        app = make_app(RUNS / "prefill-bound")
        async with app.run_test(size=(200, 50)) as pilot:
            await ready(pilot)
            snap = app.snapshot
            assert snap is not None and snap.table is not None and snap.table.window == app.window
            fresh = table_cells(snap, app.window)
            assert {k: {c: t.plain for c, t in v.items()} for k, v in snap.table.cells.items()} == \
                   {k: {c: t.plain for c, t in v.items()} for k, v in fresh.cells.items()}
            assert shown_cells(snap, app.window) is snap.table
            other = shown_cells(snap, 60 if app.window != 60 else 5)
            assert other is not snap.table and other.window != app.window  # a new window: made on the spot
            shown = rows(app)
            assert {k: r["endpoint"] for k, r in shown.items()} == {k: k for k in snap.table.cells}

            def made_on_the_ui_thread(*_: Any) -> None:
                raise AssertionError("cells made on the UI thread")

            with monkeypatch.context() as m:
                m.setattr(render, "endpoint_cells", made_on_the_ui_thread)
                app.screen.show(replace(snap, seq=snap.seq + 1))  # prepared for this window: shown as is
                await pilot.pause()
            assert rows(app) == shown

    asyncio.run(run())
