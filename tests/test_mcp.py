"""``diag mcp`` driven by the MCP SDK's own stdio client, one server for the module: every tool's structured
result is the CLI's ``--format json`` document on the same input (validated against diag/schemas), bad input
is a tool error carrying the CLI's one-line message and the server goes on, paths outside the roots are
refused, also when a link is swapped in while the tool reads; servers of their own show the per-call limits
of bytes and seconds."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from jsonschema import Draft202012Validator
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from schemas import validate
from test_cli_contract import ROOT, diag

from diag.confine import Limits
from diag.mcp_tools import (
    COMPARE_KEYS,
    EVIDENCE_ITEMS,
    EVIDENCE_TEXT,
    REPORT_KEYS,
    SET_ASIDE_ITEMS,
    TIMELINE_ITEMS,
    Workspace,
    bound,
    bound_events,
    call,
    trim_evidence,
)

RUNS = ROOT / "samples" / "runs"
SHARED_RECIPES = ROOT.parent / "shared" / "samples" / "recipes"
SWEEP = (RUNS / "sweep-4xdep2", RUNS / "sweep-5xdep2")


class Server:
    """A running ``diag mcp`` and a synchronous way to call it."""

    def __init__(self, portal: BlockingPortal, session: ClientSession, init: Any, out: Path) -> None:
        self.portal, self.session, self.init, self.out = portal, session, init, out

    def call(self, tool: str, **args: Any) -> Any:
        return self.portal.call(self.session.call_tool, tool, args)

    def ok(self, tool: str, **args: Any) -> dict[str, Any]:
        res = self.call(tool, **args)
        assert not res.is_error, res.content[0].text
        return res.structured_content

    def error(self, tool: str, **args: Any) -> str:
        res = self.call(tool, **args)
        assert res.is_error and len(res.content) == 1, res
        text = res.content[0].text
        assert "\n" not in text and "Traceback" not in text, text
        return text


@contextlib.contextmanager
def serving(roots: list[Path], *options: str) -> Iterator[Server]:
    """``diag mcp --root R... OPTIONS`` in a process of its own, initialized."""
    params = StdioServerParameters(command=sys.executable, cwd=str(ROOT),
                                   args=["-m", "diag", "mcp", *[a for r in roots for a in ("--root", str(r))], *options])
    with start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(stdio_client(params)) as (read, write), \
            portal.wrap_async_context_manager(ClientSession(read, write)) as session:
        init = portal.call(session.initialize)
        yield Server(portal, session, init, roots[0])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    out = tmp_path_factory.mktemp("mcp-root")  # the first root: where report writes
    (out / "escape").symlink_to(ROOT / "tests")  # a symlink in a root to a directory outside every root
    with serving([out, ROOT / "samples", *([SHARED_RECIPES] if SHARED_RECIPES.is_dir() else [])]) as running:
        yield running


@functools.cache
def _cli_json(*args: str) -> str:
    res = diag(*args, "--format", "json")
    assert res.returncode in (0, 1), res.stderr[-500:]
    return res.stdout


def cli_json(*args: str) -> Any:
    """The CLI's --format json document (each command line run once per module)."""
    return json.loads(_cli_json(*args))


def cli_error(*args: str) -> str:
    res = diag(*args)
    assert res.returncode == 2 and not res.stdout, res.stdout[-300:]
    return res.stderr.splitlines()[0]


@pytest.fixture(scope="module")
def sweep_json() -> dict[str, Any]:
    return cli_json("report", *map(str, SWEEP))


def test_initialize_and_the_tools_with_their_schemas(server: Server) -> None:
    assert server.init.server_info.name == "diag" and server.init.capabilities.tools is not None
    tools = {t.name: t for t in server.portal.call(server.session.list_tools).tools}
    assert set(tools) == {"tail", "check", "explain", "rules", "report", "compare", "runs"}
    for t in tools.values():
        assert t.input_schema["type"] == "object" and t.output_schema["type"] == "object", t.name
        Draft202012Validator.check_schema(t.output_schema)
        assert t.annotations.read_only_hint is (t.name != "report"), t.name
    assert tools["compare"].input_schema["required"] == ["run_a", "run_b"]
    assert set(tools["report"].output_schema["required"]) == {"html", *REPORT_KEYS}


