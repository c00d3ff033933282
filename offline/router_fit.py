"""Fitting the `evidence` router on a validation table (offline/router_training.py builds the table): the
gradient-boosted trees for ``p_llm``, the draft-quality model, and the product thresholds read from out-of-fold
scores. Numpy and scikit-learn only, no KB and no encoder, so a stored table refits in seconds (feedback
retraining, ``tandem router train --refit``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from chains.features import feature_vector
from chains.routers.evidence import DRAFT_NAMES, ROUTE_NAMES

# Product thresholds are chosen on the natural validation messages: at most this share of in-scope messages
# escalated by the router, and at most this share of right drafts rewritten.
IN_SCOPE_ESCALATION_BUDGET = 0.05
# Right drafts rewritten: ≤ 2 % on every KB (issue 39), met by each hand-written group alone (rewrite_threshold).
RIGHT_DRAFT_REWRITE_BUDGET = 0.02
# τ is chosen on these (natural messages against KBs without out-of-scope examples of their own, the product's
# default; shop KBs have the starter examples): a KB given its own examples separates better, and letting it pull
# τ down would escalate more of every other KB's messages.
NATURAL_GROUPS = ("bitext-dev", "hint3", "banking77", "clinc150", "zh")
# The hand-written groups are what customers really type against a FAQ written in other words: they count three
# times in the fit (5-fold CV on them: AUROC 0.78 -> 0.79 natural English, 0.83 -> 0.89 Chinese).
HANDWRITTEN_GROUPS, HANDWRITTEN_WEIGHT = ("bitext-dev", "zh"), 3.0
# The rewrite threshold is chosen on what customers type: on the intent datasets right drafts are surer, and the
# budget met on all natural groups pooled rewrote 10 % of the development set's right drafts (5-fold out of fold),
# against 3.6 % when it is met on the hand-written groups.
REWRITE_GROUPS = HANDWRITTEN_GROUPS


def route_matrix(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The router's inputs for every row: the stored evidence and the features of the stored text."""
    features = np.asarray([feature_vector(str(t)) for t in arrays["text"]], dtype=np.float64)
    return np.hstack([arrays["evidence"].astype(np.float64), features.reshape(len(arrays["text"]), -1)])


def _fit_linear(x: np.ndarray, y: np.ndarray, weight: np.ndarray, c: float) -> dict:
    from sklearn.linear_model import LogisticRegression

    mean, scale = x.mean(0), x.std(0) + 1e-6
    model = LogisticRegression(C=c, max_iter=5000).fit((x - mean) / scale, y, sample_weight=weight)
    return {"mean": mean.tolist(), "scale": scale.tolist(), "coef": model.coef_[0].tolist(),
            "intercept": float(model.intercept_[0])}


# What each piece of evidence means, as the sign it may push p_llm by: closer to the KB never makes the LLM more
# needed, closer to out-of-scope examples (or more things asked at once) never less. Trees fitted free of these
# read noise as rules; held to them, they generalise to a group they never saw better than free trees
# (leave-one-group-out AUROC, Chinese 0.89 -> 0.91, CLINC150 0.982 -> 0.986).
MONOTONE = {"kb_top": -1, "dense_top": -1, "dense_z": -1, "agreement": -1, "lexical_top": -1, "oos_gap": 1,
            "oos_knn": 1, "starter_gap": 1, "starter_knn": 1, "n_actions": 1}
TREE_PARAMS = {"max_iter": 200, "learning_rate": 0.05, "max_leaf_nodes": 15, "l2_regularization": 1.0,
               "min_samples_leaf": 40, "early_stopping": False, "random_state": 0}


