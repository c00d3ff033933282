"""all-mpnet-base-v2 (issue 40), the optional stronger English encoder: assembled once from its five chunk wheels,
served behind the encoder registry as ``mpnet``, and exported to ONNX without ``token_type_ids`` (MPNet has none)."""

from __future__ import annotations

import importlib.metadata
import json
import shutil

import numpy as np
import pytest

from core.encoders import OnnxEncoder, TransformerEncoder, load_encoder
from core.model_files import MPNET_PACKAGES, STAMP_FILE, mpnet_folder

pytestmark = pytest.mark.slow


@pytest.fixture
def scratch(tmp_path):
    """tmp_path, emptied afterwards: these tests write 0.5 to 0.9 GB (pytest keeps the last runs' folders)."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_mpnet_is_assembled_from_its_five_wheels_into_a_folder_named_by_their_versions_and_kept(scratch):
    tmp_path = scratch
    folder = mpnet_folder(tmp_path)
    versions = {p: importlib.metadata.version(p) for p in MPNET_PACKAGES}
    assert folder.parent.name == f"all-mpnet-base-v2-{'-'.join(sorted(set(versions.values())))}"
    assert (folder / "model.safetensors").is_file() and (folder / "modules.json").is_file()
    stamp = json.loads((folder / STAMP_FILE).read_text())
    assert stamp["packages"] == versions
    assert not list(tmp_path.rglob("*.zip")) and not list(tmp_path.rglob("desktop.ini"))  # the joined zip is gone
    made = (folder / STAMP_FILE).stat().st_mtime_ns
    assert mpnet_folder(tmp_path) == folder and (folder / STAMP_FILE).stat().st_mtime_ns == made  # not made again


def test_mpnet_loads_by_name_and_puts_a_paraphrase_nearer_its_question_than_an_unrelated_message(settings):
    mpnet = load_encoder("mpnet", settings=settings)
    assert (mpnet.name, mpnet.dim, mpnet.problem) == ("mpnet", 768, "")
    question, paraphrase, unrelated = mpnet.encode_queries(
        ["how do I get my money back for an order", "I'd like a refund on what I bought", "what time is the match tonight"])
    assert np.isclose(np.linalg.norm(question), 1.0, atol=1e-4)
    assert question @ paraphrase > question @ unrelated


def test_mpnet_onnx_export_takes_no_token_type_ids_matches_torch_and_serves_the_first_quantization_that_passes(
        scratch, settings):
    tmp_path = scratch
    from offline.encoder_export import export_and_gate

    folder = mpnet_folder(settings.models_dir)
    texts = ["how do I track my order", "where is my parcel", "reset my password", "forgot my login",
             "refund please", "money back for a broken kettle"] * 3
    labels = ["track", "track", "password", "password", "refund", "refund"] * 3
    record = export_and_gate(folder, tmp_path / "onnx", texts, labels, log=lambda line: None, weight_only=True)
    int8_passed, w8_passed = (record[f"{q}_top1_agreement"] >= record["gate"] for q in ("int8", "w8"))
    assert record["chosen"] == ("onnx-int8" if int8_passed else "onnx-w8" if w8_passed else "onnx")
    exported = OnnxEncoder(tmp_path / "onnx", "mpnet", "model.onnx", record["version"])
    assert [i.name for i in exported._session.get_inputs()] == ["input_ids", "attention_mask"]
    torch_vectors = TransformerEncoder(folder, "mpnet").encode_queries(texts[:6])
    assert float((exported.encode_queries(texts[:6]) * torch_vectors).sum(1).min()) > 0.9999
    # 8-bit weights with fp32 activations keep mpnet's vectors, where full int8 loses them (mean cosine 0.87 measured)
    weights8 = OnnxEncoder(tmp_path / "onnx", "mpnet", "model_w8.onnx", record["version"])
    assert weights8.backend == "onnx-w8" and record["w8_mean_cosine"] > 0.999
    assert float((weights8.encode_queries(texts[:6]) * torch_vectors).sum(1).min()) > 0.998


def test_doctor_lists_mpnet_as_optional_with_its_wheels_when_another_encoder_is_selected(settings, capsys):
    from tandem.doctor import run_doctor

    assert "mpnet" not in (settings.encoder, settings.cascade_encoder)
    run_doctor(load=False)
    lines = [line for line in capsys.readouterr().out.splitlines() if "model mpnet" in line]
    assert lines == ["  --   model mpnet: optional, not selected (TANDEM_ENCODER=mpnet or TANDEM_CASCADE_ENCODER=mpnet); "
                     "its 5 wheels installed "
                     f"({MPNET_PACKAGES[0]} {importlib.metadata.version(MPNET_PACKAGES[0])} ...)"]
