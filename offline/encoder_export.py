"""Export an encoder folder to ONNX (fp32, int8, and where asked 8-bit weights) and choose what serves it, behind an
accuracy gate.

`tandem models prepare` exports the base MiniLM and `tandem kb tune` the encoder it tuned; any folder of the same
architecture works. The export is the transformer alone, traced with its inputs passed by name (the mix-up of
``token_type_ids`` and ``attention_mask`` that broke an earlier export cannot happen), and the pooling stays ours,
so fp32 ONNX gives the torch embedding to 1e-5. int8 is dynamic quantization by onnxruntime, with the
configuration picked from the CPU's flags (VNNI: full 8-bit range; plain AVX2: reduced range, which avoids
saturation in its multiply-add).

The gate runs at export time on the KB's own questions: each question's nearest other record (what retrieval
does) found with int8 query vectors must agree with fp32 on at least 99.5 % of them. int8 serves only then; else
fp32 ONNX does (exact, still faster than torch here). ``export.json`` records the choice and the measurement.

``weight_only`` adds a third candidate between the two: 8-bit weights in blocks of 32 (onnxruntime's MatMulNBits)
with activations kept in fp32, gated the same way. Full int8 fails the gate on mpnet (top-1 agreement 0.807, mean
cosine 0.87): dynamic quantization quantizes activations per tensor, and MPNet's feed-forward output projections
read activations with outliers. With fp32 activations mpnet's vectors keep a cosine of 0.9998 to fp32, and a pass at
batch 1, which is bound by reading 440 MB of fp32 weights, takes about 0.65x the time (README, A stronger encoder).
Full int8 is still tried first: where it passes it is faster again.
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
    W8_FILE,
    OnnxEncoder,
    TransformerEncoder,
    cpu_has_vnni,
    folder_version,
)

AGREEMENT_GATE = 0.995
# Encoders offered 8-bit weights with fp32 activations: mpnet, whose full int8 fails the gate. MiniLM would gain too
# (6.7 -> 4.6 ms a message, cosine 0.9997, measured 2026-12-06), but every routing figure rests on its vectors: that
# switch waits for a re-run of `make eval` (README, A stronger encoder).
WEIGHT_ONLY_CANDIDATES = frozenset({"mpnet"})


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
    # BERT (MiniLM) takes token_type_ids; MPNet has none (its tokenizer does not make them), so its graph has two inputs.
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


def quantize_weights(onnx_path: Path) -> Path:
    """8-bit weights in blocks of 32 for every MatMul with a weight; activations stay fp32 (accuracy level 4: the
    kernel may multiply in int8 per block, measured here to keep a cosine of 0.9998 on mpnet)."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    target = onnx_path.with_name(W8_FILE)
    quantizer = MatMulNBitsQuantizer(onnx.load(str(onnx_path)), bits=8, block_size=32, is_symmetric=True,
                                     accuracy_level=4)
    _quietly(quantizer.process)
    quantizer.model.save_model_to_file(str(target), use_external_data_format=False)
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
    """What each quantization of an ``export.json`` record scored against the gate, in one line."""
    scores = ", ".join(f"{short} top-1 agreement {record[f'{short}_top1_agreement']:.4f}" for short in ("int8", "w8")
                       if f"{short}_top1_agreement" in record)
    return f"{scores} (gate {record['gate']})"


def export_and_gate(folder: Path, out: Path, texts: Sequence[str], labels: Sequence[str],
                    log: Callable[[str], None] = print, weight_only: bool = False) -> dict:
    """Export ``folder``, measure int8 (and with ``weight_only`` 8-bit weights) against fp32 on ``texts`` (the KB's
    questions), write ``export.json``. The first candidate to pass the gate serves, fastest first; else fp32."""
    started = time.perf_counter()
    for stale in (INT8_FILE, W8_FILE):  # a candidate of an earlier export must not serve these weights' name
        (out / stale).unlink(missing_ok=True)
    fp32 = export_onnx(folder, out)
    candidates = {"int8": (quantize(fp32), "onnx-int8")}
    if weight_only:
        candidates["w8"] = (quantize_weights(fp32), "onnx-w8")
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