def _fit_trees(x: np.ndarray, y: np.ndarray, weight: np.ndarray, names: Sequence[str]) -> dict:
    """Gradient-boosted trees under :data:`MONOTONE`, exported as the flat node arrays that
    :class:`chains.routers.evidence.TreeModel` reads (no pickle: the artifact stays plain JSON, loaded without sklearn)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(monotonic_cst=[MONOTONE.get(name, 0) for name in names], **TREE_PARAMS)
    model.fit(x, y, sample_weight=weight)
    trees = []
    for (predictor,) in model._predictors:  # one tree per boosting round for a binary target
        nodes = predictor.nodes
        trees.append({"feature": nodes["feature_idx"].tolist(), "threshold": nodes["num_threshold"].tolist(),
                      "left": nodes["left"].tolist(), "right": nodes["right"].tolist(),
                      "leaf": nodes["is_leaf"].astype(bool).tolist(), "value": nodes["value"].tolist(),
                      "missing_left": nodes["missing_go_to_left"].astype(bool).tolist()})
    depth = int(max(predictor.nodes["depth"].max() for (predictor,) in model._predictors)) + 1
    return {"intercept": float(np.ravel(model._baseline_prediction)[0]), "trees": trees, "depth": depth,
            "width": int(x.shape[1]), "inputs": list(names), "kind": "gradient-boosted trees", "params": TREE_PARAMS}


def predict(params: dict, x: np.ndarray, layout: Sequence[str]) -> np.ndarray:
    """The model's probabilities for rows of ``x``, whose columns are ``layout`` (the model reads its own)."""
    from chains.routers.evidence import load_model

    return 1.0 / (1.0 + np.exp(-load_model(params, tuple(layout)).logits(x)))


def _group_weights(groups: np.ndarray) -> np.ndarray:
    """Every dataset counts the same in the fit, whatever its size (CLINC would drown the natural sets)."""
    names, counts = np.unique(groups, return_counts=True)
    per = {name: len(groups) / (len(names) * count) for name, count in zip(names, counts)}
    return np.array([per[g] for g in groups])


FOLDS = 5


def _folds(texts: np.ndarray, seed: int = 7) -> np.ndarray:
    """A fold per row, by message: CLINC150's and Banking77's messages are scored against two KBs each (with and
    without examples), and a message must not be scored by trees grown on its twin. Fixed seed: the same table
    gives the same τ."""
    unique, row_text = np.unique(texts, return_inverse=True)
    return (np.random.default_rng(seed).permutation(len(unique)) % FOLDS)[row_text]


def fit_weights(groups: np.ndarray) -> np.ndarray:
    """Each row's weight in the fit: every dataset counts the same, and the hand-written groups count
    HANDWRITTEN_WEIGHT times."""
    return _group_weights(groups) * np.where(np.isin(groups, HANDWRITTEN_GROUPS), HANDWRITTEN_WEIGHT, 1.0)


def out_of_fold_p_llm(x: np.ndarray, y: np.ndarray, weight: np.ndarray, texts: np.ndarray) -> np.ndarray:
    """p_llm for every row from trees grown without its fold (folds by message text, :func:`_folds`)."""
    p_llm, fold = np.empty(len(y)), _folds(texts)
    for k in range(FOLDS):
        grown, held = fold != k, fold == k
        p_llm[held] = predict(_fit_trees(x[grown], y[grown], weight[grown], ROUTE_NAMES), x[held], ROUTE_NAMES)
    return p_llm


