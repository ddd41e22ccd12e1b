"""Job metadata: srtctl's ``<jobid>.json``, GPU counting from a ``resources`` mapping, and the
worker environment dump (``Env: K=V ...``) the orchestrator logs.

GPU counting follows srtctl's schema (srt-dynamo.md §1.2, §2.1): *working* GPUs are
``prefill_workers*gpus_per_prefill + decode_workers*gpus_per_decode`` (what sa-bench puts in the
result file name and divides TPS by), *allocated* GPUs are ``nodes*gpus_per_node`` (the roll-up's
``Total GPU Count``). Odd prefill counts leave GPUs idle, so the two differ.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jsonfile import read_json

__all__ = ["JobMeta", "JobMetaError", "gpu_counts", "parse_env", "read_job_json"]

DEFAULT_GPUS_PER_NODE = 4   # srtctl ResourceConfig default


class JobMetaError(ValueError):
    """A ``<jobid>.json`` that cannot be read or is not job metadata."""


@dataclass(frozen=True)
class JobMeta:
    """The fields of srtctl's job metadata JSON (version 2.0) that diag uses."""

    job_id: str | None
    job_name: str | None
    generated_at: str | None = None
    model_path: str | None = None
    container: str | None = None
    precision: str | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    backend_type: str | None = None
    frontend_type: str | None = None
    benchmark_type: str | None = None
    isl: int | None = None
    osl: int | None = None
    tags: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def gpu_counts(self) -> dict[str, Any]:
        return gpu_counts(self.resources)


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def read_job_json(path: str | Path) -> JobMeta:
    """Read ``outputs/<jobid>/<jobid>.json``; :class:`JobMetaError` (one line) when it is not one."""
    p, data = read_json(path, JobMetaError)
    if not isinstance(data, dict) or not any(k in data for k in ("job_id", "resources", "benchmark")):
        raise JobMetaError(f"{p.name}: not srtctl job metadata (no job_id/resources/benchmark)")
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    bench = data.get("benchmark") if isinstance(data.get("benchmark"), dict) else {}
    res = data.get("resources") if isinstance(data.get("resources"), dict) else {}
    tags = data.get("tags")
    return JobMeta(
        job_id=_str(data.get("job_id")) or (p.stem if p.stem.isdigit() else None),
        job_name=_str(data.get("job_name")),
        generated_at=_str(data.get("generated_at")),
        model_path=_str(model.get("path")),
        container=_str(model.get("container")),
        precision=_str(model.get("precision")),
        resources=dict(res),
        backend_type=_str(data.get("backend_type")),
        frontend_type=_str(data.get("frontend_type")),
        benchmark_type=_str(bench.get("type")),
        isl=_int(bench.get("isl")),
        osl=_int(bench.get("osl")),
        tags=tuple(str(t) for t in tags) if isinstance(tags, (list, tuple)) else (),
        raw=data,
    )


def gpu_counts(resources: Mapping[str, Any]) -> dict[str, Any]:
    """Per-role and total GPU counts of a job-JSON or recipe ``resources`` mapping.

    Keys: ``gpus_per_node``, ``{prefill,decode,agg}_workers``, ``gpus_per_{prefill,decode,agg}``
    (explicit, else derived like srtctl: ``nodes*gpus_per_node // workers``; ``decode_nodes: 0``
    shares prefill nodes and inherits ``gpus_per_prefill``), ``{prefill,decode,agg}_gpus``,
    ``working_gpus``, ``total_nodes``, ``allocated_gpus``, ``idle_gpus``, ``disaggregated``.
    """
    r = resources
    gpn = _int(r.get("gpus_per_node")) or DEFAULT_GPUS_PER_NODE
    pn, dn, an = _int(r.get("prefill_nodes")), _int(r.get("decode_nodes")), _int(r.get("agg_nodes"))
    pw, dw, aw = (_int(r.get(k)) or 0 for k in ("prefill_workers", "decode_workers", "agg_workers"))
    disagg = pn is not None or dn is not None

    gpp = _int(r.get("gpus_per_prefill")) or ((pn * gpn) // pw if pn and pw else gpn)
    gpd = _int(r.get("gpus_per_decode"))
    if not gpd:
        gpd = (dn * gpn) // dw if dn and dw else (gpp if dn == 0 and dw else gpn)
    gpa = _int(r.get("gpus_per_agg")) or ((an * gpn) // aw if an and aw else gpn)

    prefill_gpus, decode_gpus, agg_gpus = pw * gpp, dw * gpd, aw * gpa
    total_nodes = (pn or 0) + (dn or 0) if disagg else (an or 1)
    allocated = total_nodes * gpn
    working = prefill_gpus + decode_gpus if disagg else (agg_gpus or allocated)
    return {
        "gpus_per_node": gpn, "prefill_workers": pw, "decode_workers": dw, "agg_workers": aw,
        "gpus_per_prefill": gpp, "gpus_per_decode": gpd, "gpus_per_agg": gpa,
        "prefill_gpus": prefill_gpus, "decode_gpus": decode_gpus, "agg_gpus": agg_gpus,
        "working_gpus": working, "total_nodes": total_nodes, "allocated_gpus": allocated,
        "idle_gpus": max(0, allocated - working), "disaggregated": disagg,
    }


_ENV_KEY = re.compile(r"\s+([A-Za-z_][A-Za-z0-9_]*)=")
_ENV_UPPER = re.compile(r"[A-Z_][A-Z0-9_]*")


def parse_env(text: str) -> dict[str, str]:
    """Split srtctl's ``K=V K2=V2`` env dump (keys sorted, values unquoted, may hold spaces and ``=``).

    A ``<space>NAME=`` starts a new variable when NAME looks like an env var (upper case) or keeps
    the keys sorted; quoted values (``K="a b"``) are unquoted and never split.
    """
    env: dict[str, str] = {}
    s = " " + text.strip()
    pos = 0
    while pos < len(s):
        m = _ENV_KEY.match(s, pos)
        if not m:
            break
        key, vstart = m.group(1), m.end()
        if vstart < len(s) and s[vstart] in "\"'":
            end = _closing_quote(s, vstart)
            if end is not None:
                env[key] = _unquote(s[vstart:end + 1])
                pos = end + 1
                continue
        nxt = _next_key(s, vstart, key)
        env[key] = s[vstart:nxt]
        pos = nxt
    return env


def _closing_quote(s: str, start: int) -> int | None:
    q, i = s[start], start + 1
    while i < len(s):
        if s[i] == "\\" and q == '"':
            i += 2
            continue
        if s[i] == q and (i + 1 == len(s) or s[i + 1].isspace()):
            return i
        i += 1
    return None


def _unquote(tok: str) -> str:
    try:
        parts = shlex.split(tok)
    except ValueError:
        return tok
    return parts[0] if len(parts) == 1 else tok


def _next_key(s: str, start: int, key: str) -> int:
    for m in _ENV_KEY.finditer(s, start):
        cand = m.group(1)
        if _ENV_UPPER.fullmatch(cand) or cand >= key:
            return m.start()
    return len(s)
