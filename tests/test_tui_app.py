"""`diag watch` driven headless with Textual's Pilot: rows, badges, a finding appearing while the
run grows, pause, windows, filter, explain, drill-down, search, help, replay, NO_COLOR, quit."""

from __future__ import annotations

import asyncio
import functools
import io
import itertools
import os
import re
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from loading import replay
from rich.console import Console
from textual.widgets import DataTable, Footer, Input, Markdown, OptionList, Static

from diag.sources import FollowSource
from diag.tui.app import WatchApp
from diag.tui.dialogs import ExplainScreen, FilterScreen, HelpScreen
from diag.tui.screens import EndpointScreen, MainScreen
from diag.tui.state import WatchState

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "samples" / "runs"
STAMP = re.compile(rb"(\d\d-\d\d)[ T](\d\d:\d\d:\d\d)")


def sync(fn):
    """Run an async test without a pytest asyncio plugin."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


def make_app(run: Path, *, interval: float = 3600.0, clock=lambda r: r.end) -> WatchApp:
    src = FollowSource([str(run)])
    src.label = f"following {run.name}"
    return WatchApp(WatchState(src, clock=clock), interval=interval)


async def until(pilot, cond, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out waiting for the app"
        await pilot.pause(0.05)
    await pilot.pause()


async def ready(pilot) -> None:
    await until(pilot, lambda: pilot.app.snapshot is not None and isinstance(pilot.app.screen, MainScreen))


def rows(app: WatchApp) -> dict[str, dict[str, str]]:
    table = app.screen.query_one("#endpoints", DataTable)
    keys = [str(c.key.value) for c in table.ordered_columns]
    return {str(rk.value): {k: getattr(v, "plain", str(v)).strip() for k, v in zip(keys, table.get_row(rk),
                                                                                 strict=True)}
            for rk in table.rows}


def finding_codes(app: WatchApp) -> list[str]:
    ol = app.screen.query_one("#findings", OptionList)
    return [ol.get_option_at_index(i).prompt.plain.split()[3] for i in range(ol.option_count)]


def plain(renderable: object, width: int = 76) -> str:
    """A rich renderable as the text a terminal of ``width`` shows of it."""
    console = Console(width=width, no_color=True, file=io.StringIO())
    with console.capture() as cap:
        console.print(renderable)
    return cap.get()


def status(app: WatchApp) -> str:
    return str(app.screen.query_one("#status", Static).render())


def split_run(src: Path, dst: Path, cut: bytes) -> dict[Path, bytes]:
    """Copy a run, keep each log's lines before ``cut`` (MM-DD HH:MM:SS); return the rest per file."""
    shutil.copytree(src, dst)
    rest = {}
    for f in sorted((dst / "logs").iterdir()):
        if f.suffix not in (".out", ".log"):
            continue
        lines = f.read_bytes().splitlines(keepends=True)
        idx = next((i for i, line in enumerate(lines)
                    if (m := STAMP.search(line)) and m[1] + b" " + m[2] >= cut), len(lines))
        f.write_bytes(b"".join(lines[:idx]))
        rest[f] = b"".join(lines[idx:])
    return rest


EXPECTED = {
    # the side the verdict names limits; decode's recipe-capacity warning (K003) colours nothing
    "prefill-bound": {"prefill-w0": "LIMITS", "prefill-w1": "LIMITS", "prefill-w2": "LIMITS", "prefill-w3": "LIMITS",
                      "decode-w0": "OK"},
    # prefill's transfer errors after decode-w0 died are folded under the death: they colour nothing
    "engine-crash": {"prefill-w0": "OK", "prefill-w1": "OK", "prefill-w2": "OK", "prefill-w3": "OK",
                     "decode-w0": "DOWN"},
    "kv-exhaustion": {"prefill-w0": "OK", "prefill-w1": "OK", "prefill-w2": "OK", "prefill-w3": "OK",
                      "decode-w0": "CRIT"},
}


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
@sync
async def test_one_row_per_endpoint_with_health_badges(scenario: str) -> None:
    app = make_app(RUNS / scenario)
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        got = rows(app)
        assert {k: v["health"] for k, v in got.items()} == EXPECTED[scenario]
        assert got["decode-w0"]["role"] == "decode" and got["decode-w0"]["eng"] == "8"
        assert got["decode-w0"]["nodes"] == "n14,n15" if scenario == "prefill-bound" else True
        assert "job" in str(app.screen.query_one("#header", Static).render())