@pytest.mark.parametrize("run", ["kv-exhaustion", "block-size-crash"])
def test_tail_is_the_cli_json(server: Server, run: str) -> None:
    path = str(RUNS / run)
    doc = server.ok("tail", paths=[path])
    validate(doc, "tail")
    assert doc == cli_json("tail", path)
    assert list(doc)[:3] == ["verdict", "findings", "summary"]  # what an agent reads first


def test_tail_of_two_runs_and_select_are_the_cli_json(server: Server) -> None:
    doc = server.ok("tail", paths=[str(p) for p in SWEEP], select=["K", "B"])
    validate(doc, "tail")
    assert doc == cli_json("tail", *map(str, SWEEP), "--select", "K,B")
    assert {f["code"][:6] for r in doc["runs"] for f in r["findings"]} == {"DIAG-K", "DIAG-B"}


def test_limit_keeps_the_first_findings_and_says_so(server: Server) -> None:
    path = str(RUNS / "block-size-crash")
    res = server.call("tail", paths=[path], limit=3)
    full = cli_json("tail", path)
    assert len(full["findings"]) == 17
    assert res.structured_content["findings"] == full["findings"][:3]
    assert res.structured_content["summary"] == full["summary"]  # the counts are of every finding
    assert res.content[0].text == f"{path}: 3 of 17 findings shown (limit 3); the summary counts all"
    assert json.loads(res.content[-1].text) == res.structured_content


def test_tail_of_a_failed_run_is_its_postmortem_and_timeline(server: Server) -> None:
    """An agent asking where the fix goes: the root cause with its owner and why, the first error at
    file:line, the timeline; the CLI's JSON, through a real server."""
    path = str(RUNS / "engine-crash")
    res = server.call("tail", paths=[path])
    doc = res.structured_content
    cli = cli_json("tail", path)
    assert (doc["postmortem"], doc["timeline"]) == (cli["postmortem"], cli["timeline"])
    pm = doc["postmortem"]
    (cause,) = pm["root_causes"]
    assert (cause["code"], cause["owner"], cause["cause"], cause["engine"]) == ("DIAG-E001", "engine", "oom", "vllm")
    assert pm["first_error"]["at"] == f"{path}/logs/gb200-r05-n15_decode_w0.out:703"
    assert pm["failed_at"] == "2026-09-03T04:03:01+00:00" and len(pm["consequences"]) == 16
    assert {"stage", "ready", "error", "failure"} <= {e["kind"] for e in doc["timeline"]}
    assert all(e["at"] for e in doc["timeline"] if e["kind"] in ("error", "failure", "death"))
    assert "postmortem" in {t.name: t for t in server.portal.call(server.session.list_tools).tools}["tail"].description
    assert server.ok("tail", paths=[str(RUNS / "healthy")])["postmortem"] is None


def test_timeline_and_set_aside_are_bounded_keeping_the_failure() -> None:
    event = {"ts": None, "kind": "stage", "text": "x", "at": "f:1", "endpoint": None}
    events = [event] * (TIMELINE_ITEMS + 30) + [{**event, "kind": "failure"}]
    aside = [{"text": "y"}] * (SET_ASIDE_ITEMS + 1)
    run, notes = bound_events({"timeline": events, "postmortem": {"consequences": aside, "noise": []}}, "r")
    assert len(run["timeline"]) == TIMELINE_ITEMS and run["timeline"][-1]["kind"] == "failure"
    assert len(run["postmortem"]["consequences"]) == SET_ASIDE_ITEMS
    assert notes == [f"r: {TIMELINE_ITEMS} of {TIMELINE_ITEMS + 31} timeline events shown (errors, deaths and "
                     "failures first)", f"r: postmortem consequences: {SET_ASIDE_ITEMS} of {SET_ASIDE_ITEMS + 1} shown"]
    small = {"timeline": [event], "postmortem": None}
    assert bound_events(small, "r") == (small, [])


