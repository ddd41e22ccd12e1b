"""Run-directory layout (file kinds, roles) and job metadata (job JSON, GPU counting)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from diag.parsers.jobmeta import JobMetaError, gpu_counts, read_job_json
from diag.parsers.layout import KINDS, classify_path, role_from_content

CASES = [
    (
        "outputs/2752632/logs/slurm-gb300-133-181_prefill_w0.out",
        "worker",
        "prefill",
        0,
        "slurm-gb300-133-181",
    ),
    ("logs/gb200-r07-n13_decode_w12.out", "worker", "decode", 12, "gb200-r07-n13"),
    ("logs/node_with_underscores_agg_w1.out", "worker", "agg", 1, "node_with_underscores"),
    ("logs/theia0045_prefill_w3.err", "worker", "prefill", 3, "theia0045"),
    ("logs/gb200-r07-n12_frontend_0.out", "frontend", "frontend", 0, "gb200-r07-n12"),
    ("logs/nodeA_router_1.out", "frontend", "frontend", 1, "nodeA"),
    ("logs/fingerprint_decode_w0.json", "fingerprint", "decode", 0, None),
    ("logs/theia0045_config.json", "config-dump", None, None, "theia0045"),
]


@pytest.mark.parametrize(("path", "kind", "role", "index", "node"), CASES)
def test_role_files(path: str, kind: str, role: str | None, index: int | None, node: str | None) -> None:
    info = classify_path(Path(path))
    assert (info.kind, info.role, info.index, info.node) == (kind, role, index, node)
    assert info.path == Path(path)


def test_other_files() -> None:
    got = {
        p: classify_path(p)
        for p in (
            "outputs/1543570/logs/sweep_1543570.log",
            "slurm-1543570.out",
            "logs/benchmark.out",
            "logs/sa-bench_isl_8192_osl_1024/results_concurrency_4096_gpus_24_ctx_16_gen_8.json",
            "logs/sa-bench_isl_1024_osl_1024/concurrency_128.json",
            "logs/benchmark-rollup.json",
            "outputs/1543570/1543570.json",
            "outputs/1543570/config.yaml",
            "outputs/1543570/recipe.lock.yaml",
            "logs/raw_prometheus.jsonl",
            "logs/mooncake_store_config.json",
            "logs/nodeA_nginx.out",
            "logs/sa-bench_isl_8192_osl_1024/results_concurrency_64_gpus_18.pytorch.json",
            "logs/2752632_4P_1D_20251104_053143/log.out",
            "logs/infra.out",
        )
    }
    kinds = {p: (i.kind, i.job_id, i.concurrency) for p, i in got.items()}
    assert kinds == {
        "outputs/1543570/logs/sweep_1543570.log": ("orchestrator", "1543570", None),
        "slurm-1543570.out": ("orchestrator", "1543570", None),
        "logs/benchmark.out": ("benchmark", None, None),
        "logs/sa-bench_isl_8192_osl_1024/results_concurrency_4096_gpus_24_ctx_16_gen_8.json": (
            "sa-bench-result",
            None,
            4096,
        ),
        "logs/sa-bench_isl_1024_osl_1024/concurrency_128.json": ("sa-bench-result", None, 128),
        "logs/benchmark-rollup.json": ("rollup", None, None),
        "outputs/1543570/1543570.json": ("job-json", "1543570", None),
        "outputs/1543570/config.yaml": ("recipe", None, None),
        "outputs/1543570/recipe.lock.yaml": ("recipe", None, None),
        "logs/raw_prometheus.jsonl": ("prometheus-capture", None, None),
        "logs/mooncake_store_config.json": ("unknown", None, None),
        "logs/nodeA_nginx.out": ("unknown", None, None),
        "logs/sa-bench_isl_8192_osl_1024/results_concurrency_64_gpus_18.pytorch.json": (
            "unknown",
            None,
            None,
        ),
        "logs/2752632_4P_1D_20251104_053143/log.out": ("orchestrator", "2752632", None),
        "logs/infra.out": ("unknown", None, None),
    }
    assert {i.kind for i in got.values()} <= set(KINDS)


def test_role_from_content() -> None:
    prefill = (
        "2026-08-06T12:00:01.000Z  INFO dynamo_vllm.main: starting worker\n"
        "(APIServer pid=1) INFO 08-06 12:00:02 [utils.py:253] non-default args: {'model': '/model', "
        "'kv_transfer_config': KVTransferConfig(kv_connector='NixlConnector', engine_id='e1', "
        "kv_role='kv_producer', kv_load_failure_policy='fail')}\n"
    )
    assert role_from_content(prefill) == "prefill"
    assert (
        role_from_content(
            '--kv-transfer-config \'{"kv_connector": "NixlConnector", "kv_role": "kv_consumer"}\''
        )
        == "decode"
    )
    both = (
        "non-default args: {'kv_transfer_config': "
        "KVTransferConfig(kv_connector='NixlConnector', kv_role='kv_both')}"
    )
    assert role_from_content(both) is None
    assert (
        role_from_content(both + "\n+ python3 -m dynamo.vllm --model /model --disaggregation-mode decode")
        == "decode"
    )
    assert role_from_content("args: disaggregation_mode=<DisaggregationMode.PREFILL: 'prefill'>") == "prefill"
    assert role_from_content("python3 -m dynamo.vllm --model /m --is-prefill-worker") == "prefill"
    assert role_from_content("INFO 08-06 12:00:02 [core.py:95] Initializing a V1 LLM engine") is None


def test_gpu_counts_inline() -> None:
    five = {
        "gpu_type": "gb200",
        "gpus_per_node": 4,
        "prefill_nodes": 3,
        "prefill_workers": 5,
        "gpus_per_prefill": 2,
        "decode_nodes": 2,
        "decode_workers": 1,
        "gpus_per_decode": 8,
    }
    c = gpu_counts(five)
    assert (c["prefill_gpus"], c["decode_gpus"], c["working_gpus"], c["allocated_gpus"], c["idle_gpus"]) == (
        10,
        8,
        18,
        20,
        2,
    )
    # derived per-worker GPUs when not explicit: 2 nodes * 4 GPUs / 4 workers = 2; 2 * 4 / 1 = 8
    derived = gpu_counts(
        {"gpus_per_node": 4, "prefill_nodes": 2, "prefill_workers": 4, "decode_nodes": 2, "decode_workers": 1}
    )
    assert (
        derived["gpus_per_prefill"],
        derived["gpus_per_decode"],
        derived["working_gpus"],
        derived["allocated_gpus"],
    ) == (2, 8, 16, 16)
    # decode_nodes: 0 shares the prefill nodes and inherits gpus_per_prefill
    shared = gpu_counts(
        {"gpus_per_node": 8, "prefill_nodes": 1, "prefill_workers": 2, "decode_nodes": 0, "decode_workers": 2}
    )
    assert (shared["gpus_per_decode"], shared["working_gpus"], shared["allocated_gpus"]) == (4, 16, 8)
    # job-JSON style: explicit nulls for the unused role
    agg = gpu_counts(
        {
            "gpu_type": "b200",
            "gpus_per_node": 8,
            "prefill_nodes": None,
            "decode_nodes": None,
            "agg_nodes": 1,
            "agg_workers": 2,
            "gpus_per_agg": None,
            "prefill_workers": None,
        }
    )
    assert (agg["disaggregated"], agg["gpus_per_agg"], agg["working_gpus"], agg["allocated_gpus"]) == (
        False,
        4,
        8,
        8,
    )
    assert gpu_counts({})["allocated_gpus"] == 4


@pytest.mark.parametrize(
    ("n", "working", "allocated"), [(4, 16, 16), (5, 18, 20), (6, 20, 20), (7, 22, 24), (8, 24, 24)]
)
def test_gpu_counts_real_recipes(real_recipes: Path, n: int, working: int, allocated: int) -> None:
    """srt-dynamo.md §2.1: working GPUs (sa-bench gpus_<T>) vs allocated for NxDEP2-1xDEP8."""
    path = (
        real_recipes
        / f"srt-slurm-recipes__recipes__multi-node__Qwen3.5__GB200__8k1k__vllm__disagg__{n}xdep2-1xdep8.yaml"
    )
    resources = yaml.safe_load(path.read_text())["resources"]
    c = gpu_counts(resources)
    assert (c["working_gpus"], c["allocated_gpus"], c["prefill_gpus"], c["decode_gpus"]) == (
        working,
        allocated,
        2 * n,
        8,
    )


def test_read_job_json(tmp_path: Path) -> None:
    meta = {
        "version": "2.0",
        "job_id": "2752632",
        "job_name": "qwen35-5xdep2-1xdep8",
        "generated_at": "2026-08-06T12:00:00",
        "model": {
            "path": "/lustre/models/Qwen3.5-397B-A17B-NVFP4",
            "container": "vllm/vllm-openai:nightly-d223c900d85224c02f2162ee2c757a769e99f519",
            "precision": "fp4",
        },
        "resources": {
            "gpu_type": "gb200",
            "gpus_per_node": 4,
            "prefill_nodes": 3,
            "decode_nodes": 2,
            "agg_nodes": None,
            "prefill_workers": 5,
            "decode_workers": 1,
            "agg_workers": None,
            "gpus_per_prefill": 2,
            "gpus_per_decode": 8,
            "gpus_per_agg": 4,
        },
        "backend_type": "vllm",
        "frontend_type": "dynamo",
        "benchmark": {"type": "sa-bench", "isl": 8192, "osl": 1024},
        "tags": ["qwen35", "disagg"],
    }
    p = tmp_path / "2752632.json"
    p.write_text(json.dumps(meta))
    jm = read_job_json(p)
    assert (jm.job_id, jm.job_name, jm.precision, jm.backend_type, jm.frontend_type) == (
        "2752632",
        "qwen35-5xdep2-1xdep8",
        "fp4",
        "vllm",
        "dynamo",
    )
    assert jm.container.endswith("d223c900d85224c02f2162ee2c757a769e99f519")
    assert (jm.benchmark_type, jm.isl, jm.osl, jm.tags) == ("sa-bench", 8192, 1024, ("qwen35", "disagg"))
    assert jm.resources["prefill_workers"] == 5
    assert (jm.gpu_counts()["working_gpus"], jm.gpu_counts()["allocated_gpus"]) == (18, 20)

    meta["job_id"] = 2752633
    p.write_text(json.dumps(meta))
    assert read_job_json(p).job_id == "2752633"
    p.write_text('{"job_id": "1", "resources": ')
    with pytest.raises(JobMetaError, match="invalid JSON") as e:
        read_job_json(p)
    assert isinstance(e.value, ValueError) and "\n" not in str(e.value)
    p.write_text('{"runs": []}')
    with pytest.raises(JobMetaError, match="not srtctl job metadata"):
        read_job_json(p)
    with pytest.raises(JobMetaError, match="cannot read"):
        read_job_json(tmp_path / "missing.json")
