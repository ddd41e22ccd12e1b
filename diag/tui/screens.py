"""Screens of `diag watch`: thin views that redraw themselves from a :class:`Snapshot`."""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple, Protocol, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from diag.rules.present import HEALTH_STYLE, SEVERITY_STYLE, number

from .columns import COLUMN, COLUMNS, OPTIONAL, blank_columns, empty_columns, fit_columns, verdict_columns
from .render import (
    ENGINE_COLUMNS,
    age_text,
    badge,
    engine_cells,
    finding_text,
    header_text,
    latency_text,
    record_text,
    shown_cells,
    sort_rows,
)
from .state import FindingRow, Snapshot
from .table import LiveTable

RECORDS_SHOWN = 300
SPARE_MIN = 6  # rows the findings leave empty before the latest events fill them


def events_text(snap: Snapshot, lines: int, width: int) -> Text:
    """A title and the ``lines`` latest timed events of every endpoint (no stats lines), newest first."""
    recs = [r for r in reversed(snap.all_records()) if r.tone != "stats" and r.ts is not None][:lines]
    t = Text("latest events, every endpoint (enter: one endpoint's records)", style="bold")
    for r in recs:
        line = record_text(r, with_endpoint=True)
        line.truncate(width, overflow="ellipsis")
        t.append("\n")
        t.append_text(line)
    return t
SCROLLBAR = 2  # a vertical scrollbar's width, kept free when the table scrolls


class WatchHost(Protocol):
    """What the screens need of the app that hosts them (``WatchApp``); screens do not import it."""

    snapshot: Snapshot | None
    window: int

    def status(self, extra: str = "", width: int = 0) -> str: ...

    def visible_endpoints(self, snap: Snapshot) -> list[Any]: ...

    def visible_findings(self, snap: Snapshot) -> list[FindingRow]: ...

    def action_explain(self, row: FindingRow | None) -> None: ...

    def action_open_endpoint(self, eid: str | None, search: bool = False) -> None: ...

    def action_plots(self, eid: str | None) -> None: ...

    def copy_finding(self, row: FindingRow | None) -> None: ...


class Toast(NamedTuple):
    """A toast line: a finding code's openings (``count``) or a notification (count 0), until ``expiry``
    (monotonic seconds)."""

    text: str
    severity: str
    count: int
    expiry: float


def toast_text(toasts: tuple[Toast, ...]) -> Text:
    lines = [Text(("▲ " if t.count else "· ") + t.text, style=SEVERITY_STYLE.get(t.severity, ""),
                  no_wrap=True, overflow="ellipsis") for t in toasts]
    return Text("\n", no_wrap=True, overflow="ellipsis").join(lines)


class LiveScreen(Screen[None]):
    """A screen that redraws from each new snapshot; its toasts take a line each above its footer
    (its main pane gives them the room: they never cover it)."""

    @property
    def wapp(self) -> WatchHost:
        return cast(WatchHost, self.app)

    def show(self, snap: Snapshot) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def set_static(self, selector: str, content: str | Text) -> None:
        """Show ``content`` in a Static only when it differs from what it shows (an update re-lays out
        the screen: a refresh that changes nothing must cost nothing)."""
        shown: dict[str, str | Text] = self.__dict__.setdefault("_static_content", {})
        if shown.get(selector) != content:
            shown[selector] = content
            self.query_one(selector, Static).update(content)

    def status_width(self) -> int:
        """The status line's cells (its padding is one cell each side)."""
        return max(1, self.app.size.width - 2)

    def _status(self) -> None:
        self.set_static("#status", self.wapp.status(width=self.status_width()))

    def show_toasts(self, toasts: tuple[Toast, ...]) -> None:
        bar = self.query("#toasts").results(Static)
        widget = next(bar, None)
        if widget is not None:
            widget.display = bool(toasts)
            self.set_static("#toasts", toast_text(toasts))

    def on_screen_resume(self) -> None:
        self.show_toasts(tuple(getattr(self.app, "toasts", {}).values()))


