"""diag.toml / [tool.diag]: discovery, select/ignore, thresholds, rule overrides, suppressions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from diag.check_cmd import check, run_check
from diag.rules.finding import Finding, Location
from diag.rules.settings import Settings, SettingsError, find_config, load_settings, normalize_code

Q = "srt-slurm-recipes__recipes__multi-node__Qwen3.5__GB200__8k1k__vllm__disagg__"
QWEN_CC5120 = f"{Q}4xdep2-1xdep8-cc5120.yaml"


def _f(code: str, sev: str = "warning", path: str = "recipes/a.yaml", endpoint: str | None = None) -> Finding:
    return Finding(code, "n", sev, "m", endpoint=endpoint, location=Location(path, 1, 1))


def _cfg(tmp_path: Path, text: str, name: str = "diag.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_discovery_walks_up_and_prefers_diag_toml(tmp_path: Path) -> None:
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) is None
    _cfg(tmp_path, '[project]\nname = "x"\n', "pyproject.toml")
    assert find_config(deep) is None                       # a pyproject without [tool.diag] does not count
    _cfg(tmp_path, '[tool.diag]\nfail-on = "info"\n', "pyproject.toml")
    assert find_config(deep) == tmp_path / "pyproject.toml"
    assert load_settings(deep).fail_on == "info"
    _cfg(tmp_path / "a", 'fail-on = "warning"\n')
    assert find_config(deep) == tmp_path / "a" / "diag.toml"
    s = load_settings(deep)
    assert s.fail_on == "warning" and s.root == tmp_path / "a"
    assert load_settings(deep, tmp_path / "pyproject.toml").fail_on == "info"   # --config wins


def test_defaults_without_a_file(tmp_path: Path) -> None:
    s = load_settings(tmp_path)
    assert (s.select, s.ignore, s.fail_on, s.suppressions, s.source) == (["ALL"], [], "error", [], None)
    assert s.enabled("DIAG-C001") and s.rule("C005").params["headroom"] == 128


def test_select_and_ignore_by_code_or_prefix_most_specific_wins(tmp_path: Path) -> None:
    s = load_settings(tmp_path, _cfg(tmp_path, 'select = ["DIAG-C"]\nextend-select = ["DIAG-C005"]\n'
                                                'ignore = [{code = "c00", reason = "not our recipes"},\n'
                                                '          {code = "X002", reason = "shared config"}]\n'))
    assert s.enabled("DIAG-C005") and s.enabled("DIAG-C010") and s.enabled("DIAG-C016")
    assert not s.enabled("DIAG-C001") and not s.enabled("DIAG-K001") and not s.enabled("DIAG-X002")
    kept = s.apply([_f("DIAG-C001"), _f("DIAG-C005"), _f("DIAG-C012"), _f("DIAG-K001")])
    assert [f.code for f in kept] == ["DIAG-C005", "DIAG-C012"]
    cli = s.with_cli(select=["C0"], ignore=["C012"], fail_on="info")
    assert cli.enabled("DIAG-C001") is False and cli.enabled("DIAG-C012") is False and cli.fail_on == "info"
    assert normalize_code("c001") == "DIAG-C001" and normalize_code("all") == "ALL"


def test_config_ignore_needs_a_reason(tmp_path: Path) -> None:
    s = load_settings(tmp_path, _cfg(tmp_path, 'ignore = ["DIAG-C009", {code = "C007", reason = ""}]\n'
                                                'extend-ignore = [{code = "C008", reason = "latency not measured"}]\n'))
    assert s.enabled("DIAG-C009") and s.enabled("DIAG-C007") and not s.enabled("DIAG-C008")
    out = s.apply([_f("DIAG-C009"), _f("DIAG-C008")])
    x001 = [f for f in out if f.code == "DIAG-X001"]
    assert [f.evidence["code"] for f in x001] == ["DIAG-C009", "DIAG-C007"]
    assert "DIAG-C009" in [f.code for f in out] and "DIAG-C008" not in [f.code for f in out]
    assert "reason" in x001[0].fix


def test_fail_on_threshold() -> None:
    s = Settings()
    assert not s.fails([_f("DIAG-C006", "warning")]) and s.fails([_f("DIAG-C013", "error")])
    assert Settings(fail_on="info").fails([_f("DIAG-C009", "info")])
    assert not Settings(fail_on="warning").fails([_f("DIAG-C009", "info")])


def test_the_digest_changes_with_what_judges_and_only_with_that(tmp_path: Path) -> None:
    def digest(text: str) -> str:
        return load_settings(tmp_path, _cfg(tmp_path, text)).digest()

    plain = Settings(root=tmp_path).digest()
    assert digest("") == digest("fail-on = 'info'") == digest("[rules.DIAG-C008]\nmax_interval = 1") == plain
    judged = ["[rules.DIAG-C008]\nmax_interval = 2", "[rules.DIAG-C008]\nseverity = 'error'",
              "[rules.DIAG-K003]\nfor = '5m'", "select = ['DIAG-K']",
              "ignore = [{code = 'DIAG-C009', reason = 'our logs'}]",
              "[[suppress]]\ncode = 'DIAG-C009'\nreason = 'ours'", "max-recipe-bytes = 1024"]
    digests = [digest(text) for text in judged]
    assert len({plain, *digests}) == len(judged) + 1


def test_rule_overrides_change_params_severity_and_windows(tmp_path: Path, real_recipes: Path) -> None:
    s = load_settings(tmp_path, _cfg(tmp_path, '[rules.DIAG-C005]\nheadroom = 256\n'
                                                '[rules.C006]\nseverity = "info"\n'
                                                '[rules.DIAG-K001]\nfor = 120\n'))
    assert s.rule("DIAG-C005").params["headroom"] == 256 and s.rule("DIAG-C006").severity == "info"
    assert s.rule("DIAG-K001").for_s == 120.0
    # the override reaches the check: C/DP + 256 instead of + 128
    text = (real_recipes / QWEN_CC5120).read_text().replace("      max-cudagraph-capture-size: 768\n", "")
    (tmp_path / "r.yaml").write_text(text)
    res = run_check([tmp_path / "r.yaml"], s)
    (c005,) = [f for f in res.findings if f.code == "DIAG-C005"]
    assert "max-cudagraph-capture-size: 896" in c005.fix
    assert {f.severity for f in res.findings if f.code == "DIAG-C006"} == {"info"}


@pytest.mark.parametrize(("text", "match"), [
    ('selct = ["C"]\n', "unknown setting"), ('fail-on = "fatal"\n', "fail-on must be one of"),
    ('select = ["DIAG-Q"]\n', "matches no rule"), ("[rules.DIAG-C999]\nx = 1\n", "no such rule"),
    ("[rules.DIAG-C005]\nheadrom = 1\n", "unknown key 'headrom'"), ('[rules.C005]\nseverity = "loud"\n', "severity"),
    ('[[suppress]]\nreason = "x"\n', "needs a `code`"), ('[[suppress]]\ncode = "C001"\nwhy = "x"\n', "unknown key"),
    ("select = [\n", "invalid TOML"),
])
def test_bad_config_is_a_settings_error(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(SettingsError, match=match):
        load_settings(tmp_path, _cfg(tmp_path, text))


def test_suppressions_by_code_path_and_endpoint(tmp_path: Path) -> None:
    s = load_settings(tmp_path, _cfg(tmp_path, """
