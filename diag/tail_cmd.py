"""`diag tail PATH...`: per-endpoint health of a run from its logs, once or following them."""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

from diag.rules.engine import diff, evaluate
from diag.rules.finding import Finding, severity_rank
from diag.rules.runmodel import Run, build_endpoints
from diag.rules.settings import SettingsError, load_settings

from . import summary as S
from .load import load_runs
from .sources import InputError
from .view import dumps, render_text, run_dict

PROGRESS_MIN_BYTES = 50 << 20


class Fmt(StrEnum):
    text = "text"
    json = "json"
    jsonl = "jsonl"


class FailOn(StrEnum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


class ExportFmt(StrEnum):
    parquet = "parquet"
    csv = "csv"


def console_for(stream=None) -> Console:
    """Colour only on a terminal and without NO_COLOR (rich reads NO_COLOR itself)."""
    tty = (stream or sys.stdout).isatty()
    return Console(file=stream or sys.stdout, highlight=False, soft_wrap=False,
                   width=None if tty or "COLUMNS" in os.environ else 160)


def settings_findings(run: Run, config: Path | None) -> list[Finding]:
    """Evaluate with thresholds, disabled rules and suppressions from diag.toml / [tool.diag].

    Unused suppressions are not reported here: the file also holds the recipe checks' entries.
    """
    settings = load_settings(Path.cwd(), config)
    rules = list(settings.rules("run", "endpoint", "engine").values())
    return settings.apply(evaluate(run, rules), report_unused=False)


def _load_with_progress(paths: list[str]) -> list[Run]:
    err = sys.stderr
    if not err.isatty():
        return load_runs(paths)
    progress = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                        TransferSpeedColumn(), TimeRemainingColumn(), console=Console(file=err), transient=True)
    task = progress.add_task("reading logs", total=None)
    state = {"started": False}

    def on_total(n: int) -> None:
        progress.update(task, total=n)
        if n >= PROGRESS_MIN_BYTES:
            progress.start()
            state["started"] = True

    try:
        return load_runs(paths, on_total=on_total, on_bytes=lambda n: progress.advance(task, n))
    finally:
        if state["started"]:
            progress.stop()


def export_series(run: Run, out: Path, fmt: ExportFmt) -> list[Path]:
    import polars as pl

    out.mkdir(parents=True, exist_ok=True)
    stats = [e.stats.with_columns(pl.lit(e.id).alias("endpoint"), pl.lit(e.role).alias("role"))
             for e in run.endpoints.values() if e.stats.height]
    kv = [e.kv.with_columns(pl.lit(e.id).alias("endpoint")) for e in run.endpoints.values() if e.kv.height]
    written = []
    for name, frames in (("stats", stats), ("kv_transfer", kv)):
        if not frames:
            continue
        df = pl.concat(frames, how="diagonal_relaxed")
        path = out / f"{name}.{fmt.value}"
        if fmt is ExportFmt.parquet:
            df.write_parquet(path)
        else:
            df.write_csv(path)
        written.append(path)
    return written


def exit_code(findings: list[Finding], fail_on: FailOn) -> int:
    if fail_on is FailOn.never:
        return 0
    return 1 if any(severity_rank(f.severity) >= severity_rank(fail_on.value) for f in findings) else 0


