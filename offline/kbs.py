"""Knowledge bases for training and evaluation, built as the product builds them: a throwaway Chroma KB, then
(unless asked not to) the encoder tuned on that KB's content, cached under ``$TANDEM_HOME/encoders``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.encoders import TransformerEncoder, load_encoder
from core.settings import get_settings
from knowledge.chroma_kb import ChromaKnowledgeBase
from knowledge.index import FusionParams
from knowledge.throwaway import throwaway_kb
from offline.encoder_tuning import tune_for_kb

# Intent benchmarks are not shops: CLINC150's small talk, travel and banking intents and Banking77's card questions
# are what the starter out-of-scope examples call unanswerable (knowledge.starter_examples), so their KBs go without.
INTENT_BENCHMARK = FusionParams(starter_examples=False)


def build_kb(answers_csv: Path, questions_csv: Path | None = None, *, tune: bool = True, id_column: str = "answer_id",
             where: dict[str, str] | None = None, log: Callable[[str], None] = print,
             progress: bool = False, params: FusionParams | None = None) -> ChromaKnowledgeBase:
    """A throwaway KB from CSVs; with ``tune``, re-embedded by the encoder tuned on it (trained once per content)."""
    base = load_encoder("minilm", settings=get_settings())
    kb = throwaway_kb(base, answers_csv, questions_csv, id_column=id_column, where=where, params=params)
    if not tune:
        return kb
    settings = get_settings()
    folder = tune_for_kb(kb, settings.home, progress=progress, log=log)
    tuned = TransformerEncoder(folder, "minilm-tuned", settings.torch_threads)
    tuned.passage_cache_path = settings.passage_cache_path  # the KB's stored texts were embedded once already
    return ChromaKnowledgeBase(tuned, path=kb.path, collection=kb.collection_name, params=kb.params)
