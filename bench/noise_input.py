"""A noise-heavy srt-slurm run directory for the benchmark (``bench/run.py --input noise``).

The dense input of ``bench/run.py`` is one decode log in which about half the lines are stats lines.
Real run directories look different: most of their bytes are Dynamo's ANSI-coloured request
tracing, HTTP probe and access lines, NIXL/UCX chatter and vLLM DEBUG lines, and only a few
per cent are records. This module writes such a directory, deterministically (seeded, no other
randomness), and counts what it wrote:

    RUN/logs/gb200-r07-n12_frontend_0.out        Dynamo frontend: HTTP, request metrics, router (no records)
    RUN/logs/gb200-r07-n12_prefill_w0.out ...    four prefill workers (2 engines each): stats lines
    RUN/logs/gb200-r07-n13_prefill_w3.out
    RUN/logs/gb200-r07-n14_decode_w0.out         decode worker 0 spans two nodes (engines 0-3, 4-7)
    RUN/logs/gb200-r07-n15_decode_w0.out
    RUN/logs/gb200-r07-n16_decode_w1.out         decode worker 1 (engines 0-3)

Every file starts with the startup lines of the matching ``samples/runs/healthy`` log (moved to
the generated clock), so diag sees versions, flags, roles and KV capacity as in a real run. Then
the steady state runs in 10 s intervals, the same intervals in every file: each worker writes one
vLLM stats line per engine (``Engine 000: Avg prompt throughput: ...``), each decode node one
NIXL ``KV Transfer metrics: ...`` line, and every file ~14-16 noise lines per record around them.
About 6 % of all lines are records. Values follow a slow load curve per endpoint; timestamps
advance by 10 s per interval from 2026-03-02 (no year wrap).

The line formats are those of ``samples/make_samples.py`` (copied, not imported) and
/work/shared/FORMATS.md. No line holds two records and no record is torn, so every count below is
exact: stats records = lines holding ``Avg prompt throughput``; KV-transfer records = lines
holding ``KV Transfer metrics``.
"""

from __future__ import annotations

import calendar
import os
import random
import re
import time
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEALTHY = ROOT / "samples" / "runs" / "healthy" / "logs"
START = calendar.timegm((2026, 3, 2, 0, 0, 0))  # where the (moved) startup lines begin (UTC)
INTERVAL = 10                                    # VLLM_LOG_STATS_INTERVAL
STATS_LIT = "Avg prompt throughput"
KV_LIT = "KV Transfer metrics"
KV_USAGE_RX = re.compile(r"GPU KV cache usage: ([0-9.]+)%")
XFER_RX = re.compile(r"KV Transfer metrics: Num successful transfers=(\d+)")


@dataclass(frozen=True)
class Spec:
    """One log file of the run directory."""

    name: str             # file name under logs/
    role: str             # prefill | decode | frontend
    node: str
    ip: str
    header_from: str      # the healthy sample log whose startup lines open this file
    engines: tuple[int, ...] = ()
    kv_line: bool = False  # a decode node's API server logs the NIXL metrics each interval
    noise_mean: int = 30   # noise lines per 10 s interval (mean)
    pid: int = 5000
    replace: tuple[tuple[str, str], ...] = ()  # text substitutions in the copied header


