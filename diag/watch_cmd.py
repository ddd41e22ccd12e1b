"""`diag watch PATH...`: the live TUI over a followed run, a replay, or one printed snapshot (--once).

The TUI runs the same :class:`diag.pipeline.Pipeline` as ``diag tail`` on its collecting thread
(:class:`diag.tui.state.WatchState`). Textual is imported only when the app starts; ``--once`` renders
the same panels with rich and needs neither Textual nor a terminal. Exit status as for ``diag tail``:
by ``fail-on`` over the findings of the last report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .options import (
    EXIT_USAGE,
    ConfigFile,
    Example,
    ExitZero,
    FailOnOption,
    Ignore,
    Prom,
    Scrape,
    Select,
    console_for,
    fail,
    fail_all,
    positive,
    printable,
    quiet_pipe,
    run_status,
)
from .tui import WINDOWS

if TYPE_CHECKING:
    from diag.rules.runmodel import Run
    from diag.rules.settings import Settings



def _window(value: int) -> int:
    if value not in WINDOWS:
        raise typer.BadParameter(f"must be one of {', '.join(map(str, WINDOWS))}, not {value}")
    return value


def _retain(value: float) -> float:
    if value < 0:
        raise typer.BadParameter(f"must be 0 (keep everything) or more minutes, not {value:,g}")
    return value


def clock_for(now: str | None) -> Callable[[Run], datetime | None] | None:
    """``--now end`` pins "now" to the run's clock (its last timestamp); an ISO time pins it there."""
    if now is None:
        return None
    if now == "end":
        return lambda run: run.clock
    try:
        t = datetime.fromisoformat(now)
    except ValueError:
        raise typer.BadParameter(f"expected 'end' or an ISO time, not {now!r}", param_hint="--now") from None
    t = t if t.tzinfo else t.replace(tzinfo=UTC)
    return lambda _run: t


EXAMPLES: tuple[Example, ...] = (
    ("The live screen over a running job (q quits, ? lists the keys)", "diag watch outputs/5010467"),
    ("Replay a finished run through the screen at 60x its speed", "diag watch --replay outputs/5010467"),
    ("One snapshot printed to stdout: no terminal needed", "diag watch outputs/5010467 --once"),
)


def watch(
    paths: list[str] = typer.Argument(None, metavar="[PATH]...", help="Run directories, log files or globs "
                                      "(as for diag tail); none with --replay or --prom."),
    replay: Path | None = typer.Option(None, "--replay", metavar="RUN_DIR", help="Replay this finished run through the screen."),
    speed: float = typer.Option(60.0, "--speed", metavar="FACTOR", callback=positive("--speed"),
                                help="Replay speed (× real time)."),
    once: bool = typer.Option(False, "--once", help="Print one rendered snapshot to stdout and exit."),
    scrape: Scrape = None,
    prom: Prom = None,
    interval: float = typer.Option(1.0, "--interval", metavar="SECONDS", callback=positive("--interval", lo=0.19, hi=60),
                                   help="Seconds between polls (0.2-60)."),
    window: int = typer.Option(5, "--window", metavar="MINUTES", callback=_window,
                               help="Sparkline window in minutes: 1, 5, 15 or 60."),
    retain: float = typer.Option(60.0, "--retain", metavar="MINUTES", callback=_retain,
                                 help="Minutes of periodic samples kept in the model (0: all)."),
    fail_on: FailOnOption = None,
    select: Select = None,
    ignore: Ignore = None,
    exit_zero: ExitZero = False,
    config: ConfigFile = None,
    now: str | None = typer.Option(None, "--now", hidden=True, help="'end' or an ISO time: pin the clock."),
) -> None:
    """Live per-endpoint health of a run: endpoints, sparklines, findings, engines, log records."""
    from diag.rules.settings import SettingsError, resolve

    from .files import InputError

    paths, scrape = list(paths or []), list(scrape or [])
    try:
        settings = resolve(Path.cwd(), config, select=select, ignore=ignore,
                           fail_on=fail_on.value if fail_on else None, exit_zero=exit_zero)
    except SettingsError as e:
        fail_all("watch", [f"config error: {line}" for line in e.lines])
    if not paths and replay is None and not prom:
        fail("watch", "give a run directory or log files, --replay RUN_DIR, or --prom URL alone")
    if replay is not None and paths and not once:
        fail("watch", "--replay takes one run directory and no other paths")
    clock = clock_for(now)
    try:
        if once:
            raise typer.Exit(_once(paths or ([str(replay)] if replay else []), settings, clock, window, scrape, prom))
        extras = _live_metrics(scrape, prom)
        source = _live_source(paths, replay, speed) if paths or replay is not None else extras.pop(0)
    except (InputError, ValueError) as e:
        fail("watch", str(e))
    if extras:
        from .sources import MultiSource

        source = MultiSource([source, *extras])
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        fail("watch", "needs a terminal; use --once for a printed snapshot")
    from .tui.state import WatchState

    state = WatchState(source, settings=settings, clock=clock, retain_s=retain * 60 if retain > 0 else None)
    from .tui.app import WatchApp

    WatchApp(state, interval=interval, window=window).run()
    last = state.report
    raise typer.Exit(run_status([last is not None and last.fails]))


