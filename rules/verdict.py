"""The verdict: one class per benchmark point and per run, with its evidence, the alternatives it ruled
out, a confidence and the next experiment. Vocabulary, thresholds and experiments are catalog data
(``rules/catalog/verdicts.toml``); this module judges a run model and its findings by them.

The catalog side (vocabulary, thresholds, experiments) is :mod:`rules.verdict_catalog`; the windows
and the figures over them (what a class's tests read) are :mod:`rules.verdict_figures`. Every class's
test reads one judge over one window's figures (:class:`_Judge`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from diag.parsers.records import BenchResult

from .advice import RunConfig, fix_text
from .confidence import weighed
from .engine import cause_key
from .finding import Finding
from .present import number
from .runmodel import Run
from .verdict_catalog import DECODING, _v, capacity, experiments, verdict_catalog
from .verdict_figures import EMPTY_FIGURES, active_window, figures, point_phases

CONFIDENCES = ("high", "medium", "low")   # a verdict's confidence, most first


# ------------------------------------------------------------------ the verdict
@dataclass(frozen=True)
class Verdict:
    """One class from the closed vocabulary, over one window."""

    cls: str
    why: str                                   # one sentence
    confidence: str                            # one of CONFIDENCES
    limiter: str | None = None                 # decode-bound: kv-capacity | batch/compute; transfer-bound: ...
    concurrency: int | None = None             # the benchmark point (None: the run as a whole, no points)
    window: tuple[datetime, datetime] | None = None    # the steady window the figures come from
    phases: tuple[dict[str, Any], ...] = ()    # warm-up / steady / drain of the point
    figures: dict[str, Any] = field(default_factory=dict, compare=False)
    evidence: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    ruled_out: tuple[dict[str, str], ...] = field(default=(), compare=False)
    experiments: tuple[dict[str, str], ...] = field(default=(), compare=False)
    findings: tuple[tuple[str, str | None], ...] = ()  # (code, endpoint) of the findings it rests on
    queues: tuple[str, ...] = ()               # the sides where a queue stands in the window (prefill, decode)
    in_place: tuple[str, ...] = field(default=(), compare=False)  # what the class would change, in place already
    confidence_reasons: tuple[str, ...] = ()   # why the evidence lowered the confidence (rules.confidence)

    @property
    def label(self) -> str:
        """``decode-bound (kv-capacity)``."""
        return f"{self.cls} ({self.limiter})" if self.limiter else self.cls

    @property
    def outcome(self) -> str:
        """What the class means for the run (verdict_catalog.OUTCOMES): the exit status follows it."""
        return verdict_catalog().get(self.cls).outcome

    @property
    def side(self) -> str | None:
        """The side the class names as the limit: prefill, decode, kv-transfer, or None."""
        return verdict_catalog().get(self.cls).side

    @property
    def fix(self) -> str | None:
        """The verdict's advice as a finding's fix: its experiments (the next first) and what is in place."""
        return fix_text([e["action"] for e in self.experiments], list(self.in_place))

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.cls, "limiter": self.limiter, "why": self.why, "confidence": self.confidence,
                "confidence_reasons": list(self.confidence_reasons),
                "concurrency": self.concurrency,
                "window": None if self.window is None else {"start": self.window[0].isoformat(),
                                                            "end": self.window[1].isoformat()},
                "phases": list(self.phases), "figures": self.figures, "evidence": list(self.evidence),
                "ruled_out": list(self.ruled_out), "experiments": list(self.experiments),
                "in_place": list(self.in_place),
                "findings": [{"code": c, "endpoint": e} for c, e in self.findings], "queues": list(self.queues)}


@dataclass(frozen=True)
class Verdicts:
    """The run's verdict and one per benchmark point (in concurrency order)."""

    run: Verdict
    points: tuple[Verdict, ...] = ()

    def at(self, concurrency: int | None) -> Verdict | None:
        return next((v for v in self.points if v.concurrency == concurrency), None)


