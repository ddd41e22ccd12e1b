"""Advice checked against what ran (issue 33): no fix or experiment proposes a value the recipe or the
effective config already has; the findings' fixes and the verdict's ``next`` agree; the balance line names
no queue the verdict denies. Over every sample run and the real recipes, plus the cases the issue named.

The proposals are read back from the words every output shows (the code spans ``set `key: value` in
`backend.vllm_config.decode``` and the catalog's ``set decode mamba-ssm-cache-dtype bfloat16``), and the
values in effect from the recipe's YAML and the flags and environment the logs show ran
(:func:`rules.effective.what_ran`), not from the checker under test.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from loading import report_of

from diag.check_cmd import check_file
from diag.parsers.flags import normalize_flag
from diag.report import Report, balance_text
from diag.rules.advice import RunConfig, changes_of, check, fix_text
from diag.rules.effective import canon, what_ran
from diag.rules.proposal import Change, Proposal, catalog_errors
from diag.rules.verdict_catalog import verdict_catalog

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "samples" / "runs"
RUN_NAMES = sorted(p.name for p in RUNS.iterdir())
RECIPES = ROOT / "tests" / "data" / "recipes"

# what the outputs write when they propose a value: a code span placed in the recipe, or the catalog's words
SPAN = re.compile(r"`(?P<key>[\w.-]+): (?P<value>\"[^\"`]*\"|[^`]*)` in `backend\.(?:vllm_config\.(?P<role>\w+)"
                  r"|(?P<env_role>\w+)_environment)`")
SPANS = re.compile(r"set ((?:`[^`]+`(?:, )?)+) in `([^`]+)`")
WORDS = re.compile(r"\b(?:set|raise) (?P<role>prefill|decode|agg) (?P<key>[a-z][a-z0-9-]+)(?::| to(?: at least)?)? "
                   r"(?P<value>[\w.,]+)")
WORDS_ON = re.compile(r"\b(?:set|raise) (?P<key>[a-z][a-z0-9-]+)(?::| to(?: at least)?)? (?P<value>[\w.,]+)"
                      r"(?: \([^)]*\))? on (?P<role>prefill|decode|agg)\b")


def proposals_in(text: str) -> list[tuple[str, str, str, str]]:
    """(kind, role, key, value) of every value a piece of advice proposes."""
    out = []
    for m in SPANS.finditer(text):
        for span in re.findall(r"`[^`]+`", m[1]):
            hit = SPAN.fullmatch(f"{span} in `{m[2]}`")
            if hit is not None:
                kind = "env" if hit["env_role"] else "flag"
                out.append((kind, hit["role"] or hit["env_role"], hit["key"], hit["value"].strip('"')))
    out += [("flag", m["role"], m["key"], m["value"].rstrip(",.").replace(",", ""))
            for words in (WORDS, WORDS_ON) for m in words.finditer(text)]
    return out


def _yaml_role(data: Any, kind: str, role: str) -> dict[str, Any]:
    backend = data.get("backend") or {}
    block = backend.get(f"{role}_environment") if kind == "env" else (backend.get("vllm_config") or {}).get(role)
    return dict(block or {})


def values_in_effect(data: Any, ran: dict[str, Any] | None, kind: str, role: str, key: str) -> list[Any]:
    """The recipe's value of a setting (as written in the YAML) and the value that ran, where known; a
    flag's under its canonical name (``no-x: true`` is ``x`` off)."""
    name = key if kind == "env" else normalize_flag(key)[0]
    out = []
    for written_key, value in _yaml_role(data, kind, role).items():
        wk, wneg = (written_key, False) if kind == "env" else normalize_flag(str(written_key))
        if wk == name:
            out.append((not value) if wneg and isinstance(value, bool) else value)
    r = (ran or {}).get(role)
    if r is not None:
        table = r.env if kind == "env" else r.flags
        if name in table:
            out.append(table[name][0])
    return out


def _proposed(kind: str, key: str, value: str) -> Any:
    if kind == "flag" and normalize_flag(key)[1] and value in ("true", "false"):
        return value != "true"
    return value


def _same(a: Any, b: Any) -> bool:
    return canon(a).lower() == canon(b).lower()


def advice_texts(report: Report) -> list[tuple[str, str]]:
    """Every piece of advice a report shows: the findings' fixes and every verdict's experiments."""
    texts = [(f"{f.code} [{f.endpoint}] fix", f.fix) for f in report.findings if f.fix]
    verdicts = [report.verdicts.run, *report.verdicts.points] if report.verdicts else []
    texts += [(f"verdict C={v.concurrency} {e['id']}", e["action"]) for v in verdicts for e in v.experiments]
    return texts