def _live_metrics(scrape: list[str], prom: str | None) -> list[Any]:
    """Live ``--scrape``/``--prom`` sources (diag.prom); a malformed URL is an input error."""
    if not scrape and not prom:
        return []
    from .files import InputError
    from .prom import PromSourceError, watch_sources

    try:
        return list(watch_sources(scrape=list(scrape), prom=prom))
    except PromSourceError as e:
        raise InputError(str(e)) from None


def _live_source(paths: list[str], replay: Path | None, speed: float) -> Any:
    from .files import InputError, find_runs, path_problem
    from .sources import FollowSource, ReplaySource

    if replay is None:
        return FollowSource(paths)
    if (why := path_problem(replay)) is not None:
        raise InputError(f"{replay}: {why}")
    runs = find_runs([str(replay)])
    if len(runs) != 1:
        raise InputError(f"{replay}: holds {len(runs)} runs; replay one run directory")
    return ReplaySource(runs[0], speed=speed)


def _once(paths: list[str], settings: Settings, clock: Any, window: int, scrape: list[str],
          prom: str | None) -> int:
    """One snapshot of the run as read now, judged like ``diag tail`` (a finished run as of its end)."""
    from .files import InputError, find_runs
    from .pipeline import window_of
    from .refusal import refusal
    from .sources import BatchSource, MultiSource, metric_source

    if not paths:  # --prom alone: the server's last DEFAULT_WINDOW is the run
        from .prom import DEFAULT_WINDOW

        end = datetime.now(tz=UTC)
        source: Any = metric_source(scrape, prom, end - DEFAULT_WINDOW, end)
        if source.errors:
            raise InputError(source.errors[0])
        return _render_once(source, settings, clock, window)
    runs = find_runs(paths)
    if len(runs) != 1:
        raise InputError(f"{', '.join(paths)}: holds {len(runs)} runs; watch one run at a time")
    batch = BatchSource(runs[0])
    batch.poll()
    if not batch.logs() and not batch.side().benchmark:
        typer.echo(f"diag watch: {printable(refusal('logs', paths))}", err=True)
        for p, reason in batch.skipped:
            typer.echo(f"  skipped {printable(p)}: {reason}", err=True)
        return EXIT_USAGE
    source = batch
    if scrape or prom:
        start, end = window_of(batch.logs())
        source = MultiSource([batch, metric_source(scrape, prom, start, end)])
    return _render_once(source, settings, clock, window)


def _render_once(source: Any, settings: Settings, clock: Any, window: int) -> int:
    from .tui.render import render_once
    from .tui.state import WatchState

    state = WatchState(source, settings=settings, clock=clock, retain_s=None)
    snap = state.step()
    with quiet_pipe():
        render_once(snap, console_for(), window)
    for e in snap.errors:   # a file that could not be read is one line; the rest was read (as tail)
        typer.echo(f"diag watch: {printable(e)}", err=True)
    report = state.report
    if report is not None and any(lg.error and "://" in lg.path for lg in report.run.sources):
        return EXIT_USAGE   # a --scrape/--prom source asked for failed
    return run_status([report is not None and report.fails])
