"""What both sides of the fine-tuning parity benchmark (parity/finetuning.py, benchmarks/PARITY.md) share:
the tasks and their sizes, the training arguments both sides get, the data (written once as files that both sides
read), each task's floor, the official metric formulas, and what one run measured.

The metric formulas (accuracy, binary F1; SQuAD v1.1's evaluate-v1.1.py is benchmarks/common.py's) are written out
here, independently of spanroberta.tasks, so that an error there cannot hide in both sides at once.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import DATA, glue_files, sample, squad_article_split, squad_v1_scores, write_jsonl
from spanroberta.tasks.registry import FINETUNING_TASKS
from spanroberta.tasks.glue.data import GLUE_TASKS
from spanroberta.finetuning.task import Report
from spanroberta.records import RunStart

SIDES = ("spanroberta", "transformers")
TASKS = ("sst2", "mrpc", "rte", "squad", "race")


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
# same CPU, within a few hours for both sides and 3 seeds (which tasks leave their floors there: the generated
# findings of benchmarks/PARITY.md); gpu runs the whole splits. Per task, each size's (train samples, eval samples,
# max_seq_length, batch size, learning rate, epochs):
_SIZES = ("cpu-small", "cpu", "gpu")
_TASK_SIZES = {
    "sst2": ((1024, None, 64, 32, 1e-4, 1), (2048, None, 64, 32, 1e-4, 1), (20000, None, 128, 32, 5e-5, 2)),
    "mrpc": ((384, None, 128, 16, 1e-4, 1), (1000, None, 128, 16, 1e-4, 2), (None, None, 128, 32, 5e-5, 5)),
    "rte": ((256, None, 128, 16, 5e-5, 1), (800, None, 128, 16, 1e-4, 2), (None, None, 256, 16, 3e-5, 5)),
    "squad": ((240, 120, 256, 16, 1e-4, 1), (1200, 400, 256, 16, 1.5e-4, 2), (None, None, 384, 32, 1e-4, 3)),
    "race": ((48, 80, 192, 8, 5e-5, 1), (160, 200, 192, 8, 1e-4, 1), (None, None, 512, 16, 3e-5, 2)),
}
PRESETS: dict[str, dict[str, Any]] = {
    size: {"seeds": (0, 1, 2), "tasks": {task: TaskSize(*sizes[index]) for task, sizes in _TASK_SIZES.items()}}
    for index, size in enumerate(_SIZES)
}
# RACE at the gpu size: the question with the option keeps up to 128 tokens of its 512.
PRESETS["gpu"]["tasks"]["race"] = dataclasses.replace(PRESETS["gpu"]["tasks"]["race"], max_qa_length=128)


def task_report(task: str) -> Report:
    """What a parity task's evaluation reports (its headline score, and the factor that puts it in percent): the
    `Report` its fine-tuning task declares; GLUE's tasks are variants of the one GLUE task."""
    return FINETUNING_TASKS["glue" if task in GLUE_TASKS else task].reports[task]


def hyperparameters(size: TaskSize, seed: int) -> dict[str, Any]:
    """The TrainingArguments both sides get (no checkpoints, no reporting, losses logged 20 times)."""
    return {**COMMON_HYPERPARAMETERS, "seed": seed, "learning_rate": size.learning_rate,
            "per_device_train_batch_size": size.batch_size, "num_train_epochs": size.epochs,
            "save_strategy": "no", "report_to": "none", "logging_steps": 0.05}  # fmt: skip


# --- the data, written once per size as files both sides read ---


def race_files(folder: Path, size: TaskSize) -> dict[str, Path]:
    """RACE middle school: train and dev questions sampled, as JSON lines with the Hub's columns."""
    with gzip.open(DATA / "race" / "train.middle.jsonl.gz", "rt", encoding="utf-8") as file:
        train = [json.loads(line) for line in file]
    dev = [json.loads(line) for line in (DATA / "race" / "dev.middle.jsonl").read_text(encoding="utf-8").splitlines()]
    return {"train": write_jsonl(folder / "race-train.jsonl", sample(train, size.train_samples)),
            "validation": write_jsonl(folder / "race-validation.jsonl", sample(dev, size.eval_samples))}


def task_files(folder: Path, task: str, size: TaskSize) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    if task == "squad":  # the baseline flattens it as the Hub's rajpurkar/squad is
        return squad_article_split(folder, size.train_samples, size.eval_samples)
    if task == "race":
        return race_files(folder, size)
    return glue_files(folder, task, size.train_samples, size.eval_samples)


def read_rows(path: Path) -> list[dict]:
    """A JSON-lines file, or the official nested SQuAD JSON flattened to the Hub's rajpurkar/squad rows."""
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [{"id": qa["id"], "title": article["title"], "context": paragraph["context"], "question": qa["question"],
             "answers": {"text": [a["text"] for a in qa["answers"]],
                         "answer_start": [a["answer_start"] for a in qa["answers"]]}}
            for article in json.loads(path.read_text(encoding="utf-8"))["data"]
            for paragraph in article["paragraphs"] for qa in paragraph["qas"]]  # fmt: skip


def floor(task: str, files: dict[str, Path]) -> float:
    """What a model that learned nothing scores on the evaluation set, in the units of the task's primary metric:
    always answering the most frequent class (accuracy; RACE's most frequent answer letter, at least chance),
    always answering "paraphrase" for MRPC's F1 (the best constant answer), and an empty answer for SQuAD's F1 in
    percent (evaluate-v1.1.py scores it 0 against every gold answer)."""
    rows = read_rows(files["validation"])
    if task == "squad":
        gold = {row["id"]: row["answers"]["text"] for row in rows}
        return squad_v1_scores(gold, {row["id"]: "" for row in rows})["f1"]
    labels = [row["answer"] if task == "race" else row["label"] for row in rows]
    if task == "mrpc":
        return binary_f1([1] * len(labels), labels)
    return collections.Counter(labels).most_common(1)[0][1] / len(labels)


# --- the official metric formulas, written out for the baseline ---


def accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    return float(np.mean(np.asarray(predictions) == np.asarray(labels)))


def binary_f1(predictions: Sequence[int], labels: Sequence[int]) -> float:
    """F1 of the positive class (1), as GLUE scores MRPC."""
    predictions, labels = np.asarray(predictions), np.asarray(labels)
    true_positives = int(np.sum((predictions == 1) & (labels == 1)))
    wrong = int(np.sum(predictions != labels))
    return 2 * true_positives / (2 * true_positives + wrong) if true_positives or wrong else 0.0


# --- what one run measured ---


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
    started: RunStart | None = None  # the run's provenance and opening load average
