"""Test-only helpers: conveniences over the package's parsers and knowledge tables that the
package itself does not need."""

from __future__ import annotations

import functools
import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import IO

from diag.engines.vllm.knowledge import _data, fixes, nightlies
from diag.parsers.headers import ORCHESTRATOR
from diag.parsers.lineparser import FORMAT_TRIGGER_PATTERN, LineParser, is_candidate
from diag.parsers.noise import NOISE
from diag.parsers.orchestrator import parse_banner, parse_lifecycle
from diag.parsers.records import Lifecycle, Record
from diag.parsers.timestamps import parse_iso
from diag.parsers.wraps import unwrap, wrap_width
from diag.rules.knowledge import families, fmt_version

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- parsing whole texts


def blocks_of(data: bytes, size: int = 64 << 20) -> Iterator[bytes]:
    """Split bytes into blocks that end at a newline (the last may not)."""
    start = 0
    while start < len(data):
        end = min(start + size, len(data))
        if end < len(data):
            nl = data.rfind(b"\n", start, end)
            end = nl + 1 if nl >= start else data.find(b"\n", end) + 1 or len(data)
        yield data[start:end]
        start = end


def parse_text(text: str) -> list[Record]:
    """All records of a text (a file's content or a few lines): every candidate line goes to one
    :class:`LineParser` (non-candidates are skipped, as the bulk path does)."""
    parser = LineParser()
    buf = text.split("\n")
    cand = [is_candidate(raw) for raw in buf]
    out: list[Record] = []
    skip = -1
    for idx, raw in enumerate(buf):
        if idx == skip or not cand[idx]:
            continue
        nxt = buf[idx + 1] if idx + 1 < len(buf) else None
        prv = buf[idx - 1] if idx > 0 and not cand[idx - 1] else None
        recs, consumed = parser.feed(1 + idx, raw, nxt, prv)
        out.extend(recs)
        if consumed:
            skip = idx + 1
    return out


def noise_class(raw: str) -> str | None:
    """The noise category of a physical line (one that holds no record trigger), or None."""
    for fmt in NOISE:
        if fmt.regex.search(raw):
            return fmt.emits
    return None


_ISO_YEAR = re.compile(r"(?<!\d)((?:19|20)\d\d)-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?!\d)")


def year_from_iso(text: str) -> int | None:
    """The year of the first ``YYYY-MM-DD`` date found in ``text``, or None."""
    m = _ISO_YEAR.search(text)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------- orchestrator events


def parse_orchestrator_text(text: str) -> list[Lifecycle]:
    """All events of an orchestrator log's text.

    Lines with a head go to ``parse_lifecycle`` (``ts`` from the head, read as UTC: srtctl logs
    the node's local time and the caller knows the offset), the others to ``parse_banner``.
    """
    out: list[Lifecycle] = []
    for i, raw in enumerate(text.splitlines(), 1):
        m = ORCHESTRATOR.regex.match(raw.rstrip("\r"))
        ev = parse_lifecycle(m["msg"], i, parse_iso(m["iso"])) if m else parse_banner(raw, i)
        if ev is not None:
            out.append(ev)
    return out


def worker_progress(events: Sequence[Lifecycle]) -> tuple[int, int, int, int] | None:
    """``(have_prefill, want_prefill, have_decode, want_decode)`` from the newest readiness line."""
    for ev in reversed(events):
        if ev.event == "ready":
            p, d = ev.get("have_prefill"), ev.get("have_decode")
            return p, p, d, d
        if ev.event == "not_ready":
            hp, hd = ev.get("have_prefill"), ev.get("have_decode")
            return hp, hp + max(0, ev.get("waiting_prefill")), hd, hd + max(0, ev.get("waiting_decode"))
    return None


def unexpected_exits(events: Sequence[Lifecycle]) -> list[Lifecycle]:
    """Process deaths that are not the orchestrator's own teardown: every ``process_exit``, and
    ``srun_task`` errors seen before the first cleanup event (after it, ``Killed`` is expected)."""
    out: list[Lifecycle] = []
    cleaning = False
    for ev in events:
        if ev.event in ("cleanup", "cleanup_processes", "signal"):
            cleaning = True
        if ev.event == "process_exit" or (ev.event == "srun_task" and not cleaning):
            out.append(ev)
    return out


# ---------------------------------------------------------------- knowledge tables as Markdown


def families_markdown() -> str:
    """The hybrid/GDN/multimodal family table as Markdown (docs of the family-dependent rules)."""
    lines = ["| family | hybrid | GDN | multimodal | bf16 SSM state validated |", "|---|---|---|---|---|"]
    mark = {True: "yes", False: ""}
    for f in families():
        if f.hybrid or f.gdn or f.multimodal:
            lines.append(f"| {f.name} | {mark[f.hybrid]} | {mark[f.gdn]} | {mark[f.multimodal]} | {mark[f.bf16_ssm]} |")
    lines += ["", "Edit `rules/data/models.toml` to add a family (regex patterns on the model path/name)."]
    return "\n".join(lines)


