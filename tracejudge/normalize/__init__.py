"""Raw spans -> TaskRecord, reading every convention of DESIGN 5.4."""

from tracejudge.normalize._normalize import incompleteness, normalize

__all__ = ["incompleteness", "normalize"]
