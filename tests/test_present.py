"""diag.rules.present: the one way diag writes figures, durations, times and colours."""

from __future__ import annotations

from datetime import UTC, datetime

from diag.rules import present


def test_numbers() -> None:
    assert [present.number(x) for x in (None, 0, 7, 1493.4, 152608)] == ["-", "0", "7", "1,493", "152,608"]
    assert present.number(21.249, 1) == "21.2" and present.number(2048.0, 1) == "2,048.0"
    assert [present.compact(x) for x in (None, 0, 5, 9.5, 999, 1000, 15_200, 152_019.0, 1_400_000)] == \
        ["-", "0", "5", "9.5", "999", "1.0k", "15.2k", "152k", "1.4M"]


def test_values_and_templates_in_the_number_style() -> None:
    """A value of unknown type, and a catalog template's plain fields: numbers grouped, as precise as given."""
    assert [present.shown(x) for x in (16384, 0.95, 1234.5, True, "16384", None)] == \
        ["16,384", "0.95", "1,234.5", "True", "16384", "None"]
    filled = present.prose("set it to {two_isl} (it ran {mbt}); KV {kv} %, {share:.0f} % at C={c}",
                           {"two_isl": 16384, "mbt": 8192, "kv": "21.2", "share": 27.6, "c": 4096})
    assert filled == "set it to 16,384 (it ran 8,192); KV 21.2 %, 28 % at C=4,096"


def test_durations_and_latencies() -> None:
    assert [present.duration(s) for s in (None, 0.4, 45, 245, 4320)] == ["-", "0s", "45s", "4m05s", "1h12m"]
    assert [present.duration(s, coarse=True) for s in (12, 240, 3 * 3600, 2301 * 3600)] == ["12s", "4m", "3h", "95d"]
    assert [present.seconds(x) for x in (None, 0.02134, 4.521, 118.2)] == ["-", "0.0213", "4.52", "118"]
    assert [present.milliseconds(x) for x in (15.6, 2000, 38803.64)] == ["15.6 ms", "2 s", "38.8 s"]
    assert present.clock(datetime(2026, 3, 14, 9, 12, 5, tzinfo=UTC)) == "03-14 09:12:05" and present.clock(None) == "-"


def test_endpoint_colours_stable_and_apart() -> None:
    """An endpoint's colour depends on its name only; prefill and decode workers of one run never share one."""
    prefill = [present.colour_of(f"prefill-w{i}") for i in range(8)]
    decode = [present.colour_of(f"decode-w{i}") for i in range(6)]
    assert len(set(prefill)) == 8 and len(set(decode)) == 6 and not set(prefill) & set(decode)
    assert present.colour_of("prefill-w4") == present.colour_of("prefill-w4")
    assert present.colour_of("router") in present.PALETTE
