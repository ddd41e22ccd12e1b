"""`diag tail PATH...`: per-endpoint health of a run from its logs, once or following them.

``tail`` is :meth:`diag.pipeline.Pipeline.once` over a :class:`~diag.sources.BatchSource` per run
directory; ``tail -f`` iterates :meth:`~diag.pipeline.Pipeline.stream` over a
:class:`~diag.sources.FollowSource`. Both end in the same report and the same exit status.
"""

from __future__ import annotations

import signal
import sys
from datetime import UTC, datetime, timedelta
from enum import StrEnum
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
    TailFormat,
    console_for,
    fail,
    fail_all,
    positive,
    printable,
    quiet_pipe,
    run_status,
)

if TYPE_CHECKING:
    from .pipeline import Pipeline
    from .report import Report

PROGRESS_MIN_BYTES = 50 << 20
NO_INPUT = "give run directories or log files, or --prom URL to read a Prometheus server alone"
SINCE_WITH_PATHS = "--since sets the window of --prom without paths; with paths use --prom-start/--prom-end"


class ExportFmt(StrEnum):
    parquet = "parquet"
    csv = "csv"


EXAMPLES: tuple[Example, ...] = (
    ("A run directory (srt-slurm's outputs/<jobid>): every endpoint's health and the findings",
     "diag tail outputs/5010467"),
    ("The same from a job's Slurm output files", "diag tail slurm-*.out"),
    ("One JSON document, for scripts and CI", "diag tail outputs/5010467 --format json"),
    ("Follow a running job's logs (Ctrl-C stops; the exit status is by --fail-on)",
     "diag tail -f 'outputs/5010467/logs/*.out'"),
)


def tail(
    paths: list[str] = typer.Argument(None, metavar="PATH...", help="Run directories, log files or globs (slurm-*.out, "
                                      "*_decode_w0.out); none with --prom: the server alone."),
    fmt: TailFormat = typer.Option(TailFormat.text, "--format",
                                   help="Output format: text, json (one document), jsonl (a stream), sarif or "
                                        "github (the findings), markdown (the postmortem to paste into an issue)."),
    fail_on: FailOnOption = None,
    select: Select = None,
    ignore: Ignore = None,
    exit_zero: ExitZero = False,
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep reading as the logs grow (like tail -F: a path not there yet, or a "
                                                   "directory without logs yet, is waited for). An archive "
                                                   "(.tar.gz, .tgz, .tar, .zip) does not grow: named alone, it "
                                                   "is read once, as without -f, and diag says so."),
    heartbeat: float = typer.Option(30.0, "--heartbeat", metavar="SECONDS", callback=positive("--heartbeat"),
                                    help="Follow mode: seconds between endpoint heartbeats."),
    poll: float = typer.Option(0.1, "--poll", callback=positive("--poll", hi=60), hidden=True,
                               help="Follow mode: seconds between reads."),
    export: Path | None = typer.Option(None, "--export", metavar="DIR",
                                       help="Also write the time series (stats and KV-transfer tables) to this "
                                            "directory."),
    export_format: ExportFmt = typer.Option(ExportFmt.parquet, "--export-format",
                                            help="File format of --export: parquet or csv."),
    save: bool = typer.Option(False, "--save", help="Also write each run's result next to its logs "
                              "(RUN/.diag/result.json and its index rows): diag index takes it instead of "
                              "reading the logs again."),
    config: ConfigFile = None,
    scrape: Scrape = None,
    prom: Prom = None,
    prom_start: str | None = typer.Option(None, "--prom-start", metavar="TIME",
                                          help="--prom from this ISO time (default: run start)."),
    prom_end: str | None = typer.Option(None, "--prom-end", metavar="TIME",
                                        help="--prom until this ISO time (default: run end)."),
    since: str | None = typer.Option(None, "--since", metavar="DURATION",
                                     help="--prom without paths: the last DURATION (15m, 2h; default 15m)."),
) -> None:
    """Per-endpoint health of a run from its logs: throughput, queues, KV, faults, findings."""
    from diag.rules.settings import SettingsError, resolve

    from .files import InputError, is_archive, output_problem

    try:  # the configuration first: a broken diag.toml fails before any log is read
        settings = resolve(Path.cwd(), config, select=select, ignore=ignore,
                           fail_on=fail_on.value if fail_on else None, exit_zero=exit_zero)
    except SettingsError as e:
        fail_all("tail", [f"config error: {line}" for line in e.lines])
    paths, scrape = list(paths or []), list(scrape or [])
    if export is not None and (why := output_problem(export, directory=True)) is not None:
        fail("tail", f"--export {export}: {why}")
    try:
        window = _when(prom_start, "--prom-start"), _when(prom_end, "--prom-end")
        if since is not None:
            window = _since(since, window)
        if not paths:
            if not prom:
                raise InputError(NO_INPUT)
            if follow or scrape or export:
                raise InputError("--prom without paths reads the server once; no --follow, --scrape or --export")
            reports = [_server_report(prom, window, settings)]
            with quiet_pipe():
                emit(reports, fmt)
            raise typer.Exit(exit_status(reports))
        if since is not None:
            raise InputError(SINCE_WITH_PATHS)
        if follow and all(is_archive(p) for p in paths):
            typer.echo(f"diag tail: {', '.join(map(printable, paths))}: an archive does not grow; read once, "
                       "as without --follow", err=True)
            follow = False
        if follow:
            if scrape or prom:
                raise InputError("--scrape/--prom read once; they do not combine with --follow")
            if export or save:
                raise InputError("--export and --save write a finished read; they do not combine with --follow")
            raise typer.Exit(follow_run(paths, fmt, settings, heartbeat, poll))
        if save and (scrape or prom):
            raise InputError("--save keeps what the logs say; it does not combine with --scrape/--prom")
        reports = _read(paths, settings, scrape, prom, window, save)
    except InputError as e:
        fail("tail", str(e))
    from .refusal import nothing_read

    if nothing_read(reports):
        _nothing_read(paths, reports)
    if export:
        for i, rep in enumerate(reports):
            run = rep.run
            out = export if len(reports) == 1 else export / (run.root.name if run.root else f"run{i}")
            try:
                written = export_series(rep, out, export_format)
            except OSError as e:
                fail("tail", f"--export {out}: cannot write: "
                     + ("a file is in the way (give a directory)" if out.exists() and not out.is_dir()
                        else e.strerror or str(e)))
            for p in written:
                typer.echo(f"wrote {p}", err=True)
    with quiet_pipe():
        emit(reports, fmt)
    raise typer.Exit(exit_status(reports))


