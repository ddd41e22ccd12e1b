"""The engine-adapter contract, per engine: every format an adapter declares is its own (tagged with its
engine, a namespaced name, two or more samples), and what its samples show picks that engine."""

from __future__ import annotations

from diag.parsers import engines
from diag.parsers.clean import logical_lines
from diag.parsers.formats import REGISTRY, LineFormat
from diag.parsers.headers import parse_header


def declared(name: str) -> list[LineFormat]:
    engines.adapters()
    return [f for f in REGISTRY.values() if f.engine == name]


def check_declarations(name: str) -> None:
    adapter = engines.get(name)
    assert adapter is not None and adapter.format_modules, name
    fmts = declared(name)
    assert fmts, f"{name} declares no line format"
    for fmt in fmts:
        assert fmt.name.startswith(f"{name}-"), fmt.name
        assert len(fmt.samples) >= 2, fmt.name
    owned = {f.__module__ for f in (fmt.parse for fmt in fmts) if f is not None}
    assert owned <= set(adapter.format_modules), owned - set(adapter.format_modules)


# ------------------------------------------------------------------ vLLM
def test_vllm_declarations() -> None:
    check_declarations("vllm")


def test_vllm_heads_parse_as_its_header_classes() -> None:
    """Every head vLLM declares parses its samples as a header class the registry maps back to vLLM."""
    vllm = engines.get("vllm")
    heads = [f for f in declared("vllm") if f.kind == "header"]
    assert {f.name for f in heads} >= {"vllm-record", "vllm-proc-line", "vllm-file-tag"}
    for fmt in heads:
        assert engines.by_header(fmt.emits) is vllm, fmt.name
        for sample in fmt.samples:
            assert parse_header(logical_lines(sample)[0][0]).cls == fmt.emits, sample


def test_vllm_samples_are_read_as_vllm() -> None:
    """A sample of a vLLM line under an engine's head is under vLLM's (other heads: UCX's, bare messages)."""
    vllm = engines.get("vllm")
    for fmt in declared("vllm"):
        for sample in fmt.samples:
            owner = engines.by_header(parse_header(logical_lines(sample)[0][0]).cls)
            assert owner in (None, vllm), (fmt.name, sample)


def test_vllm_evidence_picks_vllm() -> None:
    """A worker log's head holding vLLM's version lines tells vLLM from every other engine."""
    head = "\n".join(REGISTRY["vllm-version"].samples)
    assert engines.from_text(head) is engines.get("vllm"), head


def test_vllm_fast_paths_are_adapter_data() -> None:
    adapter = engines.get("vllm")
    assert adapter is not None
    assert {s.kind for s in adapter.columns} == {"stats", "kv_transfer"}
    assert all(s.literal and s.patterns and next(iter(s.groups)) == "md" for s in adapter.columns)
    assert adapter.plain_head and adapter.tz_probe and adapter.connector_paths
    assert adapter.role_from_text is not None
    assert adapter.role_from_text("KVTransferConfig(kv_connector='NixlConnector', kv_role='kv_producer')") == "prefill"
    assert adapter.role_from_text("'kv_role': 'kv_both'") is None
