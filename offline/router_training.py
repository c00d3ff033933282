"""`tandem router train`: fit the learned router, calibrate it, and fit the combined stacker.

Data (all from train/valid files; test files are never read here):
- learned model: MiniLM embedding + interpretable features -> needs-LLM, on the "A" part of each train file
  (in-scope questions as 0; CLINC out-of-scope, Banking77's 27 held-out intents and tau-bench tasks as 1);
- calibration and stacking: validation queries scored against a real knowledge base built from train data
  (CLINC valid vs CLINC train; the "B" part of Banking77/Bitext/HINT3 train vs a KB of their "A" part;
  tau-bench dev and a held-out slice of train vs the demo shop KB). Platt scaling for `learned`, and
  logistic regressions for `similarity` and `combined`, fitted here, make their outputs probabilities.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from chains.routers.artifacts import SHIPPED_ARTIFACT
from chains.routers.base import RouteContext
from chains.routers.combined import LEARNED_LOGIT_CLIP
from chains.routers.learned import learned_inputs
from core.encoders import Encoder, load_encoder
from offline import datasets as ds
from offline.datasets import Query


@dataclass
class ScoredSet:
    queries: list[Query]
    vectors: np.ndarray
    kb_top: np.ndarray
    kb_margin: np.ndarray
    top_answer: list[str]


def embed_all(texts: Sequence[str], encoder: Encoder | None = None) -> np.ndarray:
    encoder = encoder or load_encoder()
    return encoder.encode_queries(list(texts), batch_size=64) if texts else np.zeros((0, encoder.dim), np.float32)


def score_against_kb(kb, queries: list[Query], vectors: np.ndarray | None = None, k: int = 3) -> ScoredSet:
    vectors = embed_all([q.text for q in queries]) if vectors is None else vectors
    tops, margins, answers = [], [], []
    for query, vector in zip(queries, vectors):
        context = RouteContext(vector=vector, hits=kb.search(query.text, k=k, vector=vector))
        tops.append(context.kb_top)
        margins.append(context.kb_margin)
        answers.append(context.hits[0].answer_id if context.hits else "")
    return ScoredSet(queries, vectors, np.array(tops), np.array(margins), answers)


def build_validation_sets(workdir: Path, log: Callable[[str], None]) -> tuple[list[Query], list[ScoredSet]]:
    """Returns the learned model's training queries and the scored validation sets (one per dataset)."""
    from knowledge.chroma_kb import throwaway_kb

    encoder = load_encoder()
    rng = random.Random(13)
    learn: list[Query] = []
    scored: list[ScoredSet] = []

    def sample(rows: list[Query], n: int) -> list[Query]:
        return rows if len(rows) <= n else rng.sample(rows, n)

    # CLINC150: KB of in-scope train questions; validation = the official valid file.
    clinc_train = ds.clinc("train")
    learn += sample([q for q in clinc_train if not q.needs_llm], 3000) + [q for q in clinc_train if q.needs_llm]
    log("CLINC150: building KB from 15,000 in-scope train questions")
    kb = throwaway_kb(encoder, ds.intent_kb(workdir / "clinc", clinc_train))
    scored.append(score_against_kb(kb, ds.clinc("valid")))

    # Banking77-OOS: KB of the 50 in-scope intents (train part A); validation = train part B.
    bank = ds.banking("train")
    bank_a = [q for q in bank if ds.in_split_a(q.text)]
    bank_b = [q for q in bank if not ds.in_split_a(q.text)]
    learn += sample([q for q in bank_a if not q.needs_llm], 2500) + [q for q in bank_a if q.needs_llm]
    log("Banking77: building KB from the in-scope intents of train part A")
    kb = throwaway_kb(encoder, ds.intent_kb(workdir / "banking", bank_a))
    scored.append(score_against_kb(kb, bank_b))

    # Bitext: KB = the 27 answers + train part A questions; validation = part B (all in scope).
    bit = ds.bitext("train")
    bit_a = [q for q in bit if ds.in_split_a(q.text)]
    learn += sample(bit_a, 1500)
    answers = {r["answer_id"]: r["answer"] for r in ds.read_csv(ds.data_dir() / "bitext_cs_faq" / "kb_answers.csv")}
    log("Bitext: building KB from kb_answers + train part A")
    kb = throwaway_kb(encoder, *ds.write_kb_csvs(workdir / "bitext", answers, [(q.text, q.answer_id) for q in bit_a]))
    scored.append(score_against_kb(kb, sample([q for q in bit if not ds.in_split_a(q.text)], 600)))

    # HINT3: real traffic; train has in-scope only. KB = part A, validation = part B.
    hint = ds.hint3("train")
    hint_a = [q for q in hint if ds.in_split_a(q.text)]
    learn += hint_a
    log("HINT3: building KB from train part A")
    kb = throwaway_kb(encoder, ds.intent_kb(workdir / "hint3", hint_a))
    scored.append(score_against_kb(kb, [q for q in hint if not ds.in_split_a(q.text)]))

    # tau-bench: hard multi-step requests, all LLM. Learn on train part A; validate dev + train part B
    # against the demo shop KB (the KB they would meet in this product).
    tau_train = ds.tau_bench(("train",))
    learn += [q for q in tau_train if ds.in_split_a(q.text)]
    demo = Path(__file__).resolve().parent.parent / "knowledge" / "demo"
    demo_questions = [Query(r["query"], 0, r["answer_id"], "demo") for r in ds.read_csv(demo / "questions.csv")]
    learn += [q for q in demo_questions if ds.in_split_a(q.text)]
    log("demo shop KB: validating tau-bench dev/held-out and demo questions")
    kb = throwaway_kb(encoder, demo / "answers.csv", demo / "questions.csv")
    held_out = ds.tau_bench(("dev",)) + [q for q in tau_train if not ds.in_split_a(q.text)]
    scored.append(score_against_kb(kb, held_out))
    return learn, scored


