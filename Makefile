# Two commands do all the set-up on a fresh Linux machine with Python 3.11:
#   make demo   creates .venv, installs everything and pretrains a tiny model on the bundled corpus
#   make test   creates .venv, installs everything and runs the test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test clean

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) run_pretraining.py --overwrite_output_dir

test: setup
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false $(PY) -m pytest -q tests

clean:
	rm -rf $(VENV) spanroberta-demo
