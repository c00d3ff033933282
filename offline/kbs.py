"""Knowledge bases for training and evaluation, built as the product builds them: a throwaway Chroma KB, then
(unless asked not to) the encoder tuned on that KB's content, cached under ``$TANDEM_HOME/encoders``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.encoders import Encoder, TransformerEncoder, load_encoder, load_tuned_cascade
from core.settings import get_settings
from knowledge.chroma_kb import ChromaKnowledgeBase
from knowledge.index import FusionParams
from knowledge.throwaway import throwaway_kb
from offline.encoder_tuning import tune_for_kb, tuned_cascade_for_kb

# Intent benchmarks are not shops: CLINC150's small talk, travel and banking intents and Banking77's card questions
# are what the starter out-of-scope examples call unanswerable (knowledge.starter_examples), so their KBs go without.
INTENT_BENCHMARK = FusionParams(starter_examples=False)


def cascade_encoder() -> Encoder | None:
    """The stronger encoder the product asks when unsure (TANDEM_CASCADE_ENCODER, knowledge.cascade), or None: the
    KBs that train and evaluate the router are built as the product builds its own."""
    settings = get_settings()
    if not settings.cascade_encoder:
        return None
    from chains.runtime import cascade_encoder as served  # the serving stack, only when a cascade is asked for

    return served(settings, settings.cascade_encoder)


def build_kb(answers_csv: Path, questions_csv: Path | None = None, *, tune: bool = True, id_column: str = "answer_id",
             where: dict[str, str] | None = None, log: Callable[[str], None] = print,
             progress: bool = False, params: FusionParams | None = None) -> ChromaKnowledgeBase:
    """A throwaway KB from CSVs; with ``tune``, re-embedded by the encoder tuned on it (trained once per content).
    With TANDEM_CASCADE_ENCODER set, its cascade too: with ``tune``, the cascade's encoder tuned on it as well."""
    base = load_encoder("minilm", settings=get_settings())
    cascade = cascade_encoder()
    kb = throwaway_kb(base, answers_csv, questions_csv, id_column=id_column, where=where, params=params,
                      cascade_encoder=None if tune else cascade)
    if not tune:
        return kb
    settings = get_settings()
    folder = tune_for_kb(kb, settings.home, progress=progress, log=log)
    tuned = TransformerEncoder(folder, "minilm-tuned", settings.torch_threads)
    tuned.passage_cache_path = settings.passage_cache_path  # the KB's stored texts were embedded once already
    if cascade is not None:  # the cascade's encoder is tuned on the KB too, as `tandem kb tune` tunes it
        cascade = load_tuned_cascade(tuned_cascade_for_kb(kb, settings, progress=progress, log=log),
                                     settings.cascade_encoder, settings=settings)
    return ChromaKnowledgeBase(tuned, path=kb.path, collection=kb.collection_name, params=kb.params,
                               cascade_encoder=cascade)
