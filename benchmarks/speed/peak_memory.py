#!/usr/bin/env python
"""Runs a Python script as its own command line would (`python SCRIPT ARGS...`) and, when it ends, writes the
process's peak GPU memory (common.peak_memory: null without CUDA) to a JSON file. The Trainer benchmark runs
run_pretraining.py through it, so that spanroberta's side reports its peak as the baselines do, with no change to
the script:

    python -m benchmarks.speed.peak_memory PEAK.json run_pretraining.py --recipe spanbert ...
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

from benchmarks.speed import common


def main() -> None:
    output, script, *arguments = sys.argv[1:]
    sys.argv = [script, *arguments]
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        Path(output).write_text(json.dumps(common.peak_memory()))


if __name__ == "__main__":
    main()
