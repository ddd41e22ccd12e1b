"""`diag rules export --format prometheus`: a rule file promtool accepts, built from the catalog's data, and
`promtool test rules` on unit tests generated from every exported rule's own fire/pass examples."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from diag.rules.catalog import catalog
from diag.rules.examples import example_findings
from diag.rules.promrules import GROUPS, export, expressible
from diag.rules.promtests import prom_examples, unit_tests

from helpers import run_diag

ROOT = Path(__file__).resolve().parents[1]


def _diag(*args: str) -> subprocess.CompletedProcess[str]:
    return run_diag(*args)


def test_export_passes_promtool(tmp_path: Path) -> None:
    res = _diag("rules", "export", "--format", "prometheus")
    assert res.returncode == 0, res.stderr
    doc = yaml.safe_load(res.stdout)
    alerts = {r["labels"]["code"]: r for r in doc["groups"][1]["rules"]}
    assert set(alerts) == {"DIAG-B001", "DIAG-B002", "DIAG-B003", "DIAG-B004", "DIAG-K001", "DIAG-K002",
                           "DIAG-L001", "DIAG-E002", "DIAG-E003",
                           "verdict/invalid", "verdict/transfer-bound", "verdict/decode-bound"}
    assert alerts["verdict/invalid"]["expr"] == "diag:dynamo_request_errors:run_share > 0.05"  # failed_invalid_frac
    k001 = alerts["DIAG-K001"]
    # `for` 60 s of data: the first true evaluation already stands for one 10 s interval
    assert (k001["for"], k001["keep_firing_for"], k001["labels"]["severity"]) == ("50s", "60s", "error")
    assert "diag:vllm_kv_usage:endpoint_max_percent >= 95" in k001["expr"]
    assert alerts["DIAG-B001"]["labels"]["role"] == "prefill" and alerts["DIAG-B002"]["labels"]["role"] == "decode"
    assert "vllm:nixl_num_failed_transfers_total" in res.stdout and "vllm:nixl_num_kv_expired_reqs_total" in res.stdout
    assert "#   DIAG-K003 kv-capacity-below-concurrency: needs each engine's maximum concurrency" in res.stdout
    assert "$labels" in k001["annotations"]["description"] and "$value" in k001["annotations"]["description"]
    assert "# Not expressible in PromQL:\n#   DIAG-A001" in res.stdout
    record = {r["record"]: r["expr"] for r in doc["groups"][0]["rules"]}
    assert "vllm:gpu_cache_usage_perc" in record["diag:vllm_kv_usage:engine_percent"]  # the renamed metric too
    assert "prompt_tokens_by_source_total{source=\"local_compute\"}" in record["diag:vllm_prompt_tokens:engine_irate"]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package ships it)")
    (tmp_path / "rules.yml").write_text(res.stdout)
    check = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yml")], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_catalog_threshold_changes_the_export() -> None:
    k001 = catalog()["DIAG-K001"]
    assert "percent >= 90 " in export([k001.with_params({"kv_usage": 90})])
    assert "for: 110s" in export([k001.with_params({"for": 120})])
    b001 = catalog()["DIAG-B001"]
    assert "diag:vllm_waiting:role_avg{diag_role=\"prefill\"} >= 12" in export([b001.with_params({"waiting_high": 12})])
    one = _diag("rules", "export", "--format", "prometheus", "--select", "K002")
    assert one.returncode == 0 and one.stdout.count("alert:") == 1
    for args in (("rules", "--format", "prometheus"), ("rules", "nope"), ("rules", "export", "--format", "text"),
                 ("rules", "export", "--format", "prometheus", "--select", "Z9")):
        bad = _diag(*args)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (Debian's prometheus package ships it)")
    return found


def test_promtool_unit_tests_from_the_catalog_examples(tmp_path: Path) -> None:
    """Every example of every exported rule is a promtool test group: the alerts firing on its series
    are exactly the endpoints (or the run) diag's findings name on the same example."""
    rules = list(catalog().values())
    (tmp_path / "rules.yml").write_text(export(rules))
    tests = yaml.safe_load(unit_tests(rules, "rules.yml"))
    groups = {g["name"]: g["promql_expr_test"][0]["exp_samples"] for g in tests["tests"]}
    assert len(groups) == sum(len(prom_examples(r)) for r in expressible(rules)) == 24
    # a fire example expects its alert, a pass example none; an example whose finding is a log excerpt
    # shorter than `for` (diag fires on it at lower severity, evidence.window_short) has no Prometheus
    # equivalent: Prometheus waits for the window
    def shorter_than_for(rule, ex) -> bool:
        found = example_findings(rule, ex["run"])
        return bool(found) and all(f.evidence.get("window_short") and
                                   (f.last_ts - f.first_ts).total_seconds() < rule.for_s for f in found)

    short = {f"{r.code} example {i} (fire)" for r in expressible(rules) for i, ex in enumerate(r.examples)
             if shorter_than_for(r, ex)}
    assert short == {"DIAG-K001 example 2 (fire)", "DIAG-K001 example 3 (fire)"}
    for name, want in groups.items():
        assert bool(want) == ("(fire)" in name and name not in short), name
    assert groups["DIAG-B003 example 0 (fire)"] == [
        {"labels": '{code="DIAG-B003", diag_role="decode", diag_worker="0"}', "value": 1}]
    assert groups["DIAG-B001 example 0 (fire)"] == [{"labels": '{code="DIAG-B001"}', "value": 1}]
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    res = subprocess.run([_promtool(), "test", "rules", str(tmp_path / "tests.yml")], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    # the same tests (those of the two rules changed) fail against rules exported with other thresholds:
    # the tests can fail
    changed = [r.with_params({"kv_usage": 99.5}) if r.code == "DIAG-K001" else
               r.with_params({"min_count": 10}) if r.code == "DIAG-E002" else r for r in rules]
    (tmp_path / "rules.yml").write_text(export(changed))
    tests["tests"] = [g for g in tests["tests"] if g["name"].startswith(("DIAG-K001 ", "DIAG-E002 "))]
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    res = subprocess.run([_promtool(), "test", "rules", str(tmp_path / "tests.yml")], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 1
    assert 'code="DIAG-K001"' in res.stdout + res.stderr and 'code="DIAG-E002"' in res.stdout + res.stderr


def test_kv_failure_counters_counted_once(tmp_path: Path) -> None:
    """vLLM >= 0.31 counts a failed NIXL notification in both nixl counters (nixl/stats.py): the exported
    signal counts it once; Mooncake's failed transfers and receives (vLLM 0.33) add up, its expired
    requests reach the expiry signal; counters of vLLM <= 0.30 (disjoint) still fire."""
    (tmp_path / "rules.yml").write_text(export([catalog()["DIAG-E002"], catalog()["DIAG-E003"]]))
    labels = 'job="w",instance="n{i}:8000",worker_role="{role}",worker_index="{i}",engine="0",model_name="m"'

    def series(metric: str, role: str, i: int, values: str) -> dict[str, str]:
        return {"series": f"vllm:{metric}_total{{{labels.format(role=role, i=i)}}}", "values": values}

    inputs = [series("nixl_num_failed_transfers", "decode", 0, "0 0 3 3"),      # 2 notifications + 1 handshake
              series("nixl_num_failed_notifications", "decode", 0, "0 0 2 2"),
              series("mooncake_num_failed_transfers", "decode", 1, "0 1 1 1"),
              series("mooncake_num_failed_recvs", "decode", 1, "0 0 0 2"),
              series("mooncake_num_kv_expired_reqs", "prefill", 0, "0 0 4 4"),
              series("nixl_num_failed_notifications", "decode", 2, "0 0 1 1")]  # vLLM <= 0.30: alone
    want = {"diag:vllm_kv_failures:endpoint_increase": [("decode", "0", 3), ("decode", "1", 3), ("decode", "2", 1)],
            "diag:vllm_kv_expiry:endpoint_increase": [("prefill", "0", 4)]}
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": inputs,
        "promql_expr_test": [{"expr": f"sum by(diag_role, diag_worker) ({rec})", "eval_time": "3m", "exp_samples": [
            {"labels": f'{{diag_role="{r}", diag_worker="{w}"}}', "value": v} for r, w, v in rows]}
            for rec, rows in want.items()]}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    res = subprocess.run([_promtool(), "test", "rules", str(tmp_path / "tests.yml")], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


def test_backend_is_decode_beside_prefill_else_agg(tmp_path: Path) -> None:
    """Dynamo's worker is component ``backend`` in decode and aggregated mode (ai-dynamo 1.6 dynamo/vllm/args.py):
    decode in a deployment with a prefill component, aggregated in one without; another role label wins."""
    (tmp_path / "rules.yml").write_text(export([]))
    lab = 'dynamo_namespace="{ns}",dynamo_component="{comp}",instance="n{i}:8000",job="{job}",engine="0"'

    def running(ns: str, comp: str, i: int, value: int, job: str = "dynamo") -> dict[str, str]:
        return {"series": f"vllm:num_requests_running{{{lab.format(ns=ns, comp=comp, i=i, job=job)}}}",
                "values": f"{value}x3"}

    inputs = [running("disagg", "prefill", 0, 1), running("disagg", "backend", 1, 2),
              running("agg", "backend", 2, 3), running("agg", "backend", 3, 4, job="decode-w7")]
    want = [("agg", "agg", "n2:8000", 3), ("agg", "decode", "7", 4),
            ("disagg", "decode", "n1:8000", 2), ("disagg", "prefill", "n0:8000", 1)]
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": inputs,
        "promql_expr_test": [{"expr": "sum by(dynamo_namespace, diag_role, diag_worker) (diag:vllm_running:engine)",
                              "eval_time": "2m", "exp_samples": [
            {"labels": f'{{diag_role="{r}", diag_worker="{w}", dynamo_namespace="{ns}"}}', "value": v}
            for ns, r, w, v in want]}]}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    res = subprocess.run([_promtool(), "test", "rules", str(tmp_path / "tests.yml")], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr


def test_verdict_alerts_from_request_errors_and_the_waiting_split(tmp_path: Path) -> None:
    """The verdict's thresholds (verdicts.toml) as alerts: a deployment whose requests fail beyond
    failed_invalid_frac by the frontend's counters (status="error" and failures_total count the same requests)
    or, without a frontend, the workers'; a P/D decode waiting for its KV (KV-fetch stages, else deferred) and
    one waiting for capacity with its KV loaded; none where the shares stay below the thresholds."""
    (tmp_path / "rules.yml").write_text(export([], verdicts=True))
    eng = 'job="w",instance="{ns}-{role}:8000",worker_role="{role}",dynamo_namespace="{ns}",engine="0"'

    def s(metric: str, ns: str, values: str, role: str = "frontend", **extra: str) -> dict[str, str]:
        labels = eng.format(ns=ns, role=role) + "".join(f',{k}="{v}"' for k, v in extra.items())
        return {"series": f"{metric}{{{labels}}}", "values": values}

    def engines(ns: str, waiting: int, by_stage: dict[str, int] | None = None, deferred: int | None = None) -> list:
        out = [s("vllm:num_requests_running", ns, "2x6", "prefill"), s("vllm:num_requests_waiting", ns, "0x6", "prefill"),
               s("vllm:num_requests_running", ns, "40x6", "decode"), s("vllm:num_requests_waiting", ns, f"{waiting}x6", "decode")]
        out += [s("vllm:num_requests_kv_fetch_by_stage", ns, f"{n}x6", "decode", stage=st)
                for st, n in (by_stage or {}).items()]
        if deferred is not None:
            out.append(s("vllm:num_requests_waiting_by_reason", ns, f"{deferred}x6", "decode", reason="deferred"))
        return out

    inputs = [s("dynamo_frontend_requests_total", "fails", "0+10x6", status="success"),
              s("dynamo_frontend_requests_total", "fails", "0+1x6", status="error"),
              s("dynamo_frontend_failures_total", "fails", "0+1x6"),
              s("dynamo_frontend_requests_total", "ok", "0+100x6", status="success"),
              s("dynamo_frontend_requests_total", "ok", "0+1x6", status="error"),
              s("dynamo_component_requests_total", "workers", "0+10x6", "decode"),
              s("dynamo_component_errors_total", "workers", "0+2x6", "decode", error_type="generate"),
              *engines("kvwait", 6, {"waiting_to_start": 3, "in_progress": 2, "completed_waiting": 0}),
              *engines("deferred", 4, deferred=3),
              *engines("capacity", 6, {"waiting_to_start": 1, "in_progress": 0, "completed_waiting": 0}),
              *engines("calm", 0, {"waiting_to_start": 0, "in_progress": 0, "completed_waiting": 0})]
    want = [("DIAG_verdict_decode_bound_decode_waits_for_capacity", "capacity"),
            ("DIAG_verdict_invalid_request_errors", "fails"), ("DIAG_verdict_invalid_request_errors", "workers"),
            ("DIAG_verdict_transfer_bound_decode_waits_for_kv", "deferred"),
            ("DIAG_verdict_transfer_bound_decode_waits_for_kv", "kvwait")]
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "group_eval_order": GROUPS, "tests": [{
        "interval": "1m", "input_series": inputs,
        "promql_expr_test": [{"expr": 'group by(alertname, dynamo_namespace) (ALERTS{alertstate="firing"})',
                              "eval_time": "5m", "exp_samples": [
            {"labels": f'{{alertname="{a}", dynamo_namespace="{ns}"}}', "value": 1} for a, ns in want]}]}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    res = subprocess.run([_promtool(), "test", "rules", str(tmp_path / "tests.yml")], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