# ------------------------------------------------------------------ judging one window
def _overlaps(f: Finding, start: datetime | None, end: datetime | None) -> bool:
    if f.first_ts is None or start is None or end is None:
        return False
    return f.first_ts <= end and (f.last_ts or f.first_ts) >= start


def _consequence(f: Finding) -> bool:
    return cause_key(f) is not None


def _stalled(f: Finding) -> bool:
    """A DIAG-E004 that says the readiness count stalled (no worker failed): a stuck start, not a death."""
    return f.code == "DIAG-E004" and "polls" in f.evidence and "root_cause" not in f.evidence


def _cause(f: Finding) -> str:
    """A death in a few words: ``DIAG-E001 decode-w0: CUDA out of memory``."""
    return f"{f.code} {f.message.split(' (', 1)[0]}"


def _finding_ev(f: Finding) -> dict[str, Any]:
    loc = f.location
    return {"kind": "finding", "code": f.code, "name": f.name, "severity": f.severity, "endpoint": f.endpoint,
            "message": f.message, "first_ts": f.first_ts.isoformat() if f.first_ts else None,
            "last_ts": f.last_ts.isoformat() if f.last_ts else None,
            "at": None if loc is None else f"{loc.path}:{loc.line}" if loc.line else loc.path}


@dataclass
class _Judge:
    """The tests of every class over one window's figures and findings."""

    fig: dict[str, Any]
    found: list[Finding]
    cap: Mapping[str, Any]
    p: Mapping[str, float]

    def codes(self, *codes: str) -> list[Finding]:
        return [f for f in self.found if f.code in codes and not _consequence(f)]

    @property
    def pre_wait(self) -> float | None:
        return _v(self.fig, "prefill", "waiting", "mean")

    @property
    def dec_kv(self) -> float | None:
        return _v(self.fig, "decode", "kv", "mean")

    @property
    def dec_wait(self) -> float | None:
        return _v(self.fig, "decode", "waiting", "mean")

    @property
    def dec_run(self) -> float | None:
        return _v(self.fig, "decode", "running", "mean")

    @property
    def dec_wait_kv(self) -> float | None:
        """Decode's requests waiting for their KV transfer per sample (None: the split is unknown)."""
        return _v(self.fig, "decode", "waiting_kv", "mean")

    @property
    def dec_wait_capacity(self) -> float:
        """Decode's requests waiting for capacity: the waiting ones not waiting for their KV."""
        return max(0.0, (self.dec_wait or 0.0) - (self.dec_wait_kv or 0.0))

    def has_stats(self) -> bool:
        return bool(self.fig["prefill"] or self.fig["decode"])

    def queues(self) -> tuple[str, ...]:
        """The sides where a queue stands, by the thresholds the classes are judged with: prefill at
        ``prefill_queue`` waiting per engine, the generating side at ``transfer_wait_min`` waiting per
        engine for capacity or for their KV. The balance line names no other."""
        wait = self.p["transfer_wait_min"]
        dec = self.dec_wait_capacity >= wait or (self.dec_wait_kv or 0.0) >= wait
        return tuple(side for side, stands in (("prefill", self.prefill_queue()), ("decode", dec)) if stands)

    def prefill_queue(self) -> bool:
        return (self.pre_wait or 0.0) >= self.p["prefill_queue"]

    def prefill_saturated(self) -> str | None:
        """Where prefill logs no queue figure: DIAG-B001's saturation evidence (steps back to back with full
        batches), said; None without it."""
        ev = next((f.evidence for f in self.codes("DIAG-B001") if f.evidence.get("by") == "saturation"), None)
        if ev is None:
            return None
        return (f"prefill is saturated (its steps take {number(ev['prefill_busy_pct'], 0)} % of each interval, "
                f"batches at {number(ev['prefill_batch_fill_pct'], 0)} % of its token budget; the engine logs no "
                "queue figure)")

    def decode_kv_full(self) -> bool:
        kv, w = self.dec_kv or 0.0, self.dec_wait_capacity
        pre = _v(self.fig, "decode", "preemptions") or 0
        return kv >= self.p["decode_kv_high"] or ((w >= self.p["transfer_wait_min"] or pre > 0)
                                                   and kv >= self.p["decode_waiting_kv_min"])

    def decode_batch_full(self) -> bool:
        cap = self.cap.get("batch_cap")
        return bool(cap and (self.dec_run or 0.0) >= self.p["decode_batch_frac"] * cap
                    and (self.dec_wait_capacity >= self.p["transfer_wait_min"] or self.prefill_queue()))

    @property
    def disaggregated(self) -> bool:
        """The generating side is a P/D decode endpoint (its requests' KV arrives by transfer)."""
        return self.fig.get("decode_role") == "decode"

    def engine_prefilling(self) -> bool:
        """An aggregated engine with requests waiting while its KV has room: admission waits on prefill."""
        return (not self.disaggregated and (self.dec_wait or 0.0) >= self.p["transfer_wait_min"]
                and (self.dec_kv or 0.0) < self.p["decode_waiting_kv_min"] and not self.decode_batch_full())

    def waiting_on_transfers(self) -> bool:
        """Decode requests wait for their KV: by the KV-fetch split when known (more wait for KV than for
        capacity), else inferred from waiting requests with decode's KV not full."""
        if self.dec_wait_kv is not None:
            return (self.disaggregated and self.dec_wait_kv >= self.p["transfer_wait_min"]
                    and self.dec_wait_kv >= self.dec_wait_capacity and not self.prefill_queue())
        return (self.disaggregated and (self.dec_wait or 0.0) >= self.p["transfer_wait_min"]
                and (self.dec_kv or 0.0) < self.p["decode_waiting_kv_min"] and not self.prefill_queue()
                and not self.decode_batch_full())

    def waiting_for_capacity(self) -> bool:
        """By the KV-fetch split: more decode requests wait for capacity (their KV loaded) than for their KV."""
        return (self.disaggregated and self.dec_wait_kv is not None
                and self.dec_wait_capacity >= self.p["transfer_wait_min"] and self.dec_wait_capacity > self.dec_wait_kv)

    def batch_text(self) -> str:
        return (f"decode's batch is full: {number(self.dec_run, 1)} running/engine at {self.cap.get('batch_knob')} "
                f"{number(self.cap.get('batch_cap'), 0)}, {number(self.dec_wait, 1)} waiting/engine, KV at {number(self.dec_kv, 1)} %")

    def decode_text(self) -> str:
        parts = [f"decode KV {number(self.dec_kv, 1)} %"]
        run = self.dec_run
        if run is not None:
            if self.cap.get("batch_cap"):
                parts.append(f"{number(run, 1)} running/engine of {self.cap.get('batch_knob')} {number(self.cap['batch_cap'], 0)}")
            elif self.cap.get("decode_capacity_per_engine"):
                parts.append(f"{number(run, 1)} running/engine (KV sized for "
                             f"{number(self.cap['decode_capacity_per_engine'], 0)} full-length)")
            else:
                parts.append(f"{number(run, 1)} running/engine")
        parts.append(f"{number(self.dec_wait, 1)} waiting/engine")
        return ", ".join(parts)


