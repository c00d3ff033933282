"""Export an encoder folder to ONNX (fp32 and int8) and choose what serves it, behind an accuracy gate.

`tandem models prepare` exports the base MiniLM and `tandem kb tune` the encoder it tuned; any folder of the same
architecture works. The export is the transformer alone, traced with its inputs passed by name (the mix-up of
``token_type_ids`` and ``attention_mask`` that broke an earlier export cannot happen), and the pooling stays ours,
so fp32 ONNX gives the torch embedding to 1e-5. int8 is dynamic quantization by onnxruntime, with the
configuration picked from the CPU's flags (VNNI: full 8-bit range; plain AVX2: reduced range, which avoids
saturation in its multiply-add).

The gate runs at export time on the KB's own questions: each question's nearest other record (what retrieval
does) found with int8 query vectors must agree with fp32 on at least 99.5 % of them. int8 serves only then; else
fp32 ONNX does (exact, still faster than torch here). ``export.json`` records the choice and the measurement.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from core.encoders import (
    EXPORT_FILE,
    INT8_FILE,
    ONNX_FILE,
    OnnxEncoder,
    TransformerEncoder,
    cpu_has_vnni,
    folder_version,
)

AGREEMENT_GATE = 0.995


def export_onnx(folder: Path, out: Path) -> Path:
    """fp32 ONNX of the transformer in ``folder`` (the tokenizer files are copied next to it)."""
    import shutil

    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModel.from_pretrained(str(folder)).eval()

    class Transformer(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids=None):  # by name: the order cannot be mixed up
            extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state

    out.mkdir(parents=True, exist_ok=True)
    sample = tokenizer(["an example", "a somewhat longer example sentence"], padding=True, return_tensors="pt")
    # BERT (MiniLM) takes token_type_ids; a model whose tokenizer does not make them gets a graph of two inputs.
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    import warnings

    with warnings.catch_warnings(), torch.inference_mode():
        warnings.simplefilter("ignore")  # the tracer's notes on shape checks it records as constants
        torch.onnx.export(Transformer(model), tuple(sample[n] for n in names), str(out / ONNX_FILE), input_names=names,
                          output_names=["last_hidden_state"], opset_version=17, dynamo=False,
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]})
    tokenizer.save_pretrained(str(out))
    if (folder / "config.json").is_file():
        shutil.copy2(folder / "config.json", out / "config.json")
    return out / ONNX_FILE


def _quietly(work: Callable[[], None]) -> None:
    """onnxruntime's quantizers log through the root logger (advice to pre-process, a line per node) and may install
    a root handler that then prints every library's debug lines (bm25s logs at DEBUG)."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    logging.disable(logging.WARNING)
    try:
        work()
    finally:
        logging.disable(logging.NOTSET)
        root.handlers[:] = handlers


def quantize(onnx_path: Path) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = onnx_path.with_name(INT8_FILE)
    _quietly(lambda: quantize_dynamic(str(onnx_path), str(target), weight_type=QuantType.QInt8, per_channel=True,
                                      reduce_range=not cpu_has_vnni()))
    return target


def agreement(reference: np.ndarray, candidate: np.ndarray, labels: Sequence[str]) -> float:
    """Share of rows whose nearest other row (by ``reference`` records) has the same label under both query sets."""
    agree = 0
    for i in range(len(labels)):
        ref = reference @ reference[i]
        cand = reference @ candidate[i]
        ref[i] = cand[i] = -1.0
        agree += labels[int(np.argmax(ref))] == labels[int(np.argmax(cand))]
    return agree / max(1, len(labels))


def gate_summary(record: dict) -> str:
    """What int8 of an ``export.json`` record scored against the gate, in one line."""
    return f"int8 top-1 agreement {record['int8_top1_agreement']:.4f} (gate {record['gate']})"


def export_and_gate(folder: Path, out: Path, texts: Sequence[str], labels: Sequence[str],
                    log: Callable[[str], None] = print) -> dict:
    """Export ``folder``, measure int8 against fp32 on ``texts`` (the KB's questions), write ``export.json``. int8
    serves when it passes the gate; else fp32."""
    started = time.perf_counter()
    (out / INT8_FILE).unlink(missing_ok=True)  # an earlier export's candidate must not serve these weights' name
    fp32 = export_onnx(folder, out)
    candidates = {"int8": (quantize(fp32), "onnx-int8")}
    version = folder_version(folder)
    reference = TransformerEncoder(folder, "reference").encode_passages(texts)
    exact = OnnxEncoder(out, "fp32", ONNX_FILE, version).encode_queries(texts)
    record: dict = {"source": str(folder), "version": version, "chosen": "onnx", "gate": AGREEMENT_GATE,
                    "fp32_min_cosine": round(float((exact * reference).sum(1).min()) if len(texts) else 1.0, 6)}
    for short, (path, backend) in candidates.items():
        vectors = OnnxEncoder(out, short, path.name, version).encode_queries(texts)
        agreed = agreement(reference, vectors, labels) if len(texts) else 1.0
        record[f"{short}_top1_agreement"] = round(agreed, 4)
        record[f"{short}_mean_cosine"] = round(float((vectors * reference).sum(1).mean()) if len(texts) else 1.0, 4)
        if record["chosen"] == "onnx" and agreed >= AGREEMENT_GATE:
            record["chosen"] = backend
    record.update({"quantization": "avx512-vnni (full range)" if cpu_has_vnni() else "avx2 (reduced range)",
                   "questions": len(texts), "exported": datetime.now(UTC).isoformat(timespec="seconds"),
                   "seconds": round(time.perf_counter() - started, 1)})
    (out / EXPORT_FILE).write_text(json.dumps(record, indent=1))
    log(f"ONNX export of {folder.name}: {gate_summary(record)} -> serving {record['chosen']}; "
        f"fp32 min cosine {record['fp32_min_cosine']:.5f}")
    return record
