"""srtctl orchestrator log (``sweep_<jobid>.log`` / ``slurm-<jobid>.out``): lifecycle events.

:func:`parse_lifecycle` takes the message of a ``YYYY-MM-DD HH:MM:SS [LEVEL] msg`` line (the head is
split off by :func:`parsers.headers.parse_header`) and returns one :class:`Lifecycle` or ``None``.
:func:`parse_banner` handles the lines without a head: the job script's banner, the final
``✓ Sweep completed successfully`` / ``✗ Sweep failed (exit code: N)``, ``srun: error:`` lines and the
``--- Process: <name> ---`` heads of the FAILURE DETAILS block. :func:`stage_of` follows
``srtctl monitor``'s stage logic (srt-dynamo.md §3.6).

Event names and their fields are listed in :data:`EVENTS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from .formats import LineFormat, declare
from .jobmeta import parse_env
from .records import Lifecycle

_NO_FIELDS = ("orchestrator_start", "infra_start", "workers_start", "frontend_start", "healthy",
              "benchmark_manual", "benchmark_done", "monitor_failure", "failure_details", "cleanup",
              "sweep_done")
EVENTS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(_NO_FIELDS, ()),
    "job_id": ("job_id",),
    "job_info": ("key", "value"),                       # run_name, config, head_node, worker_nodes (tuple)
    "infra_ready": ("service",),                        # NATS | etcd
    "infra_skipped": ("reason",),
    "worker_start": ("mode", "index", "node", "nodes", "gpus"),   # nodes/gpus only for MPI launches
    "worker_env": ("env",),                             # dict
    "command": ("argv", "mode", "module"),              # mode from --disaggregation-mode, module from -m
    "log_path": ("path", "file"),
    "workers_started": ("count",),
    "health_wait": ("expected", "expected_prefill", "expected_decode", "desc"),
    "health_poll": ("url", "interval_s", "prefills", "decodes"),
    "not_ready": ("waiting_prefill", "waiting_decode", "have_prefill", "have_decode", "regular"),
    "ready": ("have_prefill", "have_decode"),
    "health_failed": ("reason", "seconds"),             # reason: timeout | unhealthy | aborted
    "benchmark_start": ("name",),
    "benchmark_failed": ("code",),
    "process_exit": ("name", "code", "role", "index", "node", "component"),
    "failure_process": ("name", "role", "index", "node", "component"),
    "failure_field": ("key", "value"),                  # exit_code | node | log_file
    "failure_tail": ("lines",),
    "cleanup_processes": ("count", "running"),
    "signal": ("signal",),
    "sweep_error": ("detail",),
    "sweep_failed": ("code",),
    "banner_time": ("which", "text", "tz"),             # Start: / End: lines of the job script
    "srun_task": ("node", "tasks", "status", "code", "text"),  # status: killed | exited | terminated | other
}

STAGES = ("unknown", "starting", "infra", "head-ready", "workers", "frontend", "awaiting-workers",
          "benchmarking", "cleanup", "completed", "failed", "killed", "timeout")
IN_PROGRESS_STAGES = frozenset(STAGES[1:8])

_H = "2026-04-21 14:10:37 [INFO] "
_H2 = "2026-08-21 02:23:19 [INFO] "
_E = "2026-04-21 14:40:02 [ERROR] "
_E2 = "2026-08-21 03:05:00 [ERROR] "
_W = "2026-04-21 15:10:00 [WARNING] "
_ROLES = ("prefill", "decode", "agg", "frontend")
_Builder = Callable[[re.Match[str]], tuple[str, dict[str, Any]] | None]


def _ev(event: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return event, fields


def process_name_fields(name: str) -> dict[str, Any]:
    """Role, index and node of an srtctl ManagedProcess name (``decode_0_nodeC``, ``frontend_0``)."""
    m = re.match(r"^(?P<comp>[A-Za-z]+)_(?P<idx>\d+)(?:_(?P<node>.+))?$", name)
    if not m:
        return {"role": None, "index": None, "node": None, "component": name}
    comp = m["comp"].lower()
    return {"role": comp if comp in _ROLES else None, "index": int(m["idx"]), "node": m["node"],
            "component": comp}


def _env(m: re.Match[str]) -> tuple[str, dict[str, Any]]:
    return _ev("worker_env", env=parse_env(m["env"]))


def _command(m: re.Match[str]) -> tuple[str, dict[str, Any]]:
    argv = m["argv"].strip()
    mode = re.search(r"--disaggregation[-_]mode[= ]['\"]?(\w+)", argv)
    module = re.search(r"(?:^|\s)-m\s+([\w.]+)", argv)
    return _ev("command", argv=argv, mode=mode.group(1) if mode else None,
               module=module.group(1) if module else None)


def _worker_start(m: re.Match[str]) -> tuple[str, dict[str, Any]]:
    if m["nodes"] is not None:
        nodes = tuple(n.strip() for n in m["nodes"].split(",") if n.strip())
        return _ev("worker_start", mode=m["mode"], index=int(m["index"]), node=nodes[0] if nodes else None,
                   nodes=nodes, gpus=int(m["gpus"]))
    return _ev("worker_start", mode=m["mode"], index=int(m["index"]), node=m["node"])


def _job_info(m: re.Match[str]) -> tuple[str, dict[str, Any]]:
    key, value = m["key"], m["value"].strip()
    if key == "Job ID":
        return _ev("job_id", job_id=value)
    norm = key.lower().replace(" ", "_")
    if norm == "worker_nodes":
        return _ev("job_info", key=norm, value=tuple(v.strip() for v in value.split(",") if v.strip()))
    return _ev("job_info", key=norm, value=value)


def _health_wait(m: re.Match[str]) -> tuple[str, dict[str, Any]]:
    desc = m["desc"]
    pd = re.search(r"(\d+)P \+ (\d+)D", desc or "")
    return _ev("health_wait", expected=int(m["n"]) if m["n"] else None,
               expected_prefill=int(pd.group(1)) if pd else None,
               expected_decode=int(pd.group(2)) if pd else None, desc=desc)


def _health_failed(m: re.Match[str]) -> tuple[str, dict[str, Any]]:
    if m["secs"]:
        return _ev("health_failed", reason="timeout", seconds=float(m["secs"]))
    return _ev("health_failed", reason="aborted" if "aborted" in m.group(0) else "unhealthy", seconds=None)


def _process(event: str) -> _Builder:
    def build(m: re.Match[str]) -> tuple[str, dict[str, Any]]:
        fields = {"name": m["name"], **process_name_fields(m["name"])}
        if "code" in m.re.groupindex:
            fields["code"] = int(m["code"])
        return event, fields

    return build


def _fixed(event: str) -> _Builder:
    return lambda m: (event, {})


def _d(name: str, pattern: str, samples: list[str], triggers: tuple[str, ...], doc: str = "") -> LineFormat:
    return declare(name, "record", pattern, samples=samples, emits="lifecycle", triggers=triggers, doc=doc)


_FORMATS: tuple[tuple[LineFormat, _Builder], ...] = (
    (_d("srtctl-start", r"(?:\S+\s+)?(?:srtctl )?Sweep Orchestrator\s*$",
        [_H + "Sweep Orchestrator", _H2 + "Sweep Orchestrator"], ("Sweep Orchestrator",)),
     _fixed("orchestrator_start")),
    (_d("srtctl-job-info",
        r"(?P<key>Job ID|Run name|Config|Infra node|Head node|Worker nodes): (?P<value>.*)$",
        [_H + "Job ID: 1543570", _H + "Worker nodes: theia0045, theia0046, theia0047, theia0048",
         _H + "Head node: theia0044"],
        ("Job ID: ", "Run name: ", "Config: ", "Infra node: ", "Head node: ", "Worker nodes: ")),
     _job_info),
    (_d("srtctl-infra-start", r"Starting infrastructure services\b.*$",
        [_H + "Starting infrastructure services (NATS, etcd)", _H2 + "Starting "
         "infrastructure services (NATS, etcd)"], ("Starting infrastructure services",)),
     _fixed("infra_start")),
    (_d("srtctl-infra-ready", r"(?P<svc>NATS|etcd) is ready\s*$",
        [_H + "NATS is ready", _H + "etcd is ready"], ("NATS is ready", "etcd is ready")),
     lambda m: _ev("infra_ready", service=m["svc"])),
    (_d("srtctl-infra-skipped", r"(?:Skipping NATS/etcd infrastructure|No discovery plane for) ?(?P<why>.*)$",
        [_H + "Skipping NATS/etcd infrastructure (frontend.type=sglang)",
         _H + "No discovery plane for frontend.type=vllm"], ("Skipping NATS/etcd", "No discovery plane for")),
     lambda m: _ev("infra_skipped", reason=m["why"].strip(" ()") or None)),
    (_d("srtctl-workers-start", r"Starting backend workers\s*$",
        [_H + "Starting backend workers", _H2 + "Starting backend workers"],
        ("Starting backend workers",)),
     _fixed("workers_start")),
    (_d("srtctl-worker-start",
        r"Starting (?P<mode>prefill|decode|agg|aggregated) worker (?P<index>\d+) on (?:(?P<nnodes>\d+) nodes "
        r"\((?P<nodes>[^)]*)\) with (?P<gpus>\d+) total GPUs.*|(?P<node>\S+))\s*$",
        [_H + "Starting prefill worker 3 on gb200-r07-n13",
         _H + "Starting decode worker 0 on 2 nodes (nodeC,nodeD) with 8 total GPUs (MPI mode)"],
        ("Starting prefill worker", "Starting decode worker", "Starting agg worker",
         "Starting aggregated worker")),
     _worker_start),
    (_d("srtctl-worker-env", r"Env: (?P<env>.*)$",
        [_H + "Env: DYN_LOG=error DYN_SYSTEM_PORT=7500 ETCD_ENDPOINTS=http://theia0044:2379 "
              "VLLM_SSM_CONV_STATE_LAYOUT=DS",
         _H + "Env: DYN_LOG=info,dynamo_runtime::pipeline::network::ingress::push_handler=warn "
              "HEAD_NODE_IP=10.0.0.4"],
        ("Env: ",), doc="full worker environment, K=V pairs sorted by key, values unquoted"),
     _env),
    (_d("srtctl-command", r"Command: (?P<argv>.*)$",
        samples=[_H + "Command: python3 -m dynamo.vllm --model /model --served-model-name qwen --disaggregation-mode "
                      "prefill --kv-transfer-config '{\"kv_connector\": \"NixlConnector\"}'",
                 _H2 + "Command: bash /srtctl-benchmarks/sa-bench/bench.sh http://localhost:8000 "
                 "1024 1024 8192 inf"],
        triggers=("Command: ",)),
     _command),
    (_d("srtctl-log-path", r"Log: (?P<path>\S.*?)\s*$",
        [_H + "Log: /home/u/srt-slurm/outputs/1543570/logs/theia0045_prefill_w0.out",
         _H2 + "Log: /home/rihuo/srt-slurm/outputs/1543570/logs/benchmark.out"], ("Log: ",)),
     lambda m: _ev("log_path", path=m["path"], file=m["path"].rstrip("/").rsplit("/", 1)[-1])),
    (_d("srtctl-workers-started", r"Started (?P<n>\d+) worker processes\s*$",
        [_H + "Started 5 worker processes", _H + "Started 16 worker processes"], (" worker processes",)),
     lambda m: _ev("workers_started", count=int(m["n"]))),
    (_d("srtctl-frontend-start", r"Starting frontend layer\b.*$",
        [_H + "Starting frontend layer", _H2 + "Starting frontend layer"],
        ("Starting frontend layer",)),
     _fixed("frontend_start")),
    (_d("srtctl-health-wait",
        r"Waiting for (?:workers to be ready|server health(?: \(expecting (?P<n>\d+) "
        r"(?:health entries|workers): (?P<desc>.*)\))?)(?:\.\.\.)?\s*$",
        [_H + "Waiting for server health (expecting 5 workers: 4P + 1D)...",
         _H + "Waiting for server health (expecting 6 health entries: 4P + 2D Dynamo generate instances; "
              "logical workers: 4P + 1D)...",
         _H + "Waiting for workers to be ready..."],
        ("Waiting for server health", "Waiting for workers to be ready")),
     _health_wait),
    (_d("srtctl-health-poll",
        r"Polling (?P<url>\S+)(?: every (?P<iv>[\d.]+)s)? for (?P<p>\d+) prefills? and (?P<d>\d+) decodes?",
        [_H + "Polling http://theia0044:8000/health every 10.0s for 4 prefills and 1 decodes",
         _H + "Polling http://nodeA:8000/workers every 10.0s for 1 prefills and 3 decodes (sglang frontend)"],
        ("Polling http",)),
     lambda m: _ev("health_poll", url=m["url"], interval_s=float(m["iv"]) if m["iv"] else None,
                   prefills=int(m["p"]), decodes=int(m["d"]))),
    (_d("srtctl-not-ready",
        r"Model is not ready, waiting for (?P<wp>-?\d+) prefills? and (?P<wd>-?\d+) decodes?\. "
        r"Have (?P<hp>\d+) prefills? and (?P<hd>\d+) decodes?\.?(?: \((?P<reg>\d+) regular workers\))?",
        [_H + "Model is not ready, waiting for 4 prefills and 1 decodes. Have 0 prefills and 0 decodes.",
         _H + "Model is not ready, waiting for 0 prefills and 1 decodes. Have 4 prefills and 0 decodes."],
        ("Model is not ready",)),
     lambda m: _ev("not_ready", waiting_prefill=int(m["wp"]), waiting_decode=int(m["wd"]),
                   have_prefill=int(m["hp"]), have_decode=int(m["hd"]),
                   regular=int(m["reg"]) if m["reg"] else None)),
    (_d("srtctl-ready", r"Model is ready\. Have (?P<hp>\d+) prefills? and (?P<hd>\d+) decodes?",
        [_H + "Model is ready. Have 4 prefills and 1 decodes.",
         _H2 + "Model is ready. Have 1 prefills and 3 decodes."], ("Model is ready",)),
     lambda m: _ev("ready", have_prefill=int(m["hp"]), have_decode=int(m["hd"]))),
    (_d("srtctl-health-failed",
        r"(?:Model did not get healthy in (?P<secs>[\d.]+) seconds|Server did not become healthy\b.*"
        r"|Wait for model aborted by stop event)\s*$",
        [_E + "Model did not get healthy in 1800 seconds", _E + "Server did not become healthy"],
        ("did not get healthy", "did not become healthy", "Wait for model aborted")),
     _health_failed),
    (_d("srtctl-healthy", r"Server is healthy - starting benchmark",
        [_H + "Server is healthy - starting benchmark", _H2 + "Server is healthy - "
         "starting benchmark"], ("Server is healthy",)),
     _fixed("healthy")),
    (_d("srtctl-benchmark-start", r"Running (?P<name>\S+) benchmark\s*$",
        [_H + "Running SA-Bench benchmark", _H + "Running GSM8K benchmark"], (" benchmark",)),
     lambda m: _ev("benchmark_start", name=m["name"])),
    (_d("srtctl-benchmark-manual", r"Benchmark type is 'manual'",
        [_H + "Benchmark type is 'manual' - server is ready for testing",
         _H2 + "Benchmark type is 'manual' - server is ready for testing"],
        ("Benchmark type is 'manual'",)),
     _fixed("benchmark_manual")),
    (_d("srtctl-benchmark-done", r"Benchmark completed successfully",
        [_H + "Benchmark completed successfully", _H2 + "Benchmark completed successfully"],
        ("Benchmark completed successfully",)),
     _fixed("benchmark_done")),
    (_d("srtctl-benchmark-failed", r"Benchmark failed with exit code (?P<code>-?\d+)",
        [_E + "Benchmark failed with exit code 1", _E2 + "Benchmark failed with exit code 2"],
        ("Benchmark failed with exit code",)),
     lambda m: _ev("benchmark_failed", code=int(m["code"]))),
    (_d("srtctl-process-exit", r"Critical process '(?P<name>[^']+)' exited with code (?P<code>-?\d+)",
        [_E + "Critical process 'decode_0_nodeC' exited with code 1",
         _E + "Critical process 'prefill_3_gb200-r07-n13' exited with code 137"], ("Critical process '",)),
     _process("process_exit")),
    (_d("srtctl-monitor-failure", r"Critical process failure detected",
        [_E + "Critical process failure detected!", _E2 + "Critical process failure detected!"],
        ("Critical process failure detected",)),
     _fixed("monitor_failure")),
    (_d("srtctl-failure-details", r"FAILURE DETAILS\s*$",
        [_E + "FAILURE DETAILS", _E2 + "FAILURE DETAILS"], ("FAILURE DETAILS",)),
     _fixed("failure_details")),
    (_d("srtctl-failure-field", r"(?P<key>Exit code|Node|Log file): (?P<value>.*?)\s*$",
        [_E + "Exit code: 1", _E + "Log file: /home/u/outputs/1543570/logs/nodeC_decode_w0.out",
         _E + "Node: nodeC"], ("Exit code: ", "Node: ", "Log file: ")),
     lambda m: _ev("failure_field", key=m["key"].lower().replace(" ", "_"), value=m["value"])),
    (_d("srtctl-cleanup", r"Cleanup\s*$", [_H + "Cleanup", _H2 + "Cleanup"], ("Cleanup",)),
     _fixed("cleanup")),
    (_d("srtctl-cleanup-processes", r"Cleaning up (?P<n>\d+) processes(?: \((?P<run>\d+) running\))?",
        [_H + "Cleaning up 12 processes...", _H + "Cleaning up 14 processes (9 running)..."],
        ("Cleaning up ",)),
     lambda m: _ev("cleanup_processes", count=int(m["n"]), running=int(m["run"]) if m["run"] else None)),
    (_d("srtctl-signal", r"Received signal (?P<sig>\w+), initiating cleanup",
        [_W + "Received signal SIGTERM, initiating cleanup...",
         _W + "Received signal SIGINT, initiating cleanup..."], ("Received signal ",)),
     lambda m: _ev("signal", signal=m["sig"])),
    (_d("srtctl-sweep-error", r"(?:Error during sweep|Fatal error)\b:?\s*(?P<detail>.*)$",
        [_E + "Error during sweep", _E + "Fatal error"], ("Error during sweep", "Fatal error")),
     lambda m: _ev("sweep_error", detail=m["detail"] or None)),
)

_PROCESS_HEAD = r"-{3} Process: (?P<name>\S+) -{3}"


def _banner_format(name: str, pattern: str, samples: list[str], triggers: tuple[str, ...]) -> LineFormat:
    """A head-less orchestrator line format (kept out of REGISTRY until the line pipeline routes
    head-less orchestrator lines to :func:`parse_banner`; see :data:`BANNER_FORMATS`)."""
    return LineFormat(name, "record", re.compile(pattern), tuple(samples), "lifecycle", triggers)


def _srun(m: re.Match[str]) -> tuple[str, dict[str, Any]]:
    what = m["what"].strip()
    code = re.match(r"Exited with exit code (-?\d+)", what)
    status = ("killed" if what.startswith("Killed") else "exited" if code
              else "terminated" if what.startswith("Terminated") else "other")
    return _ev("srun_task", node=m["node"], tasks=m["tasks"], status=status,
               code=int(code.group(1)) if code else None, text=what)


_BANNERS: tuple[tuple[LineFormat, _Builder], ...] = (
    (_banner_format("srtctl-banner-title", r"(?:\S+\s+)?(?:srtctl )?Sweep Orchestrator\s*$",
                    ["🚀 srtctl Sweep Orchestrator", "srtctl Sweep Orchestrator"], ("Sweep Orchestrator",)),
     _fixed("orchestrator_start")),
    (_banner_format("srtctl-banner-info",
                    r"(?P<key>Job ID|Config|Nodes|CPUs per node|GPUs per node|Container|Runtime config): "
                    r"(?P<value>.*)$",
                    ["Job ID: 1543570", "Container: /lustre/fsw/images/vllm-openai-nightly.sqsh"],
                    ("Job ID: ", "Config: ", "Nodes: ", "per node: ", "Container: ", "Runtime config: ")),
     _job_info),
    (_banner_format("srtctl-banner-time",
                    r"(?P<which>Start|End): (?P<text>\w{3} \w{3} +\d+ [\d:]+ (?P<tz>\S+) \d{4})",
                    ["End: Tue Apr 21 14:46:59 PDT 2026", "Start: Tue Apr 21 14:09:01 PDT 2026"],
                    ("Start: ", "End: ")),
     lambda m: _ev("banner_time", which=m["which"].lower(), text=m["text"], tz=m["tz"])),
    (_banner_format("srtctl-sweep-done", r"(?:✓\s*)?Sweep completed successfully",
                    ["✓ Sweep completed successfully", "Sweep completed successfully"], ("Sweep completed",)),
     _fixed("sweep_done")),
    (_banner_format("srtctl-sweep-failed", r"(?:✗\s*)?Sweep failed \(exit code:? (?P<code>-?\d+)\)",
                    ["✗ Sweep failed (exit code: 1)", "✗ Sweep failed (exit code: 143)"],
                    ("Sweep failed (exit code",)),
     lambda m: _ev("sweep_failed", code=int(m["code"]))),
    (_banner_format("srtctl-failure-process", _PROCESS_HEAD,
                    ["--- Process: decode_0_nodeC ---", "--- Process: prefill_3_gb200-r07-n13 ---"],
                    ("--- Process: ",)),
     _process("failure_process")),
    (_banner_format("srtctl-failure-tail", r"Last (?P<n>\d+) lines of log:",
                    ["Last 50 lines of log:", "Last 100 lines of log:"], (" lines of log:",)),
     lambda m: _ev("failure_tail", lines=int(m["n"]))),
    (_banner_format("srun-task-error",
                    r"srun: error: (?P<node>[^:\s]+): tasks? (?P<tasks>[\d,\-\[\]]+): (?P<what>.*)$",
                    ["srun: error: theia0043: task 0: Killed", "srun: error: theia0049: tasks 8-11: Killed",
                     "srun: error: nodeC: task 0: Exited with exit code 1"], ("srun: error: ",)),
     _srun),
)

BANNER_FORMATS: tuple[LineFormat, ...] = tuple(f for f, _ in _BANNERS)
_FAILURE_PROCESS_RX = re.compile(_PROCESS_HEAD)


def _apply(table: Iterable[tuple[LineFormat, _Builder]], text: str, line: int,
           ts: datetime | None) -> Lifecycle | None:
    for fmt, build in table:
        if not any(t in text for t in fmt.triggers):
            continue
        m = fmt.regex.match(text)
        if m is None:
            continue
        out = build(m)
        if out is not None:
            event, fields = out
            return Lifecycle(line, event, tuple(fields.items()), ts=ts)
    return None


def parse_lifecycle(msg: str, line: int, ts: datetime | None) -> Lifecycle | None:
    """The lifecycle event of one orchestrator message (head already split off), or None.

    Lines of the FAILURE DETAILS tail (the failing worker's own lines, indented two spaces) are
    never events.
    """
    if not msg or msg.startswith("  "):
        return None
    text = msg.rstrip()
    if text.startswith("--- Process:"):
        m = _FAILURE_PROCESS_RX.match(text)
        if m:
            event, fields = _process("failure_process")(m)
            return Lifecycle(line, event, tuple(fields.items()), ts=ts)
    return _apply(_FORMATS, text, line, ts)


def parse_banner(text: str, line: int) -> Lifecycle | None:
    """The event of a head-less orchestrator line (job-script banner, final verdict, srun errors,
    FAILURE DETAILS process heads), or None. ``ts`` is None: these lines carry no time."""
    stripped = text.strip()
    if not stripped:
        return None
    return _apply(_BANNERS, stripped, line, None)


def _has(events: Sequence[Lifecycle], *names: str) -> bool:
    return any(e.event in names for e in events)


_STAGE_OF_EVENT = {
    "healthy": "benchmarking", "benchmark_start": "benchmarking", "benchmark_manual": "benchmarking",
    "health_poll": "awaiting-workers", "not_ready": "awaiting-workers", "health_wait": "awaiting-workers",
    "ready": "awaiting-workers",
    "frontend_start": "frontend",
    "workers_start": "workers", "worker_start": "workers", "workers_started": "workers",
    "infra_ready": "head-ready",
    "infra_start": "infra", "infra_skipped": "infra",
    "orchestrator_start": "starting", "job_id": "starting", "job_info": "starting",
}
_FAIL_EVENTS = ("benchmark_failed", "sweep_error", "sweep_failed", "process_exit", "health_failed",
                "failure_details", "monitor_failure")


def stage_of(events: Sequence[Lifecycle], slurm_state: str | None = None) -> str:
    """The lifecycle stage a run reached (one of :data:`STAGES`), as ``srtctl monitor`` decides it.

    Terminal first: a successful benchmark (or ``✓ Sweep completed``) → completed; a signal without
    success → killed; a failure marker (benchmark failed, ``Error during sweep``, ``Sweep failed``,
    and, beyond the monitor, a critical process exit or a health-check failure) → failed; ``Cleanup``
    alone → cleanup. Otherwise the newest in-progress marker wins. ``srun: error: ... Killed`` lines
    are the orchestrator's own teardown and never count. With ``slurm_state`` (squeue/sacct),
    TIMEOUT → timeout and an ended job still in progress → killed.
    """
    state = (slurm_state or "").upper()
    if state == "TIMEOUT":
        return "timeout"
    if _has(events, "benchmark_done", "sweep_done"):
        return "completed"
    if _has(events, "signal"):
        return "killed"
    if _has(events, *_FAIL_EVENTS):
        return "failed"
    if _has(events, "cleanup", "cleanup_processes"):
        return "cleanup"
    stage = "unknown"
    for ev in reversed(events):
        found = _STAGE_OF_EVENT.get(ev.event)
        if found:
            stage = found
            break
    active = ("RUNNING", "PENDING", "COMPLETING", "CONFIGURING")
    if state and state not in active and stage in IN_PROGRESS_STAGES:
        return "killed"
    return stage
