"""The Textual app of `diag watch`: a collecting thread worker re-armed by one-shot timers, and
screens that are thin views over the latest immutable :class:`Snapshot`.

Flow: timer → ``_collect`` (thread worker, exclusive, group "collect") → ``WatchState.step()``
→ Snapshot → ``on_worker_state_changed`` (UI thread) shows it on every live screen → next timer.
Paused: the timer still re-arms but nothing is collected (a replay's clock stops too).
"""

from __future__ import annotations

import gc
import time
from typing import Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.worker import WorkerState

from diag.rules.finding import Finding, severity_rank
from diag.rules.present import number

from .dialogs import ExplainScreen, FilterScreen, HelpScreen
from .logscreen import LogScreen
from .plotscreen import PlotScreen
from .render import finding_clip, fit_parts, with_table
from .screens import EndpointScreen, LiveScreen, MainScreen, Toast
from .scrollbar import use_cell_scrollbars
from .state import WINDOWS, FindingRow, Snapshot, WatchState, by_code

COMBO_S = 1.0    # "1" then "5" within this many seconds is the 15-minute window
TOAST_S = 6.0    # a finding code's toast stays this long; openings of the code meanwhile add to its count
NOTE_S = 4.0     # any other notification's, unless it says
TOAST_ROOM = 3   # toast lines on a screen (one a toast), taken from the findings pane
TOAST_ROOM_SMALL = 2   # ... on a terminal under TOAST_TALL rows
TOAST_TALL = 30
MODE_BADGE = {"live": "● live", "replay": "▶ replay", "replayed": "■ replay ended", "finished": "■ finished",
              "reading": "○ reading"}
FULL_GC_S = 60.0  # the collector's full passes: at most one this often, after a poll


