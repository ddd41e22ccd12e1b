"""The plot screens of `diag watch`: the charts of :mod:`diag.tui.plotdata` drawn by plotext
(textual-plotext's :class:`Plot`).

A refresh costs the UI thread almost nothing: a worker thread computes the charts' data and has plotext
draw each chart into terminal lines (:func:`draw_frame`); the UI thread only swaps the lines of the
charts that changed and repaints them. A chart whose data, window, size and theme are unchanged keeps
its lines (a paused replay, a refresh without new points), so it is neither rebuilt nor repainted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from io import StringIO
from typing import ClassVar

from rich.ansi import AnsiDecoder
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid
from textual.geometry import Size
from textual.strip import Strip
from textual.widgets import Footer, Static
from textual.worker import get_current_worker
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from diag.rules.present import compact

from .plotdata import Chart, PlotSet, plot_set, ticks
from .screens import LiveScreen
from .state import Snapshot

_CONSOLE = Console(file=StringIO(), width=1000, color_system="truecolor", legacy_windows=False)


def plot_chart(plt: Plot, chart: Chart, window_min: int, rows: int = 0) -> None:
    """The plotext calls of one chart: findings' windows shaded first, then the lines; a threshold is a
    line under them (plotext draws data over its lines); round ticks (``present.compact``). Nothing is
    written inside the data: the legend and the threshold's label go below (:func:`legend`)."""
    plt.clear_figure()
    plt.title(chart.title)
    plt.xlim(-window_min, 0)
    xt = ticks(-window_min, 0)
    plt.xticks(list(xt), [compact(x) for x in xt])
    top = chart.ymax or 1.0
    plt.ylim(0, top)
    yt = chart.yticks if rows >= 3 * len(chart.yticks) else chart.yticks[::2]  # a short chart: every other
    if yt:
        plt.yticks(list(yt), [compact(y) for y in yt])
    for span in chart.spans:
        plt.plot([span.x0, span.x1], [top, top], fillx=True, marker="░",
                 color="red" if span.severity == "error" else "orange" if span.severity == "warning" else "gray")
    for series in chart.series:
        if series.xs:
            plt.plot(list(series.xs), list(series.ys), marker="braille", color=series.color)
    for y, _ in chart.hlines:
        plt.hline(y, "red")


RICH_COLOUR = {"orange": "dark_orange", "gray": "grey50"}  # plotext's names rich does not know
LEGEND_LINES = 2


def legend(chart: Chart, width: int) -> list[Strip]:
    """The chart's key below its axes, at most LEGEND_LINES lines of ``width``: its thresholds first (a
    cut legend keeps them), each series' colour and label, and the shading of the findings' windows."""
    t = Text()
    for _, label in chart.hlines:
        if t:
            t.append("  ")
        t.append("── ", style="red")
        t.append(label)
    for series in chart.series:
        if t:
            t.append("  ")
        t.append("━━ ", style=RICH_COLOUR.get(series.color, series.color))
        t.append(series.label)
    if chart.spans:
        t.append("  ░ findings", style="dim")
    opts = _CONSOLE.options.update(width=max(1, width))
    strips = [_strip(line, width) for line in _CONSOLE.render_lines(t, opts, pad=True)]
    if len(strips) > LEGEND_LINES:  # the rest are cut: an ellipsis says so
        last = strips[LEGEND_LINES - 1].crop(0, max(0, width - 1))
        strips = [*strips[: LEGEND_LINES - 1], _strip([*last, Segment("…")], width)]
    return strips


_PLAIN = Style.null()


def _strip(segments: Iterable[Segment], width: int) -> Strip:
    """A line of ``width`` cells in which every segment has a style (textual's NO_COLOR filter reads each
    segment's colours: an unstyled one made the plot screens fail under NO_COLOR)."""
    return Strip([Segment(s.text, s.style or _PLAIN, s.control) for s in segments]).adjust_cell_length(width, _PLAIN)


@dataclass(frozen=True)
class Drawn:
    """One chart drawn for one window, size and theme: the terminal lines plotext made of it."""

    chart: Chart
    window_min: int
    size: Size
    theme: str
    lines: tuple[Strip, ...]

    def fits(self, chart: Chart, window_min: int, size: Size, theme: str) -> bool:
        return (self.size, self.window_min, self.theme) == (size, window_min, theme) and self.chart == chart

    @property
    def plain(self) -> str:
        return "\n".join(line.text for line in self.lines)


def draw_chart(chart: Chart, window_min: int, size: Size, theme: str) -> Drawn:
    """Have plotext draw ``chart`` at ``size`` (any thread: a fresh figure, no widget touched), its legend
    in the rows below it."""
    key = legend(chart, size.width)
    height = max(1, size.height - len(key))
    plt = Plot()
    plot_chart(plt, chart, window_min, height)
    plt.plotsize(size.width, height)
    plt._set_size(size.width, height)  # as textual-plotext's widget does: plotsize alone may not stick
    plt.theme(theme)
    lines = list(AnsiDecoder().decode(plt.build()))[:height]  # the build ends with a newline
    drawn = [_strip(line.render(_CONSOLE), size.width) for line in lines]
    return Drawn(chart, window_min, size, theme, tuple([*drawn, *key][: size.height]))


