"""Benchmark results: ``benchmark.out`` (console), sa-bench result JSONs, ``benchmark-rollup.json``.

* :func:`parse_benchmark_out` — one :class:`BenchResult` per concurrency from the
  ``============ Serving Benchmark Result ============`` blocks. bench.sh runs a warmup and then the
  real run for every concurrency and both print ``Maximum request concurrency: C``; the last section
  per concurrency is the real run (srt-dynamo.md §3.4). A section that never printed its block (run
  cut by a timeout) gives ``complete=False``.
* :func:`parse_accuracy` — accuracy/score lines of eval runs (gsm8k, gpqa, mmlu, lm-eval tables).
* :func:`read_sa_bench_json` — summary scalars of a possibly huge sa-bench JSON from its head and
  tail only (the per-request arrays sit in the middle).
* :func:`read_rollup` — srtctl's ``benchmark-rollup.json`` (§6.1).

Each measured run's time window (``started``/``ended``, what ``diag report`` judges a sweep point
over) comes from the ``date`` lines bench.sh prints after ``Running benchmark with concurrency: C``
and after the result block (they carry their zone; only UTC/GMT are taken), else from a result
JSON's ``date`` (local wall clock without a zone, taken as UTC: the containers run in UTC) minus
its duration.

Bad or truncated files raise :class:`BenchmarkFormatError` (a ``ValueError``) with a one-line message.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from . import inputs
from .formats import LineFormat
from .jsonfile import read_json
from .records import AccuracyResult, BenchResult

__all__ = [
    "BENCH_OUT_FORMATS", "BenchmarkFormatError", "Rollup", "bench_date", "parse_accuracy", "parse_benchmark_out",
    "parse_result_filename", "read_rollup", "read_sa_bench_json",
]

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 64 * 1024


class BenchmarkFormatError(ValueError):
    """A benchmark result file that is not what it claims to be (bad JSON, truncated, no summary)."""


def _fmt(name: str, pattern: str, samples: list[str], emits: str, triggers: tuple[str, ...]) -> LineFormat:
    """A line format of the benchmark console file. These are block/file formats read by
    :func:`parse_benchmark_out` and :func:`parse_accuracy`, not log records, so they stay out of
    the log-line REGISTRY (its test runs every sample through the log pipeline)."""
    return LineFormat(name, "file", re.compile(pattern), tuple(samples), emits, triggers)


MAX_CONC = _fmt("bench-max-concurrency", r"^\s*Max(?:imum)? request concurrency:\s*(?P<c>\d+|None)\s*$",
                ["Maximum request concurrency: 512", "Maximum request concurrency: None"],
                "bench_result", ("request concurrency:",))
RUNNING = _fmt("bench-running-concurrency", r"^\s*Running benchmark with concurrency:\s*(?P<c>\d+)",
               ["Running benchmark with concurrency: 64", "Running benchmark with concurrency: 4096"],
               "bench_result", ("Running benchmark with concurrency",))
BLOCK_HEAD = _fmt("bench-result-head", r"^\s*=+ Serving Benchmark Result =+\s*$",
                  ["============ Serving Benchmark Result ============",
                   "============ Serving Benchmark Result ============  "],
                  "bench_result", ("Serving Benchmark Result",))
BLOCK_FIELD = _fmt("bench-result-field", r"^\s*(?P<label>[A-Za-z][^:]*?):\s+(?P<value>[-+\w.,%]+)\s*$",
                   ["Successful requests:                     5120      ",
                    "Output token throughput (tok/s):         61034.27  ",
                    "P99 TTFT (ms):                           8123.55   "],
                   "bench_result", (":",))
ACC_LINE = _fmt("acc-value", r"^\s*(?P<label>Accuracy|Score|Invalid(?: responses)?|Mean score)\s*[:=]\s*"
                r"(?P<v>[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?)\s*(?P<pct>%)?",
                ["Accuracy: 0.880", "Score: 0.951", "Invalid responses: 0.003"],
                "accuracy", ("Accuracy", "Score", "Invalid", "Mean score"))
ACC_REPEAT = _fmt("acc-repeat-mean", r"^\s*Repeat:\s*(?P<n>\d+),\s*mean:\s*(?P<v>[-+]?\d*\.?\d+)",
                  ["Repeat: 5, mean: 0.880", "Repeat: 3, mean: 0.031"], "accuracy", ("Repeat:",))
ACC_SCORES = _fmt("acc-scores-list", r"^\s*Scores:\s*\[(?P<list>[^\]]*)\]",
                  ["Scores: ['0.881', '0.879', '0.883', '0.877', '0.880']", "Scores: [0.95, 0.94]"],
                  "accuracy", ("Scores:",))
ACC_LMEVAL = _fmt("acc-lm-eval-row",
                  r"^\s*\|(?P<task>[^|]*)\|\s*(?P<ver>[^|]*)\|(?P<filter>[^|]*)\|\s*(?P<shot>[^|]*)\|"
                  r"(?P<metric>[^|]*)\|[^|]*\|\s*(?P<v>[-+]?\d*\.?\d+)\s*\|\s*±?\s*\|\s*(?P<se>[-+]?\d*\.?\d+|N/A)?\s*\|",
                  ["|gsm8k|      3|flexible-extract|     5|exact_match|↑  |0.9500|±  |0.0060|",
                   "|     |       |strict-match    |     5|exact_match|↑  |0.9477|±  |0.0061|"],
                  "accuracy", ("|",))
BENCH_DATE = _fmt("bench-date", r"^\s*(?P<dow>[A-Z][a-z]{2}) (?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) "
                  r"(?P<hms>\d\d:\d\d:\d\d) (?P<tz>UTC|GMT) (?P<y>\d{4})\s*$",
                  ["Wed Aug 12 14:12:14 UTC 2026", "Thu Jan  1 00:03:09 UTC 2027"], "bench_result",
                  ("UTC", "GMT"))
BENCH_OUT_FORMATS: tuple[LineFormat, ...] = (MAX_CONC, RUNNING, BLOCK_HEAD, BLOCK_FIELD, BENCH_DATE, ACC_LINE,
                                             ACC_REPEAT, ACC_SCORES, ACC_LMEVAL)

_BLOCK_END = re.compile(r"^\s*={10,}\s*$")
_STAT = re.compile(r"^(?P<stat>mean|median|p\d+(?:\.\d+)?|std|max|min) "
                   r"(?P<m>ttft|tpot|itl|e2el|e2e latency) \(ms\)$")
_LABELS = {
    "successful requests": "successful_requests", "failed requests": "failed_requests",
    "benchmark duration (s)": "duration_s", "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens", "request throughput (req/s)": "request_throughput",
    "request goodput (req/s)": "request_goodput", "output token throughput (tok/s)": "output_throughput",
    "peak output token throughput (tok/s)": "peak_output_throughput",
    "total token throughput (tok/s)": "total_token_throughput", "max request concurrency": "concurrency",
    "maximum request concurrency": "concurrency",
}
_FIELDS = {f.name for f in fields(BenchResult)}
_INT_FIELDS = {"concurrency", "successful_requests", "failed_requests", "num_prompts", "total_input_tokens",
               "total_output_tokens", "total_gpus", "prefill_gpus", "decode_gpus", "isl", "osl"}


def _number(text: str) -> int | float | None:
    t = text.replace(",", "").strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return None


def _key_for(label: str) -> str:
    norm = re.sub(r"\s+", " ", label.strip().lower())
    if norm in _LABELS:
        return _LABELS[norm]
    m = _STAT.match(norm)
    if m:
        metric = "e2el" if m["m"] == "e2e latency" else m["m"]
        return f"{m['stat'].replace('.', '_')}_{metric}_ms"
    return re.sub(r"[^a-z0-9]+", "_", norm).strip("_")


def _result(source: str, values: dict[str, Any], **known: Any) -> BenchResult:
    """A BenchResult from a flat key → value map: known keys become fields, other numbers ``extra``."""
    kw: dict[str, Any] = dict(known)
    extra: list[tuple[str, float]] = []
    for key, val in values.items():
        if key in _FIELDS and key not in ("source", "extra", "line", "complete"):
            if key in _INT_FIELDS and isinstance(val, float) and val.is_integer():
                val = int(val)
            kw.setdefault(key, val)
        elif isinstance(val, (int, float)) and not isinstance(val, bool):
            extra.append((key, float(val)))
    return BenchResult(source, extra=tuple(extra), **kw)


def _bench_date(m: re.Match[str]) -> datetime | None:
    try:
        return datetime.strptime(f"{m['mon']} {m['d']} {m['hms']} {m['y']}", "%b %d %H:%M:%S %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def bench_date(line: str) -> datetime | None:
    """The time of one of bench.sh's ``date`` lines (None for any other line)."""
    m = BENCH_DATE.regex.match(line.rstrip("\r"))
    return _bench_date(m) if m else None


