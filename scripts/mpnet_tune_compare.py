"""mpnet tuned on the KB against mpnet as shipped and the MiniLM the product serves (issue 40, item 1: "mpnet, base
and tuned on the KB").

Only mpnet's top layers learn (``TuneParams.train_layers``): the lower layers run once per KB text and their output
is kept, so a batch costs the top layers alone. Everything is chosen on nothing: the tuning parameters are
`tandem kb tune`'s, with fewer layers trained; the held-out split is read once, for the report.

    python -m scripts.mpnet_tune_compare [--kb bitext|demo] [--layers 2] [--max-pairs 6000]

Writes reports/mpnet_tune_<kb>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

import numpy as np

from core.encoders import TransformerEncoder, load_encoder
from core.model_files import mpnet_folder
from core.settings import get_settings
from knowledge.throwaway import throwaway_kb
from offline.encoder_compare import (
    CORPORA,
    MAX_ESCALATION,
    SCORERS,
    cascaded,
    choose,
    fused,
    margins,
    onnx_fp32,
    paired,
    space,
    top1,
)
from offline.encoder_tuning import TuneParams, tune_for_kb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kb", choices=sorted(CORPORA), default="bitext")
    parser.add_argument("--layers", type=int, default=2, help="How many of mpnet's 12 layers learn.")
    parser.add_argument("--max-pairs", type=int, default=TuneParams.max_pairs)
    parser.add_argument("--e5", action="store_true", help="Also multilingual-e5-small, alone and fused with mpnet.")
    args = parser.parse_args()
    settings = get_settings()
    corpus = CORPORA[args.kb]()
    train, answers = corpus.questions, corpus.answers
    column = {a: j for j, a in enumerate(answers)}
    sets = {"dev": [q for q in corpus.dev if not q.needs_llm], "heldout": [q for q in corpus.heldout if not q.needs_llm],
            "dev_all": corpus.dev, "heldout_all": corpus.heldout}
    gold = {split: np.array([column[q.answer_id] for q in sets[split]]) for split in ("dev", "heldout")}
    step = max(1, len(train) // 300)
    gate_texts, gate_labels = [q.text for q in train[::step]], [q.answer_id for q in train[::step]]
    params = replace(TuneParams(), train_layers=args.layers, max_pairs=args.max_pairs)
    report: dict = {"date": date.today().isoformat(), "kb": corpus.title, "params": params.__dict__,
                    "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="tandem-mpnet-tune-") as tmp:
        files = corpus.files(Path(tmp))
        mpnet_dir = mpnet_folder(settings.models_dir)
        mpnet = onnx_fp32(mpnet_dir, "mpnet", settings, gate_texts, gate_labels)
        mpnet.passage_cache_path = settings.passage_cache_path
        base_kb = throwaway_kb(mpnet, *files)
        spaces = {"mpnet-base": space("mpnet-base", mpnet, base_kb, train, answers, sets)}
        started = time.perf_counter()
        folder = tune_for_kb(base_kb, settings.home, params=params, name="mpnet", base_folder=mpnet_dir)
        report["tune_seconds"] = round(time.perf_counter() - started, 1)
        report["tuned_stamp"] = json.loads((folder / "tandem-encoder.json").read_text())
        tuned = TransformerEncoder(folder, "mpnet-tuned", settings.torch_threads)
        tuned.passage_cache_path = settings.passage_cache_path
        tuned_kb = throwaway_kb(tuned, *files)
        spaces["mpnet-tuned"] = space("mpnet-tuned", tuned, tuned_kb, train, answers, sets)
        # The MiniLM the product serves (tuned on the KB; `tandem kb tune`'s cache), for the fused and cascade rows.
        minilm_folder = tune_for_kb(base_kb, settings.home, progress=False)
        minilm = TransformerEncoder(minilm_folder, "minilm-tuned", settings.torch_threads)
        minilm.passage_cache_path = settings.passage_cache_path
        spaces["minilm-tuned"] = space("minilm-tuned", minilm, throwaway_kb(minilm, *files), train, answers, sets)
        if args.e5:
            e5 = load_encoder("e5", settings=settings)
            spaces["e5-base"] = space("e5-base", e5, throwaway_kb(e5, *files), train, answers, sets)
    report["top1"] = {name: {split: {scorer: round(top1(s.scores[split][scorer], gold[split]), 4) for scorer in SCORERS}
                             for split in gold} for name, s in spaces.items()}
    pairs = [("minilm-tuned", second) for second in ("mpnet-base", "mpnet-tuned")]
    pairs += [("e5-base", second) for second in ("mpnet-base", "mpnet-tuned") if "e5-base" in spaces]
    for first_name, second in pairs:
        first = spaces[first_name].scores
        other = spaces[second].scores
        for scorer in SCORERS:
            choice = choose(first["dev"][scorer], other["dev"][scorer], gold["dev"], MAX_ESCALATION,
                            margins(first["dev_all"][scorer]))
            held_fused = fused(first["heldout"][scorer], other["heldout"][scorer], choice.weight)
            held_cascade, _ = cascaded(first["heldout"][scorer], other["heldout"][scorer]
                                       if choice.escalate_to == "mpnet" else held_fused, choice.margin)
            share = float((margins(first["heldout_all"][scorer]) < choice.margin).mean())
            report.setdefault("combined", {}).setdefault(f"{first_name} + {second}", {})[scorer] = {
                "choice_on_dev": choice.__dict__, "heldout_fused_top1": round(top1(held_fused, gold["heldout"]), 4),
                "heldout_cascade_top1": round(top1(held_cascade, gold["heldout"]), 4),
                "heldout_cascade_escalation": round(share, 4),
                "cascade_vs_first": paired(first["heldout"][scorer], held_cascade, gold["heldout"])}
    report["heldout_tuned_vs_base"] = {scorer: paired(spaces["mpnet-base"].scores["heldout"][scorer],
                                                      spaces["mpnet-tuned"].scores["heldout"][scorer], gold["heldout"])
                                       for scorer in SCORERS}
    out = Path("reports") / f"mpnet_tune_{args.kb}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(json.dumps({k: report[k] for k in ("tune_seconds", "top1", "heldout_tuned_vs_base", "combined")}, indent=1))


if __name__ == "__main__":
    main()
