"""ANSI (real and mangled), carriage returns, wrapper prefixes, glued and torn records."""

from __future__ import annotations

from diag.parsers.clean import clean, logical_lines, strip_ansi
from diag.parsers.records import StatsSample

from helpers import parse_text

STATS = ("Engine 002: Avg prompt throughput: 16284.1 tokens/s, Avg generation throughput: 0.0 tokens/s, "
         "Running: 2 reqs, Waiting: 41 reqs, GPU KV cache usage: 3.1%, Prefix cache hit rate: 0.0%")
HEAD = "(APIServer pid=7) INFO 08-06 12:34:56 [loggers.py:271] "


def _stats(text: str) -> list[StatsSample]:
    return [r for r in parse_text(text) if isinstance(r, StatsSample)]


def test_real_and_mangled_escapes() -> None:
    for deco in ("\x1b[0;36m{}\x1b[0;0m", "[0;36m{}[0;0m", "^[[1;36m{}^[[0;0m", "#033[1;36m{}#033[0;0m",
                 "\ufffd[0;36m{}\ufffd[0;0m", "\x1b]0;title\x07{}", "\x1b[2K\x1b[1G{}"):
        assert strip_ansi(deco.format("(APIServer pid=7)")) == "(APIServer pid=7)"


def test_carriage_returns_and_progress_bars() -> None:
    raw = ("Capturing CUDA graphs (decode, FULL):  45%|████▌     | 23/51 [00:04<00:05,  5.13it/s]\r"
           + HEAD + STATS + "\r")
    assert [t for t, _, _ in logical_lines(raw)] == [
        "Capturing CUDA graphs (decode, FULL):  45%|████▌     | 23/51 [00:04<00:05,  5.13it/s]", HEAD + STATS]
    assert _stats(raw)[0].waiting == 41
    assert clean(HEAD + STATS + "^M") == HEAD + STATS


def test_glued_records_split() -> None:
    raw = "INFO 07-28 06:41:09 [loggers.py:118] " + STATS + "INFO 07-28 06:41:19 [loggers.py:118] " + STATS
    got = _stats(raw)
    assert len(got) == 2 and [s.md for s in got] == ["07-28 06:41:09", "07-28 06:41:19"]
    raw2 = HEAD + STATS + "(APIServer pid=7) INFO 08-06 12:35:06 [loggers.py:271] " + STATS.replace("002", "003")
    assert [s.engine for s in _stats(raw2)] == [2, 3]


def test_torn_record_rejoined_once() -> None:
    full = HEAD + STATS
    cut = full.index("generation thr") + 5
    text = full[:cut] + "\n" + full[cut:] + "\n" + HEAD + STATS.replace("002", "005")
    got = _stats(text)
    assert [(s.engine, s.prompt_tps, s.waiting) for s in got] == [(2, 16284.1, 41), (5, 16284.1, 41)]
    assert got[0].line == 1 and got[1].line == 3


def test_torn_inside_escape_sequence() -> None:
    text = "\x1b[0;36m(APIServer pid=7)\x1b[0;0m INFO 08-06 12:34:55 [x.py:1] hello\x1b[0;3\n6m" + HEAD[:-1] + " " + STATS
    got = _stats(text)
    assert len(got) == 1 and got[0].engine == 2 and got[0].proc == "APIServer"


def test_wrapper_prefixes_peeled() -> None:
    for prefix in ("0: ", "12: ", "2025-10-15T00:02:38.756689123Z ", "vllm  | ", "  | ",
                   "Aug 19 18:34:30 vllm vllm[8707]: ", "logs/x_decode_w0.out:", "[2025-03-10T15:07:20Z] "):
        got = _stats(prefix + HEAD + STATS)
        assert len(got) == 1 and got[0].running == 2 and got[0].md == "08-06 12:34:56", prefix


def test_srun_label_and_docker_stamp_kept() -> None:
    (rec,) = _stats("3: " + HEAD + STATS)
    assert rec.task == 3
    (rec,) = _stats("2025-10-15T00:02:38.756689123Z " + HEAD + STATS)
    assert rec.ts is not None and rec.ts.year == 2025 and rec.ts.minute == 2
