"""The demo knowledge base (Northwind Goods, English and Chinese): seeded into an empty KB on first start."""

from __future__ import annotations

from pathlib import Path

from knowledge.base import KnowledgeBase

DEMO_DIR = Path(__file__).resolve().parent / "demo"
DEMO_FILES = (DEMO_DIR / "answers.csv", DEMO_DIR / "questions.csv", DEMO_DIR / "answers_zh.csv",
              DEMO_DIR / "questions_zh.csv")


def seed_demo_kb(kb: KnowledgeBase) -> str:
    """Ingest the demo answers and questions when the KB is empty; one status line either way."""
    if len(kb):
        return f"knowledge base already has {len(kb)} answers (version {kb.version})"
    report = kb.ingest(DEMO_FILES, progress=True)
    return f"demo knowledge base: {report.summary()}"
