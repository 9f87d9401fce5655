#!/usr/bin/env bash
# Prepares an offline GPU machine (Python 3.12, CUDA torch, no network) for `python3 -m benchmarks.gpu.check`, from
# the bundle build.sh makes in .gpu/. Run from the repository root, sourced, so that the exports reach the caller
# (run.sh does):
#     source benchmarks/gpu/offline/setup.sh && python3 -m benchmarks.gpu.check
# It installs the pinned wheels of .gpu/common/wheels.tar.xz into /tmp/site (PYTHONPATH, ahead of the image's
# packages), torchao apart into /tmp/site-fp8 (SPANROBERTA_FP8_SITE, which only the check's CUDA tests import from:
# transformers imports torchao with every model once it can, and the benchmarks' stages keep the environment their
# records were measured in), unpacks all-MiniLM-L6-v2 (fp16-rounded weights, converted back to float32) into
# /tmp/all-MiniLM-L6-v2-fp16-rounded (SPANROBERTA_MINILM), and whichever other parts were carried: the speed stages'
# data into ../shared/data (files already there are kept), the task benchmark's inputs into .gpu/task-inputs/.
# The work runs in a subshell under `set -e`, so a failure stops it without `set -e` leaking into the caller's shell.
# GPU_SETUP_PIP_EXTRA: extra pip flags (empty here; the CPU rehearsal on Python 3.11 passes --python-version 3.12 ...).

