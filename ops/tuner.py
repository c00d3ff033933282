"""Automatic tuning of τ and the rewrite threshold toward an operator's objective, with guardrails and rollback.

Off by default; the operator switches it on in the console and states one objective: the LLM share at most X, the
modelled p95 latency at most Y ms, or the cost per 1,000 requests at most Z. Each window (default 30 minutes) the
job replays that window's logged traffic (the what-if machinery: every routed request's p_llm and draft quality)
and proposes the pair of thresholds closest to the current one that meets the objective, moving at most a step.

It applies the proposal only when the window had enough traffic, no alert is open, and the labelled replay
accuracy (requests with feedback) does not drop. It saves a new policy version with the reason and the evidence,
and records an event. One window later it compares the objective and the quality guard (the negative-feedback rate
and the labelled accuracy) with what they were before; if either got worse, it restores the previous version and
raises an alert. Every step is an event the console's Autopilot page explains.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd
from sqlmodel import col, select

from chains.tiers.base import SMALL_ROUTE
from core.policy import Thresholds
from storage import policy_store
from storage.db import Database
from storage.tables import OpsEvent

OBJECTIVES = {"llm_share": "LLM share", "p95_ms": "modelled p95 latency (ms)", "cost_per_1k": "cost per 1,000 requests"}
AUTHOR = "autotune"


@dataclass
class WindowFigures:
    requests: int
    routed: int
    llm_share: float
    p95_ms: float
    cost_per_1k: float
    negative_feedback_rate: float
    labelled_accuracy: float | None

    def value(self, objective: str) -> float:
        return float(getattr(self, objective))


def _routed(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["route"] != "guard") & frame["p_llm"].notna()]


def modelled(frame: pd.DataFrame, tau: float, rewrite: float, price_per_1k: float) -> WindowFigures:
    """What the window's traffic would have looked like at (tau, rewrite): the LLM share (rewrites included),
    a p95 from the per-route latencies, the cost; and the quality guard's figures as logged."""
    routed = _routed(frame)
    n = len(routed)
    if not n:
        return WindowFigures(len(frame), 0, 0.0, 0.0, 0.0, 0.0, None)
    p = routed["p_llm"].to_numpy(dtype=float)
    quality = routed["draft_quality"].fillna(1.0).to_numpy(dtype=float)
    # The chain rewrites below the lower of the operator's threshold and the KB's own floor (chains/calibration.py)
    floor = (routed["kb_rewrite_floor"].fillna(1.0).to_numpy(dtype=float) if "kb_rewrite_floor" in routed
             else np.ones(n))
    to_llm = (p >= tau) | (quality < np.minimum(rewrite, floor))
    share = float(to_llm.mean())
    llm_ms = frame.loc[frame["route"] == "llm", "total_ms"]
    small_ms = frame.loc[frame["route"] == SMALL_ROUTE, "total_ms"]
    p95_llm = float(llm_ms.quantile(0.95)) if len(llm_ms) else 3000.0
    p95_small = float(small_ms.quantile(0.95)) if len(small_ms) else 50.0
    tokens = frame.loc[frame["route"] == "llm", "tokens"]
    per_call = float(tokens.mean()) if len(tokens) else 300.0
    labelled = routed["label_correct_small"].dropna() if "label_correct_small" in routed else pd.Series(dtype=float)
    accuracy = None
    if len(labelled):
        kept = ~to_llm[routed.index.get_indexer(labelled.index)]
        # a labelled request kept small is right when its label says so; one sent to the LLM counts as right
        accuracy = float(np.where(kept, labelled.to_numpy(dtype=float), 1.0).mean())
    negative = float(frame["negative_feedback"].sum() / max(1, n)) if "negative_feedback" in frame else 0.0
    return WindowFigures(len(frame), n, share, share * p95_llm + (1 - share) * p95_small,
                         share * per_call / 1000 * price_per_1k * 1000, negative, accuracy)


