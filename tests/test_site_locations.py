"""A traceback whose message line is gone, named by the log site at its head's ``file:line`` (parsers/sites.py
``SiteIndex.at``, parsers/sitefaults.py ``located``): the generated tables carry every site's locations, a
logger.exception traceback cut before its exception is read as the site at that location in a catalogued release,
or the nearest error site of its file within a few lines where all agree on their class."""

from __future__ import annotations

from pathlib import Path

from loading import report_of

from diag.parsers import callsites, faults, sites
from diag.parsers.lineparser import LineParser
from diag.parsers.records import Fault

ROWS = [row for path in sites.table_files() for row in sites.read_table(path)]
# vLLM's logger.exception sites of a fault class, each at a location the call-site table leaves to the sites
LOGGED = [(r, loc) for r in ROWS if r.engine == "vllm" and "exception" in r.levels and r.cls != "benign"
          for loc in r.at if not callsites.known(loc)]
FRAME = '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/llama.py", line 202, in forward'


def _cut(where: str, level: str = "ERROR") -> list[Fault]:
    """The faults of a logger.exception traceback printed at ``where`` by a V0 worker, cut after two frames (its
    message line and its exception line gone): vLLM's head on every line, as its formatter prints them."""
    head = f"(VllmWorkerProcess pid=350) {level} 01-29 20:00:47 {where}]"
    lines = [f"{head} {FRAME}", f"{head}     hidden_states = self.self_attn(positions=positions,",
             f'{head}   File "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py", line 1736, '
             "in _wrapped_call_impl", f"{head}     return self._call_impl(*args, **kwargs)"]
    parser = LineParser(2025)
    out = [r for i, raw in enumerate(lines) for r in parser.feed(i + 1, raw, None)[0]]
    return [r for r in (*out, *parser.cut_tracebacks()) if isinstance(r, Fault)]


def test_the_tables_carry_each_sites_locations() -> None:
    assert LOGGED and all(r.at for r in ROWS)
    row = next(r for r in ROWS if r.pattern == "Exception in worker {any} while processing method {any}.")
    assert "multiproc_worker_utils.py:239" in row.at   # vLLM 0.9.2's _run_worker_process


def test_every_exception_site_names_a_traceback_cut_at_its_location() -> None:
    named = 0
    for row, loc in LOGGED:
        site = sites.at(loc, "ERROR", ("vllm",))
        if site is None:   # sites of other classes within a few lines: the location cannot tell
            continue
        assert site.cls == row.cls   # the sites at its very line agree with it
        (fault,) = _cut(loc)
        assert (fault.cause, fault.site, fault.phase) == (faults.SITE_CAUSES[site.cls], site.id, site.phase)
        named += 1
    assert named >= len(LOGGED) // 2


def test_a_release_that_moved_the_call_a_few_lines_names_the_same_site() -> None:
    """vLLM 0.6.6 logs 'Exception in worker %s while processing method %s.' at line 240, 0.9.2 at 239."""
    (fault,) = _cut("multiproc_worker_utils.py:240")
    assert fault.cause == faults.SITE_CAUSES["death"] and fault.site == "017a298211df"
    assert fault.message.startswith("Exception in worker") and fault.where == "multiproc_worker_utils.py:240"


def test_a_location_of_no_site_or_of_disagreeing_sites_names_nothing() -> None:
    assert sites.at("multiproc_worker_utils.py:400", "ERROR") is None
    assert sites.at("no_such_module.py:10", "ERROR") is None
    rows = [sites.SiteRow("vllm", "A worker died of {any}", "death", "any", "error", ("exception",), (), ("a",), (),
                          at=("w.py:10",)),
            sites.SiteRow("vllm", "A request failed: {any}", "request", "serving", "error", ("exception",), (),
                          ("b",), (), at=("w.py:14",))]
    index = sites.SiteIndex(rows)
    assert index.at("w.py:10", "ERROR") == rows[0]          # the very line decides
    assert index.at("w.py:12", "ERROR") is None             # between a death and a request site: no telling
    assert index.at("w.py:15", "ERROR") is None
    assert index.at("w.py:19", "ERROR") == rows[1]          # only the request site is near enough
    assert index.at("w.py:10", "WARNING") is None           # a warning's traceback is no failure
    assert (fault := _cut("multiproc_worker_utils.py:240", "WARNING")[0]).site is None
    assert fault.cause == faults.CUT.name


def test_a_cut_worker_traceback_is_the_engines_death(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    text = "\n".join(f"(VllmWorkerProcess pid=350) ERROR 01-29 20:00:47 multiproc_worker_utils.py:240] {line}"
                     for line in (FRAME, "    hidden_states = self.self_attn(positions=positions,"))
    log.write_text(text + "\n")
    codes = [f.code for f in report_of([str(log)]).findings]
    assert "DIAG-E001" in codes and "DIAG-E004" not in codes