SPECS: tuple[Spec, ...] = (
    Spec("gb200-r07-n12_frontend_0.out", "frontend", "gb200-r07-n12", "10.0.7.12", "gb200-r07-n12_frontend_0.out",
         noise_mean=62, pid=3100),
    Spec("gb200-r07-n12_prefill_w0.out", "prefill", "gb200-r07-n12", "10.0.7.12", "gb200-r07-n12_prefill_w0.out",
         (0, 1), noise_mean=28, pid=5899),
    Spec("gb200-r07-n12_prefill_w1.out", "prefill", "gb200-r07-n12", "10.0.7.12", "gb200-r07-n12_prefill_w1.out",
         (0, 1), noise_mean=28, pid=5931),
    Spec("gb200-r07-n13_prefill_w2.out", "prefill", "gb200-r07-n13", "10.0.7.13", "gb200-r07-n13_prefill_w2.out",
         (0, 1), noise_mean=28, pid=5876),
    Spec("gb200-r07-n13_prefill_w3.out", "prefill", "gb200-r07-n13", "10.0.7.13", "gb200-r07-n13_prefill_w3.out",
         (0, 1), noise_mean=28, pid=5902),
    Spec("gb200-r07-n14_decode_w0.out", "decode", "gb200-r07-n14", "10.0.7.14", "gb200-r07-n14_decode_w0.out",
         (0, 1, 2, 3), kv_line=True, noise_mean=72, pid=4874),
    Spec("gb200-r07-n15_decode_w0.out", "decode", "gb200-r07-n15", "10.0.7.15", "gb200-r07-n15_decode_w0.out",
         (4, 5, 6, 7), kv_line=True, noise_mean=72, pid=7512),
    Spec("gb200-r07-n16_decode_w1.out", "decode", "gb200-r07-n16", "10.0.7.16", "gb200-r07-n14_decode_w0.out",
         (0, 1, 2, 3), kv_line=True, noise_mean=72, pid=4931,
         replace=(("gb200-r07-n14", "gb200-r07-n16"), ("10.0.7.14", "10.0.7.16"),
                  ("6190d680-4ac3-453d-a847-ba9e31bfa7aa", "9a3c51e2-07d4-4b8e-9f61-2d5c0b7e4a13"))),
)


@dataclass
class FileTruth:
    """What the generator wrote into one file, counted as it wrote it (not by any measured method)."""

    name: str
    role: str
    bytes: int = 0
    lines: int = 0
    header_lines: int = 0
    stats: int = 0           # stats records (= lines holding the stats literal)
    kv_lines: int = 0        # NIXL "KV Transfer metrics" records
    kv_usage_sum: float = 0.0
    gen_sum: float = 0.0
    xfer_ok_sum: int = 0     # sum of "Num successful transfers"
    intervals: int = 0


@dataclass
class NoiseTruth:
    files: list[FileTruth] = field(default_factory=list)
    intervals: int = 0
    first_ts: str = ""
    last_ts: str = ""
    year: int = 2026

    def total(self, key: str) -> float:
        return sum(getattr(f, key) for f in self.files)

    @property
    def bytes(self) -> int:
        return int(self.total("bytes"))

    @property
    def lines(self) -> int:
        return int(self.total("lines"))

    @property
    def records(self) -> int:
        return int(self.total("stats") + self.total("kv_lines"))

    def by_endpoint(self) -> dict[str, dict[str, float]]:
        """Per diag endpoint id (``prefill-w0`` ...): the files of a multi-node worker add up."""
        out: dict[str, dict[str, float]] = {}
        for f in self.files:
            m = re.match(r".+_(prefill|decode)_w(\d+)\.out$", f.name)
            if not m:
                continue
            d = out.setdefault(f"{m[1]}-w{m[2]}", {"stats": 0, "kv_lines": 0, "kv_usage_sum": 0.0,
                                                   "xfer_ok_sum": 0})
            for k in d:
                d[k] += getattr(f, k)
        return out

    def to_dict(self) -> dict:
        return {"files": [asdict(f) for f in self.files], "intervals": self.intervals, "first_ts": self.first_ts,
                "last_ts": self.last_ts, "bytes": self.bytes, "lines": self.lines, "records": self.records}


# --------------------------------------------------------------------------------------------
# The startup lines, moved from the healthy sample's clock to START
# --------------------------------------------------------------------------------------------

_ISO = re.compile(r"(?<!\d)(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)")
_MD = re.compile(r"(?<![\d-])(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?!\d)")