def parse_benchmark_out(text: str) -> list[BenchResult]:
    """One result per concurrency from a ``benchmark.out`` text, in first-seen order; the last
    section for a concurrency wins (warmup first, real run last)."""
    runs: list[dict[str, Any]] = []
    cur: dict[str, Any] | None = None
    announced: int | None = None
    started: datetime | None = None     # the `date` right after "Running benchmark with concurrency"
    in_block = False
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r")
        m = MAX_CONC.regex.match(line)
        # vLLM's result block repeats "Maximum request concurrency: C" as a field; another C inside a
        # block means the block was cut and a new section began
        if m and not (in_block and cur is not None and m["c"] in ("None", str(cur["conc"] or m["c"]))):
            conc = int(m["c"]) if m["c"] != "None" else announced
            cur = {"conc": conc, "line": i, "vals": {}, "block": False, "started": started}
            started = None
            runs.append(cur)
            continue
        m = RUNNING.regex.match(line)
        if m:
            announced = int(m["c"])
            in_block = False
            started = None
            continue
        m = BENCH_DATE.regex.match(line)
        if m and not in_block:
            when = _bench_date(m)
            if cur is not None and cur["block"] and "ended" not in cur:
                cur["ended"] = when
            elif announced is not None and started is None:
                started = when
            continue
        if BLOCK_HEAD.regex.match(line):
            if cur is None or cur["block"]:
                cur = {"conc": announced, "line": i, "vals": {}, "block": False, "started": started}
                started = None
                runs.append(cur)
            cur["block"] = in_block = True
            continue
        if not in_block or cur is None:
            continue
        if _BLOCK_END.match(line):
            in_block = False
            continue
        m = BLOCK_FIELD.regex.match(line)
        if m:
            val = _number(m["value"].rstrip("%"))
            if val is not None:
                cur["vals"][_key_for(m["label"])] = val
    best: dict[int | None, BenchResult] = {}
    for run in runs:
        vals = run["vals"]
        conc = run["conc"] if run["conc"] is not None else vals.get("concurrency")
        vals.pop("concurrency", None)
        complete = run["block"] and "successful_requests" in vals
        best[conc] = _result("benchmark.out", vals, concurrency=conc, line=run["line"], complete=complete,
                             started=run["started"], ended=run.get("ended"))
    return list(best.values())


