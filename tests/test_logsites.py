"""The log-site extractor (tools/logsites.py) on small inline sources, and the committed site tables it wrote
(tools/data/logsites/): they load, their ids are unique and every pattern matches the line it describes."""

from __future__ import annotations

import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("logsites_tool", ROOT / "tools" / "logsites.py")
assert _spec and _spec.loader
logsites = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = logsites  # its dataclass looks its module up
_spec.loader.exec_module(logsites)
DATA = sorted(logsites.OUT.glob("*.jsonl"))

PY = '''\
import logging
import warnings
from vllm.logger import init_logger

kv_log = init_logger(__name__)


class EngineCore:
    def step(self, n, t, e):
        kv_log.warning("KV cache has %d blocks, %.2f%% used (%s)", n, 1.0, "x")
        logger.error(f"Step failed after {t:.1f}s on rank {n:d}: {e!r}")
        msg = f"bad rank {n}"
        raise RuntimeError(msg)

    def start(self, a, b):
        self.logger.exception("Engine %s failed to start", a)
        logging.critical("raw 100% %d")
        raise ValueError("Expected {} got {:.3f}".format(a, b))
        raise ConfigError("max_model_len " + str(a) + " too large")
        logger.error(e)
        warnings.warn("old API %s" % a)
        self.metrics.error("not a logger either")


def helper(args):
    log.warn("module-level {} brace", exc_info=True)
    logging.getLogger(__name__).warning("direct %s", args)
    warnings.warn(f"{args} is deprecated", FutureWarning)
    parser.error("--tp must divide the GPUs")
'''


def test_python_sites_are_read_with_their_levels_holes_and_functions() -> None:
    got = {(line, fn, level, exc, exc_info, pattern)
           for line, fn, level, exc, exc_info, pattern, _ in logsites.python_sites(PY)}
    assert got == {
        (10, "EngineCore.step", "warning", None, False, "KV cache has {int} blocks, {float}% used ({any})"),
        (11, "EngineCore.step", "error", None, False, "Step failed after {float}s on rank {int}: {any}"),
        (13, "EngineCore.step", "raise", "RuntimeError", False, "bad rank {any}"),   # via the local `msg`
        (16, "EngineCore.start", "exception", None, True, "Engine {any} failed to start"),
        (17, "EngineCore.start", "critical", None, False, "raw 100% %d"),             # no args: % printed as is
        (18, "EngineCore.start", "raise", "ValueError", False, "Expected {any} got {float}"),
        (19, "EngineCore.start", "raise", "ConfigError", False, "max_model_len {any} too large"),
        (20, "EngineCore.start", "error", None, False, None),                         # no text in the source
        (21, "EngineCore.start", "warning", "UserWarning", False, "old API {any}"),     # warnings prints it
        (26, "helper", "warning", None, True, "module-level {{}} brace"),
        (27, "helper", "warning", None, False, "direct {any}"),
        (28, "helper", "warning", "FutureWarning", False, "{any} is deprecated"),
        (29, "helper", "raise", "SystemExit", False, "--tp must divide the GPUs"),          # argparse's exit
    }


def test_the_raw_format_is_kept_as_written() -> None:
    formats = {line: fmt for line, *_, fmt in logsites.python_sites(PY)}
    assert formats[11] == "f'Step failed after {t:.1f}s on rank {n:d}: {e!r}'"
    assert formats[13] == "msg"


def _sites(source: str, path: str, release: str = "1.0") -> list:
    return logsites.sites_of("eng", "pkg", release, [(path, source)])


def test_a_site_keeps_its_id_while_its_text_and_function_stay() -> None:
    before = _sites(PY, "pkg/core.py")
    moved = _sites("\n\n\n" + PY, "pkg/core.py", release="2.0")
    assert [s.id for s in before] == [s.id for s in moved]
    assert [s.line + 3 for s in before] == [s.line for s in moved]
    reworded = _sites(PY.replace("bad rank", "wrong rank"), "pkg/core.py", release="2.0")
    assert len({s.id for s in before} ^ {s.id for s in reworded}) == 2          # that site alone changed id
    assert {s.id for s in _sites(PY, "pkg/other.py")}.isdisjoint(s.id for s in before)


