"""`make eval`, section catalog: the catalog's answers to the hand-written product messages of
knowledge/eval/catalog_messages.csv (issue 59's targets), and semiPQA precision@1 of the attribute ranking.

Each message goes the chat's own way to a catalog answer: :func:`catalog.reply.intent` decides whether it is a
product message and of which kind, and :func:`catalog.reply.reply` answers it, over the demo catalog
(catalog/demo/catalog.tsv) ingested into a temporary store (SQLite, Chroma, the settings' encoder), as `tandem demo`
ingests it. No LLM. Measured per split (``dev``: look at its failures and tune; ``test``: reported, never tuned on),
per kind and per language:

* ``top3``: the right product in the first 3 cards (search: a gold product among them; stock: the product's variant
  in the colour/size asked, or, when it does not come in them, the product named and "not offered"; compare: every
  gold product in the table);
* ``constraints``: the message's constraints parsed exactly (category, price bounds, colour, size, material, in
  stock), search and compare messages;
* ``facts``: a fact message answered with the gold field's value of a gold product, its source naming the field;
* ``guesses``: a missing-field message (the record lacks the field asked) answered with any stated value: must be 0;
* ``unmatched_claims``: product names, prices and attribute values in any served answer that match no record
  (:mod:`offline.catalog_claims`): must be 0.

    .venv/bin/tandem eval --catalog-only          # this section alone, merged into reports/eval.json
"""

from __future__ import annotations

import csv
import re
import tempfile
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

from catalog.reply import intent, reply
from catalog.search import ProductSearch
from catalog.store import Catalog, CatalogProduct
from offline.catalog_claims import ClaimChecker

REPO = Path(__file__).resolve().parent.parent
SET = REPO / "knowledge" / "eval" / "catalog_messages.csv"
DEMO_FEED = REPO / "catalog" / "demo" / "catalog.tsv"
SEMIPQA_DEV = REPO.parent / "shared" / "data" / "semipqa" / "attribute_ranking_dev.tsv"
SPLITS = ("dev", "test")
REPORTED = "test"
KINDS = ("search", "fact", "missing_fact", "compare", "stock")
MEASURES = ("top3", "constraints", "facts", "guesses", "unmatched_claims")
TARGETS: dict[str, tuple[str, Callable[[float], bool]]] = {
    "top3": ("≥ 0.95", lambda v: v >= 0.95),
    "constraints": ("≥ 0.95", lambda v: v >= 0.95),
    "facts": ("≥ 0.95", lambda v: v >= 0.95),
    "guesses": ("0", lambda v: v == 0),
    "unmatched_claims": ("0", lambda v: v == 0),
    "semipqa_p_at_1": ("≥ 0.88", lambda v: v >= 0.88),
}


def read_set(path: Path = SET) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def demo_search(folder: Path, encoder, feed: Path = DEMO_FEED) -> ProductSearch:
    """The demo catalog ingested into a store of its own under ``folder`` (as `tandem demo` ingests it)."""
    from storage.db import Database

    folder.mkdir(parents=True, exist_ok=True)
    catalog = Catalog(Database(f"sqlite:///{folder / 'catalog.db'}"), encoder, chroma_path=folder / "chroma")
    catalog.ingest(feed)
    return ProductSearch(catalog)


# ---- gold -------------------------------------------------------------------------------------------------------
def gold_constraints(text: str) -> dict[str, Any]:
    """``category=A+B;price_max=50;color=blue;in_stock=true`` as a dict of the parsed form."""
    out: dict[str, Any] = {"category": [], "price_min": None, "price_max": None, "color": "", "size": "",
                           "material": "", "in_stock": False}
    for part in filter(None, text.split(";")):
        key, value = part.split("=", 1)
        if key == "category":
            out[key] = sorted(value.split("+"))
        elif key in ("price_min", "price_max"):
            out[key] = float(value)
        elif key == "in_stock":
            out[key] = value == "true"
        else:
            out[key] = value
    return out


def parsed_constraints(search: ProductSearch, message: str) -> dict[str, Any]:
    f = search.parse(message)
    return {"category": sorted(f.categories), "price_min": f.price_min, "price_max": f.price_max,
            "color": f.color.lower(), "size": f.size, "material": f.material, "in_stock": f.in_stock}


