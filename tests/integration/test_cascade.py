"""The cascade (TANDEM_CASCADE_ENCODER=mpnet, knowledge.cascade) on real Chroma with the real MiniLM and mpnet: every
record is embedded by both, and a search whose top two answers are close is re-scored as the weighted blend of the
two spaces' scores, which a KB served by mpnet alone reproduces."""

from __future__ import annotations

import pytest

from chains.runtime import open_kb
from core.encoders import load_encoder, threads_are_its_own
from knowledge.cascade import CascadeParams
from knowledge.chroma_kb import CASCADE, ChromaKnowledgeBase
from knowledge.ingest import QuestionRow
from tests.conftest import write_csv

pytestmark = pytest.mark.slow

ANSWERS = [
    {"answer_id": "refund", "title": "When do I get my refund?", "answer": "Refunds reach your card 5 days after we "
     "receive the return."},
    {"answer_id": "return", "title": "How do I return an item?", "answer": "Start a return under Account > Orders > "
     "Return within 30 days."},
    {"answer_id": "shipping", "title": "How long does shipping take?", "answer": "Standard shipping takes 2-4 "
     "business days."},
    {"answer_id": "password", "title": "I forgot my password", "answer": "Use 'Forgot password' on the sign-in page."},
]
QUESTIONS = [
    {"query": "where is my money for the returned jacket", "answer_id": "refund"},
    {"query": "refund still not on my card", "answer_id": "refund"},
    {"query": "i want to send back a pair of shoes", "answer_id": "return"},
    {"query": "how can i return something", "answer_id": "return"},
    {"query": "when will my parcel arrive", "answer_id": "shipping"},
    {"query": "delivery time to my country", "answer_id": "shipping"},
    {"query": "cannot log in, lost my password", "answer_id": "password"},
]
MESSAGE = "i sent the boots back last week, what happens with my money now?"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cascade-files")
    return [write_csv(folder / "answers.csv", ANSWERS), write_csv(folder / "questions.csv", QUESTIONS)]


def kb_of(encoder, folder, files, **cascade) -> ChromaKnowledgeBase:
    kb = ChromaKnowledgeBase(encoder, path=folder, **cascade)
    kb.ingest(files, progress=False)
    return kb


def test_an_unsure_search_is_scored_as_the_blend_of_both_spaces_and_a_sure_one_as_minilm_alone(settings, files,
                                                                                               tmp_path):
    minilm, mpnet = load_encoder("minilm", settings=settings), load_encoder("mpnet", settings=settings)
    alone = {name: {h.answer_id: h.score for h in kb_of(enc, tmp_path / name, files).search(MESSAGE, k=4)}
             for name, enc in (("minilm", minilm), ("mpnet", mpnet))}
    always = kb_of(minilm, tmp_path / "always", files, cascade_encoder=mpnet,
                   cascade=CascadeParams(margin=1.0, weight=0.3))  # every search is unsure
    evidence: dict[str, float] = {}
    hits = always.search(MESSAGE, k=4, evidence=evidence)
    assert evidence["cascade"] == 1.0
    for hit in hits:
        assert hit.score == pytest.approx(0.3 * alone["minilm"][hit.answer_id] + 0.7 * alone["mpnet"][hit.answer_id],
                                          abs=2e-6)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)

    never = kb_of(minilm, tmp_path / "never", files, cascade_encoder=mpnet, cascade=CascadeParams(margin=0.0))
    evidence = {}
    assert {h.answer_id: h.score for h in never.search(MESSAGE, k=4, evidence=evidence)} == \
        pytest.approx(alone["minilm"], abs=2e-6)
    assert "cascade" not in evidence


