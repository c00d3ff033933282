"""Child processes that start, answer and stop as one: the launchers (demo, cluster, llm-server, console) use
nothing else to run a subprocess.

Three promises, because a process supervisor (or Ctrl-C, or `docker stop`) must leave nothing behind:

* every child runs in a process group of its own, so stopping it also stops whatever *it* started;
* every child gets ``PR_SET_PDEATHSIG`` (SIGTERM): if the launcher dies, even by SIGKILL, the kernel tells
  each child to stop, and the child in turn stops its own children;
* :func:`stop_all` signals every group at once and waits once, so N children stop in seconds, not N × 15 s.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

import httpx

PR_SET_PDEATHSIG = 1
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")  # "psycopg2.errors.X: ..."
STOP_GRACE_S = 8.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports. Each socket stays bound until all are chosen: one free_port() after another can
    return the same port twice (nothing holds it in between), and a cluster then bound its first replica to the
    port PostgreSQL had already taken."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def two_free_ports(host: str = "127.0.0.1", avoid: Collection[int] = ()) -> int:
    """A port p with p and p + 1 both free and neither in ``avoid`` (replicas take consecutive ports)."""
    for _ in range(50):
        port = free_port(host)
        if port in avoid or port + 1 in avoid:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two consecutive free ports")


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Child:
    """One subprocess in its own process group, logging to a file, that dies with its parent."""

    def __init__(self, name: str, args: Sequence[str], log: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None, stop_signal: int = signal.SIGTERM):
        self.name, self.args, self.log, self.cwd = name, list(args), log, cwd
        self.stop_signal = stop_signal  # what asks this program to shut down cleanly
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self) -> Child:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        if self.cwd is not None:
            self.cwd.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as handle:
            self.process = subprocess.Popen(self.args, stdout=handle, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=self.env, cwd=self.cwd,
                                            start_new_session=True, preexec_fn=_die_with_parent)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal_group(self, sig: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)  # own session: pgid == pid
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        stop_all([self], grace_s)

    def kill(self) -> None:
        """SIGKILL the whole group at once: the sudden crash fault tests need."""
        self.signal_group(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(10)

    def last_line(self) -> str:
        """The log's last line, preceded by the last exception it shows: what a failed start reports (uvicorn's
        own last line, "Application startup failed", says nothing of why)."""
        try:
            lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no log"
        if not lines:
            return "empty log"
        errors = [ln for ln in lines if EXCEPTION_LINE.match(ln)]
        if errors and errors[-1] != lines[-1]:
            return f"{errors[-1][:300]} ... {lines[-1][:200]} (log: {self.log})"
        return lines[-1][:300]

    def wait_http(self, url: str, timeout: float, ok_below: int = 500) -> bool:
        """Poll ``url`` until it answers with a status below ``ok_below``; False if the child died or time ran out."""
        return wait_http(url, timeout, self, ok_below)


def wait_http(url: str, timeout: float, child: Child | None = None, ok_below: int = 500) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child is not None and not child.alive():
            return False
        try:
            if httpx.get(url, timeout=2).status_code < ok_below:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    return False


def stop_all(children: Iterable[Child], grace_s: float = STOP_GRACE_S) -> None:
    """Ask every group to stop at once (SIGTERM, or the child's own stop signal), wait up to ``grace_s`` in total,
    then SIGKILL what is left."""
    running = [c for c in children if c.process is not None]
    for child in running:
        if child.alive():
            child.signal_group(child.stop_signal)
    deadline = time.monotonic() + grace_s
    for child in running:
        assert child.process is not None
        try:
            child.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for child in running:
        # The leader may be gone while members of its group linger (a server's workers): kill the group.
        child.signal_group(signal.SIGKILL)
        if child.process is not None and child.process.poll() is None:
            child.process.wait(5)


def exit_on_signals() -> None:
    """Turn SIGTERM (a supervisor, `docker stop`) into KeyboardInterrupt, so one `finally` stops the children."""
    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGHUP, interrupt)
    # A shell starts background jobs with SIGINT ignored, and Python then keeps ignoring it; a launcher must still
    # stop on Ctrl-C (or `kill -INT`) wherever it was started from.
    signal.signal(signal.SIGINT, signal.default_int_handler)