# ------------------------------------------------------------------ no proposal of a value in place
@pytest.mark.parametrize("name", RUN_NAMES)
def test_no_advice_proposes_a_value_the_run_has(name: str) -> None:
    report = report_of(RUNS / name)
    run = report.run
    data = run.recipe.data if run.recipe is not None else {}
    ran = what_ran(run)
    for where, text in advice_texts(report):
        for kind, role, key, value in proposals_in(text):
            have = values_in_effect(data, ran, kind, role, key)
            want = _proposed(kind, key, value)
            assert not any(_same(h, want) for h in have), f"{name}: {where} proposes {role} {key} {value}: {text}"


def test_the_proposals_are_read_back_from_the_words() -> None:
    """The reader above sees what the outputs write (else the test over the samples would prove nothing)."""
    got = proposals_in('set `DYN_LOG: "error"`, `VLLM_LOGGING_COLOR: "0"` in `backend.prefill_environment`; '
                       "or set `no-async-scheduling: true` in `backend.vllm_config.decode`; "
                       "set prefill max-num-batched-tokens to 16,384 (2 x ISL); set decode mamba-ssm-cache-dtype: "
                       "bfloat16; raise max-num-batched-tokens to 16,384 (2 x ISL) on prefill; set kv-cache-dtype fp8 "
                       "on decode")
    assert got == [("env", "prefill", "DYN_LOG", "error"), ("env", "prefill", "VLLM_LOGGING_COLOR", "0"),
                   ("flag", "decode", "no-async-scheduling", "true"),
                   ("flag", "prefill", "max-num-batched-tokens", "16384"),
                   ("flag", "decode", "mamba-ssm-cache-dtype", "bfloat16"),
                   ("flag", "prefill", "max-num-batched-tokens", "16384"), ("flag", "decode", "kv-cache-dtype", "fp8")]
    assert proposals_in("the recipe already sets prefill max-num-batched-tokens 16,384 but 8,192 ran") == []


def _proposals_in_place(paths: list[Path]) -> tuple[int, list[tuple[str, str, str | None]]]:
    """How many values ``diag check``'s fixes propose over some recipes, and those the recipe has."""
    from diag.parsers.recipe_yaml import load_yaml

    seen, bad = 0, []
    for path in paths:
        data = load_yaml(path.read_text())
        for f in check_file(path):
            for kind, role, key, value in proposals_in(f.fix or ""):
                seen += 1
                if any(_same(h, _proposed(kind, key, value)) for h in values_in_effect(data, None, kind, role, key)):
                    bad.append((path.name, f.code, f.fix))
    return seen, bad


def test_no_check_fix_proposes_a_value_the_recipe_has() -> None:
    """``diag check`` on the recipe set (tests/data/recipes): no fix proposes what the recipe says."""
    seen, bad = _proposals_in_place(sorted(RECIPES.glob("*.yaml")))
    assert seen > 50 and not bad, bad   # the set has fixes that propose values: the assertion ran


def test_no_check_fix_proposes_a_value_a_shared_recipe_has(real_recipes: Path) -> None:
    seen, bad = _proposals_in_place(sorted(real_recipes.glob("*.yaml")))
    assert seen > 20 and not bad, bad


# ------------------------------------------------------------------ the cases issue 33 named
def test_b001_on_prefill_bound_does_not_propose_the_batched_tokens_the_recipe_has() -> None:
    """prefill-bound's recipe has max-num-batched-tokens 16,384 = 2 x 8,192: B001 says so and proposes a
    prefill worker, as the verdict's next does."""
    report = report_of(RUNS / "prefill-bound")
    recipe = report.run.recipe
    assert recipe is not None and recipe.benchmark.isl == 8192
    assert recipe.roles["prefill"].value("max-num-batched-tokens") == 16384
    b001 = next(f for f in report.findings if f.code == "DIAG-B001")
    assert b001.fix == "add a prefill worker (4 -> 5); prefill max-num-batched-tokens is already 16,384 = 2 x ISL"
    v = report.verdict
    assert v is not None and v.cls == "prefill-bound"
    assert [e["id"] for e in v.experiments] == ["add-prefill-worker"]
    assert v.in_place == ("prefill max-num-batched-tokens is already 16,384 = 2 x ISL",)
    assert b001.fix.startswith(v.experiments[0]["action"])


