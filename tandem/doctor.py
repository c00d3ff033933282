"""`tandem doctor`: what is installed, what is found, what answers. Local parts decide the exit code."""

from __future__ import annotations

import importlib.metadata as md
import platform
import time

import httpx

from tandem.errors import TandemError
from tandem.settings import ensure_home, get_settings

PACKAGES = ("torch", "transformers", "sentence-transformers", "chromadb", "langchain-core", "langchain-openai",
            "sqlmodel", "gradio", "streamlit", "faster-whisper", "rapidocr-onnxruntime")


def _check(label: str, func) -> bool:
    start = time.perf_counter()
    try:
        detail = func()
    except TandemError as exc:
        print(f"  FAIL {label}: {exc}")
        return False
    except Exception as exc:  # doctor reports, it never crashes
        print(f"  FAIL {label}: {exc.__class__.__name__}: {exc}")
        return False
    print(f"  ok   {label}: {detail} ({(time.perf_counter() - start) * 1000:.0f} ms)")
    return True


def _versions() -> None:
    print(f"python {platform.python_version()} on {platform.machine()}")
    for name in PACKAGES:
        try:
            print(f"  {name:24} {md.version(name)}")
        except md.PackageNotFoundError:
            print(f"  {name:24} not installed")


def run_doctor(load: bool = True) -> int:
    from storage.db import init_db
    from tandem import models

    settings = get_settings()
    _versions()
    print("local parts:")
    healthy = _check("data directory", lambda: str(ensure_home()))
    for name in models.REGISTRY:
        healthy &= _check(f"model {name}", lambda name=name: str(models.model_path(name)))
    if load:
        healthy &= _check("load minilm", lambda: f"embedding dim {models.embedder().encode('hello').shape[0]}")
        healthy &= _check("load smollm2", _generate_once)
    healthy &= _check("database", lambda: init_db().url.render_as_string(hide_password=True))
    print("remote parts (not required):")
    _check("LLM endpoint", lambda: _probe_llm(settings.llm_url))
    if settings.chroma_url:
        _check("Chroma server", lambda: httpx.get(settings.chroma_url.rstrip("/") + "/api/v2/heartbeat",
                                                  timeout=2).raise_for_status() and settings.chroma_url)
    print("healthy" if healthy else "NOT healthy: fix the FAIL lines above")
    return 0 if healthy else 1


def _generate_once() -> str:
    from tandem.models import generator

    model, tokenizer = generator()
    ids = tokenizer("Hello", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=1, do_sample=False)
    return f"generated {out.shape[-1] - ids['input_ids'].shape[-1]} token"


def _probe_llm(url: str) -> str:
    try:
        response = httpx.get(url.rstrip("/") + "/models", timeout=2)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise TandemError(f"{url} not reachable ({exc.__class__.__name__}); start it with `make llm-server`")
    models = [m.get("id") for m in response.json().get("data", [])][:3]
    return f"{url} serves {models}"
