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


def serving_encoder(folder: Path, name: str, home: Path, wanted: str = "auto", threads: int = 1) -> Encoder:
    """The backend ``wanted`` (TANDEM_ENCODER_BACKEND) asks for: auto serves what the export's gate chose, else
    torch; ``threads`` per call (TANDEM_TORCH_THREADS)."""
    exported = export_dir(folder, home)
    record: dict[str, Any] = {}
    if (exported / EXPORT_FILE).is_file():
        try:
            record = json.loads((exported / EXPORT_FILE).read_text())
        except ValueError:
            record = {}
    current = record.get("version") == folder_version(folder)  # an export of older weights does not count
    if (wanted == "auto" or wanted in BACKEND_FILES) and current:
        file = BACKEND_FILES.get(record.get("chosen", "") if wanted == "auto" else wanted, BACKEND_FILES["onnx"])
        if (exported / file).is_file():
            return OnnxEncoder(exported, name, file, folder_version(folder), threads)
    encoder = TransformerEncoder(folder, name, threads)
    if wanted != "torch" and wanted != "auto":
        encoder.problem = f"no current ONNX export of {folder.name}; serving torch. Fix: `tandem models prepare`"
    return encoder
