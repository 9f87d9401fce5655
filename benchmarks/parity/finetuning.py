#!/usr/bin/env python
"""Fine-tuning parity on a real checkpoint: the project's run_squad.py, run_glue.py and run_race.py against a
plain transformers baseline (parity/baseline.py: the Auto task heads, the Trainer, and the pre- and post-processing
of transformers' example scripts run_qa.py, run_glue.py and run_swag.py, written out there), from the same
checkpoint, on the same data (parity/common.py, from benchmarks/common.py's samples), with the same seeds and hyperparameters. See benchmarks/PARITY.md.

    python -m benchmarks.parity.fetch_checkpoint   # once: all-MiniLM-L6-v2 into benchmarks/.cache
    python -m benchmarks.parity.finetuning --size cpu-small
    python -m benchmarks.parity.finetuning --size gpu --tasks squad race --seeds 1 2

Each run (task x side x seed) writes one record, `finetuning-parity` with `settings.kind == "run"`, under
benchmarks/results/finetuning-parity/; at the end a `settings.kind == "summary"` record holds the mean and
spread over seeds of each side and their difference, computed from the newest run records of the size
(parity/summary.py; benchmarks/tables/parity.py draws the tables of benchmarks/PARITY.md and the README).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from datasets import Dataset  # noqa: E402
from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

# The run_*.py scripts live at the top of the project, which `python -m` puts on the import path.
import run_glue  # noqa: E402
import run_race  # noqa: E402
import run_squad  # noqa: E402
from benchmarks.common import CHECKPOINT, CHECKPOINT_NAME, DATA, squad_article_split  # noqa: E402
from benchmarks.parity.baseline import (baseline_classification, baseline_squad, qa_train_features,  # noqa: E402
                                        race_features)  # fmt: skip
from benchmarks.parity.common import (PRESETS, SIDES, TASKS, Outcome, TaskSize, floor, hyperparameters,  # noqa: E402
                                      read_rows, task_files, task_report)  # fmt: skip
from benchmarks.parity.summary import recordable, summarize, verdict  # noqa: E402
from benchmarks.tasks.rows import FLOORS_BENCHMARK  # noqa: E402
from spanroberta.records import read_records, start_run, write_record  # noqa: E402

BENCHMARK = "finetuning-parity"


# --- the project's side: its scripts' main(), as the tests call them ---


def cli_flags(hp: dict, out: Path) -> list[str]:
    flags = ["--model_name_or_path", str(CHECKPOINT), "--output_dir", str(out), "--overwrite_output_dir",
             "--do_train", "--do_eval"]  # fmt: skip
    for name, value in hp.items():
        flags += [f"--{name}", str(value)]
    return flags


def project_run(task: str, files: dict[str, Path], size: TaskSize, hp: dict, out: Path) -> Outcome:
    data = ["--train_file", str(files["train"]), "--validation_file", str(files["validation"])]
    if task == "squad":
        run_squad.main(cli_flags(hp, out) + data + ["--max_seq_length", str(size.max_seq_length),
                                                    "--doc_stride", str(size.doc_stride)])  # fmt: skip
    elif task == "race":
        run_race.main(cli_flags(hp, out) + data + ["--max_seq_length", str(size.max_seq_length),
                                                   "--max_qa_length", str(size.max_qa_length)])  # fmt: skip
    else:
        run_glue.main(cli_flags(hp, out) + data + ["--task_name", task, "--max_seq_length", str(size.max_seq_length)])
    results = json.loads((out / "all_results.json").read_text())
    state = json.loads((out / "trainer_state.json").read_text())
    keys = ("exact_match", "f1") if task == "squad" else ("accuracy", "f1")
    metrics = {key: results[f"eval_{key}"] for key in keys if f"eval_{key}" in results}
    return Outcome(metrics, results["train_loss"], state["global_step"], results["train_runtime"])


def run_side(side: str, task: str, files: dict[str, Path], size: TaskSize, seed: int, work: Path) -> Outcome:
    """One fine-tuning run, timed from reading the data to the scores (wall and this process's CPU time)."""
    out = work / f"{task}-{side}-{seed}"
    hp = hyperparameters(size, seed)
    started = start_run(PROCESS_START)
    wall, cpu = time.perf_counter(), time.process_time()
    if side == "spanroberta":
        outcome = project_run(task, files, size, hp, out)
    elif task == "squad":
        outcome = baseline_squad(files, size, hp, out)
    else:
        outcome = baseline_classification(task, files, size, hp, out)
    outcome.wall_seconds, outcome.cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    # Wall time is an upper bound when other jobs share the cores: the record's load average says so.
    outcome.started = started
    return outcome


# --- the two sides' inputs side by side, without a model ---


def compare_squad_features(size: TaskSize) -> dict[str, Any]:
    """Both sides' training windows of every question of the 36 training articles, question by question:
    how many questions get the same number of windows, the same input ids, and the same answer labels."""
    from spanroberta.tasks.squad.features import prepare_train_features

    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    with tempfile.TemporaryDirectory() as folder:
        rows = read_rows(squad_article_split(Path(folder), None, None)["train"])
    counts = collections.Counter()
    for row in rows:
        batch = {key: [value] for key, value in row.items()}
        ours = prepare_train_features(batch, tokenizer, size.max_seq_length, size.doc_stride, max_query_length=64)
        theirs = qa_train_features(batch, tokenizer, size)
        counts["windows_spanroberta"] += len(ours["input_ids"])
        counts["windows_transformers"] += len(theirs["input_ids"])
        same_inputs = ours["input_ids"] == theirs["input_ids"]
        counts["same_inputs"] += same_inputs
        labels = [list(zip(f["start_positions"], f["end_positions"])) for f in (ours, theirs)]
        counts["same_inputs_and_labels"] += same_inputs and labels[0] == labels[1]
    return {"questions": len(rows), **counts}


def compare_race_inputs(size: TaskSize) -> dict[str, Any]:
    """Both sides' inputs for every RACE middle dev question: how many are identical, the mean passage tokens
    each side keeps per option, and how many questions are cloze questions (a blank "_" that the spanroberta
    side fills with the option, RoBERTa's rule, where run_swag.py's processing appends the option)."""
    from spanroberta.tasks.race.data import encode_race, read_race_jsonl

    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    path = DATA / "race" / "dev.middle.jsonl"
    ours = encode_race(Dataset.from_list(read_race_jsonl(path)), tokenizer, size.max_seq_length, size.max_qa_length)
    theirs = race_features(tokenizer, read_rows(path), size)
    # [CLS] question+option [SEP] passage [SEP] on the spanroberta side, [CLS] passage [SEP] ... on the other.
    passage_ours = [sum(types) - 1 for options in ours["token_type_ids"] for types in options]
    passage_theirs = [len(types) - sum(types) - 2 for options in theirs["token_type_ids"] for types in options]
    identical = sum(a == b for a, b in zip(ours["input_ids"], theirs["input_ids"]))
    return {"questions": len(ours), "identical_inputs": identical,
            "mean_passage_tokens_spanroberta": statistics.fmean(passage_ours),
            "mean_passage_tokens_transformers": statistics.fmean(passage_theirs),
            "cloze_questions": sum("_" in row["question"] for row in read_rows(path))}  # fmt: skip


def compare_inputs(size_name: str) -> None:
    """One record per task (settings.kind "inputs"): where the two sides' model inputs differ, and how much."""
    for task, compare in (("squad", compare_squad_features), ("race", compare_race_inputs)):
        size = PRESETS[size_name]["tasks"][task]
        started = start_run(PROCESS_START)
        results = compare(size)
        settings = {"kind": "inputs", "size": size_name, "task": task, "checkpoint": CHECKPOINT_NAME,
                    "task_size": asdict(size)}  # fmt: skip
        path = write_record(BENCHMARK, settings, results, started=started, name=f"{size_name}-{task}-inputs")
        print(f"{task}: {results} -> {path}", flush=True)


# --- records, summary and table ---


def run_record(size_name: str, task: str, side: str, seed: int, size: TaskSize, files: dict[str, Path],
               outcome: Outcome) -> Path:  # fmt: skip
    """One record per run. settings: kind "run", size, task, side, seed, checkpoint, the data (files and their
    example counts), the task size and the TrainingArguments both sides got. results: `metrics` (official keys:
    exact_match and f1 in percent for SQuAD; accuracy, and f1 for MRPC, as fractions), `primary` (the task's
    headline metric, named by `primary_metric`), `floor` (what a model that learned nothing scores: parity_tasks.floor), the mean
    training loss, optimizer steps, the Trainer's training seconds and the run's wall and CPU seconds. The record's
    provenance is the process's, read when it started; its load average, the run's own."""
    settings = {
        "kind": "run", "size": size_name, "task": task, "side": side, "seed": seed, "checkpoint": CHECKPOINT_NAME,
        "data": {split: {"file": path.name, "examples": len(read_rows(path))} for split, path in files.items()},
        "task_size": asdict(size), "hyperparameters": hyperparameters(size, seed),
    }  # fmt: skip
    headline = task_report(task).headline
    results = {
        "metrics": outcome.metrics, "primary_metric": headline, "primary": outcome.metrics[headline],
        "floor": floor(task, files), "train_loss": outcome.train_loss, "train_steps": outcome.train_steps,
        "train_seconds": outcome.train_seconds, "wall_seconds": outcome.wall_seconds,
        "cpu_seconds": outcome.cpu_seconds, **outcome.extra,
    }  # fmt: skip
    return write_record(BENCHMARK, settings, results, started=outcome.started,
                        name=f"{size_name}-{task}-{side}-seed{seed}")  # fmt: skip


# The code a run measured is the code its process started with, read once here: a long benchmark's later runs
# name it too, even if the tree changes meanwhile.
PROCESS_START = start_run()


# --- the command line ---


def plan(size_name: str, tasks: Sequence[str], seeds: Sequence[int]) -> str:
    preset = PRESETS[size_name]["tasks"]
    lines = [f"Fine-tuning parity, size {size_name}: {len(tasks)} task(s) x {len(SIDES)} sides x seeds {list(seeds)}, "
             f"from {CHECKPOINT}"]
    for task in tasks:
        size = preset[task]
        lines.append(f"  {task}: train {size.train_samples or 'all'}, evaluate {size.eval_samples or 'all'}, "
                     f"length {size.max_seq_length}, batch {size.batch_size}, lr {size.learning_rate:g}, "
                     f"epochs {size.epochs:g}" + (f", stride {size.doc_stride}" if task == "squad" else ""))
    return "\n".join(lines)


def warm_up() -> None:
    """One untimed training step of the checkpoint, so that the first timed run does not pay for what a process
    does once (loading kernels, allocating its first buffers)."""
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    model = AutoModelForSequenceClassification.from_pretrained(CHECKPOINT, num_labels=2)
    inputs = tokenizer(["a warm-up sentence"] * 8, return_tensors="pt", padding="max_length", max_length=64)
    model(**inputs, labels=inputs["input_ids"][:, 0] * 0).loss.backward()


def main(args: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(PRESETS), default="cpu-small")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, help="Default: all five, cheapest first.")
    parser.add_argument("--seeds", nargs="+", type=int, help="Default: the size's seeds.")
    parser.add_argument("--summarize", action="store_true",
                        help="Run nothing: write the size's summary record from the run records there are, and print "
                             "the table.")  # fmt: skip
    parser.add_argument("--compare_inputs", action="store_true",
                        help="Train nothing: compare the two sides' model inputs for SQuAD and RACE and record where "
                             "they differ.")  # fmt: skip
    parser.add_argument("--keep_outputs", type=Path,
                        help="Keep every run's output folder (the fine-tuned model and its tokenizer; the spanroberta "
                             "side's also its scores) under this folder, as <size>/<task>-<side>-<seed>; by default "
                             "they are deleted with the run.")  # fmt: skip
    options = parser.parse_args(args)
    if options.summarize:
        return write_summary(options.size)
    if not (CHECKPOINT / "config.json").is_file():
        raise SystemExit(f"No checkpoint at {CHECKPOINT}: run `python -m benchmarks.parity.fetch_checkpoint` (or `make "
                         "checkpoint`) first, or point $SPANROBERTA_MINILM at an unpacked all-MiniLM-L6-v2 folder.")
    if not (DATA / "squad" / "dev-v1.1.json").is_file():
        raise SystemExit(f"The benchmark reads SQuAD, GLUE and RACE from {DATA}, which is absent on this machine.")
    if options.compare_inputs:
        return compare_inputs(options.size)
    tasks = options.tasks or list(TASKS)
    seeds = options.seeds or list(PRESETS[options.size]["seeds"])
    print(plan(options.size, tasks, seeds), flush=True)
    warm_up()
    round_ = 0
    with tempfile.TemporaryDirectory(prefix="parity-") as folder:
        work = options.keep_outputs / options.size if options.keep_outputs else Path(folder)
        for task in tasks:
            size = PRESETS[options.size]["tasks"][task]
            files = task_files(Path(folder) / "data", task, size)
            for seed in seeds:
                # The sides take turns going first, so that neither always runs after the other.
                round_ += 1
                for side in SIDES if round_ % 2 else reversed(SIDES):
                    outcome = run_side(side, task, files, size, seed, work)
                    path = run_record(options.size, task, side, seed, size, files, outcome)
                    print(f"{task} {side} seed {seed}: {outcome.metrics}, loss {outcome.train_loss:.3f}, "
                          f"{outcome.train_steps} steps, {outcome.wall_seconds:.0f} s -> {path}", flush=True)
    write_summary(options.size)


def write_summary(size_name: str) -> None:
    """The summary record of a size (settings.kind "summary"; results: `summarize`'s entry per task), and each task's
    verdict (benchmarks/PARITY.md's table: `python -m benchmarks.tables.generate`)."""
    started = start_run(PROCESS_START)
    records, floor_records = read_records(BENCHMARK), read_records(FLOORS_BENCHMARK)
    summary = recordable(summarize(records, floor_records).get(size_name, {}))
    path = write_record(BENCHMARK, {"kind": "summary", "size": size_name}, summary, started=started,
                        name=f"{size_name}-summary")  # fmt: skip
    for task, entry in summary.items():
        print(f"{size_name} {task}: {verdict(entry)}")
    print(f"Summary: {path}; the table: python -m benchmarks.tables.generate")


if __name__ == "__main__":
    main()