def test_drift_rewrites_the_fix_the_recipe_already_asks_for() -> None:
    """drift-batched-tokens: the recipe says 16,384, 8,192 ran. C004's fix (and the verdict's next, which
    is that fix) sends the reader to what overrides the recipe instead of proposing 16,384 again."""
    report = report_of(RUNS / "drift-batched-tokens")
    c004 = next(f for f in report.findings if f.code == "DIAG-C004")
    assert c004.fix is not None and c004.fix.startswith(
        "the recipe already sets prefill max-num-batched-tokens 16,384 but 8,192 ran: find what overrides it")
    assert "16384" not in c004.fix
    v = report.verdict
    assert v is not None and v.experiments[0]["id"] == "fix-DIAG-C004" and c004.fix in v.experiments[0]["action"]


def test_kv_exhaustion_does_not_propose_the_mamba_dtype_decode_runs() -> None:
    report = report_of(RUNS / "kv-exhaustion")
    for f in report.findings:
        if f.code in ("DIAG-K001", "DIAG-K002", "DIAG-K003"):
            assert "bfloat16" not in (f.fix or "").split(";")[0], f.fix
            assert "decode mamba-ssm-cache-dtype is already bfloat16" in (f.fix or ""), f.fix


# ------------------------------------------------------------------ the verdict's next and the findings' fixes
@pytest.mark.parametrize("name", RUN_NAMES)
def test_findings_fixes_and_the_verdicts_next_agree(name: str) -> None:
    """A finding the run's verdict rests on has the verdict's advice as its fix: the next experiment
    first, then the others, then what is in place; no finding the verdict rests on says otherwise."""
    report = report_of(RUNS / name)
    v = report.verdict
    assert v is not None
    for code, endpoint in v.findings:
        found = [f for f in report.findings if (f.code, f.endpoint) == (code, endpoint)]
        assert found, (code, endpoint)
        for f in found:
            if not v.experiments:
                continue
            assert f.fix is not None and f.fix.startswith(v.experiments[0]["action"]), (f.code, f.fix)
            assert all(e["action"] in f.fix for e in v.experiments) and all(n in f.fix for n in v.in_place)
    # a finding only a benchmark point's verdict rests on has that verdict's advice
    assert report.verdicts is not None
    for f in report.findings:
        resting = [p for p in report.verdicts.points if (f.code, f.endpoint) in p.findings and p.fix]
        if resting and (f.code, f.endpoint) not in v.findings:
            assert f.fix in {p.fix for p in resting}, (f.code, f.fix)


# ------------------------------------------------------------------ the balance line
def _ruled_out_queue(report: Report, side: str) -> bool:
    v = report.verdict
    return v is not None and any(r["why"].startswith(f"not {side}-bound: {side} waiting") for r in v.ruled_out)


@pytest.mark.parametrize("name", RUN_NAMES)
def test_the_balance_line_names_no_queue_the_verdict_denies(name: str) -> None:
    report = report_of(RUNS / name)
    if report.balance is None:
        return
    v = report.verdict
    assert v is not None
    line = balance_text(report.balance)
    named = re.match(r"(?:queues? on (?P<sides>[\w ]+?)|no queue standing):", line)
    assert named is not None, line
    sides = named["sides"].split(" and ") if named["sides"] else []
    assert sides == list(v.queues), (line, v.queues)
    for side in sides:
        assert not _ruled_out_queue(report, side), (line, v.ruled_out)
    if "no queue" in v.why:
        assert not sides, (line, v.why)
    params = verdict_catalog().params
    pw = report.balance["prefill_waiting_per_engine"]
    assert ("prefill" in sides) == (pw is not None and pw >= params["prefill_queue"]), line


@pytest.mark.parametrize("name", ["healthy", "engine-crash", "stats-missing"])
def test_no_queue_on_the_runs_whose_verdict_says_none_stands(name: str) -> None:
    """These runs' prefill waits 1.9-2.0 per engine (a queue is >= 8): the line said "queue on prefill"."""
    report = report_of(RUNS / name)
    assert report.balance is not None
    assert balance_text(report.balance).startswith("no queue standing: prefill ")
    assert report.verdict is not None and report.verdict.queues == ()


# ------------------------------------------------------------------ the checker itself
def _recipe(text: str) -> RunConfig:
    from diag.parsers.recipe import build_recipe
    from diag.parsers.recipe_yaml import load_yaml

    return RunConfig.of_recipe(build_recipe(load_yaml(text), "config.yaml"))


