"""Raw spans -> TaskRecord, reading every convention of DESIGN 5.4."""

from tracejudge.normalize._normalize import normalize

__all__ = ["normalize"]
