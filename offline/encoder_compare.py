"""A stronger encoder where it pays, measured (issue 40, item 1): MiniLM (base and KB-tuned), all-mpnet-base-v2,
the two fused, and a cascade that runs mpnet only when MiniLM is unsure.

    .venv/bin/python -m offline.encoder_compare [--kb bitext|demo] [--out reports/encoder_compare.json] [--no-tune]

``--kb bitext`` (the default) uses the KB and the sets of `make eval`'s held-out row (README "Routing"): the Bitext
FAQ (its 27 answers and its train questions), the hand-written development set (`knowledge/eval/bitext_dev.csv`) to
choose every parameter, the hand-written held-out set (`bitext_heldout.csv`) to report. ``--kb demo``: the demo shop's
English answers and stored questions, with the dev and held-out splits of `knowledge/eval/demo_shop.csv`. Top-1
counts the in-scope messages.

Three scorers give each answer a score for a message:
* ``knn``: the cosine of the answer's nearest stored question (kNN top-1);
* ``mean3``: the mean cosine of the answer's 3 nearest stored questions;
* ``kb``: the KB's own hybrid search as the product runs it (the message's focus, dense kNN fused with BM25 and
  the answer head; knowledge.chroma_kb), built with each encoder.

Systems: each encoder alone; ``fused`` (w · MiniLM + (1 − w) · mpnet, w chosen on dev); ``cascade`` (MiniLM's
scores unless their top-two margin is below m, then mpnet's or the fused scores: m and which one chosen on dev,
escalating at most ``--max-escalation`` of all dev messages, in scope or not, so the median message pays nothing
more). "MiniLM" in the fused and cascade systems is the one the product serves: the KB-tuned encoder (`tandem kb
tune`), or the base with ``--no-tune``. A baseline row routes the held-out set through the product's chain with the
tuned encoder, as `make eval` does (README: 0.853).

Latency: each encoder's ONNX fp32 export run on one message at a time (threads: TANDEM_TORCH_THREADS, as served),
the encoders taking turns on every held-out message, ``--repeats`` passes, the median of a message's repeats kept,
then p50/p95 over messages.
A cascade message costs MiniLM's time plus mpnet's when it escalates, a fused one both.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from core.encoders import EXPORT_FILE, ONNX_FILE, Encoder, OnnxEncoder, TransformerEncoder, export_dir, folder_version
from core.encoders import load_encoder as load_named_encoder
from core.model_files import minilm_path, mpnet_folder
from core.settings import Settings, get_settings
from knowledge.chroma_kb import ChromaKnowledgeBase
from knowledge.throwaway import throwaway_kb
from offline import datasets as ds
from offline.datasets import Query

SCORERS = ("knn", "mean3", "kb")
WEIGHTS = np.round(np.linspace(0.0, 1.0, 21), 2)  # MiniLM's share in the fused score
MAX_ESCALATION = 0.4  # of dev messages; under 0.5 the cascade's median message runs MiniLM alone
DEFAULT_OUT = Path("reports/encoder_compare.json")  # scoring below is pure numpy, shared by dev and held-out


def answer_scores(sims: np.ndarray, labels: Sequence[str], answers: Sequence[str], k: int = 1) -> np.ndarray:
    """(messages × answers) scores from (messages × stored questions) cosines: the mean of each answer's ``k``
    highest (k = 1: the nearest question)."""
    label_array = np.asarray(labels)
    out = np.zeros((sims.shape[0], len(answers)), dtype=np.float64)
    for j, answer in enumerate(answers):
        cols = sims[:, label_array == answer]
        top = np.sort(cols, axis=1)[:, -k:] if cols.shape[1] >= k else cols
        out[:, j] = top.mean(axis=1) if top.shape[1] else -1.0
    return out


def top1(scores: np.ndarray, gold: np.ndarray) -> float:
    return float((scores.argmax(axis=1) == gold).mean()) if len(gold) else 0.0


def margins(scores: np.ndarray) -> np.ndarray:
    """The gap between each message's two best answers."""
    best_two = np.sort(scores, axis=1)[:, -2:]
    return best_two[:, 1] - best_two[:, 0]


