"""The evidence router's models as the artifact stores them: the served probabilities are the fitted model's."""

import json

import numpy as np
import pytest

from chains.routers import build_router
from chains.routers.artifacts import SHIPPED_ARTIFACT, read_artifact
from chains.routers.evidence import EVIDENCE_NAMES, FEATURE_NAMES, BoostedTrees, model_from
from offline.router_training import _fit_boosted, _fit_linear, _out_of_fold


def _problem(rows: int = 600, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 5))
    # Not linear in x: the label depends on an interaction and a threshold.
    y = ((x[:, 0] * x[:, 1] > 0.2) | (x[:, 2] > 1.2)).astype(int)
    return x, y


def test_served_trees_give_exactly_the_fitted_models_probabilities_after_a_json_round_trip():
    from sklearn.ensemble import HistGradientBoostingClassifier

    from offline.router_training import BOOSTING

    x, y = _problem()
    weight = np.ones(len(y))
    reference = HistGradientBoostingClassifier(**BOOSTING, early_stopping=False, random_state=0).fit(x, y)
    served = model_from(json.loads(json.dumps(_fit_boosted(x, y, weight))))
    assert isinstance(served, BoostedTrees)
    assert np.abs(served.probabilities(x) - reference.predict_proba(x)[:, 1]).max() < 1e-9
    assert served.probability(x[7]) == pytest.approx(float(reference.predict_proba(x[7:8])[0, 1]), abs=1e-9)
    # A missing input goes where the fitted model sends it, not to an error.
    with_gap = x[:20].copy()
    with_gap[:, 0] = np.nan
    assert np.abs(served.probabilities(with_gap) - reference.predict_proba(with_gap)[:, 1]).max() < 1e-9


def test_trees_fit_an_interaction_the_linear_model_cannot():
    x, y = _problem()
    weight = np.ones(len(y))
    trees = _out_of_fold(_fit_boosted, x, y, weight)
    linear = _out_of_fold(lambda a, b, w: _fit_linear(a, b, w, c=0.5), x, y, weight)
    accuracy = lambda p: float(((p >= 0.5) == y).mean())  # noqa: E731
    assert accuracy(trees) > accuracy(linear) + 0.05


@pytest.mark.parametrize("broken", [
    {"kind": "boosted_trees", "intercept": 0.0, "n_inputs": 2, "depth": 1, "trees": []},
    {"kind": "boosted_trees", "intercept": 0.0, "n_inputs": 2, "depth": 1,
     "trees": [{"feature": [0, -1], "threshold": [0.5, 0.0], "left": [1, 0], "right": [2, 0], "value": [0.0, 1.0],
                "missing_left": [1]}]},
    {"kind": "boosted_trees", "intercept": 0.0, "n_inputs": 1, "depth": 1,
     "trees": [{"feature": [3, -1, -1], "threshold": [0.5, 0, 0], "left": [1, 0, 0], "right": [2, 0, 0],
                "value": [0, 1, -1], "missing_left": [1, 0, 0]}]},
    {"kind": "forest", "trees": []},
])
def test_a_malformed_route_model_does_not_build(broken):
    with pytest.raises((ValueError, KeyError)):
        model_from(broken)


def test_the_shipped_router_serves_boosted_trees_over_every_router_input():
    params = read_artifact(SHIPPED_ARTIFACT)
    route = params["evidence"]["route"]
    assert route["kind"] == "boosted_trees"
    assert route["inputs"] == [*EVIDENCE_NAMES, *FEATURE_NAMES] and route["n_inputs"] == len(route["inputs"])
    router = build_router("evidence", params)
    model = model_from(route)
    assert 0.0 < model.probabilities(np.zeros((1, route["n_inputs"])))[0] < 1.0
    assert router.fingerprint  # it builds, as a promotion would check
