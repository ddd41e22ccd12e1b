"""The dialogs of `diag watch`: the filter, a finding explained, the help."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar, cast

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from .columns import COLUMNS
from .render import evidence_text, figures_window
from .screens import WatchHost
from .state import FindingRow


class FilterScreen(ModalScreen[str | None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss(None)", "cancel")]

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
    """A rule in full and this finding's figures; the catalog text is read in a worker thread so
    the dialog opens at once with a placeholder."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "close"), Binding("e", "dismiss", "close", show=False),
        Binding("q", "dismiss", "close", show=False), Binding("c", "copy", "copy")]

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
            yield Static(Text(f"{self.row.f.code} {self.row.f.name}: loading the rule…", style="dim"),
                         id="explain-placeholder")
            yield Static(Text("esc close · c copy", style="dim"))

    def on_mount(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="explain")
    def _load(self) -> None:
        md = self.markdown()
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._loaded, md)

    def _loaded(self, md: str) -> None:
        holder = self.query_one("#explain-placeholder", Static)
        self.query_one("#dialog").mount(Markdown(md, id="explain"), before=holder)
        holder.remove()

    def action_copy(self) -> None:
        cast(WatchHost, self.app).copy_finding(self.row)


KEYS = (
    ("space", "pause / resume (a replay's clock stops too)"),
    ("1 5 15 60", "sparkline and plot window, minutes (1 then 5: 15; 6: 60)"),
    ("⇧+letter", "sort the endpoints by a column (again: reverse), or click its header"),
    ("g", "plots of the highlighted endpoint;  p  plots of the run"),
    ("f", "filter endpoints by role, findings by severity"),
    ("e", "explain the highlighted finding (why, what to change)"),
    ("c", "copy the highlighted finding to the clipboard (OSC 52)"),
    ("l", "findings log: every finding opened and closed"),
    ("enter", "open the highlighted endpoint (or click it twice): its engines (DP ranks) and recent log records"),
    ("/", "search log records;  tab  table <-> findings"),
    ("s", "save the screen as an SVG file (its path in a toast)"),
    ("esc", "back / close; on the main screen: focus the table"),
    ("? q", "help; quit"),
)
HEALTH_HELP = (
    ("OK", "no finding names it"), ("WARN", "a warning finding"), ("CRIT", "an error finding"),
    ("DOWN", "an engine dead"), ("LIMITS", "on the side the verdict names as the limit (bold rows)"),
    ("STALE", "no stats line for 60 s"), ("NO STATS", "never logged stats"),
    ("READY", "start-up done, no load yet (shown as ready 4m44s)"),
)
HEALTH_NOTE = "a recipe check (K003) or a consequence of a death elsewhere (folded under it) colours no endpoint"


def _grid(rows: Iterable[tuple[str, ...]]) -> Table:
    """Columns of which the last wraps under itself (never under the first ones, which stay bold)."""
    rows = list(rows)
    grid = Table.grid(padding=(0, 2))
    for _ in rows[0][:-1]:
        grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    for row in rows:
        grid.add_row(*row)
    return grid


def help_text(window: str | None) -> Group:
    """The help: keys, health, and each column with its sort letter and what it shows, from the columns
    themselves; the figures' window named as the run has it (``C=2,048 steady``)."""
    head = Text("diag watch", style="bold")
    head.append("  live per-endpoint health of a P/D run", style="")
    over = (f"The figures' window is the run verdict's steady window, now {window} (the header's tok/s line)."
            if window else "The figures' window is the run verdict's steady window (none yet).")
    stay = ", ".join(c.label for c in COLUMNS if c.priority == 0)
    return Group(
        head, Text(), Text("keys", style="bold"), _grid(KEYS), Text(),
        Text("health", style="bold"), _grid(HEALTH_HELP), Text(HEALTH_NOTE), Text(),
        Text("columns (⇧+letter sorts by one)", style="bold"), _grid((c.sort, c.label, c.doc) for c in COLUMNS),
        Text(over),
        Text("wait, KV % and pre take the colour of their rule past its threshold (DIAG-B001 waiting_high per "
             "engine, K004/K001 kv_usage, K002 min_count). A narrow terminal drops the low-priority columns "
             f"first; {stay} stay."))


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss", "close"), Binding("question_mark", "dismiss", "close", show=False),
                Binding("q", "dismiss", "close", show=False)]

    def compose(self) -> ComposeResult:
        snap = cast(WatchHost, self.app).snapshot
        with VerticalScroll(id="dialog"):
            yield Static(help_text(figures_window(snap) if snap is not None else None), id="help")