_TASKS = re.compile(r"\b(gsm8k|gpqa(?:_diamond)?|mmlu(?:_pro)?|longbench\w*|aime\d*|math500|humaneval)", re.I)


def _frac(value: float, pct: bool) -> float:
    return value / 100.0 if pct or 1.0 < value <= 100.0 else value


def parse_accuracy(text: str, task: str | None = None) -> list[AccuracyResult]:
    """Accuracy figures of an eval's console text (gsm8k_eval ``Accuracy:``, SGLang run_eval ``Score:``
    / ``Repeat: N, mean:`` / ``Scores: [...]``, lm-eval result tables). Values are fractions 0..1;
    ``task`` defaults to the first eval name mentioned in the text."""
    if task is None:
        m = _TASKS.search(text)
        task = m.group(1).lower() if m else None
    out: list[AccuracyResult] = []
    table_task: str | None = None
    for i, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r")
        if "|" in line:
            m = ACC_LMEVAL.regex.match(line)
            if m and re.fullmatch(r"\s*-?\d*\.?\d+\s*", m["v"] or ""):
                name = m["task"].strip().lstrip("- ").strip()
                table_task = name or table_task
                shot = m["shot"].strip()
                se = m["se"]
                out.append(AccuracyResult(table_task, m["metric"].strip(), float(m["v"]),
                                          stderr=float(se) if se and se != "N/A" else None,
                                          filter=m["filter"].strip() or None,
                                          n_shot=int(shot) if shot.isdigit() else None, line=i))
            continue
        m = ACC_REPEAT.regex.match(line)
        if m:
            out.append(AccuracyResult(task, "mean_score", _frac(float(m["v"]), False), line=i))
            continue
        m = ACC_SCORES.regex.match(line)
        if m:
            vals = [_number(v.strip().strip("'\"")) for v in m["list"].split(",") if v.strip()]
            for k, v in enumerate(vals):
                if v is not None:
                    out.append(AccuracyResult(task, "score", _frac(float(v), False), run=k, line=i))
            continue
        m = ACC_LINE.regex.match(line)
        if m:
            label = m["label"].lower()
            metric = ("invalid_rate" if label.startswith("invalid") else "mean_score" if label == "mean score"
                      else label)
            out.append(AccuracyResult(task, metric, _frac(float(m["v"]), bool(m["pct"])), line=i))
    return _number_runs(out)