def _confidence(signals: int, fig: Mapping[str, Any], p: Mapping[str, float]) -> str:
    """high: two or more agreeing signals over a long enough window; medium: one; low: little data."""
    steady = fig.get("window_s") or 0
    samples = max(_v(fig, "prefill", "samples") or 0, _v(fig, "decode", "samples") or 0)
    if signals >= 2 and steady >= p["min_steady_s"]:
        return "high"
    if signals >= 1 and samples >= 2:
        return "medium"
    return "low"


def _judge(j: _Judge, bench: BenchResult | None, run_findings: Sequence[Finding], finished: bool,
           ) -> tuple[str, str | None, str, str, list[Finding]]:
    """(class, limiter, why, confidence, findings it rests on) of one window."""
    p = j.p
    # invalid: facts, not inference
    for code, why in (("DIAG-A001", "the accuracy benchmark collapsed: the tokens measured are wrong"),
                      ("DIAG-V002", "every KV transfer failed: P/D never worked")):
        hits = [f for f in run_findings if f.code == code]
        if hits:
            return "invalid", None, why, "high", hits
    deaths = [f for f in j.codes("DIAG-E001", "DIAG-E004") if f.severity == "error" and not _stalled(f)]
    if bench is not None:
        total = (bench.successful_requests or 0) + (bench.failed_requests or 0)
        if not bench.complete and (finished or deaths):
            cause = _cause(deaths[0]) if deaths else "the benchmark printed no result"
            return "invalid", None, f"cut short at concurrency {number(bench.concurrency)}: {cause}", "high", deaths
        if bench.complete and (bench.successful_requests == 0 or bench.total_output_tokens == 0):
            return "invalid", None, "the point produced no tokens (0 completed requests or 0 output tokens)", \
                "high", j.codes("DIAG-V001")
        if total and (bench.failed_requests or 0) / total > p["failed_invalid_frac"]:
            share = 100.0 * (bench.failed_requests or 0) / total
            return "invalid", None, f"{number(bench.failed_requests)} of {number(total)} requests failed ({share:,.0f} %)", \
                "high", j.codes("DIAG-E002")
    if deaths:
        return "invalid", None, _cause(deaths[0]), "high", deaths
    metered = j.fig.get("requests") or {}
    if bench is None and metered.get("requests") and metered["errors"] / metered["requests"] > p["failed_invalid_frac"]:
        share = 100.0 * metered["errors"] / metered["requests"]
        return "invalid", None, (f"{number(metered['errors'])} of {number(metered['requests'])} requests failed ({share:,.0f} %, "
                                 f"Dynamo's {metered['source']} metrics)"), "high", j.codes("DIAG-E002")
    if bench is None:
        stuck = j.codes("DIAG-S001") + [f for f in j.codes("DIAG-E004") if _stalled(f)]
        if stuck:
            return "startup-stuck", None, stuck[0].message, "high", stuck
    # transfer failures
    failing = [f for f in j.codes("DIAG-E002") if f.severity == "error"]
    if failing:
        failed = bench.failed_requests if bench is not None else None
        extra = f"; {number(failed)} requests failed with them" if failed else ""
        return "transfer-bound", "kv-transfer failures", f"KV transfers failed during the window ({failing[0].message}){extra}", \
            _confidence(1 + bool(failed) + bool(j.has_stats()), j.fig, p), failing
    # decode
    kv_find = j.codes("DIAG-K001", "DIAG-K002", "DIAG-B002")
    if j.decode_kv_full() or kv_find:
        if j.decode_batch_full() and not j.decode_kv_full():
            return "decode-bound", "batch/compute", j.batch_text(), _confidence(1 + len(kv_find), j.fig, p), kv_find
        signals = len({f.code for f in kv_find}) + j.decode_kv_full()
        if not j.fig["decode"]:   # no stats in the window: the finding says it
            return "decode-bound", "kv-capacity", f"decode is out of KV capacity: {kv_find[0].code} {kv_find[0].message}", \
                _confidence(signals, j.fig, p), kv_find
        return "decode-bound", "kv-capacity", \
            f"decode is out of KV capacity: {j.decode_text()}" + \
            (f", {number(_v(j.fig, 'decode', 'preemptions') or 0)} preemptions" if _v(j.fig, "decode", "preemptions") else ""), \
            _confidence(signals, j.fig, p), kv_find
    if j.decode_batch_full():
        return "decode-bound", "batch/compute", j.batch_text(), _confidence(2, j.fig, p), []
    # prefill
    b001 = j.codes("DIAG-B001")
    if b001 or j.prefill_queue():
        signals = bool(b001) + j.prefill_queue() + ((j.fig["decode_util"] or 0.0) < p["under_util"])
        evidence = f"requests queue on prefill ({number(j.pre_wait, 1)} waiting/engine, peak " \
            f"{number(_v(j.fig, 'prefill', 'waiting', 'peak'), 1)})"
        if (sat := j.prefill_saturated()) and not j.prefill_queue():
            evidence = sat
        return "prefill-bound", None, f"{evidence} while decode has room ({j.decode_text()})", \
            _confidence(signals, j.fig, p), b001
    if j.engine_prefilling():
        pt = _v(j.fig, "decode", "prompt_tps")
        return "prefill-bound", None, \
            f"requests wait on the engine ({number(j.dec_wait, 1)} waiting/engine) with its KV at {number(j.dec_kv, 1)} %: " \
            f"admission waits on prefill (prompt {number(pt, 0)} tok/s)", _confidence(2, j.fig, p), []
    if j.waiting_on_transfers():
        split = "" if j.dec_wait_kv is None else \
            f", {number(j.dec_wait_kv, 1)} of them for their KV transfer, {number(j.dec_wait_capacity, 1)} for capacity"
        return "transfer-bound", "kv-transfer latency", \
            f"decode requests wait for their KV ({number(j.dec_wait, 1)} waiting/engine{split}) with decode's cache at " \
            f"{number(j.dec_kv, 1)} % and no prefill queue", _confidence(2 + (j.dec_wait_kv is not None), j.fig, p), []
    if j.waiting_for_capacity():
        return "decode-bound", "batch/compute", \
            f"decode requests wait for capacity, not for their KV ({number(j.dec_wait_capacity, 1)} of " \
            f"{number(j.dec_wait, 1)} waiting/engine have theirs) with decode's cache at {number(j.dec_kv, 1)} %", \
            _confidence(2, j.fig, p), []
    if not j.has_stats():
        return "unknown", None, "no stats in the window and no finding that decides", "low", []
    util = j.fig["decode_util"]
    if util is not None and util < p["under_util"]:
        return "under-loaded", None, \
            f"no queue on either side and decode at {util * 100:,.0f} % of its capacity ({j.decode_text()}): " \
            "the client's concurrency limits the run", _confidence(2, j.fig, p), []
    return "healthy", None, f"both sides keep up with no queue standing; {j.decode_text()}", \
        _confidence(2, j.fig, p), []