@sync
async def test_finding_appears_while_the_run_grows_and_pause_holds_it(tmp_path: Path) -> None:
    run = tmp_path / "engine-crash"
    rest = split_run(RUNS / "engine-crash", run, b"09-03 04:02:50")
    app = make_app(run, interval=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert status(app).startswith("● live"), "the run is still benchmarking"
        assert "DIAG-E001" not in finding_codes(app)
        assert rows(app)["decode-w0"]["health"] == "OK"
        await pilot.press("space")
        assert app.paused and "paused" in status(app)
        polls = app.polls
        for f, data in rest.items():
            with f.open("ab") as fh:
                fh.write(data)
        await pilot.pause(0.8)
        assert app.polls == polls, "paused: nothing is collected"
        assert "DIAG-E001" not in finding_codes(app)
        await pilot.press("space")
        assert not app.paused and "paused" not in status(app)
        await until(pilot, lambda: "DIAG-E001" in finding_codes(app))
        await until(pilot, lambda: rows(app)["decode-w0"]["health"] == "DOWN")
        assert app.polls > polls
        assert any("DIAG-E001" in t.text for t in app.toasts.values()), "a toast announces it"
        await until(pilot, lambda: status(app).startswith("■ finished"))  # the run failed: its logs are final


@sync
async def test_window_keys_filter_and_explain() -> None:
    app = make_app(RUNS / "kv-exhaustion")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert "window 5 min" in status(app)
        before = rows(app)["decode-w0"]["tps_spark"]
        await pilot.press("1")
        assert app.window == 1 and "window 1 min" in status(app)
        await pilot.press("5")
        assert app.window == 15
        await pilot.press("6")
        assert app.window == 60 and rows(app)["decode-w0"]["tps_spark"] != before
        await pilot.pause(1.1)
        await pilot.press("5")
        assert app.window == 5

        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        ol = app.screen.query_one(OptionList)
        ids = [ol.get_option_at_index(i).id for i in range(ol.option_count)]
        ol.highlighted = ids.index("role:decode")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        assert list(rows(app)) == ["decode-w0"] and "role=decode" in status(app)
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        ol = app.screen.query_one(OptionList)
        ol.highlighted = ids.index("sev:error")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        assert finding_codes(app) == ["DIAG-K001"]
        assert "filtered out" in str(app.screen.query_one("#findings-title", Static).render())

        await pilot.press("tab")
        assert app.focused is app.screen.query_one("#findings", OptionList)
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, ExplainScreen))
        md = app.screen.markdown()
        assert "DIAG-K001" in md and "## Why" in md and "What to change" in md and "This finding" in md
        assert app.screen.query_one(Markdown)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))

        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        app.screen.query_one(OptionList).highlighted = 0  # show everything
        await pilot.press("enter")
        await until(pilot, lambda: len(rows(app)) == 5)
        assert "no filter" in status(app)


@sync
async def test_endpoint_drilldown_search_help_and_quit() -> None:
    app = make_app(RUNS / "prefill-bound")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        table = app.screen.query_one("#endpoints", DataTable)
        assert app.focused is table
        await pilot.press("down", "down", "down", "down", "enter")
        await until(pilot, lambda: isinstance(app.screen, EndpointScreen))
        screen = app.screen
        assert screen.endpoint == "decode-w0"
        engines = screen.query_one("#engines", DataTable)
        assert engines.row_count == 8
        assert "decode-w0" in str(screen.query_one("#ep-title", Static).render())
        await pilot.press("slash")
        assert app.focused is screen.query_one("#search", Input)
        await pilot.press(*"kv_role")
        await until(pilot, lambda: screen.query_text == "kv_role")
        body = str(screen.query_one("#records", Static).render())
        assert "kv_role = kv_consumer" in body and "engine 3" not in body
        await pilot.press("escape")  # clears the search first
        assert screen.query_one("#search", Input).value == ""
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))

        await pilot.press("slash")  # search across every endpoint
        await until(pilot, lambda: isinstance(app.screen, EndpointScreen) and app.screen.endpoint is None)
        await pilot.press(*"architecture")
        await until(pilot, lambda: "prefill-w0" in str(app.screen.query_one("#records", Static).render()))
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))

        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