def test_a_repeated_message_in_one_function_gets_its_own_id() -> None:
    src = 'def f():\n    raise ValueError("x")\n    raise ValueError("x")\n'
    first, second = _sites(src, "pkg/m.py")
    assert first.id != second.id and (first.pattern, second.pattern) == ("x", "x")


CPP = '''\
namespace nixl {
nixlAgent::nixlAgent(const std::string &name) : name_{name}, data_(nullptr) {
    if (name.empty()) {
        throw std::invalid_argument("Agent name must not be empty");
    }
}

nixl_status_t nixlAgent::registerMem(const nixl_reg_dlist_t &descs) {
    // NIXL_ERROR << "commented out";
    if (ret != NIXL_SUCCESS) {
        NIXL_ERROR << "Failed to register " << descs.size()
                   << " descriptors: " << nixlEnumStrings::statusStr(ret);
    }
    pool.enqueue([&]() { LOG(WARNING) << "retrying in lambda"; });
    throw std::runtime_error("bad backend: " + name);
    TLLM_LOG_ERROR("rank %d failed: %s", rank, msg.c_str());
    NIXL_WARN << absl::StrFormat("Only %d of %s done", a, b);
    NIXL_ERROR << status;
    return NIXL_SUCCESS;
}

template <class T>
void nixlDescList<T>::remDesc(const struct nixlDesc *desc) {
    switch (desc->kind) {
    default:
        throw std::out_of_range("Index is out of range");
    }
}
}
'''


def test_cpp_sites_are_read_by_regex_with_their_functions() -> None:
    got = [(line, fn, level, exc, pattern) for line, fn, level, exc, _, pattern, _ in logsites.native_sites(CPP, False)]
    assert got == [
        (4, "nixlAgent.nixlAgent", "raise", "std::invalid_argument", "Agent name must not be empty"),
        (11, "nixlAgent.registerMem", "error", None, "Failed to register {any} descriptors: {any}"),
        (14, "nixlAgent.registerMem", "warning", None, "retrying in lambda"),
        (15, "nixlAgent.registerMem", "raise", "std::runtime_error", "bad backend: {any}"),
        (16, "nixlAgent.registerMem", "error", None, "rank {int} failed: {any}"),
        (17, "nixlAgent.registerMem", "warning", None, "Only {int} of {any} done"),
        (18, "nixlAgent.registerMem", "error", None, None),
        (26, "nixlDescList.remDesc", "raise", "std::out_of_range", "Index is out of range"),
    ]
    assert {s.extractor for s in _sites(CPP, "src/core/agent.cpp")} == {"regex"}



def test_a_constructor_keeps_its_name_across_an_initialiser_list_with_a_lambda() -> None:
    src = """\
MasterService::MasterService(const Config &config)
    : scheduler_([this](const Record &r) {
          if (!r.ok) { LOG(WARNING) << "unmount of " << r.id << " failed"; }
      }),
      cleaner_([this] { Clear(); }),
      limits_{config.limit} {
    char close = '}';
    throw std::invalid_argument("Invalid heartbeat interval");
}
"""
    assert [(line, fn) for line, fn, *_ in logsites.native_sites(src, False)] == [
        (3, "MasterService.MasterService"), (8, "MasterService.MasterService")]

RS = '''\
impl<T: Send> Transport for Worker<T> {
    pub async fn connect(&self, addr: &str) -> anyhow::Result<()> {
        if let Some(x) = self.pending() {
            tracing::error!(%err, "failed to connect to {}: {e:?} after {:.2}s", addr, t);
        }
        warn!("lease {lease_id:x} expired");
        anyhow::bail!("no endpoint {name} in {{ns}}");
    }
}

fn free() -> Result<()> {
    Err(anyhow!("plain {}", 3))
}

impl Client {
    pub async fn new(config: Options) -> Result<Self> {
        let c = Connector::new(&config.urls).await.with_context(|| {
            format!("Unable to connect to etcd server at {}. Check etcd server status", config.urls.join(", "))
        })?;
        let lease = grant(c).await.context("creating primary lease")?;
        if lease.ttl() == 0 {
            return Err(error!("lease expired or revoked"));
        }
        error!("lease {} granted", lease.id());
        Ok(Client { c, lease })
    }
}
'''


