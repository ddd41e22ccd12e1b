"""A file is read when any line of it is diag's, wherever that line stands and whatever the file's head
looks like; only a file with no such line is refused, and the refusal names what diag looked for."""

from __future__ import annotations

import json
from pathlib import Path

from diag.files import NOT_DIAGS
from diag.parsers.layout import VOCABULARY

from helpers import ROOT, run_diag

DECODE = ROOT / "samples" / "runs" / "prefill-bound" / "logs" / "gb200-r03-n14_decode_w0.out"
KV = ("{t} KV Transfer metrics: Num successful transfers={n}, Avg xfer time (ms)=9.862, P90 xfer time (ms)=12.1, "
      "Avg MB per transfer=70.0, Throughput (MB/s)=7097.952")


def _tail(path: Path) -> tuple[int, dict, str]:
    res = run_diag("tail", str(path), "--format", "json")
    return res.returncode, json.loads(res.stdout) if res.returncode < 2 else {}, res.stderr


def test_a_paste_of_bare_clock_kv_transfer_lines_is_read_and_says_what_it_found(tmp_path: Path) -> None:
    """The regression: prefixes stripped to ``HH:MM:SS``, a name that says nothing (was refused, exit 2)."""
    paste = tmp_path / "paste.txt"
    paste.write_text("\n".join(KV.format(t=f"10:12:{s:02d}", n=s) for s in (1, 11, 21)) + "\n")
    status, doc, err = _tail(paste)
    assert status == 0, err
    assert doc["sources"][0]["records"] == 3
    assert doc["summary"]["header"]["found"] == "3 KV-transfer records (no stats lines)"
    text = run_diag("tail", str(paste), env={"NO_COLOR": "1", "COLUMNS": "100"}).stdout
    assert "found       3 KV-transfer records (no stats lines)" in text


def test_vocabulary_after_a_long_preamble_is_found(tmp_path: Path) -> None:
    """The head (the first 64 KiB, 400 lines) holds nothing of diag's; a line after it does."""
    paste = tmp_path / "console.txt"
    preamble = "".join(f"step {i}: compiling kernels for an unrelated tool\n" for i in range(4000))
    paste.write_text(preamble + KV.format(t="10:12:01", n=4) + "\n")
    status, doc, err = _tail(paste)
    assert status == 0, err
    assert doc["sources"][0]["records"] == 1 and doc["sources"][0]["lines"] == 4001


def test_a_stray_nul_at_the_head_does_not_hide_the_log(tmp_path: Path) -> None:
    """Zeros at the start of a file (a crash, a preallocated NFS block) made it 'binary'; its records count."""
    whole = _tail(DECODE)[1]["endpoints"][0]
    spoilt = tmp_path / DECODE.name
    spoilt.write_bytes(b"\x00" * 64 + b"\n" + DECODE.read_bytes())
    status, doc, err = _tail(spoilt)
    assert status == 0, err
    got = doc["endpoints"][0]
    assert (got["samples"], got["stats"]) == (whole["samples"], whole["stats"])


def test_a_file_with_no_line_of_the_vocabulary_is_refused_naming_it(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_bytes(b"\x00\x01binary\x02" * 5000 + b"\nnothing a log format knows\n")
    res = run_diag("tail", str(junk))
    assert res.returncode == 2
    assert f"skipped {junk}: {NOT_DIAGS}" in res.stderr
    assert VOCABULARY in NOT_DIAGS
