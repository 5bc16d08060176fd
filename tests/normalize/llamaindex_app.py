"""The LlamaIndex app both LlamaIndex fixture sets recorded (record_llamaindex.py): its documents,
question, scripted answers and the local server's embedding scores."""

from __future__ import annotations

from pathlib import Path

TRACES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"

CLAUSE_V2 = "Prepayment shall not exceed 30,000 RMB per order."
CLAUSE_V1 = "Prepayment shall not exceed 50,000 RMB per order."
V1 = ("C-17/attachment", "v1", f"Contract C-17 with supplier Hengda, attachment v1 (2025). {CLAUSE_V1}", "CN")
V2 = ("C-17/attachment", "v2", f"Attachment v2, effective 2026-03-01, replaces v1. {CLAUSE_V2}", "EU")
MAIN = ("C-17/main", "v3", "Contract C-17 main terms. Payment terms: net 30 days after delivery.", "CN")
QUESTION = "Can we prepay 45,000 RMB to supplier Hengda under contract C-17?"
ANSWER_STALE = "Yes: contract C-17 allows prepayment up to 50,000 RMB, so 45,000 RMB is fine."
ANSWER_RIGHT = "No: attachment v2 of C-17 caps prepayment at 30,000 RMB; 45,000 RMB is over the limit."
SCORES = {"v1": 0.6205, "v2": 0.3705, "v3": 0.3241}  # cosine of the server's bag-of-words vectors