def _material_set(products: list[CatalogProduct], term: str) -> frozenset[str]:
    """The products a material term selects: two words for one filter ("merino" and "wool" in this catalog; "cotton"
    and "organic cotton" among its bath towels) are the same constraint when they select the same products of the
    categories asked for."""
    if not term:
        return frozenset()
    words = term.lower().split()
    return frozenset(p.id for p in products if all(
        re.search(r"(?<![a-z])" + re.escape(w) + r"(?![a-z])", p.material.lower()) for w in words))


def constraints_equal(got: dict[str, Any], gold: dict[str, Any], products: list[CatalogProduct]) -> bool:
    for key in ("category", "price_min", "price_max", "color", "in_stock"):
        if got[key] != gold[key]:
            return False
    if got["size"].lower() != gold["size"].lower():
        return False
    kind = [p for p in products if not gold["category"] or p.category in gold["category"]]
    return _material_set(kind, got["material"]) == _material_set(kind, gold["material"])


# ---- one message ------------------------------------------------------------------------------------------------
def answer(search: ProductSearch, checker: ClaimChecker, row: dict[str, str]) -> dict[str, Any]:
    """The chat's catalog answer to the row's message, scored against its gold."""
    message = row["message"]
    found = intent(search, message)
    served = reply(search, message, found) if found is not None else None
    cards = [c["id"] for c in served.products] if served else []
    gold_ids = [g for g in row["gold_products"].split("|") if g]
    record: dict[str, Any] = {"id": row["id"], "split": row["split"], "language": row["language"],
                              "kind": row["kind"], "message": message, "intent": found.kind if found else None,
                              "served": served.kind if served else None, "cards": cards[:6],
                              "text": served.text if served else ""}
    kind = row["kind"]
    record["gold"] = _gold_text(row, gold_ids)
    if kind == "search":
        record["top3"] = bool(set(cards[:3]) & set(gold_ids))
    elif kind == "compare":
        compared = set(cards) if served is not None and served.kind == "compare" else set()
        record["top3"] = all(set(alternatives.split("/")) & compared for alternatives in gold_ids)
    elif kind == "stock":
        offered = row["gold_value"] == "offered"
        if served is None or served.kind != "stock":
            record["top3"] = False
        elif offered:
            record["top3"] = bool(served.detail.get("offered")) and bool(set(cards[:3]) & set(gold_ids))
        else:
            product = search.catalog.get(gold_ids[0])
            group = product.group if product is not None else ""
            record["top3"] = served.detail.get("group") == group and not served.detail.get("offered")
    if row["gold_constraints"]:
        got = parsed_constraints(search, message)
        gold = gold_constraints(row["gold_constraints"])
        record["constraints"] = constraints_equal(got, gold, list(search.catalog.products.values()))
        record["constraints_got"], record["constraints_gold"] = got, gold
    facts = served.detail.get("facts", []) if served is not None and served.kind == "fact" else []
    record["facts_got"] = facts
    if kind == "fact":
        field_name = row["gold_field"]
        sourced = {(s["product_id"], s["field"]) for s in (served.sources if served else [])}
        record["facts"] = any(f["product_id"] in gold_ids and f["field"] == field_name and f["stated"]
                              and (f["product_id"], field_name) in sourced for f in facts) \
            and _norm(row["gold_value"]) in _norm(served.text if served else "")
    if kind == "missing_fact":
        # any stated value about the product asked, in answer to a field its record lacks, is a guess
        stated = [f for f in facts if f["product_id"] in gold_ids and f["stated"]]
        record["guesses"] = len(stated)
        record["said_not_stated"] = any(f["product_id"] in gold_ids and not f["stated"] for f in facts)
    check = checker.check(served.text, message) if served is not None else None
    record["claims"] = check.claims if check else 0
    record["unmatched_claims"] = check.unmatched if check else []
    return record


def _gold_text(row: dict[str, str], gold_ids: list[str]) -> str:
    """The row's gold in a few words, for the failure list."""
    if row["kind"] == "fact":
        return f"{row['gold_field']} = {row['gold_value']}"
    if row["kind"] == "missing_fact":
        return f"{row['gold_field']}: not stated"
    shown = [alternatives.split("/")[0] for alternatives in gold_ids]
    more = f" (+{len(shown) - 2} more)" if len(shown) > 2 else ""
    return ", ".join(shown[:2]) + more + (f"; {row['gold_value']}" if row["kind"] == "stock" else "")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


