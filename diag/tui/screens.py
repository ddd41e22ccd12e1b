"""Screens of `diag watch`: thin views that redraw themselves from a :class:`Snapshot`."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, cast

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ScrollableContainer, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Markdown, OptionList, Static
from textual.widgets.option_list import Option

from .render import (
    COLUMNS,
    ENGINE_COLUMNS,
    age_text,
    badge,
    endpoint_cells,
    engine_cells,
    evidence_text,
    finding_text,
    header_text,
    node_prefix,
    record_text,
)
from .state import FindingRow, Snapshot

RECORDS_SHOWN = 300
JUSTIFY = {k: j for k, _, j in COLUMNS}


class WatchHost(Protocol):
    """What the screens need of the app that hosts them (``WatchApp``); screens do not import it."""

    snapshot: Snapshot | None
    window: int

    def status(self) -> str: ...

    def visible_endpoints(self, snap: Snapshot) -> list[Any]: ...

    def visible_findings(self, snap: Snapshot) -> list[FindingRow]: ...

    def action_explain(self, row: FindingRow | None) -> None: ...

    def action_open_endpoint(self, eid: str | None, search: bool = False) -> None: ...


class LiveScreen(Screen[None]):
    """A screen that redraws from each new snapshot."""

    @property
    def wapp(self) -> WatchHost:
        return cast(WatchHost, self.app)

    def show(self, snap: Snapshot) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _status(self) -> None:
        self.query_one("#status", Static).update(self.wapp.status())


def _fill(table: DataTable[Any], rows: list[tuple[str, list[Any]]], keys: list[str]) -> list[str]:
    """Update a table in place when its rows are the same, else rebuild it keeping the cursor row."""
    new = [k for k, _ in rows]
    cols = [c.key for c in table.ordered_columns]
    if new == keys:
        for k, cells in rows:
            for col, cell in zip(cols, cells, strict=False):
                table.update_cell(k, col, cell, update_width=True)
        return keys
    current = keys[table.cursor_row] if keys and 0 <= table.cursor_row < len(keys) else None
    table.clear()
    for k, cells in rows:
        table.add_row(*cells, key=k)
    if current in new:
        table.move_cursor(row=new.index(current), animate=False)
    return new


class MainScreen(LiveScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "app.toggle_pause", "pause", key_display="space"),
        Binding("1", "app.window(1)", "window", key_display="1/5/15/60"),
        Binding("5", "app.window(5)", "5 min", show=False),
        Binding("6", "app.window(60)", "60 min", show=False),
        Binding("f", "app.filter", "filter"),
        Binding("e", "explain", "explain"),
        Binding("slash", "search", "search", key_display="/"),
    ]

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(id="header")
        yield Static(id="errors")
        yield DataTable(id="endpoints", cursor_type="row")
        yield Static(id="findings-title")
        yield OptionList(id="findings")
        yield Footer()

    def on_mount(self) -> None:
        table: DataTable[Any] = self.query_one("#endpoints", DataTable)
        for key, label, just in COLUMNS:
            table.add_column(Text(label, justify=just), key=key)  # type: ignore[arg-type]
        table.fixed_columns = 1
        self._keys: list[str] = []
        self._rows: list[FindingRow] = []
        self._status()
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)
        table.focus()

    def show(self, snap: Snapshot) -> None:
        app = self.wapp
        self._status()
        width = max(20, self.app.size.width - 2)
        self.query_one("#header", Static).update(header_text(snap, width, 4))
        errors = self.query_one("#errors", Static)
        errors.display = bool(snap.errors)
        if snap.errors:
            more = f" (+{len(snap.errors) - 2} more)" if len(snap.errors) > 2 else ""
            errors.update(Text("⚠ " + " · ".join(snap.errors[:2]) + more, style="bold red"))
        prefix = node_prefix(snap)
        rows = []
        for e in app.visible_endpoints(snap):
            cells = endpoint_cells(e, snap, app.window, prefix)
            rows.append((e.id, [v if isinstance(v, Text) else Text(v, justify=JUSTIFY[k])  # type: ignore[arg-type]
                                for k, v in cells.items()]))
        self._keys = _fill(self.query_one("#endpoints", DataTable), rows, self._keys)
        vis = app.visible_findings(snap)
        n_open = sum(fr.state == "open" for fr in vis)
        hidden = len(snap.findings) - len(vis)
        self.query_one("#findings-title", Static).update(
            f"findings  {n_open} open · {len(vis) - n_open} closed" + (f" · {hidden} filtered out" if hidden else ""))
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

    def on_resize(self) -> None:
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def selected_finding(self) -> FindingRow | None:
        ol = self.query_one("#findings", OptionList)
        if not self._rows:
            return None
        i = ol.highlighted if ol.highlighted is not None else 0
        return self._rows[i] if i < len(self._rows) else None

    def action_explain(self) -> None:
        self.wapp.action_explain(self.selected_finding())

    def action_search(self) -> None:
        self.wapp.action_open_endpoint(None, search=True)

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
            yield DataTable(id="engines", cursor_type="row")
        yield Input(placeholder="search records (/), esc clears", id="search", compact=True)
        with ScrollableContainer(id="records-scroll"):
            yield Static(id="records")
        yield Footer()

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
            t.append(f"  {s.role} · {s.engines} engines · {s.samples} samples · last sample {age_text(row.age_s)} ago"
                     f" · nodes {', '.join(s.nodes) or '-'}")
            title.update(t)
            rows = [(r.engine, [Text(str(c), justify="left" if i in (0, 6) else "right") if not isinstance(c, Text)
                                else c for i, c in enumerate(engine_cells(r))])
                    for r in snap.engines.get(self.endpoint, ())]
            self._keys = _fill(self.query_one("#engines", DataTable), rows, self._keys)
            recs = snap.records.get(self.endpoint, ())
        q = self.query_text.lower()
        if q:
            recs = tuple(r for r in recs if q in r.text.lower() or q in r.kind or q in r.file.lower())
        shown = list(reversed(recs))[:RECORDS_SHOWN]
        body = Text("\n", no_wrap=True).join(record_text(r, self.endpoint is None) for r in shown) if shown \
            else Text("no records" + (f" matching {self.query_text!r}" if q else ""), style="dim")
        self.query_one("#records", Static).update(body)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_back(self) -> None:
        box = self.query_one("#search", Input)
        if box.has_focus and box.value:
            box.value = ""
            return
        self.app.pop_screen()


class FilterScreen(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "cancel"), Binding("f", "dismiss(None)", "cancel", show=False)]

    def __init__(self, roles: list[str], role: str | None, severity: str | None) -> None:
        super().__init__()
        self.roles, self.role, self.severity = roles, role, severity

    def compose(self) -> ComposeResult:
        def mark(on: bool) -> str:
            return "✓ " if on else "  "

        opts = [Option("  show everything (clear filters)", id="all:")]
        opts += [Option(mark(self.role is None) + "role: all", id="role:")]
        opts += [Option(mark(self.role == r) + f"role: {r}", id=f"role:{r}") for r in self.roles]
        opts += [Option(mark(self.severity is None) + "findings: every severity", id="sev:"),
                 Option(mark(self.severity == "warning") + "findings: warning and error", id="sev:warning"),
                 Option(mark(self.severity == "error") + "findings: error only", id="sev:error")]
        with Vertical(id="dialog"):
            yield Static(Text("filter endpoints and findings", style="bold"))
            yield OptionList(*opts, id="filter-options")
            yield Static(Text("enter apply · esc cancel", style="dim"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class ExplainScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss", "close"), Binding("e", "dismiss", "close", show=False),
                Binding("q", "dismiss", "close", show=False)]

    def __init__(self, row: FindingRow) -> None:
        super().__init__()
        self.row = row

    def markdown(self) -> str:
        from diag.rules.catalog import CatalogError

        from ..explain import explain_text
        from ..report import link_lines

        f = self.row.f
        try:
            md = explain_text(f.code)
        except CatalogError:
            md = f"# {f.code} {f.name}\n\n(no catalog entry)"
        lines = ["", "## This finding", "", f"- **{self.row.state}** · {f.severity} · {f.endpoint or 'whole run'}",
                 f"- {f.message}"]
        if f.first_ts:
            lines.append(f"- window {f.first_ts:%Y-%m-%d %H:%M:%S} .. {f.last_ts:%H:%M:%S}" if f.last_ts else "")
        if f.location:
            lines.append(f"- at `{f.location}`")
        lines += [f"- {line}" for line in link_lines(f)]
        if f.evidence:
            lines.append(f"- evidence: {evidence_text(f.evidence, 20)}")
        if f.fix:
            lines.append(f"- fix: {f.fix}")
        return md + "\n" + "\n".join(lines)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Markdown(self.markdown(), id="explain")
            yield Static(Text("esc close", style="dim"))


HELP = """\
[b]diag watch[/b]  live per-endpoint health of a P/D run

[b]keys[/b]
  space      pause / resume (a replay's clock stops too)
  1 5 15 60  sparkline window, minutes (1 then 5: 15; 6: 60)
  f          filter endpoints by role, findings by severity
  e          explain the highlighted finding (why, what to change)
  enter      open the highlighted endpoint (or click it twice):
             its engines (DP ranks) and recent log records
  /          search log records;  tab  table <-> findings
  esc        back / close;  ?  help;  q  quit

[b]health[/b]
  OK · WARN warning finding · CRIT error finding · DOWN engine dead
  STALE no stats line for 60 s · NO STATS never logged stats

[b]columns[/b]
  prompt/s gen/s run wait KV %: latest stats, engines summed
  (KV averaged); tok/s ~ and KV ~: sparklines over the window;
  age: seconds since the last sample; pre: preemptions
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss", "close"), Binding("question_mark", "dismiss", "close", show=False),
                Binding("q", "dismiss", "close", show=False)]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog"):
            yield Static(HELP, id="help")
