"""The one path from data to screen: Source -> assemble(Run) -> analyze(Report) -> emitters.

Its first two steps live in rules (:func:`diag.rules.assemble.assemble`, :func:`diag.rules.judge.judge`),
so the catalog's examples go through them too. ``diag tail`` is :meth:`Pipeline.once`, ``diag tail -f`` iterates :meth:`Pipeline.stream`, and
``diag watch`` calls :meth:`Pipeline.step` on a worker thread. Every command resolves its settings
once (``diag.rules.settings.resolve``) and hands them here, so batch, follow, replay and Prometheus
sources reach the same report for the same data.

Time: a report is judged as of ``now``. A finished source (a batch read, a replay that reached its
end) and a run whose data ended long ago (a finished run followed after the fact) are judged as of
the end of their own data: the run's clock, the latest time any line carries, noise included (a stage
that stalls while its log goes on with noise lines has lasted that long); a replay under way by its
virtual clock; only a live run by the wall clock. A finished run's endpoints are STALE against the end
of its stats (one whose stats stopped while others' went on), not against noise that outlived them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from diag.parsers import engines
from diag.parsers.ingest import ParsedLog
from diag.rules.advice import RunConfig, check_fixes
from diag.rules.assemble import assemble
from diag.rules.catalog import catalog
from diag.rules.effective import reads_what_ran, what_ran_settled
from diag.rules.endpoints import FrameCache
from diag.rules.engine import diff, same
from diag.rules.finding import Finding
from diag.rules.judge import RUNTIME_SCOPES, judge
from diag.rules.postmortem import postmortem, timeline
from diag.rules.runmodel import Run, latest
from diag.rules.settings import Settings
from diag.rules.verdict import run_verdicts, with_verdict_advice

from .changes import Changes
from .report import (
    Report,
    balance,
    endpoint_summary,
    header_lines,
    run_phase,
    stage,
    topology,
    window_dict,
)
from .sources import Source
from .throughput import throughput, tokens_per_gpu

LIVE_S = 15 * 60.0   # data this close to the wall clock is a live run; other data is judged as of its end
SETTLE_S = 30.0      # a live window is judged once the data is this far past its qualifying part (3 stats lines)
DUE_MARGIN_S = 0.01   # a poll this long after a held-back line is due (its hold has surely passed then)


def data_end(run: Run) -> datetime | None:
    """Where a finished run ends: its clock (:attr:`Run.clock`)."""
    return run.clock


def stats_end(run: Run) -> datetime | None:
    """The last stats sample of any endpoint: where a finished run stopped serving. An endpoint whose
    stats stopped well before it is STALE; after it every endpoint is idle, however long the noise goes on
    (vLLM logs an idle interval's stats at DEBUG)."""
    return latest(*(ep.stats["ts"].max() for ep in run.endpoints.values() if ep.samples))  # type: ignore[misc]


def judged_at(run: Run, source_now: datetime | None, finished: bool,
              wall: Callable[[], datetime] = lambda: datetime.now(tz=UTC)) -> datetime | None:
    """``now`` for a report (see the module docstring)."""
    end = data_end(run)
    if finished:
        return end
    if source_now is not None:
        return source_now
    if end is None:
        return None
    w = wall()
    return w if abs((w - end).total_seconds()) <= LIVE_S else end  # future-dated data is not live either


def analyze(run: Run, settings: Settings, now: datetime | None, finished: bool = True,
            shown: Callable[[Finding], bool] | None = None) -> Report:
    """Findings (thresholds, selection and suppressions of ``settings``): the runtime rules on the run
    and the config rules on what ran, linked symptom -> cause; the verdict per benchmark point and per
    run; endpoint summaries (over the verdict's steady window) and health, header facts: everything an
    emitter shows, computed once. ``finished``: the run's data is complete (a point without a result
    was cut short, not still under way). ``shown`` keeps a live report's findings to the settled ones
    (:meth:`Pipeline.consume`); the verdict rests on those alone.

    Advice: every fix and experiment is checked against the recipe and what ran (one
    :class:`RunConfig`), and a finding a verdict rests on takes that verdict's advice as its fix. Texts name
    the knobs as the run's engine spells them."""
    with engines.using(run.engine.name):
        return _analyze(run, settings, now, finished, shown)


def _analyze(run: Run, settings: Settings, now: datetime | None, finished: bool,
             shown: Callable[[Finding], bool] | None) -> Report:
    config = RunConfig.of_run(run)
    findings = check_fixes(judge(run, settings, shown=shown), config, run)
    verdicts = run_verdicts(run, findings, now, finished, config=config)
    findings = with_verdict_advice(findings, verdicts)
    stale_at = stats_end(run) if finished else now
    summaries = tuple(endpoint_summary(run, ep, findings, now, verdicts=verdicts, stale_at=stale_at)
                      for ep in run.endpoints.values())
    tp = throughput(run, verdicts.run, window_dict(verdicts))
    pm = postmortem(run, findings, verdicts.run)
    return Report(run, tuple(findings), summaries, tuple(header_lines(run, tp)), topology(run), stage(run),
                    balance(verdicts), tokens_per_gpu(run), now, settings.fail_on, verdicts,
                    run_phase(verdicts, now), tp, pm, timeline(run, pm))


def settled(f: Finding, run: Run, now: datetime | None, settings: Settings) -> bool:
    """Whether a live report may show a finding the rules report on the data so far: live shows only
    what the batch read of the finished run will have. A finding on what ran (the recipe checks, the
    drift) waits until every endpoint's launch and startup facts are in (:func:`what_ran_settled`); a
    finding with a start waits until the data is ``SETTLE_S`` past its rule's ``for`` window from that
    start (every file has reached the buckets that qualified it), and past its end when it ended. The rules' conditions are causal (a
    window's judgment does not depend on later data), so a settled finding stays."""
    rule = catalog().get(f.code)
    if rule is None:
        return True
    rule = settings.rule(f.code)
    if reads_what_ran(rule) and not what_ran_settled(run):
        return False
    if f.first_ts is None:
        return True
    if now is None or (now - f.first_ts).total_seconds() < rule.for_s + SETTLE_S:
        return False
    # a finding that ended at the edge of the data (a stage that took so long, as far as its lines go)
    # may still move: it waits until the data is SETTLE_S past its end too
    return f.open or f.last_ts is None or (now - f.last_ts).total_seconds() >= SETTLE_S


@dataclass(frozen=True)
class Update:
    """One step of a pipeline: what arrived, which findings opened, closed or changed (message, counts,
    end: the same finding, see :func:`diag.rules.engine.key`), the report after it."""

    changes: Changes
    report: Report | None            # None when nothing changed since the last report
    opened: tuple[Finding, ...] = ()
    closed: tuple[Finding, ...] = ()
    updated: tuple[Finding, ...] = ()


@dataclass
class Pipeline:
    """A source and the settings to judge it with; keeps the last report and per-file frames."""

    source: Source
    settings: Settings
    clock: Callable[[Run], datetime | None] | None = None
    min_interval_s: float = 0.0        # re-analyze at most this often while records keep arriving
    wall: Callable[[], datetime] = field(default=lambda: datetime.now(tz=UTC))
    report: Report | None = None
    _cache: FrameCache = field(default_factory=FrameCache)
    _dirty: bool = True
    _last: float = 0.0
    _settled: bool = False             # the last report was of a finished source (judged as of its data)

    def assemble(self) -> Run:
        s = self.source
        return assemble(s.logs(), s.side(), root=s.root, skipped=s.skipped, cache=self._cache)

    def analyze(self, run: Run, *, final: bool = False) -> Report:
        """The report on ``run``; live (the source not finished, not ``final``), only the findings
        already shown and the newly settled ones."""
        now = self.clock(run) if self.clock is not None else \
            judged_at(run, self.source.now(), self.source.finished, self.wall)
        if final or not self.live(run):
            return analyze(run, self.settings, now)
        before = list(self.report.findings) if self.report is not None else []
        return analyze(run, self.settings, now, False,
                       lambda f: any(same(f, g) for g in before) or settled(f, run, now, self.settings))

    def live(self, run: Run) -> bool:
        """Data still arriving: a replay under way, or a followed run whose data is within ``LIVE_S`` of
        the wall clock (a finished run followed after the fact is judged whole, as a batch read)."""
        if self.source.finished:
            return False
        if self.source.now() is not None:
            return True
        end = data_end(run)
        return end is not None and abs((self.wall() - end).total_seconds()) <= LIVE_S

    def step(self, *, force: bool = False) -> Update:
        """Poll the source once; re-assemble and re-analyze when something arrived (or ``force``)."""
        return self.consume(self.source.poll(), force=force)

    def finish(self) -> Update:
        """The source's last unterminated lines, and the final report (nothing more will arrive: every
        finding is settled)."""
        return self.consume(self.source.flush(), force=True, final=True)

    def consume(self, changes: Changes, *, force: bool = False, final: bool = False) -> Update:
        """Take changes polled from the source; re-assemble and re-analyze when they are due. Until the
        run is live (:meth:`live`, not ``final``) the report holds only settled findings (:func:`settled`)."""
        self._dirty = self._dirty or bool(changes)
        t = time.monotonic()
        if force and not self._dirty and self._settled and self.report is not None:
            return Update(changes, self.report)  # a finished source, nothing new: the same report again
        due = force or self.report is None or (self._dirty and t - self._last >= self.min_interval_s)
        if not due:
            return Update(changes, None)
        before = list(self.report.findings) if self.report is not None else []
        settled_source = self.source.finished and self.clock is None  # its report depends only on the data
        report = self.analyze(self.assemble(), final=final)
        opened, closed, updated = diff(before, list(report.findings))
        self.report, self._dirty, self._last, self._settled = report, False, t, settled_source
        return Update(changes, report, tuple(opened), tuple(closed), tuple(updated))

    def once(self) -> Report:
        """Read everything the source has now and report (``diag tail``)."""
        self.step()
        update = self.finish()
        assert update.report is not None
        return update.report

    def stream(self, poll_s: float, stop: Callable[[], bool]) -> Iterator[Update]:
        """Poll until ``stop()`` (once at least); yields every step (``diag tail -f``); the last yield is
        the final report after the source's unterminated lines. Ctrl-C ends the stream like ``stop()``."""
        try:
            yield self.step()  # what is there now is read, even when stopped at once
            while not stop():
                due = self.source.due_in()   # a held-back line is read the moment it is due, not a poll later
                time.sleep(poll_s if due is None else min(poll_s, due + DUE_MARGIN_S))
                if stop():
                    break
                yield self.step()
        except KeyboardInterrupt:
            pass
        yield self.finish()


def window_of(logs: Sequence[ParsedLog]) -> tuple[datetime | None, datetime | None]:
    """First and last timestamp of some parsed logs (the span a Prometheus query covers)."""
    stamps = [r.ts for lg in logs for r in lg.records if r.ts is not None]
    stamps += [t for lg in logs for cols in (lg.stats, lg.kv) if cols.height
               for t in (cols["ts"].min(), cols["ts"].max()) if t is not None]  # type: ignore[misc]
    if not stamps:
        return None, None
    return min(stamps), max(stamps)


__all__ = ["LIVE_S", "RUNTIME_SCOPES", "SETTLE_S", "Pipeline", "Update", "analyze", "assemble", "data_end",
           "judged_at", "settled", "stats_end", "window_of"]
