"""One recipe file -> the jobs srtctl would submit: override files, zip overrides and sweeps.

* ``base:`` + ``override_<suffix>:`` -> one job per override, deep-merged onto the base (scalars
  replace, mappings merge, lists replace, ``null`` deletes), named ``{base.name}_{suffix}``.
* ``zip_override_<group>:`` -> N jobs; list leaves are zipped (length 1 broadcasts, a list of lists
  gives each job a literal list), a ``name:`` list names the jobs, else ``{base}_{group}_{i}``.
* ``sweep:`` (``{param: [values]}`` or ``{mode: grid|zip, parameters: {...}}``) -> one job per
  combination with ``{param}`` placeholders substituted, named ``{name}_{param}{value}_...``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from .flags import render_template
from .recipe_yaml import RecipeError, YList, YMap, copy_tree, deep_merge, map_strings, mark_of


@dataclass
class Job:
    variant: str | None   # override suffix / sweep label; None for a plain recipe
    name: str
    data: YMap


def looks_like_recipe(data: Any) -> bool:
    """A v1 recipe, a ``schema: 2`` recipe, an override file or a sweep file."""
    if not isinstance(data, dict):
        return False
    if isinstance(data.get("base"), dict) and any(
            str(k).startswith(("override_", "zip_override_")) for k in data):
        return True
    if isinstance(data.get("base"), dict) and looks_like_recipe(data["base"]):
        return True
    if data.get("schema") == 2 and ("roles" in data or "engine" in data):
        return True
    return isinstance(data.get("model"), dict) and any(k in data for k in ("resources", "backend", "roles"))


def _err(data: YMap, key: str, msg: str) -> RecipeError:
    line, col = mark_of(data, (key,)) or (None, None)
    return RecipeError(msg, line, col)


def _with_name(job: YMap, name: str) -> YMap:
    job = copy_tree(job)
    job["name"] = name
    return job


def _zip_width(node: Any, key: str, widths: set[int]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            _zip_width(v, k, widths)
    elif isinstance(node, list) and key != "name":
        widths.add(len(node))


def _zip_pick(node: Any, i: int) -> Any:
    if isinstance(node, dict):
        out = YMap(mark=getattr(node, "mark", None))
        for k, v in node.items():
            if k == "name":
                continue
            out[k] = _zip_pick(v, i)
            if isinstance(node, YMap) and k in node.marks:
                out.marks[k] = node.marks[k]
        return out
    if isinstance(node, list):
        idx = 0 if len(node) == 1 else i
        picked = node[idx]
        if isinstance(picked, YList | YMap) and isinstance(node, YList) and node.marks[idx]:
            picked = copy_tree(picked)
            picked.mark = node.marks[idx]
        return copy_tree(picked)
    return node


def _expand_overrides(data: YMap) -> list[Job]:
    base = data["base"]
    if not isinstance(base, YMap):
        raise _err(data, "base", "`base:` must be a mapping")
    base_name = str(base.get("name", "job"))
    jobs: list[Job] = []
    for key, block in data.items():
        if key == "base":
            continue
        if key.startswith("override_"):
            if not isinstance(block, YMap):
                raise _err(data, key, f"`{key}:` must be a mapping")
            suffix = key.removeprefix("override_")
            job = deep_merge(base, block)
            if "name" not in block:
                job = _with_name(job, f"{base_name}_{suffix}")
                job.marks["name"] = data.marks.get(key, (1, 1))
            jobs.append(Job(key, str(job["name"]), job))
        elif key.startswith("zip_override_"):
            if not isinstance(block, YMap):
                raise _err(data, key, f"`{key}:` must be a mapping")
            group = key.removeprefix("zip_override_")
            widths: set[int] = set()
            _zip_width(block, key, widths)
            width = max(widths, default=1)
            if widths - {1, width}:
                raise _err(data, key, f"`{key}:` zips lists of different lengths {sorted(widths)}")
            names = block.get("name")
            if isinstance(names, list) and len(names) not in (1, width):
                raise _err(data, key, f"`{key}.name` has {len(names)} names for {width} variants")
            for i in range(width):
                job = deep_merge(base, _zip_pick(block, i))
                if isinstance(names, list):
                    name = str(names[0 if len(names) == 1 else i])
                else:
                    name = f"{base_name}_{group}_{i}"
                job = _with_name(job, name)
                job.marks["name"] = data.marks.get(key, (1, 1))
                jobs.append(Job(f"{key}[{i}]", name, job))
    if not jobs:  # a base without variants is submitted as itself
        jobs.append(Job("base", base_name, base))
    return jobs


def _sweep_combos(sweep: YMap) -> list[dict[str, Any]]:
    params = sweep.get("parameters", sweep) if "parameters" in sweep else sweep
    mode = str(sweep.get("mode", "grid")) if "parameters" in sweep else "grid"
    if not isinstance(params, dict) or not params:
        raise RecipeError("`sweep:` needs parameters, e.g. `sweep: {conc: [64, 128]}`", *(sweep.mark or (None, None)))
    names = list(params)
    values = [v if isinstance(v, list) else [v] for v in params.values()]
    if mode == "zip":
        lens = {len(v) for v in values}
        if len(lens) > 1:
            raise RecipeError(f"`sweep` in zip mode needs equal-length lists, got {sorted(lens)}",
                              *(sweep.mark or (None, None)))
        return [dict(zip(names, combo, strict=True)) for combo in zip(*values, strict=True)]
    if mode != "grid":
        raise RecipeError(f"`sweep.mode` must be grid or zip, not {mode!r}", *(sweep.mark or (None, None)))
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def _expand_sweep(data: YMap) -> list[Job]:
    sweep = data["sweep"]
    if not isinstance(sweep, YMap):
        raise _err(data, "sweep", "`sweep:` must be a mapping of parameter -> list of values")
    body = YMap(mark=data.mark)
    for k, v in data.items():
        if k != "sweep":
            body[k] = v
            body.marks[k] = data.marks[k]
    jobs = []
    base_name = str(data.get("name", "sweep"))
    for combo in _sweep_combos(sweep):
        job = map_strings(body, lambda s, c=combo: render_template(s, c))
        label = "_".join(f"{k}{v}" for k, v in combo.items())
        job = _with_name(job, f"{base_name}_{label}")
        job.marks["name"] = data.marks.get("name", data.marks["sweep"])
        jobs.append(Job(f"sweep[{label}]", str(job["name"]), job))
    return jobs


def expand_jobs(data: YMap) -> list[Job]:
    """The jobs one recipe document stands for (a plain recipe is one job with ``variant=None``)."""
    if isinstance(data.get("base"), dict):
        jobs = _expand_overrides(data)
    elif isinstance(data.get("sweep"), dict):
        jobs = _expand_sweep(data)
    else:
        return [Job(None, str(data.get("name", "")), data)]
    out: list[Job] = []
    for job in jobs:  # an override may itself carry a sweep
        if isinstance(job.data.get("sweep"), dict):
            out.extend(Job(f"{job.variant}/{sub.variant}", sub.name, sub.data) for sub in _expand_sweep(job.data))
        else:
            out.append(job)
    return out
