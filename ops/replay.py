"""What-if replay of the route threshold tau over logged or uploaded traffic (pure: arrays in, DataFrames out).

A request goes to the LLM when ``p_llm >= tau``. With s = share kept on the small tier:

* latency  L(tau) = L_sched + s * L_small + (1 - s) * L_llm   (measured means, ms per request)
* cost     C(tau) = (1 - s) * tokens_per_llm_call / 1000 * price_per_1k_tokens   (USD per request)
* quality  Q(tau) = mean over labelled rows of [correct_llm if routed to the LLM else correct_small]
  (correct_llm is 1 unless given: the LLM is taken as the reference answer)

Gap summary as in RouteLLM: PGR = (Q - Q_small) / (Q_llm - Q_small) on the operating points of every
distinct tau; APGR is the trapezoid area under PGR against LLM share over [0, 1]; CPT(x) is the smallest
LLM share whose PGR reaches x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from chains.tiers.base import SMALL_ROUTE

DEFAULT_GRID = np.round(np.linspace(0.0, 1.0, 101), 4)
LABEL_COLUMNS = ("correct_small", "label_llm_needed")
LATENCY_COLUMNS = ("latency_sched_ms", "latency_small_ms", "latency_llm_ms")


@dataclass(frozen=True)
class LatencyModel:
    sched_ms: float
    small_ms: float
    llm_ms: float

    def at(self, small_share: np.ndarray | float) -> np.ndarray | float:
        return self.sched_ms + small_share * self.small_ms + (1.0 - small_share) * self.llm_ms


@dataclass(frozen=True)
class ReplayData:
    """p_llm per request, and where known whether the small tier's answer was correct (NaN = unknown)."""

    p_llm: np.ndarray
    correct_small: np.ndarray
    correct_llm: np.ndarray

    @property
    def labelled(self) -> np.ndarray:
        return ~np.isnan(self.correct_small)


def _mean(values: pd.Series) -> float:
    values = pd.to_numeric(values, errors="coerce").dropna()
    return float(values.mean()) if len(values) else math.nan


def latency_model_from_log(frame: pd.DataFrame) -> LatencyModel:
    """L_sched = mean routing overhead (guard+cache+embed+score) of routed rows; a tier's latency is the
    mean of total minus that overhead over its rows, so the overhead is not counted twice."""
    routed = frame[frame["p_llm"].notna()] if "p_llm" in frame else frame
    tier_ms = routed["total_ms"] - routed["sched_ms"]
    return LatencyModel(sched_ms=_mean(routed["sched_ms"]),
                        small_ms=_mean(tier_ms[routed["route"] == SMALL_ROUTE]),
                        llm_ms=_mean(tier_ms[routed["route"] == "llm"]))


def mean_llm_tokens(frame: pd.DataFrame) -> float:
    llm = frame[frame["route"] == "llm"]
    return _mean(llm["prompt_tokens"] + llm["completion_tokens"]) if len(llm) else math.nan


def data_from_log(frame: pd.DataFrame, feedback: pd.DataFrame | None = None) -> ReplayData:
    """Rows that reached the router; a rated small-tier answer labels whether the small tier was right."""
    routed = frame[frame["p_llm"].notna()]
    correct_small = np.full(len(routed), np.nan)
    if feedback is not None and not feedback.empty:
        # The latest rating of a request wins.
        rating = feedback.sort_values("created_at").groupby("request_id")["rating"].last()
        ratings = routed["id"].map(rating).to_numpy(dtype=float)
        on_small = (routed["route"] == SMALL_ROUTE).to_numpy()
        known = on_small & ~np.isnan(ratings)
        correct_small[known] = (ratings[known] > 0).astype(float)
    return ReplayData(p_llm=routed["p_llm"].to_numpy(dtype=float), correct_small=correct_small,
                      correct_llm=np.ones(len(routed)))


class ReplayInputError(ValueError):
    """An uploaded CSV cannot be replayed; the message says which column is wrong."""


def data_from_csv(frame: pd.DataFrame) -> tuple[ReplayData, LatencyModel | None]:
    """Columns: p_llm (required, 0..1); correct_small or label_llm_needed (0/1, optional); correct_llm
    (0/1, optional); latency_sched_ms / latency_small_ms / latency_llm_ms (optional, per-row)."""
    if "p_llm" not in frame.columns:
        raise ReplayInputError(f"the CSV needs a p_llm column; it has: {', '.join(map(str, frame.columns)) or 'none'}")
    p_llm = pd.to_numeric(frame["p_llm"], errors="coerce")
    bad = p_llm.isna() | (p_llm < 0) | (p_llm > 1)
    if bad.any():
        first = int(np.flatnonzero(bad.to_numpy())[0]) + 2  # +1 header, +1 one-based
        raise ReplayInputError(f"p_llm must be a number in [0, 1]; {int(bad.sum())} rows are not (first: line {first})")

    def binary(column: str) -> np.ndarray:
        values = pd.to_numeric(frame[column], errors="coerce")
        if (~values.isna() & ~values.isin([0, 1])).any():
            raise ReplayInputError(f"{column} must be 0 or 1 (or empty for unknown)")
        return values.to_numpy(dtype=float)

    if "correct_small" in frame.columns:
        correct_small = binary("correct_small")
    elif "label_llm_needed" in frame.columns:
        correct_small = 1.0 - binary("label_llm_needed")
    else:
        correct_small = np.full(len(frame), np.nan)
    correct_llm = binary("correct_llm") if "correct_llm" in frame.columns else np.ones(len(frame))
    correct_llm = np.where(np.isnan(correct_llm), 1.0, correct_llm)

    latency = None
    if any(c in frame.columns for c in LATENCY_COLUMNS):
        means = [(_mean(frame[c]) if c in frame.columns else 0.0) for c in LATENCY_COLUMNS]
        latency = LatencyModel(*(0.0 if math.isnan(m) else m for m in means))
    return ReplayData(p_llm.to_numpy(dtype=float), correct_small, correct_llm), latency


