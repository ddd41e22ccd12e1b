"""The plot screens of `diag watch`: the charts of :mod:`diag.tui.plotdata` drawn by plotext
(textual-plotext), computed in a worker thread so the screen opens at once."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.widgets import Footer, Static
from textual.worker import get_current_worker
from textual_plotext import PlotextPlot

from .plotdata import Chart, PlotSet, plot_set
from .screens import LiveScreen
from .state import Snapshot


class ChartPlot(PlotextPlot):
    """One :class:`Chart` drawn by plotext: findings' windows shaded first, then the lines, the
    threshold on top."""

    def __init__(self, key: str) -> None:
        super().__init__(id=f"plot-{key}", classes="chart")
        self.chart: Chart | None = None
        self._window: int | None = None

    @property
    def series_count(self) -> int:
        return len(self.chart.series) if self.chart else 0

    def draw(self, chart: Chart, window_min: int) -> None:
        if chart == self.chart and window_min == self._window:
            return  # the same data: nothing to redraw (a paused replay, a refresh without new points)
        self.chart, self._window = chart, window_min
        plt = self.plt
        plt.clear_figure()
        plt.title(chart.title)
        plt.xlim(-window_min, 0)
        plt.xlabel("minutes before now")
        top = chart.ymax
        if top is None:
            top = max((max(s.ys) for s in chart.series if s.ys), default=0.0) * 1.1 or 1.0
        plt.ylim(0, top)
        for span in chart.spans:
            plt.plot([span.x0, span.x1], [top, top], fillx=True, marker="░",
                     color="red" if span.severity == "error" else "orange" if span.severity == "warning" else "gray")
        for series in chart.series:
            if series.xs:
                plt.plot(list(series.xs), list(series.ys), marker="braille", color=series.color, label=series.label)
        for y, label in chart.hlines:
            plt.hline(y, "red")
            plt.text(label, x=-window_min, y=y, color="red", alignment="left")
        self.refresh()


class PlotScreen(LiveScreen):
    """Time series of one endpoint (or, ``None``, the whole run by role) over the selected window:
    prompt vs gen tok/s, running/waiting, KV % per engine with the K001 line, preemptions; the
    findings' windows shaded. The charts are computed in a worker; the screen opens at once."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back", key_display="esc"),
        Binding("space", "app.toggle_pause", "pause", key_display="space"),
        Binding("1", "app.window(1)", "window", key_display="1/5/15/60"),
        Binding("5", "app.window(5)", "5 min", show=False),
        Binding("6", "app.window(60)", "60 min", show=False),
    ]

    def __init__(self, endpoint: str | None) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.plots: PlotSet | None = None
        self.draws = 0

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(Text("computing plots…", style="dim"), id="plot-title")
        with Grid(id="plots"):
            for key in ("rate", "queues", "kv", "preempt"):
                yield ChartPlot(key)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._status()
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def on_resize(self) -> None:
        grid = self.query_one("#plots", Grid)
        width, height = self.app.size
        grid.styles.grid_size_columns = 2 if width >= 140 or height < 36 else 1
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def show(self, snap: Snapshot) -> None:
        self._status()
        columns = max((p.size.width for p in self.query(ChartPlot)), default=0) or self.app.size.width
        self._compute(snap, self.wapp.window, columns)

    @work(thread=True, exclusive=True, group="plots")
    def _compute(self, snap: Snapshot, window: int, columns: int) -> None:
        plots = plot_set(snap, self.endpoint, window, columns)  # one point per cell column
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self.draw, plots)

    def draw(self, plots: PlotSet) -> None:
        self.plots = plots
        self.draws += 1
        self.query_one("#plot-title", Static).update(Text(plots.title, style="bold"))
        for chart in plots.charts:
            self.query_one(f"#plot-{chart.key}", ChartPlot).draw(chart, plots.window_min)