@sync
async def test_click_opens_an_endpoint() -> None:
    app = make_app(RUNS / "prefill-bound")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        table = app.screen.query_one("#endpoints", DataTable)
        await pilot.click(table, offset=(3, 2))  # row 1 (prefill-w1): highlight, then select
        await pilot.click(table, offset=(3, 2))
        await until(pilot, lambda: isinstance(app.screen, EndpointScreen))
        assert app.screen.endpoint == "prefill-w1"


@sync
async def test_replay_plays_a_finished_run_through_the_same_screen() -> None:
    src = replay(RUNS / "kv-exhaustion", speed=1200)
    app = WatchApp(WatchState(src), interval=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert "replay" in status(app)
        assert status(app).startswith("▶ replay") or app.snapshot.done, "a replay is never live"
        await until(pilot, lambda: app.snapshot is not None and app.snapshot.done, timeout=30)
        await until(pilot, lambda: status(app).startswith("■ replay ended"))
        assert "● live" not in status(app)
        await until(pilot, lambda: "DIAG-K001" in finding_codes(app))
        assert rows(app)["decode-w0"]["health"] == "CRIT"
        await pilot.press("space")
        assert src.clock.paused_at is not None, "pausing stops the replay clock"


@sync
async def test_no_color_turns_the_screen_monochrome(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(RUNS / "healthy")
    assert app.no_color
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert any(type(f).__name__ in ("Monochrome", "NoColor") for f in app.get_line_filters())


@sync
async def test_collection_runs_in_a_thread_worker_and_never_overlaps() -> None:
    app = make_app(RUNS / "healthy", interval=0.02)
    step = app.state.step
    calls = {"now": 0, "max": 0, "ui_thread": 0}
    ui = threading.get_ident()

    def traced(**kw):
        calls["now"] += 1
        calls["max"] = max(calls["max"], calls["now"])
        calls["ui_thread"] += threading.get_ident() == ui
        time.sleep(0.05)  # slower than the interval: a periodic timer would overlap
        try:
            return step(**kw)
        finally:
            calls["now"] -= 1

    app.state.step = traced  # type: ignore[method-assign]
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await until(pilot, lambda: app.polls >= 8)
    assert calls["max"] == 1 and calls["ui_thread"] == 0


class _Metrics(BaseHTTPRequestHandler):
    """A vLLM-like /metrics: two engines whose token counters grow on every scrape."""

    hits = 0

    def do_GET(self) -> None:
        type(self).hits += 1
        k = type(self).hits
        lines = []
        for name, typ, val in (("vllm:num_requests_running", "gauge", 3), ("vllm:num_requests_waiting", "gauge", 1),
                               ("vllm:kv_cache_usage_perc", "gauge", 0.4),
                               ("vllm:prompt_tokens_total", "counter", 500.0 * k),
                               ("vllm:generation_tokens_total", "counter", 2000.0 * k)):
            lines.append(f"# TYPE {name.removesuffix('_total')} {typ}")
            lines += [f'{name}{{engine="{e}",model_name="m"}} {val}' for e in ("0", "1")]
        body = ("\n".join(lines) + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@sync
async def test_scrape_sources_plug_in_beside_the_logs() -> None:
    from diag.prom import watch_sources
    from diag.sources import MultiSource

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        extras = watch_sources([f"decode-w7={url}", "http://127.0.0.1:9/metrics"], None)
        logs = FollowSource([str(RUNS / "healthy")])
        app = WatchApp(WatchState(MultiSource([logs, *extras])), interval=0.2)
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            await until(pilot, lambda: "decode-w7" in rows(app) and rows(app)["decode-w7"]["gen"] not in ("-", "0"))
            assert rows(app)["decode-w7"]["eng"] == "2"
            errors = app.screen.query_one("#errors", Static)
            assert errors.display and "127.0.0.1:9" in str(errors.render())
            assert "prefill-w0" in rows(app), "the log endpoints are still there"
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------ issue 17: sorting, focus, layout, toasts, plots
def column_keys(app: WatchApp) -> list[str]:
    return [str(c.key.value) for c in app.screen.query_one("#endpoints", DataTable).ordered_columns]


def cursor_key(app: WatchApp) -> str:
    return app.screen.selected_endpoint()


@sync
async def test_sort_by_keys_and_header_click_keeps_the_selection() -> None:
    app = make_app(RUNS / "prefill-bound")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert any(b.binding.description == "sort" for b in app.screen.active_bindings.values()), "in the footer"
        assert list(rows(app)) == ["prefill-w0", "prefill-w1", "prefill-w2", "prefill-w3", "decode-w0"]
        await pilot.press("down", "down", "down", "down")
        assert cursor_key(app) == "decode-w0"
        await pilot.press("H")  # health, worst first: the prefill rows LIMITS, decode-w0 OK
        assert list(rows(app))[-1] == "decode-w0" and "sort health ▼" in status(app)
        assert cursor_key(app) == "decode-w0", "the selection follows the endpoint"
        await pilot.press("H")
        assert next(iter(rows(app))) == "decode-w0" and cursor_key(app) == "decode-w0"
        await pilot.press("G")  # generation tok/s, largest first
        gens = [float(r["gen"].replace(",", "")) for r in rows(app).values()]
        assert gens == sorted(gens, reverse=True)
        app.refresh_views()  # a refresh keeps order and selection
        await pilot.pause()
        assert cursor_key(app) == "decode-w0" and [float(r["gen"].replace(",", "")) for r in rows(app).values()] == gens
        await pilot.press("N")
        assert list(rows(app)) == ["decode-w0", "prefill-w0", "prefill-w1", "prefill-w2", "prefill-w3"]
        table = app.screen.query_one("#endpoints", DataTable)
        await pilot.click(table, offset=(table.ordered_columns[0].get_render_width(table) + 2, 0))  # "health"
        await pilot.pause()
        assert app.screen.sort_key == "health" and "▼" in str(table.ordered_columns[1].label)
        assert cursor_key(app) == "decode-w0"


@sync
async def test_escape_returns_focus_to_the_table_and_slash_stays_a_key() -> None:
    app = make_app(RUNS / "kv-exhaustion")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        table = app.screen.query_one("#endpoints", DataTable)
        await pilot.press("tab")
        assert app.focused is app.screen.query_one("#findings", OptionList)
        await pilot.press("escape")
        assert app.focused is table
        await pilot.press("down", "down", "down", "down", "enter")
        await until(pilot, lambda: isinstance(app.screen, EndpointScreen))
        screen = app.screen
        box = screen.query_one("#search", Input)
        await pilot.press("slash", *"preempt")
        await until(pilot, lambda: screen.query_text == "preempt")
        await pilot.press("escape")
        assert box.value == "" and app.focused is screen.query_one("#engines", DataTable)
        await pilot.press("slash")
        assert app.focused is box and box.value == "", "the / after esc is a key, not typed into the box"
        await pilot.press(*"kv")
        assert box.value == "kv"
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        assert app.focused is app.screen.query_one("#endpoints", DataTable)


@sync
async def test_modal_screens_open_at_once_and_a_second_f_keeps_the_filter() -> None:
    app = make_app(RUNS / "kv-exhaustion")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        started = time.monotonic()
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        await pilot.press("f")
        await pilot.pause(0.2)
        assert isinstance(app.screen, FilterScreen), "a second f does not close the filter"
        assert time.monotonic() - started < 1.5
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("tab", "e")
        await until(pilot, lambda: isinstance(app.screen, ExplainScreen))
        # the dialog is up before the rule's text: a placeholder, then the Markdown from the worker
        assert app.screen.query("#explain-placeholder") or app.screen.query(Markdown)
        await until(pilot, lambda: bool(app.screen.query(Markdown)))
        assert not app.screen.query("#explain-placeholder")


def _overlaps(a, b) -> bool:
    return a.x < b.right and b.x < a.right and a.y < b.bottom and b.y < a.bottom


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
@sync
async def test_toasts_coalesce_per_code_cover_nothing_and_expire(size: tuple[int, int],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import diag.tui.app as app_mod
    from diag.rules.finding import Finding

    monkeypatch.setattr(app_mod, "TOAST_S", 1.5)
    app = make_app(RUNS / "kv-exhaustion")
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        findings = app.screen.query_one("#findings", OptionList)
        pane = findings.region
        burst = tuple(Finding("DIAG-N001", "nixl-transfer-failures", "warning", "m", endpoint=f"decode-w{i}")
                      for i in range(12))
        burst += tuple(Finding("DIAG-K001", "kv-cache-exhaustion", "error", "m", endpoint="decode-w0")
                       for _ in range(3))
        app.toast_findings(burst)
        app.toast_findings(burst[:2])  # the same code again within its toast's window: a counter
        await pilot.pause(0.1)
        assert app.toast_room() == (2 if size[1] < 30 else 3)
        texts = {code: t.text for code, t in app.toasts.items()}
        assert texts == {"DIAG-N001": "14 × DIAG-N001 opened: nixl-transfer-failures [decode-w1] +13 more",
                         "DIAG-K001": "3 × DIAG-K001 opened: kv-cache-exhaustion [decode-w0] +2 more"}
        bar = app.screen.query_one("#toasts", Static)
        assert bar.display and bar.region.height == 2 and str(bar.render()).count("opened") == 2
        for other in (findings, app.screen.query_one("#endpoints", DataTable)):
            assert not _overlaps(bar.region, other.region), (bar.region, other.region)
        assert findings.region.height == pane.height - 2, "the findings pane gives the toasts its rows"
        footer = app.screen.query_one(Footer)
        assert bar.region.bottom <= footer.region.y
        more = tuple(Finding(f"DIAG-X00{i}", "x", "warning", "m", endpoint="decode-w0") for i in range(1, 4))
        app.toast_findings(more)  # past the room: the oldest go, the status counts their openings
        await pilot.pause(0.1)
        assert len(app.toasts) == app.toast_room() and "DIAG-X003" in app.toasts
        assert app.unseen > 0 and "new findings (l: log)" in status(app)
        await until(pilot, lambda: not app.toasts, timeout=5)  # they expire
        assert not bar.display and findings.region.height == pane.height


@sync
async def test_a_fast_replay_raises_at_most_one_toast_per_code() -> None:
    reads = itertools.count()  # the replay's clock moves per read, not with the wall: a slow poll (a loaded
    src = replay(RUNS / "engine-crash", speed=3000,  # machine, the first poll's GC pass) cannot skip the run
                 monotonic=lambda: next(reads) * 0.05)
    app = WatchApp(WatchState(src), interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        seen: list[int] = []
        deadline = time.monotonic() + 30
        while not (app.snapshot and app.snapshot.done) and time.monotonic() < deadline:
            notes = [n for n in app._notifications if "opened" in n.title]
            seen.append(len(notes) - len({n.title.split()[-2] for n in notes}))
            await pilot.pause(0.05)
        assert app.snapshot is not None and app.snapshot.done
        assert len(seen) >= 3 and max(seen) == 0, "two toasts for one code"
        assert any(e.event in ("open", "start") for e in app.snapshot.log)


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
@sync
async def test_columns_give_way_by_priority(size: tuple[int, int]) -> None:
    from diag.tui.columns import COLUMNS, OPTIONAL

    app = make_app(RUNS / "prefill-bound")
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await pilot.pause()
        cols = column_keys(app)
        table = app.screen.query_one("#endpoints", DataTable)
        assert {"endpoint", "health", "prompt", "gen", "kv"} <= set(cols)
        assert table.virtual_size.width <= size[0], "no column is cut off at the right"
        if size == (200, 50):
            assert cols == [c.key for c in COLUMNS if c.key not in OPTIONAL], "TTFT/ITL: no histograms here"
        else:
            dropped = {c.key for c in COLUMNS} - set(cols)
            kept_priorities = [c.priority for c in COLUMNS if c.key in cols]
            assert dropped and all(c.priority >= max(kept_priorities) for c in COLUMNS if c.key in dropped)
            assert all(re.fullmatch(r"-|\d+[smhd]", r["age"]) for r in rows(app).values() if "age" in r)


@sync
async def test_plot_screens_draw_under_no_color() -> None:
    """NO_COLOR: textual's monochrome filter reads every segment's style; the charts and legends still draw
    (an unstyled padding segment failed the whole screen)."""
    from diag.tui.plotscreen import ChartPlot, PlotScreen

    os.environ["NO_COLOR"] = "1"
    try:
        app = make_app(RUNS / "kv-exhaustion")
        async with app.run_test(size=(120, 40)) as pilot:
            await ready(pilot)
            await pilot.press("p")
            await until(pilot, lambda: isinstance(app.screen, PlotScreen) and app.screen.plots is not None)
            await until(pilot, lambda: all(p.plain for p in app.screen.query(ChartPlot)))
            shot = app.export_screenshot()
            assert "decode-w0" in app.screen.query_one("#plot-kv", ChartPlot).plain and "<svg" in shot
    finally:
        del os.environ["NO_COLOR"]


@sync
async def test_plot_screens_draw_each_series() -> None:
    from diag.tui.plotscreen import ChartPlot, PlotScreen

    app = make_app(RUNS / "kv-exhaustion")
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PlotScreen) and app.screen.plots is not None)
        screen = app.screen
        counts = {p.chart.key: p.series_count for p in screen.query(ChartPlot)}
        assert counts == {"rate": 2, "queues": 4, "kv": 5, "preempt": 2}
        kv = screen.query_one("#plot-kv", ChartPlot)
        assert kv.chart.hlines[0][0] == 95.0 and kv.chart.spans
        drawn = kv.plain
        assert "DIAG-K001 kv_usage 95 %" in drawn and "░" in drawn and "decode-w0" in drawn
        draws = screen.draws
        await pilot.press("1")
        await until(pilot, lambda: screen.draws > draws and screen.plots.window_min == 1)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("down", "down", "down", "down", "g")
        await until(pilot, lambda: isinstance(app.screen, PlotScreen) and app.screen.plots is not None)
        counts = {p.chart.key: p.series_count for p in app.screen.query(ChartPlot)}
        assert counts == {"rate": 2, "queues": 2, "kv": 8, "preempt": 1}
        assert app.screen.endpoint == "decode-w0" and "engine 7" in app.screen.query_one("#plot-kv", ChartPlot).plain


@sync
async def test_findings_log_and_copy_to_the_clipboard() -> None:
    from diag.tui.logscreen import LogScreen

    app = make_app(RUNS / "kv-exhaustion")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await pilot.press("tab", "c")
        assert app.clipboard.startswith("DIAG-K001 kv-cache-exhaustion") and "evidence: " in app.clipboard
        assert "window: " in app.clipboard and "(15m)" in app.clipboard
        await pilot.press("escape", "l")
        await until(pilot, lambda: isinstance(app.screen, LogScreen))
        ol = app.screen.query_one("#log", OptionList)
        assert ol.option_count == len(app.snapshot.log) >= 4
        ol.highlighted = ol.option_count - 1
        await pilot.press("c")
        assert app.clipboard.startswith(app.screen.entries[-1].f.code)
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = plain(app.screen.query_one("#help", Static).content)
        assert "12s, 4m, 3h" in text and "seconds since" not in text


@sync
async def test_plot_charts_are_drawn_off_the_ui_thread_and_only_when_they_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import diag.tui.plotscreen as plotscreen
    from diag.tui.plotscreen import ChartPlot, PlotScreen
    from diag.tui.state import Snapshot

    formatted: list[int] = []  # Textual names a worker by repr(args) unless told: seconds for a 24 h snapshot
    monkeypatch.setattr(Snapshot, "__repr__", lambda self: formatted.append(self.seq) or "Snapshot")
    threads: list[int] = []
    go = threading.Event()  # the worker's drawing waits until the placeholder was seen
    draw_chart = plotscreen.draw_chart

    def drawing(*args):
        threads.append(threading.get_ident())
        go.wait(20)
        return draw_chart(*args)

    monkeypatch.setattr(plotscreen, "draw_chart", drawing)
    app = make_app(RUNS / "kv-exhaustion")
    async with app.run_test(size=(160, 50)) as pilot:
        await ready(pilot)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PlotScreen) and bool(threads))
        assert "computing plots" in str(app.screen.query_one("#plot-title", Static).render()), "opens at once"
        assert not any(c.drawn for c in app.screen.query(ChartPlot))
        go.set()
        await until(pilot, lambda: isinstance(app.screen, PlotScreen)
                    and all(c.drawn and c.drawn.size == c.size for c in app.screen.query(ChartPlot)))
        screen = app.screen
        charts = list(screen.query(ChartPlot))
        for c in charts:  # plotext's lines at the widget's size, shown as they are
            assert len(c.drawn.lines) == c.size.height and {s.cell_length for s in c.drawn.lines} == {c.size.width}
            assert c.render_line(0) is c.drawn.lines[0]
        assert threads and threading.get_ident() not in threads
        assert formatted == [], "the snapshot was formatted for a worker's name"
        kept, built, draws = {c.key: c.drawn for c in charts}, len(threads), screen.draws
        app.refresh_views()  # the same snapshot again: nothing to draw
        await until(pilot, lambda: screen.draws > draws)
        assert len(threads) == built and all(c.drawn is kept[c.key] for c in charts)
        await pilot.resize_terminal(100, 40)  # a new size: every chart drawn again at its own
        await until(pilot, lambda: all(c.drawn and c.drawn.size == c.size != kept[c.key].size for c in charts))
        assert len(threads) >= built + len(charts)
        assert all(len(c.drawn.lines) == c.size.height for c in charts)
        theme = charts[0].drawn.theme
        app.theme = "textual-light" if app.theme != "textual-light" else "textual-dark"  # the colours follow
        await until(pilot, lambda: all(c.drawn and c.drawn.theme == c.theme_name != theme for c in charts))


@sync
async def test_the_first_poll_is_frozen_and_full_collections_wait_for_the_collecting_thread() -> None:
    import gc

    threshold = gc.get_threshold()
    app = make_app(RUNS / "kv-exhaustion")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        points = sum(len(e.series) for e in app.snapshot.endpoints)
        assert points > 100 and app.frozen >= gc.get_freeze_count() > points, "the ring points are frozen"
        assert gc.get_threshold()[:2] == threshold[:2] and gc.get_threshold()[2] >= 1_000_000
        ran = app.full_gc_at
        app.full_gc_at -= 61  # a minute on: the next poll runs the full pass
        app._collect()
        await until(pilot, lambda: app.full_gc_at > ran)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold, "the collector's own rhythm back"


# ------------------------------------------------------------------ issue 22: the TUI's presentation
@sync
async def test_cascaded_findings_fold_under_the_engine_death_that_caused_them() -> None:
    app = make_app(RUNS / "engine-crash")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        codes = finding_codes(app)
        assert codes.count("DIAG-E001") == 1 and "DIAG-E002" not in codes and "DIAG-E003" not in codes
        ol = app.screen.query_one("#findings", OptionList)
        cause = ol.get_option_at_index(codes.index("DIAG-E001")).prompt.plain
        assert "↳ caused 4 × DIAG-E002 kv-transfer-failure (error) on prefill-w0, prefill-w1, prefill-w2, " \
               "prefill-w3" in cause
        assert "↳ caused 4 × DIAG-E003 kv-lease-expired (warning) on prefill-w0" in cause
        await pilot.press("f")  # a role filter keeps the cause of a prefill row's findings
        await until(pilot, lambda: isinstance(app.screen, FilterScreen))
        ol = app.screen.query_one(OptionList)
        ol.highlighted = [ol.get_option_at_index(i).id for i in range(ol.option_count)].index("role:prefill")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, MainScreen))
        assert "DIAG-E001" in finding_codes(app)


