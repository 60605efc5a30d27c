# Wisp — two commands a newcomer needs: `make serve` and `make test`. Both install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export XDG_RUNTIME_DIR ?= /tmp

.PHONY: serve test install vulkan clean

# Until the browser page lands, the main job is the desktop CLI: chat with the default model
# (SmolLM2-135M-Instruct, fetched into ~/.cache/wisp/models on first use) or MODEL=name|file.gguf|hf-dir.
serve: install
	$(PY) -m py_engine chat $(if $(MODEL),--model "$(MODEL)")

test: install
	$(PY) -m pytest -q

install: vulkan $(VENV)/.installed

# A GPU for machines without one: Mesa's lavapipe (Vulkan on the CPU).
vulkan:
	@if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 && ! ls /usr/share/vulkan/icd.d/nvidia_icd.json >/dev/null 2>&1; then \
		echo "installing mesa-vulkan-drivers (lavapipe)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq mesa-vulkan-drivers >/dev/null; \
	fi

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[desktop,test]"
	touch $@

clean:
	rm -rf $(VENV) .cache
