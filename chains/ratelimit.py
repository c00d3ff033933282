"""Per-user and per-session rate limit: a sliding one-minute window counted in the shared state, so several
replicas enforce one limit together."""

from __future__ import annotations

from chains.state import SharedState

WINDOW_S = 60.0


class RateLimiter:
    def __init__(self, state: SharedState, per_minute: int):
        self.state = state
        self.per_minute = per_minute

    def check(self, *keys: str) -> str:
        """Record one message for every non-empty key; returns a customer-facing refusal, or "" to go on."""
        if self.per_minute <= 0:
            return ""
        wait = self.state.hit([k for k in keys if k], self.per_minute, WINDOW_S)
        if wait <= 0:
            return ""
        return (f"You are sending messages faster than we can answer ({self.per_minute} per minute). "
                f"Please wait {max(1, round(wait))} seconds and try again.")
