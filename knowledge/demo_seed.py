"""Seed the demo knowledge base (Northwind Goods) into an empty KB; called by `tandem init` / `make demo`."""

from __future__ import annotations

from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent / "demo"
DEMO_FILES = (DEMO_DIR / "answers.csv", DEMO_DIR / "questions.csv")


def seed_demo_kb() -> str:
    """Ingest the demo answers and questions when the KB is empty; one status line either way."""
    from knowledge.retrieval import get_kb

    kb = get_kb()
    if len(kb):
        return f"knowledge base already has {len(kb)} answers (version {kb.version})"
    report = kb.ingest(DEMO_FILES, progress=True)
    return f"demo knowledge base: {report.summary()}"
