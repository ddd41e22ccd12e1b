"""The bulk path and the streaming path give identical records and counts."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import polars as pl
import pytest

from diag.parsers import blockframe
from diag.parsers.counts import ANSI_PATTERN
from diag.parsers.ingest import StreamParser, merged_records, parse_bulk
from diag.parsers.lineparser import TRIGGER_PATTERN
from diag.parsers.noise import NOISE

from helpers import blocks_of, record_path

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


@pytest.fixture(autouse=True)
def _prefilter_on_small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bulk path here is the compiled prefilter's on blocks of any size (where it is installed)."""
    monkeypatch.setattr(blockframe, "PREFILTER_MIN_BYTES", 0)
    monkeypatch.setattr(blockframe, "PREFILTER_MAX_STATS_SHARE", float("inf"))


FEEDS_PER_LOG = 16


def _stream(data: bytes, seed: int) -> tuple[list, object]:
    """The log appended in random pieces of up to 5,000 bytes, and on a long log at most about FEEDS_PER_LOG
    of them (a fixed budget: each piece with a newline is a block); between them one in three is only
    1-64 bytes long (a cut inside a line, an escape sequence or a UTF-8 character)."""
    sp = StreamParser(year=2026)
    rng = random.Random(seed)
    longest = max(5000, 2 * len(data) // FEEDS_PER_LOG)
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, 64) if rng.random() < 1 / 3 else rng.randint(1, longest)
        out += sp.feed(data[i:i + n])
        i += n
    out += sp.finish()
    return merged_records(out, sp.stats, sp.kv), sp.counts


def _assert_same(data: bytes, block: int, seed: int, reference: tuple[list, object] | None = None) -> int:
    """Bulk, streaming and the record path agree: records (stats/KV rows as records) and counts."""
    bulk, bc = parse_bulk(blocks_of(data, block), year=2026)
    streamed, sc = _stream(data, seed)
    reference, rc = reference or record_path(data, year=2026)
    assert bulk == reference
    assert streamed == reference
    for c in (bc, sc):
        assert (c.lines, c.candidates, c.ansi_lines, c.noise) == (rc.lines, rc.candidates, rc.ansi_lines, rc.noise)
        assert c.last_ts == rc.last_ts   # the time of the last stamped line, wherever the blocks were cut
    assert bc.lines == data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    return len(bulk)


def _sample_logs() -> list[Path]:
    return sorted(p for p in (SAMPLES / "runs").rglob("*") if p.suffix in (".out", ".log")) + \
        sorted(SAMPLES.glob("slurm-*.out"))


