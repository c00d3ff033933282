"""The shop's own front end learns of an operator's messages and of handoff changes by a webhook: a JSON POST to
TANDEM_HANDOFF_WEBHOOK_URL, HMAC-SHA256-signed, retried with backoff, sent from a thread of its own (an operator
never waits for the shop's server).

The signature is ``X-Tandem-Signature: sha256=<hex HMAC of the raw body>``, keyed by TANDEM_HANDOFF_WEBHOOK_SECRET
(default: the customer-token key the shop's backend already holds, TANDEM_IDENTITY_SECRET). The receiver recomputes
it over the bytes it got and compares in constant time (:func:`signature`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from typing import Any

import httpx

log = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Tandem-Signature"
EVENT_HEADER = "X-Tandem-Event"


def signature(secret: str, body: bytes) -> str:
    """The header value for ``body``: what the receiver must compute to trust it."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


class Webhook:
    """Posts each event to ``url``: up to ``tries`` times (a network error or a 5xx/429 answer is retried after 0.5,
    1, 2 ... s; a 4xx is the receiver's refusal and is not)."""

    def __init__(self, url: str, secret: str, tries: int = 4, timeout_s: float = 5.0, backoff_s: float = 0.5):
        self.url, self.secret, self.tries, self.timeout_s, self.backoff_s = url, secret, tries, timeout_s, backoff_s
        self.failures = 0  # events given up on (reported by the logs; the messages stay readable over the API)

    def __call__(self, event: str, payload: dict[str, Any]) -> None:
        body = json.dumps({"event": event, **payload}, ensure_ascii=False, default=str).encode("utf-8")
        threading.Thread(target=self._deliver, args=(event, body), name="tandem-handoff-webhook", daemon=True).start()

    def _deliver(self, event: str, body: bytes) -> None:
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature(self.secret, body),
                   EVENT_HEADER: event}
        for attempt in range(self.tries):
            try:
                answer = httpx.post(self.url, content=body, headers=headers, timeout=self.timeout_s)
                if answer.status_code < 400:
                    return
                if answer.status_code < 500 and answer.status_code != 429:
                    break  # the receiver refused it (a wrong signature, say): trying again changes nothing
            except httpx.HTTPError as exc:
                log.warning("handoff webhook %s: %s", self.url, exc)
            time.sleep(self.backoff_s * 2 ** attempt)
        self.failures += 1
        log.error("handoff webhook %s: event %s not delivered after %d tries", self.url, event, self.tries)