[[suppress]]
code = "DIAG-C006"
path = "recipes/qwen/**"
reason = "stats come from Prometheus here"

[[suppress]]
code = "C00"
endpoint = "decode*"
reason = "decode is tuned elsewhere"

[[suppress]]
code = "DIAG-C013"
path = "never/*.yaml"
reason = "left over"
"""))
    inside = str(tmp_path / "recipes" / "qwen" / "x" / "a.yaml")
    findings = [_f("DIAG-C006", path=inside), _f("DIAG-C006", path=str(tmp_path / "recipes" / "b.yaml")),
                _f("DIAG-C008", endpoint="decode"), _f("DIAG-C008", endpoint="prefill")]
    out = s.apply(findings)
    assert [(f.code, f.endpoint) for f in out if f.code != "DIAG-X002"] == [("DIAG-C006", None), ("DIAG-C008", "prefill")]
    assert [s.used for s in s.suppressions] == [1, 1, 0]
    (unused,) = [f for f in out if f.code == "DIAG-X002"]
    assert unused.severity == "info" and unused.location.line == 12 and "DIAG-C013" in unused.message


def test_suppression_without_reason_is_a_finding_and_not_honoured(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, '[tool.diag]\nfail-on = "warning"\n\n[[tool.diag.suppress]]\ncode = "DIAG-C006"\n',
               "pyproject.toml")
    s = load_settings(tmp_path, cfg)
    out = s.apply([_f("DIAG-C006")])
    assert [f.code for f in out] == ["DIAG-C006", "DIAG-X001"]
    x001 = out[1]
    assert x001.location.path == str(cfg) and x001.location.line == 4 and "reason" in x001.fix
    assert s.fails(out)
    assert [f.code for f in s.with_cli(ignore=["X001"]).apply([_f("DIAG-C006")])] == ["DIAG-C006"]


def test_settings_reach_the_cli(tmp_path: Path, real_recipes: Path) -> None:
    app = typer.Typer()
    app.command()(check)
    recipe = str(real_recipes / f"{Q}4xdep2-1xdep8.yaml")
    cfg = _cfg(tmp_path, 'fail-on = "warning"\n[[suppress]]\ncode = "C006"\nreason = "Prometheus"\n')
    runner = CliRunner()
    assert runner.invoke(app, [recipe, "--config", str(cfg)]).exit_code == 0     # C006 suppressed
    res = runner.invoke(app, [recipe, "--config", str(cfg), "--fail-on", "info"])
    assert res.exit_code == 1 and "(2 suppressed)" in res.stdout
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)                                   # discovered from the working directory
        assert runner.invoke(app, [recipe]).exit_code == 0
    finally:
        os.chdir(cwd)
    bad = _cfg(tmp_path, "nope = 1\n", "bad.toml")
    res = runner.invoke(app, [recipe, "--config", str(bad)])
    assert res.exit_code == 2 and "config error" in res.stderr and "Traceback" not in res.output
    res = runner.invoke(app, [recipe, "--select", "C9"])
    assert res.exit_code == 2 and "matches no rule" in res.stderr


# ---------------------------------------------------------------- typed rule parameters

BAD_FILES = {  # the five bad diag.toml files of issue 24: each is exit 2, one line per error, no run judged
    "wrong type": ('[rules.DIAG-K001]\nkv_usage = "lots"\n', ['diag.toml:2: [rules.DIAG-K001] kv_usage: expected a '
                                                              "percentage, 0 to 100, got a string 'lots'"]),
    "duration string where a number goes": (
        '[rules.DIAG-K001]\nkv_usage = "2m"\n',
        ["diag.toml:2: [rules.DIAG-K001] kv_usage: expected a percentage, 0 to 100, got a string '2m' "
         "(a duration string goes only where a duration does)"]),
    "negative percent": ("[rules.K001]\nkv_usage = -5\n",
                         ["diag.toml:2: [rules.K001] kv_usage: expected a percentage, 0 to 100, got -5"]),
    "percent over 100": ("[rules.K001]\nkv_usage = 250\n",
                         ["diag.toml:2: [rules.K001] kv_usage: expected a percentage, 0 to 100, got 250"]),
    "list where a number goes": ("[rules.DIAG-K004]\nmin_intervals = [3]\n",
                                 ["diag.toml:2: [rules.DIAG-K004] min_intervals: expected a whole number >= 1, "
                                  "got a list [3]"]),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_badly_typed_rule_parameter_is_exit_2_and_no_run_is_judged(tmp_path: Path, samples_dir: Path, case: str) -> None:
    from diag.cli import app

    text, lines = BAD_FILES[case]
    cfg = _cfg(tmp_path, text)
    res = CliRunner().invoke(app, ["tail", str(samples_dir / "runs" / "healthy"), "--config", str(cfg)])
    assert res.exit_code == 2 and res.stdout == "" and "Traceback" not in res.output
    assert res.stderr.splitlines() == [f"diag tail: config error: {tmp_path}/{line}" for line in lines]


def test_every_error_of_the_file_is_reported_at_once(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, 'fail-on = "fatal"\n[rules.DIAG-K001]\nfor = "2x"\nkv_usage = "lots"\n\n'
                         '[rules.DIAG-B001]\nkv_high = 250\nmode = "x"\nbogus = 1\n'
                         '[rules.DIAG-S001]\nmax_s = {weights = "40m", ready = "soon"}\n')
    with pytest.raises(SettingsError) as err:
        load_settings(tmp_path, cfg)
    assert [line.removeprefix(f"{cfg}:") for line in err.value.lines] == [
        " fail-on must be one of info, warning, error, never, not 'fatal'",
        '3: [rules.DIAG-K001] for: expected a duration >= 0: seconds, or a string such as "90s", "2m", "1m30s", '
        "got a string '2x'",
        "4: [rules.DIAG-K001] kv_usage: expected a percentage, 0 to 100, got a string 'lots'",
        "7: [rules.DIAG-B001] kv_high: expected a percentage, 0 to 100, got 250",
        "8: [rules.DIAG-B001] mode: not a setting: fixed by the rule's template",
        "9: [rules.DIAG-B001]: unknown key 'bogus' (known: batch_fill_min, busy_min, fill_frac, for, interval_s, "
        "keep_firing_for, kv_high, kv_low, plateau_frac, rise_lookback_s, severity, waiting_high, waiting_min)",
        '11: [rules.DIAG-S001] max_s: ready: expected a duration >= 0: seconds, or a string such as "90s", "2m", '
        "\"1m30s\", got a string 'soon'",
    ]


def test_durations_take_seconds_or_prometheus_strings(tmp_path: Path) -> None:
    s = load_settings(tmp_path, _cfg(tmp_path, '[tool.diag.rules.K001]\nfor = "2m"\nkeep_firing_for = 90\n'
                                                'interval_s = "15s"\n[tool.diag.rules.S001]\nmax_s = {weights = "1h"}\n',
                                     "pyproject.toml"))
    k001 = s.rule("K001")
    assert (k001.for_s, k001.keep_firing_for_s, k001.params["interval_s"]) == (120.0, 90.0, 15)
    assert s.rule("S001").params["max_s"]["weights"] == 3600
    with pytest.raises(SettingsError, match=r"pyproject.toml:3: \[rules.K001\] interval_s: expected a bucket width"):
        load_settings(tmp_path, _cfg(tmp_path, '[tool.diag.rules.K001]\nfor = 60\ninterval_s = "500ms"\n',
                                     "pyproject.toml"))


def test_every_catalog_parameter_has_a_kind_its_default_fits() -> None:
    from diag.rules.catalog import catalog
    from diag.rules.params import coerce, kind_of

    for code, rule in catalog().items():
        for name, default in {"for": rule.for_s, "keep_firing_for": rule.keep_firing_for_s,
                              "severity": rule.severity, **rule.params}.items():
            kind = kind_of(code, name)
            assert kind is not None, f"{code}.{name} has no declared kind (rules/catalog/params.toml)"
            if kind.type != "fixed":
                assert coerce(kind, default) == default, f"{code}.{name}"


def test_rules_json_shows_each_parameter_with_type_and_range() -> None:
    import json

    from diag.cli import app

    res = CliRunner().invoke(app, ["rules", "--format", "json", "--select", "K001"])
    (k001,) = json.loads(res.stdout)["rules"]
    assert k001["params"]["kv_usage"] == {"default": 95, "kind": "percent", "type": "number",
                                          "doc": "a percentage, 0 to 100", "min": 0, "max": 100}
    assert k001["params"]["for"]["type"] == "duration" and "mode" not in k001["params"]