class WatchApp(App[None]):
    """`diag watch`: endpoints, findings, engines and records of a run, live."""

    CSS_PATH = "watch.tcss"
    TITLE = "diag watch"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("question_mark", "help", "help", key_display="?"),
        Binding("s", "save_svg", "screenshot", show=False),
    ]

    def __init__(self, state: WatchState, *, interval: float = 1.0, window: int = 5) -> None:
        super().__init__()
        use_cell_scrollbars()
        self.state = state
        self.interval = interval
        self.window = window if window in WINDOWS else 5
        self.role_filter: str | None = None
        self.min_severity: str | None = None
        self.paused = False
        self.snapshot: Snapshot | None = None
        self.polls = 0
        self._timer: Timer | None = None
        self._last_digit: tuple[str, float] = ("", 0.0)
        self._told_done = False
        self.screenshot_dir = "."
        self.toasts: dict[str, Toast] = {}  # finding code (or "note:" text) → its toast, oldest first
        self._toast_timer: Timer | None = None
        self.unseen = 0  # findings opened that no toast showed (no room): the status line counts them
        self.frozen = 0  # objects of the first poll moved out of the collector's sight (see _collect)
        self.full_gc_at = 0.0
        self._gc_threshold = gc.get_threshold()

    # ------------------------------------------------------------------ collection
    def on_mount(self) -> None:
        self.push_screen(MainScreen())
        self._collect()

    @work(thread=True, exclusive=True, group="collect", exit_on_error=False)
    def _collect(self) -> Snapshot:
        """A poll, and the endpoint table's cells for the current window (off the UI thread)."""
        return with_table(self.state.step(), self.window)

    def _own_the_full_collections(self) -> None:
        """CPython's full collections walk every tracked object: the ring points of a 64 × 24 h run
        (~600k, 0.5-0.9 s a pass) and Textual's caches (~200k, 0.1-0.2 s), on the GIL, in whatever frame
        allocates past the threshold (every few frames here). The first poll's objects are collected once
        and frozen (still freed by reference counting, never walked again); after that full passes run
        only here, after a poll was shown, at most once a FULL_GC_S (young generations as usual). On the
        UI thread, so an app that exits mid-poll never freezes after its unmount undid the freeze."""
        now = time.monotonic()
        if not self.frozen:
            gc.collect()
            gc.freeze()
            self.frozen = gc.get_freeze_count()
            young, middle, _ = self._gc_threshold
            gc.set_threshold(young, middle, 1_000_000)
            self.full_gc_at = now
        elif now - self.full_gc_at >= FULL_GC_S:
            gc.collect()
            self.full_gc_at = now

    def on_unmount(self) -> None:
        if self.frozen:  # back to the collector's own rhythm (an app run in a longer process, as in tests)
            gc.unfreeze()
            gc.set_threshold(*self._gc_threshold)

    def on_worker_state_changed(self, event: Any) -> None:
        worker = event.worker
        if worker.group != "collect":
            return
        if event.state == WorkerState.SUCCESS:
            self.polls += 1
            self._show(worker.result)
            self._own_the_full_collections()
            self._arm()
        elif event.state == WorkerState.ERROR:
            self.notify(f"collecting failed: {worker.error}", severity="error", timeout=10)
            self._arm(max(5.0, self.interval))

    def _arm(self, delay: float | None = None) -> None:
        """One-shot: the next poll is scheduled only after this one finished (no overlap)."""
        if delay is None:
            delay = max(self.interval, 2 * self.state.last_step_s)
        self._timer = self.set_timer(delay, self._tick, name="collect")

    def _tick(self) -> None:
        if self.paused:
            self._arm()
        else:
            self._collect()

    def _show(self, snap: Snapshot) -> None:
        first = self.snapshot is None
        self.snapshot = snap
        if not first and snap.opened:
            self.toast_findings(snap.opened)
        if snap.done and not self._told_done:
            self._told_done = True
            self.notify("replay finished", timeout=NOTE_S)
        self.refresh_views()

    def toast_room(self) -> int:
        """How many toast lines the screen gives (they take their rows from the findings pane: a toast
        never covers anything)."""
        return TOAST_ROOM_SMALL if self.size.height < TOAST_TALL else TOAST_ROOM

    def toast_findings(self, opened: tuple[Finding, ...]) -> None:
        """One toast per finding code: further openings of a code while its toast shows replace it
        with a count; past the room, the oldest toasts go and the status counts them."""
        now = time.monotonic()
        for code, found in by_code(opened).items():
            old = self.toasts.pop(code, None)
            count = len(found) + (old.count if old else 0)
            f = found[-1]
            where = f.endpoint or "run"
            text = (f"opened {f.code} {f.name} [{where}]" if count == 1
                    else f"{number(count)} × {code} opened: {f.name} [{where}] +{number(count - 1)} more")
            self.toasts[code] = Toast(text, f.severity, count, now + TOAST_S)
        self.refresh_toasts()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification (this app's and Textual's) as a toast line, for ``timeout`` seconds."""
        sev = {"information": "info"}.get(severity, severity)
        text = f"{title}: {message}" if title else message
        self.toasts[f"note:{text}"] = Toast(text, sev, 0, time.monotonic() + (timeout or NOTE_S))
        self.refresh_toasts()

    def refresh_toasts(self) -> None:
        """Drop the toasts that expired and those past the room (oldest first); show the rest on every
        live screen; come back when the next one expires."""
        now = time.monotonic()
        self.toasts = {k: t for k, t in self.toasts.items() if t.expiry > now}
        room = self.toast_room()
        while len(self.toasts) > room:
            gone = self.toasts.pop(next(iter(self.toasts)))
            self.unseen += gone.count
        lines = tuple(self.toasts.values())
        for screen in self.screen_stack:
            if isinstance(screen, LiveScreen) and screen.is_mounted:
                screen.show_toasts(lines)
                screen._status()  # the count of findings no toast showed
        if self._toast_timer is not None:
            self._toast_timer.stop()
            self._toast_timer = None
        if lines:
            wait = min(t.expiry for t in lines) - now
            self._toast_timer = self.set_timer(max(0.05, wait), self.refresh_toasts, name="toasts")

    def refresh_views(self) -> None:
        if self.snapshot is None or not self.is_running:   # a poll that ends while the app shuts down shows nothing
            return
        for screen in self.screen_stack:
            # composed and not being torn down: its widgets are there
            if isinstance(screen, LiveScreen) and screen.is_mounted and screen.is_attached:
                screen.show(self.snapshot)

    # ------------------------------------------------------------------ view state
    def status(self, extra: str = "", width: int = 0) -> str:
        """The status line, most useful first (the label, longest, goes last: a narrow terminal cuts it);
        ``width``: fitted to that many cells (:func:`fit_parts`)."""
        mode = self.snapshot.mode if self.snapshot is not None else "reading"
        parts = ["⏸ paused" if self.paused else MODE_BADGE.get(mode, mode), f"window {self.window} min"]
        filt = [f"role={self.role_filter}"] if self.role_filter else []
        filt += [f"severity≥{self.min_severity}"] if self.min_severity else []
        parts.append("filter " + " ".join(filt) if filt else "no filter")
        if extra:
            parts.append(extra)
        if self.unseen:
            parts.append(f"{number(self.unseen)} new findings (l: log)")
        if self.snapshot is not None and self.snapshot.label:
            parts.append(self.snapshot.label)
        return fit_parts(parts, width) if width else "  ·  ".join(parts)

    def visible_endpoints(self, snap: Snapshot) -> list[Any]:
        return [e for e in snap.endpoints if self.role_filter in (None, e.role)]

    def visible_findings(self, snap: Snapshot) -> list[FindingRow]:
        out = []
        for fr in snap.findings:
            if self.role_filter and not fr.roles & {None, self.role_filter}:
                continue
            if self.min_severity and severity_rank(fr.f.severity) < severity_rank(self.min_severity):
                continue
            out.append(fr)
        return out

    # ------------------------------------------------------------------ actions
    def action_toggle_pause(self) -> None:
        self.paused = not self.paused
        src = self.state.source
        if self.paused:
            src.pause()
        else:
            src.resume()
        self.refresh_views()

    def action_window(self, minutes: int) -> None:
        key, at = self._last_digit
        now = time.monotonic()
        if minutes == 5 and key == "1" and now - at <= COMBO_S:
            minutes = 15
        self._last_digit = (str(minutes), now)
        self.window = minutes
        self.refresh_views()

    def action_filter(self) -> None:
        roles = sorted({e.role for e in self.snapshot.endpoints}) if self.snapshot else []

        def apply(choice: str | None) -> None:
            if choice is None:
                return
            kind, _, value = choice.partition(":")
            if kind == "all":
                self.role_filter = self.min_severity = None
            elif kind == "role":
                self.role_filter = value or None
            elif kind == "sev":
                self.min_severity = value or None
            self.refresh_views()

        self.push_screen(FilterScreen(roles, self.role_filter, self.min_severity), apply)

    def action_explain(self, row: FindingRow | None) -> None:
        if row is None:
            self.notify("no finding selected", severity="warning", timeout=3)
            return
        self.push_screen(ExplainScreen(row))

    def action_open_endpoint(self, eid: str | None, search: bool = False) -> None:
        self.push_screen(EndpointScreen(eid, search=search))

    def action_plots(self, eid: str | None) -> None:
        self.push_screen(PlotScreen(eid))

    def action_findings_log(self) -> None:
        self.unseen = 0
        self.push_screen(LogScreen())

    def copy_finding(self, row: FindingRow | None) -> None:
        """The finding as text on the clipboard (OSC 52: works over ssh and inside tmux)."""
        if row is None:
            self.notify("no finding selected", severity="warning", timeout=3)
            return
        self.copy_to_clipboard(finding_clip(row))
        self.notify(f"{row.f.code} copied to the clipboard", timeout=2)

    def action_save_svg(self) -> None:
        """The screen as an SVG file in ``screenshot_dir`` (the working directory); its path in a toast."""
        path = self.save_screenshot(path=self.screenshot_dir)
        self.notify(f"screenshot saved to {path}", timeout=2 * NOTE_S)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())