def fit_learned(learn: list[Query], log) -> dict:
    from sklearn.linear_model import LogisticRegression

    log(f"learned router: embedding {len(learn)} training queries")
    vectors = embed_all([q.text for q in learn])
    x = np.stack([learned_inputs(v, q.text, False) for v, q in zip(vectors, learn)])
    y = np.array([q.needs_llm for q in learn])
    mean, scale = x.mean(0), x.std(0) + 1e-6
    model = LogisticRegression(C=0.1, class_weight="balanced", max_iter=2000).fit((x - mean) / scale, y)
    return {"mean": mean.tolist(), "scale": scale.tolist(), "coef": model.coef_[0].tolist(),
            "intercept": float(model.intercept_[0]), "n_train": int(len(y)), "n_positive": int(y.sum())}


def learned_logits(params: dict, scored: ScoredSet) -> np.ndarray:
    mean, scale, coef = (np.asarray(params[k], dtype=np.float32) for k in ("mean", "scale", "coef"))
    x = np.stack([learned_inputs(v, q.text, False) for v, q in zip(scored.vectors, scored.queries)])
    return ((x - mean) / scale) @ coef + params["intercept"]


def _auroc(y: np.ndarray, p: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p)) if 0 < y.sum() < len(y) else float("nan")


def train(out: Path = SHIPPED_ARTIFACT, log: Callable[[str], None] = print,
          extra: list[Query] | None = None) -> dict:
    """Train all routers; write the artifact; return its metrics. `extra` adds feedback-labelled queries."""
    from sklearn.linear_model import LogisticRegression

    with tempfile.TemporaryDirectory(prefix="tandem-train-") as tmp:
        learn, scored = build_validation_sets(Path(tmp), log)
    learn += extra or []
    learned = fit_learned(learn, log)
    logit = np.concatenate([learned_logits(learned, s) for s in scored])
    top = np.concatenate([s.kb_top for s in scored])
    margin = np.concatenate([s.kb_margin for s in scored])
    y = np.concatenate([[q.needs_llm for q in s.queries] for s in scored])
    groups = np.concatenate([[q.group for q in s.queries] for s in scored])

    platt = LogisticRegression(C=1e4, max_iter=1000).fit(logit[:, None], y)
    learned["platt"] = [float(platt.coef_[0][0]), float(platt.intercept_[0])]
    similarity = LogisticRegression(C=1e4, max_iter=1000).fit(np.c_[top, margin], y)
    stack_x = np.c_[np.clip(logit, -LEARNED_LOGIT_CLIP, LEARNED_LOGIT_CLIP), top, margin]
    combined = LogisticRegression(C=1e4, max_iter=1000).fit(stack_x, y)

    p_comb = combined.predict_proba(stack_x)[:, 1]
    metrics = {"validation_auroc": {
        "learned": _auroc(y, logit), "similarity": _auroc(y, similarity.predict_proba(np.c_[top, margin])[:, 1]),
        "combined": _auroc(y, p_comb)}, "validation_rows": int(len(y)), "validation_positive": int(y.sum()),
        "per_group_llm_share_at_0.5": {g: float((p_comb[groups == g] >= 0.5).mean()) for g in sorted(set(groups))}}
    artifact = {
        "format": 1, "trained": date.today().isoformat(),
        "training_data": "CLINC150 (CC BY 3.0), Banking77 (CC BY 4.0), Bitext CS FAQ (CDLA-Sharing-1.0), "
                         "HINT3 (ODbL/DbCL), tau-bench (MIT): train/valid splits only; demo shop FAQ (CC0).",
        "learned": learned,
        "similarity": {"coef": similarity.coef_[0].tolist(), "intercept": float(similarity.intercept_[0])},
        "combined": {"inputs": ["learned_logit", "kb_top", "kb_margin"], "coef": combined.coef_[0].tolist(),
                     "intercept": float(combined.intercept_[0])},
        "metrics": metrics,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(artifact, indent=1))
    log(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB); validation AUROC {metrics['validation_auroc']}")
    return metrics


def feedback_queries(db) -> list[Query]:
    """Requests operators or customers labelled: thumbs-down on a small answer means the LLM was needed."""
    from sqlmodel import col, select

    from storage.tables import Feedback, RequestLog

    with db.session() as session:
        rows = session.exec(select(RequestLog.text, RequestLog.route, Feedback.rating)
                            .join(Feedback, col(Feedback.request_id) == col(RequestLog.id))).all()
    return [Query(text, int(rating < 0), "", "feedback") for text, route, rating in rows
            if route in ("small", "cache") and text]


def retrain_from_feedback(db, home: Path, log: Callable[[str], None] = print) -> tuple[Path, dict]:
    """Train a candidate router (shipped data + feedback) under TANDEM_HOME; `promote` makes it live."""
    from chains.routers.artifacts import router_dir

    candidate = router_dir(home) / "candidate.json"
    metrics = train(candidate, log, extra=feedback_queries(db))
    return candidate, metrics
