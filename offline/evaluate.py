"""`make eval`: routing quality on the public test files and the hand-written held-out sets.

Every threshold is chosen on train/valid data (never on test): the product's τ and rewrite threshold come from the
router artifact (chosen on validation messages by `tandem router train`); CLINC150's and Banking77's own τ are
chosen on their valid data at ≤ 5 % in-scope escalation. Knowledge bases are built as the product builds them:
the encoder tuned on each KB (`tandem kb tune`), with the base MiniLM alongside for comparison where asked.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from pathlib import Path

import numpy as np

from chains.tiers.base import HANDOFF_ROUTE, LLM_ROUTE, SMALL_ROUTE, TOOL_ROUTE
from core.policy import Thresholds
from core.settings import get_settings
from knowledge.demo_kb import DEMO_DIR
from offline import datasets as ds
from offline.datasets import Query
from offline.kbs import INTENT_BENCHMARK, build_kb
from offline.route_batch import batch_chain, route_record

MAX_IN_SCOPE_ESCALATION = 0.05
TARGETS = {
    "heldout_correct_on_small": ("≥ 0.95", lambda v: v >= 0.95),
    "heldout_in_scope_to_llm": ("≤ 0.10", lambda v: v <= 0.10),
    "heldout_oos_to_llm": ("≥ 0.95", lambda v: v >= 0.95),
    "clinc150_oos_recall": ("≥ 0.85 (stretch 0.90)", lambda v: v >= 0.85),
    "banking77_oos_auroc": ("≥ 0.98", lambda v: v >= 0.98),
    "banking77_top1": ("≥ 0.94", lambda v: v >= 0.94),
    "tau_bench_llm_share": ("≥ 0.98", lambda v: v >= 0.98),
    "tau_bench_bitext_llm_share": ("≥ 0.98", lambda v: v >= 0.98),
    "bitext_correct_and_small": ("≥ 0.97", lambda v: v >= 0.97),
    "zh_correct_on_small": ("≥ 0.90", lambda v: v >= 0.90),
    "zh_in_scope_to_llm": ("≤ 0.10", lambda v: v <= 0.10),
    "zh_oos_to_llm": ("≥ 0.95", lambda v: v >= 0.95),
}


def _route(kb, queries: list[Query], thresholds: Thresholds) -> list[dict]:
    chain = batch_chain(kb, texts=[q.text for q in queries])
    return [route_record(chain, q.text, thresholds) for q in queries]


def _llm_share(kb, queries: list[Query], thresholds: Thresholds) -> dict:
    records = _route(kb, queries, thresholds)
    return {"llm_share": round(float(np.mean([r["route"] == LLM_ROUTE for r in records])), 4), "n_test": len(queries)}


def _p(records: list[dict]) -> np.ndarray:
    """p_llm per record; a message decided before scoring (guard, rule, tool) counts as sure to need the LLM."""
    return _score(records, "p_llm", missing=1.0)


def _score(records: list[dict], key: str, sign: float = 1.0, missing: float = 0.0) -> np.ndarray:
    return np.array([sign * (r[key] if r.get(key) is not None else missing) for r in records], dtype=np.float64)


def _auroc(y: np.ndarray, p: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(y, p)), 4)


def tau_for_escalation(p_in_scope: np.ndarray, budget: float = MAX_IN_SCOPE_ESCALATION) -> float:
    """The lowest tau that escalates at most `budget` of in-scope validation queries."""
    return float(np.quantile(p_in_scope, 1 - budget)) + 1e-6


def oos_report(records: list[dict], queries: list[Query], tau: float) -> dict:
    y = np.array([q.needs_llm for q in queries])
    p = _p(records)
    kept = p < tau
    correct = np.array([r["answer_id"] == q.answer_id for r, q in zip(records, queries)])
    return {"tau": round(tau, 4), "auroc": _auroc(y, p), "oos_recall": round(float((~kept)[y == 1].mean()), 4),
            "in_scope_escalation": round(float((~kept)[y == 0].mean()), 4),
            "in_scope_top1": round(float(correct[y == 0].mean()), 4),
            "kept_in_scope_accuracy": round(float(correct[(y == 0) & kept].mean()), 4), "n_test": int(len(y)),
            "baselines": baseline_report(records, queries)}


def baseline_report(records: list[dict], queries: list[Query]) -> dict:
    """The learned scores against the plain baselines the issue names, on the same messages (AUROC, higher is
    better): ``p_llm`` against the nearest stored question's cosine (max-cosine) and the KB's own top score for
    telling out-of-scope from in-scope, and ``draft_quality`` against the top score and the top-two margin for
    telling a right top answer from a wrong one (in-scope messages only)."""
    y = np.array([q.needs_llm for q in queries])
    out: dict[str, float | None] = dict.fromkeys(
        ("route_learned", "route_max_cosine", "route_kb_top", "draft_learned", "draft_kb_top", "draft_kb_margin"))
    if 0 < y.sum() < len(y):
        out.update(route_learned=_auroc(y, _p(records)), route_max_cosine=_auroc(y, _score(records, "dense_top", -1)),
                   route_kb_top=_auroc(y, _score(records, "kb_top", -1)))
    drafts = [(r, q) for r, q in zip(records, queries) if not q.needs_llm and r.get("draft_quality") is not None]
    right = np.array([r["answer_id"] == q.answer_id for r, q in drafts])
    if 0 < right.sum() < len(right):
        draft_records = [r for r, _ in drafts]
        out.update(draft_learned=_auroc(right, _score(draft_records, "draft_quality")),
                   draft_kb_top=_auroc(right, _score(draft_records, "kb_top")),
                   draft_kb_margin=_auroc(right, _score(draft_records, "kb_margin")))
    return out


def product_report(records: list[dict], queries: list[Query]) -> dict:
    """What customers see at the product thresholds: a rewrite counts as sent to the LLM; an answer by a tool (the
    order status, for a message with an order number) or a handoff is neither the small tier's nor the LLM's. An
    out-of-scope message that a rule answers (a tool: the courtesy reply to "thanks, that's all", or the status of
    the order it names; a handoff) is handled as well as the LLM would: ``oos_to_llm`` counts it with the LLM's, as
    no KB answer was forced on it."""
    y = np.array([q.needs_llm for q in queries])
    small = np.array([r["route"] == SMALL_ROUTE for r in records])
    to_llm = np.array([r["route"] == LLM_ROUTE for r in records])  # route_record reports a rewrite as llm
    ruled = np.array([r["route"] in (TOOL_ROUTE, HANDOFF_ROUTE) for r in records])
    correct = np.array([r["answer_id"] == q.answer_id for r, q in zip(records, queries)])
    rewrite = np.array([bool(r["rewrite"]) for r in records])
    ins = y == 0
    right_draft = ins & correct
    return {"n_in_scope": int(ins.sum()), "n_out_of_scope": int((~ins).sum()),
            "top1": round(float(correct[ins].mean()), 4),
            "correct_on_small": round(float(correct[ins & small].mean()), 4) if (ins & small).any() else None,
            "correct_and_small": round(float((correct & small)[ins].mean()), 4),
            "in_scope_to_llm": round(float(to_llm[ins].mean()), 4),
            "oos_to_llm": round(float((to_llm | ruled)[~ins].mean()), 4) if (~ins).any() else None,
            "right_drafts_rewritten": round(float(rewrite[right_draft].mean()), 4) if right_draft.any() else None,
            "auroc": _auroc(y, _p(records)) if 0 < y.sum() < len(y) else None,
            "baselines": baseline_report(records, queries)}


def run_eval(limit: int | None = None, log: Callable[[str], None] = print, base_too: bool = True) -> dict:
    default = Thresholds.defaults(get_settings())
    cut = (lambda rows: rows[:limit]) if limit else (lambda rows: rows)
    encoders = ("tuned", "base") if base_too else ("tuned",)
    report: dict = {"date": date.today().isoformat(), "route_threshold": default.route_threshold,
                    "rewrite_threshold": default.rewrite_threshold}
    with tempfile.TemporaryDirectory(prefix="tandem-eval-") as tmp:
        work = Path(tmp)
        answers = ds.bitext_answers()
        bitext_files = ds.write_kb_csvs(work / "bitext", answers, [(q.text, q.answer_id) for q in ds.bitext("train")])

        for encoder in encoders:
            tune = encoder == "tuned"
            log(f"[{encoder}] held-out natural messages vs the Bitext FAQ (answers + train questions); product τ")
            kb = build_kb(*bitext_files, tune=tune, log=log)
            heldout = cut(ds.bitext_heldout())
            report[f"heldout_{encoder}"] = product_report(_route(kb, heldout, default), heldout)
            if tune:
                log("[tuned] Bitext test (templated) vs the same KB; product τ")
                test = cut(ds.bitext("test"))
                records = _route(kb, test, default)
                report["bitext"] = {**product_report(records, test), "n_test": len(test)}
                log("[tuned] tau-bench hard requests (test) vs the same KB, a FAQ with no order tool; product τ")
                report["tau_bench_bitext"] = _llm_share(kb, cut(ds.tau_bench(("test",))), default)

            report[f"clinc150_{encoder}"] = clinc_report(work, tune, True, limit, log)
            report[f"banking77_oos_{encoder}"] = banking_oos_report(work, tune, True, limit, log)
            if tune:  # what the out-of-scope examples add (a KB without them is the product's default)
                report["clinc150_tuned_no_examples"] = clinc_report(work, tune, False, limit, log)
                report["banking77_oos_tuned_no_examples"] = banking_oos_report(work, tune, False, limit, log)

            bank = ds.banking("train")
            log(f"[{encoder}] Banking77 top-1: KB = all 77 intents' train questions")
            kb = build_kb(ds.intent_kb(work / "bank77", [replace(q, needs_llm=0) for q in bank]), tune=tune, log=log,
                          params=INTENT_BENCHMARK)
            test = cut(ds.banking("test"))
            vectors = kb.embed_messages([q.text for q in test])
            hits = [kb.search(q.text, k=1, vector=v) for q, v in zip(test, vectors)]
            report[f"banking77_top1_{encoder}"] = round(float(np.mean(
                [bool(h) and h[0].answer_id == q.answer_id for h, q in zip(hits, test)])), 4)

        report["hint3"] = hint3_report(work, default, limit, log)

        log("tau-bench hard requests (test) vs the demo shop KB; product τ")
        kb = build_kb(DEMO_DIR / "answers.csv", DEMO_DIR / "questions.csv", log=log)
        report["tau_bench"] = _llm_share(kb, cut(ds.tau_bench(("test",))), default)

        log("Chinese (test split) vs the demo shop in both languages, e5 space for Chinese; product τ")
        from offline.router_training import chinese_kb

        kb = chinese_kb(work / "zh")
        test = cut(ds.chinese("test"))
        report["zh"] = product_report(_route(kb, test, default), test)

    from offline.handoff_eval import run_handoff_eval

    report["handoff_triggers"] = run_handoff_eval(log=log)
    from offline.catalog_eval import run_catalog_eval

    report["catalog"] = run_catalog_eval(log=log)
    report["summary"] = summary(report)
    return report


def hint3_report(work: Path, thresholds: Thresholds, limit: int | None, log: Callable[[str], None]) -> dict:
    log("HINT3: per bot, KB = that bot's train questions; product τ")
    report = {}
    for bot in ("sofmattress", "curekart", "powerplay11"):
        kb = build_kb(ds.intent_kb(work / bot, [q for q in ds.hint3("train") if q.group.endswith(bot)]), log=log)
        test = [q for q in ds.hint3("test") if q.group.endswith(bot)]
        test = test[:limit] if limit else test
        records = _route(kb, test, thresholds)
        small = np.array([r["route"] == SMALL_ROUTE for r in records])
        y = np.array([q.needs_llm for q in test])
        correct = np.array([r["answer_id"] == q.answer_id for r, q in zip(records, test)])
        report[bot] = {
            "kept_small_share": round(float(small.mean()), 4),
            "kept_accuracy": round(float(correct[small & (y == 0)].sum() / max(small.sum(), 1)), 4),
            "oos_kept_share": round(float(small[y == 1].mean()), 4),
            "real_in_scope_share": round(float((y == 0).mean()), 4), "n_test": len(test)}
    return report


def clinc_report(work: Path, tune: bool, examples: bool, limit: int | None, log: Callable[[str], None]) -> dict:
    """CLINC150: KB = in-scope train questions (with ``examples``, the out-of-scope train rows as the KB's
    out-of-scope examples); τ chosen on valid at ≤ 5 % in-scope escalation; reported on test."""
    train = ds.clinc("train")
    log(f"[{'tuned' if tune else 'base'}] CLINC150: KB = in-scope train questions"
        f"{' + out-of-scope train rows as examples' if examples else ''}; τ chosen on valid")
    kb = build_kb(ds.intent_kb(work / f"clinc-{examples}", train, [q for q in train if q.needs_llm] if examples else []),
                  tune=tune, log=log, params=INTENT_BENCHMARK)
    default = Thresholds.defaults(get_settings())
    tau = tau_for_escalation(_p(_route(kb, [q for q in ds.clinc("valid") if not q.needs_llm], default)))
    test = _stratified(ds.clinc("test"), limit)
    return oos_report(_route(kb, test, default), test, tau)


def banking_oos_report(work: Path, tune: bool, examples: bool, limit: int | None,
                       log: Callable[[str], None]) -> dict:
    """Banking77-OOS: KB = the 50 in-scope intents' train questions (with ``examples``, the train rows of the 27
    held-out intents as out-of-scope examples); τ chosen on train part B against a KB of part A."""
    bank = ds.banking("train")
    log(f"[{'tuned' if tune else 'base'}] Banking77-OOS: KB = 50 in-scope intents"
        f"{' + out-of-scope train rows as examples' if examples else ''}; τ chosen on train part B vs part A")
    part_a = [q for q in bank if ds.in_split_a(q.text)]
    kb_a = build_kb(ds.intent_kb(work / f"bank_a-{examples}", part_a,
                                 [q for q in part_a if q.needs_llm] if examples else []), tune=tune, log=log,
                    params=INTENT_BENCHMARK)
    default = Thresholds.defaults(get_settings())
    tau = tau_for_escalation(_p(_route(kb_a, [q for q in bank if not ds.in_split_a(q.text) and not q.needs_llm],
                                       default)))
    kb = build_kb(ds.intent_kb(work / f"bank-{examples}", bank, [q for q in bank if q.needs_llm] if examples else []),
                  tune=tune, log=log, params=INTENT_BENCHMARK)
    test = _stratified(ds.banking("test"), limit)
    return oos_report(_route(kb, test, default), test, tau)


def summary(report: dict) -> dict:
    held, clinc, bank = report["heldout_tuned"], report["clinc150_tuned"], report["banking77_oos_tuned"]
    return {
        "heldout_correct_on_small": held["correct_on_small"], "heldout_in_scope_to_llm": held["in_scope_to_llm"],
        "heldout_oos_to_llm": held["oos_to_llm"], "heldout_top1": held["top1"],
        "heldout_right_drafts_rewritten": held["right_drafts_rewritten"],
        "clinc150_oos_recall": clinc["oos_recall"], "clinc150_in_scope_escalation": clinc["in_scope_escalation"],
        "clinc150_auroc": clinc["auroc"], "banking77_oos_auroc": bank["auroc"],
        "banking77_top1": report["banking77_top1_tuned"], "tau_bench_llm_share": report["tau_bench"]["llm_share"],
        "tau_bench_bitext_llm_share": report["tau_bench_bitext"]["llm_share"],
        "bitext_correct_and_small": report["bitext"]["correct_and_small"],
        "hint3_kept_small": {bot: v["kept_small_share"] for bot, v in report["hint3"].items()},
        "zh_correct_on_small": report["zh"]["correct_on_small"], "zh_in_scope_to_llm": report["zh"]["in_scope_to_llm"],
        "zh_oos_to_llm": report["zh"]["oos_to_llm"], "zh_top1": report["zh"]["top1"],
    }


def _stratified(rows: list[Query], limit: int | None) -> list[Query]:
    if not limit:
        return rows
    pos = [q for q in rows if q.needs_llm][: limit // 2]
    return pos + [q for q in rows if not q.needs_llm][: limit - len(pos)]


def _met(key: str, value: float | None) -> str:
    target, ok = TARGETS[key]
    return "" if value is None else ("yes" if ok(value) else "**no**")


def _comparison(title: str, columns: tuple[str, ...], rows: list[tuple[str, *tuple[float | None, ...]]]) -> list[str]:
    """A titled Markdown table of one measure per row and one column per variant, as README tables show them."""
    return ["", title, "", f"| measure | {' | '.join(columns)} |", "|---" * (len(columns) + 1) + "|",
            *(f"| {name} | {' | '.join(_fmt(v) for v in values)} |" for name, *values in rows)]


def _baseline_rows(name: str, report: dict) -> list[tuple[str, *tuple[float | None, ...]]]:
    b = report.get("baselines")
    if not b:
        return []
    rows = [(f"{name}: out of scope vs in scope (`p_llm`)", b["route_learned"], b["route_max_cosine"],
             b["route_kb_top"], None),
            (f"{name}: right vs wrong top answer (`draft_quality`)", b["draft_learned"], None, b["draft_kb_top"],
             b["draft_kb_margin"])]
    return [row for row in rows if row[1] is not None]  # a set without such pairs has no row


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def markdown(report: dict) -> str:
    """The README table of `make eval`: measured next to target, thresholds chosen on train/valid."""
    s = report["summary"]
    held, base = report["heldout_tuned"], report.get("heldout_base")
    clinc, bank = report["clinc150_tuned"], report["banking77_oos_tuned"]
    rows = [
        ("Held-out paraphrases: correct answer on the small tier", "heldout_correct_on_small",
         f"{_fmt(held['correct_on_small'])} (top-1 {_fmt(held['top1'])})"),
        ("Held-out paraphrases: in-scope messages sent to the LLM", "heldout_in_scope_to_llm",
         f"{_fmt(held['in_scope_to_llm'])} (right drafts rewritten {_fmt(held['right_drafts_rewritten'])})"),
        ("Held-out out-of-scope/complex requests sent to the LLM (or a rule)", "heldout_oos_to_llm", _fmt(held["oos_to_llm"])),
        ("CLINC150 out-of-scope recall at ≤ 5 % in-scope escalation", "clinc150_oos_recall",
         f"{_fmt(clinc['oos_recall'])} at {clinc['in_scope_escalation']:.1%} (τ={clinc['tau']:.3f} from valid)"),
        ("Banking77-OOS AUROC", "banking77_oos_auroc", _fmt(bank["auroc"])),
        ("Banking77 top-1", "banking77_top1", _fmt(report["banking77_top1_tuned"])),
        ("τ-bench hard requests sent to the LLM (demo shop KB)", "tau_bench_llm_share",
         f"{_fmt(report['tau_bench']['llm_share'])} (n={report['tau_bench']['n_test']})"),
        ("τ-bench hard requests sent to the LLM (Bitext FAQ KB)", "tau_bench_bitext_llm_share",
         f"{_fmt(report['tau_bench_bitext']['llm_share'])} (n={report['tau_bench_bitext']['n_test']})"),
        ("Bitext correct-and-small", "bitext_correct_and_small", _fmt(report["bitext"]["correct_and_small"])),
        ("Chinese: correct answer on the small tier", "zh_correct_on_small",
         f"{_fmt(report['zh']['correct_on_small'])} (top-1 {_fmt(report['zh']['top1'])})"),
        ("Chinese: in-scope messages sent to the LLM", "zh_in_scope_to_llm", _fmt(report["zh"]["in_scope_to_llm"])),
        ("Chinese: out-of-scope/complex requests sent to the LLM (or a rule)", "zh_oos_to_llm", _fmt(report["zh"]["oos_to_llm"])),
    ]
    held_n = held["n_in_scope"] + held["n_out_of_scope"]
    zh = report["zh"]
    lines = [f"Measured {report['date']} by `make eval`: public **test** files, the hand-written held-out set "
             f"({held_n} messages) and the Chinese test split ({zh['n_in_scope'] + zh['n_out_of_scope']} messages), "
             f"neither ever used to fit or choose anything. Product τ = {report['route_threshold']} and "
             f"rewrite threshold = {report['rewrite_threshold']}, both chosen on validation data by "
             "`tandem router train`; CLINC150's and Banking77's τ chosen on their valid data. A draft the LLM "
             "rewrites counts as sent to the LLM. Encoder: tuned on each KB (`tandem kb tune`). The Bitext FAQ, "
             "HINT3 and the demo shop have Tandem's starter out-of-scope examples, as every KB the product builds; "
             "CLINC150 and Banking77 are not shops and go without them, but have their out-of-scope *train* rows "
             "as out-of-scope examples (the table after the next shows them without).", "",
             "| measure | result | target | met |", "|---|---|---|---|"]
    lines += [f"| {label} | {value} | {TARGETS[key][0]} | {_met(key, s[key])} |" for label, key, value in rows]
    if base is not None:
        lines += _comparison("Base MiniLM against the KB-tuned encoder (same router, same thresholds):",
                             ("base MiniLM", "tuned on the KB"), [
            ("held-out top-1", base["top1"], held["top1"]),
            ("held-out correct on the small tier", base["correct_on_small"], held["correct_on_small"]),
            ("held-out in-scope sent to the LLM", base["in_scope_to_llm"], held["in_scope_to_llm"]),
            ("held-out out-of-scope sent to the LLM", base["oos_to_llm"], held["oos_to_llm"]),
            ("held-out AUROC (out of scope)", base["auroc"], held["auroc"]),
            ("CLINC150 OOS recall at ≤ 5 %", report["clinc150_base"]["oos_recall"], clinc["oos_recall"]),
            ("CLINC150 AUROC", report["clinc150_base"]["auroc"], clinc["auroc"]),
            ("CLINC150 in-scope top-1", report["clinc150_base"]["in_scope_top1"], clinc["in_scope_top1"]),
            ("Banking77-OOS AUROC", report["banking77_oos_base"]["auroc"], bank["auroc"]),
            ("Banking77 top-1", report["banking77_top1_base"], report["banking77_top1_tuned"])])
    lines += _comparison(
        "Learned scores against plain baselines on the same messages (AUROC, higher is better; tuned encoder; "
        "– where a baseline does not apply). Max-cosine is the nearest stored question's cosine, the baseline the issue names:",
        ("learned score", "max-cosine", "KB top score", "top-two margin"),
        [*_baseline_rows("held-out", held), *_baseline_rows("Chinese test", report["zh"]),
         *_baseline_rows("Bitext test", report["bitext"]), *_baseline_rows("CLINC150 test", clinc),
         *_baseline_rows("Banking77-OOS test", bank)])
    bare_clinc, bare_bank = report.get("clinc150_tuned_no_examples"), report.get("banking77_oos_tuned_no_examples")
    if bare_clinc is not None and bare_bank is not None:
        lines += _comparison("What out-of-scope examples add (tuned encoder, same router; τ of each chosen on valid):",
                             ("KB without examples", "KB with the train split's out-of-scope rows"), [
            ("CLINC150 OOS recall at ≤ 5 %", bare_clinc["oos_recall"], clinc["oos_recall"]),
            ("CLINC150 in-scope escalation", bare_clinc["in_scope_escalation"], clinc["in_scope_escalation"]),
            ("CLINC150 AUROC", bare_clinc["auroc"], clinc["auroc"]),
            ("Banking77-OOS AUROC", bare_bank["auroc"], bank["auroc"]),
            ("Banking77-OOS out-of-scope recall at ≤ 5 %", bare_bank["oos_recall"], bank["oos_recall"])])
    lines += ["", "HINT3 (real traffic of three bots; KB = each bot's train questions):", "",
              "| bot | real in-scope share | kept on the small tier | accuracy of kept answers | out-of-scope kept |",
              "|---|---|---|---|---|"]
    for bot, v in report["hint3"].items():
        lines.append(f"| {bot} | {v['real_in_scope_share']:.2f} | {v['kept_small_share']:.2f} | "
                     f"{v['kept_accuracy']:.2f} | {v['oos_kept_share']:.2f} |")
    return "\n".join(lines)