def _number_runs(results: list[AccuracyResult]) -> list[AccuracyResult]:
    """Give repeated single-run lines (``Accuracy:`` printed once per repeat) their run index."""
    counts: dict[tuple[str | None, str], int] = {}
    out: list[AccuracyResult] = []
    for r in results:
        if r.run is None and r.metric in ("accuracy", "score", "invalid_rate") and r.filter is None:
            k = (r.task, r.metric)
            idx = counts.get(k, 0)
            counts[k] = idx + 1
            r = AccuracyResult(r.task, r.metric, r.value, stderr=r.stderr, filter=r.filter, n_shot=r.n_shot,
                               run=idx, line=r.line)
        out.append(r)
    return out


_RESULT_NAME = re.compile(
    r"results_concurrency_(?P<c>\d+)_gpus_(?P<t>\d+)(?:_ctx_(?P<p>\d+)_gen_(?P<d>\d+))?\.json$"
    r"|(?:isl_(?P<i>\d+)_osl_(?P<o>\d+)_)?concurrency_(?P<c2>\d+)(?:_req_rate_[\w.]+)?\.json$"
)
_SA_DIR = re.compile(r"sa-bench_isl_(?P<i>\d+)_osl_(?P<o>\d+)")


def parse_result_filename(path: str | Path) -> dict[str, int]:
    """Concurrency, total/prefill/decode GPUs and ISL/OSL encoded in an sa-bench result path
    (``sa-bench_isl_<I>_osl_<O>/results_concurrency_<C>_gpus_<T>[_ctx_<P>_gen_<D>].json``; older
    ``concurrency_<C>.json`` and ``isl_<I>_osl_<O>_concurrency_<C>_req_rate_inf.json``)."""
    p = Path(path)
    out: dict[str, int] = {}
    m = _RESULT_NAME.search(p.name)
    if m:
        for key, group in (("concurrency", "c"), ("total_gpus", "t"), ("prefill_gpus", "p"),
                           ("decode_gpus", "d"), ("isl", "i"), ("osl", "o"), ("concurrency", "c2")):
            if m[group] is not None:
                out[key] = int(m[group])
    d = _SA_DIR.search(p.parent.name)
    if d:
        out.setdefault("isl", int(d["i"]))
        out.setdefault("osl", int(d["o"]))
    return out