CONFIG = """
backend:
  type: vllm
  prefill_environment: {DYN_LOG: "warn"}
  vllm_config:
    prefill: {max-num-batched-tokens: 32768, no-async-scheduling: true}
    decode: {mamba-ssm-cache-dtype: bfloat16}
resources: {prefill_workers: 4, decode_workers: 1}
benchmark: {type: sa-bench, isl: 8192, osl: 1024, concurrencies: "512x1024"}
"""


@pytest.mark.parametrize(("change", "in_place"), [
    (Change("flag", "max-num-batched-tokens", 16384, "prefill", ">="), True),
    (Change("flag", "max-num-batched-tokens", 65536, "prefill", ">="), False),
    (Change("flag", "async-scheduling", False, "prefill"), True),
    (Change("flag", "no-async-scheduling", True, "prefill"), True),
    (Change("flag", "mamba-ssm-cache-dtype", "bfloat16", "decode"), True),
    (Change("flag", "stream-interval", 1, "decode", "<="), True),      # vLLM's default, unset in the recipe
    (Change("env", "DYN_LOG", "error", "prefill", accepts=("error", "warn")), True),
    (Change("env", "DYN_LOG", "error", "prefill"), False),
    (Change("resource", "prefill_workers", 5, relation=">="), False),
    (Change("benchmark", "concurrency", 1493, relation="<="), True),
])
def test_a_change_in_place_is_dropped_and_said(change: Change, in_place: bool) -> None:
    result = check(Proposal(changes=(change,)), _recipe(CONFIG))
    assert (not result.stands) == in_place, result
    assert bool(result.in_place) == in_place


def test_the_note_says_the_value_and_what_it_stands_for() -> None:
    config = _recipe(CONFIG)
    ctx = {"two_isl": 16384, "roles": ["prefill", "decode"]}
    changes = changes_of({"role": "prefill", "flag": "max-num-batched-tokens", "at_least": "{two_isl}"}, ctx, None)
    result = check(Proposal("raise it", changes, basis="2 x ISL"), config)
    assert [n.clause() for n in result.in_place] == [" is already 32,768 >= 2 x ISL"]
    env = changes_of({"roles": "each", "env": {"DYN_LOG": ["error", "warn"], "X": "1"}}, ctx, None)
    assert [(c.role, c.name) for c in env] == [("prefill", "DYN_LOG"), ("prefill", "X"), ("decode", "DYN_LOG"),
                                               ("decode", "X")]
    result = check(Proposal(changes=env), config)
    assert result.text == ('set `X: "1"` in `backend.prefill_environment`; set `DYN_LOG: "error"`, `X: "1"` in '
                           "`backend.decode_environment`")
    assert fix_text([result.text], ["prefill DYN_LOG is already warn"]).endswith("; prefill DYN_LOG is already warn")
    assert fix_text([], ["prefill DYN_LOG is already warn"]) == "nothing to change: prefill DYN_LOG is already warn"


def test_a_recipe_value_overridden_at_run_time_is_rewritten() -> None:
    """The recipe has the value, something else ran: the advice is to find what overrides the recipe."""
    from diag.parsers.recipe_yaml import SourceMark
    from diag.rules.effective import Ran

    config = _recipe(CONFIG)
    ran = Ran(flags={"max_num_batched_tokens": (8192, SourceMark("w0.out", 3))})
    config = RunConfig(config.recipe, {"prefill": ran}, {"prefill": 4})
    result = check(Proposal(changes=(Change("flag", "max-num-batched-tokens", 16384, "prefill", ">="),)), config)
    assert result.stands and not result.standing
    assert result.text.startswith("the recipe already sets prefill max-num-batched-tokens 32,768 but 8,192 ran: "
                                  "find what overrides it (")


@pytest.mark.parametrize(("table", "when", "error"), [
    ({"flag": "x"}, None, "gives one of value, at_least, at_most"),
    ({"flag": "x", "env": {"A": "1"}, "value": 1}, None, "names one of"),
    ({"env": {"A": "1"}, "value": 1}, None, "table of names to values"),
    ({"flag": "x", "value": 1, "colour": "red"}, None, "unknown keys"),
    (None, "sometimes", "unknown condition"),
])
def test_the_catalogs_refuse_a_malformed_set(table: Any, when: Any, error: str) -> None:
    assert any(error in e for e in catalog_errors(table, when))


def test_every_catalog_set_is_well_formed() -> None:
    from diag.rules.catalog import catalog

    assert all(not catalog_errors(e.set, e.when) for e in verdict_catalog().experiments)
    assert all(not catalog_errors(a.get("set"), a.get("when")) for r in catalog().values() for a in r.advice)
