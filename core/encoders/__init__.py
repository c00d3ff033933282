"""Encoders: text to L2-normalised vectors, behind one small interface, loaded once per process. This package
only re-exports; each encoder, the backend choice and the cache of loaded encoders live in modules of their own.

The knowledge base, the cache and the router all take an :class:`Encoder`; none of them knows which model
is behind it or how wide its vectors are (``encoder.dim``). Queries and passages are encoded separately
because some models (e5) prefix them differently; for MiniLM both are the same call.
"""

from core.encoders.backend import export_dir, serving_encoder
from core.encoders.base import STAMP_FILE, Encoder, embedded_by_length, folder_version
from core.encoders.batching import BatchingEncoder
from core.encoders.cache import (
    ACTIVE_FILE,
    AUTO,
    ENCODERS,
    active_tuned_folder,
    encoders_dir,
    load_encoder,
    resolve,
    set_active_tuned_folder,
)
from core.encoders.e5 import E5Encoder
from core.encoders.onnx import EXPORT_FILE, INT8_FILE, ONNX_FILE, OnnxEncoder, cpu_has_vnni
from core.encoders.transformer import TransformerEncoder, mean_pooled

__all__ = [
    "ACTIVE_FILE", "AUTO", "ENCODERS", "EXPORT_FILE", "INT8_FILE", "ONNX_FILE", "STAMP_FILE",
    "BatchingEncoder",
    "E5Encoder", "Encoder", "OnnxEncoder", "TransformerEncoder", "active_tuned_folder", "cpu_has_vnni",
    "embedded_by_length", "encoders_dir", "export_dir", "folder_version", "load_encoder", "mean_pooled", "resolve",
    "serving_encoder", "set_active_tuned_folder",
]
