"""Retraining the `evidence` router from operators' and customers' labels: the labelled logged requests, a candidate
fitted on the shipped validation rows plus most of them, its shadow comparison with the live router on the rest, and
promotion only when it is not worse."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from chains.features import feature_vector
from chains.routers.artifacts import read_artifact
from chains.routers.evidence import EVIDENCE_NAMES, ROUTE_NAMES
from chains.tiers.base import CACHE_ROUTE, SMALL_ROUTE
from offline.router_fit import fit, predict
from offline.router_training import TABLE


def logged_examples(db, kinds: tuple[str, ...] = (SMALL_ROUTE, CACHE_ROUTE)) -> tuple[dict[str, np.ndarray], list[str]]:
    """Requests customers or operators labelled: thumbs-down or a hand-off after a knowledge-base answer means the
    LLM was needed (1); thumbs-up means it was not (0). Inputs come from the logged scores and (masked) text."""
    from sqlmodel import col, select

    from storage.tables import Feedback, Handoff, RequestLog

    labels: dict[str, int] = {}
    with db.session() as session:
        for request_id, rating in session.exec(select(Feedback.request_id, Feedback.rating)).all():
            labels[request_id] = int(rating < 0) if request_id not in labels else max(labels[request_id], int(rating < 0))
        for request_id in session.exec(select(Handoff.request_id).where(col(Handoff.request_id) != "")).all():
            labels[request_id] = 1
        rows = session.exec(select(RequestLog).where(col(RequestLog.id).in_(list(labels)))).all() if labels else []
    x, y, ids = [], [], []
    for row in rows:
        scores = row.scores or {}
        if row.route not in kinds or "dense_top" not in scores:  # logged before distance evidence existed
            continue
        evidence = [float(scores.get(name, 0.0)) for name in EVIDENCE_NAMES]
        x.append(evidence + feature_vector(row.text or ""))
        y.append(labels[row.id])
        ids.append(row.id)
    return {"x_route": np.asarray(x, dtype=np.float64).reshape(-1, len(ROUTE_NAMES)),
            "needs_llm": np.asarray(y, dtype=np.int8)}, ids


def shadow_compare(live: dict, candidate: dict, held_out: dict[str, np.ndarray]) -> dict:
    """Score both routers on logged, labelled requests neither was fitted on (log loss and AUROC)."""
    from sklearn.metrics import log_loss, roc_auc_score

    y = held_out["needs_llm"]
    out: dict = {"rows": int(len(y)), "needs_llm": int(y.sum())}
    for name, block in (("live", live), ("candidate", candidate)):
        p = (np.clip(predict(block["route"], held_out["x_route"], ROUTE_NAMES), 1e-6, 1 - 1e-6) if len(y)
             else np.zeros(0))
        out[name] = {"log_loss": round(float(log_loss(y, p, labels=[0, 1])), 4) if len(y) else None,
                     "auroc": round(float(roc_auc_score(y, p)), 4) if 0 < y.sum() < len(y) else None}
    live_loss, cand_loss = out["live"]["log_loss"], out["candidate"]["log_loss"]
    out["not_worse"] = live_loss is None or cand_loss is None or cand_loss <= live_loss + 1e-9
    return out


def retrain_from_feedback(db, home: Path, log: Callable[[str], None] = print,
                          holdout_share: float = 0.3) -> tuple[Path, dict]:
    """A candidate router: the shipped validation rows plus 70 % of the labelled logged requests; scored against the
    live router on the other 30 % (shadow evaluation). `promote_if_not_worse` makes it live only if it is not worse."""
    from chains.routers.artifacts import candidate_path, live

    if not TABLE.exists():
        raise FileNotFoundError(f"{TABLE} is missing: run `tandem router train` once")
    with np.load(TABLE, allow_pickle=False) as stored:
        arrays = {k: stored[k] for k in stored.files}
    examples, ids = logged_examples(db)
    rng = np.random.default_rng(7)
    order = rng.permutation(len(ids))
    cut = int(round(len(ids) * (1 - holdout_share)))
    fit_rows, held_rows = order[:cut], order[cut:]
    subset = lambda rows: {k: v[rows] for k, v in examples.items()}  # noqa: E731
    log(f"retraining with {len(fit_rows)} labelled requests; {len(held_rows)} kept apart for the shadow comparison")
    block = fit(arrays, extra=subset(fit_rows))
    current = live(db).params
    live_block = current.get("evidence") or {}
    shadow: dict[str, Any] = (shadow_compare(live_block, block, subset(held_rows)) if live_block
                              else {"not_worse": True, "rows": 0})
    block["metrics"]["shadow"] = shadow
    artifact = {**current, "evidence": block, "trained": date.today().isoformat(),
                "feedback_rows": int(len(fit_rows))}
    candidate = candidate_path(home)
    candidate.parent.mkdir(parents=True, exist_ok=True)
    candidate.write_text(json.dumps(artifact, indent=1))
    log(f"candidate {candidate}: shadow log loss live {shadow.get('live', {}).get('log_loss')} vs candidate "
        f"{shadow.get('candidate', {}).get('log_loss')} -> {'not worse' if shadow['not_worse'] else 'WORSE'}")
    return candidate, block["metrics"]


def promote_if_not_worse(db, candidate: Path, author: str) -> int:
    """Promote a candidate only when its shadow comparison says it is not worse than the live router; returns the
    new live version."""
    from chains.routers.artifacts import promote
    from core.errors import TandemError

    shadow = (read_artifact(candidate).get("evidence") or {}).get("metrics", {}).get("shadow", {})
    if shadow and not shadow.get("not_worse", True):
        raise TandemError(f"the candidate router is worse than the live one on held-out logged requests "
                          f"(log loss {shadow['candidate']['log_loss']} vs {shadow['live']['log_loss']}); not promoted")
    return promote(db, candidate, author, note=f"retrained from feedback ({shadow.get('rows', 0)} held-out rows: "
                                                f"not worse)")