def _header(spec: Spec) -> tuple[str, int, int]:
    """The sample log's lines before its steady state (the first stats line, or for the frontend the
    first request), moved so that the sample's first line lands on START. Returns the text, its
    line count and the last second it mentions."""
    text = (HEALTHY / spec.header_from).read_bytes().decode("utf-8")
    stop = "metrics: request received" if spec.role == "frontend" else STATS_LIT
    lines = text.split("\n")
    n = next(i for i, ln in enumerate(lines) if stop in ln)
    head = "\n".join(lines[:n]) + "\n"
    for a, b in spec.replace:
        head = head.replace(a, b)
    m = _ISO.search(head)
    assert m, spec.header_from
    y0 = int(m[1])
    t0 = calendar.timegm(tuple(int(x) for x in m.groups()))  # type: ignore[arg-type]
    delta = START - t0
    last = [START]

    def iso(mm: re.Match[str]) -> str:
        t = calendar.timegm(tuple(int(x) for x in mm.groups())) + delta  # type: ignore[arg-type]
        last[0] = max(last[0], t)
        g = time.gmtime(t)
        return f"{g.tm_year:04d}-{g.tm_mon:02d}-{g.tm_mday:02d}T{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d}"

    def md(mm: re.Match[str]) -> str:
        mo, d, hh, mi, ss = (int(x) for x in mm.groups())
        t = calendar.timegm((y0, mo, d, hh, mi, ss)) + delta
        last[0] = max(last[0], t)
        g = time.gmtime(t)
        return f"{g.tm_mon:02d}-{g.tm_mday:02d} {g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d}"

    head = _MD.sub(md, _ISO.sub(iso, head))
    return head, n, last[0]


# --------------------------------------------------------------------------------------------
# Line formats (as in samples/make_samples.py)
# --------------------------------------------------------------------------------------------

_COL = {"DEBUG": "34", "INFO": "32", "WARN": "33"}
PUSH = "dynamo_runtime::pipeline::network::ingress::push_handler"
METRICS = "http-request: dynamo_llm::http::service::metrics"
SERVICE = "http-request: dynamo_llm::http::service::service_v2"
SELECTOR = "dynamo_llm::kv_router::scheduling::selector"