def propose(frame: pd.DataFrame, current: Thresholds, config: dict[str, Any], price_per_1k: float
            ) -> tuple[float, float, WindowFigures, WindowFigures]:
    """The (tau, rewrite) pair within one step of the current pair that meets the objective with the most LLM
    (quality) left; or, if none meets it, the one that comes closest. Returns (tau, rewrite, before, after)."""
    objective, target, step = config["objective"], float(config["target"]), float(config.get("step", 0.05))
    before = modelled(frame, current.route_threshold, current.rewrite_threshold, price_per_1k)
    best_key: tuple[float, float, float] | None = None
    best = (current.route_threshold, current.rewrite_threshold, before)
    offsets = np.arange(-step, step + 1e-9, 0.01)
    for tau in np.unique(np.round(np.clip(current.route_threshold + offsets, 0.0, 1.0), 4)):
        for rewrite in np.unique(np.round(np.clip(current.rewrite_threshold + offsets, 0.0, 1.0), 4)):
            figures = modelled(frame, float(tau), float(rewrite), price_per_1k)
            value = figures.value(objective)
            meets = value <= target
            move = abs(tau - current.route_threshold) + abs(rewrite - current.rewrite_threshold)
            # meeting the objective ranks first; then the most LLM left (the quality side), or, while the objective
            # is out of reach, the value closest to it; then the smallest move
            key = (1.0 if meets else 0.0, figures.llm_share if meets else -value, -float(move))
            if best_key is None or key > best_key:
                best_key, best = key, (float(tau), float(rewrite), figures)
    return best[0], best[1], before, best[2]


def events(db: Database, limit: int = 100) -> list[OpsEvent]:
    with db.session() as session:
        return list(session.exec(select(OpsEvent).order_by(col(OpsEvent.created_at).desc()).limit(limit)))


def record(db: Database, now: datetime, kind: str, message: str, detail: dict[str, Any]) -> OpsEvent:
    event = OpsEvent(created_at=now, kind=kind, message=message, detail=detail)
    with db.session() as session:
        session.add(event)
        session.commit()
        session.refresh(event)
    return event


def _applied_at(watch: OpsEvent) -> pd.Timestamp:
    stamp = pd.Timestamp(watch.created_at)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp  # SQLite gives naive UTC, PostgreSQL aware


def pending_watch(db: Database) -> OpsEvent | None:
    """The last applied change that has not been confirmed or rolled back yet."""
    for event in events(db, 20):
        if event.kind in ("confirmed", "rolled_back", "superseded"):
            return None
        if event.kind == "applied":
            return event
    return None


def tune(db: Database, frame: pd.DataFrame, now: datetime, config: dict[str, Any], alerts_open: bool,
         price_per_1k: float) -> OpsEvent:
    """One tuner step over the window in ``frame`` (requests since ``now - window``). Returns the event it recorded."""
    current = policy_store.current(db)
    window = int(config.get("window_min", 30))
    watch = pending_watch(db)
    if watch is not None:
        if pd.Timestamp(now) - _applied_at(watch) < timedelta(minutes=window):
            return record(db, now, "waiting", f"watching the change of {watch.created_at:%H:%M} until a full window "
                                               "has passed", {"applied_event": watch.id})
        judged = _judge(db, frame, now, config, watch, current, price_per_1k)
        if judged.kind in ("rolled_back", "superseded"):  # superseded: the operator's choice stands a window
            return judged
        # confirmed: the window just judged is also the evidence for the next step, so tuning does not stall
    if alerts_open:
        return record(db, now, "skipped", "an alert is open: no automatic change until it is resolved", {})
    routed = len(_routed(frame))
    if routed < int(config.get("min_requests", 100)):
        return record(db, now, "skipped", f"only {routed} routed requests in the last {window} minutes (needs "
                                           f"{config.get('min_requests', 100)})", {"routed": routed})
    tau, rewrite, before, after = propose(frame, current, config, price_per_1k)
    objective, target = config["objective"], float(config["target"])
    if (tau, rewrite) == (current.route_threshold, current.rewrite_threshold):
        value = before.value(objective)
        why = (f"meets the objective (≤ {target:g}) with the most LLM at the current thresholds" if value <= target
               else f"misses the objective (≤ {target:g}), and no threshold within a step comes closer")
        return record(db, now, "kept", f"{OBJECTIVES[objective]} {value:.3g} {why}", {"before": before.__dict__})
    if before.labelled_accuracy is not None and after.labelled_accuracy is not None \
            and after.labelled_accuracy < before.labelled_accuracy - 0.01:
        return record(db, now, "skipped", "the proposal would lower the labelled replay accuracy "
                                          f"({before.labelled_accuracy:.3f} -> {after.labelled_accuracy:.3f})",
                      {"before": before.__dict__, "after": after.__dict__, "tau": tau, "rewrite": rewrite})
    evidence = {"objective": objective, "target": target, "window_min": window, "before": before.__dict__,
                "modelled_after": after.__dict__, "previous_version": current.version,
                "previous": {"route_threshold": current.route_threshold,
                             "rewrite_threshold": current.rewrite_threshold}}
    reason = (f"autotune: {OBJECTIVES[objective]} {before.value(objective):.3g} -> {after.value(objective):.3g} "
              f"(objective ≤ {target:g}); τ {current.route_threshold} -> {tau}, rewrite {current.rewrite_threshold} "
              f"-> {rewrite}")
    saved = policy_store.save(db, {"route_threshold": tau, "rewrite_threshold": rewrite}, AUTHOR, reason, evidence)
    return record(db, now, "applied", f"{reason}. Undo: roll back to version {current.version} on the Tuning page",
                  {**evidence, "version": saved.version, "tau": tau, "rewrite": rewrite})


