"""vLLM's KV-connector lines: NIXL transfer metrics, transfer failures, lease expiry, KV load failures; and the
metrics line as a column spec for the bulk path."""

from __future__ import annotations

import re

from diag.parsers.engine import ColumnSpec
from diag.parsers.formats import declare, record_parser
from diag.parsers.records import Header, KVExpiry, KVLoadFailure, KVTransfer, NixlFailure

KV_METRICS = declare(
    "vllm-kv-transfer-metrics", "record", r"KV Transfer metrics: (?:KVConnectorType: (?P<ctype>\w+), )?(?P<body>.+)$",
    samples=[
        "(APIServer pid=205253) INFO 09-26 10:12:01 [metrics.py:98] KV Transfer metrics: Num successful transfers=1, "
        "Avg xfer time (ms)=9.862, P90 xfer time (ms)=9.862, Avg post time (ms)=5.693, P90 post time (ms)=5.693, "
        "Avg MB per transfer=70.0, Throughput (MB/s)=7097.952, Avg number of descriptors=56.0",
        "(APIServer pid=9) INFO 10-01 08:00:00 [metrics.py:110] KV Transfer metrics: NixlConnector={'Num successful "
        "transfers': 4, 'Avg xfer time (ms)': 1.381, 'Throughput (MB/s)': 2500.0, 'Num failed transfers': 1}",
        "(APIServer pid=9) INFO 09-20 08:00:00 [metrics.py:90] KV Transfer metrics: num_successful_transfers=12",
    ],
    emits="kv_transfer",
    engine="vllm",
    triggers=("KV Transfer metrics",),
    doc="NixlConnector / Mooncake / MultiConnector stats; unknown keys are kept",
)
_MULTI = re.compile(r"(?P<name>\w+)=\{(?P<body>[^{}]*)\}")
_DICT_KV = re.compile(r"'(?P<key>[^']+)':\s*(?P<val>-?[\d.]+(?:e[-+]?\d+)?|nan|inf)")


@record_parser(KV_METRICS)
def _kv_metrics(m: re.Match[str], line: int, hdr: Header, **kw: object) -> KVTransfer | None:
    body = m["body"]
    multi = list(_MULTI.finditer(body)) if "={" in body else []
    if multi:
        connector = multi[0]["name"]
        values = [(k["key"], float(k["val"])) for mm in multi for k in _DICT_KV.finditer(mm["body"])]
    else:
        connector = m["ctype"]
        values = []
        for part in body.split(", "):  # "Key (unit)=1.5": keys hold no ", ", values are numbers
            key, eq, val = part.rpartition("=")
            if eq and key[:1].isalpha():
                try:
                    values.append((key.strip(), float(val)))
                except ValueError:
                    continue
    if not values:
        return None
    return KVTransfer(line, connector=connector, values=tuple(values), **kw)  # type: ignore[arg-type]


NIXL_FAILURE = declare(
    "vllm-nixl-failure", "record",
    r"NIXL transfer failure: (?P<ftype>[a-z_]+)(?:\. (?P<detail>.*?))?(?: \| Context: (?P<ctx>\{.*\})|\s*$)",
    samples=[
        "(Worker_TP0_EP0 pid=865) ERROR 05-01 15:00:23 [nixl_connector.py:1263] NIXL transfer failure: "
        "handshake_setup_failed | Context: {'failure_type': 'handshake_setup_failed', 'request_id': None, "
        "'engine_id': 'c92321f8', 'remote_engine_id': 'b6b76ae8'}",
        "(Worker_DP1_TP0_EP1 pid=77) ERROR 08-06 12:40:00 [worker.py:512] NIXL transfer failure: transfer_failed. "
        "Marking blocks as invalid | Context: {'failure_type': 'transfer_failed', 'request_id': 'cmpl-9', "
        "'xfer_state': 'ERR'}",
    ],
    emits="nixl_failure",
    engine="vllm",
    triggers=("NIXL transfer failure",),
)
_CTX_ITEM = re.compile(r"'(?P<k>[^']+)':\s*(?P<v>'[^']*'|None|True|False|-?[\d.]+|\[[^\]]*\])")


@record_parser(NIXL_FAILURE)
def _nixl_failure(m: re.Match[str], line: int, hdr: Header, **kw: object) -> NixlFailure:
    ctx = tuple((c["k"], c["v"].strip("'")) for c in _CTX_ITEM.finditer(m["ctx"] or ""))
    req = dict(ctx).get("request_id")
    return NixlFailure(line, ftype=m["ftype"], request_id=None if req in (None, "None") else req,
                       detail=m["detail"], context=ctx, **kw)  # type: ignore[arg-type]


