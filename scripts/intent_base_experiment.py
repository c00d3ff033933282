"""Experiment: does an intent-adapted base encoder lift the KB-tuned encoder's top-1 on natural messages?

IntentBERT-style: MiniLM is first tuned contrastively on natural customer messages from public intent data
(CLINC150 in-scope train, Banking77 train part A, HINT3 train part A; no Bitext), then tuned on the Bitext FAQ
KB exactly as `tandem kb tune` does. Both encoders are then measured on the hand-written *development* set
(never the held-out set): top-1 of the KB's hybrid search as the chain runs it, dense-only top-1, and the
max-cosine out-of-scope AUROC. The product does not use this path; this script only measures it.

Usage (about 10 minutes a step on 2 cores; folders are reused when they exist):
    .venv/bin/python scripts/intent_base_experiment.py OUT_DIR [SEED]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from core.encoders import STAMP_FILE, TransformerEncoder
from core.model_files import minilm_path
from knowledge.chroma_kb import ChromaKnowledgeBase
from offline import datasets as ds
from offline.encoder_tuning import TuneParams, tune
from offline.kbs import build_kb


def intent_questions() -> dict[str, list[str]]:
    """In-scope train messages of the public intent sets, by dataset-qualified intent (train splits only)."""
    questions: dict[str, list[str]] = {}
    for q in ds.clinc("train"):
        if not q.needs_llm:
            questions.setdefault(f"clinc/{q.answer_id}", []).append(q.text)
    for q in ds.banking("train") + ds.hint3("train"):
        if not q.needs_llm and ds.in_split_a(q.text):
            questions.setdefault(f"{q.group}/{q.answer_id}", []).append(q.text)
    return questions


def measure(encoder_folder: Path, kb: ChromaKnowledgeBase, questions: dict[str, list[str]]) -> dict[str, float]:
    encoder = TransformerEncoder(encoder_folder, "minilm-tuned")
    tuned_kb = ChromaKnowledgeBase(encoder, path=kb.path, collection=kb.collection_name, params=kb.params)
    dev = ds.bitext_dev()
    in_scope = [q for q in dev if not q.needs_llm]
    hybrid = np.mean([(hits := tuned_kb.search(q.text, k=3)) != [] and hits[0].answer_id == q.answer_id
                      for q in in_scope])
    labels = [a for a, texts in questions.items() for _ in texts]
    sims = encoder.encode_queries([q.text for q in dev]) @ encoder.encode_passages(
        [t for texts in questions.values() for t in texts]).T
    dense = np.mean([labels[int(np.argmax(sims[i]))] == q.answer_id for i, q in enumerate(dev) if not q.needs_llm])
    auroc = roc_auc_score([q.needs_llm for q in dev], -sims.max(1))
    return {"dev_top1_hybrid": round(float(hybrid), 4), "dev_top1_dense": round(float(dense), 4),
            "dev_maxcos_auroc": round(float(auroc), 4), "n_in_scope": len(in_scope)}


def main(out: Path, seed: int) -> None:
    params = TuneParams(seed=seed)
    intent_base = out / f"intent-base-{seed}"
    if not (intent_base / STAMP_FILE).is_file():
        tune(minilm_path(), intent_questions(), {}, intent_base, "intent",
             TuneParams(seed=seed, answer_text_share=0.0))
    answers_csv, questions_csv = ds.write_kb_csvs(out / "bitext-kb", ds.bitext_answers(),
                                                  [(q.text, q.answer_id) for q in ds.bitext("train")])
    kb = build_kb(answers_csv, questions_csv, tune=False)  # tuned below from each base, not by tune_for_kb
    questions, answers = kb.training_texts()
    for name, base in (("minilm", minilm_path()), ("intent", intent_base)):
        folder = out / f"bitext-on-{name}-{seed}"
        if not (folder / STAMP_FILE).is_file():
            tune(base, questions, answers, folder, "bitext", params, progress=False)
        print(json.dumps({"base": name, "seed": seed, **measure(folder, kb, questions)}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 13)