_gpu_setup_work() (
    set -e
    ROOT="$(pwd)"
    GPU="$ROOT/.gpu"
    PY="${PYTHON:-python3}"
    SITE=/tmp/site
    SITE_FP8=/tmp/site-fp8
    WHL=/tmp/gpu-setup-whl
    DATA="$ROOT/../shared/data"
    CKPT=/tmp/all-MiniLM-L6-v2-fp16-rounded
    [ -f "$ROOT/benchmarks/gpu/check.py" ] || { echo "setup.sh: run it from the repository root" >&2; exit 1; }
    [ -d "$GPU" ] || { echo "setup.sh: $GPU is absent" >&2; exit 1; }

    # ARCHIVE (.tar.xz) TARGET: its entries unpacked, each top-level one replacing a copy already in TARGET (a warm
    # machine's); Python's tarfile, so that the image needs no xz.
    unpack_xz() {
        "$PY" - "$1" "$2" <<'EOF'
import pathlib, shutil, sys, tarfile
archive, target = sys.argv[1], pathlib.Path(sys.argv[2])
with tarfile.open(archive, "r:xz") as entries:
    tops = sorted({member.name.split("/")[0] for member in entries.getmembers()} - {"."})
    for top in tops:
        shutil.rmtree(target / top, ignore_errors=True)
    try:
        entries.extractall(target, filter="data")
    except TypeError:  # a Python without extraction filters
        entries.extractall(target)
print(f"[setup]   {archive}: {' '.join(tops)}")
EOF
    }

    echo "[setup] unpacking wheels"
    rm -rf "$WHL" && mkdir -p "$WHL"
    unpack_xz "$GPU/common/wheels.tar.xz" "$WHL"

    echo "[setup] pip install --target $SITE"
    mkdir -p "$SITE"
    # shellcheck disable=SC2086
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
        ${GPU_SETUP_PIP_EXTRA:-} "$WHL"/whl/*.whl
    if ! "$PY" -c "import pytest" 2>/dev/null; then
        echo "[setup] the image has no pytest: installing pytest 9.2.0 into $SITE too"
        # shellcheck disable=SC2086
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
            ${GPU_SETUP_PIP_EXTRA:-} "$WHL"/whl-pytest/*.whl
    fi
    if [ -d "$WHL/whl-fp8" ]; then
        echo "[setup] pip install --target $SITE_FP8 (torchao, for the --fp8 CUDA test)"
        rm -rf "$SITE_FP8" && mkdir -p "$SITE_FP8"
        # shellcheck disable=SC2086
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE_FP8" \
            ${GPU_SETUP_PIP_EXTRA:-} "$WHL"/whl-fp8/*.whl
    fi
    rm -rf "$WHL"

    echo "[setup] checking the versions seen through PYTHONPATH=$SITE"
    PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" "$PY" - <<'EOF'
import importlib.metadata as md
import datasets, dill, evaluate, fsspec, multiprocess, tokenizers, transformers
want = {"transformers": "5.23.0", "tokenizers": "0.23.3", "datasets": "5.2.0", "evaluate": "0.4.6",
        "dill": "0.4.1", "multiprocess": "0.70.19", "fsspec": "2026.9.0"}
mods = {"transformers": transformers, "tokenizers": tokenizers, "datasets": datasets, "evaluate": evaluate,
        "dill": dill, "multiprocess": multiprocess, "fsspec": fsspec}
bad = {name: (mods[name].__version__, mods[name].__file__) for name, version in want.items()
       if mods[name].__version__ != version}
if bad:
    raise SystemExit(f"[setup] wrong versions imported: {bad}")
for name in ("torch", "huggingface_hub", "safetensors", "accelerate", "pyarrow", "numpy", "regex"):
    try:
        print(f"[setup]   {name} {md.version(name)} (image)")
    except md.PackageNotFoundError:
        print(f"[setup]   {name} ABSENT")
print("[setup]   " + ", ".join(f"{name} {version}" for name, version in want.items()) + " (carried)")
EOF

    echo "[setup] unpacking the speed stages' data into $DATA"
    for relative in corpus/reuters_bodies.txt squad/dev-v1.1.json; do
        target="$DATA/$relative"
        if [ -f "$target" ]; then
            echo "[setup]   $target is already there: kept"
            continue
        fi
        if [ ! -f "$GPU/speed/data/$relative.gz" ]; then
            echo "[setup]   $relative: not carried (.gpu/speed)"
            continue
        fi
        mkdir -p "$(dirname "$target")"
        gzip -dc "$GPU/speed/data/$relative.gz" > "$target.partial"
        mv "$target.partial" "$target"
        echo "[setup]   $target ($(wc -c < "$target") bytes)"
    done

    echo "[setup] unpacking the task benchmark's inputs into $GPU/task-inputs"
    for part in tasks race; do
        if [ ! -f "$GPU/$part/inputs.tar.xz" ]; then
            echo "[setup]   .gpu/$part: not carried"
            continue
        fi
        unpack_xz "$GPU/$part/inputs.tar.xz" "$GPU/task-inputs"
    done

    echo "[setup] unpacking all-MiniLM-L6-v2 into $CKPT (fp16-rounded weights stored as float32)"
    staging="$(mktemp -d /tmp/minilm-unpack.XXXXXX)"
    tar -xzf "$GPU/common/minilm-fp16.tar.gz" -C "$staging"
    "$PY" - "$staging/all-MiniLM-L6-v2/model.safetensors" <<'EOF'
import sys
import torch
from safetensors.torch import load_file, save_file
path = sys.argv[1]
state = load_file(path)
state = {name: (tensor.float() if tensor.is_floating_point() else tensor).contiguous() for name, tensor in state.items()}
save_file(state, path, metadata={"format": "pt"})
EOF
    rm -rf "$CKPT"
    mv "$staging/all-MiniLM-L6-v2" "$CKPT"
    rm -rf "$staging"
    ls -l "$CKPT/model.safetensors"
)

# Not called as an `if` condition: bash ignores `set -e` inside anything run as a condition.
_gpu_setup_work
_gpu_setup_rc=$?
if [ "$_gpu_setup_rc" -eq 0 ]; then
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    export SPANROBERTA_MINILM=/tmp/all-MiniLM-L6-v2-fp16-rounded
    if [ -d /tmp/site-fp8/torchao ]; then
        export SPANROBERTA_FP8_SITE=/tmp/site-fp8
    fi
    export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
    if [ -f .gpu/common/COMMIT ]; then
        SPANROBERTA_SOURCE_COMMIT="$(tr -d '[:space:]' < .gpu/common/COMMIT)"
        export SPANROBERTA_SOURCE_COMMIT
    fi
    echo "[setup] done: PYTHONPATH=$PYTHONPATH SPANROBERTA_MINILM=$SPANROBERTA_MINILM" \
         "SPANROBERTA_FP8_SITE=${SPANROBERTA_FP8_SITE:-unset}" \
         "SPANROBERTA_SOURCE_COMMIT=${SPANROBERTA_SOURCE_COMMIT:-unset}"
    unset -f _gpu_setup_work
    unset _gpu_setup_rc
else
    echo "[setup] FAILED (exit $_gpu_setup_rc, see above)" >&2
    unset -f _gpu_setup_work
    return "$_gpu_setup_rc" 2>/dev/null || exit "$_gpu_setup_rc"
fi