def _ruled_out(chosen: str, j: _Judge) -> list[dict[str, str]]:
    """Why the other load classes do not hold (the failure classes are facts, not alternatives)."""
    p, out = j.p, []
    if not j.has_stats():
        return out
    pre = f"prefill waiting {number(j.pre_wait, 1)}/engine (a queue is >= {number(p['prefill_queue'], 0)})"
    reasons = {
        "prefill-bound": None if j.prefill_queue() or j.engine_prefilling() or j.codes("DIAG-B001") else pre,
        "decode-bound": None if j.decode_kv_full() or j.decode_batch_full() or j.waiting_for_capacity() or j.codes("DIAG-K001", "DIAG-K002", "DIAG-B002")
        else j.decode_text(),
        "transfer-bound": None if j.waiting_on_transfers() or j.codes("DIAG-E002")
        else f"no KV-transfer failure, decode waiting {number(j.dec_wait, 1)}/engine",
        "under-loaded": None if not (j.prefill_queue() or j.decode_kv_full() or j.prefill_saturated())
        and (j.fig["decode_util"] or 1) < p["under_util"]
        else j.prefill_saturated() or (f"decode at {(j.fig['decode_util'] or 0) * 100:,.0f} % of its capacity" if j.fig["decode_util"] is not None
              else "decode's capacity is unknown"),
    }
    for cls, why in reasons.items():
        if cls != chosen and why is not None:
            out.append({"class": cls, "why": f"not {cls}: {why}"})
    return out


