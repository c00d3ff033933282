"""Which share of a KB's right left-out drafts the rewrite floor sits under (chains/calibration.py,
RIGHT_DRAFTS_REWRITTEN), chosen on development messages only: the demo shop's dev split, the hand-written Bitext dev
set and the Chinese valid split. Routing only (no LLM): for each candidate share, how often a right draft would be
rewritten and how often a wrong draft would be.

    .venv/bin/python scripts/floor_quantile_experiment.py [--shares 0.02,0.01,0.005]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from chains import calibration
from chains.schema import ChatRequest
from chains.turn import Turn
from core.policy import Thresholds
from core.settings import get_settings
from offline import datasets as ds
from offline.answer_eval import EvalSet, build_kb, read_messages
from offline.route_batch import batch_chain

DEV_SETS = (
    EvalSet("demo-dev", "demo shop (dev)", ds.EVAL_DIR / "demo_shop.csv", "dev", "demo"),
    EvalSet("bitext-dev", "Bitext (dev)", ds.BITEXT_DEV, None, "bitext"),
    EvalSet("zh-valid", "Chinese (valid)", ds.CHINESE, "valid", "demo"),
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shares", default="0.02,0.01,0.005")
    shares = [float(s) for s in parser.parse_args().shares.split(",")]
    work = Path(tempfile.mkdtemp(prefix="floor-experiment-"))
    kbs = {}
    for eval_set in DEV_SETS:
        messages = [m for m in read_messages(eval_set) if m.in_scope]
        if eval_set.kb not in kbs:
            kbs[eval_set.kb] = build_kb(eval_set.kb, work, print)
        chain = batch_chain(kbs[eval_set.kb], texts=[m.text for m in messages])
        for share in shares:
            calibration.RIGHT_DRAFTS_REWRITTEN = share
            chain._floors.clear()
            right = wrong = right_rewritten = wrong_rewritten = 0
            for message in messages:
                turn = chain.route_only.invoke(Turn(request=ChatRequest(message=message.text, channel="batch"),
                                                    thresholds=Thresholds.defaults(get_settings())))
                if turn.done or not turn.hits or turn.plan == "llm":
                    continue
                top_right = turn.hits[0].answer_id == message.expected
                right += top_right
                wrong += not top_right
                right_rewritten += top_right and turn.plan == "rewrite"
                wrong_rewritten += (not top_right) and turn.plan == "rewrite"
            print(f"{eval_set.name:11} share {share:<6} right drafts rewritten {right_rewritten}/{right} "
                  f"({right_rewritten / max(1, right):.3f}); wrong drafts rewritten {wrong_rewritten}/{wrong} "
                  f"({wrong_rewritten / max(1, wrong):.3f})", flush=True)


if __name__ == "__main__":
    main()
