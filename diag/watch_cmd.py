"""`diag watch PATH...`: the live TUI over a followed run, a replay, or one printed snapshot (--once).

Textual is imported only when the app starts (``diag.tui.app``); ``--once`` renders the same panels
with rich and needs neither Textual nor a terminal.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer

from diag.rules.runmodel import Run
from diag.rules.settings import SettingsError, load_settings

from .sources import InputError


def extra_sources(scrape: list[str], prom: str | None) -> list[Any]:
    """Sources for ``--scrape URL`` / ``--prom URL``: whatever ``diag.prom.watch_sources`` returns
    (objects with the follower's poll/logs/flush/side interface); [] while diag.prom is absent."""
    if not scrape and not prom:
        return []
    try:
        mod = importlib.import_module("diag.prom")
    except ImportError:
        return []
    factory = getattr(mod, "watch_sources", None)
    return list(factory(scrape=list(scrape), prom=prom)) if factory else []


def clock_for(now: str | None) -> Callable[[Run], datetime | None] | None:
    """``--now end`` pins "now" to the last timestamp of the run; an ISO time pins it there."""
    if now is None:
        return None
    if now == "end":
        return lambda run: run.end
    try:
        t = datetime.fromisoformat(now)
    except ValueError:
        raise InputError(f"--now {now!r}: expected 'end' or an ISO time") from None
    t = t if t.tzinfo else t.replace(tzinfo=UTC)
    return lambda _run: t


def _fail(msg: str) -> typer.Exit:
    typer.echo(f"diag watch: {msg}", err=True)
    return typer.Exit(2)


def watch(
    paths: list[str] = typer.Argument(None, help="Run directories, log files or globs (as for diag tail)."),
    replay: Path | None = typer.Option(None, "--replay", help="Replay this finished run through the screen."),
    speed: float = typer.Option(60.0, "--speed", help="Replay speed (× real time)."),
    once: bool = typer.Option(False, "--once", help="Print one rendered snapshot to stdout and exit."),
    scrape: list[str] = typer.Option([], "--scrape", help="Prometheus /metrics URL of an engine (repeatable)."),
    prom: str | None = typer.Option(None, "--prom", help="Prometheus server URL to query."),
    interval: float = typer.Option(1.0, "--interval", help="Seconds between polls (0.2-60)."),
    window: int = typer.Option(5, "--window", help="Sparkline window in minutes: 1, 5, 15 or 60."),
    retain: float = typer.Option(60.0, "--retain", help="Minutes of periodic samples kept in the model."),
    config: Path | None = typer.Option(None, "--config", help="diag.toml to use instead of the one found."),
    now: str | None = typer.Option(None, "--now", hidden=True, help="'end' or an ISO time: pin the clock."),
) -> None:
    """Live per-endpoint health of a run: endpoints, sparklines, findings, engines, log records."""
    from .tui.state import WINDOWS, WatchState

    paths = list(paths or [])
    if window not in WINDOWS:
        raise _fail(f"--window must be one of {', '.join(map(str, WINDOWS))}")
    if not paths and replay is None:
        raise _fail("give a run directory or log files, or --replay RUN_DIR")
    if replay is not None and paths and not once:
        raise _fail("--replay takes one run directory and no other paths")
    try:
        extras = extra_sources(scrape, prom)
    except Exception as e:  # a malformed URL and the like, reported by the Prometheus source
        raise _fail(str(e)) from None
    if (scrape or prom) and not extras:
        typer.echo("diag watch: --scrape/--prom ignored: the Prometheus source is not available", err=True)
    try:
        load_settings(Path.cwd(), config)
        clock = clock_for(now)
        if once:
            raise typer.Exit(_once(paths or [str(replay)], config, clock, window, extras))
        source = _live_source(paths, replay, speed)
    except (InputError, SettingsError, ValueError) as e:
        raise _fail(str(e)) from None
    if extras:
        from .tui.sources import MultiSource

        source = MultiSource([source, *extras])
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise _fail("needs a terminal; use --once for a printed snapshot")
    state = WatchState(source, config=config, clock=clock, retain_s=retain * 60 if retain > 0 else None)
    from .tui.app import WatchApp

    WatchApp(state, interval=min(60.0, max(0.2, interval)), window=window).run()


def _live_source(paths: list[str], replay: Path | None, speed: float) -> Any:
    from .tui.sources import FollowSource, ReplaySource

    if replay is None:
        return FollowSource(paths)
    from .load import load_run

    if not replay.exists():
        raise InputError(f"{replay}: no such file or directory")
    return ReplaySource(load_run([str(replay)]), speed=speed)


def _once(paths: list[str], config: Path | None, clock: Any, window: int, extras: list[Any]) -> int:
    from .load import load_run
    from .tail_cmd import console_for
    from .tui.render import render_once
    from .tui.sources import MultiSource, StaticSource
    from .tui.state import WatchState

    run = load_run(paths)
    if not run.sources and not run.benchmark:
        typer.echo("diag watch: no logs diag understands in " + ", ".join(paths), err=True)
        return 2
    source: Any = StaticSource(run, "read once")
    if extras:
        source = MultiSource([source, *extras])
    state = WatchState(source, config=config, clock=clock, retain_s=None)
    render_once(state.step(), console_for(), window)
    return 0
