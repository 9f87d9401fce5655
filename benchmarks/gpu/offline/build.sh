#!/usr/bin/env bash
# Builds .gpu/ (ignored by git): what the GPU check needs on a single-GPU machine that has a CUDA build of torch
# and Python 3.12 but no network, no ../shared/data and no checkpoint, to travel there beside a copy of this
# checkout. A transfer holds 64 MiB with the checkout, and all of it does not fit one, so it is cut into parts that
# travel as `common` and one other:
#   common/wheels.tar.xz       the pinned transformers, tokenizers, datasets and evaluate (requirements.txt) and the
#                              dill, multiprocess and fsspec of this venv, for CPython 3.12 on x86_64 (stored
#                              uncompressed in their zips, so that xz compresses across them), plus pytest in case
#                              the machine lacks it, and the torchao of the fp8 extra (pyproject.toml), apart, for
#                              the CUDA tests alone (setup.sh);
#   common/minilm-fp16.tar.gz  all-MiniLM-L6-v2 (`make checkpoint`) with its weights rounded to fp16;
#   common/COMMIT, FILES       HEAD and its tracked files, for the provenance the run prints (run.sh);
#   speed/data/                the speed stages', the SQuAD smoke's and the QA demo's data, gzipped, from
#                              ../shared/data: the Reuters corpus cut to its first 6,000,000 characters at a document
#                              boundary (the step and Trainer benchmarks read about 2,300 blocks of 512 tokens of it)
#                              and SQuAD v1.1 dev;
#   tasks/inputs.tar.xz        the task benchmark's inputs at the gpu size (`tasks/scores.py --export_inputs`), every
#                              task's but RACE's: the `tasks` and `qa-demo` stages;
#   race/inputs.tar.xz         RACE's, which do not fit beside the others.
# The tree must be clean: the run proves its code is HEAD's by a digest of these files.
#
#     bash benchmarks/gpu/offline/build.sh          # then, on the GPU machine, with common/ and one other part:
#     bash benchmarks/gpu/offline/run.sh [--stages ...]
set -euo pipefail
cd "$(dirname "$0")/../../.."
PY="${PYTHON:-.venv/bin/python}"
BUNDLE=.gpu
SHARED=../shared/data
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "build.sh: the tree has uncommitted changes; commit them first (the run proves it ran HEAD's code)." >&2
    exit 1
fi
for needed in "$SHARED/corpus/reuters_bodies.txt" "$SHARED/squad/dev-v1.1.json"; do
    [ -f "$needed" ] || { echo "build.sh: $needed is absent." >&2; exit 1; }
done
[ -f benchmarks/.cache/all-MiniLM-L6-v2/config.json ] || make checkpoint PYTHON="$PY"

rm -rf "$BUNDLE" && mkdir -p "$BUNDLE/common" "$BUNDLE/speed/data/corpus" "$BUNDLE/speed/data/squad" "$BUNDLE/tasks" \
    "$BUNDLE/race"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "[build] wheels"
pinned() { grep -E "^$1==" requirements.txt | cut -d= -f3; }
extra_pin() { grep -oE "\"$1==[0-9.]+\"" pyproject.toml | tr -d '"'; }  # e.g. torchao==0.18.0
installed() { "$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
download() {  # folder, then NAME==VERSION...
    local folder="$1"; shift
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$work/$folder" "$@"
}
download whl "transformers==$(pinned transformers)" "tokenizers==$(pinned tokenizers)" \
    "datasets==$(pinned datasets)" "evaluate==$(pinned evaluate)" "dill==$(installed dill)" \
    "multiprocess==$(installed multiprocess)" "fsspec==$(installed fsspec)"
download whl-pytest "pytest==$(pinned pytest)" "pluggy==$(installed pluggy)" "iniconfig==$(installed iniconfig)" \
    "pygments==$(installed pygments)"
download whl-fp8 "$(extra_pin torchao)"
"$PY" - "$work" <<'EOF'
import pathlib, sys, zipfile
for wheel in pathlib.Path(sys.argv[1]).glob("*/*.whl"):  # same members in the same order, stored uncompressed
    with zipfile.ZipFile(wheel) as source:
        members = [(info, source.read(info)) for info in source.infolist()]
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as target:
        for info, data in members:
            info.compress_type = zipfile.ZIP_STORED
            target.writestr(info, data)
EOF
tar -C "$work" -cJf "$BUNDLE/common/wheels.tar.xz" whl whl-pytest whl-fp8

echo "[build] the speed stages' data"
"$PY" - "$SHARED/corpus/reuters_bodies.txt" "$BUNDLE/speed/data/corpus/reuters_bodies.txt" <<'EOF'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
end = text.rfind("\n\n", 0, 6_000_000)  # documents are separated by blank lines
open(sys.argv[2], "w", encoding="utf-8").write(text[: end + 1])
EOF
cp "$SHARED/squad/dev-v1.1.json" "$BUNDLE/speed/data/squad/dev-v1.1.json"
gzip -9 "$BUNDLE/speed/data/corpus/reuters_bodies.txt" "$BUNDLE/speed/data/squad/dev-v1.1.json"

echo "[build] the task benchmark's inputs at the gpu size"
"$PY" -m benchmarks.tasks.scores --size gpu --export_inputs "$work/task-inputs"  # every task, a folder each
others="$(ls "$work/task-inputs" | grep -vx race)"
# shellcheck disable=SC2086
tar -C "$work/task-inputs" -cf - $others | xz -9 -T0 > "$BUNDLE/tasks/inputs.tar.xz"
tar -C "$work/task-inputs" -cf - race | xz -9 -T0 > "$BUNDLE/race/inputs.tar.xz"

echo "[build] all-MiniLM-L6-v2 in fp16"
cp -r benchmarks/.cache/all-MiniLM-L6-v2 "$work/all-MiniLM-L6-v2"
"$PY" - "$work/all-MiniLM-L6-v2/model.safetensors" <<'EOF'
import sys
import torch
from safetensors.torch import load_file, save_file
state = load_file(sys.argv[1])
save_file({name: tensor.half() if tensor.is_floating_point() else tensor for name, tensor in state.items()},
          sys.argv[1], metadata={"format": "pt"})
EOF
tar -C "$work" -czf "$BUNDLE/common/minilm-fp16.tar.gz" all-MiniLM-L6-v2

git rev-parse HEAD > "$BUNDLE/common/COMMIT"
git ls-files > "$BUNDLE/common/FILES"

# What each transfer carries with the checkout (its tracked files), against the 64 MiB one holds.
checkout="$(git ls-files -z | xargs -0 cat | wc -c)"
common="$(du -sb "$BUNDLE/common" | cut -f1)"
for parts in speed tasks race "tasks speed"; do  # the qa-demo stage reads SQuAD v1.1 dev from .gpu/speed
    total=$((checkout + common))
    for part in $parts; do
        total=$((total + $(du -sb "$BUNDLE/$part" | cut -f1)))
    done
    echo "[build] carry .gpu/common with .gpu/{${parts// /,}}: $((total / 1048576)) MiB with the checkout"
    if [ "$total" -gt $((64 * 1048576)) ]; then
        echo "build.sh: .gpu/common with .gpu/{${parts// /,}} and the checkout are $total bytes, over the 64 MiB a" \
             "transfer holds; cut the parts further." >&2
        exit 1
    fi
done