@pytest.mark.parametrize("path", [RUNS / "healthy" / "config.yaml", RUNS / "drift-batched-tokens"])
def test_check_is_the_cli_json(server: Server, path: Path) -> None:
    """A recipe, and a run directory (what ran: its recipe with the flags its logs show)."""
    doc = server.ok("check", paths=[str(path)])
    validate(doc, "check")
    assert doc == cli_json("check", str(path))
    assert doc["findings"] or path.name == "config.yaml"


@pytest.mark.shared
@pytest.mark.skipif(not SHARED_RECIPES.is_dir(), reason="needs ../shared/samples/recipes")
def test_check_on_the_real_recipes_is_the_cli_json(server: Server) -> None:
    doc = server.ok("check", paths=[str(SHARED_RECIPES)], limit=1000)
    validate(doc, "check")
    assert doc == cli_json("check", str(SHARED_RECIPES))
    assert doc["summary"]["files"] > 5


def test_explain_and_rules_are_the_cli_outputs(server: Server) -> None:
    res = server.call("explain", code="K001")
    assert res.content[0].text + "\n" == diag("explain", "K001").stdout
    catalog = cli_json("rules")
    validate(res.structured_content, "rules")
    assert res.structured_content == {**catalog, "rules": [r for r in catalog["rules"] if r["code"] == "DIAG-K001"]}
    doc = server.ok("rules")
    validate(doc, "rules")
    assert doc == catalog
    recipe = server.ok("rules", scope="recipe")["rules"]
    assert recipe == [r for r in catalog["rules"] if r["scope"] == "recipe"] and len(recipe) > 5


def test_report_writes_the_html_and_returns_the_cli_json_without_the_plot_tables(
        server: Server, sweep_json: dict[str, Any]) -> None:
    doc = server.ok("report", paths=[str(p) for p in SWEEP])
    html = Path(doc.pop("html"))
    assert html.parent == server.out / ".diag-mcp" and html.read_text().startswith("<!DOCTYPE html>")
    assert doc == {k: sweep_json[k] for k in REPORT_KEYS}
    validate({**sweep_json, **doc}, "report")
    assert [p["verdict"] for p in doc["points"]] == [p["verdict"] for p in sweep_json["points"]]


def test_compare_is_the_cli_reports_diff(server: Server, sweep_json: dict[str, Any]) -> None:
    doc = server.ok("compare", run_a=str(SWEEP[0]), run_b=str(SWEEP[1]))
    assert doc == {k: sweep_json[k] for k in COMPARE_KEYS}
    (diff,) = doc["diffs"]
    assert (diff["a"], diff["b"]) == ("sweep-4xdep2", "sweep-5xdep2") and diff["config"] and diff["tps_per_gpu"]


def test_runs_is_the_cli_json_of_an_index_under_a_root(server: Server) -> None:
    into = server.out / "campaign"
    res = diag("index", *map(str, SWEEP), "--into", str(into), "--jobs", "2", "--format", "json")
    assert res.returncode == 0, res.stderr[-500:]
    for query in ((), ("--sort", "-tok_s_gpu_working"), ("--where", "validity = 'valid' and name ~ '5x'")):
        args = dict(zip(("sort" if q == "--sort" else "where" for q in query[::2]), query[1::2], strict=True))
        want = json.loads(diag("runs", str(into), *query, "--format", "json").stdout)
        got = server.ok("runs", root=str(into), **args)
        validate(got, "runs")
        assert got == want and got["runs"], query
    everything = server.ok("runs", root="campaign")["runs"]  # relative: under the first root
    assert len(everything) == 2 and server.ok("runs", root="campaign", limit=1)["runs"] == everything[:1]
    assert server.error("runs", root=str(into), where="bogus = 1") == cli_error("runs", str(into), "--where", "bogus = 1")
    not_an_index = str(RUNS / "healthy")
    assert server.error("runs", root=not_an_index) == cli_error("runs", not_an_index)