# ---- the section ------------------------------------------------------------------------------------------------
def _rate(records: list[dict], key: str) -> dict[str, Any]:
    scored = [r for r in records if key in r]
    hits = sum(bool(r[key]) for r in scored)
    return {"value": round(hits / len(scored), 4) if scored else None, "hits": hits, "n": len(scored)}


def measures(records: list[dict]) -> dict[str, Any]:
    missing = [r for r in records if r["kind"] == "missing_fact"]
    return {
        "n": len(records),
        "top3": _rate(records, "top3"),
        "constraints": _rate(records, "constraints"),
        "facts": _rate(records, "facts"),
        "guesses": {"value": sum(r["guesses"] for r in missing), "n": len(missing),
                    "said_not_stated": sum(r["said_not_stated"] for r in missing),
                    "not_answered_by_catalog": sum(r["served"] is None for r in missing)},
        "unmatched_claims": {"value": sum(len(r["unmatched_claims"]) for r in records),
                             "answers": sum(bool(r["unmatched_claims"]) for r in records),
                             "claims": sum(r["claims"] for r in records),
                             "served": sum(r["served"] is not None for r in records)},
        "intent_right": _rate([{**r, "ok": r["intent"] == _intent_of(r["kind"])} for r in records], "ok"),
    }


def _intent_of(kind: str) -> str:
    return "fact" if kind == "missing_fact" else kind


def _failure(r: dict) -> dict[str, Any]:
    why = []
    if r.get("top3") is False:
        why.append("top3")
    if r.get("constraints") is False:
        why.append("constraints")
    if r.get("facts") is False:
        why.append("facts")
    if r.get("guesses"):
        why.append("guess")
    if r["unmatched_claims"]:
        why.append("unmatched claim")
    expected = r.get("constraints_gold") if r.get("constraints") is False else None
    got = r.get("constraints_got") if r.get("constraints") is False else None
    return {"id": r["id"], "split": r["split"], "kind": r["kind"], "language": r["language"], "message": r["message"],
            "failed": why, "gold": r["gold"], "intent": r["intent"], "cards": r["cards"][:3], "facts": r["facts_got"],
            "unmatched": r["unmatched_claims"], "constraints_expected": expected, "constraints_got": got}


def run_catalog_eval(encoder=None, log: Callable[[str], None] = print, path: Path = SET,
                     semipqa: Path | None = SEMIPQA_DEV, store: Path | None = None) -> dict:
    """The section: per split, per kind and per language; the failures of both splits; semiPQA P@1 on its dev file.
    ``store``: a folder to keep the ingested demo catalog in (a second run embeds nothing); a temporary one when
    None."""
    if encoder is None:
        from core.encoders import load_encoder
        from core.settings import get_settings

        settings = get_settings()
        encoder = load_encoder(settings.encoder, settings=settings)
    rows = read_set(path)
    with tempfile.TemporaryDirectory(prefix="tandem-catalog-eval-") as tmp:
        search = demo_search(store or Path(tmp) / "store", encoder)
        log(f"catalog: {len(rows)} messages of {path.name} through catalog.reply over the demo catalog "
            f"({len(search.catalog)} products)")
        checker = ClaimChecker(search.catalog.products.values())
        records = [answer(search, checker, row) for row in rows]
    report: dict[str, Any] = {"date": date.today().isoformat(), "set": path.name, "n": len(rows),
                              "n_by_language": {lang: sum(r["language"] == lang for r in rows) for lang in ("en", "zh")},
                              "splits": {}}
    for split in SPLITS:
        part = [r for r in records if r["split"] == split]
        report["splits"][split] = {**measures(part),
                                   "by_kind": {k: measures([r for r in part if r["kind"] == k]) for k in KINDS},
                                   "by_language": {lang: measures([r for r in part if r["language"] == lang])
                                                   for lang in ("en", "zh")}}
    report["failures"] = [_failure(r) for r in records if r.get("top3") is False or r.get("constraints") is False
                          or r.get("facts") is False or r.get("guesses") or r["unmatched_claims"]]
    if semipqa is not None and semipqa.is_file():
        from catalog.attributes import precision_at_1, read_semipqa

        log(f"catalog: semiPQA attribute ranking on {semipqa.name}")
        value, judged = precision_at_1(read_semipqa(semipqa), encoder)
        report["semipqa"] = {"split": "dev", "file": semipqa.name, "p_at_1": round(value, 4), "n": judged}
    report["summary"] = summary(report)
    return report


