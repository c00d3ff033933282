"""`tandem llm-server` as a user runs it (dry runs: the real start is covered by the client tests)."""

from __future__ import annotations

from tests.conftest import run_cli


def test_llm_server_dry_run_prints_the_transformers_command():
    done = run_cli("llm-server", "--dry-run", "--port", "8123", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "serve" in done.stdout and "--port 8123" in done.stdout and "--device cpu" in done.stdout
    assert "--continuous-batching" in done.stdout


def test_vllm_engine_prints_documented_flags_and_needs_a_model():
    done = run_cli("llm-server", "--engine", "vllm", "--dry-run", env={"TANDEM_LLM_MODEL": "Qwen/Qwen2.5-7B-Instruct",
                                                                       "TANDEM_LLM_API_KEY": "s3cret"}, timeout=120)
    assert done.returncode == 0, done.stderr
    for flag in ("vllm serve Qwen/Qwen2.5-7B-Instruct", "--api-key s3cret", "--max-model-len",
                 "--gpu-memory-utilization"):
        assert flag in done.stdout
    missing = run_cli("llm-server", "--engine", "vllm", "--dry-run", env={"TANDEM_LLM_MODEL": ""}, timeout=120)
    assert missing.returncode == 2
    assert "TANDEM_LLM_MODEL" in missing.stderr and "Traceback" not in missing.stderr