def _since(text: str, window: tuple[datetime | None, datetime | None]) -> tuple[datetime, datetime]:
    from diag.parsers.promql import parse_duration

    from .files import InputError

    if window[0] is not None:
        raise InputError("--since and --prom-start both set the start; give one")
    try:
        seconds = parse_duration(text)
    except ValueError:
        seconds = -1
    if seconds <= 0:
        raise InputError(f"--since {text!r}: not a duration (30s, 15m, 2h)")
    end = window[1] or datetime.now(tz=UTC)
    return end - timedelta(seconds=seconds), end


def _server_report(url: str, window: tuple[datetime | None, datetime | None], settings: Any) -> Report:
    """``diag tail --prom URL`` without paths: the run is what the server holds over the window
    (default: the last 15 minutes), read through the same pipeline as logs."""
    from .files import InputError
    from .pipeline import Pipeline
    from .prom import DEFAULT_WINDOW, PromSourceError, query_server
    from .sources import LogsSource

    end = window[1] or datetime.now(tz=UTC)
    start = window[0] or end - DEFAULT_WINDOW
    try:
        logs = query_server(url, start, end)
    except PromSourceError as e:
        raise InputError(str(e)) from None
    return Pipeline(LogsSource(logs, f"Prometheus {url}"), settings).once()


def _read(paths: list[str], settings: Any, scrape: list[str], prom: str | None,
          window: tuple[datetime | None, datetime | None], save: bool = False) -> list[Report]:
    """One report per run directory among ``paths``; with ``save``, each one written next to its logs
    (fingerprinted before the read: a log that grows meanwhile makes the saved result stale)."""
    from .files import InputError, find_runs
    from .index.build import fingerprint, save_run
    from .pipeline import Pipeline, window_of
    from .sources import BatchSource, MultiSource, metric_source

    runs = find_runs(paths)
    if (scrape or prom) and len(runs) > 1:
        raise InputError("--scrape/--prom add metrics to one run; name a single run directory")
    total = sum(r.log_bytes for r in runs)
    reports = []
    with _progress(total) as on_bytes:
        for rf in runs:
            if save and rf.root is None:
                raise InputError("--save writes into a run directory; these files belong to none")
            input_hash = fingerprint(rf, settings) if save else None
            source: Any = BatchSource(rf, on_bytes=on_bytes)
            if scrape or prom:
                source.poll()
                start, end = window_of(source.logs())
                source = MultiSource([source, metric_source(scrape, prom, window[0] or start, window[1] or end)])
            reports.append(Pipeline(source, settings).once())
            if input_hash is not None and not reports[-1].read_nothing:
                try:
                    typer.echo(f"wrote {save_run(rf, reports[-1], input_hash)}", err=True)
                except OSError as e:
                    raise InputError(f"--save {rf.root}: cannot write: {e.strerror or e}") from None
    return reports


