"""Python repr grammar for vLLM's ``non-default args: {...}`` and similar config dumps."""

from __future__ import annotations

import math

import pytest

from diag.parsers.pyrepr import parse_pyrepr

PREFILL_ARGS = (
    "{'model_tag': '/model', 'model': '/model', 'served_model_name': ['nvidia/Qwen3.5-397B-A17B-NVFP4'], "
    "'trust_remote_code': True, 'max_model_len': 9416, 'enable_prefix_caching': False, "
    "'data_parallel_size': 2, 'data_parallel_size_local': 2, 'data_parallel_start_rank': 0, "
    "'enable_expert_parallel': True, 'gpu_memory_utilization': 0.85, 'kv_cache_dtype': 'fp8', "
    "'mamba_ssm_cache_dtype': 'bfloat16', 'max_num_batched_tokens': 16384, 'max_num_seqs': 16, "
    "'async_scheduling': True, 'stream_interval': 100, 'api_server_count': 1, "
    "'kv_transfer_config': KVTransferConfig(kv_connector='NixlConnector', "
    "engine_id='3f2c9a1e-4b7d-4e0f-9a55-0d1c2b3a4f5e', kv_buffer_device='cuda', kv_buffer_size=1000000000.0, "
    "kv_role='kv_producer', kv_rank=None, kv_parallel_size=1, kv_ip='127.0.0.1', kv_port=14579, "
    "kv_connector_extra_config={'backends': ['UCX']}, kv_connector_module_path=None, "
    "enable_permute_local_kv=False, kv_load_failure_policy='fail'), "
    "'compilation_config': {'level': None, 'mode': <CompilationMode.VLLM_COMPILE: 3>, "
    "'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, "
    "'cudagraph_capture_sizes': [1, 2, 4, 8, 16], "
    "'max_cudagraph_capture_size': 640, 'pass_config': {}, 'custom_ops': ['none'], "
    "'compile_sizes': [], 'inductor_compile_config': {'enable_auto_functionalized_v2': False}}}"
)


def test_prefill_non_default_args() -> None:
    args = parse_pyrepr(PREFILL_ARGS)
    assert args["served_model_name"] == ["nvidia/Qwen3.5-397B-A17B-NVFP4"]
    assert args["max_num_batched_tokens"] == 16384 and isinstance(args["max_num_batched_tokens"], int)
    assert args["gpu_memory_utilization"] == 0.85
    assert args["async_scheduling"] is True and args["enable_prefix_caching"] is False
    kv = args["kv_transfer_config"]
    assert kv["__class__"] == "KVTransferConfig"
    assert (kv["kv_connector"], kv["kv_role"], kv["kv_rank"], kv["kv_buffer_size"]) == (
        "NixlConnector",
        "kv_producer",
        None,
        1e9,
    )
    assert kv["kv_connector_extra_config"] == {"backends": ["UCX"]}
    assert kv["kv_load_failure_policy"] == "fail"
    cc = args["compilation_config"]
    assert cc["mode"] == "CompilationMode.VLLM_COMPILE"
    assert cc["cudagraph_mode"] == "CUDAGraphMode.FULL_AND_PIECEWISE"
    assert cc["cudagraph_capture_sizes"] == [1, 2, 4, 8, 16] and cc["max_cudagraph_capture_size"] == 640
    assert cc["compile_sizes"] == [] and cc["pass_config"] == {} and cc["level"] is None


def test_decode_args_with_lora_paths_and_speculative() -> None:
    text = (
        "{'model': '/model', 'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 3}, "
        "'lora_modules': [LoRAModulePath(name='risky', path='org/risky', base_model_name=None)], "
        "'download_dir': PosixPath('/lustre/hf'), 'dtype': torch.bfloat16, 'seed': -1, "
        "'hf_overrides': {'architectures': ['Qwen3VLForSequenceClassification'], 'is_original': True}, "
        "'allowed_origins': {'*'}, 'disabled': set(), 'swap_space': 4, 'rope_theta': 1e6, "
        "'limit_mm_per_prompt': {'image': 0}, 'long_prefill_token_threshold': 0,}"
    )
    args = parse_pyrepr(text)
    assert args["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 3}
    assert args["lora_modules"] == [
        {"__class__": "LoRAModulePath", "name": "risky", "path": "org/risky", "base_model_name": None}
    ]
    assert args["download_dir"] == "/lustre/hf"
    assert args["dtype"] == "torch.bfloat16"  # unknown bare token → string
    assert args["seed"] == -1 and args["rope_theta"] == 1_000_000.0
    assert args["allowed_origins"] == {"*"} and args["disabled"] == set()
    assert args["hf_overrides"]["is_original"] is True


def test_scalars_and_strings() -> None:
    assert parse_pyrepr("[inf, -inf, 1.5e-3, 0x10]") == [math.inf, -math.inf, 0.0015, "0x10"]
    assert math.isnan(parse_pyrepr("nan"))
    assert parse_pyrepr("(2, 1)") == (2, 1)
    assert parse_pyrepr("(7,)") == (7,)
    assert parse_pyrepr("(7)") == 7
    assert parse_pyrepr("()") == ()
    assert parse_pyrepr(r"""'it\'s a "quote"\n'""") == 'it\'s a "quote"\n'
    assert parse_pyrepr('"double \\"quoted\\" \\u00e9"') == 'double "quoted" é'
    assert parse_pyrepr("{',': ':', 'k': '{not a dict}'}") == {",": ":", "k": "{not a dict}"}
    assert (
        parse_pyrepr("<function default_collate at 0x7f2a1c3b5e50>")
        == "function default_collate at 0x7f2a1c3b5e50"
    )
    assert parse_pyrepr("{1: 'a', (1, 2): 'b', None: 'c'}") == {1: "a", (1, 2): "b", None: "c"}
    assert parse_pyrepr("{'score': np.float64(0.951), 'n': np.int64(1319)}") == {"score": 0.951, "n": 1319}
    assert parse_pyrepr("Foo('pos', 2, flag=True)") == {
        "__class__": "Foo",
        "__args__": ["pos", 2],
        "flag": True,
    }
    assert parse_pyrepr("auto") == "auto"


def test_elided_pastes() -> None:
    # pasted logs sometimes elide entries with "..."
    assert parse_pyrepr("{'model': '...', 'tensor_parallel_size': 2, ...}") == {
        "model": "...",
        "tensor_parallel_size": 2,
    }
    assert parse_pyrepr(
        "KVTransferConfig(kv_connector='OffloadingConnector', ..., kv_role='kv_both', ...)"
    ) == {"__class__": "KVTransferConfig", "kv_connector": "OffloadingConnector", "kv_role": "kv_both"}
    assert parse_pyrepr("[1, 2, ...]") == [1, 2, "..."]


@pytest.mark.parametrize(
    "bad",
    ["", "   ", "{'a': 1", "{'a' 1}", "[1,,2]", "KVTransferConfig(kv_role=)", "{'a': 1}}", "'unterminated"],
)
def test_errors_are_one_line_value_errors(bad: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_pyrepr(bad)
    msg = str(e.value)
    assert msg.startswith("pyrepr:") and "\n" not in msg


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    with pytest.raises(ValueError):
        parse_pyrepr("[" * 5000 + "]" * 5000)
