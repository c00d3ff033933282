"""`tandem kb tune`: adapt the MiniLM encoder to one knowledge base with a contrastive objective.

Training data comes from the KB itself: each example question is paired with another question of the same
answer (or, now and then, with the answer's own text), plus a hard negative: a question of the most similar
*other* answer by the base encoder. The loss is MultipleNegativesRankingLoss (InfoNCE over the batch: every
other positive in the batch is a negative), written out in plain PyTorch so no trainer stack is needed.

Batches hold at most one pair per answer: two paraphrases of one answer in one batch would be pushed apart as
negatives of each other (the false negatives that cost the first trial on this machine about a point).

The tuned folder is a sentence-transformers folder like the base one, plus ``tandem-encoder.json`` (what it was
tuned from, on which KB, with what result), so core.encoders loads it the same way and can name its version.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from core.encoders import STAMP_FILE, Encoder, TransformerEncoder, folder_version, mean_pooled

TUNING_FORMAT = 1


@dataclass(frozen=True)
class TuneParams:
    max_pairs: int = 6000        # ~5,000 questions fit in one epoch; bigger KBs are sampled
    batch_size: int = 32
    epochs: int = 1
    learning_rate: float = 3e-5
    warmup_steps: int = 10
    scale: float = 20.0          # 1/temperature of the cosine logits (sentence-transformers' default)
    answer_text_share: float = 0.3  # how often the positive is the answer text instead of a paraphrase
    hard_negatives: bool = True
    seed: int = 13


@dataclass(frozen=True)
class Example:
    anchor: str
    positive: str
    negative: str | None
    label: str


def stamped(params: TuneParams) -> dict:
    """``params`` as the stamp records them (and the tuned folder's version hashes)."""
    return asdict(params)


def kb_content_hash(records: Sequence[tuple[str, str, str]]) -> str:
    """A stable id of (answer_id, kind, text) records: the cache key of a tuned encoder."""
    digest = hashlib.sha256()
    for answer_id, kind, text in sorted(records):
        digest.update(f"{answer_id}\x00{kind}\x00{text}\n".encode())
    return digest.hexdigest()[:12]


def build_examples(questions: dict[str, list[str]], answers: dict[str, str], base: Encoder,
                   params: TuneParams) -> list[Example]:
    """(anchor, positive, hard negative) triples from the KB's questions, grouped by answer."""
    rng = random.Random(params.seed)
    labels = [label for label, items in questions.items() if items]
    if not labels:
        return []
    # Nearest other answer of each answer, by the centroid of its questions: the source of hard negatives.
    neighbour: dict[str, str] = {}
    if params.hard_negatives and len(labels) > 1:
        centroids = np.stack([base.encode_passages(questions[label][:20]).mean(0) for label in labels])
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True) + 1e-9
        sims = centroids @ centroids.T
        np.fill_diagonal(sims, -1.0)
        neighbour = {label: labels[int(np.argmax(sims[i]))] for i, label in enumerate(labels)}
    examples = []
    for label in labels:
        items = questions[label]
        for anchor in items:
            others = [q for q in items if q != anchor]
            use_answer = label in answers and (not others or rng.random() < params.answer_text_share)
            if not others and not use_answer:
                continue
            positive = answers[label] if use_answer else rng.choice(others)
            negative = rng.choice(questions[neighbour[label]]) if label in neighbour else None
            examples.append(Example(anchor, positive, negative, label))
    rng.shuffle(examples)
    return examples[: params.max_pairs]


def batches_without_shared_labels(examples: list[Example], size: int, seed: int) -> list[list[Example]]:
    """Batches in which no two examples share an answer (so no paraphrase is another's negative)."""
    rng = random.Random(seed)
    pending = list(examples)
    rng.shuffle(pending)
    batches: list[list[Example]] = []
    while pending:
        batch: list[Example] = []
        seen: set[str] = set()
        rest: list[Example] = []
        for example in pending:
            if len(batch) < size and example.label not in seen:
                batch.append(example)
                seen.add(example.label)
            else:
                rest.append(example)
        if len(batch) < 2:  # one answer left over: nothing to contrast it with
            break
        batches.append(batch)
        pending = rest
    return batches


