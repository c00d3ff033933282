"""The backend choice: which engine serves an encoder folder (TANDEM_ENCODER_BACKEND: the ONNX export its gate
chose, or torch), and where that export lives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.encoders.base import STAMP_FILE, Encoder, folder_version
from core.encoders.onnx import BACKEND_FILES, EXPORT_FILE, OnnxEncoder
from core.encoders.transformer import TransformerEncoder


def export_dir(folder: Path, home: Path) -> Path:
    """Where the ONNX export of an encoder folder lives: inside a folder Tandem made, else under $TANDEM_HOME."""
    if (folder / STAMP_FILE).is_file():
        return folder / "onnx"
    return home / "models" / f"{folder.parent.name}-onnx"


def exported_file(folder: Path, home: Path, wanted: str = "auto") -> tuple[Path | None, str]:
    """The ONNX file that serves ``folder`` for ``wanted`` (TANDEM_ENCODER_BACKEND), or None where torch does; and a
    problem to report, or "". auto serves what the export's gate chose. A quantization asked for by name that this
    export lacks falls back to the exact fp32 export, not to torch."""
    if wanted != "auto" and wanted not in BACKEND_FILES:
        return None, ""
    exported = export_dir(folder, home)
    record: dict[str, Any] = {}
    if (exported / EXPORT_FILE).is_file():
        try:
            record = json.loads((exported / EXPORT_FILE).read_text())
        except ValueError:
            record = {}
    if record.get("version") != folder_version(folder):  # an export of older weights does not count
        return None, "" if wanted == "auto" else (f"no current ONNX export of {folder.name}; serving torch. "
                                                  "Fix: `tandem models prepare`")
    backend = record.get("chosen", "onnx") if wanted == "auto" else wanted
    file = exported / BACKEND_FILES.get(backend, BACKEND_FILES["onnx"])
    if file.is_file():
        return file, ""
    fp32 = exported / BACKEND_FILES["onnx"]
    return (fp32 if fp32.is_file() else None), f"the export of {folder.name} has no {backend}; serving the next best"


def serving_encoder(folder: Path, name: str, home: Path, wanted: str = "auto", threads: int = 1) -> Encoder:
    """The backend ``wanted`` (TANDEM_ENCODER_BACKEND) asks for (:func:`exported_file`), else torch; ``threads`` per
    call (TANDEM_TORCH_THREADS)."""
    file, problem = exported_file(folder, home, wanted)
    encoder: Encoder = (OnnxEncoder(file.parent, name, file.name, folder_version(folder), threads) if file is not None
                        else TransformerEncoder(folder, name, threads))
    encoder.problem = problem
    return encoder
