"""Does "asks about something the shop neither sells nor covers in the KB" separate the out-of-scope messages the router
keeps on the small tier (issue 59, part 7)?

The signal: the catalog finds no category in the message (``catalog.constraints.parse`` against the demo catalog's
facets, no embedding needed) AND the knowledge base's top score is under a floor. It is measured on the hand-written
Bitext sets (the Bitext FAQ as the KB, the demo catalog as what the shop sells): the floor is chosen on
``bitext_dev.csv`` (the most out-of-scope messages kept on the small tier flagged while at most ``MAX_DEV_FALSE`` of
dev's in-scope messages are), and reported on ``bitext_heldout.csv``: of the held-out out-of-scope messages the router
keeps on the small tier, how many the signal flags, and how many in-scope messages it wrongly flags.

Routing is the shipped router's, with the KB embedded by the base MiniLM (``--no-tune`` as `tandem route-batch`
has it: the tuned encoder takes minutes to train on 2 cores). Run: ``python -m offline.oos_signal``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from catalog.constraints import Facets, parse
from catalog.feed import read_feed
from core.policy import Thresholds
from core.settings import get_settings
from offline import datasets as ds

DEMO_CATALOG = Path(__file__).resolve().parent.parent / "catalog" / "demo" / "catalog.tsv"
MAX_DEV_FALSE = 0.02  # the share of dev's in-scope messages the floor may flag


def routed(rows: list[dict[str, str]], log: Callable[[str], Any]) -> list[dict[str, Any]]:
    """Each message with its route today, its KB top score and whether the catalog names a category in it."""
    from offline.kbs import build_kb
    from offline.route_batch import batch_chain, route_record

    facets = Facets.from_products(read_feed(DEMO_CATALOG).products)
    with tempfile.TemporaryDirectory() as work:
        files = ds.write_kb_csvs(Path(work) / "bitext", ds.bitext_answers(),
                                 [(q.text, q.answer_id) for q in ds.bitext("train")])
        kb = build_kb(*files, tune=False, log=log)
        chain = batch_chain(kb, None, [r["query"] for r in rows])
        thresholds = Thresholds.defaults(get_settings())
        out = []
        for row in rows:
            record = route_record(chain, row["query"], thresholds, row["query_id"])
            out.append({"query": row["query"], "in_scope": row["in_scope"] == "True", "route": record["route"],
                        # None: a rule settled the route (the order tool, a handoff) before any KB score
                        "kb_top": None if record["kb_top"] is None else float(record["kb_top"]),
                        "category": bool(parse(row["query"], facets).categories), "split": row["split"]})
        return out


def flagged(message: dict[str, Any], floor: float) -> bool:
    return not message["category"] and message["kb_top"] is not None and message["kb_top"] < floor


def counts(messages: list[dict[str, Any]], floor: float) -> dict[str, Any]:
    oos_small = [m for m in messages if not m["in_scope"] and m["route"] == "small"]
    in_scope = [m for m in messages if m["in_scope"]]
    in_small = [m for m in in_scope if m["route"] == "small"]
    return {"oos_kept_on_small": len(oos_small), "oos_flagged": sum(flagged(m, floor) for m in oos_small),
            "in_scope": len(in_scope), "in_scope_flagged": sum(flagged(m, floor) for m in in_scope),
            "in_scope_on_small": len(in_small), "in_scope_on_small_flagged": sum(flagged(m, floor) for m in in_small),
            "flagged_oos": [m["query"] for m in oos_small if flagged(m, floor)],
            "missed_oos": [m["query"] for m in oos_small if not flagged(m, floor)],
            "false_in_scope": [m["query"] for m in in_scope if flagged(m, floor)]}


def choose_floor(dev: list[dict[str, Any]]) -> float:
    """The highest floor (most flagged) whose dev false positives stay within MAX_DEV_FALSE of dev's in-scope."""
    allowed = MAX_DEV_FALSE * sum(m["in_scope"] for m in dev)
    best = 0.0
    for floor in sorted({round(m["kb_top"] + 1e-4, 4) for m in dev if m["kb_top"] is not None}):
        if counts(dev, floor)["in_scope_flagged"] <= allowed:
            best = floor
    return best


def measure(log: Callable[[str], Any] = print) -> dict[str, Any]:
    rows = [{**r, "split": "dev"} for r in ds.read_csv(ds.BITEXT_DEV)]
    rows += [{**r, "split": "heldout"} for r in ds.read_csv(ds.BITEXT_HELDOUT)]
    messages = routed(rows, log)
    dev = [m for m in messages if m["split"] == "dev"]
    heldout = [m for m in messages if m["split"] == "heldout"]
    floor = choose_floor(dev)
    return {"floor": floor, "dev": counts(dev, floor), "heldout": counts(heldout, floor)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()
    result = measure()
    for split in ("dev", "heldout"):
        c = result[split]
        print(f"{split}: floor {result['floor']:.4f}: {c['oos_flagged']} of {c['oos_kept_on_small']} out-of-scope "
              f"messages kept on the small tier flagged; {c['in_scope_flagged']} of {c['in_scope']} in-scope flagged "
              f"({c['in_scope_on_small_flagged']} of the {c['in_scope_on_small']} on the small tier)")
    print("held-out flagged:", result["heldout"]["flagged_oos"])
    print("held-out missed:", result["heldout"]["missed_oos"])
    print("held-out in-scope flagged:", result["heldout"]["false_in_scope"])
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
