"""What any τ of a group's own would buy: the router's out-of-fold p_llm on the stored training table
(chains/artifacts/router_training.npz, development data only), and for a few in-scope escalation budgets the τ that
spends it and the share of the group's needs-the-LLM messages it escalates. Seconds; README "The same misses on
development data".

    .venv/bin/python scripts/tau_tradeoff.py [--group bitext-dev --group zh] [--budget 0.05 --budget 0.10]
"""

from __future__ import annotations

import argparse

import numpy as np

from offline.router_fit import IN_SCOPE_ESCALATION_BUDGET, NATURAL_GROUPS, fit_weights, out_of_fold_p_llm, route_matrix
from offline.router_training import TABLE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", action="append", help="validation group (default: bitext-dev and zh)")
    parser.add_argument("--budget", action="append", type=float, help="in-scope share escalated (default 5, 8, 10 %%)")
    args = parser.parse_args()
    with np.load(TABLE, allow_pickle=False) as stored:
        arrays = {key: stored[key] for key in stored.files}
    y, groups = arrays["needs_llm"], arrays["group"]
    p_llm = out_of_fold_p_llm(route_matrix(arrays), y, fit_weights(groups), arrays["text"])  # as `router train` reads τ
    pooled = float(np.quantile(p_llm[np.isin(groups, NATURAL_GROUPS) & (y == 0)], 1 - IN_SCOPE_ESCALATION_BUDGET))
    print(f"product tau (pooled natural groups, {IN_SCOPE_ESCALATION_BUDGET:.0%} in scope): {pooled:.4f}")
    for group in args.group or ["bitext-dev", "zh"]:
        in_scope, needs = p_llm[(groups == group) & (y == 0)], p_llm[(groups == group) & (y == 1)]
        for label, tau in [("product tau", pooled)] + [(f"{budget:.0%} in scope", float(np.quantile(in_scope, 1 - budget)))
                                                       for budget in args.budget or [0.05, 0.08, 0.10]]:
            print(f"{group:11} {label:12} tau {tau:.4f}: in scope to the LLM {(in_scope >= tau).mean():.3f}, "
                  f"needs the LLM to the LLM {(needs >= tau).mean():.3f}")


if __name__ == "__main__":
    main()
