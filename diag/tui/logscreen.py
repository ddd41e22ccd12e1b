"""The findings log of `diag watch`: every finding that opened or closed this session."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from diag.rules.present import SEVERITY_STYLE

from .screens import LiveScreen
from .state import FindingRow, LogEntry, Snapshot


class LogScreen(LiveScreen):
    """Every finding that opened or closed this session (newest first): enter explains, c copies."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back", key_display="esc"),
        Binding("e", "explain", "explain", show=False),
        Binding("c", "copy", "copy", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[LogEntry] = []

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(Text("findings log: opened and closed this session, newest first", style="bold",
                          no_wrap=True, overflow="ellipsis"),
                     id="log-title")
        yield OptionList(id="log")
        yield Static(id="toasts")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._status()
        if self.wapp.snapshot is not None:
            self.show(self.wapp.snapshot)
        self.query_one("#log", OptionList).focus()

    def show(self, snap: Snapshot) -> None:
        self._status()
        entries = list(reversed(snap.log))
        if [e.seq for e in entries] == [e.seq for e in self.entries]:
            return
        ol = self.query_one("#log", OptionList)
        keep = self.entries[ol.highlighted].seq if self.entries and ol.highlighted is not None else None
        ol.clear_options()
        ol.add_options([Option(_log_text(e)) for e in entries])
        seqs = [e.seq for e in entries]
        if keep in seqs:
            ol.highlighted = seqs.index(keep)
        self.entries = entries

    def selected(self) -> FindingRow | None:
        ol = self.query_one("#log", OptionList)
        if not self.entries or ol.highlighted is None:
            return None
        e = self.entries[ol.highlighted]
        return FindingRow(e.f, "closed" if e.event == "close" else "open", None)

    def action_explain(self) -> None:
        self.wapp.action_explain(self.selected())

    def action_copy(self) -> None:
        self.wapp.copy_finding(self.selected())

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.action_explain()


def _log_text(e: LogEntry) -> Text:
    f = e.f
    t = Text(e.at.strftime("%m-%d %H:%M:%S") if e.at else "-" * 14, style="dim")
    t.append({"open": " opened ", "close": " closed ", "start": " at start"}[e.event].ljust(10),
             style="bold" if e.event == "open" else "dim")
    t.append(f"{f.severity:<7} ", style=SEVERITY_STYLE.get(f.severity, ""))
    t.append(f.code, style="bold")
    t.append(f" {f.name} [{f.endpoint or 'run'}]")
    t.append(f"\n  {f.message}", style="dim")
    return t
