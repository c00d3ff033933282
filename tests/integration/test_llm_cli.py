"""`tandem llm-server` as a user runs it (dry runs: the real start is covered by the session's vLLM fixture)."""

from __future__ import annotations

from tests.conftest import run_cli


def test_dry_run_prints_the_vllm_command_for_the_local_model():
    done = run_cli("llm-server", "--dry-run", "--port", "8123", timeout=120)
    assert done.returncode == 0, done.stderr
    command = done.stdout.strip()
    assert command.split()[0].endswith(".venv-llm/bin/python")
    assert "-m vllm.entrypoints.openai.api_server" in command and "--port 8123" in command
    assert "smollm2-135m-instruct-vllm" in command and "--served-model-name smollm2" in command
    assert "transformers" not in command


def test_dry_run_on_a_gpu_host_uses_its_venv_model_and_api_key():
    done = run_cli("llm-server", "--dry-run", env={"TANDEM_VLLM_PYTHON": "/opt/gpu/bin/python",
                                                   "TANDEM_LLM_MODEL": "Qwen/Qwen2.5-7B-Instruct",
                                                   "TANDEM_LLM_API_KEY": "s3cret"}, timeout=120)
    assert done.returncode == 0, done.stderr
    command = done.stdout.strip()
    assert command.startswith("/opt/gpu/bin/python -m vllm.entrypoints.openai.api_server")
    assert "--model Qwen/Qwen2.5-7B-Instruct" in command and "--api-key s3cret" in command
