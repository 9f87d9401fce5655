"""Relation classification on SemEval-2010 Task 8 with run_relation.py, each encoding in turn; one record each.

SemEval's test split is not in the shared data, so its 8,000 training sentences are split by a fixed rule: the first
7,000 to train (or the first --train_samples of them), the last 1,000 to evaluate. The score is the official one
(macro F1 over the 9 relations, direction counted, Other excluded), written with the run's full eval metrics to
benchmarks/results/relation-semeval/ by `spanroberta.records.write_record`.

    python benchmarks/bench_relation_semeval.py --model benchmarks/.cache/all-MiniLM-L6-v2
    python benchmarks/bench_relation_semeval.py --model CKPT --entity_markers typed_entity_markers --epochs 5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import run_relation  # noqa: E402
from spanroberta.records import start_run, write_record  # noqa: E402
from spanroberta.tasks.relation import ENCODINGS  # noqa: E402

BENCHMARKS = Path(__file__).resolve().parent
SEMEVAL = BENCHMARKS.parent.parent / "shared" / "data" / "relation" / "semeval2010_task8" / "train.json"
TRAIN_SENTENCES, EVAL_SENTENCES = 7000, 1000  # the fixed split of the 8,000 training sentences


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_model = os.environ.get("SPANROBERTA_MINILM", str(BENCHMARKS / ".cache" / "all-MiniLM-L6-v2"))
    parser.add_argument("--model", default=default_model, help="The checkpoint to fine-tune (default: MiniLM's cache).")
    parser.add_argument("--entity_markers", nargs="+", default=list(ENCODINGS), choices=ENCODINGS)
    parser.add_argument("--train_samples", type=int, default=TRAIN_SENTENCES, help="The first N of the 7,000.")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=42)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if not SEMEVAL.is_file():
        raise SystemExit(f"{SEMEVAL} is absent: this benchmark reads the shared SemEval-2010 Task 8 data.")
    if not Path(args.model).is_dir():
        raise SystemExit(f"{args.model}: no such checkpoint folder (fetch MiniLM with benchmarks/fetch_checkpoint.py, "
                         "set SPANROBERTA_MINILM, or pass --model).")  # fmt: skip
    sentences = json.loads(SEMEVAL.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as folder:
        train, dev = Path(folder) / "train.json", Path(folder) / "dev.json"
        train.write_text(json.dumps(sentences[:TRAIN_SENTENCES][: args.train_samples]), encoding="utf-8")
        dev.write_text(json.dumps(sentences[-EVAL_SENTENCES:]), encoding="utf-8")
        for encoding in args.entity_markers:
            output_dir = Path(folder) / encoding
            hyperparameters = [
                "--num_train_epochs", str(args.epochs), "--per_device_train_batch_size", str(args.batch_size),
                "--per_device_eval_batch_size", "64", "--learning_rate", str(args.learning_rate),
                "--max_seq_length", str(args.max_seq_length), "--seed", str(args.seed), "--warmup_steps", "0.1",
                "--save_strategy", "no", "--report_to", "none", "--use_cpu", "true",
            ]  # fmt: skip
            flags = ["--model_name_or_path", args.model, "--train_file", str(train), "--validation_file", str(dev),
                     "--do_train", "--do_eval", "--entity_markers", encoding, "--output_dir", str(output_dir),
                     *hyperparameters]  # fmt: skip
            started, start = start_run(), time.perf_counter()
            run_relation.main(flags)
            seconds = time.perf_counter() - start
            results = json.loads((output_dir / "all_results.json").read_text())
            settings = {
                "model": args.model, "entity_markers": encoding, "data": "SemEval-2010 Task 8 train.json",
                "split": f"first {min(args.train_samples, TRAIN_SENTENCES)} sentences train, last {EVAL_SENTENCES} "
                         "evaluate", "epochs": args.epochs, "batch_size": args.batch_size,
                "learning_rate": args.learning_rate, "warmup": 0.1, "max_seq_length": args.max_seq_length,
                "seed": args.seed, "device": "cpu", "run_relation_flags": hyperparameters,
            }  # fmt: skip
            path = write_record("relation-semeval", settings, {**results, "wall_seconds": seconds},
                                started=started, name=encoding)
            print(f"{encoding}: eval_f1 {results['eval_f1']:.4f} in {seconds:.0f} s -> {path}")


if __name__ == "__main__":
    main()