def test_bad_input_is_the_cli_line_and_the_server_goes_on(server: Server) -> None:
    missing = str(ROOT / "samples" / "no-such-run")
    assert server.error("tail", paths=[missing]) == cli_error("tail", missing)
    not_a_run = str(RUNS / "healthy" / "MANIFEST.json")
    assert server.error("tail", paths=[not_a_run]) == cli_error("tail", not_a_run)
    assert server.error("explain", code="Z999") == cli_error("explain", "Z999")
    assert server.error("compare", run_a=missing, run_b=str(SWEEP[0])) == f"diag compare: {missing}: no such file or directory"
    assert server.error("tail", paths=[7]) == "diag tail: paths.0: 7 is not of type 'string'"
    run = str(RUNS / "healthy")
    assert server.error("tail", paths=[run], since="5m") == cli_error("tail", run, "--since", "5m")
    assert server.error("tail") == cli_error("tail")
    assert server.error("report", paths=[str(SWEEP[0])], sla="ttft=soon").startswith("diag report: --sla: ")
    assert server.ok("rules", select=["K001"])["rules"][0]["code"] == "DIAG-K001"  # still serving


@pytest.mark.parametrize("path", [str(ROOT / "README.md"), "../../etc", "escape", str(ROOT / "tests" / "*.py")])
def test_a_path_outside_the_roots_is_refused(server: Server, path: str) -> None:
    text = server.error("tail", paths=[path])
    assert text.startswith(f"diag tail: {path}: outside the directories this server reads ("), text
    assert "--root" in text


OOM_LOG = RUNS / "engine-crash" / "logs" / "gb200-r05-n15_decode_w0.out"
SECRET = "SECRET-c0ffee-7319"


class Swapper(threading.Thread):
    """Flips each ``(path, inside, outside)`` between a link to ``inside`` and one to ``outside`` (``inside``
    None: the file itself, a hard link) for random spans, until stopped."""

    def __init__(self, flips: list[tuple[Path, Path | None, Path]]) -> None:
        super().__init__(daemon=True)
        self.flips, self.stop, self.swaps = flips, threading.Event(), 0

    def put(self, path: Path, target: Path | None, legit: Path) -> None:
        tmp = path.with_name(path.name + ".swap")
        tmp.unlink(missing_ok=True)   # left by a rename of a hard link onto itself (a no-op)
        if target is None:
            os.link(legit, tmp)
        else:
            tmp.symlink_to(target)
        os.replace(tmp, path)  # atomic: the path is always there, a file or a link

    def run(self) -> None:
        spans = random.Random(32)
        while not self.stop.is_set():
            for outside in (False, True):
                for path, inside, secret in self.flips:
                    self.put(path, secret if outside else inside, path.with_name("legit"))
                self.swaps += 1
                time.sleep(spans.choice((0, 0.001, 0.01, 0.05)))