NIXL_LEGACY = declare(
    "vllm-nixl-failure-legacy", "record",
    r"Handshake with (?P<hs_engine>\S+) failed|Handshake failed for request (?P<hs_req>\S+?),"
    r"|NIXL transfer failed for request (?P<req1>\S+) with state (?P<state>\S+?)\."
    r"|NIXL transfer exception for request (?P<req2>\S+?)\."
    r"|NIXL transfer setup/initiation failed for request (?P<req3>\S+?)\."
    r"|NIXL send_notif failed for request (?P<req4>\S+?):|(?P<hash>NIXL compatibility hash mismatch)"
    r"|(?P<ucx>UCX\s+ERROR)\s*(?P<ucx_msg>.*)|(?P<disc>NIXL_ERR_REMOTE_DISCONNECT)"
    r"|^\s*\d+\s+\S*/libuct[-\w]*\.so[.\d]*\((?P<uct>uct_\w+)\+0x",
    samples=[
        "(Worker_TP0 pid=12) ERROR 11-22 06:57:51 [nixl_connector.py:548] NIXL transfer failed for request "
        "cmpl-abc with state ERR. Marking blocks as invalid.",
        "(Worker_TP0 pid=12) ERROR 11-22 06:57:52 [nixl_connector.py:610] NIXL send_notif failed for request "
        "cmpl-abd: P worker blocks will be freed after timeout. This may indicate network issues.",
        "[1784621081.896649] [pod-0:537  :1]       srd_iface.c:221  UCX  ERROR send completion[0] with error on "
        "rdmap132s0/1: Work Request Flushed Error, vendor_err 0x1",
        # a frame of UCX's crash backtrace (src/ucs/debug/debug.c) in its transport layer, libuct
        # (https://github.com/sgl-project/sglang/issues/6694)
        " 5  /usr/local/lib/python3.10/dist-packages/nixl.libs/libuct-b36f5a30.so.0.0.0(uct_tcp_ep_am_bcopy+0x8a) "
        "[0x7fbeb852804a]",
    ],
    emits="nixl_failure",
    engine="vllm",
    triggers=("Handshake", "NIXL transfer failed", "NIXL transfer exception", "NIXL transfer setup",
              "NIXL send_notif failed", "NIXL compatibility hash mismatch", "UCX", "NIXL_ERR_REMOTE_DISCONNECT",
              "/libuct"),
    doc="pre-#32031 NIXL error wordings and transport-level (UCX) errors: an ERROR line of UCX's, a frame of a "
        "crash backtrace in UCX's transport layer (libuct's uct_* functions: the process crashed moving data)",
)


@record_parser(NIXL_LEGACY)
def _nixl_legacy(m: re.Match[str], line: int, hdr: Header, **kw: object) -> NixlFailure:
    if m["hs_engine"] or m["hs_req"]:
        ftype, req = "handshake_failed", m["hs_req"]
    elif m["req1"]:
        ftype, req = "transfer_failed", m["req1"]
    elif m["req2"]:
        ftype, req = "transfer_exception", m["req2"]
    elif m["req3"]:
        ftype, req = "transfer_setup_failed", m["req3"]
    elif m["req4"]:
        ftype, req = "notification_failed", m["req4"]
    elif m["hash"]:
        ftype, req = "compatibility_hash_mismatch", None
    else:
        ftype, req = "transport_error", None
    detail = m["ucx_msg"] or m["state"] or m["hs_engine"] or (m["uct"] and f"crashed in UCX's transport ({m['uct']})")
    return NixlFailure(line, ftype=ftype, request_id=req, detail=detail, **kw)  # type: ignore[arg-type]


NIXL_PUSH = declare(
    "vllm-nixl-push-failure", "record",
    r"Unrecognized request (?P<notif>\S+) notif \(may have expired\)"
    r"|NixlPushConnector: registration for request (?P<reg>\S+) timed out after (?P<after>[\d.]+)s",
    samples=[  # vLLM >= 0.31 push mode (nixl/push_worker.py:791, nixl/push_scheduler.py:323)
        "(Worker_DP0_TP0 pid=124) WARNING 08-12 14:20:01 [push_worker.py:791] Unrecognized request cmpl-7f3a-0 notif "
        "(may have expired).",
        "(EngineCore_DP0 pid=123) WARNING 08-12 14:20:31 [push_scheduler.py:323] NixlPushConnector: registration for "
        "request cmpl-7f3a-0 timed out after 30.0s without a push completion",
    ],
    emits="nixl_failure",
    engine="vllm",
    triggers=("notif (may have expired)", "NixlPushConnector: registration"),
    doc="push-mode NIXL: a notification for a request no longer known, a registration no push ever completed",
)


@record_parser(NIXL_PUSH)
def _nixl_push(m: re.Match[str], line: int, hdr: Header, **kw: object) -> NixlFailure:
    if m["notif"]:
        return NixlFailure(line, ftype="notification_unrecognized", request_id=m["notif"], **kw)  # type: ignore[arg-type]
    return NixlFailure(line, ftype="push_timeout", request_id=m["reg"], detail=f"after {m['after']}s",
                       **kw)  # type: ignore[arg-type]