def tune(base_folder: Path, questions: dict[str, list[str]], answers: dict[str, str], out: Path,
         kb_hash: str, params: TuneParams | None = None, progress: bool = True,
         log: Callable[[str], None] = print, name: str = "minilm") -> dict:
    """Fine-tune the encoder in ``base_folder`` on the KB; write a versioned folder to ``out``; return its stamp."""
    import torch
    from tqdm import tqdm
    from transformers import AutoModel, AutoTokenizer

    params = params or TuneParams()
    torch.manual_seed(params.seed)
    started = time.perf_counter()
    base = TransformerEncoder(base_folder, "base")
    examples = build_examples(questions, answers, base, params)
    if not examples:
        raise ValueError("the knowledge base has no example questions to tune on (add a questions CSV)")
    tokenizer = AutoTokenizer.from_pretrained(str(base_folder))
    model = AutoModel.from_pretrained(str(base_folder))
    model.train()
    batches = [b for epoch in range(params.epochs)
               for b in batches_without_shared_labels(examples, params.batch_size, params.seed + epoch)]
    total = len(batches)

    def embed_whole(texts: list[str]) -> torch.Tensor:
        tokens = tokenizer(texts, padding=True, truncation=True, max_length=TransformerEncoder.max_length,
                           return_tensors="pt")
        return mean_pooled(model(**tokens).last_hidden_state, tokens["attention_mask"])

    embed: Callable[[list[str]], torch.Tensor] = embed_whole
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=params.learning_rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: warmup_then_linear_decay(
        step, total, params.warmup_steps))
    losses: list[float] = []
    bar = tqdm(total=total, desc="Tuning the encoder on the KB", unit="batch", disable=not progress)
    for batch in batches:
        anchors = embed([e.anchor for e in batch])
        candidates = [e.positive for e in batch] + [e.negative for e in batch if e.negative is not None]
        targets = embed(candidates)
        logits = params.scale * anchors @ targets.T  # row i: its positive is column i, the rest are negatives
        loss = torch.nn.functional.cross_entropy(logits, torch.arange(len(batch)))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
        bar.update()
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.3f}")
    bar.close()
    model.eval()
    version = hashlib.sha256(f"{folder_version(base_folder)}:{kb_hash}:{json.dumps(stamped(params))}".encode()
                             ).hexdigest()[:10]
    stamp = {"format": TUNING_FORMAT, "version": version, "name": f"{name}-tuned", "base": str(base_folder),
             "base_version": folder_version(base_folder), "kb_hash": kb_hash,
             "trained": datetime.now(UTC).isoformat(timespec="seconds"), "params": stamped(params),
             "examples": len(examples), "steps": total, "seconds": round(time.perf_counter() - started, 1),
             "final_loss": round(float(np.mean(losses[-20:])), 4) if losses else None,
             "answers": sum(1 for items in questions.values() if items)}
    _write_folder(model, tokenizer, base_folder, out, stamp)
    first_loss = f"{losses[0]:.3f}" if losses else "n/a"
    log(f"tuned encoder {version}: {len(examples)} examples, {total} steps in {stamp['seconds']:.0f} s "
        f"(loss {first_loss} -> {stamp['final_loss']})")
    return stamp


def _write_folder(model, tokenizer, base_folder: Path, out: Path, stamp: dict) -> None:
    """The tuned model as a sentence-transformers folder like ``base_folder`` (its pooling and module files copied),
    with ``stamp`` written last, put in place in one rename."""
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    for extra in ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
        if (base_folder / extra).is_file():
            shutil.copy2(base_folder / extra, tmp / extra)
    if (base_folder / "1_Pooling").is_dir():
        shutil.copytree(base_folder / "1_Pooling", tmp / "1_Pooling")
    (tmp / STAMP_FILE).write_text(json.dumps(stamp, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)


def warmup_then_linear_decay(step: int, total: int, warmup: int) -> float:
    """The learning-rate factor: up linearly to 1 over the warm-up, then down linearly to 0; never above 1. A small
    KB has few steps, so the warm-up is at most half of them."""
    warmup = max(1, min(warmup, total // 2))
    if step < warmup:
        return (step + 1) / warmup
    return max(0.0, (total - step) / max(1, total - warmup))


def top1_agreement(encoder: Encoder, questions: dict[str, list[str]], sample: int = 400, seed: int = 13) -> float:
    """Leave-one-out nearest-question accuracy on the KB's own questions (a quick check of a tuned encoder)."""
    rng = random.Random(seed)
    items = [(q, label) for label, qs in questions.items() for q in qs]
    if len(items) < 2:
        return math.nan
    vectors = encoder.encode_passages([q for q, _ in items])
    picks = rng.sample(range(len(items)), min(sample, len(items)))
    hits = 0
    for i in picks:
        sims = vectors @ vectors[i]
        sims[i] = -1.0
        hits += items[int(np.argmax(sims))][1] == items[i][1]
    return hits / len(picks)


def tune_for_kb(kb, home: Path, params: TuneParams | None = None, progress: bool = True,
                log: Callable[[str], None] = print) -> Path:
    """MiniLM tuned on ``kb``'s questions and answers, trained once and cached by the KB's content."""
    from core.encoders import encoders_dir
    from core.model_files import minilm_path

    params = params or TuneParams()
    questions, answers = kb.training_texts()
    records = [(a, "q", q) for a, qs in questions.items() for q in qs] + [(a, "a", t) for a, t in answers.items()]
    kb_hash = kb_content_hash(records)
    folder = encoders_dir(home) / f"minilm-kb-{kb_hash}"
    stamp = folder / STAMP_FILE
    if stamp.is_file():
        try:
            if json.loads(stamp.read_text()).get("params") == stamped(params):
                log(f"reusing the encoder tuned on this KB content ({folder.name})")
                return folder
        except ValueError:
            pass  # a broken stamp: tune again
    tune(minilm_path(), questions, answers, folder, kb_hash, params, progress=progress, log=log)
    return folder