@sync
async def test_endpoint_detail_shows_timed_records_marks_the_dead_engine_and_wraps() -> None:
    app = make_app(RUNS / "engine-crash")
    async with app.run_test(size=(100, 40)) as pilot:
        await ready(pilot)
        await pilot.press("down", "down", "down", "down", "enter")
        await until(pilot, lambda: isinstance(app.screen, EndpointScreen))
        screen = app.screen
        title = str(screen.query_one("#ep-title", Static).render())
        assert "8 engines (1 dead: DP5)" in title
        engines = screen.query_one("#engines", DataTable)
        names = [engines.get_row_at(i)[0].plain for i in range(engines.row_count)]
        assert names[5] == "5 dead 04:03:01" and all("dead" not in n for i, n in enumerate(names) if i != 5)
        recs = app.snapshot.records["decode-w0"]
        assert recs and all(r.ts is not None for r in recs), "timed records only"
        body = screen.query_one("#records", Static)
        text = str(body.render())
        assert text.startswith("09-03 04:03:41 fault     shutdown_signal") and "-------------- stage" not in text
        assert any(r.kind == "stage" and r.text.startswith("stage ") for r in recs), "stage marks described"
        await pilot.pause()
        assert body.size.width <= 100 and body.virtual_size.width <= 100, "long lines wrap, no sideways scroll"
        assert body.virtual_size.height > len(recs), "the long fault lines take more than a row each"


