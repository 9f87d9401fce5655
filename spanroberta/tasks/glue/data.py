"""The GLUE benchmark as data: each task's columns, labels, metrics and file quirks; readers for the Hub
(nyu-mll/glue), the original GLUE folder layout and csv/JSON-lines files; tokenization; the leaderboard's
submission files.

Whatever the source, a split becomes a `datasets.Dataset` with the Hub's columns: the task's text
columns, `label` (the Hub's class id, or the STS-B score) and `idx`. Test splits have no `label`.
"""

from __future__ import annotations

import csv
import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value, load_dataset
from transformers import EvalPrediction, PreTrainedTokenizerBase

from spanroberta.errors import require_file, utf8_errors
from spanroberta.tasks.classification import ArrayLike, logits_to_predictions
from spanroberta.tasks.glue.scoring import METRICS
from spanroberta.tasks.json_lines import read_json_lines

logger = logging.getLogger(__name__)

GLUE_HUB_ID = "nyu-mll/glue"
STSB_SCORE_RANGE = (0.0, 5.0)


@dataclass(frozen=True)
class GlueSplit:
    """One split of a task: its Hub name and its file in the GLUE folder."""

    name: str
    tsv_file: str
    # MNLI's mismatched dev metrics get this suffix, as in transformers' run_glue.py (eval_accuracy_mm).
    metric_suffix: str = ""
    # Test splits: the file name the GLUE leaderboard expects in a submission.
    submission_file: str = ""


@dataclass(frozen=True)
class GlueTask:
    """Everything task-specific. `labels` are the label strings of GLUE's files, in the Hub's class-id order;
    a regression task (STS-B) has none."""

    name: str
    folder: str
    text_columns: tuple[str, ...]
    tsv_text_columns: tuple[str, ...]
    tsv_label_column: str
    labels: tuple[str, ...]
    label_names: tuple[str, ...]
    metrics: tuple[str, ...]
    eval_splits: tuple[GlueSplit, ...]
    test_splits: tuple[GlueSplit, ...]
    tsv_index_column: str = "index"
    # CoLA's train.tsv and dev.tsv have no header row (its test.tsv has one); these name their columns.
    tsv_headerless_columns: tuple[str, ...] = ()
    # GLUE's QQP train.tsv has a few rows with missing fields; transformers' QqpProcessor skipped them too.
    tsv_skip_short_rows: bool = False

    @property
    def is_regression(self) -> bool:
        return not self.labels

    @property
    def num_labels(self) -> int:
        return len(self.labels) or 1

    @property
    def train_split(self) -> GlueSplit:
        return GlueSplit("train", "train.tsv")


def _dev_and_test(folder: str) -> dict[str, tuple[GlueSplit, ...]]:
    return {
        "eval_splits": (GlueSplit("validation", "dev.tsv"),),
        "test_splits": (GlueSplit("test", "test.tsv", submission_file=f"{folder}.tsv"),),
    }