def sweep(data: ReplayData, latency: LatencyModel, tokens_per_llm_call: float, price_per_1k_tokens: float,
          taus: np.ndarray = DEFAULT_GRID) -> pd.DataFrame:
    """One row per tau: llm_share, small_share, latency_ms, cost_per_request, cost_per_1k_requests, quality."""
    taus = np.asarray(taus, dtype=float)
    to_llm = data.p_llm[None, :] >= taus[:, None]  # (taus, requests)
    n = data.p_llm.size
    llm_share = to_llm.mean(axis=1) if n else np.full(taus.size, math.nan)
    small_share = 1.0 - llm_share
    cost = llm_share * tokens_per_llm_call / 1000.0 * price_per_1k_tokens
    labelled = data.labelled
    if labelled.any():
        outcome = np.where(to_llm[:, labelled], data.correct_llm[labelled], data.correct_small[labelled])
        quality = outcome.mean(axis=1)
    else:
        quality = np.full(taus.size, math.nan)
    return pd.DataFrame({"tau": taus, "llm_share": llm_share, "small_share": small_share,
                         "latency_ms": latency.at(small_share), "cost_per_request": cost,
                         "cost_per_1k_requests": cost * 1000.0, "quality": quality})


def gap_curve(data: ReplayData) -> pd.DataFrame:
    """Operating points over labelled rows for every distinct tau (plus 'nothing to the LLM')."""
    labelled = data.labelled
    p = data.p_llm[labelled]
    small = data.correct_small[labelled]
    large = data.correct_llm[labelled]
    if p.size == 0:
        return pd.DataFrame(columns=["tau", "llm_share", "quality", "pgr"])
    taus = np.concatenate([[math.inf], np.unique(p)[::-1]])  # falling tau = rising LLM share, from 0
    to_llm = p[None, :] >= taus[:, None]
    quality = np.where(to_llm, large, small).mean(axis=1)
    q_small, q_llm = float(small.mean()), float(large.mean())
    gap = q_llm - q_small
    pgr = (quality - q_small) / gap if gap > 0 else np.full(taus.size, math.nan)
    return pd.DataFrame({"tau": taus, "llm_share": to_llm.mean(axis=1), "quality": quality, "pgr": pgr})


def gap_summary(data: ReplayData) -> dict[str, float]:
    """APGR, CPT(50%), CPT(80%), and the two reference qualities; NaN where there is no gap to recover."""
    curve = gap_curve(data)
    if curve.empty:
        return {"apgr": math.nan, "cpt50": math.nan, "cpt80": math.nan, "q_small": math.nan, "q_llm": math.nan,
                "labelled": 0}
    labelled = data.labelled
    q_small = float(data.correct_small[labelled].mean())
    q_llm = float(data.correct_llm[labelled].mean())
    result = {"q_small": q_small, "q_llm": q_llm, "labelled": int(labelled.sum()),
              "apgr": math.nan, "cpt50": math.nan, "cpt80": math.nan}
    if q_llm - q_small <= 0:
        return result
    x = curve["llm_share"].to_numpy()
    y = curve["pgr"].to_numpy()
    # Sending everything to the LLM recovers the whole gap by definition; close the curve at (1, 1).
    if x[-1] < 1.0:
        x, y = np.append(x, 1.0), np.append(y, 1.0)
    result["apgr"] = float(np.trapezoid(y, x))
    for target, key in ((0.5, "cpt50"), (0.8, "cpt80")):
        reached = x[y >= target - 1e-12]
        result[key] = float(reached.min()) if reached.size else math.nan
    return result


def tau_for_llm_share(data: ReplayData, target_share: float) -> tuple[float, float]:
    """The smallest tau (most LLM use) whose LLM share does not exceed the target; returns (tau, share)."""
    if not 0.0 <= target_share <= 1.0:
        raise ValueError("target LLM share must be between 0 and 1")
    candidates = np.unique(np.concatenate([DEFAULT_GRID, np.clip(data.p_llm, 0.0, 1.0)]))
    shares = (data.p_llm[None, :] >= candidates[:, None]).mean(axis=1) if data.p_llm.size else np.zeros(candidates.size)
    ok = np.flatnonzero(shares <= target_share + 1e-12)
    index = int(ok[0]) if ok.size else candidates.size - 1
    return float(candidates[index]), float(shares[index])


def tau_for_latency_slo(data: ReplayData, latency: LatencyModel, slo_ms: float) -> tuple[float, float] | None:
    """The smallest tau whose modelled mean latency meets the SLO; (tau, latency_ms), or None if none does."""
    candidates = np.unique(np.concatenate([DEFAULT_GRID, np.clip(data.p_llm, 0.0, 1.0)]))
    shares = (data.p_llm[None, :] >= candidates[:, None]).mean(axis=1) if data.p_llm.size else np.zeros(candidates.size)
    latencies = np.asarray(latency.at(1.0 - shares))
    ok = np.flatnonzero(latencies <= slo_ms)
    if not ok.size:
        return None
    return float(candidates[ok[0]]), float(latencies[ok[0]])