def _judge(db: Database, frame: pd.DataFrame, now: datetime, config: dict[str, Any], watch: OpsEvent,
           current: Thresholds, price_per_1k: float) -> OpsEvent:
    """A window after a change: keep it if the objective and the quality guard did not get worse, else undo it.
    A change someone has since replaced (an operator's save or undo) is not judged: undoing it would undo them."""
    if current.version != watch.detail["version"]:
        return record(db, now, "superseded", f"version {watch.detail['version']} (the automatic change) was replaced "
                                             f"by version {current.version}; not judged", {"applied_event": watch.id})
    objective = watch.detail["objective"]
    before = watch.detail["before"]
    since = frame[frame["created_at"] >= _applied_at(watch)]
    after = modelled(since, current.route_threshold, current.rewrite_threshold, price_per_1k)
    routed = _routed(since)
    measured = {"llm_share": float((routed["route"] == "llm").mean()) if len(routed) else 0.0}
    worse = []
    value_after = measured.get(objective, after.value(objective))
    target = float(watch.detail["target"])
    if value_after > before[objective] + 0.02 and value_after > target:
        worse.append(f"{OBJECTIVES[objective]} {before[objective]:.3g} -> {value_after:.3g}")
    if after.negative_feedback_rate > before["negative_feedback_rate"] + 0.02:
        worse.append(f"negative feedback {before['negative_feedback_rate']:.3f} -> {after.negative_feedback_rate:.3f}")
    if before.get("labelled_accuracy") is not None and after.labelled_accuracy is not None \
            and after.labelled_accuracy < before["labelled_accuracy"] - 0.01:
        worse.append(f"labelled accuracy {before['labelled_accuracy']:.3f} -> {after.labelled_accuracy:.3f}")
    detail = {"applied_event": watch.id, "before": before, "after": after.__dict__, "measured": measured}
    if not worse:
        return record(db, now, "confirmed", f"kept version {current.version}: nothing got worse in the window after "
                                            "the change", detail)
    previous = watch.detail["previous"]
    restored = policy_store.save(db, previous, AUTHOR, f"autotune rollback: {'; '.join(worse)}", detail)
    from ops.alerts import raise_alert

    raise_alert(db, "autotune", f"automatic change rolled back (version {restored.version}): {'; '.join(worse)}",
                now, detail)
    return record(db, now, "rolled_back", f"restored τ {previous['route_threshold']} and rewrite "
                                          f"{previous['rewrite_threshold']} as version {restored.version}: "
                                          f"{'; '.join(worse)}", detail)
