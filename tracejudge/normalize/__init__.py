"""Raw spans -> TaskRecord, reading every convention of DESIGN 5.4."""

from tracejudge.normalize._cut import cut_short
from tracejudge.normalize._normalize import incompleteness, normalize

__all__ = ["cut_short", "incompleteness", "normalize"]
