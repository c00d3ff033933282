"""One loopback cluster per test session (tandem/cluster.py, what `make cluster` starts): Redis, PostgreSQL,
Chroma's server, two app replicas behind nginx; the LLM is the session's real vLLM server."""

from __future__ import annotations

import os
import shutil
import tempfile
import zlib
from pathlib import Path

import httpx
import pytest

from tests.llm_server import live

TOKEN = "cluster-test-token"
RATE_LIMIT = 10


@pytest.fixture(scope="session")
def cluster(settings, llm_server_process):
    from tandem.cluster import Cluster, ClusterPorts
    from tandem.processes import free_ports, two_free_ports

    # Not under pytest's tmp dir: that is private to root, and PostgreSQL runs as user postgres.
    home = Path(tempfile.mkdtemp(prefix="tandem-cluster-"))
    os.chmod(home, 0o755)
    balancer, console, redis, postgres, chroma = taken = free_ports(5)
    ports = ClusterPorts(balancer=balancer, first_replica=two_free_ports(avoid=taken), console=console, redis=redis,
                         postgres=postgres, chroma=chroma)
    parts = Cluster(settings.model_copy(update={"home": home, "llm_url": live(llm_server_process).url}), replicas=2,
                    ports=ports, with_console=False, log=lambda line: None,
                    extra_env={"TANDEM_RATE_LIMIT_PER_MIN": str(RATE_LIMIT), "TANDEM_API_TOKEN": TOKEN,
                               "TANDEM_OPS_EVERY_MIN": "0"})
    parts.start()
    yield parts
    parts.stop()
    shutil.rmtree(home, ignore_errors=True)


def chat(url: str, message: str, user: str, session: str = "", timeout: float = 120) -> httpx.Response:
    # Limits count client addresses: each test user calls from an address of its own (as a trusted proxy says), so
    # one test's traffic does not spend another's limit. TOKEN is an admin key: answers carry scores and reasons.
    address = f"10.77.{zlib.crc32(user.encode()) % 250}.{len(user) % 250}"
    return httpx.post(f"{url}/api/v1/chat", json={"message": message, "user_id": user, "session_id": session or user},
                      headers={"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": address}, timeout=timeout)


@pytest.fixture(scope="session")
def cluster_db(cluster):
    from storage.db import Database

    return Database(cluster.database_url)
