"""A short soak (20 s at 10 requests/s, mixed routes) against the package's real app: `make soak` in small.

Asserts what must hold at any length: no errors, every request logged, and memory that does not run away (the
app is warm before the soak starts, so 200 requests must not grow it by a quarter). Timing is reported only.
"""

from __future__ import annotations

import pytest

from bench.soak import run_soak

pytestmark = pytest.mark.slow


def test_short_soak_has_no_errors_and_loses_no_request(reliability_app):
    import psutil

    process = psutil.Process(reliability_app.running.process.pid)
    summary = run_soak(reliability_app.url, duration_s=20, rate=10, count_rows=reliability_app.count_rows,
                       rss_mib=lambda: round(process.memory_info().rss / 2**20, 1), log=lambda line: None)
    print(f"\nshort soak: {summary}")
    assert summary["sent"] == 200
    assert summary["errors"] == 0, summary["error_samples"]
    assert summary["requests_lost"] == 0, summary
    assert set(summary["routes"]["tool"]) == {"tool"} and "cache" in summary["routes"]["cache"]
    rss = summary["rss_mib"]
    assert rss["start"] and rss["end"] and rss["growth_pct"] < 25, rss
