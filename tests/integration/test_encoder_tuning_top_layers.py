"""Tuning only an encoder's top layers (``TuneParams.train_layers``, how mpnet is tuned on a KB): the kept lower
layers' output gives the same vectors as the whole model, and only the top layers learn. Real MiniLM, a few demo
answers (seconds on 2 cores)."""

from __future__ import annotations

from dataclasses import replace

import torch
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer

from core.encoders.transformer import mean_pooled
from core.model_files import minilm_path
from offline.datasets import read_csv
from offline.encoder_tuning import TopLayers, TuneParams, tune
from tests.conftest import DEMO

TEXTS = ["how long does shipping take", "can i send back shoes that dont fit",
         "All products sold by Northwind Goods come with a 2-year warranty from the date of delivery. It covers "
         "manufacturing defects in materials and workmanship, and you don't need to register your product. " * 2]


def test_the_kept_lower_layers_give_the_whole_models_vectors_for_short_and_long_texts_together():
    folder = minilm_path()
    model, tokenizer = AutoModel.from_pretrained(str(folder)), AutoTokenizer.from_pretrained(str(folder))
    model.eval()
    with torch.no_grad():
        tokens = tokenizer(TEXTS, padding=True, truncation=True, max_length=128, return_tensors="pt")
        whole = mean_pooled(model(**tokens).last_hidden_state, tokens["attention_mask"])
        top = TopLayers(model, tokenizer, TEXTS, count=2, progress=False)
        model.eval()  # TopLayers leaves the model training (dropout on); compare without it
        assert len(top.states[TEXTS[2]]) > TopLayers._SHORT >= len(top.states[TEXTS[0]])  # both length groups
        assert torch.allclose(top(TEXTS), whole, atol=1e-5)
        top.restore()
        assert len(model.encoder.layer) == 6


def test_a_top_layer_tuning_changes_the_top_layers_only_and_saves_a_whole_model(tmp_path):
    answers = {r["answer_id"]: r["answer"] for r in read_csv(DEMO / "answers.csv")[:6]}
    questions: dict[str, list[str]] = {}
    for row in read_csv(DEMO / "questions.csv"):
        if row["answer_id"] in answers:
            questions.setdefault(row["answer_id"], []).append(row["query"])
    params = replace(TuneParams(), train_layers=1, batch_size=4, learning_rate=1e-3)
    stamp = tune(minilm_path(), questions, answers, tmp_path / "tuned", "test", params, progress=False,
                 log=lambda _: None, name="minilm")
    assert stamp["params"]["train_layers"] == 1 and stamp["steps"] > 0 and stamp["name"] == "minilm-tuned"
    before, after = load_file(str(minilm_path() / "model.safetensors")), load_file(str(tmp_path / "tuned" / "model.safetensors"))
    shared = sorted(set(before) & set(after))
    assert len(shared) >= len(after) - 1  # the same weights (a saved model may drop the position-id buffer)
    changed = {name.split(".layer.")[1].split(".")[0] if ".layer." in name else name
               for name in shared if not torch.equal(before[name], after[name])}
    assert changed == {"5"}, changed  # the sixth (last) layer, and nothing else