GLUE_TASKS: dict[str, GlueTask] = {
    task.name: task
    for task in (
        GlueTask(
            name="cola", folder="CoLA", text_columns=("sentence",), tsv_text_columns=("sentence",),
            tsv_label_column="label", labels=("0", "1"), label_names=("unacceptable", "acceptable"),
            metrics=("matthews_correlation",), tsv_headerless_columns=("source", "label", "original_label", "sentence"),
            **_dev_and_test("CoLA"),
        ),
        GlueTask(
            name="sst2", folder="SST-2", text_columns=("sentence",), tsv_text_columns=("sentence",),
            tsv_label_column="label", labels=("0", "1"), label_names=("negative", "positive"),
            metrics=("accuracy",), **_dev_and_test("SST-2"),
        ),
        GlueTask(
            name="mrpc", folder="MRPC", text_columns=("sentence1", "sentence2"),
            tsv_text_columns=("#1 String", "#2 String"), tsv_label_column="Quality", labels=("0", "1"),
            label_names=("not_equivalent", "equivalent"), metrics=("f1", "accuracy"), **_dev_and_test("MRPC"),
        ),
        GlueTask(
            name="stsb", folder="STS-B", text_columns=("sentence1", "sentence2"),
            tsv_text_columns=("sentence1", "sentence2"), tsv_label_column="score", labels=(), label_names=(),
            metrics=("pearson", "spearmanr"), **_dev_and_test("STS-B"),
        ),
        GlueTask(
            name="qqp", folder="QQP", text_columns=("question1", "question2"),
            tsv_text_columns=("question1", "question2"), tsv_label_column="is_duplicate", labels=("0", "1"),
            label_names=("not_duplicate", "duplicate"), metrics=("f1", "accuracy"), tsv_index_column="id",
            tsv_skip_short_rows=True, **_dev_and_test("QQP"),
        ),
        GlueTask(
            name="mnli", folder="MNLI", text_columns=("premise", "hypothesis"),
            tsv_text_columns=("sentence1", "sentence2"), tsv_label_column="gold_label",
            labels=("entailment", "neutral", "contradiction"), label_names=("entailment", "neutral", "contradiction"),
            metrics=("accuracy",),
            eval_splits=(
                GlueSplit("validation_matched", "dev_matched.tsv"),
                GlueSplit("validation_mismatched", "dev_mismatched.tsv", metric_suffix="_mm"),
            ),
            test_splits=(
                GlueSplit("test_matched", "test_matched.tsv", submission_file="MNLI-m.tsv"),
                GlueSplit("test_mismatched", "test_mismatched.tsv", submission_file="MNLI-mm.tsv"),
            ),
        ),
        GlueTask(
            name="qnli", folder="QNLI", text_columns=("question", "sentence"),
            tsv_text_columns=("question", "sentence"), tsv_label_column="label",
            labels=("entailment", "not_entailment"), label_names=("entailment", "not_entailment"),
            metrics=("accuracy",), **_dev_and_test("QNLI"),
        ),
        GlueTask(
            name="rte", folder="RTE", text_columns=("sentence1", "sentence2"),
            tsv_text_columns=("sentence1", "sentence2"), tsv_label_column="label",
            labels=("entailment", "not_entailment"), label_names=("entailment", "not_entailment"),
            metrics=("accuracy",), **_dev_and_test("RTE"),
        ),
        GlueTask(
            name="wnli", folder="WNLI", text_columns=("sentence1", "sentence2"),
            tsv_text_columns=("sentence1", "sentence2"), tsv_label_column="label", labels=("0", "1"),
            label_names=("not_entailment", "entailment"), metrics=("accuracy",), **_dev_and_test("WNLI"),
        ),
    )
}


def get_glue_task(task_name: str) -> GlueTask:
    """The task for a Hub config name ("sst2") or a GLUE folder name ("SST-2"), case-insensitively."""
    key = task_name.lower().replace("-", "")
    if key not in GLUE_TASKS:
        raise ValueError(f"Unknown GLUE task {task_name!r}; choose one of {', '.join(GLUE_TASKS)}.")
    return GLUE_TASKS[key]


# ---------------------------------------------------------------------------------------------------------
# Loading


def requested_splits(
    task: GlueTask, do_train: bool, do_eval: bool, do_predict: bool, from_files: bool = False
) -> list[GlueSplit]:
    """The splits the asked phases need: train, the dev set(s) and the test set(s). From files (one each for
    --validation_file and --test_file), MNLI gets its matched sets only."""
    eval_splits = task.eval_splits[:1] if from_files else task.eval_splits
    test_splits = task.test_splits[:1] if from_files else task.test_splits
    return [task.train_split] * do_train + list(eval_splits) * do_eval + list(test_splits) * do_predict


