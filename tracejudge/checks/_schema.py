"""JSON Schema validation; the one module that imports ``jsonschema``."""

from __future__ import annotations

from typing import Any

from tracejudge._errors import InputError, MissingDependencyError


def _validator(schema: dict[str, Any]) -> Any:
    try:
        import jsonschema
    except ImportError as exc:  # pragma: no cover - jsonschema is a core dependency
        raise MissingDependencyError("jsonschema", "dev") from exc
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise InputError(
            f"the check's JSON schema is invalid: {exc.message}", hint="fix `schema` in the rubric"
        ) from exc
    return cls(schema)


def validate_json(data: Any, schema: dict[str, Any]) -> list[str]:
    """Validation errors (empty when valid), each naming the JSON path."""
    validator = _validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}" for e in errors]


def check_schema(schema: dict[str, Any]) -> None:
    """Raise :class:`InputError` when ``schema`` is not a valid JSON Schema."""
    _validator(schema)
