"""The typed recipe model: srt-slurm recipes (v1 layout, override/sweep files, ``schema: 2``) as jobs.

:func:`load_recipes` reads one file and returns one :class:`Recipe` per job it stands for. Every
value the checks look at keeps its YAML position, so findings can point at the offending key.

v1: ``resources.{prefill,decode,agg}_{nodes,workers}`` + ``gpus_per_*``,
``backend.{vllm,sglang,trtllm}_config.{prefill,decode,aggregated}`` flag maps,
``backend.*_environment`` over the shared top-level ``environment``.
``schema: 2``: ``engine`` + ``roles.{prefill,decode,agg}.{nodes,workers,gpus,env,args,extra_args}``.
Both normalise to the same :class:`Role` objects (``agg`` for the aggregated role).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import engines
from .engine import EngineAdapter
from .flags import FlagSyntaxError, normalize_flag, parse_command, parse_concurrencies
from .recipe_variants import expand_jobs, looks_like_recipe
from .recipe_yaml import Mark, RecipeError, YMap, get_path, load_yaml_file, mark_of

__all__ = [
    "Benchmark", "Build", "EnvVar", "Flag", "KVTransfer", "NotARecipe", "Recipe", "RecipeError", "Role",
    "build_recipe", "load_recipes",
]

Path_ = tuple[str | int, ...]
V1_ROLE_KEYS = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}
DEFAULT_GPUS_PER_NODE = 4


class NotARecipe(ValueError):
    """The YAML file is valid but is not an srt-slurm recipe (skipped with a note)."""


@dataclass(frozen=True)
class Flag:
    key: str               # as written in the recipe
    name: str              # canonical snake_case, negation removed
    value: Any             # effective value; a ``no-x: true`` flag has value False
    mark: Mark | None
    path: Path_
    source: str = "config"  # config | extra_args


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    mark: Mark | None
    path: Path_
    shared: bool = False    # from the top-level ``environment``


@dataclass
class KVTransfer:
    source: str             # flag | connector
    raw: Any
    data: dict[str, Any] | None
    error: str | None
    mark: Mark | None
    path: Path_

    @property
    def connector(self) -> str | None:
        return None if self.data is None else self.data.get("kv_connector")

    @property
    def role(self) -> str | None:
        return None if self.data is None else self.data.get("kv_role")

    @property
    def failure_policy(self) -> str | None:
        return None if self.data is None else self.data.get("kv_load_failure_policy")

    @property
    def parts(self) -> list[tuple[str, str | None]]:
        """(connector, kv_role) of every connector in effect: a MultiConnector's wrapped connectors
        (each inheriting the outer role when it has none), else the one connector."""
        if self.data is None or not self.connector:
            return []
        extra = self.data.get("kv_connector_extra_config")
        inner = extra.get("connectors") if isinstance(extra, dict) else None
        if str(self.connector) == "MultiConnector" and isinstance(inner, list):
            return [(str(c.get("kv_connector")), c.get("kv_role") or self.role) for c in inner
                    if isinstance(c, dict) and c.get("kv_connector")]
        return [(str(self.connector), self.role)]


@dataclass
class Role:
    name: str                               # prefill | decode | agg
    nodes: int | None = None
    colocated: bool = False                 # shares another role's nodes (decode_nodes: 0 / colocate)
    workers: int | None = None
    gpus: int | None = None                 # per worker (explicit or derived)
    gpus_explicit: bool = False
    flags: dict[str, Flag] = field(default_factory=dict)
    env: dict[str, EnvVar] = field(default_factory=dict)
    mark: Mark | None = None                # the role's flag block (or its parent)
    flags_path: Path_ = ()
    env_path: Path_ = ()
    resource_marks: dict[str, Mark | None] = field(default_factory=dict)
    kv: KVTransfer | None = None

    def flag(self, *names: str) -> Flag | None:
        for n in names:
            f = self.flags.get(normalize_flag(n)[0])
            if f is not None:
                return f
        return None

    def value(self, name: str, default: Any = None) -> Any:
        f = self.flag(name)
        return default if f is None else f.value

    def env_value(self, name: str) -> str | None:
        e = self.env.get(name)
        return None if e is None else e.value


@dataclass(frozen=True)
class Build:
    """The engine build a recipe's container implies (its adapter's ``recipe_build``)."""

    kind: str = "unknown"           # release | nightly | unknown
    version: str | None = None      # "0.26.1"
    commit: str | None = None       # nightly sha
    runtime_tag: str | None = None  # tag of a runtime image that bundles the engine (Dynamo's)
    source: str = ""                # which key it came from
    image: str | None = None
    engine: str = ""                # the engine as shown (its adapter's display name)

    @property
    def label(self) -> str:
        if self.kind == "release":
            return f"{self.engine} v{self.version}"
        if self.kind == "nightly":
            return f"{self.engine} nightly {self.commit}"
        return f"unknown {self.engine + ' ' if self.engine else ''}build ({self.image or 'no container'})"


@dataclass
class Benchmark:
    type: str | None = None
    isl: int | None = None
    osl: int | None = None
    concurrencies: list[int] = field(default_factory=list)
    dataset: str | None = None
    mark: Mark | None = None
    concurrency_error: str | None = None
    itl_threshold_ms: float | None = None  # AIPerf goodput ITL threshold: the benchmark reports ITL
    ttft_threshold_ms: float | None = None  # AIPerf goodput TTFT threshold


@dataclass
class Recipe:
    path: str
    job: str
    variant: str | None
    layout: str                       # v1 | schema2
    data: YMap
    backend: str = "sglang"           # vllm | sglang | trtllm | mocker | other
    backend_declared: bool = False    # the recipe wrote backend.type / engine.type (else srtctl's default)
    model_path: str | None = None
    container: str | None = None
    identity_repo: str | None = None
    build: Build = field(default_factory=Build)
    gpu_type: str | None = None
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE
    disaggregated: bool = False
    roles: dict[str, Role] = field(default_factory=dict)
    connector: str | None = None      # the `connector:` shorthand of an engine that has one (its adapter reads it)
    connector_path: Path_ = ()
    benchmark: Benchmark = field(default_factory=Benchmark)
    frontend_type: str = "dynamo"     # dynamo (workers run `python -m dynamo.<engine>`) | vllm | sglang | trtllm_serve

    def mark(self, *path: str | int) -> Mark | None:
        return mark_of(self.data, path)

    @property
    def served_names(self) -> list[str]:
        return [str(r.value("served-model-name")) for r in self.roles.values() if r.flag("served-model-name")]

    family: Any = None                # filled by rules (the family table lives in rules/data)

    @property
    def model_names(self) -> list[str]:
        """Every name the model goes by: path/alias, identity repo, served names."""
        return [n for n in (self.model_path, self.identity_repo, *self.served_names) if n]


# --- helpers -------------------------------------------------------------------------------------------

def _int(value: Any, what: str, data: YMap, path: Path_) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str | float):
        raise RecipeError(f"`{what}` must be an integer, not {value!r}", *(mark_of(data, path) or (None, None)))
    try:
        return int(value)
    except ValueError:
        raise RecipeError(f"`{what}` must be an integer, not {value!r}",
                          *(mark_of(data, path) or (None, None))) from None


def _extra_flags(value: Any, mark: Mark | None, path: Path_) -> dict[str, Flag]:
    """Flags of an ``extra_args`` value: a flag string or a list of words."""
    text = " ".join(map(str, value)) if isinstance(value, list) else str(value or "")
    try:
        parsed = parse_command(text)
    except FlagSyntaxError as exc:
        raise RecipeError(f"`{path[-1]}`: {exc}", *(mark or (None, None))) from None
    return {name: Flag(parsed.spelled.get(name, name).lstrip("-"), name, val, mark, path, "extra_args")
            for name, val in parsed.flags.items()}


def _flags(raw: Any, path: Path_, data: YMap) -> dict[str, Flag]:
    """Normalise a flag mapping (plus its ``extra_args`` string/list) into canonical flags."""
    out: dict[str, Flag] = {}
    if raw is None:
        return out
    if not isinstance(raw, dict):
        raise RecipeError(f"`{'.'.join(map(str, path))}` must be a mapping of flags",
                          *(mark_of(data, path) or (None, None)))
    for key, value in raw.items():
        kpath = (*path, key)
        mark = mark_of(data, kpath)
        if key in ("extra_args", "extra-args"):
            out.update(_extra_flags(value, mark, kpath))
            continue
        name, negated = normalize_flag(str(key))
        if value is None:
            continue  # srtctl drops null flags
        if negated and isinstance(value, bool):
            value = not value
        out[name] = Flag(str(key), name, value, mark, kpath)
    return out


def _env(raw: Any, path: Path_, data: YMap, shared: bool = False) -> dict[str, EnvVar]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RecipeError(f"`{'.'.join(map(str, path))}` must be a mapping of variables",
                          *(mark_of(data, path) or (None, None)))
    return {str(k): EnvVar(str(k), "" if v is None else str(v).lower() if isinstance(v, bool) else str(v),
                           mark_of(data, (*path, k)), (*path, k), shared) for k, v in raw.items()}


def _threshold(value: Any) -> float | None:
    """A goodput threshold in ms (a number, not a boolean), else None."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _benchmark(data: YMap) -> Benchmark:
    raw = data.get("benchmark")
    if not isinstance(raw, dict):
        return Benchmark(mark=data.mark)
    bench = Benchmark(type=str(raw["type"]) if raw.get("type") is not None else None,
                      isl=_int(raw.get("isl"), "benchmark.isl", data, ("benchmark", "isl")),
                      osl=_int(raw.get("osl"), "benchmark.osl", data, ("benchmark", "osl")),
                      dataset=str(raw["dataset_name"]) if raw.get("dataset_name") is not None else None,
                      mark=mark_of(data, ("benchmark",)),
                      itl_threshold_ms=_threshold(raw.get("itl_threshold_ms")),
                      ttft_threshold_ms=_threshold(raw.get("ttft_threshold_ms")))
    try:
        bench.concurrencies = parse_concurrencies(raw.get("concurrencies"))
    except FlagSyntaxError as exc:
        bench.concurrency_error = str(exc)
    return bench