def load_glue(
    task: GlueTask,
    splits: Sequence[GlueSplit],
    data_dir: str | Path | None = None,
    data_files: Mapping[str, str | Path] | None = None,
    cache_dir: str | None = None,
) -> DatasetDict:
    """Reads and checks `splits` from the GLUE folder `data_dir`, from `data_files` (split name -> csv, JSON
    lines or GLUE-style tsv), or from the Hub when neither is given.

    Every label is checked here, so bad input fails before any model is loaded.
    """
    if data_dir is not None and data_files:
        raise ValueError("Give either --data_dir or --train_file/--validation_file/--test_file, not both.")
    if data_dir is not None:
        folder = _task_folder(Path(data_dir), task)
        return DatasetDict({s.name: _to_dataset(task, s, read_glue_tsv(folder / s.tsv_file, task, s)) for s in splits})
    if data_files:
        missing = [s.name for s in splits if s.name not in data_files]
        if missing:
            raise ValueError(f"No file given for the {', '.join(missing)} split(s) of {task.name}: pass "
                             "--train_file/--validation_file/--test_file for each phase asked (--do_train, ...).")
        return DatasetDict({s.name: _to_dataset(task, s, read_glue_file(Path(data_files[s.name]), task, s))
                            for s in splits})
    return _load_glue_hub(task, splits, cache_dir)


def read_glue_tsv(path: Path, task: GlueTask, split: GlueSplit) -> list[dict[str, Any]]:
    """One split in GLUE's own tsv format, with the file's quirks (see `GlueTask`).

    Fields are separated by tabs and never quoted: GLUE's sentences contain unbalanced quote characters
    (MRPC, MNLI), so reading them with csv quoting would merge lines.
    """
    require_file(path, f"{path}: no such file (the {split.name} split of {task.folder}).")
    labeled = _is_labeled(task, split)
    rows: list[dict[str, Any]] = []
    skipped = 0
    # utf-8-sig: MRPC's train.tsv and dev.tsv start with a byte-order mark.
    with utf8_errors(path), open(path, encoding="utf-8-sig", newline="\n") as file:
        lines = (line.rstrip("\n").removesuffix("\r") for line in file)
        if labeled and task.tsv_headerless_columns:
            header, first_row_line = list(task.tsv_headerless_columns), 1
        else:
            header, first_row_line = next(lines, "").split("\t"), 2
        wanted = list(task.tsv_text_columns) + [task.tsv_label_column] * labeled
        missing = [name for name in wanted if name not in header]
        if missing:
            raise ValueError(f"{path}, line 1: no column {', '.join(map(repr, missing))} in the header "
                             f"({', '.join(header)}); is this {task.folder}'s {split.tsv_file}?")
        positions = [header.index(name) for name in wanted]
        index_position = header.index(task.tsv_index_column) if task.tsv_index_column in header else None
        last = max(positions) if index_position is None else max(*positions, index_position)
        for line_number, line in enumerate(lines, start=first_row_line):
            if not line:
                continue
            fields = line.split("\t")
            if len(fields) <= last:
                if task.tsv_skip_short_rows:
                    skipped += 1
                    continue
                raise ValueError(f"{path}, line {line_number}: {len(fields)} tab-separated fields, but the "
                                 f"header has {len(header)} and column {header[last]!r} is missing.")
            if len(fields) > len(header) and first_row_line == 2:
                raise ValueError(f"{path}, line {line_number}: {len(fields)} tab-separated fields, but the header has "
                                 f"{len(header)}: a tab inside a field, or a column too many. Fix the line.")
            row = {column: fields[p] for column, p in zip(task.text_columns, positions)}
            where = f"{path}, line {line_number}"
            row["idx"] = _parse_index(fields[index_position], where) if index_position is not None else len(rows)
            if labeled:
                row["label"] = parse_label(task, fields[positions[-1]], where)
            rows.append(row)
    if skipped:
        logger.warning("%s: skipped %d rows with missing fields (a known quirk of GLUE's %s).",
                       path, skipped, task.folder)
    return _non_empty(rows, path)