def versions_markdown() -> str:
    """The version table as Markdown, as the docs of DIAG-C002 carry it."""
    lines = ["| fix | title | first release | merged |", "|---|---|---|---|"]
    for f in fixes().values():
        lines.append(f"| #{f.id} | {f.title} | {fmt_version(f.first_release)} | {f.merged} |")
    lines += ["", "Nightlies known to diag:", ""]
    for commit, entry in nightlies().items():
        has = ", ".join(f"#{c}" for c in sorted(entry.fixes)) or "none"
        after = f" (built after {entry.built_after})" if entry.built_after else ""
        lines.append(f"- `nightly-{commit}`: {has}{after}")
    table = _data("versions.toml").get("dynamo_runtime", {})
    if table:
        lines += ["", "Dynamo runtime images:", ""]
        lines += [f"- `ai-dynamo/vllm-runtime:{k}` ships vLLM v{v}" for k, v in table.items()]
        lines += ["", "An unlisted runtime tag is bounded by its listed neighbours (a newer tag ships at least, an "
                  "older tag at most, their vLLM)."]
    lines += ["", "Edit `rules/data/versions.toml` to add a release, nightly or runtime image."]
    return "\n".join(lines)


# ---------------------------------------------------------------- the record path (the reference)


_FORMAT_TRIGGERS = re.compile(FORMAT_TRIGGER_PATTERN)


def record_path(data: bytes, *, year: int | None = 2026, tz_offset_s: int = 0) -> tuple[list[Record], object]:
    """Every record of a log and its counts, line by line in Python: each candidate line (Python
    regexes classify) goes to one :class:`LineParser` with its neighbours, as the bulk path once did
    for every line. The bulk and the streaming path must give the same (their stats/KV rows as
    records)."""
    from diag.parsers.counts import ANSI_PATTERN, Counts

    ansi = re.compile(ANSI_PATTERN)
    parser = LineParser(year, tz_offset_s)
    counts = Counts()
    out: list[Record] = []
    if width := wrap_width(data):   # a log hard-wrapped by a terminal, joined back (parsers.wraps)
        data = unwrap(data, width)
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    prev: tuple[str, bool] | None = None
    pending: tuple[int, str, str | None] | None = None
    for n, line in enumerate(lines, 1):
        raw = line.removesuffix("\r")
        is_cand = is_candidate(raw)
        counts.lines += 1
        counts.ansi_lines += bool(ansi.search(raw))
        if is_cand:
            counts.candidates += 1
        if not is_cand or not _FORMAT_TRIGGERS.search(raw):  # a line read only for its level word is noise too
            name = next((f.emits for f in NOISE if f.regex.search(raw)), None)
            if name:
                counts.noise[name] += 1
        before, prev = prev, (raw, is_cand)
        if pending is not None:
            pn, praw, pprv = pending
            pending = None
            recs, consumed = parser.feed(pn, praw, raw, pprv)
            out.extend(recs)
            if consumed:
                prev = (raw, True)  # used up: no record may join back onto it
                continue
        if is_cand:
            pending = (n, raw, None if before is None or before[1] else before[0])
    if pending is not None:
        out.extend(parser.feed(pending[0], pending[1], None, pending[2])[0])
    out.extend(parser.cut_tracebacks())
    counts.last_ts = next((t for raw in reversed(lines) if (t := parser.line_time(raw.removesuffix("\r")))), None)
    return out, counts


def stop_server(proc: subprocess.Popen[bytes], log: IO[bytes] | None = None) -> None:
    """End a server a test started (terminate, then kill if it lingers) and close its log."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    if log is not None:
        log.close()


# ---------------------------------------------------------------- the CLI in this process


@functools.cache
def _command_of(app: object) -> object:
    """An app's click command, built once a process (typer's runner builds it again on every ``invoke``: its
    signatures and type hints, ~12 ms a call)."""
    import typer

    return typer.main.get_command(app)  # type: ignore[arg-type]


def run_diag(*args: str, cwd: Path | str | None = None, env: Mapping[str, str | None] | None = None,
             input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``diag ARGS`` run in this process (typer's CLI runner): its exit status, stdout and stderr, as a
    subprocess would give them, without a new interpreter importing diag again (about 1 s a call).
    ``env`` changes the environment for the call (None removes a variable); an exception diag does not
    turn into an exit status is raised here, so a traceback fails the test as it would show in a shell.
    Tests of what only a real process shows (signals, closed pipes, start-up imports) use subprocess."""
    import os
    from unittest import mock

    import typer.testing

    from diag.cli import app

    here, environ = os.getcwd(), dict(os.environ)
    os.chdir(cwd or ROOT)
    try:
        with mock.patch.object(typer.testing, "_get_command", _command_of):
            res = typer.testing.CliRunner().invoke(app, list(args), input=input, env=dict(env or {}),
                                                   catch_exceptions=False, prog_name="diag")
    finally:  # the process's state as before (``--no-color`` sets NO_COLOR for the rest of a real process)
        os.chdir(here)
        os.environ.clear()
        os.environ.update(environ)
    return subprocess.CompletedProcess(["diag", *args], res.exit_code, res.stdout, res.stderr)


def load_tool(name: str) -> ModuleType:
    """A script of tools/ (not a package) imported as a module, registered under ``<name>_tool``."""
    spec = importlib.util.spec_from_file_location(f"{name}_tool", ROOT / "tools" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