def test_the_stronger_encoders_vectors_follow_every_write_and_are_read_back_on_reopen(settings, files, tmp_path):
    minilm, mpnet = load_encoder("minilm", settings=settings), load_encoder("mpnet", settings=settings)
    kb = kb_of(minilm, tmp_path / "kb", files, cascade_encoder=mpnet)
    sibling = kb._space_collections[CASCADE]
    assert sibling.count() == kb._collection.count()
    kb.upsert_questions([QuestionRow(query="my refund is late", answer_id="refund")])
    assert sibling.count() == kb._collection.count()
    kb.remove("password")
    assert sibling.count() == kb._collection.count()
    reopened = ChromaKnowledgeBase(minilm, path=tmp_path / "kb", cascade_encoder=mpnet)
    snap, cascade = reopened._snap, reopened._snap.cascade
    assert cascade is not None and cascade.index.embeddings.shape == (len(snap.index), 768)
    assert cascade.index.texts == snap.index.texts


def test_the_setting_gives_the_served_kb_its_cascade_with_the_shipped_margin_and_weight(settings, files):
    configured = settings.model_copy(update={"cascade_encoder": "mpnet", "kb_collection": "cascade_setting_kb"})
    kb = open_kb(configured, load_encoder("minilm", settings=configured))
    kb.ingest(files, progress=False)
    assert kb._snap.cascade is not None and kb._snap.cascade.encoder.name == "mpnet"
    assert kb._snap.cascade.params == CascadeParams() and CascadeParams().max_words == 32
    served, own = kb._snap.cascade.encoder, threads_are_its_own("mpnet", configured)
    assert own == served.backend.startswith("onnx")  # exported: an ONNX session whose threads are its own
    # more threads only where they are its own; torch's count is process-wide and stays the primary encoder's
    assert served.threads == (configured.cascade_threads if own else configured.torch_threads)
    assert kb.encoder.threads == configured.torch_threads == 1 and configured.cascade_threads == 2
    default = settings.model_copy(update={"kb_collection": "cascade_setting_kb"})
    assert default.cascade_encoder == ""  # off by default
    assert open_kb(default, load_encoder("minilm", settings=default))._snap.cascade is None


def test_a_tuned_cascade_encoder_is_trained_on_the_kb_exported_and_served_once_made_live(settings, files, tmp_path):
    from core.encoders import EXPORT_FILE, active_tuned_folder, export_dir, folder_version, set_active_tuned_folder
    from offline.encoder_tuning import CASCADE_TUNING, tuned_cascade_for_kb

    configured = settings.model_copy(update={"cascade_encoder": "mpnet", "kb_collection": "cascade_tuned_kb"})
    minilm = load_encoder("minilm", settings=configured)
    base = kb_of(minilm, tmp_path / "base", files)
    folder = tuned_cascade_for_kb(base, configured, log=lambda _: None)
    stamp = (folder / "tandem-encoder.json").read_text()
    assert '"train_layers": 2' in stamp and CASCADE_TUNING.train_layers == 2 and folder.name.startswith("mpnet-kb-")
    assert f'"version": "{folder_version(folder)}"' in (export_dir(folder, configured.home) / EXPORT_FILE).read_text()
    assert tuned_cascade_for_kb(base, configured, log=lambda _: None) == folder  # the same KB: reused, not tuned again
    try:
        set_active_tuned_folder(configured.home, folder, "mpnet")
        assert active_tuned_folder(configured.home, "mpnet") == folder
        assert active_tuned_folder(configured.home) != folder  # MiniLM's own marker is another file
        kb = open_kb(configured, minilm)
        kb.ingest(files, progress=False)
        served = kb._snap.cascade.encoder
        assert served.name == f"mpnet-tuned-{folder_version(folder)[:8]}" and served.backend.startswith("onnx")
        assert served.threads == configured.cascade_threads
        # its vectors are the tuned model's, in a sibling collection of its own (a later tuning never reads them)
        vectors = kb._snap.cascade.index.embeddings
        assert vectors.shape == (len(kb._snap.index), 768)
        assert abs(vectors @ served.encode_passages(kb._snap.index.texts[:1])[0])[0] > 0.999
        assert kb._space_collections[CASCADE].name.endswith(served.name)
    finally:
        set_active_tuned_folder(configured.home, None, "mpnet")
    assert open_kb(configured, minilm)._snap.cascade.encoder.name == "mpnet"  # reset: the base model again
