"""TensorRT-LLM's recipe checks (DIAG-C025, catalog ``catalog/config.toml``): certain-only, like the others.

Each reads ``backend.trtllm_config.<role>`` as srtctl writes it (the LLM API's fields, snake_case). Every rule's
``why`` cites the TensorRT-LLM source it rests on.
"""

from __future__ import annotations

from collections.abc import Iterator

from diag.parsers.recipe import Recipe
from diag.rules.catalog import Rule
from diag.rules.finding import Finding
from diag.rules.recipe_support import check, finding, flag_mark, roles, set_flag, truthy

ITER_LOG = "print_iter_log"


def trtllm(recipe: Recipe) -> bool:
    return recipe.backend == "trtllm"


@check("recipe.trtllm_iter_log")
def iter_log(recipe: Recipe, rule: Rule) -> Iterator[Finding]:
    """print_iter_log left at its default (False) or set false on a role: its engines print no iteration lines."""
    if not trtllm(recipe):
        return
    for role in roles(recipe, "prefill", "decode", "agg"):
        value = role.value(ITER_LOG)
        if truthy(value):
            continue
        said = "left at its default, false" if value is None else f"set to {str(value).lower()}"
        yield finding(rule, recipe, f"{ITER_LOG} {said}: TensorRT-LLM prints no iteration lines, so diag has no "
                      "per-step figures (batches, KV usage, step times) for this role", flag_mark(recipe, role, ITER_LOG),
                      role=role, fix=set_flag(role, ITER_LOG, True), value=value)