_JSON_SCALAR = re.compile(
    r'[{,]\s*"(?P<k>[A-Za-z_]\w*)"\s*:\s*'
    r'(?P<v>-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|NaN|-?Infinity|null|true|false|"(?:[^"\\\n]|\\.)*")'
    r"\s*(?=[,}\n])"
)
_JSON_PCTL = re.compile(r'[{,]\s*"percentiles_(?P<m>ttft|tpot|itl|e2el)_ms"\s*:\s*'
                        r"\[(?P<body>(?:\s*\[[^\[\]]*\]\s*,?)*)\s*\]")
_ALIASES = {
    "max_concurrency": "concurrency", "completed": "successful_requests", "duration": "duration_s",
    "total_input": "total_input_tokens", "total_output": "total_output_tokens",
    "peak_output_tokens_per_s": "peak_output_throughput", "max_output_tokens_per_s": "peak_output_throughput",
    "model_id": "model", "failed": "failed_requests",
}


def _scalar(token: str) -> Any:
    if token.startswith('"'):
        try:
            return json.loads(token)
        except ValueError:
            return token.strip('"')
    if token == "null":
        return None
    if token in ("true", "false"):
        return token == "true"
    if token == "NaN":
        return math.nan
    if token.endswith("Infinity"):
        return -math.inf if token.startswith("-") else math.inf
    return _number(token)


def _summary_from_mapping(data: dict[str, Any]) -> dict[str, Any]:
    vals: dict[str, Any] = {}
    for key, val in data.items():
        if isinstance(val, (list, dict)):
            if key.startswith("percentiles_") and isinstance(val, list):
                vals.update(_legacy_percentiles(key, val))
            continue
        name = _ALIASES.get(key, key)
        if name in vals and vals[name] is not None:
            continue
        vals[name] = val
    return vals


def _legacy_percentiles(key: str, pairs: list[Any]) -> dict[str, float]:
    m = re.fullmatch(r"percentiles_(ttft|tpot|itl|e2el)_ms", key)
    out: dict[str, float] = {}
    if not m:
        return out
    for pair in pairs:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            p, v = pair
            p_word = str(int(p)) if float(p).is_integer() else str(p).replace(".", "_")
            out[f"p{p_word}_{m.group(1)}_ms"] = v
    return out


def _finish(source: str, vals: dict[str, Any], path: Path) -> BenchResult:
    from_name = parse_result_filename(path)
    summary = ("successful_requests", "duration_s", "request_throughput", "output_throughput", "mean_ttft_ms")
    if not any(k in vals for k in summary):
        raise BenchmarkFormatError(f"{path.name}: no benchmark summary keys found")
    for key, val in from_name.items():
        if vals.get(key) is None:
            vals[key] = val
    if vals.get("failed_requests") is None and isinstance(vals.get("num_prompts"), int) \
            and isinstance(vals.get("successful_requests"), int):
        vals["failed_requests"] = vals["num_prompts"] - vals["successful_requests"]
    model = vals.pop("model", None)
    ended = _json_date(vals.pop("date", None))
    duration = vals.get("duration_s")
    started = ended - timedelta(seconds=duration) if ended and isinstance(duration, (int, float)) else None
    return _result(source, {k: v for k, v in vals.items() if not isinstance(v, str)},
                   model=model if isinstance(model, str) else None, started=started, ended=ended)


def _json_date(text: Any) -> datetime | None:
    """sa-bench's ``date`` (``%Y%m%d-%H%M%S``, wall clock without a zone: taken as UTC)."""
    try:
        return datetime.strptime(text, "%Y%m%d-%H%M%S").replace(tzinfo=UTC) if isinstance(text, str) else None
    except ValueError:
        return None


