"""tracejudge: localize why a retrieval-augmented agent answered wrong, from its traces."""

from tracejudge._errors import (
    InputError,
    MissingDependencyError,
    StoreDamageError,
    StoreError,
    StoreUnreachableError,
    TracejudgeError,
)
from tracejudge._redact import redact, redact_data

__version__ = "0.1.0"

__all__ = [
    "InputError",
    "MissingDependencyError",
    "StoreDamageError",
    "StoreError",
    "StoreUnreachableError",
    "TracejudgeError",
    "__version__",
    "redact",
    "redact_data",
]