@dataclass(frozen=True)
class Frame:
    """What one refresh of a plot screen shows: the charts' data and, per chart key, its lines."""

    plots: PlotSet
    drawn: Mapping[str, Drawn]


def draw_frame(snap: Snapshot, endpoint: str | None, window_min: int, sizes: Mapping[str, Size], theme: str,
               before: Mapping[str, Drawn]) -> Frame:
    """The worker's part of a refresh: the charts (one point per cell column of the plot) and the lines
    of each chart that is not already drawn as it is in ``before``."""
    columns = max((s.width for s in sizes.values()), default=0)
    plots = plot_set(snap, endpoint, window_min, columns) if columns else plot_set(snap, endpoint, window_min)
    drawn: dict[str, Drawn] = {}
    for chart in plots.charts:
        size = sizes.get(chart.key, Size(0, 0))
        old = before.get(chart.key)
        if old is not None and old.fits(chart, window_min, size, theme):
            drawn[chart.key] = old
        elif size.area:
            drawn[chart.key] = draw_chart(chart, window_min, size, theme)
    return Frame(plots, drawn)


class ChartPlot(PlotextPlot):
    """One chart's lines as drawn by :func:`draw_chart` (textual-plotext's widget keeps the plotext
    theme in step with the app's; the drawing itself happens off the UI thread)."""

    def __init__(self, key: str) -> None:
        super().__init__(id=f"plot-{key}", classes="chart")
        self.key = key
        self.drawn: Drawn | None = None

    @property
    def chart(self) -> Chart | None:
        return self.drawn.chart if self.drawn else None

    @property
    def series_count(self) -> int:
        return len(self.drawn.chart.series) if self.drawn else 0

    @property
    def plain(self) -> str:
        return self.drawn.plain if self.drawn else ""

    @property
    def theme_name(self) -> str:
        return self._get_plotext_theme_name(self.app.theme)

    def show(self, drawn: Drawn | None) -> None:
        if drawn is not self.drawn:
            self.drawn = drawn
            self.refresh()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if self.drawn is None or y >= len(self.drawn.lines):
            return Strip.blank(width, _PLAIN)
        line = self.drawn.lines[y]
        return line if line.cell_length == width else line.adjust_cell_length(width, _PLAIN)

    def on_mount(self) -> None:  # beside textual-plotext's own handler, which registers the theme
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._redraw())

    def on_resize(self) -> None:
        self._redraw()

    def _redraw(self) -> None:
        """A new size or theme: the screen draws its charts again (once for all of them)."""
        screen = self.screen
        if isinstance(screen, PlotScreen):
            screen.redraw_soon()


class PlotScreen(LiveScreen):
    """Time series of one endpoint (or, ``None``, the whole run by role) over the selected window:
    prompt vs gen tok/s, running/waiting, KV % per engine with the K001 line, preemptions; the
    findings' windows shaded. The charts are computed and drawn in a worker; the screen opens at once."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back", key_display="esc"),
        Binding("space", "app.toggle_pause", "pause", key_display="space"),
        Binding("1", "app.window(1)", "min", key_display="1-60"),
        Binding("5", "app.window(5)", "5 min", show=False),
        Binding("6", "app.window(60)", "60 min", show=False),
    ]

    def __init__(self, endpoint: str | None) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.plots: PlotSet | None = None
        self.draws = 0
        self._redraw_pending = False

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(Text("computing plots…", style="dim"), id="plot-title")
        with Grid(id="plots"):
            for key in ("rate", "queues", "kv", "preempt"):
                yield ChartPlot(key)
        yield Static(id="toasts")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._status()
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def on_resize(self) -> None:
        width, height = self.app.size
        columns = 2 if width >= 140 or height < 36 else 1
        grid = self.query_one("#plots", Grid)
        if grid.styles.grid_size_columns != columns:
            grid.styles.grid_size_columns = columns  # the charts' own resize events redraw them

    def redraw_soon(self) -> None:
        """One redraw after the layout settles, however many charts were resized."""
        if not self._redraw_pending:
            self._redraw_pending = True
            self.call_after_refresh(self._redraw)

    def _redraw(self) -> None:
        self._redraw_pending = False
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def show(self, snap: Snapshot) -> None:
        self._status()
        charts = list(self.query(ChartPlot))
        sizes = {c.key: c.size for c in charts}
        if not any(size.area for size in sizes.values()):
            return  # not laid out yet: the charts' resize events draw them
        before = {c.key: c.drawn for c in charts if c.drawn is not None}
        theme = charts[0].theme_name if charts else "default"
        self._compute(snap, self.wapp.window, sizes, theme, before)

    @work(thread=True, exclusive=True, group="plots", description="plots")  # not repr(snapshot): seconds
    def _compute(self, snap: Snapshot, window: int, sizes: dict[str, Size], theme: str,
                 before: dict[str, Drawn]) -> None:
        frame = draw_frame(snap, self.endpoint, window, sizes, theme, before)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self.draw, frame)

    def draw(self, frame: Frame) -> None:
        """The UI thread's part: the title if it changed, the lines of the charts that changed."""
        self.plots = frame.plots
        self.draws += 1
        self.set_static("#plot-title", Text(frame.plots.title, style="bold", no_wrap=True, overflow="ellipsis"))
        for chart in self.query(ChartPlot):
            chart.show(frame.drawn.get(chart.key))
