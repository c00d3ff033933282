"""`make cluster` / `tandem cluster`: Tandem as several replicas on one machine, all on 127.0.0.1.

Redis (cache, rate limits), PostgreSQL (every table; a cluster initialised under $TANDEM_HOME), Chroma's own
server (vectors), the LLM server, REPLICAS app replicas, nginx in front of them (sticky for the Gradio UI, retrying
a dead replica's requests on another) and the console. The same parts a multi-machine deployment uses
(deploy/compose.yaml, deploy/k8s/), so what the cluster tests prove here holds there.

Every part is a :class:`tandem.processes.Child`: Ctrl-C or SIGTERM stops them all, and a killed launcher takes
them down too (parent-death signal).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import TandemError
from core.settings import Settings
from tandem.processes import Child, port_in_use, stop_all, wait_http

NGINX_CONF = """worker_processes 1;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    # Sticky sessions without nginx Plus: the first response sets a random route cookie, and requests are hashed
    # on it, so a browser keeps its replica (Gradio holds session state per process). Clients without the cookie
    # (API callers) are spread by their request id.
    map $cookie_tandem_route $tandem_route_key {{ "" $request_id; default $cookie_tandem_route; }}
    map $cookie_tandem_route $tandem_route_cookie {{ "" "tandem_route=$request_id; Path=/; HttpOnly; SameSite=Lax";
                                                   default ""; }}
    map $http_upgrade $connection_upgrade {{ default upgrade; "" ""; }}
    upstream tandem_app {{
        hash $tandem_route_key consistent;
{servers}
        keepalive 32;
    }}
    server {{
        listen {host}:{port};
        client_max_body_size {max_body}m;
        location / {{
            proxy_pass http://tandem_app;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $http_host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            # Streamed answers go out as they are made.
            proxy_buffering off;
            proxy_read_timeout 300s;
            proxy_connect_timeout 2s;
            # A replica that refuses or drops the connection before answering: try the next one. POSTs included
            # (non_idempotent), since a request that never reached the chain was not answered twice.
            proxy_next_upstream error timeout http_502 http_503 non_idempotent;
            proxy_next_upstream_tries 3;
            add_header Set-Cookie $tandem_route_cookie always;
        }}
    }}
}}
"""


@dataclass
class ClusterPorts:
    balancer: int = 7860
    first_replica: int = 7861
    console: int = 8501
    redis: int = 6390
    postgres: int = 5433
    chroma: int = 8010


@dataclass
class Cluster:
    settings: Settings
    replicas: int = 2
    ports: ClusterPorts = field(default_factory=ClusterPorts)
    with_llm: bool = True
    with_console: bool = True
    log: Callable[[str], None] = print
    extra_env: dict[str, str] = field(default_factory=dict)  # more TANDEM_* settings for replicas and console
    children: dict[str, Child] = field(default_factory=dict)
    llm_server: object | None = None
    llm_state: str = "not started (--no-llm): LLM-bound messages fall back to the small tier"

    # --- where things are -------------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def home(self) -> Path:
        return self.settings.home

    @property
    def logs(self) -> Path:
        return self.home / "cluster" / "logs"

    @property
    def balancer_url(self) -> str:
        return f"http://{self.host}:{self.ports.balancer}"

    def replica_url(self, index: int) -> str:
        return f"http://{self.host}:{self.ports.first_replica + index}"

    @property
    def database_url(self) -> str:
        return f"postgresql+psycopg2://tandem@{self.host}:{self.ports.postgres}/tandem"

    @property
    def redis_url(self) -> str:
        return f"redis://{self.host}:{self.ports.redis}/0"

    @property
    def chroma_url(self) -> str:
        return f"http://{self.host}:{self.ports.chroma}"

    def env(self) -> dict[str, str]:
        """What every replica and the console get on top of the caller's TANDEM_* settings."""
        return {"TANDEM_HOME": str(self.home), "TANDEM_DATABASE_URL": self.database_url,
                "TANDEM_REDIS_URL": self.redis_url, "TANDEM_CHROMA_URL": self.chroma_url,
                "TANDEM_LLM_URL": self.settings.llm_url, "TANDEM_HOST": self.host, **self.extra_env}

    # --- PostgreSQL -------------------------------------------------------------------------------------
    def _postgres_dir(self) -> Path:
        """$TANDEM_HOME/postgres, unless the postgres user cannot reach it (a root-only home): then a folder
        under /tmp named after the home, so the same home always gets the same cluster."""
        wanted = self.home / "postgres"
        if os.geteuid() != 0 or _reachable_by_postgres(self.home):
            return wanted
        digest = hashlib.sha1(str(self.home).encode()).hexdigest()[:10]
        return Path(tempfile.gettempdir()) / f"tandem-pg-{digest}"

    def _postgres_child(self) -> Child:
        folder = self._postgres_dir()
        data = folder / "data"
        as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        bindir = _postgres_bindir()
        if not (data / "PG_VERSION").exists():
            folder.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                shutil.chown(folder, "postgres", "postgres")
            made = subprocess.run([*as_postgres, f"{bindir}/initdb", "-D", str(data), "-A", "trust", "-U", "tandem"],
                                  capture_output=True, text=True)
            if made.returncode != 0:
                raise TandemError(f"PostgreSQL's initdb failed in {data}: {made.stderr.strip()[-400:]}")
        # SIGINT is PostgreSQL's fast shutdown: it ends the replicas' open sessions and exits cleanly. SIGTERM (smart
        # shutdown) would wait for those pooled sessions, run into the SIGKILL, and leave a stale postmaster.pid.
        return Child("postgres", [*as_postgres, f"{bindir}/postgres", "-D", str(data), "-p",
                                  str(self.ports.postgres), "-k", str(folder), "-h", self.host], self.logs / "postgres.log",
                     stop_signal=signal.SIGINT)

    def _wait_postgres(self, timeout: float = 60) -> None:
        import psycopg2

        deadline = time.monotonic() + timeout
        while True:
            try:
                with contextlib.closing(psycopg2.connect(host=self.host, port=self.ports.postgres, user="tandem",
                                                         dbname="postgres")) as conn:
                    conn.autocommit = True
                    with conn.cursor() as cursor:
                        cursor.execute("SELECT 1 FROM pg_database WHERE datname = 'tandem'")
                        if cursor.fetchone() is None:
                            cursor.execute("CREATE DATABASE tandem")
                return
            except psycopg2.OperationalError:
                if time.monotonic() > deadline or not self.children["postgres"].alive():
                    raise TandemError(f"PostgreSQL did not start: {self.children['postgres'].last_line()}") from None
                time.sleep(0.3)

    # --- start and stop ---------------------------------------------------------------------------------
    def start(self) -> Cluster:
        bin_dir = Path(sys.executable).parent
        tandem = str(bin_dir / "tandem")
        try:
            self.start_part("redis")
            self.start_part("postgres")
            self.start_part("chroma")
            if self.with_llm:
                self._start_llm()
            self.log("seeding the database and the demo knowledge base (once) ...")
            seeded = subprocess.run([tandem, "init"], env={**os.environ, **self.env()}, capture_output=True,
                                    text=True, timeout=900)
            if seeded.returncode != 0:
                raise TandemError(f"`tandem init` on the cluster failed: {seeded.stderr.strip()[-500:]}")
            for index in range(self.replicas):
                self.start_part(f"app{index + 1}")
            self.start_part("balancer")
            if self.with_console:
                self.start_part("console")
            for index in range(self.replicas):
                if not wait_http(self.replica_url(index) + "/healthz", 300, self.children[f"app{index + 1}"]):
                    raise TandemError(f"replica {index + 1} did not start: {self.children[f'app{index + 1}'].last_line()}")
            if not wait_http(self.balancer_url + "/healthz", 30, self.children["balancer"]):
                raise TandemError(f"the balancer did not start: {self.children['balancer'].last_line()}")
            if self.with_console and not wait_http(f"http://{self.host}:{self.ports.console}/_stcore/health", 120,
                                                   self.children["console"]):
                raise TandemError(f"the console did not start: {self.children['console'].last_line()}")
            self._wait_for_llm()
        except BaseException:
            self.stop()
            raise
        return self

    def start_part(self, name: str) -> Child:
        """Start (or start again) one part by name: redis, postgres, chroma, app<N>, balancer, console."""
        bin_dir = Path(sys.executable).parent
        if name == "redis":
            child = Child("redis", ["redis-server", "--port", str(self.ports.redis), "--bind", self.host,
                                    "--save", "", "--appendonly", "no"], self.logs / "redis.log")
        elif name == "postgres":
            child = self._postgres_child()
        elif name == "chroma":
            child = Child("chroma", [str(bin_dir / "chroma"), "run", "--path", str(self.home / "chroma-server"),
                                     "--host", self.host, "--port", str(self.ports.chroma)], self.logs / "chroma.log")
        elif name.startswith("app"):
            port = self.ports.first_replica + int(name[3:]) - 1
            child = Child(name, [str(bin_dir / "tandem"), "serve", "--port", str(port), "--no-seed"],
                          self.logs / f"{name}.log", env=self.env())
        elif name == "balancer":
            child = self._balancer_child()
        elif name == "console":
            child = Child("console", [str(bin_dir / "tandem"), "console"], self.logs / "console.log",
                          env={**self.env(), "TANDEM_CONSOLE_PORT": str(self.ports.console)})
        else:
            raise ValueError(f"unknown cluster part {name!r}")
        self.children[name] = child.start()
        if name == "redis":
            _wait_port(self.host, self.ports.redis, child)
        elif name == "postgres":
            self._wait_postgres()
        elif name == "chroma" and not wait_http(self.chroma_url + "/api/v2/heartbeat", 60, child):
            raise TandemError(f"the Chroma server did not start: {child.last_line()}")
        return child

    def _balancer_child(self) -> Child:
        folder = self.home / "cluster" / "nginx"
        (folder / "temp").mkdir(parents=True, exist_ok=True)
        servers = "\n".join(f"        server {self.host}:{self.ports.first_replica + i} max_fails=1 fail_timeout=5s;"
                            for i in range(self.replicas))
        conf = folder / "nginx.conf"
        conf.write_text(NGINX_CONF.format(temp=folder / "temp", servers=servers, host=self.host,
                                          port=self.ports.balancer,
                                          max_body=max(50, int(self.settings.max_upload_mb * 5))))
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        return Child("balancer", [nginx, "-p", str(folder), "-c", str(conf), "-g",
                                  f"daemon off; pid {folder / 'nginx.pid'}; error_log {folder / 'error.log'};"],
                     self.logs / "balancer.log")

    def _start_llm(self) -> None:
        from tandem.llm_server import LLMServer

        if wait_http(self.settings.llm_url.rstrip("/") + "/models", timeout=1, ok_below=300):
            self.log(f"LLM server already running at {self.settings.llm_url}")
            self.llm_state = f"{self.settings.llm_url} (already running)"
            return
        self.log(f"starting vLLM at {self.settings.llm_url} ...")
        server = LLMServer(self.settings).start(wait=False)
        self.llm_server = server
        assert server.child is not None
        self.children["llm"] = server.child

    def _wait_for_llm(self) -> None:
        """"Ready" means every part answers: the vLLM this cluster started is waited for and warmed up like the
        demo's (`make cluster` once said "ready" while vLLM was still loading, and LLM-bound messages fell back).
        If it does not come up in time, the LLM line says so instead of stopping the rest."""
        from tandem.llm_server import LLMServer

        server = self.llm_server
        if not isinstance(server, LLMServer):
            return
        try:
            server.wait_ready(300)
            server.warm_up()
            self.llm_state = f"{self.settings.llm_url} (vLLM, model {server.model})"
        except TandemError as exc:
            self.llm_state = (f"{self.settings.llm_url} still warming up or failed ({exc}); LLM-bound messages fall "
                              "back to the small tier until it answers")

    def stop_part(self, name: str) -> None:
        child = self.children.get(name)
        if child is not None:
            child.stop()

    def stop(self) -> None:
        stop_all(list(self.children.values()))

    def urls(self) -> list[str]:
        lines = [f"  chat UI       {self.balancer_url}/   (nginx, sticky; replicas "
                 + ", ".join(self.replica_url(i) for i in range(self.replicas)) + ")",
                 f"  HTTP API      {self.balancer_url}/api/v1/chat    OpenAI API {self.balancer_url}/v1",
                 f"  console       http://{self.host}:{self.ports.console}/",
                 f"  PostgreSQL    {self.database_url}",
                 f"  Redis         {self.redis_url}",
                 f"  Chroma        {self.chroma_url}",
                 f"  LLM server    {self.llm_state}",
                 f"  logs          {self.logs}"]
        return lines


def _reachable_by_postgres(path: Path) -> bool:
    return subprocess.run(["runuser", "-u", "postgres", "--", "test", "-x", str(path)],
                          capture_output=True).returncode == 0


def _postgres_bindir() -> str:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        raise TandemError("PostgreSQL is not installed. Fix: apt-get install postgresql (make test does)")
    return str(found[-1].parent)


def _wait_port(host: str, port: int, child: Child, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_in_use(host, port):
            return
        if not child.alive():
            break
        time.sleep(0.2)
    raise TandemError(f"{child.name} did not start: {child.last_line()}")
