"""The TensorRT-LLM adapter: its heads, its iteration log as stats rows folded to the interval, and the local
clock its lines are written in, placed on UTC only where the log's line order settles it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from diag.engines.trtllm.clock import offset_of
from diag.files import parse_log
from diag.parsers import engines
from diag.parsers.layout import FileInfo
from diag.parsers.records import StatsSample
from diag.rules.windows import fold_steps

from helpers import blocks_of, record_path

T0 = datetime(2026, 8, 19, 6, 11, 40)   # UTC


def _iter_line(local: datetime, it: int, sched: int, ctx: int, gen: int, dev: str = "4.10ms") -> str:
    """An iteration line as py_executor.py's print_iter_log writes it (the kv_cache_util form)."""
    return (f"[{local:%m/%d/%Y-%H:%M:%S}] [TRT-LLM] [I] [_torch][RANK 0] iter = {it}, global_rank = 0, rank = 0, "
            f"num_scheduled_requests = {sched}, kv_cache_util = 0.250, currank_total_requests = {it}/64, "
            f"host_step_time = 9.5ms, prev_device_step_time = {dev}, timestamp = {local:%Y-%m-%d %H:%M:%S}, "
            f"states = {{'num_ctx_requests': {1 if ctx else 0}, 'num_ctx_tokens': {ctx}, "
            f"'num_generation_tokens': {gen}, 'cached_kv_tokens': 0}}")


def _dynamo(utc: datetime, msg: str = "dynamo_llm::discovery: registered") -> str:
    return f"{utc:%Y-%m-%dT%H:%M:%S}.000000Z  INFO {msg}"


def _worker_log(tmp_path: Path, hours: int, *, utc_after: bool = True) -> Path:
    """Dynamo's UTC lines around TensorRT-LLM's local ones, the node ``hours`` ahead of UTC."""
    local = T0 + timedelta(hours=hours)
    lines = [_dynamo(T0, "dynamo_runtime::distributed: Initialized distributed runtime"),
             _iter_line(local + timedelta(seconds=1), 1, 1, 8192, 0, dev="N/A"),
             _iter_line(local + timedelta(seconds=2), 2, 2, 0, 2),
             _iter_line(local + timedelta(seconds=12), 3, 2, 0, 2)]
    if utc_after:
        lines.append(_dynamo(T0 + timedelta(seconds=20)))
    path = tmp_path / "node1_decode_w0.out"
    path.write_text("\n".join(lines) + "\n")
    return path


def _parse(path: Path):
    return parse_log(path, FileInfo(path, "worker", "decode", 0, "node1"))


@pytest.mark.parametrize("hours", [8, -5, 0])
def test_local_time_is_placed_on_utc_by_the_lines_between_utc_lines(tmp_path: Path, hours: int) -> None:
    path = _worker_log(tmp_path, hours)
    off = offset_of(path.read_text())
    assert off.hours == hours and f"UTC{hours:+d} h" in off.note
    log = _parse(path)
    stats = [r for r in log.all_records() if isinstance(r, StatsSample)]
    assert log.engine == "trtllm"
    assert [r.ts for r in stats] == [(T0 + timedelta(seconds=s)).replace(tzinfo=UTC) for s in (1, 2, 12)]


def test_srun_labels_and_colours_do_not_hide_the_clock(tmp_path: Path) -> None:
    """srt-slurm's worker logs carry srun's task label, Dynamo's lines ANSI colours: both come off first."""
    lines = _worker_log(tmp_path, 8).read_text().splitlines()
    dyn = [f"0: \x1b[2m{ln[:27]}\x1b[0m \x1b[32m INFO\x1b[0m{ln[33:]}" for ln in lines if ln[:1].isdigit()]
    trt = [f"0: {ln}" for ln in lines if ln.startswith("[")]
    assert offset_of("\n".join([dyn[0], *trt, dyn[1]])).hours == 8


def test_an_offset_the_line_order_does_not_settle_is_refused(tmp_path: Path) -> None:
    """No UTC line after the local ones: every offset up to the first UTC line fits; the stamps stay as written."""
    path = _worker_log(tmp_path, 8, utc_after=False)
    off = offset_of(path.read_text())
    assert off.hours is None and "kept on the log's own clock" in off.note and "\n" not in off.note
    stats = [r for r in _parse(path).all_records() if isinstance(r, StatsSample)]
    assert stats[0].ts == (T0 + timedelta(hours=8, seconds=1)).replace(tzinfo=UTC)