def read_sa_bench_json(path: str | Path, head_bytes: int = HEAD_BYTES,
                       tail_bytes: int = TAIL_BYTES) -> BenchResult:
    """Summary of an sa-bench / ``vllm bench serve`` result JSON, reading only its head and tail."""
    p = Path(path)
    try:
        size = inputs.stat(p).st_size
        with inputs.open_input(p) as fh:
            if size <= head_bytes + tail_bytes:
                chunks = [fh.read()]
            else:
                head = fh.read(head_bytes)
                fh.seek(size - tail_bytes)
                chunks = [head, fh.read()]
    except OSError as e:
        raise BenchmarkFormatError(f"{p.name}: cannot read ({e.strerror or e})") from None
    texts = [c.decode("utf-8", errors="replace") for c in chunks]
    if len(texts) == 1:
        try:
            data = json.loads(texts[0])
        except ValueError as e:
            msg = getattr(e, "msg", str(e)).splitlines()[0]
            raise BenchmarkFormatError(f"{p.name}: invalid JSON ({msg})") from None
        if not isinstance(data, dict):
            raise BenchmarkFormatError(f"{p.name}: not a JSON object")
        return _finish("sa-bench-json", _summary_from_mapping(data), p)
    head, tail = texts
    if not head.lstrip().startswith("{"):
        raise BenchmarkFormatError(f"{p.name}: not a JSON object")
    if not tail.rstrip().endswith("}"):
        raise BenchmarkFormatError(f"{p.name}: truncated JSON (no closing brace; {size} bytes)")
    vals: dict[str, Any] = {}
    for chunk in (head, tail):
        for m in _JSON_SCALAR.finditer(chunk):
            name = _ALIASES.get(m["k"], m["k"])
            if vals.get(name) is None:
                vals[name] = _scalar(m["v"])
        for m in _JSON_PCTL.finditer(chunk):
            try:
                pairs = json.loads("[" + m["body"] + "]")
            except ValueError:
                continue
            for k, v in _legacy_percentiles(f"percentiles_{m['m']}_ms", pairs).items():
                vals.setdefault(k, v)
    return _finish("sa-bench-json", vals, p)


@dataclass(frozen=True, slots=True)
class Rollup:
    """srtctl's ``benchmark-rollup.json``: one BenchResult per run (source ``rollup``)."""

    benchmark_type: str | None
    timestamp: str | None
    model: str | None
    isl: int | None
    osl: int | None
    runs: tuple[BenchResult, ...]


_ROLLUP_KEYS = {
    "throughput_toks": "output_throughput", "completed_requests": "successful_requests",
    "total_token_throughput": "total_token_throughput", "request_throughput": "request_throughput",
}
_ROLLUP_STAT = re.compile(r"^(?P<m>ttft|tpot|itl|e2el)_(?P<s>mean|median|p\d+|std)_ms$")


def read_rollup(path: str | Path) -> Rollup:
    """Parse ``benchmark-rollup.json``; raises :class:`BenchmarkFormatError` when it is not one."""
    p, data = read_json(path, BenchmarkFormatError)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise BenchmarkFormatError(f"{p.name}: not a benchmark roll-up (no 'runs' list)")
    cfg = data.get("config") if isinstance(data.get("config"), dict) else {}
    isl = cfg.get("isl") if isinstance(cfg.get("isl"), int) else None
    osl = cfg.get("osl") if isinstance(cfg.get("osl"), int) else None
    model = cfg.get("model") if isinstance(cfg.get("model"), str) else None
    runs = []
    for run in data["runs"]:
        if not isinstance(run, dict):
            continue
        vals: dict[str, Any] = {}
        for key, val in run.items():
            m = _ROLLUP_STAT.match(key)
            name = f"{m['s']}_{m['m']}_ms" if m else _ROLLUP_KEYS.get(key, key)
            vals[name] = val
        vals = {k: v for k, v in vals.items() if v is not None and not isinstance(v, (str, list, dict))}
        runs.append(_result("rollup", vals, isl=isl, osl=osl, model=model))
    return Rollup(data.get("benchmark_type"), data.get("timestamp"), model, isl, osl, tuple(runs))