@sync
async def test_latency_quantiles_in_the_table_and_the_detail() -> None:
    app = make_app(ROOT / "samples" / "telemetry" / "prefill-bound-tachometer")
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        got = rows(app)
        assert got["prefill-w0"]["ttft"] == "149 s" and got["decode-w0"]["itl"] == "0.0433 s"
        assert got["decode-w0"]["ttft"] == "-"
        await pilot.press("down", "down", "down", "down", "enter")
        await until(pilot, lambda: isinstance(app.screen, EndpointScreen))
        assert "ITL p90 0.0433 s" in str(app.screen.query_one("#ep-title", Static).render())


@sync
async def test_s_saves_an_svg_screenshot_and_toasts_its_path(tmp_path: Path) -> None:
    app = make_app(RUNS / "prefill-bound")
    app.screenshot_dir = str(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("s")
        await until(pilot, lambda: any(tmp_path.glob("*.svg")))
        (svg,) = tmp_path.glob("*.svg")
        assert svg.read_text().startswith("<svg") and "prefill-w0" in svg.read_text()
        toast = next(t for t in app.toasts.values())
        assert toast.text == f"screenshot saved to {svg}"
        assert str(app.screen.query_one("#toasts", Static).render()).startswith("· screenshot saved to ")


@sync
async def test_the_80_column_footer_keeps_quit_and_help() -> None:
    app = make_app(RUNS / "prefill-bound")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        footer = app.screen.query_one(Footer)
        keys = [w for w in footer.children]
        assert keys, "the footer shows keys"
        assert all(w.region.right <= 80 for w in keys), [(str(w.render()), w.region) for w in keys]
        shown = " ".join(str(w.render()) for w in keys)
        assert "quit" in shown and "help" in shown and "sort" in shown


@sync
async def test_a_tall_screen_fills_the_rows_the_findings_leave() -> None:
    app = make_app(RUNS / "prefill-bound")
    async with app.run_test(size=(200, 50)) as pilot:
        await ready(pilot)
        events = app.screen.query_one("#events", Static)
        await until(pilot, lambda: events.display)
        findings = app.screen.query_one("#findings", OptionList)
        # the events pane is re-filled after the layout settles (the findings pane grows as they arrive)
        await until(pilot, lambda: len(str(events.render()).splitlines()) == events.region.height)
        assert findings.region.height == findings.virtual_size.height, "the findings whole, no empty rows"
        assert events.region.y == findings.region.bottom and events.region.bottom == app.screen.query_one(
            Footer).region.y
        lines = str(events.render()).splitlines()
        assert lines[0].startswith("latest events") and len(lines) == events.region.height
        assert all(re.match(r"\d\d-\d\d \d\d:\d\d:\d\d \S+", line) for line in lines[1:])
    small = make_app(RUNS / "prefill-bound")
    async with small.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.pause(0.2)
        assert not small.screen.query_one("#events", Static).display, "no room: the findings keep it all"


@sync
async def test_plot_legends_sit_below_the_axes_and_ticks_are_round() -> None:
    from diag.tui.plotscreen import ChartPlot, PlotScreen

    app = make_app(RUNS / "kv-exhaustion")
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await pilot.press("p")
        await until(pilot, lambda: isinstance(app.screen, PlotScreen)
                    and all(c.drawn for c in app.screen.query(ChartPlot)))
        for chart in app.screen.query(ChartPlot):
            lines = chart.plain.splitlines()
            axis = max(i for i, line in enumerate(lines) if "└" in line)
            labels = [s.label for s in chart.chart.series]
            below = " ".join(lines[axis + 1:])
            above = "\n".join(lines[: axis + 1])
            assert labels[0].split()[0] in below, (chart.key, lines)
            assert "━━" not in above and "⢕⢕" not in above, "no legend over the data"
            assert not re.search(r"\d\.\d{2,}|\d{5,}", above.replace("DIAG-K001", "")), "round ticks"