def _fill(table: LiveTable, rows: list[tuple[str, list[Any]]], keys: list[str], keep: str | None = None
          ) -> list[str]:
    """Update a table in place when its rows are the same, else rebuild it with the cursor on the
    row it was on (or ``keep``): the selection follows the endpoint, not the position."""
    new = [k for k, _ in rows]
    cols = table.ordered_columns
    shown: dict[str, list[Any]] = table.__dict__.setdefault("_diag_cells", {})  # what each row shows now
    if new == keys and table.row_count == len(new):
        changes: dict[str, dict[str, Any]] = {}
        for k, cells in rows:  # only the cells that changed: the others keep their rendering
            before = shown.get(k, [])
            changed = {str(col.key.value): cell for i, (col, cell) in enumerate(zip(cols, cells, strict=False))
                       if i >= len(before) or before[i] != cell}
            if changed:
                changes[k] = changed
            shown[k] = list(cells)
        table.update_rows(changes)
        return keys
    shown.clear()
    shown.update({k: list(cells) for k, cells in rows})
    current = keep or (keys[table.cursor_row] if keys and 0 <= table.cursor_row < len(keys) else None)
    table.clear()
    for k, cells in rows:
        table.add_row(*cells, key=k)
    if current in new:
        table.move_cursor(row=new.index(current), animate=False)
    return new


SORT_KEYS = "".join(c.sort for c in COLUMNS)


