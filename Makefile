# Everything a fresh machine needs: `make demo` runs the main job, `make test` the suite.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed

.PHONY: install fonts demo test bench clean

fonts:
	@if ! fc-list 2>/dev/null | grep -qi "Noto Color Emoji" || ! fc-list 2>/dev/null | grep -qi "Noto Sans CJK"; then \
	  echo "installing Debian fonts (emoji, CJK)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq fonts-noto-color-emoji fonts-noto-cjk fonts-dejavu-core fontconfig >/dev/null; \
	fi

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first, pinned: pip takes the build that lies on this disk (see README)
	$(PIP) install -q torch==2.14.1 torchvision==0.29.1
	$(PIP) install -q -e ".[test]"
	touch $(STAMP)

install: fonts $(STAMP)

demo: install
	$(VENV)/bin/rosetrain demo --out runs/demo

test: install
	$(PY) -m pytest -q

bench: install
	$(PY) benchmarks/generate.py
	$(PY) benchmarks/score.py
	$(PY) benchmarks/train_overhead.py
	$(PY) benchmarks/eval_openai.py

clean:
	rm -rf $(VENV) runs data models