def limiting_endpoints(run: Run, verdict: Verdict | None) -> frozenset[str]:
    """The endpoints on the side the verdict names as the limit: prefill's (on an aggregated run, where
    the generating engines prefill too, theirs), or the generating side's (decode, else aggregated). None
    for kv-transfer (a link between the sides, not an endpoint) or a class that names no side."""
    if verdict is None or verdict.side not in ("prefill", "decode"):
        return frozenset()
    roles = {ep.role for ep in run.endpoints.values()}
    generating = verdict.figures.get("decode_role") or next((r for r in DECODING if r in roles), None)
    role = "prefill" if verdict.side == "prefill" and "prefill" in roles else generating
    return frozenset(ep.id for ep in run.endpoints.values() if ep.role == role)


# ------------------------------------------------------------------ points and the run
def _cut_at(findings: Sequence[Finding], start: datetime | None, end: datetime | None) -> datetime | None:
    """Where a point without a result ends: the first engine death after it started, else ``end``."""
    deaths = [f.first_ts for f in findings if f.code in ("DIAG-E001", "DIAG-E004") and f.first_ts is not None
              and not _stalled(f) and start is not None and f.first_ts >= start and (end is None or f.first_ts <= end)]
    return min(deaths) if deaths else end


def _window_findings(findings: Sequence[Finding], start: datetime | None, end: datetime | None) -> list[Finding]:
    return [f for f in findings if _overlaps(f, start, end)]