def test_a_link_swapped_in_between_check_and_open_is_refused(
        server: Server, tmp_path_factory: pytest.TempPathFactory) -> None:
    """While a thread swaps a log under the root for a link to a secret outside every root (and a linked
    run directory between one under the root and one outside), the agent calls tail on them again and
    again: every answer is the document of what is under the root or the refusal, never the secret."""
    lines = OOM_LOG.read_text(encoding="utf-8").split("\n")
    oom = next(n for n, line in enumerate(lines) if "OutOfMemoryError" in line)
    crash = "\n".join(lines[oom - 30: oom + 30]) + "\n"  # a worker dying of CUDA OOM: the line shows in the finding
    leaked = crash.replace("Tried to allocate", f"{SECRET} Tried to allocate")
    name = "n15_decode_w0.out"
    outside = tmp_path_factory.mktemp("outside-every-root")
    (outside / name).write_text(leaked, encoding="utf-8")
    race = server.out / "race"
    run = race / "run"          # a run directory; race/linked is a link to it (inside: followed) or outside
    run.mkdir(parents=True)
    for d in (race, run):
        (d / "legit").write_text(crash, encoding="utf-8")
        os.link(d / "legit", d / name)
    (race / "linked").symlink_to(run)
    (server.out / "copy").mkdir()
    (server.out / "copy" / name).write_text(leaked, encoding="utf-8")
    assert SECRET in server.call("tail", paths=[f"copy/{name}"]).content[-1].text  # read, the secret would show
    paths = [str(race / name), "race/run", "race/linked", f"race/linked/{name}"]
    want = {p: server.ok("tail", paths=[p]) for p in paths}
    assert want[paths[0]]["findings"][0]["code"] == "DIAG-E001"
    refusal = re.compile(r"diag tail: (\S+): outside the directories this server reads \(")
    swapper = Swapper([(race / name, None, outside / name), (race / "linked", run, outside)])
    swapper.start()
    answers = {"document": 0, "refused": 0}
    try:
        end = time.monotonic() + 1.5
        for n in range(200):
            if time.monotonic() > end:
                break
            path = paths[n % len(paths)]
            res = server.call("tail", paths=[path])
            assert not any(SECRET in c.text for c in res.content), (path, res.content)
            if res.is_error:
                text, = (c.text for c in res.content)
                assert refusal.match(text) and "\n" not in text, text
                answers["refused"] += 1
            else:
                assert res.structured_content == want[path], path
                answers["document"] += 1
    finally:
        swapper.stop.set()
        swapper.join()
    assert swapper.swaps > 10 and answers["refused"] > 0, (swapper.swaps, answers)


def test_a_call_that_reads_more_than_the_limit_is_a_tool_error() -> None:
    with serving([ROOT / "samples"], "--max-read-bytes", "100000") as small:
        text = small.error("tail", paths=[str(RUNS / "block-size-crash")])
        m = re.fullmatch(r"diag tail: (\S+): reads more than 100,000 bytes in this call "
                         r"\(limit: diag mcp --max-read-bytes 100,000\)", text)
        assert m and Path(m[1]).is_relative_to(RUNS / "block-size-crash"), text
        recipe = RUNS / "healthy" / "config.yaml"   # 2 kB: within the limit, answered
        assert small.ok("check", paths=[str(recipe)]) == cli_json("check", str(recipe))


def test_a_call_past_its_time_is_a_tool_error_and_the_server_goes_on() -> None:
    with serving([ROOT / "samples"], "--max-seconds", "0.2") as hasty:
        text = hasty.error("tail", paths=[str(p) for p in SWEEP])   # seconds in a fresh server
        assert text == "diag tail: takes more than 0.2 s (limit: diag mcp --max-seconds 0.2)"
        assert len(hasty.portal.call(hasty.session.list_tools).tools) == 7


_opened: list[tuple[str, Any]] | None = None   # what the audit hook records while a test listens


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _opened is not None and event in ("open", "os.listdir", "os.scandir", "os.mkdir"):
        _opened.append((event, args[0]))