def tail(
    paths: list[str] = typer.Argument(..., help="Run directories, log files or globs (slurm-*.out, *_decode_w0.out)."),
    fmt: Fmt = typer.Option(Fmt.text, "--format", help="text, json (one document) or jsonl (a stream)."),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 when a finding is at least this severe."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep reading as the logs grow (like tail -F)."),
    heartbeat: float = typer.Option(30.0, "--heartbeat", help="Follow mode: seconds between endpoint heartbeats."),
    poll: float = typer.Option(0.25, "--poll", help="Follow mode: seconds between reads.", hidden=True),
    export: Path | None = typer.Option(None, "--export", help="Write the time series to this directory."),
    export_format: ExportFmt = typer.Option(ExportFmt.parquet, "--export-format"),
    config: Path | None = typer.Option(None, "--config", help="diag.toml to use instead of the one found."),
    scrape: list[str] = typer.Option([], "--scrape", metavar="URL",
                                     help="Also scrape this /metrics URL now (twice, 1 s apart); URL or "
                                          "ROLE-wN=URL to name its endpoint. Repeatable."),
    prom: str | None = typer.Option(None, "--prom", metavar="URL",
                                    help="Also query this Prometheus server for the engines' vLLM metrics."),
    prom_start: str | None = typer.Option(None, "--prom-start",
                                          help="--prom from this ISO time (default: run start)."),
    prom_end: str | None = typer.Option(None, "--prom-end",
                                        help="--prom until this ISO time (default: run end)."),
) -> None:
    """Per-endpoint health of a run from its logs: throughput, queues, KV, faults, findings."""
    try:
        if follow:
            if scrape or prom:
                raise InputError("--scrape/--prom read once; they do not combine with --follow")
            code = follow_run(paths, fmt, fail_on, heartbeat, poll, config)
            raise typer.Exit(code)
        window = _when(prom_start, "--prom-start"), _when(prom_end, "--prom-end")
        runs = _load_with_progress(paths)
        if scrape or prom:
            if len(runs) > 1:
                raise InputError("--scrape/--prom add metrics to one run; name a single run directory")
            _add_metric_sources(runs[0], scrape, prom, *window)
        settings_findings_check(config)
    except (InputError, SettingsError) as e:
        typer.echo(f"diag tail: {e}", err=True)
        raise typer.Exit(2) from None
    if not any(s for r in runs for s in r.sources if not s.error) and not any(r.benchmark for r in runs):
        for r in runs:
            for e in r.errors:
                typer.echo(f"diag tail: {e}", err=True)
        if not any(r.errors for r in runs):
            typer.echo("diag tail: no logs diag understands in " + ", ".join(paths), err=True)
        for r in runs:
            for p, reason in r.skipped:
                typer.echo(f"  skipped {p}: {reason}", err=True)
        raise typer.Exit(2)
    results = [(run, settings_findings(run, config)) for run in runs]
    if export:
        for i, (run, _) in enumerate(results):
            out = export if len(results) == 1 else export / (run.root.name if run.root else f"run{i}")
            for p in export_series(run, out, export_format):
                typer.echo(f"wrote {p}", err=True)
    if fmt is Fmt.json:
        docs = [run_dict(run, findings) for run, findings in results]
        sys.stdout.write(dumps(docs[0] if len(docs) == 1 else {"runs": docs}) + "\n")
    elif fmt is Fmt.jsonl:
        for run, findings in results:
            for src in run.sources:
                for r in src.records:
                    sys.stdout.write(dumps(_record_dict(src.path, r)) + "\n")
            for ep in run_dict(run, findings)["endpoints"]:
                sys.stdout.write(dumps({"type": "endpoint", **ep}) + "\n")
            for f in findings:
                sys.stdout.write(dumps({"type": "finding", **f.to_dict()}) + "\n")
    else:
        console = console_for()
        for i, (run, findings) in enumerate(results):
            if len(results) > 1:
                console.rule(f"run {run.root or i}", style="dim")
            render_text(run, findings, console)
    errors = [e for run, _ in results for e in run.errors]
    for e in errors:
        typer.echo(f"diag tail: {e}", err=True)
    raise typer.Exit(2 if errors else max(exit_code(f, fail_on) for _, f in results))


def settings_findings_check(config: Path | None) -> None:
    """Fail early (exit 2) on a broken configuration, before any output."""
    load_settings(Path.cwd(), config)