def test_the_iteration_line_in_both_forms_is_a_step() -> None:
    """The kv_cache_util form (N/A on an engine's first step) and release 1.0's (num_scheduled_requests: after
    the timestamp) give the same neutral figures."""
    from diag.engines.trtllm.iterlog import ITER, step_of

    first, old = ITER.samples[1], ITER.samples[2]
    a = step_of(ITER.regex.search(first))  # type: ignore[arg-type]
    assert a == {"engine": 0, "running": 1, "kv_usage": None, "new_tokens": 8192, "ctx_requests": 1,
                 "gen_tokens": 0, "step_ms": 812.5, "device_step_ms": None, "steps": 1, "dp_share": None}
    # currank_total_requests 0/1: the rank fetched none of the one request (a peer's share: attention DP)
    assert step_of(ITER.regex.search(ITER.samples[0]))["dp_share"] is True  # type: ignore[arg-type]
    b = step_of(ITER.regex.search(old))  # type: ignore[arg-type]
    assert (b["running"], b["gen_tokens"], b["step_ms"], b["device_step_ms"]) == (64, 64, 11.2, 10.9)


def test_steps_fold_into_the_stats_interval(tmp_path: Path) -> None:
    """Three steps, two intervals: tokens summed and over the interval as rates, the busiest batch, the longest
    step, stamped at the interval's end; rows of a clocked engine pass unchanged."""
    log = _parse(_worker_log(tmp_path, 8))
    stats = [r for r in log.all_records() if isinstance(r, StatsSample)]
    frame = pl.DataFrame({
        "ts": [r.ts for r in stats], "engine": ["0"] * 3, "file": ["w0"] * 3, "line": [r.line for r in stats],
        **{c: [getattr(r, c) for r in stats] for c in ("prompt_tps", "gen_tps", "running", "kv_usage", "new_tokens",
                                                       "ctx_requests", "gen_tokens", "step_ms", "device_step_ms",
                                                       "steps", "preemptions")}},
        schema_overrides={"prompt_tps": pl.Float64, "gen_tps": pl.Float64, "preemptions": pl.Int64}
    ).with_columns(dp_share=pl.lit(None, pl.Boolean), busy=pl.lit(None, pl.Float64))
    clocked = frame.head(1).with_columns(steps=pl.lit(None, pl.Int64), ts=frame["ts"][0] + timedelta(seconds=5))
    out = fold_steps(pl.concat([frame, clocked]), 10.0)
    folded = out.filter(pl.col("steps").is_not_null())
    assert folded.select("ts", "steps", "new_tokens", "gen_tokens", "prompt_tps", "gen_tps", "running",
                         "device_step_ms").rows() == [
        (datetime(2026, 8, 19, 6, 11, 50, tzinfo=UTC), 2, 8192, 2, 819.2, 0.2, 2, 4.1),
        (datetime(2026, 8, 19, 6, 12, 0, tzinfo=UTC), 1, 0, 2, 0.0, 0.2, 2, 4.1)]
    assert out.filter(pl.col("steps").is_null()).height == 1
    # without attention DP the ranks of a file run rank 0's batch, whatever they log (one engine); with it each
    # rank is its own engine, equal figures or not (the recipe says so, or a line shows a rank's share)
    ranks = pl.concat([frame, frame.with_columns(engine=pl.lit("1")),
                       frame.with_columns(engine=pl.lit("2"), gen_tokens=pl.col("gen_tokens") + 1)])

    def engines_of(folded: pl.DataFrame) -> list[tuple[str, int]]:
        return folded.group_by("engine").agg(pl.len()).sort("engine").rows()

    assert engines_of(fold_steps(ranks, 10.0)) == [("0", 2)]
    assert engines_of(fold_steps(ranks, 10.0, own_batches=True)) == [("0", 2), ("1", 2), ("2", 2)]
    shared = ranks.with_columns(dp_share=pl.when(pl.col("engine") == "2").then(True).otherwise(None))
    assert engines_of(fold_steps(shared, 10.0)) == [("0", 2), ("1", 2), ("2", 2)]
    # busy: the share of each interval the steps' host times took
    assert fold_steps(frame, 10.0)["busy"].to_list() == [round(sum(frame["step_ms"][:2]) / 10_000, 12),
                                                         frame["step_ms"][2] / 10_000]


def test_the_engine_is_told_by_its_recipe_type_and_its_own_lines(tmp_path: Path) -> None:
    assert engines.get("trtllm") is not None and engines.get("trtllm").display == "TensorRT-LLM"  # type: ignore[union-attr]
    assert engines.engine_of(_worker_log(tmp_path, 0).read_text()) == "trtllm"
    assert engines.engine_of("python3 -m dynamo.trtllm --model-path /m") == "trtllm"