def _config_causes(rests: Sequence[Finding], findings: Sequence[Finding]) -> list[dict[str, str]]:
    """The config findings the verdict's findings are linked to (symptom -> cause), as the first
    experiments: fixing what caused the symptom comes before any other change."""
    out: dict[str, dict[str, str]] = {}
    for f in rests:
        for c in f.caused_by:
            cfg = next((g for g in findings if g.code == c["code"]), None)
            if cfg is None or c["code"] in out:
                continue
            out[c["code"]] = {"id": f"fix-{c['code']}", "action": f"{c['code']} {cfg.name}: {cfg.fix or cfg.message}",
                              "expect": c.get("note") or f"the {f.code} {f.name} it causes goes away"}
    return list(out.values())


def _build(cls: str, limiter: str | None, why: str, conf: str, rests: list[Finding], j: _Judge, run: Run,
           concurrency: int | None, window: tuple[datetime, datetime] | None, phases: list[dict[str, Any]],
           extra_ev: list[dict[str, Any]], findings: Sequence[Finding], config: RunConfig,
           stage: str | None = None, bench: BenchResult | None = None) -> Verdict:
    scraped = {v for ep in run.endpoints.values() for v in ep.variants} == {"prom"}
    conf, reasons = weighed(cls, conf, j.fig, bench, j.p, scraped)
    cause = rests[0].message.split(" (", 1)[0] if rests else why
    causes = _config_causes(rests, findings)
    ev = [_finding_ev(f) for f in rests] + extra_ev
    if j.has_stats():
        ev.append({"kind": "figures", **{k: j.fig[k] for k in ("window_s", "decode_util")}})
    advised = experiments(cls, limiter, run, j.fig, j.cap, concurrency, cause, stage,
                          frozenset(c["id"].removeprefix("fix-") for c in causes), config)
    return Verdict(cls, why, conf, limiter, concurrency, window,
                   tuple({"phase": ph["phase"], "start": ph["start"].isoformat(), "end": ph["end"].isoformat()}
                         for ph in phases),
                   j.fig, tuple(ev), tuple(_ruled_out(cls, j)), tuple(causes + advised.experiments),
                   tuple(dict.fromkeys((f.code, f.endpoint) for f in rests)), j.queues() if j.has_stats() else (),
                   tuple(advised.in_place), reasons)


