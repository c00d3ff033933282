#!/usr/bin/env bash
# GPU check (README, "Running on a GPU host"): on a host with an NVIDIA GPU, build vLLM's CUDA venv from
# requirements-gpu.txt, serve a model with `vllm serve`, run the LLM-path tests and the LLM part of `make bench`
# against it, and print ONE summary line. Wall time under 10 minutes on a warm pip cache.
#   scripts/gpu_check.sh                      # SmolLM2 from the wheel (what the tests expect)
#   GPU_CHECK_MODEL=/path/to/model scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
say() { echo "gpu_check: $*"; }
summary() { echo "GPU CHECK: $1 ($(( $(date +%s) - started )) s)"; }

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  summary "FAIL - no NVIDIA GPU here (nvidia-smi missing or sees no device)"; exit 2
fi
gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)
say "GPU: $gpu"

# The app's venv (models, tests, bench) as make setup builds it; the GPU vLLM in its own venv.
[ -x .venv/bin/tandem ] || make -s setup >/tmp/gpu_check_setup.log 2>&1 || { summary "FAIL - make setup (see /tmp/gpu_check_setup.log)"; exit 1; }
VENV_GPU=${VENV_GPU:-.venv-gpu}
if [ ! -x "$VENV_GPU/bin/vllm" ]; then
  say "installing requirements-gpu.txt into $VENV_GPU ..."
  python3 -m venv "$VENV_GPU" && "$VENV_GPU/bin/pip" install -q -r requirements-gpu.txt \
    || { summary "FAIL - pip install -r requirements-gpu.txt"; exit 1; }
fi
vllm_version=$("$VENV_GPU/bin/python" -c "import vllm; print(vllm.__version__)")

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
model=${GPU_CHECK_MODEL:-$(.venv/bin/python -c "from tandem.llm_server import prepare_model_folder; print(prepare_model_folder())")}
# the name the app sends (TANDEM_LLM_MODEL's local stand-in: smollm2 unless set)
served=$(.venv/bin/python -c "from core.settings import get_settings; from tandem.llm_server import served_model; print(served_model(get_settings()))")
port=${GPU_CHECK_PORT:-8011}
log=$(mktemp /tmp/gpu_check_vllm.XXXX.log)
say "vllm serve $model on :$port (vLLM $vllm_version) ..."
"$VENV_GPU/bin/vllm" serve "$model" --served-model-name "$served" --host 127.0.0.1 --port "$port" \
  --max-model-len 2048 --scheduling-policy priority --enable-prefix-caching --gpu-memory-utilization 0.5 >"$log" 2>&1 &
vllm_pid=$!
trap 'kill $vllm_pid 2>/dev/null; wait $vllm_pid 2>/dev/null' EXIT
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break
  kill -0 $vllm_pid 2>/dev/null || { summary "FAIL - vllm serve exited: $(tail -1 "$log")"; exit 1; }
  sleep 2
done
curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null || { summary "FAIL - vllm serve not ready in 240 s"; exit 1; }

# The LLM-path tests start their own server through TANDEM_VLLM_PYTHON: the same CUDA venv, the same command line.
export TANDEM_VLLM_PYTHON="$VENV_GPU/bin/python"
tests_out=$(.venv/bin/python -m pytest -q -p no:cacheprovider tests/integration/test_llm_client.py \
  tests/integration/test_chain_llm.py 2>&1 | tail -1)
bench_json=$(.venv/bin/python -m bench.llm_levels --url "http://127.0.0.1:$port/v1" --seconds 15 2>/dev/null | tail -1)
levels=$(python3 -c "import json,sys; r=json.loads(sys.argv[1]); print(' '.join(f\"x{l['clients']}: p50 {l['p50_ms']} ms {l['tokens_per_s']} tok/s\" for l in r['levels']))" "$bench_json" 2>/dev/null || echo "bench failed")
status=PASS
[[ "$tests_out" == *failed* || "$tests_out" != *passed* || "$levels" == "bench failed" ]] && status=FAIL
summary "$status - $gpu, vLLM $vllm_version; tests: $tests_out; LLM levels: $levels"
[ "$status" = PASS ]