def fused(first: np.ndarray, second: np.ndarray, weight: float) -> np.ndarray:
    return weight * first + (1.0 - weight) * second


def cascaded(first: np.ndarray, escalated: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """First's scores, with the rows whose margin is below ``margin`` replaced by ``escalated``'s; and which."""
    escalate = margins(first) < margin
    return np.where(escalate[:, None], escalated, first), escalate


@dataclass(frozen=True)
class Choice:
    weight: float  # MiniLM's share in the fused score
    margin: float  # cascade: escalate below this top-two margin of MiniLM's scores
    escalate_to: str  # cascade: "mpnet" or "fused"
    dev_fused_top1: float
    dev_cascade_top1: float
    dev_escalation: float


def choose(minilm: np.ndarray, mpnet: np.ndarray, gold: np.ndarray, max_escalation: float = MAX_ESCALATION,
           routed_margins: np.ndarray | None = None) -> Choice:
    """Every parameter, chosen on the development messages given (never held-out): the fusion weight with the best
    top-1 (ties: more MiniLM), then the cascade's margin and what it escalates to, with the best top-1 among margins
    that escalate at most ``max_escalation`` of the routed messages (ties: fewer escalations). ``routed_margins``:
    MiniLM's top-two margins of every routed dev message, in scope or not (all pay for an escalation); default the
    in-scope ones scored here."""
    weight = max(WEIGHTS, key=lambda w: (top1(fused(minilm, mpnet, w), gold), w))
    fused_dev = fused(minilm, mpnet, weight)
    routed = margins(minilm) if routed_margins is None else routed_margins
    candidates = [0.0, *sorted(set(np.round(margins(minilm), 6)))]
    best: tuple[float, float, float, str] | None = None  # (top-1, -escalation, margin, target)
    for target, escalated in (("mpnet", mpnet), ("fused", fused_dev)):
        for margin in candidates:
            scores, _ = cascaded(minilm, escalated, margin)
            share = float((routed < margin).mean())
            if share > max_escalation:
                break  # margins are sorted: every later one escalates more
            key = (top1(scores, gold), -share, -margin, target)
            if best is None or key[:3] > best[:3]:
                best = key
    assert best is not None  # margin 0 escalates nothing
    return Choice(float(weight), -best[2], best[3], round(top1(fused_dev, gold), 4), round(best[0], 4),
                  round(-best[1], 4))


# --- encoders and their scores ----------------------------------------------------------------------------------
def onnx_fp32(folder: Path, name: str, settings: Settings, gate_texts: Sequence[str], gate_labels: Sequence[str]) -> OnnxEncoder:
    """The folder's ONNX fp32 export where serving looks for it (exported and gated once when missing)."""
    from offline.encoder_export import WEIGHT_ONLY_CANDIDATES, export_and_gate

    out = export_dir(folder, settings.home)
    record = json.loads((out / EXPORT_FILE).read_text()) if (out / EXPORT_FILE).is_file() else {}
    if record.get("version") != folder_version(folder) or not (out / ONNX_FILE).is_file():
        export_and_gate(folder, out, gate_texts, gate_labels, log=lambda _: None, weight_only=name in WEIGHT_ONLY_CANDIDATES)
    return OnnxEncoder(out, name, ONNX_FILE, folder_version(folder), settings.torch_threads)


@dataclass
class Space:
    """One encoder's scores for the dev and held-out in-scope messages, under every scorer."""

    name: str
    scores: dict[str, dict[str, np.ndarray]]  # split -> scorer -> (messages × answers)


def space(name: str, encoder: Encoder, kb: ChromaKnowledgeBase, questions: list[Query], answers: list[str],
          sets: dict[str, list[Query]]) -> Space:
    stored = encoder.encode_passages([q.text for q in questions])
    labels = [q.answer_id for q in questions]
    scores: dict[str, dict[str, np.ndarray]] = {}
    column = {a: j for j, a in enumerate(answers)}
    for split, queries in sets.items():
        sims = encoder.encode_queries([q.text for q in queries]) @ stored.T
        hybrid = np.zeros((len(queries), len(answers)))
        for i, vector in enumerate(kb.embed_messages([q.text for q in queries])):
            for hit in kb.search(queries[i].text, k=len(answers), vector=vector):
                hybrid[i, column[hit.answer_id]] = hit.score
        scores[split] = {"knn": answer_scores(sims, labels, answers, 1), "mean3": answer_scores(sims, labels, answers, 3),
                         "kb": hybrid}
    return Space(name, scores)


def latencies(encoders: dict[str, OnnxEncoder], texts: Sequence[str], repeats: int) -> dict[str, np.ndarray]:
    """Milliseconds each encoder takes to embed each text alone (not through the query memo), the median of
    ``repeats`` passes. The encoders take turns on every message, so a busy moment of a shared machine falls on all
    of them alike rather than on whichever was being timed."""
    for encoder in encoders.values():
        encoder.encode_queries([texts[0]])  # warm-up
    runs = {name: np.zeros((repeats, len(texts))) for name in encoders}
    for r in range(repeats):
        for i, text in enumerate(texts):
            for name, encoder in encoders.items():
                started = time.perf_counter()
                encoder.encode_queries([text])
                runs[name][r, i] = (time.perf_counter() - started) * 1000
    return {name: np.median(values, axis=0) for name, values in runs.items()}


def paired(reference: np.ndarray, other: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Held-out messages ``other`` gets right and ``reference`` wrong (gained), the reverse (lost), and the exact
    two-sided sign test (McNemar) on them: how sure a difference in top-1 is on the same messages."""
    from scipy.stats import binomtest

    right_ref, right_other = reference.argmax(1) == gold, other.argmax(1) == gold
    gained, lost = int((right_other & ~right_ref).sum()), int((right_ref & ~right_other).sum())
    p_value = binomtest(gained, gained + lost, 0.5).pvalue if gained + lost else 1.0
    return {"gained": gained, "lost": lost, "p_value": round(float(p_value), 4)}


def _ms(values: np.ndarray) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(values, 50)), 2), "p95_ms": round(float(np.percentile(values, 95)), 2)}


@dataclass(frozen=True)
class Corpus:
    """A KB (answers and stored questions, as CSVs `throwaway_kb` reads) with its development and held-out sets."""

    name: str
    title: str
    answers: list[str]
    questions: list[Query]
    dev: list[Query]
    heldout: list[Query]
    files: Callable[[Path], tuple[Path, Path]]  # work folder -> (answers CSV, questions CSV)


def bitext_corpus() -> Corpus:
    """`make eval`'s held-out row: the Bitext FAQ (answers + train questions), the hand-written dev/held-out sets."""
    answer_texts, train = ds.bitext_answers(), ds.bitext("train")
    return Corpus("bitext", "the Bitext FAQ", sorted(answer_texts), train, ds.bitext_dev(), ds.bitext_heldout(),
                  lambda work: ds.write_kb_csvs(work / "bitext", answer_texts, [(q.text, q.answer_id) for q in train]))


def demo_corpus() -> Corpus:
    """The demo shop in English (its answers and stored questions as shipped) and the demo-shop set's dev and
    held-out splits (knowledge/eval/demo_shop.csv, written apart from the stored questions)."""
    from knowledge.demo_kb import DEMO_DIR

    answers = [r["answer_id"] for r in ds.read_csv(DEMO_DIR / "answers.csv")]
    questions = [Query(r["query"], 0, r["answer_id"], "demo") for r in ds.read_csv(DEMO_DIR / "questions.csv")]

    def split(name: str) -> list[Query]:
        return [Query(r["query"], int(r["in_scope"] != "True"), r["answer_id"], f"demo-{name}")
                for r in ds.read_csv(ds.EVAL_DIR / "demo_shop.csv") if r["split"] == name]

    return Corpus("demo", "the demo shop (English)", sorted(answers), questions, split("dev"), split("heldout"),
                  lambda work: (DEMO_DIR / "answers.csv", DEMO_DIR / "questions.csv"))


CORPORA: dict[str, Callable[[], Corpus]] = {"bitext": bitext_corpus, "demo": demo_corpus}


def _combined_on_heldout(report: dict, spaces: dict[str, Space], shipped: str, gold: dict[str, np.ndarray],
                         max_escalation: float) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, dict]]:
    """Fusion and cascade chosen on dev per scorer, applied to held-out (top-1, paired counts, escalation: into
    ``report``)."""
    held: dict[str, dict[str, np.ndarray]] = {name: dict(s.scores["heldout"]) for name, s in spaces.items()}
    choices: dict[str, dict] = {}
    escalation: dict[str, float] = {}
    first, second = spaces[shipped], spaces["mpnet-base"]
    fused_name, cascade_name = f"fused ({shipped} + mpnet)", f"cascade ({shipped}, then mpnet)"
    for scorer in SCORERS:
        choice = choose(first.scores["dev"][scorer], second.scores["dev"][scorer], gold["dev"], max_escalation,
                        margins(first.scores["dev_all"][scorer]))
        choices[scorer] = choice.__dict__
        held_first, held_second = first.scores["heldout"][scorer], second.scores["heldout"][scorer]
        held.setdefault(fused_name, {})[scorer] = held_fused = fused(held_first, held_second, choice.weight)
        held.setdefault(cascade_name, {})[scorer], escalate = cascaded(
            held_first, held_second if choice.escalate_to == "mpnet" else held_fused, choice.margin)
        escalation[scorer] = round(float(escalate.mean()), 4)
    rows = {name: {scorer: round(top1(scores, gold["heldout"]), 4) for scorer, scores in by.items()}
            for name, by in held.items()}
    report["heldout_paired_vs_shipped"] = {name: {scorer: paired(held[shipped][scorer], scores, gold["heldout"])
                                                  for scorer, scores in by.items()}
                                           for name, by in held.items() if name != shipped}
    report["heldout_top1"] = rows
    report["choices_on_dev"] = choices
    report["cascade_heldout_escalation"] = escalation
    return held, choices


