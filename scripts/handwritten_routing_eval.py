"""The routing part of `make eval` for the two hand-written report sets only, as offline/evaluate.py measures them:
the Bitext held-out set against the Bitext FAQ (answers + train questions, encoder tuned on it) and the Chinese test
split against the demo shop in both languages, both at the product thresholds. 2 to 5 minutes when the Bitext FAQ's
tuned encoder is cached, against well over an hour for the whole of `make eval`; README "The honest baseline".

    .venv/bin/python scripts/handwritten_routing_eval.py [--out reports/handwritten_routing.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from core.policy import Thresholds
from core.settings import get_settings
from offline import datasets as ds
from offline.evaluate import _route, product_report
from offline.kbs import build_kb
from offline.router_training import chinese_kb

SHOWN = ("correct_on_small", "in_scope_to_llm", "oos_to_llm", "top1", "auroc", "right_drafts_rewritten",
         "n_in_scope", "n_out_of_scope")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("reports/handwritten_routing.json"))
    out = parser.parse_args().out
    start = time.perf_counter()
    default = Thresholds.defaults(get_settings())
    report: dict = {"route_threshold": default.route_threshold, "rewrite_threshold": default.rewrite_threshold}
    with tempfile.TemporaryDirectory(prefix="tandem-eval-") as tmp:
        work = Path(tmp)
        files = ds.write_kb_csvs(work / "bitext", ds.bitext_answers(),
                                 [(q.text, q.answer_id) for q in ds.bitext("train")])
        held_out = ds.bitext_heldout()
        report["heldout_tuned"] = product_report(_route(build_kb(*files, tune=True), held_out, default), held_out)
        test = ds.chinese("test")
        report["zh"] = product_report(_route(chinese_kb(work / "zh"), test, default), test)
    report["seconds"] = round(time.perf_counter() - start)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False), encoding="utf-8")
    for name in ("heldout_tuned", "zh"):
        print(name, {key: report[name][key] for key in SHOWN})
    print(f"tau {report['route_threshold']}, rewrite threshold {report['rewrite_threshold']}; "
          f"{report['seconds']} s -> {out}")


if __name__ == "__main__":
    main()
