"""GitHub Actions workflow commands: ``::error file=...,line=...,col=...,title=...::message``."""

from __future__ import annotations

from collections.abc import Sequence

from diag.rules.finding import Finding

LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(f: Finding) -> str:
    props = []
    if f.location is not None:
        props.append(f"file={_prop(f.location.path)}")
        if f.location.line:
            props.append(f"line={f.location.line}")
            if f.location.col:
                props.append(f"col={f.location.col}")
    props.append(f"title={_prop(f'{f.code} {f.name}')}")
    body = f.message + (f"\nfix: {f.fix}" if f.fix else "")
    if f.location is None and f.endpoint:
        body = f"{f.endpoint}: {body}"
    return f"::{LEVELS.get(f.severity, 'warning')} {','.join(props)}::{_data(body)}"


def render_github(findings: Sequence[Finding]) -> str:
    return "".join(annotation(f) + "\n" for f in findings)