def run(corpus: Corpus, tune: bool = True, repeats: int = 3, max_escalation: float = MAX_ESCALATION,
        log: Callable[[str], None] = print) -> dict:
    from core.policy import Thresholds
    from offline.encoder_tuning import tune_for_kb
    from offline.evaluate import _route, product_report

    settings = get_settings()
    started = time.perf_counter()
    train, answers = corpus.questions, corpus.answers
    column = {a: j for j, a in enumerate(answers)}
    dev_all, heldout_all = corpus.dev, corpus.heldout
    # Top-1 reads the in-scope messages; the cascade's escalation share and latency read every held-out message
    # (all of them are routed, out of scope or not).
    sets = {"dev": [q for q in dev_all if not q.needs_llm], "heldout": [q for q in heldout_all if not q.needs_llm],
            "dev_all": dev_all, "heldout_all": heldout_all}
    gold = {split: np.array([column[q.answer_id] for q in sets[split]]) for split in ("dev", "heldout")}
    step = max(1, len(train) // 300)  # the int8 gate reads the KB's own questions, as kb tune's does
    gate_texts, gate_labels = [q.text for q in train[::step]], [q.answer_id for q in train[::step]]
    report: dict = {"date": date.today().isoformat(), "corpus": corpus.name, "kb": corpus.title,
                    "n_kb_questions": len(train), "n_kb_answers": len(answers), "n_dev_in_scope": len(sets["dev"]),
                    "n_heldout_in_scope": len(sets["heldout"]), "n_heldout": len(heldout_all),
                    "threads": settings.torch_threads, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="tandem-compare-") as tmp:
        files = corpus.files(Path(tmp))
        spaces: dict[str, Space] = {}
        served: dict[str, OnnxEncoder] = {}

        log("MiniLM base: KB and scores")
        base = load_named_encoder("minilm", settings=settings)
        base_kb = throwaway_kb(base, *files)
        spaces["minilm-base"] = space("minilm-base", base, base_kb, train, answers, sets)
        served["minilm-base"] = onnx_fp32(minilm_path(), "minilm", settings, gate_texts, gate_labels)
        baseline: dict = {}
        heldout_route = _route(base_kb, heldout_all, Thresholds.defaults(settings))
        baseline["minilm-base"] = product_report(heldout_route, heldout_all)["top1"]

        if tune:
            log("MiniLM tuned on the KB (`tandem kb tune`'s cache; minutes the first time)")
            folder = tune_for_kb(base_kb, settings.home, progress=False, log=log)
            tuned = TransformerEncoder(folder, "minilm-tuned", settings.torch_threads)
            tuned.passage_cache_path = settings.passage_cache_path
            tuned_kb = ChromaKnowledgeBase(tuned, path=base_kb.path, collection=base_kb.collection_name,
                                           params=base_kb.params)
            spaces["minilm-tuned"] = space("minilm-tuned", tuned, tuned_kb, train, answers, sets)
            served["minilm-tuned"] = onnx_fp32(folder, "minilm-tuned", settings, gate_texts, gate_labels)
            baseline["minilm-tuned"] = product_report(_route(tuned_kb, heldout_all, Thresholds.defaults(settings)),
                                                      heldout_all)["top1"]
            report["tuned_folder"] = folder.name

        log("mpnet: ONNX fp32, KB and scores (minutes the first time: 5,000 questions through a 110M encoder)")
        mpnet_dir = mpnet_folder(settings.models_dir)
        mpnet = onnx_fp32(mpnet_dir, "mpnet", settings, gate_texts, gate_labels)
        mpnet.passage_cache_path = settings.passage_cache_path
        spaces["mpnet-base"] = space("mpnet-base", mpnet, throwaway_kb(mpnet, *files), train, answers, sets)
        served["mpnet-base"] = mpnet
        report["mpnet_export"] = json.loads((export_dir(mpnet_dir, settings.home) / EXPORT_FILE).read_text())
        report["baseline_heldout_route_top1"] = baseline

    shipped = "minilm-tuned" if tune else "minilm-base"
    _, choices = _combined_on_heldout(report, spaces, shipped, gold, max_escalation)

    log(f"latency: one message at a time, {repeats} passes over {len(heldout_all)} held-out messages")
    texts = [q.text for q in heldout_all]
    ms = latencies(served, texts, repeats)
    kb_choice = choices["kb"]  # the cascade the product would run: on the KB's own scores
    escalate_all = margins(spaces[shipped].scores["heldout_all"]["kb"]) < kb_choice["margin"]
    report["latency"] = {
        **{name: _ms(values) for name, values in ms.items()},
        f"fused ({shipped} + mpnet)": _ms(ms[shipped] + ms["mpnet-base"]),
        f"cascade ({shipped}, then mpnet)": _ms(ms[shipped] + escalate_all * ms["mpnet-base"]),
        "cascade_escalation_all_heldout": round(float(escalate_all.mean()), 4),
        "repeats": repeats, "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    report["seconds"] = round(time.perf_counter() - started)
    return report


def markdown(report: dict) -> str:
    """The README table: held-out top-1 under each scorer, the cascade's escalation, encode latency."""
    rows, lat, choices = report["heldout_top1"], report["latency"], report["choices_on_dev"]
    shipped = "minilm-tuned" if "minilm-tuned" in rows else "minilm-base"
    cascade = f"cascade ({shipped}, then mpnet)"
    lines = [f"Measured {report['date']} by `python -m offline.encoder_compare --kb {report['corpus']}`: {report['kb']} "
             f"({report['n_kb_answers']} answers, {report['n_kb_questions']} stored questions), "
             f"{report['n_heldout_in_scope']} in-scope held-out messages (top-1), every parameter "
             f"chosen on the {report['n_dev_in_scope']} in-scope development messages. Latency: ONNX fp32, one "
             f"message at a time, {report['threads']} thread(s) on {report['cpus']} cores, median of "
             f"{lat['repeats']} passes per message over all {report['n_heldout']} held-out messages (load average "
             f"{lat['load_average_after'][0]} when done).", "",
             "| held-out | kNN top-1 | mean of 3 nearest, top-1 | KB search top-1 (as served) | KB search against the "
             "shipped: right instead of wrong / wrong instead of right (sign test p) | encode p50 / p95 ms |",
             "|---|---|---|---|---|---|"]
    names = {"minilm-base": "MiniLM base", "minilm-tuned": "MiniLM tuned on the KB (shipped)", "mpnet-base": "mpnet base"}
    for name, row in rows.items():
        label = names.get(name, name)
        if name == cascade:
            label += f" (escalates {lat['cascade_escalation_all_heldout']:.0%} of held-out messages, KB scorer)"
        timing = lat.get(name, {})
        versus = report["heldout_paired_vs_shipped"].get(name, {}).get("kb")
        against = f"+{versus['gained']} / −{versus['lost']} (p = {versus['p_value']:.2f})" if versus else "–"
        lines.append(f"| {label} | {row['knn']:.3f} | {row['mean3']:.3f} | {row['kb']:.3f} | {against} | "
                     f"{timing.get('p50_ms', float('nan')):.1f} / {timing.get('p95_ms', float('nan')):.1f} |")
    for name, value in report["baseline_heldout_route_top1"].items():
        lines.append(f"| the product's chain, {names.get(name, name)} (routed as `make eval` routes) | | | "
                     f"{value:.3f} | | |")
    lines += ["", "Chosen on development messages (fusion weight = MiniLM's share; the cascade escalates below the "
              "margin between MiniLM's top two answers):", "",
              "| scorer | fusion weight | dev top-1 fused | cascade margin | escalates to | dev escalation | dev top-1 cascade |",
              "|---|---|---|---|---|---|---|"]
    for scorer, c in choices.items():
        lines.append(f"| {scorer} | {c['weight']:.2f} | {c['dev_fused_top1']:.3f} | {c['margin']:.4f} | {c['escalate_to']} | "
                     f"{c['dev_escalation']:.2f} | {c['dev_cascade_top1']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", choices=sorted(CORPORA), default="bitext",
                        help="bitext: make eval's held-out row (default); demo: the demo shop and its set's splits.")
    parser.add_argument("--out", type=Path, default=None, help=f"Default {DEFAULT_OUT} (bitext), or with the KB's name.")
    parser.add_argument("--no-tune", action="store_true", help="MiniLM base only (no KB-tuned encoder).")
    parser.add_argument("--repeats", type=int, default=3, help="Latency passes over the held-out messages.")
    parser.add_argument("--max-escalation", type=float, default=MAX_ESCALATION,
                        help="Most of the dev messages the cascade may send to mpnet.")
    args = parser.parse_args()
    out = args.out or (DEFAULT_OUT if args.kb == "bitext" else DEFAULT_OUT.with_name(f"{DEFAULT_OUT.stem}_{args.kb}.json"))
    report = run(CORPORA[args.kb](), tune=not args.no_tune, repeats=args.repeats, max_escalation=args.max_escalation)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    table = markdown(report)
    out.with_suffix(".md").write_text(table + "\n", encoding="utf-8")
    print(table)
    print(f"{report['seconds']} s -> {out}, {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