# --- layouts -----------------------------------------------------------------------------------------

def _v1_roles(recipe: Recipe) -> None:
    data = recipe.data
    res = data.get("resources") if isinstance(data.get("resources"), dict) else {}
    recipe.disaggregated = any(res.get(f"{r}_{k}") is not None
                               for r in ("prefill", "decode") for k in ("nodes", "workers"))
    names = ("prefill", "decode") if recipe.disaggregated else ("agg",)
    cfg_key = f"{recipe.backend}_config"
    shared = _env(data.get("environment"), ("environment",), data, shared=True)
    for name in names:
        key = V1_ROLE_KEYS[name]
        rpath = ("resources",)
        nodes = _int(res.get(f"{name}_nodes"), f"resources.{name}_nodes", data, (*rpath, f"{name}_nodes"))
        workers = _int(res.get(f"{name}_workers"), f"resources.{name}_workers", data, (*rpath, f"{name}_workers"))
        gpus = _int(res.get(f"gpus_per_{name}"), f"resources.gpus_per_{name}", data, (*rpath, f"gpus_per_{name}"))
        role = Role(name, nodes=nodes, workers=workers, gpus=gpus, gpus_explicit=gpus is not None,
                    colocated=nodes == 0)
        role.resource_marks = {k: mark_of(data, (*rpath, f"{name}_{k}")) for k in ("nodes", "workers")}
        role.resource_marks["gpus"] = mark_of(data, (*rpath, f"gpus_per_{name}"))
        role.flags_path = ("backend", cfg_key, key)
        role.env_path = ("backend", f"{key}_environment")
        role.mark = mark_of(data, role.flags_path)
        role.flags = _flags(get_path(data, role.flags_path), role.flags_path, data)
        role.env = {**shared, **_env(get_path(data, role.env_path), role.env_path, data)}
        recipe.roles[name] = role