def point_verdict(run: Run, bench: BenchResult, findings: Sequence[Finding], clock: datetime | None,
                  finished: bool, next_start: datetime | None = None,
                  params: Mapping[str, float] | None = None, config: RunConfig | None = None) -> Verdict:
    """The verdict of one benchmark point over its steady window (its experiments checked against
    ``config``, what ran)."""
    p = params or verdict_catalog().params
    config = config if config is not None else RunConfig.of_run(run)
    cap = capacity(run)
    start = bench.started
    end = bench.ended or _cut_at(findings, start, next_start or clock)
    if start is None or end is None or end <= start:
        j = _Judge(dict(EMPTY_FIGURES), [], cap, p)
        cls, lim, why, conf, rests = _judge(j, bench, findings, finished)
        if cls == "unknown":
            why = "the point has no measured window (no start or end time)"
        return _build(cls, lim, why, conf, rests, j, run, bench.concurrency, None, [], [], findings, config, bench=bench)
    phases = point_phases(bench, end, p)
    steady = next(ph for ph in phases if ph["phase"] == "steady")
    fig = figures(run, steady["start"], steady["end"], cap)
    j = _Judge(fig, _window_findings(findings, start, end), cap, p)
    cls, lim, why, conf, rests = _judge(j, bench, findings, finished)
    extra = []
    if bench.failed_requests:
        extra.append({"kind": "benchmark", "failed_requests": bench.failed_requests,
                      "successful_requests": bench.successful_requests})
    return _build(cls, lim, why, conf, rests, j, run, bench.concurrency, (steady["start"], steady["end"]),
                  phases, extra, findings, config, bench=bench)


def points(run: Run) -> list[BenchResult]:
    """The run's benchmark points, one per concurrency (the measured run, not the warm-up), in order."""
    return sorted((b for b in run.benchmark if b.concurrency), key=lambda b: b.concurrency or 0)


def run_verdicts(run: Run, findings: Sequence[Finding], clock: datetime | None, finished: bool,
                 params: Mapping[str, float] | None = None, config: RunConfig | None = None) -> Verdicts:
    """Every point's verdict and the run's: the failure if the run has one, else the verdict at the
    highest-load valid point, else (no points) the run judged over its active intervals. ``config``:
    what ran, which every experiment is checked against (default: read from ``run``)."""
    p = params or verdict_catalog().params
    config = config if config is not None else RunConfig.of_run(run)
    pts = points(run)
    starts = [b.started for b in pts]
    per_point = tuple(point_verdict(run, b, findings, clock, finished, next((s for s in starts[i + 1:] if s), None), p,
                                    config) for i, b in enumerate(pts))
    failed = [v for v in per_point if v.cls == "invalid"]
    if failed:
        return Verdicts(failed[0], per_point)
    if per_point:
        judged = [v for v in per_point if v.cls != "unknown"] or list(per_point)
        return Verdicts(judged[-1], per_point)
    cap = capacity(run)
    win = active_window(run)
    fig = figures(run, *win, cap) if win else dict(EMPTY_FIGURES)
    j = _Judge(fig, list(findings), cap, p)
    cls, lim, why, conf, rests = _judge(j, None, findings, finished)
    stage = None
    if cls == "startup-stuck" and rests:
        stage = str(rests[0].evidence.get("stage") or "") or None
    return Verdicts(_build(cls, lim, why, conf, rests, j, run, None, win, [], [], findings, config, stage), per_point)


def with_verdict_advice(findings: Sequence[Finding], verdicts: Verdicts | None) -> list[Finding]:
    """A finding a verdict rests on takes that verdict's advice as its fix (the run's verdict first, then
    the points from the highest load down), so the verdict's ``next`` and the fix are one."""
    if verdicts is None:
        return list(findings)
    fixes: dict[tuple[str, str | None], str] = {}
    for v in (verdicts.run, *reversed(verdicts.points)):
        fix = v.fix
        for key in v.findings:
            if fix:
                fixes.setdefault(key, fix)
    return [dataclasses.replace(f, fix=fixes[(f.code, f.endpoint)]) if (f.code, f.endpoint) in fixes else f
            for f in findings]


__all__ = ["Verdict", "Verdicts", "limiting_endpoints", "point_verdict", "points", "run_verdicts",
           "with_verdict_advice"]
