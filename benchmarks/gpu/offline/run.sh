#!/usr/bin/env bash
# On the GPU machine, from the root of a copy of this checkout with .gpu/ (build.sh) beside it: sets the machine up
# (setup.sh), runs the GPU check with the arguments given (`--call N` or `--stages ...` runs a part) and leaves ONE
# file in $OUT (default: gpu-check-output/), gpu-check.tar.gz (benchmarks/gpu/archive.py): every record the call
# wrote, under its path in the checkout, and the logs (the setup's, the check's, each stage's). The check rewrites
# it after every stage, so that a call cut off still hands back what finished; `tar -xzf gpu-check.tar.gz` at the
# checkout's root puts the records where the tables read them, and where the next call's check finds them and skips
# what they cover.
# The records name the commit in .gpu/common/COMMIT and carry a digest of the copy's code, which the tables compare
# with that commit's (spanroberta/records.py).
set -o pipefail
OUT="${OUT:-gpu-check-output}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
logs="$(mktemp -d)"
started="$(mktemp)"
pack() { "$PY" -m benchmarks.gpu.archive "$OUT/gpu-check.tar.gz" --since "$started" \
    --records_dir benchmarks/results --logs "$logs"/*.log; }
# Sourced, so that its exports reach this shell; its output goes to its log, then to the screen.
source benchmarks/gpu/offline/setup.sh > "$logs/setup.log" 2>&1
setup_status=$?
cat "$logs/setup.log"
[ "$setup_status" -eq 0 ] || { pack; exit 1; }
# The check keeps to its own budget (BUDGET_SECONDS in check.py, 450 s: 8 minutes with the setup); this limit only
# catches a hang past it.
timeout 475 "$PY" -m benchmarks.gpu.check --archive "$OUT/gpu-check.tar.gz" --logs_dir "$logs" "$@" 2>&1 \
    | tee "$logs/check.log"
status=$?
pack
tar -tzf "$OUT/gpu-check.tar.gz"
exit "$status"