def fit(arrays: dict[str, np.ndarray], extra: dict[str, np.ndarray] | None = None, extra_weight: float = 3.0) -> dict:
    """Both models and the product thresholds from a table (plus feedback-labelled rows, weighted up)."""
    from sklearn.metrics import roc_auc_score

    x, y, groups = route_matrix(arrays), arrays["needs_llm"], arrays["group"]
    weight = fit_weights(groups)
    if extra is not None and len(extra["needs_llm"]):
        x = np.vstack([x, extra["x_route"]])
        y = np.concatenate([y, extra["needs_llm"]])
        weight = np.concatenate([weight, np.full(len(extra["needs_llm"]), extra_weight)])
        groups = np.concatenate([groups, np.asarray(["feedback"] * len(extra["needs_llm"]))])
    route = _fit_trees(x, y, weight, ROUTE_NAMES)
    # τ and the reported figures come from out-of-fold scores: trees score the rows they were grown on too well
    # (in-sample, the development set's in-scope messages look surer than new ones will), so a τ read from them
    # would escalate more than the budget says.
    texts = np.concatenate([arrays["text"], [f"feedback {i}" for i in range(len(y) - len(arrays["text"]))]])
    p_llm = out_of_fold_p_llm(x, y, weight, texts)

    known = arrays["top_correct"] >= 0
    xd, correct = arrays["x_draft"][known].astype(np.float64), arrays["top_correct"][known]
    draft_weight = _group_weights(arrays["group"][known])
    draft = {**_fit_linear(xd, correct, draft_weight, c=0.5), "inputs": list(DRAFT_NAMES)}
    p_right = predict(draft, xd, DRAFT_NAMES)
    p_right_oof = np.empty(len(correct))  # as τ: the threshold is read from rows the model was not fitted on
    draft_fold = _folds(arrays["text"][known])
    for k in range(FOLDS):
        grown, held = draft_fold != k, draft_fold == k
        fold_model = {**_fit_linear(xd[grown], correct[grown], draft_weight[grown], c=0.5), "inputs": list(DRAFT_NAMES)}
        p_right_oof[held] = predict(fold_model, xd[held], DRAFT_NAMES)

    natural = np.isin(groups, NATURAL_GROUPS)
    in_scope = natural & (y == 0)
    tau = float(np.quantile(p_llm[in_scope], 1 - IN_SCOPE_ESCALATION_BUDGET)) if in_scope.any() else 0.5
    rewrite = rewrite_threshold(p_right_oof, correct, arrays["group"][known])
    per_group = {}
    for name in sorted(set(groups)):
        rows = groups == name
        escalated, needs = p_llm[rows] >= tau, y[rows] == 1
        per_group[name] = {"rows": int(rows.sum()), "needs_llm": int(needs.sum()),
                           "llm_share_at_tau": round(float(escalated.mean()), 4),
                           # the held-out targets' two shares, read out of fold on development data
                           "in_scope_to_llm": round(float(escalated[~needs].mean()), 4) if (~needs).any() else None,
                           "needs_llm_to_llm": round(float(escalated[needs].mean()), 4) if needs.any() else None,
                           "auroc": round(float(roc_auc_score(y[rows], p_llm[rows])), 4)
                           if 0 < y[rows].sum() < rows.sum() else None}
    metrics = {"validation_auroc": round(float(roc_auc_score(y, p_llm, sample_weight=weight)), 4),  # out of fold
               "draft_auroc": round(float(roc_auc_score(correct, p_right)), 4) if 0 < correct.sum() < len(correct)
               else None,
               "route_threshold": round(tau, 4), "rewrite_threshold": round(rewrite, 4),
               "wrong_drafts_caught": round(float((p_right_oof[correct == 0] < rewrite).mean()), 4)
               if (correct == 0).any() else None,
               "per_group": per_group, "rows": int(len(y))}
    return {"route": route, "draft": draft,
            "thresholds": {"route_threshold": round(tau, 4), "rewrite_threshold": round(rewrite, 4)},
            "metrics": metrics}


def rewrite_threshold(p_right: np.ndarray, correct: np.ndarray, groups: np.ndarray) -> float:
    """The lowest of the hand-written groups' thresholds, each rewriting RIGHT_DRAFT_REWRITE_BUDGET of its own right
    drafts: a budget met only by the groups pooled is broken by the group whose drafts read less sure."""
    right = [p_right[(groups == name) & (correct == 1)] for name in REWRITE_GROUPS]
    return min((float(np.quantile(r, RIGHT_DRAFT_REWRITE_BUDGET)) for r in right if len(r)), default=0.5)
