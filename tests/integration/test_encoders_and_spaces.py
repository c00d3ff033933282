"""Encoders behind one interface (MiniLM, its ONNX export, e5, micro-batching) and the knowledge base's language
spaces: a Chinese message is searched with e5, an answer is given in the customer's language, evidence is given."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from core.encoders import BatchingEncoder, OnnxEncoder, TransformerEncoder, load_encoder
from core.settings import get_settings
from knowledge import vectors
from knowledge.chroma_kb import ChromaKnowledgeBase
from knowledge.demo_kb import DEMO_FILES

pytestmark = pytest.mark.slow


def test_micro_batching_gives_the_same_vectors_in_fewer_passes(encoder):
    batching = BatchingEncoder(encoder)
    texts = [f"where is parcel number {i}, it is late" for i in range(24)]
    vectors: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i: vectors.__setitem__(i, batching.encode_queries([texts[i]])[0]))
               for i in range(len(texts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reference = encoder.encode_queries(texts)
    assert max(float(np.abs(vectors[i] - reference[i]).max()) for i in range(len(texts))) < 1e-5
    assert batching.messages == len(texts) and batching.passes < len(texts)
    lone = BatchingEncoder(encoder)
    lone.encode_queries(["just me"])
    assert (lone.passes, lone.messages) == (1, 1)  # alone: one pass at once, nothing waited for


def test_texts_of_mixed_lengths_get_the_vectors_each_gets_alone(encoder):
    """Passages are embedded in batches of similar length; every vector must still land on its own text's row."""
    from core.model_files import minilm_path

    texts = ["refund", "Standard shipping takes 3 to 5 working days inside the EU; express arrives the next day.",
             "", "where is my parcel", "How do I change the email address on my account, and will my orders keep it?",
             "hi"]
    for model in (encoder, TransformerEncoder(minilm_path(), "minilm")):
        together = model.encode_passages(texts, batch_size=2)
        alone = np.stack([model.encode_passages([text])[0] for text in texts])
        assert float(np.abs(together - alone).max()) < 1e-5, model.describe()


def test_onnx_export_matches_torch_the_gate_chooses_and_a_missing_quantization_falls_back_to_fp32_onnx(tmp_path):
    from core.encoders import INT8_FILE, export_dir, serving_encoder
    from core.model_files import minilm_path
    from offline.encoder_export import export_and_gate

    folder = minilm_path()
    out = export_dir(folder, tmp_path)  # where serving looks for it, with tmp_path as the data directory
    texts = ["how do I track my order", "where is my parcel", "reset my password", "forgot my login",
             "refund please", "money back for a broken kettle"] * 5
    labels = ["track", "track", "password", "password", "refund", "refund"] * 5
    out.mkdir(parents=True)
    record = export_and_gate(folder, out, texts, labels, log=lambda line: None)
    assert record["fp32_min_cosine"] > 0.9999 and record["chosen"] in ("onnx", "onnx-int8")
    assert (record["chosen"] == "onnx-int8") == (record["int8_top1_agreement"] >= record["gate"])
    exported = OnnxEncoder(out, "minilm", "model.onnx", record["version"])
    torch_vectors = TransformerEncoder(folder, "minilm").encode_queries(texts[:6])
    assert float((exported.encode_queries(texts[:6]) * torch_vectors).sum(1).min()) > 0.9999

    served = serving_encoder(folder, "minilm", tmp_path, "auto")
    assert (served.backend, served.problem) == (record["chosen"], "")
    (out / INT8_FILE).unlink()  # a quantization this export lacks, asked for by name: exact ONNX serves
    asked = serving_encoder(folder, "minilm", tmp_path, "onnx-int8")
    assert asked.backend == "onnx" and "no onnx-int8" in asked.problem
    assert serving_encoder(folder, "minilm", tmp_path, "torch").backend == "torch"


