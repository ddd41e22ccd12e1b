"""Run a rule's example (a compact run description in the catalog) through the one pipeline: the
description becomes parsed logs and side facts, :func:`rules.assemble.assemble` makes the Run and
:func:`rules.judge.judge` the findings (:func:`example_findings`), as for a real run.

Per role: ``endpoints`` (default 1), ``engines`` per endpoint, series ``waiting``, ``running``,
``prompt_tps``, ``gen_tps``, ``kv_usage``, ``preemptions`` (a number is held constant, a list is
one value per 10 s interval), ``samples`` (number of intervals; 0 = no stats lines), ``skew``
(one engine's override), ``facts`` (startup facts), ``faults``, ``nixl``, ``expiry`` (lists of
cause/type names), ``kv`` (one ``[succeeded, failed]`` KV-metrics pair per interval), ``busy`` with
``batch_tokens`` (an engine that logs every scheduler step and no queue, as TensorRT-LLM's iteration log: ten
steps an interval, taking ``busy`` of it, each prefilling ``batch_tokens``), ``startup`` ([stage,
seconds after the process start] reached; the last stays under way unless it is ``ready``). Top level:
``concurrency``, ``accuracy`` (scores), ``sources`` (line counts), ``benchmark`` (result rows),
``ready_s`` (when the orchestrator saw the server healthy), ``launch`` (role -> the command line the
orchestrator launched its workers with), ``recipe_base`` (a base recipe of the config catalog).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from diag.parsers.counts import Counts
from diag.parsers.ingest import ParsedLog
from diag.parsers.layout import FileInfo
from diag.parsers.recipe import Recipe, build_recipe
from diag.parsers.recipe_yaml import load_yaml
from diag.parsers.records import (
    AccuracyResult,
    BenchResult,
    Fault,
    KVExpiry,
    KVTransfer,
    Lifecycle,
    NixlFailure,
    Record,
    StageMark,
    StartupFact,
    StatsSample,
)

from .assemble import Side, assemble
from .catalog import Rule, bases
from .finding import Finding
from .judge import judge
from .runmodel import Run
from .settings import Settings

T0 = datetime(2026, 8, 6, 12, 0, 0, tzinfo=UTC)
STARTED = T0 - timedelta(seconds=1200)   # process start of an example with ``startup`` stages
SERIES = ("waiting", "running", "prompt_tps", "gen_tps", "kv_usage", "preemptions", "busy", "batch_tokens")
DEFAULTS = {"waiting": 0, "running": 0, "prompt_tps": 0.0, "gen_tps": 0.0, "kv_usage": 0.0, "preemptions": 0,
            "busy": 0.0, "batch_tokens": 0}
STEPS = 10   # scheduler steps an interval of an example engine that logs its steps


def _steps(line: int, e: int, ts: datetime, vals: dict[str, Any]) -> list[StatsSample]:
    """One interval (ending at ``ts``) of an engine that logs every step: ``STEPS`` steps over it."""
    return [StatsSample(line + k, variant="trtllm-iter", engine=e, ts=ts - timedelta(seconds=10 - k - 0.5),
                        running=int(vals["running"]), kv_usage=float(vals["kv_usage"]),
                        new_tokens=int(vals["batch_tokens"]), ctx_requests=1, gen_tokens=0, steps=1,
                        step_ms=1000.0 * float(vals["busy"]) * 10 / STEPS) for k in range(STEPS)]


ORCHESTRATOR = "sweep_1.log"


def _info(path: str, kind: str, role: str | None = None, index: int | None = None,
          node: str | None = None) -> FileInfo:
    return FileInfo(Path(path), kind, role, index, node)


def series_length(spec: dict[str, Any]) -> int:
    """Intervals of one role of an example: ``samples``, else its longest series, else 12."""
    if "samples" in spec:
        return int(spec["samples"])
    lens = [len(v) for k, v in spec.items() if k in SERIES and isinstance(v, list)]
    return max(lens) if lens else 12


def value_at(v: Any, i: int) -> Any:
    """Value ``i`` of an example series: a number is held constant, a list is one value per interval."""
    if isinstance(v, list):
        return v[min(i, len(v) - 1)]
    return v


def _role_logs(role: str, spec: dict[str, Any]) -> list[ParsedLog]:
    logs = []
    n = series_length(spec)
    for idx in range(int(spec.get("endpoints", 1))):
        recs: list[Record] = []
        line = 0
        for key, value in (spec.get("facts") or {}).items():
            line += 1
            if key == "max_concurrency":
                value = {"tokens_per_request": 9216, "concurrency": float(value)}
            recs.append(StartupFact(line, key=key, value=value, ts=T0))
        for e in range(int(spec.get("engines", 1))):
            recs.append(StartupFact(line + 1, key="dp_rank", value=e, ts=T0))
        for i in range(n):
            ts = T0 + timedelta(seconds=10 * (i + 1))
            for e in range(int(spec.get("engines", 1))):
                vals = {k: value_at(spec.get(k, DEFAULTS[k]), i) for k in SERIES}
                skew = spec.get("skew")
                if skew and int(skew["engine"]) == e:
                    vals.update({k: value_at(v, i) for k, v in skew.items() if k in SERIES})
                if "busy" in spec:
                    recs += _steps(line + 1, e, ts, vals)
                    line += STEPS
                    continue
                line += 1
                recs.append(StatsSample(line, variant="v1", engine=e, ts=ts,
                                        prompt_tps=float(vals["prompt_tps"]), gen_tps=float(vals["gen_tps"]),
                                        running=int(vals["running"]), waiting=int(vals["waiting"]),
                                        preemptions=int(vals["preemptions"]) or None,
                                        kv_usage=float(vals["kv_usage"])))
        for j, (stage, at) in enumerate(spec.get("startup", [])):
            line += 1
            last = j == len(spec["startup"]) - 1
            mark = "done" if stage == "ready" or not last else "progress"
            recs.insert(0, StageMark(line, stage=stage, mark=mark, ts=STARTED + timedelta(seconds=at)))
        t_fault = T0 + timedelta(seconds=10 * n + 5)
        for j, cause in enumerate(spec.get("faults", [])):
            line += 1
            recs.append(Fault(line, cause=cause, message=f"example {cause}", ts=t_fault + timedelta(seconds=j)))
        for j, ftype in enumerate(spec.get("nixl", [])):
            line += 1
            recs.append(NixlFailure(line, ftype=ftype, request_id=f"req-{j}", ts=t_fault + timedelta(seconds=j)))
        for i, (ok, bad) in enumerate(spec.get("kv", [])):
            line += 1
            recs.append(KVTransfer(line, ts=T0 + timedelta(seconds=10 * (i + 1)), connector="nixl",
                                   values=(("Num successful transfers", float(ok)), ("Num failed transfers", float(bad)))))
        for j, event in enumerate(spec.get("expiry", [])):
            line += 1
            recs.append(KVExpiry(line, event=event, request_id=f"req-{j}", ts=t_fault + timedelta(seconds=j)))
        path = f"node{idx}_{role}_w{idx}.out"
        logs.append(ParsedLog(path, _info(path, "worker", role, idx, f"node{idx}"), records=recs))
    return logs


def _orchestrator(spec: dict[str, Any]) -> list[ParsedLog]:
    """The orchestrator's log of an example: "Server is healthy" at T0 + ``ready_s``, and per role of
    ``launch`` a ``Starting`` + ``Command:`` pair per endpoint (the launch lines the run model reads)."""
    recs: list[Record] = []
    if "ready_s" in spec:
        recs.append(Lifecycle(1, event="healthy", ts=T0 + timedelta(seconds=float(spec["ready_s"]))))
    for n, (role, argv) in enumerate(sorted(spec.get("launch", {}).items())):
        for idx in range(int((spec.get(role) or {}).get("endpoints", 1))):
            recs.append(Lifecycle(10 + 3 * n, event="worker_start", fields=(("mode", role), ("index", idx))))
            recs.append(Lifecycle(12 + 3 * n, event="command", fields=(("argv", argv),)))
    return [ParsedLog(ORCHESTRATOR, _info(ORCHESTRATOR, "orchestrator"), records=recs)] if recs else []


def build_example_run(spec: dict[str, Any]) -> Run:
    """The Run of an example, assembled like a real run's."""
    logs: list[ParsedLog] = []
    for role in ("prefill", "decode", "agg"):
        if role in spec:
            logs.extend(_role_logs(role, spec[role]))
    if "sources" in spec:
        s = spec["sources"]
        counts = Counts(lines=s["lines"], ansi_lines=s.get("ansi", 0))
        counts.noise["request"] = s.get("noise", 0)
        logs.append(ParsedLog("node0_decode_w0.out", _info("node0_decode_w0.out", "worker", "decode", 0, "node0"),
                              counts=counts))
    side = Side(jobs=_recipe_jobs(spec["recipe_base"]) if "recipe_base" in spec else (),
                concurrencies=(int(spec["concurrency"]),) if "concurrency" in spec else (),
                accuracy=tuple(AccuracyResult("gsm8k", "accuracy", float(score), run=i)
                               for i, score in enumerate(spec.get("accuracy", []))),
                benchmark=tuple(_bench(b) for b in spec.get("benchmark", [])))
    return assemble([*_orchestrator(spec), *logs], side)


def example_findings(rule: Rule, spec: dict[str, Any]) -> list[Finding]:
    """The findings of ``rule`` (as given: thresholds may differ from the catalog's) on an example run,
    judged by the pipeline's findings step with only this rule selected."""
    run = build_example_run(spec)
    runtime = [rule] if rule.scope != "recipe" else []
    return [f for f in judge(run, Settings(select=[rule.code]), runtime=runtime) if f.code == rule.code]


def _bench(b: dict[str, Any]) -> BenchResult:
    """A benchmark result: BenchResult fields, ``start_s``/``end_s`` as offsets from T0."""
    when = {k: T0 + timedelta(seconds=float(b[s])) for k, s in (("started", "start_s"), ("ended", "end_s")) if s in b}
    return BenchResult("benchmark.out", **{k: v for k, v in b.items() if k not in ("start_s", "end_s")}, **when)


def _recipe_jobs(base: str) -> tuple[Recipe, ...]:
    """A run's recipe from one of the config catalogs' base recipes (``[bases]``, :func:`.catalog.bases`)."""
    return (build_recipe(load_yaml(bases()[base]), "config.yaml"),)