def _when(text: str | None, flag: str) -> datetime | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{flag} {text!r}: not an ISO time (2026-08-20T09:30:00Z)") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def _add_metric_sources(run: Run, scrape: list[str], prom: str | None, start: datetime | None,
                        end: datetime | None) -> None:
    """Live /metrics scrapes and Prometheus server series join the run's endpoints (diag.prom);
    the server is queried over the run's time span unless --prom-start/--prom-end say otherwise."""
    from .prom import PromSourceError, attach, extra_sources

    try:
        logs = extra_sources(scrape, prom, start=start or run.start, end=end or run.end)
    except PromSourceError as e:
        raise InputError(str(e)) from None
    attach(run, logs)


def _record_dict(path: str, r) -> dict:
    from dataclasses import asdict

    d = {k: v for k, v in asdict(r).items() if v is not None}
    return {"type": "record", "kind": r.kind, "path": path, **d}


def follow_run(paths: list[str], fmt: Fmt, fail_on: FailOn, heartbeat: float, poll_s: float,
               config: Path | None) -> int:
    """Follow until Ctrl-C / SIGTERM; print records (jsonl), findings as they open and close, heartbeats."""
    from .follow import Follower, check_paths

    check_paths(paths)
    follower = Follower(paths)
    console = console_for()
    out = sys.stdout
    stop = {"flag": False}

    def _stop(*_: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, _stop)
    findings: list[Finding] = []
    last_eval = last_beat = 0.0
    dirty = True

    def emit(obj: dict) -> None:
        out.write(dumps(obj) + "\n")
        out.flush()

    def evaluate_now() -> Run:
        nonlocal findings
        logs = follower.logs()
        endpoints, lifecycle, quoted = build_endpoints(logs)
        run = Run(None, logs, [(str(s.path), s.reason) for s in follower.skipped], endpoints, lifecycle, quoted)
        new = settings_findings(run, config)
        opened, closed = diff(findings, new)
        findings = new
        for f in opened:
            if fmt is Fmt.jsonl:
                emit({"type": "finding", "event": "open", **f.to_dict()})
            else:
                console.print(f"[bold]+ {f.code}[/bold] {f.severity} {f.name} [{f.endpoint or 'run'}]: {f.message}")
        for f in closed:
            if fmt is Fmt.jsonl:
                emit({"type": "finding", "event": "close", **f.to_dict()})
            else:
                console.print(f"[dim]- {f.code} closed [{f.endpoint or 'run'}][/dim]")
        return run

    def beat(run: Run) -> None:
        now = datetime.now(tz=UTC)
        for ep in run.endpoints.values():
            s = S.endpoint_summary(ep, findings, now)
            if fmt is Fmt.jsonl:
                emit({"type": "heartbeat", **s.to_dict()})
            else:
                console.print(f"{s.id:<12} {s.health:<8} samples={s.samples} run={s.running_last} "
                              f"wait={s.waiting_last} kv={s.kv_last if s.kv_last is None else round(s.kv_last, 1)} "
                              f"gen={s.gen_tps_last}")

    run = None
    try:
        while not stop["flag"]:
            recs, added = follower.poll()
            for path in added:
                if fmt is Fmt.jsonl:
                    emit({"type": "source", "event": "new", "path": path})
            if recs:
                dirty = True
                if fmt is Fmt.jsonl:
                    for path, r in recs:
                        emit(_record_dict(path, r))
            now = time.monotonic()
            if dirty and now - last_eval >= 1.0:
                run = evaluate_now()
                dirty, last_eval = False, now
            if heartbeat > 0 and now - last_beat >= heartbeat:
                if run is None:
                    run = evaluate_now()
                beat(run)
                last_beat = now
            time.sleep(poll_s)
    except KeyboardInterrupt:
        pass
    for path, r in follower.flush():
        if fmt is Fmt.jsonl:
            emit(_record_dict(path, r))
    run = evaluate_now()
    if fmt is Fmt.jsonl:
        emit({"type": "summary", **{k: v for k, v in run_dict(run, findings).items() if k != "sources"}})
    elif fmt is Fmt.json:
        out.write(dumps(run_dict(run, findings)) + "\n")
    else:
        render_text(run, findings, console, now=datetime.now(tz=UTC))
    return 0  # Ctrl-C is how a follow ends: a normal exit
