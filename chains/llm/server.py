"""Start the OpenAI-compatible LLM server: `transformers serve` of SmolLM2 on CPU, or vLLM on a GPU host.

:class:`LLMServer` runs the server as a child process in its own process group (so stopping it also
stops anything it spawned), waits until ``GET /v1/models`` answers, and can be stopped, killed (fault
tests) and started again on the same port. ``tandem llm-server`` is the command-line front.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

from tandem.errors import TandemError
from tandem.settings import get_settings

VLLM_FIX = ("install vLLM in its own GPU venv: python -m venv .venv-gpu && "
            ".venv-gpu/bin/pip install -r requirements-gpu.txt")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def transformers_command(model_folder: Path, host: str, port: int, continuous_batching: bool = True) -> list[str]:
    """`transformers serve` of a converted model folder on CPU (the request's model must be that path)."""
    exe = Path(sys.executable).parent / "transformers"
    cmd = [str(exe) if exe.exists() else "transformers", "serve", str(model_folder), "--host", host,
           "--port", str(port), "--device", "cpu"]
    if continuous_batching:
        # Verified on CPU: 8 concurrent requests batch correctly. Without a block count the paged KV cache
        # is sized from free memory and took 14 GB of RSS on our 24 GB machines; 512 blocks of 32 tokens
        # (16k tokens, ~0.75 GB for SmolLM2-135M) hold 64 concurrent short chats.
        cmd += ["--continuous-batching", "--cb-block-size", "32", "--cb-num-blocks", "512",
                "--cb-max-batch-tokens", "1024"]
    return cmd


def vllm_command(model: str, host: str, port: int, api_key: str, max_model_len: int = 8192,
                 gpu_memory_utilization: float = 0.90) -> list[str]:
    """`vllm serve` with its documented flags; runs from the separate GPU venv (requirements-gpu.txt)."""
    if not model:
        raise TandemError("vLLM needs a model name. Fix: set TANDEM_LLM_MODEL, e.g. "
                          "TANDEM_LLM_MODEL=Qwen/Qwen2.5-7B-Instruct")
    cmd = ["vllm", "serve", model, "--host", host, "--port", str(port), "--max-model-len", str(max_model_len),
           "--gpu-memory-utilization", str(gpu_memory_utilization)]
    if api_key and api_key != "unused":
        cmd += ["--api-key", api_key]
    return cmd


class LLMServer:
    """A local OpenAI-compatible server process. Use as a context manager or call start()/stop()."""

    def __init__(self, port: int | None = None, host: str | None = None, engine: str = "transformers",
                 continuous_batching: bool = True, log_path: Path | None = None):
        settings = get_settings()
        parsed = urlparse(settings.llm_url)
        self.host = host or parsed.hostname or "127.0.0.1"
        self.port = port or settings.llm_port
        self.engine = engine
        self.continuous_batching = continuous_batching
        self.log_path = log_path or settings.home / "logs" / f"llm-server-{self.port}.log"
        self.process: subprocess.Popen | None = None
        if engine == "transformers":
            from tandem.models import model_path

            folder = model_path(settings.generator)  # one-line ModelError when not converted yet
            self.model = settings.llm_model or str(folder)
            self.command = transformers_command(folder, self.host, self.port, continuous_batching)
        elif engine == "vllm":
            self.model = settings.llm_model
            self.command = vllm_command(settings.llm_model, self.host, self.port, settings.llm_api_key)
        else:
            raise TandemError(f"unknown LLM engine '{engine}'. Use: transformers (CPU) or vllm (GPU)")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, wait: bool = True, timeout: float = 120.0, warmup: bool = True) -> "LLMServer":
        if self.alive():
            return self
        if port_in_use(self.host, self.port):
            raise TandemError(f"port {self.port} on {self.host} is already in use. Fix: stop that process "
                              f"or choose another port (TANDEM_LLM_URL)")
        if self.engine == "vllm" and shutil.which("vllm") is None:
            raise TandemError(f"the `vllm` command is not on PATH. Fix: {VLLM_FIX}")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        if wait:
            self.wait_ready(timeout)
            if warmup:
                self.warm_up()
        return self

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Poll GET /v1/models until it answers; fail with the log's last line if the process dies."""
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise TandemError(f"LLM server exited during start ({self._last_log_line()}). "
                                  f"Full log: {self.log_path}")
            try:
                if httpx.get(f"{self.url}/models", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise TandemError(f"LLM server did not answer {self.url}/models within {timeout:.0f} s. Log: {self.log_path}")

    def warm_up(self) -> None:
        """One tiny completion: the first request pays kernel/batching setup (~10 s on CPU), not a user."""
        import httpx

        try:
            httpx.post(f"{self.url}/chat/completions", timeout=60.0,
                       json={"model": self.model, "max_tokens": 1,
                             "messages": [{"role": "user", "content": "hi"}]})
        except httpx.HTTPError:
            pass  # readiness is proven by /v1/models; a failed warm-up only costs the first user time

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate the whole process group, wait, then SIGKILL if it lingers."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.process.wait(5)
        self._wait_port_free()

    def kill(self) -> None:
        """SIGKILL the group at once: the sudden crash the fault tests need."""
        if self.process is not None and self.process.poll() is None:
            self._signal_group(signal.SIGKILL)
            self.process.wait(10)
        self._wait_port_free()

    def restart(self, timeout: float = 120.0) -> "LLMServer":
        self.stop()
        return self.start(timeout=timeout)

    def __enter__(self) -> "LLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)  # own session: pgid == pid
        except ProcessLookupError:
            pass

    def _wait_port_free(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while port_in_use(self.host, self.port) and time.monotonic() < deadline:
            time.sleep(0.1)

    def _last_log_line(self) -> str:
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no log"
        return lines[-1][:200] if lines else "empty log"


def start_llm_server(port: int | None = None, wait: bool = True, timeout: float = 120.0,
                     engine: str = "transformers") -> LLMServer:
    return LLMServer(port=port, engine=engine).start(wait=wait, timeout=timeout)
