"""lnav-style: every declared line format's sample lines come out as the declared kind."""

from __future__ import annotations

import pytest

import diag.parsers.ingest  # noqa: F401  (imports every format module)
from diag.parsers.clean import logical_lines, peel
from diag.parsers.formats import REGISTRY, LineFormat
from diag.parsers.headers import parse_header
from diag.parsers.lineparser import TRIGGERS, LineParser

from helpers import noise_class, parse_text

CASES = [(f, s) for f in REGISTRY.values() for s in f.samples]


def _id(case: tuple[LineFormat, str]) -> str:
    return f"{case[0].name}:{case[0].samples.index(case[1])}"


def test_every_format_has_two_samples() -> None:
    assert len(REGISTRY) > 40
    for fmt in REGISTRY.values():
        assert len(fmt.samples) >= 2, fmt.name


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_sample(case: tuple[LineFormat, str]) -> None:
    fmt, sample = case
    texts = [sample] + [t for t, _, _ in logical_lines(sample)]
    texts += [parse_header(t).msg for t in texts]
    assert any(fmt.regex.search(t) for t in texts), "sample does not match its own pattern"
    if fmt.kind == "header":
        text = logical_lines(sample)[0][0]
        assert parse_header(text).cls == fmt.emits
    elif fmt.kind == "prefix":
        rest, _, _ = peel(sample)
        assert len(rest) < len(sample)
    elif fmt.kind == "file":
        pass  # block formats of whole files (benchmark.out): the pattern check above is their test
    elif fmt.emits == "lifecycle" and not TRIGGERS.search(sample):
        pytest.fail("lifecycle sample holds none of the prefilter triggers")
    elif fmt.kind == "noise":
        assert not TRIGGERS.search(sample)
        assert noise_class(sample) == fmt.emits
    elif fmt.name in ("traceback-start", "traceback-frame"):
        parser = LineParser()
        parser.feed(1, sample)
        assert parser._tb_open, "traceback start not registered"
    elif fmt.name == "native-frame":
        recs = parse_text(f"terminate called after throwing an instance of 'std::runtime_error'\n{sample}")
        assert [r.kind for r in recs] == ["fault"] and recs[0].line == 1
        assert recs[0].frames, "the frame's symbol was not read into the crash report"
    elif fmt.name == "exception-line":
        head = sample.split("] ", 1)[0] + "] " if "] " in sample else ""
        recs = parse_text(f"{head}Traceback (most recent call last):\n{sample}")
        assert [r.kind for r in recs] == ["fault"]
        assert recs[0].exception and recs[0].traceback_line == 1
    else:
        assert TRIGGERS.search(sample), "sample holds none of its triggers"
        recs = parse_text(sample)
        assert fmt.emits in {r.kind for r in recs}, f"{fmt.name} produced {[r.kind for r in recs]}"
