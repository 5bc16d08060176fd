"""What the sweep tests share: the procurement example's path and the convention fixtures' index."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tracejudge.schema import ManifestEntry

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "procurement"
RECORDED = ROOT / "tests" / "fixtures" / "traces"

# The index behind the recorded convention fixtures (tests/fixtures/traces/_recording.py), with content.
V1_TEXT = "Attachment v1. Payment terms.\nPrepayment shall not exceed 50,000 RMB per order. Net 30."
V2_TEXT = "Attachment v2. Payment terms.\nPrepayment shall not exceed 30,000 RMB per order. Net 30."


def recorded_manifest() -> list[ManifestEntry]:
    return [
        ManifestEntry(
            doc_id="C-17/attachment",
            version="v1",
            effective_from=datetime(2025, 1, 1, tzinfo=UTC),
            effective_to=datetime(2026, 3, 1, tzinfo=UTC),
            indexed_at=datetime(2025, 1, 2, tzinfo=UTC),
            metadata={"region": "CN"},
            content=V1_TEXT,
        ),
        ManifestEntry(
            doc_id="C-17/attachment",
            version="v2",
            effective_from=datetime(2026, 3, 1, tzinfo=UTC),
            indexed_at=datetime(2026, 3, 2, tzinfo=UTC),
            metadata={"region": "CN"},
            content=V2_TEXT,
        ),
    ]