def _schema2_roles(recipe: Recipe) -> None:
    data = recipe.data
    roles = data.get("roles")
    if roles is not None and not isinstance(roles, dict):
        raise RecipeError("`roles:` must be a mapping", *(recipe.mark("roles") or (None, None)))
    roles = roles or {}
    recipe.disaggregated = "prefill" in roles or "decode" in roles
    shared = _env(data.get("environment"), ("environment",), data, shared=True)
    for name, spec in roles.items():
        if name not in ("prefill", "decode", "agg"):
            continue
        spec = spec if isinstance(spec, dict) else {}
        rpath: Path_ = ("roles", name)
        nodes_raw = spec.get("nodes")
        colocated = isinstance(nodes_raw, str) and nodes_raw.lower() == "colocate"
        nodes = None if colocated else _int(nodes_raw, f"roles.{name}.nodes", data, (*rpath, "nodes"))
        gpus = _int(spec.get("gpus"), f"roles.{name}.gpus", data, (*rpath, "gpus"))
        role = Role(name, nodes=0 if colocated else nodes, colocated=colocated or nodes == 0,
                    workers=_int(spec.get("workers"), f"roles.{name}.workers", data, (*rpath, "workers")),
                    gpus=gpus, gpus_explicit=gpus is not None)
        role.resource_marks = {k: mark_of(data, (*rpath, k)) for k in ("nodes", "workers", "gpus")}
        role.flags_path = (*rpath, "args")
        role.env_path = (*rpath, "env")
        role.mark = mark_of(data, rpath)
        role.flags = _flags(spec.get("args"), role.flags_path, data)
        if spec.get("extra_args") is not None:
            epath = (*rpath, "extra_args")
            role.flags.update(_extra_flags(spec["extra_args"], mark_of(data, epath), epath))
        role.env = {**shared, **_env(spec.get("env"), role.env_path, data)}
        recipe.roles[name] = role


