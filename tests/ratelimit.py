"""Start a rate-limit test where the limiter's minute cannot end under it.

The limiter (chains/ratelimit.py) is a sliding-window counter on windows aligned to the epoch: just after a window's
boundary it weighs the previous window's count by the part still left, so a burst that straddles the boundary may get
one message more through (documented there; CI, 2026-12-08: the fourth of three allowed messages passed at
00:38:00). A test that counts exactly waits, when the current window has less than ``needed_s`` left, for the next
one to begin, so it checks the limit itself and not the clock.
"""

from __future__ import annotations

import time

from chains.ratelimit import WINDOW_S


def start_clear_of_a_window_boundary(needed_s: float, window_s: float = WINDOW_S) -> None:
    left = window_s - time.time() % window_s
    if left < needed_s:
        time.sleep(left + 0.05)