def summary(report: dict) -> dict[str, Any]:
    test = report["splits"][REPORTED]
    out = {key: test[key]["value"] for key in MEASURES}
    out["semipqa_p_at_1"] = report.get("semipqa", {}).get("p_at_1")
    return out


# ---- the results page -------------------------------------------------------------------------------------------
def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def _met(key: str, value: Any) -> str:
    return "" if value is None else ("met" if TARGETS[key][1](value) else "**missed**")


def _cell(m: dict, key: str) -> str:
    v = m[key]
    if key in ("guesses", "unmatched_claims"):
        return f"{v['value']} (of {v['n'] if key == 'guesses' else v['served']})"
    return f"{_fmt(v['value'])} ({v['hits']}/{v['n']})" if v["n"] else "–"


LABELS = {"top3": "right product in the top 3 cards", "constraints": "constraints extracted exactly",
          "facts": "product facts right", "guesses": "guesses where the record lacks the field",
          "unmatched_claims": "names, prices or attribute values in served answers that match no record"}


def markdown(report: dict) -> str:
    splits = report["splits"]
    lang = report["n_by_language"]
    lines = [f"Measured {report['date']} by `make eval` (or `tandem eval --catalog-only`) on "
             f"`knowledge/eval/{report['set']}` ({report['n']} hand-written messages: {lang['en']} English, "
             f"{lang['zh']} Chinese), each through `catalog.reply.intent` and `catalog.reply.reply` over the demo "
             "catalog, no LLM. `dev`: failures looked at and tuned on; `test`: reported, never tuned on.", "",
             "| measure | test | dev | target | met (test) |", "|---|---|---|---|---|"]
    for key in MEASURES:
        lines.append(f"| {LABELS[key]} | {_cell(splits['test'], key)} | {_cell(splits['dev'], key)} | "
                     f"{TARGETS[key][0]} | {_met(key, report['summary'][key])} |")
    semi = report.get("semipqa")
    if semi:
        lines.append(f"| semiPQA precision@1 ({semi['split']} split, {semi['n']} questions; the test splits are kept "
                     f"elsewhere) | – | {_fmt(semi['p_at_1'])} | {TARGETS['semipqa_p_at_1'][0]} | "
                     f"{_met('semipqa_p_at_1', semi['p_at_1'])} (dev) |")
    lines += ["", "Test split by kind and language (– where a measure does not apply):", "",
              "| part | n | top 3 | constraints | facts | guesses | unmatched claims |", "|---|---|---|---|---|---|---|"]
    test = splits["test"]
    for name, m in [*((k, test["by_kind"][k]) for k in KINDS), *((k, test["by_language"][k]) for k in ("en", "zh"))]:
        lines.append(f"| {name} | {m['n']} | {_cell(m, 'top3')} | {_cell(m, 'constraints')} | {_cell(m, 'facts')} | "
                     f"{m['guesses']['value'] if m['guesses']['n'] else '–'} | {m['unmatched_claims']['value']} |")
    failures = [f for f in report["failures"] if f["split"] == REPORTED]
    if failures:
        lines += ["", "Failures on the test split:", "", "| message | kind | failed | expected | got |",
                  "|---|---|---|---|---|"]
        for f in failures:
            lines.append(f"| {_md(f['message'])} | {f['kind']} | {', '.join(f['failed'])} | "
                         f"{_md(_expected(f))} | {_md(_got(f))} |")
    return "\n".join(lines)


def _expected(f: dict) -> str:
    return _short(f["constraints_expected"]) if f["constraints_expected"] else f["gold"]


def _got(f: dict) -> str:
    parts = []
    if f["constraints_got"]:
        parts.append(_short(f["constraints_got"]))
    if "top3" in f["failed"] or "facts" in f["failed"] or "guess" in f["failed"]:
        parts.append(f"intent {f['intent']}; cards {', '.join(f['cards']) or 'none'}" +
                     (f"; facts {', '.join(x['field'] or '?' for x in f['facts'])}" if f["facts"] else ""))
    if f["unmatched"]:
        parts.append("unmatched: " + "; ".join(f"{k} {v}" for k, v in f["unmatched"]))
    return "; ".join(parts)


def _short(c: dict) -> str:
    return ", ".join(f"{k}={'+'.join(v) if isinstance(v, list) else v}" for k, v in c.items()
                     if v not in (None, "", [], False))


def _md(text: str) -> str:
    return text.replace("|", "/").replace("\n", " ")
