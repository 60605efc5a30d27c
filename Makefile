# Wisp — two commands a newcomer needs: `make serve` and `make test`. Both install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export XDG_RUNTIME_DIR ?= /tmp

.PHONY: serve chat web test test-fast fuzz format install vulkan chromium biome clean

# The main job: the chat page. Builds build/web, fetches the default model (SmolLM2-135M-Instruct,
# into ~/.cache/wisp/models) or MODEL=name, and serves http://127.0.0.1:8000/ (MODEL=file.gguf|hf-dir|name
# is offered first in the picker).
serve: install web
	$(PY) -m py_engine fetch $(if $(and $(MODEL),$(if $(wildcard $(MODEL)),,x)),"$(MODEL)")
	$(PY) -m app $(if $(MODEL),--model "$(MODEL)")

# The same engine in the terminal (desktop, wgpu-py): MODEL=name|file.gguf|hf-dir.
chat: install
	$(PY) -m py_engine chat $(if $(MODEL),--model "$(MODEL)")

# build/web: Pyodide's core (npm), our wheels and wisp-lock.json; a no-op when up to date.
web: $(VENV)/.installed
	$(PY) tools/build_web.py

test: install web chromium biome
	$(PY) -m pytest -q

# The inner loop: everything but the `browser` and `slow` tests (markers in pyproject.toml), under 2 minutes.
test-fast: install
	$(PY) -m pytest -q -m "not slow and not browser"

# The readers' fuzzers (tests/fuzz/) longer than `make test` runs them (10,000 inputs each, seed 0):
# FUZZ_COUNT inputs per reader from a new seed; a finding is saved under tests/fuzz/crashers/found/.
fuzz: install
	FUZZ_COUNT=$${FUZZ_COUNT:-200000} FUZZ_SEED=$${FUZZ_SEED:-$$(date +%s)} $(PY) -m pytest -q -s tests/fuzz

# The house style (tests/test_style.py checks it): ruff formats and fixes the Python, Biome the JavaScript.
format: install biome
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .
	$(BIOME) lint --write --error-on-warnings .

install: vulkan $(VENV)/.installed

# A GPU for machines without one: Mesa's lavapipe (Vulkan on the CPU).
vulkan:
	@if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 && ! ls /usr/share/vulkan/icd.d/nvidia_icd.json >/dev/null 2>&1; then \
		echo "installing mesa-vulkan-drivers (lavapipe)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq mesa-vulkan-drivers >/dev/null; \
	fi

# A browser for the browser tests: Debian's Chromium, driven by Playwright (never `playwright install`).
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "installing chromium"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; \
	fi

# Biome, the JavaScript linter (one binary), from npm into .cache/biome.
BIOME_VERSION := 2.6.8
BIOME := .cache/biome/node_modules/.bin/biome
biome:
	@if [ ! -x $(BIOME) ]; then \
		if command -v npm >/dev/null; then echo "installing biome"; \
			npm install --silent --no-save --prefix .cache/biome @biomejs/biome@$(BIOME_VERSION) >/dev/null; \
		else echo "no npm here: the JavaScript lint test is skipped"; fi; \
	fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[desktop,test,server,notebook]"
	touch $@

clean:
	rm -rf $(VENV) .cache build/web build/notebook

# The third command: a JupyterLite site whose Python kernel runs Wisp (docs/notebook.md). Installs the
# `notebook` extra (jupyterlite from PyPI) when missing, builds build/notebook (tools/build_notebook.py,
# offline but for PyPI and npm) and serves it with the page, on one origin so both share the weight store:
# http://127.0.0.1:8000/notebook/lab/index.html?path=wisp.ipynb (MODEL as for `make serve`).
.PHONY: notebook
notebook: install web
	$(PY) tools/build_notebook.py
	$(PY) -m py_engine fetch $(if $(and $(MODEL),$(if $(wildcard $(MODEL)),,x)),"$(MODEL)")
	$(PY) -m app --notebook build/notebook $(if $(MODEL),--model "$(MODEL)")
