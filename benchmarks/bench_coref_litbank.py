"""Coreference on LitBank with run_coref.py, recorded: fine-tunes a checkpoint on LitBank's first 80 documents
(sorted by file name in ../shared/data/coref/litbank) and evaluates on the last 10 (by default) with singletons
scored, then writes the CoNLL metrics and the run's settings to benchmarks/results/coref-litbank/
(spanroberta.records.write_record).

    python benchmarks/bench_coref_litbank.py --model PATH [--max_steps 100] [--eval_documents 80:82] [FLAGS]

The defaults make a CPU-sized run (128-subword segments, one segment per training window, 150-unit scorers);
flags after the known ones go to run_coref.py and override them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS.parent))

import run_coref  # noqa: E402
from spanroberta.records import start_run, write_record  # noqa: E402

LITBANK = BENCHMARKS.parent.parent / "shared" / "data" / "coref" / "litbank"
CPU_SETTINGS = {"max_segment_length": 128, "max_train_segments": 1, "ffnn_size": 150, "logging_steps": 10}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="The encoder checkpoint (a folder).")
    parser.add_argument("--max_steps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--train_documents", default=":80", help="Slice of the sorted LitBank documents to train on.")
    parser.add_argument("--eval_documents", default="80:", help="Slice of them to evaluate on.")
    args, extra = parser.parse_known_args()
    if not LITBANK.is_dir():
        raise SystemExit(f"LitBank is read from {LITBANK}, which is absent on this machine.")
    started = start_run()
    settings = {**CPU_SETTINGS, "max_steps": args.max_steps, "seed": args.seed}
    flags = [f"--{name}={value}" for name, value in settings.items()]
    with tempfile.TemporaryDirectory() as output_dir:
        run_coref.main([
            "--model_name_or_path", args.model, "--output_dir", output_dir, "--train_file", str(LITBANK),
            "--train_documents", args.train_documents, "--validation_file", str(LITBANK),
            "--eval_documents", args.eval_documents,
            "--keep_singletons", "--do_train", "--do_eval", "--report_to", "none", "--save_strategy", "no",
            *flags, *extra,
        ])  # fmt: skip
        results = {**json.loads((Path(output_dir) / "train_results.json").read_text()),
                   **json.loads((Path(output_dir) / "eval_results.json").read_text())}  # fmt: skip
    settings.update(model=args.model,
                    documents="litbank/*.conll sorted by name", train_documents=args.train_documents,
                    eval_documents=args.eval_documents,
                    keep_singletons=True, extra_flags=extra)  # fmt: skip
    print(write_record("coref-litbank", settings, results, started=started))


if __name__ == "__main__":
    main()
