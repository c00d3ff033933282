"""Secrets never appear where a URL is shown: /healthz's Redis status, logs, the console's alert page show the host."""

from __future__ import annotations

import logging

from chains.redis_state import RedisState
from core.pii import host_of


def test_a_url_is_shown_as_its_host_without_user_password_path_or_query():
    assert host_of("redis://:s3cret@10.0.0.5:6380/2") == "redis://10.0.0.5:6380"
    assert host_of("https://hooks.example.com/services/T000/B000/XXXXSECRET?token=abc") == "https://hooks.example.com"
    assert host_of("") == "" and host_of("not a url") == "(set)"


def test_the_redis_status_and_its_log_lines_carry_the_host_only(caplog):
    state = RedisState("redis://user:s3cret@127.0.0.1:9/0", retry_s=60)  # nothing listens on port 9
    with caplog.at_level(logging.WARNING):
        status = state.status()
    assert status["url"] == "redis://127.0.0.1:9" and "problem" in status
    assert "s3cret" not in repr(status) and "s3cret" not in caplog.text and "127.0.0.1:9" in caplog.text