class _Stamp:
    """Timestamp strings, cached per second (many lines share one)."""

    def __init__(self) -> None:
        self._sec: dict[int, tuple[str, str]] = {}

    def _get(self, s: int) -> tuple[str, str]:
        got = self._sec.get(s)
        if got is None:
            g = time.gmtime(s)
            got = (f"{g.tm_year:04d}-{g.tm_mon:02d}-{g.tm_mday:02d}T{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d}",
                   f"{g.tm_mon:02d}-{g.tm_mday:02d} {g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d}")
            if len(self._sec) > 64:
                self._sec.clear()
            self._sec[s] = got
        return got

    def iso_us(self, us: int) -> str:
        return f"{self._get(us // 1_000_000)[0]}.{us % 1_000_000:06d}Z"

    def iso_ms(self, us: int) -> str:
        return f"{self._get(us // 1_000_000)[0]}.{us // 1000 % 1000:03d}Z"

    def md(self, us: int) -> str:
        return self._get(us // 1_000_000)[1]


def _rust(ts: str, level: str, target: str, msg: str, fields: tuple[tuple[str, object], ...] = ()) -> str:
    fs = "".join(f" \x1b[3m{k}\x1b[0m\x1b[2m=\x1b[0m{v}" for k, v in fields)
    return f"\x1b[2m{ts}\x1b[0m \x1b[{_COL[level]}m{level:>5}\x1b[0m \x1b[2m{target}\x1b[0m\x1b[2m:\x1b[0m {msg}{fs}"


def _uid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


def _stats_msg(e: int, p: float, g: float, run: int, wait: int, kv: float, ext: float | None) -> str:
    s = (f"Engine {e:03d}: Avg prompt throughput: {p:.1f} tokens/s, Avg generation throughput: {g:.1f} tokens/s, "
         f"Running: {run} reqs, Waiting: {wait} reqs, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%")
    return s + (f", External prefix cache hit rate: {ext:.1f}%" if ext is not None else "")


def _kv_msg(rng: random.Random, ok: int) -> str:
    x, mb = rng.uniform(31, 58), rng.uniform(88, 104)
    return (f"KV Transfer metrics: Num successful transfers={ok}, Avg xfer time (ms)={x:.3f}, "
            f"P90 xfer time (ms)={x * 1.43:.3f}, Avg post time (ms)={rng.uniform(0.6, 1.2):.3f}, "
            f"P90 post time (ms)={rng.uniform(1.3, 2.4):.3f}, Avg MB per transfer={mb:.3f}, "
            f"Throughput (MB/s)={mb / x * 1000:.3f}, Avg number of descriptors={rng.uniform(1640, 1660):.1f}")


class _Writer:
    """The steady state of one file: ``interval(base_us)`` returns that interval's text."""

    def __init__(self, spec: Spec, seed: int) -> None:
        self.s = spec
        self.rng = random.Random(f"diag-bench-noise:{seed}:{spec.name}")
        self.st = _Stamp()
        self.truth = FileTruth(spec.name, spec.role)
        self.load = 0.7
        self.pending: deque[tuple[str, str, int]] = deque()   # open requests: (request id, x-request id, start us)
        self.wpids = [spec.pid + 40 + 17 * k for k in range(len(spec.engines))]
        self.peer = [f"10.0.7.{n}" for n in (12, 13, 14, 15, 16)]
        kinds = {
            "prefill": (("rx", 9), ("done", 9), ("py", 3), ("nixl", 3), ("ucx", 1), ("access", 1), ("sys", 1),
                        ("pub", 1)),
            "decode": (("rx", 14), ("done", 14), ("py", 6), ("nixl", 20), ("ucx", 3), ("sel", 6), ("access", 1),
                       ("sys", 1), ("pub", 7)),
            "frontend": (("frx", 18), ("fdone", 18), ("sel", 12), ("probe", 3), ("post", 8), ("fsys", 3)),
        }[spec.role]
        self.kinds = [k for k, w in kinds for _ in range(w)]

    # one noise line of the given kind at time us
    def noise(self, kind: str, us: int) -> str:
        rng, st, s = self.rng, self.st, self.s
        if kind == "rx" or (kind == "done" and not self.pending):
            rid = _uid(rng)
            self.pending.append((rid, "", us))
            return _rust(st.iso_us(us), "INFO", PUSH, "request received",
                         (("request_id", rid), ("component", s.role), ("endpoint", "generate")))
        if kind == "done":
            rid, _, t1 = self.pending.popleft()
            return _rust(st.iso_us(us), "INFO", PUSH, "request completed",
                         (("request_id", rid), ("component", s.role), ("endpoint", "generate"),
                          ("elapsed_ms", max(1, (us - t1) // 1000))))
        if kind == "py":
            return (f"\x1b[2m{st.iso_ms(us)}\x1b[0m \x1b[34mDEBUG\x1b[0m \x1b[2mhandlers.generate\x1b[0m"
                    f"\x1b[2m:\x1b[0m New Request ID: {_uid(rng)}")
        if kind == "nixl":
            k = rng.randrange(len(s.engines))
            e = s.engines[k]
            if rng.random() < 0.7:
                msg = (f"Rank {e}, get_finished: {rng.randint(0, 3)} requests done sending and "
                       f"{rng.randint(0, 4)} requests done recving")
                src = "worker.py:1602"
            else:
                msg = (f"Remote agent {_uid(rng)}_dp{rng.randint(0, 1)} available, "
                       f"{rng.randint(48, 64)} descriptors, handshake took {rng.uniform(0.4, 3.0):.3f} ms")
                src = "worker.py:1011"
            return f"(Worker_DP{e}_EP{e} pid={self.wpids[k]}) DEBUG {st.md(us)} [{src}] {msg}"
        if kind == "ucx":
            k = rng.randrange(len(s.engines))
            dev = rng.choice((1, 3, 5, 7))
            return (f"[{us // 1_000_000}.{us % 1_000_000:06d}] [{s.node}:{self.wpids[k]}:0]     ucp_worker.c:1888 "
                    f"UCX  INFO    ep_cfg[{rng.randint(2, 40)}]: tag(rc_mlx5/mlx5_{dev}:1); rma(rc_mlx5/mlx5_{dev}:1 "
                    f"cuda_ipc/cuda); am(rc_mlx5/mlx5_{dev}:1); wireup(rc_mlx5/mlx5_{dev}:1 tcp/eth0)")
        if kind == "access":
            return (f"(APIServer pid={s.pid}) INFO:     {rng.choice(self.peer)}:{rng.randint(32768, 60999)} - "
                    f"\"GET /metrics HTTP/1.1\" 200 OK")
        if kind == "sys":
            return _rust(st.iso_us(us), "INFO", "http-request: dynamo_runtime::system_status_server",
                         "http response sent", (("method", "GET"), ("uri", "/metrics"), ("status", 200),
                                                ("latency_ms", rng.randint(0, 3))))
        if kind == "pub":
            return _rust(st.iso_us(us), "DEBUG", "dynamo_llm::kv_router::publisher",
                         f"published {rng.randint(1, 24)} KV cache events",
                         (("worker_id", 1481490862914688 + self.s.pid), ("dp_rank", rng.choice(s.engines))))
        if kind == "sel":
            wt = "decode" if s.role == "frontend" and rng.random() < 0.5 else "prefill"
            return _rust(st.iso_us(us), "INFO", SELECTOR,
                         f"Selected worker: worker_type={wt}, worker_id={rng.getrandbits(52)}, "
                         f"dp_rank={rng.randint(0, 7 if wt == 'decode' else 1)}, logit={-rng.random():.3f}, "
                         f"cached_blocks=0, tree_size=0, total_blocks={1629 if wt == 'decode' else 1536}")
        if kind == "frx" or (kind == "fdone" and not self.pending):
            rid, xid = _uid(rng), _uid(rng)
            self.pending.append((rid, xid, us))
            return _rust(st.iso_us(us), "INFO", METRICS, "metrics: request received",
                         (("request_id", rid), ("x_request_id", xid), ("input_tokens", rng.randint(6554, 8192))))
        if kind == "fdone":
            rid, xid, t1 = self.pending.popleft()
            el = (us - t1) / 1000
            return _rust(st.iso_us(us), "INFO", METRICS, "metrics: request completed",
                         (("request_id", rid), ("x_request_id", xid), ("ttft_ms", f"{rng.uniform(300, 1500):.1f}"),
                          ("elapsed_ms", f"{el:.1f}"), ("output_tokens", rng.randint(819, 1024)),
                          ("avg_itl_ms", f"{rng.uniform(40, 70):.2f}"), ("status", "success"),
                          ("prefill_worker_id", 3654582160151421), ("decode_worker_id", 1481490862914688)))
        if kind == "probe":
            uri = rng.choice(("/health", "/metrics", "/metrics"))
            return _rust(st.iso_us(us), "INFO", SERVICE, "http response sent",
                         (("method", "GET"), ("uri", uri), ("status", 200), ("latency_ms", 0)))
        if kind == "post":
            return _rust(st.iso_us(us), "INFO", SERVICE, "http response sent",
                         (("method", "POST"), ("uri", "/v1/completions"), ("status", 200),
                          ("latency_ms", rng.randint(30000, 90000))))
        # fsys: the frontend's own runtime chatter
        return _rust(st.iso_us(us), "DEBUG", "dynamo_runtime::pipeline::network::tcp::client",
                     f"connection pool: {rng.randint(8, 64)} idle, {rng.randint(0, 12)} in use",
                     (("peer", f"{rng.choice(self.peer)}:{rng.randint(30000, 40000)}"),))

    def records(self, base_us: int) -> list[str]:
        """The API server's lines at the interval boundary: one stats line per engine, then NIXL."""
        s, rng, t, st = self.s, self.rng, self.truth, self.st
        if s.role == "frontend":
            return []
        # a slow random walk of the offered load, per file
        self.load = min(1.0, max(0.25, self.load + rng.gauss(0, 0.015)))
        ld = self.load
        out = []
        md = st.md(base_us)
        for e in s.engines:
            if s.role == "prefill":
                p = round(11800 * ld * (1 + rng.gauss(0, 0.05)), 1)
                g = round(1.5 * ld * (1 + rng.gauss(0, 0.2)), 1)
                run = min(3, max(1, round(p / 6000)))
                wait = rng.randint(0, 4)
                kv = round((run + rng.randint(2, 9)) * 0.5, 1)
                ext = None
            else:
                p = 0.0
                run = max(1, int(95 * ld * (1 + rng.gauss(0, 0.03))))
                g = round(1500 * ld * (1 + rng.gauss(0, 0.04)), 1)
                wait = rng.randint(0, 1)
                kv = round(min(99.9, run * 0.46 * (1 + rng.gauss(0, 0.02))), 1)
                ext = 99.9
            out.append(f"(APIServer pid={s.pid}) INFO {md} [loggers.py:271] "
                       + _stats_msg(e, p, g, run, wait, kv, ext))
            t.stats += 1
            t.kv_usage_sum += kv
            t.gen_sum += g
        if s.kv_line:
            ok = max(1, int(66 * ld * rng.uniform(0.85, 1.1)))
            out.append(f"(APIServer pid={s.pid}) INFO {md} [metrics.py:121] " + _kv_msg(rng, ok))
            t.kv_lines += 1
            t.xfer_ok_sum += ok
        return out

    def interval(self, base_us: int) -> str:
        rng = self.rng
        lines = self.records(base_us)
        n = max(0, self.s.noise_mean + rng.randint(-5, 5))
        offs = sorted(rng.randrange(1000, INTERVAL * 1_000_000) for _ in range(n))
        kinds = self.kinds
        for off in offs:
            lines.append(self.noise(kinds[rng.randrange(len(kinds))], base_us + off))
        self.truth.lines += len(lines)
        self.truth.intervals += 1
        return "\n".join(lines) + "\n"


def _write_file(spec: Spec, path: str, seed: int, base: int, intervals: int) -> FileTruth:
    head, n_head, _ = _header(spec)
    w = _Writer(spec, seed)
    t = w.truth
    t.header_lines = n_head
    t.lines = n_head
    t.stats += head.count(STATS_LIT)
    t.kv_lines += head.count(KV_LIT)
    nbytes = 0
    with open(path, "wb") as out:
        data = head.encode()
        out.write(data)
        nbytes += len(data)
        buf: list[str] = []
        pending = 0
        for k in range(intervals):
            text = w.interval((base + k * INTERVAL) * 1_000_000)
            buf.append(text)
            pending += len(text)
            if pending >= 8 << 20:
                data = "".join(buf).encode()
                out.write(data)
                nbytes += len(data)
                buf, pending = [], 0
        data = "".join(buf).encode()
        out.write(data)
        nbytes += len(data)
    t.bytes = nbytes
    return t


def _bytes_per_interval(spec: Spec, seed: int, base: int, n: int = 120) -> float:
    w = _Writer(spec, seed)
    return sum(len(w.interval((base + k * INTERVAL) * 1_000_000)) for k in range(n)) / n


def build_noise_run(run_dir: Path, size_mb: float, seed: int, log=print, jobs: int | None = None) -> NoiseTruth:
    """Write RUN_DIR/logs/*.out (8 files, ~size_mb MB in all) and return what was written."""
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    heads = [_header(s) for s in SPECS]
    # the steady state starts on a 10 s boundary after every file's startup lines
    base = -(-(max(h[2] for h in heads) + 5) // INTERVAL) * INTERVAL
    head_bytes = sum(len(h[0].encode()) for h in heads)
    per = sum(_bytes_per_interval(s, seed, base) for s in SPECS)  # a deterministic pilot of each file's mix
    intervals = max(1, int((size_mb * 1_000_000 - head_bytes) / per))
    jobs = jobs or max(1, min(len(SPECS), os.cpu_count() or 1))
    with ProcessPoolExecutor(max_workers=jobs) as ex:
        futs = [ex.submit(_write_file, s, str(logs / s.name), seed, base, intervals) for s in SPECS]
        files = [f.result() for f in futs]
    truth = NoiseTruth(files, intervals, year=time.gmtime(START).tm_year)
    truth.first_ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(START))
    truth.last_ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(base + (intervals - 1) * INTERVAL + 10))
    recs = truth.records
    log(f"built {run_dir}: {len(files)} files, {truth.bytes / 1e6:,.0f} MB, {truth.lines:,} lines, "
        f"{recs:,} records ({100 * recs / truth.lines:.1f} % of lines: {int(truth.total('stats')):,} stats, "
        f"{int(truth.total('kv_lines')):,} KV-transfer), {intervals:,} intervals of 10 s "
        f"({intervals * INTERVAL / 86400:.1f} days) from {truth.first_ts}")
    return truth


if __name__ == "__main__":  # python bench/noise_input.py DIR [MB] [SEED]: just build it
    import json
    import sys

    d = Path(sys.argv[1])
    tr = build_noise_run(d, float(sys.argv[2]) if len(sys.argv) > 2 else 100, int(sys.argv[3]) if len(sys.argv) > 3
                         else 1)
    print(json.dumps(tr.to_dict(), indent=1))