@pytest.mark.parametrize("path", _sample_logs(), ids=lambda p: str(p.relative_to(SAMPLES)))
def test_bulk_equals_stream_on_samples(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bulk (the compiled prefilter where it is installed), streaming and the record path; and the bulk
    polars scan without the prefilter (tests/test_prefilter.py holds the two scans to each other elsewhere)."""
    data = path.read_bytes()
    reference, rc = record_path(data, year=2026)
    _assert_same(data, 256 << 10, seed=len(data), reference=(reference, rc))
    if blockframe.USE_PREFILTER:
        monkeypatch.setattr(blockframe, "USE_PREFILTER", False)
        bulk, bc = parse_bulk(blocks_of(data, 64 << 10), year=2026)
        assert bulk == reference
        assert (bc.lines, bc.candidates, bc.ansi_lines, bc.noise, bc.last_ts) == \
            (rc.lines, rc.candidates, rc.ansi_lines, rc.noise, rc.last_ts)


def test_the_clock_is_the_last_stamped_line_of_any_kind() -> None:
    """A log whose last records are followed by noise lines only (a Dynamo "waiting for engine" line every
    20 s, ANSI-coloured) and an unstamped traceback tail: its clock is the last noise line's time, in bulk
    (blocks of any size) and in follow mode (feeds of any size) alike."""
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 8, 27, 18, 15, 0, tzinfo=UTC)
    lines = ["(APIServer pid=1) INFO 08-27 18:15:00 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 "
             "tokens/s, Avg generation throughput: 9.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache "
             "usage: 1.0%, Prefix cache hit rate: 0.0%"]
    lines += [f"\x1b[2m{(t0 + timedelta(seconds=20 * k)).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}\x1b[0m \x1b[32m INFO"
              f"\x1b[0m \x1b[2mdynamo_runtime::system_status_server\x1b[0m\x1b[2m:\x1b[0m waiting for engine uptime_s={k}"
              for k in range(1, 61)]
    lines += ['  File "/opt/vllm/vllm/v1/worker/gpu_model_runner.py", line 4420, in capture_model'] * 30
    data = ("\n".join(lines) + "\n").encode()
    last_noise = t0 + timedelta(seconds=20 * 60)
    recs, _ = parse_bulk(blocks_of(data, 1 << 20), year=2026)
    assert max(r.ts for r in recs if r.ts is not None) == t0   # no record after the stats line
    for block in (97, 1000, 1 << 20):
        assert parse_bulk(blocks_of(data, block), year=2026)[1].last_ts == last_noise
    for seed in range(3):
        assert _stream(data, seed)[1].last_ts == last_noise
    assert record_path(data, year=2026)[1].last_ts == last_noise


def test_sample_runs_exist() -> None:
    assert len(_sample_logs()) >= 20


def test_bulk_equals_stream_on_real_logs(real_logs: Path) -> None:
    total = 0
    for path in sorted(real_logs.glob("*.log")):
        total += _assert_same(path.read_bytes(), 2048, seed=7)
    assert total >= 75


def test_patterns_mean_the_same_to_polars_and_python() -> None:
    """The gate regexes run in polars (Rust) on the bulk path and in Python on the stream path."""
    import re

    lines = ["Engine 000: Avg prompt throughput: 1.0 tokens/s", "KV Transfer metrics: x=1", "plain",
             "\x1b[0;36m(APIServer pid=1)\x1b[0;0m", "Traceback (most recent call last):", "[0;36m",
             "request completed", 'x - "GET /metrics HTTP/1.1" 200 OK', "  5%|▌  | 3/51 [00:01<00:20,  2.3it/s]"]
    df = pl.DataFrame({"l": lines})
    for pat in [TRIGGER_PATTERN, ANSI_PATTERN] + [f.regex.pattern for f in NOISE]:
        got = df.select(pl.col("l").str.contains(pat))["l"].to_list()
        assert got == [bool(re.search(pat, x)) for x in lines], pat


def test_binary_and_empty_input() -> None:
    data = bytes(range(256)) * 50 + b"\xff\xfe\x00garbage"
    assert _assert_same(data, 1000, seed=3) == 0
    assert _assert_same(b"", 1000, seed=3) == 0
    assert _assert_same(b"\n\n\n", 1000, seed=3) == 0


def test_local_time_moved_to_utc_by_the_container_stamp() -> None:
    from diag.parsers.ingest import infer_tz_offset

    docker = ("2025-10-15T00:02:38.756689123Z (APIServer pid=1) INFO 10-14 17:02:38 [loggers.py:123] Engine 000: "
              "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 843.6 tokens/s, Running: 38 reqs, "
              "Waiting: 0 reqs, GPU KV cache usage: 88.5%, Prefix cache hit rate: 42.4%\n")
    plain = docker.split("Z ", 1)[1].replace("17:02:38", "17:02:48")
    data = (docker + plain).encode()
    offset = infer_tz_offset(data.decode())
    assert offset == -7 * 3600
    recs, _ = parse_bulk(blocks_of(data), year=2025, tz_offset_s=offset)
    assert [r.ts.isoformat() for r in recs] == ["2025-10-15T00:02:38.756689+00:00", "2025-10-15T00:02:48+00:00"]
    assert infer_tz_offset(plain) == 0


def test_year_from_an_ansi_coloured_dynamo_stamp() -> None:
    from diag.parsers.timestamps import infer_year

    head = "\x1b[2m2027-01-01T00:00:05.100Z\x1b[0m \x1b[32m INFO\x1b[0m x: y\n(APIServer pid=1) INFO 12-31 23:59:58 [a.py:1] z"
    assert infer_year(head) == 2026  # the vLLM line is still in December: the run crossed New Year
    assert infer_year("\x1b[2m2026-08-06T12:34:56Z\x1b[0m INFO a: b\n") == 2026


def test_stats_and_kv_lines_come_out_as_columns() -> None:
    """Clean stats and KV-transfer lines become column rows (no record each); as records they equal
    what the record path gives, and the line parser sees only the rest."""
    from diag.parsers.ingest import parse_blocks

    path = next((SAMPLES / "runs" / "nixl-failures" / "logs").glob("*decode_w0.out"))
    data = path.read_bytes()
    parsed = parse_blocks(blocks_of(data, 256 << 10), year=2026)
    assert parsed.stats.height > 100 and parsed.kv.height > 10
    assert sum(r.kind == "stats" for r in parsed.records) < parsed.stats.height // 10
    assert parse_bulk(blocks_of(data, 256 << 10), year=2026)[0] == record_path(data, year=2026)[0]


def test_plain_ucx_info_lines_are_skipped_exactly() -> None:
    """UCX INFO lines hold the ``UCX`` trigger; skipped ones must not change any record."""
    ucx = "[1772429498.280441] [gb200-r07-n14:4965:0]     ucp_worker.c:1888 UCX  INFO    ep_cfg[8]: tag(rc_mlx5/mlx5_7:1)"
    err = "[1772429499.280441] [gb200-r07-n14:4965:0]     sock.c:334  UCX  ERROR recv(fd=180) failed: reset"
    stats = ("(APIServer pid=7) INFO 03-02 00:05:40 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
             "Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.0%, "
             "Prefix cache hit rate: 0.0%")
    text = "\n".join([ucx, stats, ucx, "  torn tail without a head", err, ucx, ucx + " Handshake with x failed",
                      stats, ucx, ""]).encode()
    for block in (64, 200, 1 << 20):
        _assert_same(text, block, seed=block)
    recs, counts = parse_bulk(blocks_of(text), year=2026)
    assert counts.candidates == 8 and [r.kind for r in recs].count("stats") == 2
    assert [r.kind for r in recs].count("nixl_failure") == 2


def test_progress_bar_literals_cover_its_regex() -> None:
    """The bulk path runs the progress-bar regex only on lines holding one of its literals."""
    import re

    from diag.parsers.counts import _PROGRESS_LITERALS

    fmt = NOISE[-1]
    assert fmt.emits == "progress-bar"
    for alt in fmt.regex.pattern.split("|\\d+(?:\\.\\d+)?"):  # the two alternatives: "%" and "/s]" or "/it]"
        assert "%" in alt or "(?:s|it)\\]" in alt
    for sample in fmt.samples:
        assert re.search(fmt.regex, sample) and any(t in sample for t in _PROGRESS_LITERALS)


@pytest.mark.parametrize("data", [b"\x1f\x8b\x00\x00", b"\x28\xb5\x2f\xfd\x00\nINFO x\r\n", b"x\x9c\x00\nabc\n",
                                  b"x\xda\n", b"x^\r\r\nb\r"])
def test_blocks_that_look_compressed_are_read_as_text(data: bytes) -> None:
    _assert_same(data, 1000, seed=1)


def test_classified_spans_depend_on_line_numbers_only() -> None:
    """However a log is cut into blocks, the same lines are classified: the head, then one window in
    every stretch."""
    from diag.parsers import counts

    head, window, every = counts.CLASSIFY_HEAD, counts.CLASSIFY_WINDOW, counts.CLASSIFY_EVERY
    total = 3 * every + 12345

    def chosen(cuts: list[int]) -> set[int]:
        out: set[int] = set()
        for first, end in itertools.pairwise(cuts):
            for a, b in counts.classified_spans(first, end - first):
                assert 0 <= a < b <= end - first
                out.update(range(first + a, first + b))
        return out

    rng = random.Random(5)
    cuts = sorted({1, total + 1, *rng.sample(range(2, total), 40)})
    expect = {n for n in range(1, total + 1) if n <= head or (n - 1) % every < window}
    assert chosen([1, total + 1]) == expect == chosen(cuts)
    assert chosen([1, head + 1]) == set(range(1, head + 1))


def test_noise_of_a_large_log_is_estimated_the_same_way_by_every_path(monkeypatch) -> None:
    """On a log longer than the classified head, only the sampled lines' noise is classified: bulk (any
    block size) and streaming count the same lines; lines, candidates, ANSI lines and records stay
    exact, and the noise estimate is close to the exact counts of the record path."""
    from diag.parsers import counts

    monkeypatch.setattr(counts, "CLASSIFY_HEAD", 64)
    monkeypatch.setattr(counts, "CLASSIFY_WINDOW", 32)
    monkeypatch.setattr(counts, "CLASSIFY_EVERY", 96)
    path = next((SAMPLES / "runs" / "nixl-failures" / "logs").glob("*decode_w0.out"))
    data = path.read_bytes()
    exact_recs, exact = record_path(data, year=2026)
    assert exact.lines > 500
    seen = []
    for block in (4096, 65536, 1 << 20):
        recs, c = parse_bulk(blocks_of(data, block), year=2026)
        assert recs == exact_recs
        seen.append((c.lines, c.candidates, c.unclassified, c.ansi_lines, dict(c.noise)))
    recs, c = _stream(data, seed=11)
    assert recs == exact_recs
    seen.append((c.lines, c.candidates, c.unclassified, c.ansi_lines, dict(c.noise)))
    assert len(set(map(repr, seen))) == 1
    assert (c.lines, c.candidates) == (exact.lines, exact.candidates)
    classified = c.lines - c.unclassified
    assert not c.exact and classified == sum(1 for n in range(1, c.lines + 1) if n <= 64 or (n - 1) % 96 < 32)
    est = c.estimate()
    assert est.lines == exact.lines and not est.exact
    assert c.ansi_lines == est.ansi_lines == exact.ansi_lines > 0
    assert abs(est.noise_lines - exact.noise_lines) <= 0.15 * exact.noise_lines
    assert exact.exact and exact.estimate() is exact


def test_an_indented_continuation_is_a_wrapped_line_and_a_bare_one_a_torn_record() -> None:
    """A record wrapped in a paste (the rest indented on the next line) reads as if one space stood for
    the wrap (n-67's lease lines); a record torn mid-word by a concurrent writer joins without one."""
    wrapped = ("WARNING 08-16 08:09:07 [worker.py:2967] Releasing expired KV blocks for request\n"
               "        8f07dfc0-a2f0e657 which were retrieved by 0 remote worker(s) before lease expired.\n")
    torn = ("WARNING 08-16 08:09:07 [worker.py:2967] Releasing expired KV blocks for request 8f07dfc0-a2\n"
            "f0e657 which were retrieved by 2 remote worker(s) before lease expired.\n")
    for text, n_workers in ((wrapped, 0), (torn, 2)):
        recs, _ = parse_bulk([text.encode()], year=2025)
        expiry = [r for r in recs if r.kind == "kv_expiry"]
        assert [(r.request_id, r.n_workers, r.line) for r in expiry] == [("8f07dfc0-a2f0e657", n_workers, 1)]