def read_glue_file(path: Path, task: GlueTask, split: GlueSplit) -> list[dict[str, Any]]:
    """A split from a csv file or a JSON-lines file with the Hub's columns (`task.text_columns`, `label`,
    optionally `idx`); a .tsv file is read as GLUE's own format. Labels may be class ids, GLUE's label
    strings or the Hub's label names."""
    suffix = path.suffix.lower()
    if suffix == ".tsv":
        return read_glue_tsv(path, task, split)
    require_file(path, f"{path}: no such file (the {split.name} split of {task.name}).")
    if suffix not in (".csv", ".json", ".jsonl"):
        raise ValueError(f"{path}: unsupported file type {suffix!r}; use .csv, .json/.jsonl (JSON lines) or .tsv.")
    records = _csv_records(path) if suffix == ".csv" else read_json_lines(path)
    labeled = _is_labeled(task, split)
    wanted = list(task.text_columns) + ["label"] * labeled
    rows = []
    for line_number, record in records:
        where = f"{path}, line {line_number}"
        missing = [name for name in wanted if record.get(name) is None]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(map(repr, missing))}; {task.name} needs the columns "
                             f"{', '.join(wanted)}.")
        row = {column: str(record[column]) for column in task.text_columns}
        row["idx"] = _parse_index(record["idx"], where) if record.get("idx") is not None else len(rows)
        if labeled:
            row["label"] = parse_label(task, record["label"], where)
        rows.append(row)
    return _non_empty(rows, path)


def parse_label(task: GlueTask, value: Any, where: str) -> int | float:
    """The class id of a label (GLUE's string, the Hub's name or the id itself), or the STS-B score.

    Raises a ValueError naming `where` for anything outside the task's label set.
    """
    if task.is_regression:
        try:
            score = float(value)
        except (TypeError, ValueError):
            score = math.nan
        low, high = STSB_SCORE_RANGE
        if not low <= score <= high:
            raise ValueError(f"{where}: label {value!r} is not a similarity score from {low:g} to {high:g}.")
        return score
    text = str(value).strip()
    if text in task.labels:
        return task.labels.index(text)
    if text in task.label_names:
        return task.label_names.index(text)
    if text.isdigit() and int(text) < task.num_labels:
        return int(text)
    choices = ", ".join(sorted(set(task.labels) | set(task.label_names)))
    raise ValueError(f"{where}: label {value!r} is not one of {task.name}'s labels ({choices}, "
                     f"or a class id below {task.num_labels}).")


def _is_labeled(task: GlueTask, split: GlueSplit) -> bool:
    return split not in task.test_splits


