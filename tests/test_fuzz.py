"""Fuzz (hypothesis) over the three parsers that take outside text: the log line parsers (every declared
format's sample lines, mutated, decorated, glued and torn), the recipe loader (YAML trees of recipe keys
and wrong types, and raw text) and the Prometheus exposition parser. Each may reject its input only
with its own error, never another exception. Bounded: a few hundred examples each, seconds in all."""

from __future__ import annotations

import contextlib
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diag.parsers.ingest import REGISTRY, StreamParser, parse_bulk
from diag.parsers.prometheus import ExpositionError, parse_exposition
from diag.parsers.recipe import NotARecipe, load_recipes
from diag.parsers.recipe_yaml import RecipeError, load_yaml

from helpers import blocks_of

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                      HealthCheck.function_scoped_fixture])
SAMPLES = sorted({s for fmt in REGISTRY.values() for s in fmt.samples})
NOISE = st.sampled_from(["", "\x1b[0;36m", "\ufffd", "\r", "│ ", "> ", "0: ", "NaN", "-1", "1e309", "99999999999999999999",
                         "%", ",", "=", ":", "(", ")", "{", "}", "'", '"', "\t", "\x00", "Engine 000:", "Traceback"])


@st.composite
def mutated_line(draw: st.DrawFn) -> str:
    """A real sample line with a random cut, a random splice and random decoration."""
    line = draw(st.sampled_from(SAMPLES))
    if draw(st.booleans()):
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(NOISE) + draw(st.text(max_size=12)) + line[at + draw(st.integers(0, 20)):]
    if draw(st.booleans()):
        line = line[: draw(st.integers(0, len(line)))]
    return draw(NOISE) + line + draw(NOISE)


@FAST
@given(st.lists(mutated_line(), max_size=12), st.integers(1, 400))
def test_mutated_format_lines_never_raise(lines: list[str], block: int) -> None:
    text = "\n".join(lines)
    data = text.encode("utf-8", errors="surrogatepass")
    recs, counts = parse_bulk(blocks_of(data, block), year=2026)
    assert counts.lines >= text.count("\n")
    assert sum(r.kind == "stats" for r in recs) <= counts.lines
    sp = StreamParser(year=2026)
    for i in range(0, len(data), block):
        sp.feed(data[i:i + block])
    sp.finish()


@FAST
@given(st.lists(mutated_line(), min_size=2, max_size=4))
def test_glued_lines_never_raise(lines: list[str]) -> None:
    parse_bulk([("".join(lines) + "\n").encode("utf-8", errors="surrogatepass")], year=2026)


RECIPE_KEYS = ["name", "model", "resources", "backend", "benchmark", "frontend", "dynamo", "base", "override_a",
               "path", "container", "precision", "gpu_type", "gpus_per_node", "prefill_nodes", "prefill_workers",
               "decode_workers", "gpus_per_decode", "type", "vllm_config", "prefill", "decode", "isl", "osl",
               "concurrencies", "prefill_environment", "decode_environment", "schema", "engine", "roles", "version",
               "tensor-parallel-size", "max-num-batched-tokens", "async-scheduling", "kv-transfer-config"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=20), st.sampled_from(["64x128", "vllm", "sglang", "DS", "{", "&a", "*a"]))
TREES = st.recursive(SCALARS, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                     st.dictionaries(st.sampled_from(RECIPE_KEYS), kids, max_size=6)),
                     max_leaves=40)


@FAST
@given(st.dictionaries(st.sampled_from(RECIPE_KEYS), TREES, min_size=1, max_size=8))
def test_recipe_trees_of_any_shape_load_or_fail_cleanly(tmp_path: Path, tree: dict) -> None:
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(tree, allow_unicode=True))
    with contextlib.suppress(RecipeError, NotARecipe):
        load_recipes(path)


@FAST
@given(st.text(alphabet=st.sampled_from(list("abc: -[]{}&*!|>'\"#\n\t0123456789.,%@`?")), max_size=200))
def test_raw_yaml_text_loads_or_fails_cleanly(text: str) -> None:
    with contextlib.suppress(RecipeError):
        load_yaml(text)


METRICS = ["vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:generation_tokens_total",
           "vllm:time_to_first_token_seconds_bucket", "dynamo_frontend_inflight_requests", "x"]
VALUES = st.one_of(st.floats(allow_nan=True).map(repr), st.sampled_from(["NaN", "+Inf", "-Inf", "1e999", "", "abc"]))


@st.composite
def exposition_line(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(METRICS))
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return f"# TYPE {name} {draw(st.sampled_from(['gauge', 'counter', 'histogram', 'nonsense', '']))}"
    if kind == 1:
        return f"# HELP {name} {draw(st.text(max_size=20))}"
    labels = draw(st.dictionaries(st.sampled_from(["engine", "model_name", "le", "a b", ""]),
                                  st.text(max_size=8), max_size=3))
    body = ",".join(f'{k}="{v}"' for k, v in labels.items())
    line = f"{name}{{{body}}} {draw(VALUES)}" if labels or draw(st.booleans()) else f"{name} {draw(VALUES)}"
    return line if kind == 2 else line[: draw(st.integers(0, len(line)))]


@FAST
@given(st.lists(exposition_line(), max_size=15), st.booleans())
def test_exposition_parses_or_fails_cleanly(lines: list[str], fields_only: bool) -> None:
    try:
        parse_exposition("\n".join(lines) + "\n", fields_only=fields_only)
    except ExpositionError as e:
        assert "\n" not in str(e)


@FAST
@given(st.text(max_size=300))
def test_exposition_of_any_text_parses_or_fails_cleanly(text: str) -> None:
    with contextlib.suppress(ExpositionError):
        parse_exposition(text)