def test_rust_sites_are_read_by_regex_with_brace_holes() -> None:
    got = [(line, fn, level, exc, pattern) for line, fn, level, exc, _, pattern, _ in logsites.native_sites(RS, True)]
    assert got == [
        (4, "Worker.connect", "error", None, "failed to connect to {any}: {any} after {float}s"),
        (6, "Worker.connect", "warning", None, "lease {hex} expired"),
        (7, "Worker.connect", "raise", "bail!", "no endpoint {any} in {{ns}}"),
        (12, "free", "raise", "anyhow!", "plain {any}"),
        # anyhow's context messages, and Dynamo's error! building the error returned (a log call elsewhere)
        (17, "Client.new", "raise", "with_context",
         "Unable to connect to etcd server at {any}. Check etcd server status"),
        (20, "Client.new", "raise", "context", "creating primary lease"),
        (22, "Client.new", "raise", "error!", "lease expired or revoked"),
        (24, "Client.new", "error", None, "lease {any} granted"),
    ]


@pytest.mark.parametrize(("pattern", "line", "matches"), [
    ("KV cache has {int} blocks, {float}% used ({any})", "KV cache has 12 blocks, 3.50% used (x y)", True),
    ("KV cache has {int} blocks", "KV cache has twelve blocks", False),
    ("Failed  to\nregister {any}", "Failed to register 3 descs", True),      # whitespace runs are loose
    ("module-level {{}} brace {hex}", "module-level {} brace 0x7f", True),
    ("lease {hex} expired", "lease zz expired", False),
])
def test_pattern_regex_matches_the_message_of_its_site(pattern: str, line: str, matches: bool) -> None:
    assert bool(logsites.pattern_regex(pattern).fullmatch(line)) is matches


def test_example_line_fills_each_hole_with_a_value_of_its_type() -> None:
    line = logsites.example_line("a {int} b {float} c {{x}} {any}")
    assert line == "a 42 b 3.14 c {x} value x"
    assert logsites.pattern_regex("a {int} b {float} c {{x}} {any}").fullmatch(line).groups() == (
        "42", "3.14", "value x")


def test_every_pinned_source_has_a_table_or_is_listed_unavailable() -> None:
    pins = tomllib.loads(logsites.PINS.read_text(encoding="utf-8"))
    written = {p.stem for p in DATA}
    assert written == {f"{s['engine']}-{s['release']}" for s in pins["source"]}
    assert {u["engine"] for u in pins["unavailable"]} == {"dynamo", "trtllm"}


@pytest.mark.parametrize("path", DATA, ids=[p.stem for p in DATA])
def test_a_committed_table_loads_with_unique_ids_and_matching_patterns(path: Path) -> None:
    sites = logsites.load(path)
    assert sites and all(f"{s.engine}-{s.release}" == path.stem for s in sites)
    assert len({s.id for s in sites}) == len(sites)
    assert {s.level for s in sites} <= {"error", "warning", "exception", "critical", "raise"}
    for pattern in {s.pattern for s in sites if s.pattern is not None}:
        assert logsites.pattern_regex(pattern).fullmatch(logsites.example_line(pattern)), pattern


def test_the_vllm_table_agrees_with_the_call_site_catalog() -> None:
    """Every traceback-logging call site of engines/vllm/catalog/call_sites.toml (written by another reader,
    tools/upstream_vocab.py) in vLLM 0.34.0 is a site of the 0.34.0 table at its line, with its message."""
    catalog = tomllib.loads((ROOT / "engines" / "vllm" / "catalog" / "call_sites.toml").read_text(encoding="utf-8"))
    table = {(Path(s.file).name, s.line): s for s in logsites.load(logsites.OUT / "vllm-0.34.0.jsonl")}
    rows = [r for r in catalog["site"] if "0.34.0" in r["versions"]]
    assert len(rows) == 10
    for row in rows:
        base, _, line = row["at"].rpartition(":")
        site = table[(base, int(line))]
        assert (site.exc_info, site.pattern) == (True, logsites.percent_pattern(row["message"])), row["at"]


def test_printf_length_modifiers_and_pointers_are_holes() -> None:
    """C++'s ``%zu``/``%ld``/``%lld`` are integers and ``%p`` a pointer (TLLM_LOG_*, NIXL's printf-style logs)."""
    assert logsites.percent_pattern("request id:%zu ctx:%ld at %p size=%lld (%.1f%%)") == (
        "request id:{int} ctx:{int} at {hex} size={int} ({float}%)")