def test_e5_prefixes_queries_and_passages_and_is_multilingual():
    e5 = load_encoder("e5", settings=get_settings())
    query = e5.encode_queries(["我的订单到哪了"])[0]
    passages = e5.encode_passages(["怎么查询订单物流？", "忘记密码怎么办？", "How do I track my order?"])
    assert passages.shape == (3, e5.dim) and np.isclose(np.linalg.norm(query), 1.0, atol=1e-3)
    assert passages[0] @ query > passages[1] @ query and passages[2] @ query > passages[1] @ query
    assert not np.allclose(e5.encode_queries(["订单"]), e5.encode_passages(["订单"]))  # the prefixes differ


@pytest.mark.parametrize("message, answer_id", [("我的包裹怎么还没到", "zh_order_not_received"),
                                                ("我的 order 还没到，怎么查物流", "zh_track_order"),
                                                ("退貨政策是什麼", "zh_return_policy")])
def test_chinese_messages_search_the_e5_space(bilingual_kb, message, answer_id):
    assert bilingual_kb.space_for(message) == "zh" and bilingual_kb.encoder_for(message).name == "e5"
    evidence: dict[str, float] = {}
    hits = bilingual_kb.search(message, k=3, evidence=evidence)
    assert hits[0].answer_id == answer_id and hits[0].lang == "zh"
    assert {"dense_top", "dense_z", "agreement", "dense_margin"} <= set(evidence)


def test_an_ingest_stores_each_spaces_own_vectors(bilingual_kb, encoder):
    """The English and Chinese spaces are embedded side by side; each record's stored vector must be its own
    encoder's vector of its own text."""
    e5 = bilingual_kb.language_encoders["zh"]
    for collection, model in ((bilingual_kb._collection, encoder), (bilingual_kb._space_collections["zh"], e5)):
        stored = collection.get(include=["documents", "embeddings"], limit=40)
        assert len(stored["ids"]) == 40
        expected = model.encode_passages([doc or "" for doc in stored["documents"]])
        assert float(np.abs(np.asarray(stored["embeddings"], dtype=np.float32) - expected).max()) < 1e-4


def test_answers_come_in_the_customers_language(bilingual_kb):
    english = bilingual_kb.search("how do I track my order", k=1)[0]
    assert english.answer_id == "track_order" and english.lang == "en"
    assert bilingual_kb._in_language("track_order", "zh") == "zh_track_order"
    assert bilingual_kb._in_language("zh_track_order", "en") == "track_order"


def test_a_new_encoder_re_embeds_the_store_once(tmp_path, encoder, monkeypatch):
    from core.model_files import minilm_path

    kb = ChromaKnowledgeBase(encoder, path=tmp_path / "chroma")
    kb.ingest(DEMO_FILES[:2], progress=False)
    before = kb.version  # read now: the old object, asked later, would see the new encoder's vectors and embed back
    re_embeds: list[tuple[str, int]] = []  # (encoder version, records rewritten) per re-embedding
    original = vectors.reembed

    def counted(client, collection, new_encoder, got):  # a spy: the real re-embedding runs, and is counted
        re_embeds.append((new_encoder.version, len(got["ids"])))
        original(client, collection, new_encoder, got)

    monkeypatch.setattr(vectors, "reembed", counted)

    class Renamed(TransformerEncoder):  # the same weights under another version: as after `tandem kb tune`
        pass

    other = Renamed(minilm_path(), "other")
    other.version = "retuned000"
    reopened = ChromaKnowledgeBase(other, path=tmp_path / "chroma")
    assert reopened.version.endswith("-retune") and reopened.version != before
    assert reopened.search("how do I track my order", k=1)[0].answer_id == "track_order"
    assert re_embeds == [("retuned000", reopened.stats()["records"])]  # every stored record, by the new encoder
    again = ChromaKnowledgeBase(other, path=tmp_path / "chroma")  # opened again with it: nothing to rewrite
    assert again.version == reopened.version and len(re_embeds) == 1