def _derive_gpus(recipe: Recipe) -> None:
    for role in recipe.roles.values():
        if role.gpus is None and role.nodes and role.workers:
            role.gpus = role.nodes * recipe.gpus_per_node // role.workers


def build_recipe(data: YMap, path: str, job: str = "", variant: str | None = None) -> Recipe:
    """The typed model of one resolved job document."""
    schema2 = data.get("schema") == 2
    recipe = Recipe(path=path, job=job or str(data.get("name", "")), variant=variant,
                    layout="schema2" if schema2 else "v1", data=data)
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    recipe.model_path = str(model["path"]) if model.get("path") is not None else None
    recipe.container = str(model["container"]) if model.get("container") is not None else None
    identity = data.get("identity") if isinstance(data.get("identity"), dict) else {}
    repo = get_path(identity, ("model", "repo"))
    recipe.identity_repo = repo if isinstance(repo, str) else None
    res = data.get("resources") if isinstance(data.get("resources"), dict) else {}
    recipe.gpu_type = str(res["gpu_type"]).lower() if res.get("gpu_type") is not None else None
    recipe.gpus_per_node = _int(res.get("gpus_per_node"), "resources.gpus_per_node", data,
                                ("resources", "gpus_per_node")) or DEFAULT_GPUS_PER_NODE
    if schema2:
        engine = data.get("engine")
        recipe.backend_declared = bool(engine.get("type") if isinstance(engine, dict) else engine)
        recipe.backend = str(engine.get("type") if isinstance(engine, dict) else engine or "sglang").lower()
        _schema2_roles(recipe)
    else:
        backend = data.get("backend") if isinstance(data.get("backend"), dict) else {}
        recipe.backend_declared = bool(backend.get("type"))
        recipe.backend = str(backend.get("type") or "sglang").lower()
        _v1_roles(recipe)
    _derive_gpus(recipe)
    adapter = engines.get(recipe.backend)
    recipe.build = _build(recipe, adapter, identity)
    recipe.benchmark = _benchmark(data)
    frontend = data.get("frontend")
    if isinstance(frontend, dict) and isinstance(frontend.get("type"), str):
        recipe.frontend_type = frontend["type"].lower()
    if adapter is not None and adapter.read_recipe is not None:
        adapter.read_recipe(recipe)
    return recipe


def _build(recipe: Recipe, adapter: EngineAdapter | None, identity: dict[str, Any]) -> Build:
    """The engine build the container implies (``identity.frameworks.<framework>`` wins), as its adapter reads it."""
    if adapter is None or adapter.recipe_build is None:
        return Build(source="model.container" if recipe.container else "", image=recipe.container,
                     engine=adapter.display if adapter is not None else recipe.backend)
    declared = get_path(identity, ("frameworks", adapter.framework or adapter.name))
    return adapter.recipe_build(recipe.container, str(declared) if declared else None)


def load_recipes(path: Path, display: str | None = None) -> list[Recipe]:
    """Every job of a recipe file. Raises :class:`RecipeError` (bad YAML/structure) or NotARecipe."""
    shown = display or str(path)
    data = load_yaml_file(path)
    if not looks_like_recipe(data):
        raise NotARecipe(f"{shown}: not an srt-slurm recipe (no model/resources/roles or base/override)")
    return [_built(job.data, shown, job.name, job.variant) for job in expand_jobs(data)]


def _built(data: YMap, shown: str, name: str, variant: str | None) -> Recipe:
    """One job; when it cannot be built, the error carries every schema error of the job, not the first."""
    try:
        return build_recipe(data, shown, name, variant)
    except RecipeError as exc:
        from .recipe_schema import validate

        errors = [v for v in validate(data) if v.severity == "error"]
        if errors:
            exc.violations = [(v.message, *(v.mark or (None, None))) for v in errors]
        raise