class _progress:
    """A progress bar on stderr for reads over PROGRESS_MIN_BYTES on a terminal; else nothing."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar: Any = None

    def __enter__(self) -> Any:
        if self.total < PROGRESS_MIN_BYTES or not sys.stderr.isatty():
            return None
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self.bar = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                            TransferSpeedColumn(), TimeRemainingColumn(), console=Console(file=sys.stderr),
                            transient=True)
        task = self.bar.add_task("reading logs", total=self.total)
        self.bar.start()
        return lambda n: self.bar.advance(task, n)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def read_reports(paths: list[str], settings: Any, prom: str | None = None, since: str | None = None) -> list[Report]:
    """A batch read as ``diag tail`` does it without ``--follow``/``--scrape``: the runs among ``paths``
    (with ``prom``'s metrics), or the Prometheus server alone over the last ``since``. Raises InputError
    with the one-line message ``diag tail`` prints, a read that found nothing included."""
    from .files import InputError

    window: tuple[datetime | None, datetime | None] = (None, None)
    if since is not None:
        window = _since(since, window)
    if not paths:
        if not prom:
            raise InputError(NO_INPUT)
        return [_server_report(prom, window, settings)]
    if since is not None:
        raise InputError(SINCE_WITH_PATHS)
    reports = _read(paths, settings, [], prom, window)
    from .refusal import nothing_read, unread_lines

    if nothing_read(reports):
        raise InputError(unread_lines(paths, reports)[0])
    return reports


def _nothing_read(paths: list[str], reports: list[Report]) -> None:
    from .refusal import unread_lines

    for line in unread_lines(paths, reports):
        typer.echo(f"diag tail: {line}", err=True)
    for r in reports:
        for p, reason in r.run.skipped:
            typer.echo(f"  skipped {printable(p)}: {reason}", err=True)
    raise typer.Exit(EXIT_USAGE)


def emit(reports: list[Report], fmt: TailFormat) -> None:
    """Write the reports to stdout in ``fmt``."""
    from .emit import JSONL_SCHEMA, dumps, envelope
    from .emit.jsondoc import document, jsonl_lines
    from .emit.text import render_tail

    out = sys.stdout
    if fmt is TailFormat.json:
        out.write(dumps(document(reports)) + "\n")
    elif fmt in (TailFormat.sarif, TailFormat.github):
        from diag.rules.engine import sort_findings

        from .emit.github import render_github
        from .emit.sarif import render_sarif

        found = sort_findings(f for r in reports for f in r.findings)
        out.write(render_sarif(found) if fmt is TailFormat.sarif else render_github(found))
    elif fmt is TailFormat.markdown:
        from .emit.markdown import render_markdown

        out.write(render_markdown(reports))
    elif fmt is TailFormat.jsonl:
        out.write(dumps({"type": "stream", **envelope(JSONL_SCHEMA)}) + "\n")
        for rep in reports:
            for obj in jsonl_lines(rep):
                out.write(dumps(obj) + "\n")
    else:
        console = console_for()
        for i, rep in enumerate(reports):
            if len(reports) > 1:
                console.rule(f"run {rep.run.root or i}", style="dim")
            render_tail(rep, console)
    out.flush()


def exit_status(reports: list[Report]) -> int:
    """2 when a metric source asked for (``--scrape``/``--prom``) failed, else the worst run's status by
    its verdict (``Report.fails``). A file that could not be read is one line on stderr;
    the rest of the input was read, so it is not exit 2 (nothing usable at all is, see :func:`_nothing_read`)."""
    for e in (e for r in reports for e in r.run.errors):
        typer.echo(f"diag tail: {printable(e)}", err=True)
    if any(lg.error and "://" in lg.path for r in reports for lg in r.run.sources):
        return EXIT_USAGE
    return run_status(r.fails for r in reports)


def export_series(report: Report, out: Path, fmt: ExportFmt) -> list[Path]:
    import polars as pl

    run = report.run
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


class _FollowStatus:
    """``tail -f``'s status lines on stderr: what is followed once the logs there are read, what is
    waited for (a path not there yet, a directory without run logs yet), and what appeared."""

    def __init__(self, follower: Any) -> None:
        self.follower = follower
        self.steps = 0
        self.shown = 0
        self.empty = False

    def step(self) -> None:
        f, self.steps = self.follower, self.steps + 1
        for arg in f.appeared[self.shown:]:
            typer.echo(f"diag tail: {printable(arg)} appeared; following it", err=True)
        self.shown = len(f.appeared)
        if self.steps == 1:
            for arg in f.waiting:
                typer.echo(f"diag tail: waiting for {printable(arg)} to appear (like tail -F; Ctrl-C stops)",
                           err=True)
        if not f.files and not f.waiting and not self.empty:
            self.empty = True
            typer.echo(f"diag tail: no run logs in {printable(' '.join(f.paths))} yet; waiting for them to "
                       "appear (Ctrl-C stops)", err=True)
        if f.files and (self.steps == 1 or self.empty):
            self.empty = False
            typer.echo(f"diag tail: following {len(f.files)} log{'s' * (len(f.files) != 1)} (Ctrl-C stops)",
                       err=True)


def _when(text: str | None, flag: str) -> datetime | None:
    from .files import InputError

    if not text:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(f"{flag} {text!r}: not an ISO time (2026-08-20T09:30:00Z)") from None
    return t if t.tzinfo else t.replace(tzinfo=UTC)


def follow_run(paths: list[str], fmt: TailFormat, settings: Any, heartbeat: float, poll_s: float) -> int:
    """Follow until Ctrl-C / SIGTERM. stdout carries only ``fmt``: jsonl streams records, findings
    opening/changing/closing, heartbeats and a final summary; json writes one document at the end, markdown
    the postmortem; text prints the events and the final report. Exit status by the verdict and fail-on, like a batch read."""
    import time

    from .emit import JSONL_SCHEMA, dumps, envelope
    from .emit.jsondoc import document, record_dict, summary_line
    from .emit.text import finding_event, heartbeat_line, render_tail
    from .pipeline import Pipeline
    from .sources import FollowSource

    stop = {"flag": False}
    for sig in (signal.SIGINT, signal.SIGTERM):  # end after the line being written, never inside it
        signal.signal(sig, lambda *_: stop.__setitem__("flag", True))
    source = FollowSource(paths, wait=True)
    pipeline: Pipeline = Pipeline(source, settings, min_interval_s=1.0)
    status = _FollowStatus(source.follower)
    out = sys.stdout
    console = console_for()
    events = console if fmt is TailFormat.text else console_for(sys.stderr)

    def emit_obj(obj: dict[str, Any]) -> None:
        out.write(dumps(obj) + "\n")
        out.flush()

    last_beat = time.monotonic()
    report = None
    with quiet_pipe():
        if fmt is TailFormat.jsonl:
            emit_obj({"type": "stream", **envelope(JSONL_SCHEMA)})
        for update in pipeline.stream(poll_s, lambda: stop["flag"]):
            status.step()
            if fmt is TailFormat.jsonl:
                for path in update.changes.added:
                    emit_obj({"type": "source", "event": "new", "path": path})
                for path, r in update.changes.each_record():  # new stats/KV rows materialise here
                    emit_obj(record_dict(path, r))
            for event, found in (("open", update.opened), ("update", update.updated), ("close", update.closed)):
                for f in found:
                    if fmt is TailFormat.jsonl:
                        emit_obj({"type": "finding", "event": event, **f.to_dict()})
                    elif event != "update":  # the text stream names openings and closings only
                        events.print(finding_event(f, event))
            report = update.report or report
            now = time.monotonic()
            if report is not None and now - last_beat >= heartbeat:
                last_beat = now
                for s in report.endpoints:
                    if fmt is TailFormat.jsonl:
                        emit_obj({"type": "heartbeat", **s.to_dict()})
                    else:
                        events.print(heartbeat_line(s))
        final = pipeline.report
        assert final is not None
        if final.read_nothing:  # as a batch read of the same paths: one line each, exit 2
            for arg in source.follower.waiting:
                typer.echo(f"diag tail: {printable(arg)} never appeared", err=True)
            _nothing_read(paths, [final])
        if fmt is TailFormat.jsonl:
            emit_obj(summary_line(final))
        elif fmt is TailFormat.json:
            emit_obj(document([final]))
        elif fmt is TailFormat.markdown:
            emit([final], fmt)
        else:
            render_tail(final, console)
    return exit_status([final])