def test_a_trtllm_run_is_judged_on_its_folded_steps_with_its_clock_said(tmp_path: Path) -> None:
    """End to end (``diag tail --format json``): the engine told by its lines, the steps folded into 10 s
    samples on UTC, the header's clock note; a run whose offset is refused says so in one line."""
    import json

    from tests.helpers import run_diag

    logs = tmp_path / "run" / "logs"
    logs.mkdir(parents=True)
    local = T0 + timedelta(hours=-5)
    lines = [_dynamo(T0)]
    for i in range(1, 301):     # 60 s of 200 ms decode steps, a UTC line every 10 s
        lines.append(_iter_line(local + timedelta(seconds=1 + i * 0.2), i, 32, 0, 32))
        if i % 50 == 0:
            lines.append(_dynamo(T0 + timedelta(seconds=1 + i * 0.2)))
    (logs / "node1_decode_w0.out").write_text("\n".join(lines) + "\n")
    doc = json.loads(run_diag("tail", str(tmp_path / "run"), "--format", "json").stdout)
    assert (doc["summary"]["engine"], doc["summary"]["engine_by"]) == ("trtllm", "logs")
    assert doc["summary"]["header"]["clock"] == "TensorRT-LLM's local times read as UTC-5 h, from its lines " \
                                               "written between UTC lines"
    assert doc["summary"]["start"].startswith("2026-08-19T06:11:4")
    (ep,) = doc["endpoints"]
    assert ep["samples"] == 300             # its stats lines: one per step
    assert ep["stats"]["samples"] == 7      # folded into 10 s intervals from 06:11:40 to 06:12:50
    # 300 steps x 32 tokens over seven 10 s intervals (the first and last partly filled)
    assert (ep["stats"]["gen_tps_mean"], ep["stats"]["running_mean"]) == (round(300 * 32 / 70, 1), 32.0)


def test_a_dense_log_whose_head_holds_one_utc_line_is_placed_from_further_in(tmp_path: Path) -> None:
    """The first 64 KB hold Dynamo's first line and local steps only; the next UTC line comes later: the clock
    is read from further into the file (diag.files.clock_of), not refused."""
    from diag.files import clock_of

    local = T0 + timedelta(hours=8)
    lines = [_dynamo(T0), *(_iter_line(local + timedelta(seconds=1 + i * 0.02), i, 32, 0, 32) for i in range(1, 400)),
             _dynamo(T0 + timedelta(seconds=9))]
    path = tmp_path / "node1_decode_w0.out"
    path.write_text("\n".join(lines) + "\n")
    head = path.read_bytes()[:65536].decode()
    assert offset_of(head).hours is None
    assert clock_of(path, head) == (8 * 3600, "TensorRT-LLM's local times read as UTC+8 h, from its lines written "
                                              "between UTC lines")


def test_a_trtllm_run_without_iteration_lines_is_told_to_turn_them_on(tmp_path: Path) -> None:
    """No stats: the next step names TensorRT-LLM's switch (print_iter_log), not vLLM's API servers."""
    import json

    from tests.helpers import run_diag

    logs = tmp_path / "run" / "logs"
    logs.mkdir(parents=True)
    local = T0 + timedelta(hours=8)
    (logs / "node1_decode_w0.out").write_text("\n".join([
        _dynamo(T0), f"[{local:%m/%d/%Y-%H:%M:%S}] [TRT-LLM] [I] [_torch][RANK 0] Estimated max tokens in KV cache : "
        "1048576", _dynamo(T0 + timedelta(seconds=5))]) + "\n")
    doc = json.loads(run_diag("tail", str(tmp_path / "run"), "--format", "json").stdout)
    steps = [e["action"] for e in doc["verdict"]["experiments"]]
    assert steps[0] == "turn TensorRT-LLM iteration lines on (print_iter_log: true on each role)", steps
    assert not any("api-server" in s or "vLLM" in s for s in steps)


def test_clean_iteration_lines_come_out_as_columns_equal_to_the_records() -> None:
    """The stored form under the plain head is read in polars (no record each), on the log's clock, as the same
    records the line parser gives; a line the fast form does not cover (release 1.0's order, N/A, a rank's
    share, a dict with more keys) takes the general path and counts once."""
    from diag.engines.trtllm.iterlog import ITER
    from diag.parsers.ingest import parse_blocks, parse_bulk

    local = T0 + timedelta(hours=8)
    lines = [_iter_line(local + timedelta(seconds=s), s, 3, 512 * (s % 2), 3, dev="N/A" if s == 1 else "4.10ms")
             for s in range(1, 80)]
    lines += [*ITER.samples, lines[-1].replace("'cached_kv_tokens': 0}", "'cached_kv_tokens': 0, 'x': 1}")]
    data = ("\n".join(lines) + "\n").encode()
    parsed = parse_blocks(blocks_of(data), year=2026, tz_offset_s=8 * 3600)
    assert parsed.stats.height == 81 and [r.kind for r in parsed.records] == ["stats"] * 2
    assert parsed.stats["ts"][0] == (T0 + timedelta(seconds=1)).replace(tzinfo=UTC)
    bulk = parse_bulk(blocks_of(data), year=2026, tz_offset_s=8 * 3600)[0]
    assert bulk == record_path(data, year=2026, tz_offset_s=8 * 3600)[0] and len(bulk) == 83
    assert [(r.kv_usage, r.device_step_ms, r.dp_share) for r in bulk[:2]] == [(25.0, None, True), (25.0, 4.1, True)]
