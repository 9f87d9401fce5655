#!/usr/bin/env bash
# On the GPU machine, from the root of a copy of this checkout with .gpu/ (build.sh) beside it: sets the machine up
# (setup.sh), runs the GPU check with the arguments given (`--stages ...` runs a part), and copies the records it
# wrote and its log to $OUT (default: gpu-check-output/). The records name the commit in .gpu/common/COMMIT and
# carry a digest of the copy's code, which the tables compare with that commit's (spanroberta/records.py).
set -o pipefail
OUT="${OUT:-gpu-check-output}"
mkdir -p "$OUT"
started="$(mktemp)"
source benchmarks/gpu/offline/setup.sh || exit 1
timeout 560 "${PYTHON:-python3}" -m benchmarks.gpu.check "$@" 2>&1 | tee "$OUT/gpu-check.log"
find benchmarks/results -type f -newer "$started" -exec cp {} "$OUT/" \;
ls "$OUT"