def _non_empty(rows: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    if not rows:
        raise ValueError(f"{path}: the file holds no examples.")
    return rows


def _task_folder(data_dir: Path, task: GlueTask) -> Path:
    """`data_dir` is GLUE's root folder (glue_data/, with CoLA/, SST-2/, ...) or the task's own folder."""
    if (data_dir / task.folder).is_dir():
        return data_dir / task.folder
    if data_dir.is_dir():
        return data_dir
    raise FileNotFoundError(f"--data_dir {data_dir}: no such folder.")


def _parse_index(value: Any, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: index {value!r} is not an integer.") from None


def _csv_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with utf8_errors(path), open(path, encoding="utf-8-sig", newline="") as file:
        reader = csv.DictReader(file)
        start = 2  # line_num after a row is its last physical line; the header is line 1
        for record in reader:
            yield start, record
            start = reader.line_num + 1


def _features(task: GlueTask, labeled: bool) -> Features:
    features = {column: Value("string") for column in task.text_columns}
    if labeled:
        features["label"] = Value("float32") if task.is_regression else ClassLabel(names=list(task.label_names))
    features["idx"] = Value("int64")
    return Features(features)


def _to_dataset(task: GlueTask, split: GlueSplit, rows: list[dict[str, Any]]) -> Dataset:
    features = _features(task, _is_labeled(task, split))
    return Dataset.from_dict({name: [row[name] for row in rows] for name in features}, features=features)


def _load_glue_hub(task: GlueTask, splits: Sequence[GlueSplit], cache_dir: str | None) -> DatasetDict:
    hub = load_dataset(GLUE_HUB_ID, task.name, cache_dir=cache_dir)
    loaded = DatasetDict()
    for split in splits:
        dataset = hub[split.name]
        if split in task.test_splits:
            # The Hub's test labels are all -1: GLUE keeps them secret.
            loaded[split.name] = dataset.remove_columns("label")
            continue
        labels = dataset["label"]
        bad = [i for i, label in enumerate(labels) if not task.is_regression and not 0 <= label < task.num_labels]
        if bad:
            raise ValueError(f"{GLUE_HUB_ID} ({task.name}) {split.name}, example idx {dataset[bad[0]]['idx']}: "
                             f"label {labels[bad[0]]} is not a class id below {task.num_labels}.")
        loaded[split.name] = dataset
    return loaded


# ---------------------------------------------------------------------------------------------------------
# Model inputs and outputs


def glue_config_overrides(task: GlueTask) -> dict[str, Any]:
    """The config fields a task's head needs: the number of labels, their names and the problem type."""
    if task.is_regression:
        return {"num_labels": 1, "problem_type": "regression", "finetuning_task": task.name}
    return {
        "num_labels": task.num_labels,
        "id2label": dict(enumerate(task.label_names)),
        "label2id": {name: i for i, name in enumerate(task.label_names)},
        "problem_type": "single_label_classification",
        "finetuning_task": task.name,
    }


def tokenize_glue(
    datasets: DatasetDict, tokenizer: PreTrainedTokenizerBase, task: GlueTask, max_seq_length: int
) -> DatasetDict:
    """Encodes each example (or pair) the tokenizer's way, RoBERTa's being `<s> A </s></s> B </s>`,
    truncated to `max_seq_length` tokens; padding is left to the collator."""

    def encode(batch: dict[str, list]) -> dict[str, list]:
        texts = [batch[column] for column in task.text_columns]
        return tokenizer(*texts, truncation=True, max_length=max_seq_length)

    return datasets.map(encode, batched=True, remove_columns=list(task.text_columns), desc="Tokenizing")


def write_glue_submission(
    path: str | Path, task: GlueTask, indices: Sequence[int], predictions: Sequence[float]
) -> None:
    """Writes test predictions as the GLUE leaderboard wants them: a tsv with `index` and `prediction`,
    labels as GLUE's own strings (e.g. "entailment" for MNLI, 0/1 for CoLA) and STS-B scores as numbers."""
    if len(indices) != len(predictions):
        raise ValueError(f"{len(indices)} indices for {len(predictions)} predictions.")
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        file.write("index\tprediction\n")
        for index, prediction in zip(indices, predictions):
            value = f"{float(prediction):.3f}" if task.is_regression else task.labels[int(prediction)]
            file.write(f"{int(index)}\t{value}\n")


def write_glue_predictions(path: str | Path, indices: ArrayLike, labels: ArrayLike, predictions: ArrayLike) -> None:
    """One JSON line per evaluated example: its index, its gold label and the prediction (class ids, or scores for
    STS-B), enough to score the dev set again on any resample of its examples."""
    if not len(indices) == len(labels) == len(predictions):
        raise ValueError(f"{len(predictions)} predictions and {len(labels)} labels for {len(indices)} examples.")
    rows = zip(np.asarray(indices).tolist(), np.asarray(labels).tolist(), np.asarray(predictions).tolist())
    with open(path, "w", encoding="utf-8") as file:
        file.writelines(json.dumps({"idx": index, "label": label, "prediction": prediction}) + "\n"
                        for index, label, prediction in rows)  # fmt: skip


def glue_metrics(task_name: str, predictions: ArrayLike, references: ArrayLike) -> dict[str, float]:
    """The task's official metrics, keyed by name: e.g. {"f1": ..., "accuracy": ...} for MRPC.

    Predictions are class ids (or scores for STS-B), not logits.
    """
    return {name: METRICS[name](predictions, references) for name in get_glue_task(task_name).metrics}


def glue_compute_metrics(task_name: str) -> Callable[[EvalPrediction], dict[str, float]]:
    """A `compute_metrics` for the Trainer: turns the logits into class ids (or scores) and scores them."""
    task = get_glue_task(task_name)

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        predictions = logits_to_predictions(eval_prediction.predictions, task.is_regression)
        return glue_metrics(task.name, predictions, eval_prediction.label_ids)

    return compute_metrics
