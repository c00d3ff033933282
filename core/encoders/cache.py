"""The process's encoders: which encoder a name means (the registry, or the KB-tuned one this data directory made
active), each loaded once per process and shared."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable
from pathlib import Path

from core.encoders.backend import serving_encoder
from core.encoders.base import STAMP_FILE, Encoder, folder_version
from core.encoders.e5 import E5Encoder
from core.errors import TandemError
from core.model_files import MINILM_FIX, REGISTRY, ModelError, minilm_path
from core.settings import Settings


# name -> loader; a loader takes the caller's settings and returns a ready encoder (models load on first use, once).
def _minilm(settings: Settings) -> Encoder:
    return serving_encoder(minilm_path(), "minilm", settings.home, settings.encoder_backend,
                           settings.torch_threads)


def _e5(settings: Settings) -> Encoder:
    return E5Encoder(settings.torch_threads)


ENCODERS: dict[str, Callable[[Settings], Encoder]] = {"minilm": _minilm, "e5": _e5}
AUTO = "auto"  # the encoder tuned on this TANDEM_HOME's knowledge base when there is one, else MiniLM
ACTIVE_FILE = "active.json"
_LOADED: dict[str, Encoder] = {}
_LOAD_LOCK = threading.Lock()


def encoders_dir(home: Path) -> Path:
    return home / "encoders"


def active_tuned_folder(home: Path) -> Path | None:
    """The folder of MiniLM tuned on the KB that `tandem kb tune` made live for this data directory, or None."""
    marker = encoders_dir(home) / ACTIVE_FILE
    if not marker.is_file():
        return None
    try:
        return Path(json.loads(marker.read_text())["folder"])
    except (ValueError, KeyError, OSError):
        return encoders_dir(home) / "unreadable-active.json"


def is_whole(folder: Path) -> bool:
    """Whether a tuned folder was written to its end (its config and the stamp written last)."""
    return (folder / "config.json").is_file() and (folder / STAMP_FILE).is_file()


def set_active_tuned_folder(home: Path, folder: Path | None) -> None:
    """Make ``folder`` the encoder of every process on this data directory (None: back to the base model)."""
    marker = encoders_dir(home) / ACTIVE_FILE
    if folder is None:
        marker.unlink(missing_ok=True)
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_name(marker.name + ".tmp")
    tmp.write_text(json.dumps({"folder": str(folder), "version": folder_version(folder)}))
    tmp.replace(marker)


def resolve(name: str | None, home: Path | None, settings: Settings) -> tuple[str, Path | None, str]:
    """(registry name or "tuned", folder for a tuned encoder, problem) for a TANDEM_ENCODER value."""
    name = name or settings.encoder
    if name != AUTO:
        return name, None, ""
    folder = active_tuned_folder(home or settings.home)
    if folder is None:
        return "minilm", None, ""
    if not is_whole(folder):
        return "minilm", None, (f"the tuned encoder {folder} is missing or incomplete; using the base MiniLM. "
                                "Fix: `tandem kb tune` (or `tandem kb tune --reset` to stay on the base)")
    return "tuned", folder, ""


def load_encoder(name: str | None = None, home: Path | None = None, *, settings: Settings) -> Encoder:
    """The encoder named by ``name`` (default: the settings' encoder), loaded once per process and set of the
    settings it depends on (backend, threads, passage cache), from the caller's ``settings``.

    ``auto`` (the default) is the encoder `tandem kb tune` adapted to this data directory's knowledge base, or
    the base MiniLM until there is one; a broken tuned folder falls back to MiniLM and says so in ``problem``.
    Loaded weights are immutable, so sharing one instance per process is a cache, not shared state.
    """
    kind, folder, problem = resolve(name, home, settings)
    key = (f"{folder if folder is not None else kind}:{settings.encoder_backend}:{settings.torch_threads}:"
           f"{settings.passage_cache_path}")
    if folder is None and kind not in ENCODERS:
        raise ModelError(f"unknown encoder '{kind}'. Known: {', '.join(sorted(ENCODERS))}, {AUTO}. "
                         "Fix: set TANDEM_ENCODER")
    failure: Exception | None = None
    with _LOAD_LOCK:
        if key not in _LOADED:
            try:
                loaded = (serving_encoder(folder, "minilm-tuned", home or settings.home, settings.encoder_backend,
                                          settings.torch_threads) if folder is not None else ENCODERS[kind](settings))
                loaded.passage_cache_path = settings.passage_cache_path
                _LOADED[key] = loaded
            except TandemError:
                raise
            except Exception as exc:  # a corrupt folder surfaces as one line, not a traceback
                if folder is None:
                    fix = REGISTRY[kind].fix if kind in REGISTRY else MINILM_FIX
                    raise ModelError(f"encoder '{kind}' failed to load ({exc.__class__.__name__}: {exc}). "
                                     f"Fix: {fix} --force-reinstall") from exc
                failure = exc
        encoder = _LOADED.get(key)
    if encoder is None:  # the tuned folder did not load (``failure`` says why)
        # A broken tuned folder must not stop answers: the base model still works. Loaded outside the lock,
        # which load_encoder("minilm") takes again.
        fallback = copy.copy(load_encoder("minilm", settings=settings))
        fallback.problem = (f"the tuned encoder {folder} does not load ({failure.__class__.__name__}); "
                            "using the base MiniLM. Fix: `tandem kb tune` again")
        return fallback
    if problem:
        fallback = copy.copy(encoder)
        fallback.problem = problem
        return fallback
    return encoder