def test_every_file_a_tool_reads_is_opened_from_its_root_by_name(tmp_path: Path) -> None:
    """In-process, under an audit hook: while the tools read logs, side files, a Prometheus capture,
    Parquet telemetry, recipes and an index and write a report, nothing under the roots is opened or
    listed by a path the kernel resolves (one with a slash), only by a single name relative to a directory
    already held; and the documents are the CLI's."""
    global _opened
    into = tmp_path / "campaign"
    assert diag("index", str(SWEEP[0]), "--into", str(into), "--jobs", "1").returncode == 0
    telemetry = ROOT / "samples" / "telemetry"
    runs = [SWEEP[0], RUNS / "stats-missing", telemetry / "prefill-bound-tachometer", telemetry / "prefill-bound-aiperf"]
    calls = [("tail", {"paths": [str(r) for r in runs]}),
             ("check", {"paths": [str(RUNS / "drift-batched-tokens"), str(RUNS / "healthy" / "config.yaml")]}),
             ("runs", {"root": str(into)}), ("report", {"paths": [str(SWEEP[1])]})]
    ws = Workspace.of([tmp_path, ROOT / "samples"], None, Limits(1 << 30, 60))
    if not getattr(_audit, "installed", False):
        sys.addaudithook(_audit)
        _audit.installed = True  # type: ignore[attr-defined]
    _opened = []
    try:
        docs = [call(ws, tool, args).doc for tool, args in calls]
        opened = _opened
    finally:
        _opened = None
    by_path = [(event, path) for event, path in opened if not isinstance(path, int) and "/" in os.fsdecode(path)
               and any(Path(os.fsdecode(path)).absolute().is_relative_to(r) for r in ws.roots.paths)]
    assert not by_path, by_path[:5]
    assert sum(event == "open" and isinstance(path, str) for event, path in opened) > 50  # by name: the hook saw them
    tail, check, index, report = docs
    scraped = [any(s["kind"] == "prometheus" and s["records"] and not s["error"] for s in r["sources"])
               for r in tail["runs"]]
    assert scraped == [False, True, True, True]  # the capture, the Parquet files: read through the roots
    assert check == cli_json("check", *calls[1][1]["paths"]) and index["runs"] == cli_json("runs", str(into))["runs"]
    assert Path(report["html"]).parent == tmp_path / ".diag-mcp" and report["runs"][0]["label"] == "sweep-5xdep2"


def test_resources_are_the_catalog_and_each_rules_documentation(server: Server) -> None:
    resources = server.portal.call(server.session.list_resources).resources
    uris = [str(r.uri) for r in resources]
    assert uris[0] == "diag://rules" and "diag://rules/DIAG-K001" in uris
    catalog = server.portal.call(server.session.read_resource, "diag://rules").contents[0]
    assert json.loads(catalog.text) == cli_json("rules")
    k001 = server.portal.call(server.session.read_resource, "diag://rules/DIAG-K001").contents[0]
    assert k001.mime_type == "text/markdown" and k001.text == server.call("explain", code="K001").content[0].text


def test_evidence_is_trimmed_and_the_findings_bounded() -> None:
    long = "x" * (EVIDENCE_TEXT + 50)
    value, cut = trim_evidence({"line": long, "lines": list(range(EVIDENCE_ITEMS + 5)), "n": 3})
    assert cut and value == {"line": "x" * (EVIDENCE_TEXT - 1) + "…", "lines": list(range(EVIDENCE_ITEMS)), "n": 3}
    assert trim_evidence({"line": "short", "n": [1, 2]}) == ({"line": "short", "n": [1, 2]}, False)
    found, notes = bound([{"code": "A", "evidence": {"line": long}}, {"code": "B"}], 1, "run")
    assert found == [{"code": "A", "evidence": {"line": "x" * (EVIDENCE_TEXT - 1) + "…"}}]
    assert notes == ["run: 1 of 2 findings shown (limit 1); the summary counts all",
                     f"run: evidence of 1 finding(s) trimmed to {EVIDENCE_TEXT} characters and {EVIDENCE_ITEMS} items"]


def test_a_root_that_is_no_directory_is_a_usage_error() -> None:
    res = diag("mcp", "--root", "samples/no-such-dir")
    assert res.returncode == 2 and not res.stdout
    assert res.stderr == "diag mcp: --root samples/no-such-dir: not a directory\n"