KV_EXPIRY = declare(
    "vllm-kv-lease-expiry", "record",
    r"Releasing expired KV blocks for request (?P<req>\S+) which were retrieved by (?P<n>\d+) "
    r"(?:remote|decode) worker\(s\)"
    r"|Potentially invalid KV blocks for unrecognized request (?P<inv>\S+) were retrieved"
    r"|Declining expired remote read for (?P<dec>\S+?) from engine"
    r"|Force freed expired request: (?P<ff>\S+?)\.(?:\s|$)",
    samples=[
        "(Worker_DP0_TP0_EP0 pid=41) WARNING 08-06 12:50:01 [worker.py:1803] Releasing expired KV blocks for request "
        "cmpl-77 which were retrieved by 0 remote worker(s) before lease expired.",
        "(EngineCore_DP0 pid=7) ERROR 09-29 01:02:03 [nixl_connector.py:1101] Potentially invalid KV blocks for "
        "unrecognized request cmpl-1a were retrieved by a decode worker. They may have expired.",
        "(Worker_DP3_TP1_EP25 pid=649) ERROR 08-29 09:12:47 [mooncake_connector.py:233] Force freed expired request: "
        "chatcmpl-3566-b6f0. Reason: Request exceeded timeout threshold (10 seconds)",
    ],
    emits="kv_expiry",
    engine="vllm",
    triggers=("expired KV blocks", "invalid KV blocks", "Declining expired", "Force freed expired"),
)


@record_parser(KV_EXPIRY)
def _kv_expiry(m: re.Match[str], line: int, hdr: Header, **kw: object) -> KVExpiry:
    if m["req"]:
        return KVExpiry(line, event="expired", request_id=m["req"], n_workers=int(m["n"]), **kw)  # type: ignore[arg-type]
    if m["inv"]:
        return KVExpiry(line, event="invalid", request_id=m["inv"], **kw)  # type: ignore[arg-type]
    if m["dec"]:
        return KVExpiry(line, event="declined", request_id=m["dec"], **kw)  # type: ignore[arg-type]
    return KVExpiry(line, event="force_freed", request_id=m["ff"], **kw)  # type: ignore[arg-type]


KV_LOAD = declare(
    "vllm-kv-load-failure", "record",
    r"Failing (?P<n>\d+) request\(s\) due to KV load failure \(failure_policy=\w+, (?P<tok>\d+) tokens affected\)"
    r"|Recovered from KV load failure: (?P<rn>\d+) request\(s\) rescheduled \((?P<rtok>\d+) tokens affected\)",
    samples=[
        "(EngineCore_DP2 pid=88) ERROR 08-06 12:41:10 [scheduler.py:1710] Failing 3 request(s) due to KV load failure "
        "(failure_policy=fail, 24576 tokens affected). Request IDs: {'cmpl-1', 'cmpl-2', 'cmpl-3'}",
        # the logged message, quoted in https://github.com/local-inference-lab/vllm/issues/191
        "Recovered from KV load failure: 1 request(s) rescheduled (784 tokens affected)",
    ],
    emits="kv_load_failure",
    engine="vllm",
    triggers=("KV load failure",),
)


@record_parser(KV_LOAD)
def _kv_load(m: re.Match[str], line: int, hdr: Header, **kw: object) -> KVLoadFailure:
    if m["n"]:
        return KVLoadFailure(line, n_requests=int(m["n"]), tokens=int(m["tok"]), recovered=False, **kw)  # type: ignore[arg-type]
    return KVLoadFailure(line, n_requests=int(m["rn"]), tokens=int(m["rtok"]), recovered=True, **kw)  # type: ignore[arg-type]


# A whole plain ``KV Transfer metrics`` line of ``key=number`` pairs, for the bulk path (keys hold no ``,``
# or ``=``); the rest (dict bodies, glued or torn lines) takes the line parser.
_NUM = r"-?[0-9]+(?:\.[0-9]+)?"
_KEY = r"[A-Za-z](?:[A-Za-z0-9 ()/_%.-]*[A-Za-z0-9()/_%.-])?"
KV_COLUMNS = ColumnSpec(
    "kv_transfer", KV_METRICS.triggers[0],
    (r"(?:\((?P<proc>[^()]+?) pid=(?P<pid>[0-9]+)\) )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
     r"(?P<md>[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}) \[[^\]\s]+:[0-9]+\] KV Transfer metrics: "
     rf"(?:KVConnectorType: (?P<ctype>[A-Za-z0-9_]+), )?(?P<body>{_KEY}={_NUM}(?:, {_KEY}={_NUM})*)",),
    groups={"md": "md", "proc": "proc", "ctype": "connector", "body": "body"},
)