class MainScreen(LiveScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("H", "sort('health')", "sort", key_display="⇧A-Z"),
        *(Binding(c.sort, f"sort('{c.key}')", f"sort by {c.label}", show=False) for c in COLUMNS
          if c.key != "health"),
        Binding("g", "plots", "plots"),
        Binding("p", "app.plots(None)", "run plots", show=False),
        Binding("l", "app.findings_log", "log"),
        Binding("f", "app.filter", "filter"),
        Binding("e", "explain", "explain", show=False),
        Binding("c", "copy", "copy", show=False),
        Binding("slash", "search", "search", key_display="/"),
        Binding("space", "app.toggle_pause", "pause", key_display="space"),
        Binding("1", "app.window(1)", "min", key_display="1-60"),
        Binding("5", "app.window(5)", "5 min", show=False),
        Binding("6", "app.window(60)", "60 min", show=False),
        Binding("escape", "focus_table", "table", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(id="header")
        yield Static(id="errors")
        yield LiveTable(id="endpoints", cursor_type="row")
        yield Static(id="findings-title")
        yield OptionList(id="findings")
        yield Static(id="events")
        yield Static(id="toasts")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sort_key: str | None = None
        self.sort_desc = False
        self.columns: list[str] = []
        self._signature: tuple[Any, ...] = ()
        self._keys: list[str] = []
        self._rows: list[FindingRow] = []
        self._spare: tuple[int, int] = (0, 0)
        self._status()
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)
        self.query_one("#endpoints", DataTable).focus()

    def _status(self) -> None:
        extra = f"sort {COLUMN[self.sort_key].label} {'▼' if self.sort_desc else '▲'}" if self.sort_key else ""
        self.set_static("#status", self.wapp.status(extra, self.status_width()))

    def _label(self, key: str) -> Text:
        c = COLUMN[key]
        arrow = (" ▼" if self.sort_desc else " ▲") if key == self.sort_key else ""
        return Text(c.label + arrow, justify=c.justify)  # type: ignore[arg-type]

    def show(self, snap: Snapshot) -> None:
        app = self.wapp
        self._status()
        width = max(20, self.app.size.width - 2)
        self.set_static("#header", header_text(snap, width, 4))
        errors = self.query_one("#errors", Static)
        errors.display = bool(snap.errors)
        if snap.errors:
            more = f" (+{len(snap.errors) - 2} more)" if len(snap.errors) > 2 else ""
            errors.update(Text("⚠ " + " · ".join(snap.errors[:2]) + more, style="bold red"))
        self._show_table(snap)
        vis = app.visible_findings(snap)
        n_open = sum(fr.state == "open" for fr in vis)
        hidden = len(snap.findings) - len(vis)
        self.set_static("#findings-title", Text(
            f"findings  {number(n_open)} open · {number(len(vis) - n_open)} closed"
            + (f" · {number(hidden)} filtered out" if hidden else ""), no_wrap=True, overflow="ellipsis"))
        ol = self.query_one("#findings", OptionList)
        keep = self._rows[ol.highlighted].key if self._rows and ol.highlighted is not None \
            and ol.highlighted < len(self._rows) else None
        if [r.key for r in vis] != [r.key for r in self._rows] or any(a.f != b.f for a, b in zip(vis, self._rows,
                                                                                                 strict=False)):
            ol.clear_options()
            ol.add_options([Option(finding_text(fr), id=str(i)) for i, fr in enumerate(vis)])
            keys = [r.key for r in vis]
            if keep in keys:
                ol.highlighted = keys.index(keep)
        self._rows = vis
        self.call_after_refresh(self._use_spare_rows)

    def _use_spare_rows(self) -> None:
        """A tall terminal's rows the findings leave empty show the run's latest events (every endpoint,
        newest first); the findings take them back as they grow. Again after the layout settles, until
        the findings' height and the room stay the same."""
        snap = self.wapp.snapshot
        ol = self.query_one("#findings", OptionList)
        events = self.query_one("#events", Static)
        need = ol.virtual_size.height
        room = ol.size.height + (events.size.height if events.display else 0)
        settled = (need, room) == self._spare
        self._spare = (need, room)
        if snap is None or room - need < SPARE_MIN or not ol.size.height:
            if events.display:
                events.display = False
                ol.styles.height = "1fr"
        else:
            ol.styles.height = need
            events.display = True
            self.set_static("#events", events_text(snap, room - need - 1, self.app.size.width - 2))
        if not settled:
            self.call_after_refresh(self._use_spare_rows)

    def _show_table(self, snap: Snapshot) -> None:
        """Rows in the chosen order; the columns that fit the width by priority (none cut off)."""
        app = self.wapp
        table = self.query_one("#endpoints", LiveTable)
        ordered = sort_rows(app.visible_endpoints(snap), self.sort_key, self.sort_desc, snap, app.window)
        prepared = shown_cells(snap, app.window).cells
        cells = {e.id: prepared[e.id] for e in ordered}
        widths = {c.key: max([self._label(c.key).cell_len, *(v[c.key].cell_len for v in cells.values())])
                  for c in COLUMNS}
        available = self.app.size.width
        if len(ordered) + 1 > self.app.size.height // 2:  # the table's max-height is 50 %: it scrolls
            available -= SCROLLBAR
        visible = fit_columns(widths, available, empty_columns(snap), blank_columns(cells), verdict_columns(snap.verdict))
        signature = (tuple(visible), self.sort_key, self.sort_desc)
        keep = self.selected_endpoint()
        if signature != self._signature:
            table.clear(columns=True)
            for key in visible:
                table.add_column(self._label(key), key=key)
            table.fixed_columns = 1
            self._keys, self._signature, self.columns = [], signature, visible
        rows = [(eid, [c[k] for k in visible]) for eid, c in cells.items()]
        self._keys = _fill(table, rows, self._keys, keep)

    def on_resize(self) -> None:
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def selected_endpoint(self) -> str | None:
        table = self.query_one("#endpoints", DataTable)
        return self._keys[table.cursor_row] if self._keys and 0 <= table.cursor_row < len(self._keys) else None

    def selected_finding(self) -> FindingRow | None:
        ol = self.query_one("#findings", OptionList)
        if not self._rows:
            return None
        i = ol.highlighted if ol.highlighted is not None else 0
        return self._rows[i] if i < len(self._rows) else None

    def action_sort(self, key: str) -> None:
        """k9s-style: a column's key (or a click on its header) sorts by it; again reverses."""
        if key == self.sort_key:
            self.sort_desc = not self.sort_desc
        else:
            self.sort_key, self.sort_desc = key, COLUMN[key].descending
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def action_focus_table(self) -> None:
        self.query_one("#endpoints", DataTable).focus()

    def action_plots(self) -> None:
        self.wapp.action_plots(self.selected_endpoint())

    def action_copy(self) -> None:
        self.wapp.copy_finding(self.selected_finding())

    def action_explain(self) -> None:
        self.wapp.action_explain(self.selected_finding())

    def action_search(self) -> None:
        self.wapp.action_open_endpoint(None, search=True)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.action_sort(str(event.column_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.wapp.action_open_endpoint(str(event.row_key.value))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_explain()


class EndpointScreen(LiveScreen):
    """One endpoint's engines (DP ranks) and recent records; ``None``: every endpoint's records."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "back", key_display="esc"),
        Binding("space", "app.toggle_pause", "pause", key_display="space"),
        Binding("slash", "search", "search", key_display="/"),
        Binding("g", "plots", "plots"),
    ]

    def __init__(self, endpoint: str | None, *, search: bool = False) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.search = search
        self.query_text = ""
        self._keys: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(id="ep-title")
        if self.endpoint is not None:
            yield LiveTable(id="engines", cursor_type="row")
        yield Input(placeholder="search records (/), esc clears", id="search", compact=True)
        with ScrollableContainer(id="records-scroll"):
            yield Static(id="records")
        yield Static(id="toasts")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        if self.endpoint is not None:
            table: DataTable[Any] = self.query_one("#engines", DataTable)
            for i, label in enumerate(ENGINE_COLUMNS):
                table.add_column(Text(label, justify="left" if i in (0, 6) else "right"), key=label)
            table.focus()
        if self.search or self.endpoint is None:
            self.query_one("#search", Input).focus()
        self._status()
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def show(self, snap: Snapshot) -> None:
        self._status()
        title = self.query_one("#ep-title", Static)
        if self.endpoint is None:
            title.update(Text("records of every endpoint, newest first", style="bold"))
            recs = snap.all_records()
        else:
            row = snap.endpoint(self.endpoint)
            if row is None:
                title.update(Text(f"{self.endpoint}: no longer in the run", style="yellow"))
                return
            s = row.s
            t = Text()
            t.append(f"{s.id} ", style="bold")
            t.append_text(badge(s.health))
            engines = snap.engines.get(self.endpoint, ())
            dead = [r.engine for r in engines if r.dead]
            t.append(f"  {s.role} · {s.engines} engines")
            if dead:
                t.append(f" ({len(dead)} dead: DP{', DP'.join(dead)})", style=HEALTH_STYLE["DOWN"])
            t.append(f" · {number(s.samples)} samples · last sample {age_text(row.age_s)} ago · nodes {', '.join(s.nodes) or '-'}")
            latency = " · ".join(f"{k.upper()} p90 {latency_text(s, k)}" for k in OPTIONAL if s.latency.get(k))
            if latency:
                t.append(f"\n{latency} (last interval, slowest engine)")
            t.append(f"\nengines over {s.window['label']}: means, samples and preemptions there" if s.window
                     else "\nengines: no sample in a window yet", style="dim")
            title.update(t)
            rows = [(r.engine, [Text(str(c), justify="left" if i in (0, 6) else "right") if not isinstance(c, Text)
                                else c for i, c in enumerate(engine_cells(r, snap.limits))])
                    for r in snap.engines.get(self.endpoint, ())]
            self._keys = _fill(self.query_one("#engines", LiveTable), rows, self._keys)
            recs = snap.records.get(self.endpoint, ())
        q = self.query_text.lower()
        if q:
            recs = tuple(r for r in recs if q in r.text.lower() or q in r.kind or q in r.file.lower())
        shown = list(reversed(recs))[:RECORDS_SHOWN]
        body = Text("\n").join(record_text(r, self.endpoint is None) for r in shown) if shown \
            else Text("no records" + (f" matching {self.query_text!r}" if q else ""), style="dim")
        self.query_one("#records", Static).update(body)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_plots(self) -> None:
        self.wapp.action_plots(self.endpoint)

    def action_back(self) -> None:
        """In the search box: clear it and give the focus back to the table (so the next ``/`` is
        a key again, not a character typed into the box); else back to the previous screen."""
        box = self.query_one("#search", Input)
        if box.has_focus:
            box.value = ""
            if self.endpoint is not None:
                self.query_one("#engines", DataTable).focus()
            else:
                self.query_one("#records-scroll").focus()
            return
        self.app.pop_screen()
