"""Validate diag's JSON outputs against the schemas it ships (diag/schemas/)."""

from __future__ import annotations

from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from diag import schemas


@cache
def _validator(name: str) -> Draft202012Validator:
    registry = Registry().with_resources(
        (f"{n}.schema.json", Resource.from_contents(schemas.load(n))) for n in schemas.NAMES)
    schema = schemas.load(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)


def validate(doc: Any, name: str) -> None:
    """Raise with every violation listed when ``doc`` does not match schema ``name``."""
    errors = sorted(_validator(name).iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, "\n".join(f"{list(e.path)}: {e.message[:300]}" for e in errors[:10])
