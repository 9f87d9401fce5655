#!/usr/bin/env python
"""MRQA scoring from a real checkpoint: run_squad.py fine-tunes all-MiniLM-L6-v2 on SQuAD v1.1 dev's first 36
articles and evaluates on MRQA 2019's SQuAD dev file cut to the contexts of the last 12 (the same contexts never
meet), so the score comes out of run_squad.py's MRQA path (MRQA's official metric, `{dataset}_em`/`_f1` and the
macro averages). A CPU-sized check that the path works end to end on real data, not SpanBERT's result.

    python benchmarks/fetch_checkpoint.py          # once: all-MiniLM-L6-v2 into benchmarks/.cache
    python benchmarks/bench_mrqa_squad.py          # CPU defaults; see --help for the sizes

Writes one `mrqa-squad` record under benchmarks/results/mrqa-squad/ with every key of eval_results.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # run_squad.py at the top of the project, parity_tasks here

import run_squad  # noqa: E402

# The parity benchmark owns the SQuAD split by article and the checkpoint's location; reuse them.
from parity_tasks import (  # noqa: E402
    CHECKPOINT,
    CHECKPOINT_NAME,
    DATA,
    SQUAD_TRAIN_ARTICLES,
    TaskSize,
    squad_files,
)

from spanroberta.records import start_run, write_record  # noqa: E402

BENCHMARK = "mrqa-squad"
MRQA_FILE = DATA / "mrqa" / "SQuAD-dev.jsonl.gz"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train_samples", type=int, default=240,
                        help="questions sampled (seed 0) from the first 36 articles to train on")
    parser.add_argument("--eval_samples", type=int, default=300,
                        help="first N questions of the MRQA file cut to the last 12 articles (--max_eval_samples)")
    parser.add_argument("--max_seq_length", type=int, default=256)
    parser.add_argument("--doc_stride", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=1e-4)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if not (CHECKPOINT / "config.json").is_file() or not MRQA_FILE.is_file():
        raise SystemExit(f"Needs the checkpoint in {CHECKPOINT} (run `python benchmarks/fetch_checkpoint.py`) and "
                         f"MRQA's SQuAD dev file at {MRQA_FILE} (../shared/data).")  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix="mrqa-squad-"))

    # Training data: the parity benchmark's SQuAD split (first 36 dev articles, questions sampled with seed 0).
    size = TaskSize(args.train_samples, None, args.max_seq_length, args.batch_size, args.learning_rate, args.epochs,
                    doc_stride=args.doc_stride)  # fmt: skip
    train_file = squad_files(work, size)["train"]

    # Evaluation data: MRQA's own SQuAD dev lines (header first) whose context is a paragraph of the last 12 articles.
    articles = json.loads((DATA / "squad" / "dev-v1.1.json").read_text(encoding="utf-8"))["data"]
    held_out = {p["context"] for a in articles[SQUAD_TRAIN_ARTICLES:] for p in a["paragraphs"]}
    with gzip.open(MRQA_FILE, "rt", encoding="utf-8") as source:
        header, *lines = [json.loads(line) for line in source]
    kept = [line for line in lines if line["context"] in held_out]
    assert kept, f"no context of {MRQA_FILE} matches a paragraph of SQuAD dev's last {len(held_out)} contexts"
    validation_file = work / "SQuAD-dev-last12.jsonl.gz"
    with gzip.open(validation_file, "wt", encoding="utf-8") as target:
        target.write("".join(json.dumps(row) + "\n" for row in [header, *kept]))

    # Fine-tune and evaluate in-process with run_squad.py, timed (wall and this process's CPU time).
    out = work / "out"
    started, wall, cpu = start_run(), time.perf_counter(), time.process_time()
    run_squad.main(["--model_name_or_path", str(CHECKPOINT), "--output_dir", str(out), "--overwrite_output_dir",
                    "--do_train", "--do_eval", "--train_file", str(train_file), "--validation_file",
                    str(validation_file), "--max_eval_samples", str(args.eval_samples),
                    "--max_seq_length", str(args.max_seq_length), "--doc_stride", str(args.doc_stride),
                    "--learning_rate", str(args.learning_rate), "--per_device_train_batch_size", str(args.batch_size),
                    "--per_device_eval_batch_size", "64", "--num_train_epochs", str(args.epochs),
                    "--seed", str(args.seed), "--warmup_steps", "0.1", "--weight_decay", "0.01",
                    "--save_strategy", "no", "--report_to", "none", "--logging_steps", "0.05"])  # fmt: skip
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu

    # The record: every evaluation key, the training loss and runtime, the split and the sizes.
    results = json.loads((out / "eval_results.json").read_text())
    trained = json.loads((out / "all_results.json").read_text())
    results |= {key: trained[key] for key in ("train_loss", "train_runtime") if key in trained}
    results |= {"wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1)}
    settings = {"checkpoint": CHECKPOINT_NAME, **vars(args),
                "split": f"SQuAD v1.1 dev articles 1-{SQUAD_TRAIN_ARTICLES} train, MRQA's SQuAD-dev lines of "
                         f"articles {SQUAD_TRAIN_ARTICLES + 1}-{len(articles)} evaluate",
                "eval_contexts": len(kept), "eval_questions_in_file": sum(len(line["qas"]) for line in kept)}
    path = write_record(BENCHMARK, settings, results, started=started)
    print(json.dumps(results, indent=2), f"\nrecord: {path}")


if __name__ == "__main__":
    main()
