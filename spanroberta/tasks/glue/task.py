"""run_glue.py's task: one GLUE task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI) from the Hub, GLUE's
own files or csv/JSON-lines files, scored with GLUE's official metrics (fractions: eval_accuracy, eval_f1, ...; MNLI's
mismatched dev set with the _mm suffix) and each dev example's prediction in eval_predictions.jsonl, with the
leaderboard's TASK.tsv for --do_predict."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from datasets import DatasetDict
from transformers import AutoModelForSequenceClassification, Trainer

from spanroberta.finetuning.arguments import SampleLimitArguments
from spanroberta.finetuning.task import FineTuningRun, FineTuningTask, Report, output_file, save_outcomes
from spanroberta.runs.cli import apply_defaults
from spanroberta.runs.ranges import check_range
from spanroberta.tasks.classification import logits_to_predictions
from spanroberta.tasks.glue.data import (
    GLUE_TASKS,
    GlueTask,
    get_glue_task,
    glue_compute_metrics,
    glue_config_overrides,
    load_glue,
    requested_splits,
    tokenize_glue,
    write_glue_predictions,
    write_glue_submission,
)


# RoBERTa's fine-tuning recipe (RoBERTa appendix, Table 10: lr in {1e-5, 2e-5, 3e-5}, batch in {16, 32},
# weight decay 0.1, 10 epochs, 6% linear warmup then linear decay, Adam beta2 0.98, eps 1e-6). The per-task
# learning rate and batch size are those of fairseq's examples/roberta/README.glue.md, the released settings
# behind RoBERTa's dev numbers. WNLI is not in that table: it gets RTE's values, the closest task (small,
# two-class entailment).
ROBERTA_GLUE_LR_AND_BATCH: dict[str, tuple[float, int]] = {
    "mnli": (1e-5, 32),
    "qnli": (1e-5, 32),
    "qqp": (1e-5, 32),
    "rte": (2e-5, 16),
    "sst2": (1e-5, 32),
    "mrpc": (1e-5, 16),
    "cola": (1e-5, 16),
    "stsb": (2e-5, 16),
    "wnli": (2e-5, 16),
}
ROBERTA_GLUE_COMMON: dict[str, Any] = {
    "num_train_epochs": 10,
    # transformers 5 has no warmup_ratio: a warmup_steps below 1 is read as a fraction of the total steps.
    "warmup_steps": 0.06,
    "lr_scheduler_type": "linear",
    "weight_decay": 0.1,
    "adam_beta1": 0.9,
    "adam_beta2": 0.98,
    "adam_epsilon": 1e-6,
    # fairseq's recipe passes --clip-norm 0.0 (no clipping); the Trainer skips clipping when this is 0.
    "max_grad_norm": 0.0,
    # fairseq fine-tunes with --max-positions 512 and does not truncate GLUE inputs shorter than that.
    "max_seq_length": 512,
}

TASK_PRESETS = ("roberta",)


def task_preset_defaults(preset: str, task_name: str) -> dict[str, Any]:
    """The argument values a preset gives a task, keyed by flag name (flags the user passes still win)."""
    if preset not in TASK_PRESETS:
        raise ValueError(f"Unknown --task_preset {preset!r}; choose one of {', '.join(TASK_PRESETS)}.")
    learning_rate, batch_size = ROBERTA_GLUE_LR_AND_BATCH[get_glue_task(task_name).name]
    return {**ROBERTA_GLUE_COMMON, "learning_rate": learning_rate, "per_device_train_batch_size": batch_size}


@dataclass
class GlueDataArguments(SampleLimitArguments):
    task_name: str = field(
        metadata={"help": "cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte or wnli (or GLUE's names: SST-2, STS-B, ...)."}
    )
    task_preset: str | None = field(
        default=None,
        metadata={"help": f"Apply a recipe's per-task hyperparameters ({', '.join(TASK_PRESETS)}: RoBERTa's "
                  "GLUE table); flags you pass still win."},
    )
    data_dir: str | None = field(
        default=None, metadata={"help": "GLUE's folder (glue_data/ with CoLA/, SST-2/, ... or one task's folder)."}
    )
    train_file: str | None = field(default=None, metadata={"help": "csv or JSON lines with the Hub's columns."})
    validation_file: str | None = field(default=None, metadata={"help": "csv or JSON lines with the Hub's columns."})
    test_file: str | None = field(default=None, metadata={"help": "csv or JSON lines; labels are not needed."})
    max_seq_length: int = field(
        default=128, metadata={"help": "Longer inputs are truncated to this many tokens (at most the model's positions)."}
    )

    def __post_init__(self):
        check_range("max_seq_length", self.max_seq_length, 1)

    def data_files(self) -> dict[str, str]:
        task = get_glue_task(self.task_name)
        files = {"train": self.train_file, task.eval_splits[0].name: self.validation_file,
                 task.test_splits[0].name: self.test_file}
        return {split: path for split, path in files.items() if path is not None}


def apply_task_preset(arguments: tuple[Any, ...], given: set[str]) -> tuple[Any, ...]:
    """--task_preset's hyperparameters for the task, where no flag was given."""
    data_args = arguments[1]
    if data_args.task_preset is None:
        return arguments
    return apply_defaults(arguments, task_preset_defaults(data_args.task_preset, data_args.task_name), given)


@dataclass(frozen=True)
class GlueData:
    task: GlueTask
    splits: DatasetDict


def read_glue(run: FineTuningRun) -> GlueData:
    """The task's splits the run asks for, each cut to its --max_*_samples."""
    data_args, training_args = run.data_args, run.training_args
    task = get_glue_task(data_args.task_name)
    data_files = data_args.data_files()
    splits = requested_splits(task, training_args.do_train, training_args.do_eval, training_args.do_predict,
                              from_files=bool(data_files))  # fmt: skip
    raw = load_glue(task, splits, data_args.data_dir, data_files, run.model_args.cache_dir)
    limits = {"train": data_args.max_train_samples, **{s.name: data_args.max_eval_samples for s in task.eval_splits},
              **{s.name: data_args.max_predict_samples for s in task.test_splits}}  # fmt: skip
    for name, limit in limits.items():
        if name in raw and limit is not None:
            raw[name] = raw[name].select(range(min(limit, len(raw[name]))))
    return GlueData(task, raw)


def encode_glue(run: FineTuningRun) -> dict[str, Any]:
    """Every split tokenized, by its name; "eval" is the first dev set (MNLI's matched one)."""
    task = run.data.task
    encoded = dict(tokenize_glue(run.data.splits, run.tokenizer, task, run.data_args.max_seq_length))
    if run.training_args.do_eval:
        encoded["eval"] = encoded[task.eval_splits[0].name]
    return encoded


def score_glue(run: FineTuningRun, trainer: Trainer) -> dict[str, dict[str, float]]:
    """Each dev set's metrics (MNLI's mismatched one with its suffix) with each example's prediction
    (eval_predictions.jsonl, eval_predictions_mm.jsonl) and, per metric, the predictions and labels it scores
    (eval_outcomes.json), and the leaderboard's TASK.tsv of each test set."""
    task, encoded, results = run.data.task, run.encoded, {}
    if run.training_args.do_eval:
        metrics, outcomes = {}, {}
        for split in (s for s in task.eval_splits if s.name in encoded):
            dataset = encoded[split.name]
            # predict, not evaluate: the same metrics with each example's prediction; logged as evaluate logs them.
            output = trainer.predict(dataset, metric_key_prefix="eval")
            trainer.log(output.metrics)
            split_metrics = {**output.metrics, "eval_samples": len(dataset)}
            metrics.update({f"{name}{split.metric_suffix}": value for name, value in split_metrics.items()})
            predictions = logits_to_predictions(output.predictions, task.is_regression)
            scored = {"predictions": predictions.tolist(), "references": np.asarray(output.label_ids).tolist()}
            outcomes.update({f"eval_{name}{split.metric_suffix}": {"scorer": name, **scored} for name in task.metrics})
            if path := output_file(trainer, f"eval_predictions{split.metric_suffix}.jsonl"):
                write_glue_predictions(path, dataset["idx"], output.label_ids, predictions)
        save_outcomes(trainer, "eval", outcomes)
        results["eval"] = metrics
    if run.training_args.do_predict:
        for split in (s for s in task.test_splits if s.name in encoded):
            output = trainer.predict(encoded[split.name], metric_key_prefix="predict")
            if path := output_file(trainer, split.submission_file):
                predictions = logits_to_predictions(output.predictions, task.is_regression)
                write_glue_submission(path, task, encoded[split.name]["idx"], predictions)
    return results


def glue_card(run: FineTuningRun) -> dict[str, Any]:
    task = run.data.task
    return {"tasks": "text-classification", "dataset_tags": "glue", "dataset_args": task.name,
            "dataset": f"GLUE {task.folder}"}


def glue_report(task: GlueTask) -> Report:
    """Every dev set's metrics (fractions; MNLI's mismatched one with its suffix) and its count of examples; the
    headline is the task's first metric: MRPC's F1, STS-B's Pearson, CoLA's Matthews
    correlation, accuracy elsewhere."""
    suffixes = [split.metric_suffix for split in task.eval_splits]
    return Report(tuple(f"{metric}{suffix}" for suffix in suffixes for metric in task.metrics), task.metrics[0],
                  other=tuple(f"samples{suffix}" for suffix in suffixes))  # fmt: skip


def glue_variant(flags: dict[str, Any]) -> str | None:
    """The GLUE task of --task_name (None for one that does not exist: run_glue.py's own check reports it)."""
    try:
        return get_glue_task(str(flags.get("task_name"))).name
    except ValueError:
        return None


GLUE = FineTuningTask(
    name="glue",
    task_arguments=(GlueDataArguments,),
    presets=apply_task_preset,
    read=read_glue,
    config_overrides=lambda run: glue_config_overrides(run.data.task),
    auto_class=AutoModelForSequenceClassification,
    encode=encode_glue,
    compute_metrics=lambda run: glue_compute_metrics(run.data.task.name),
    score=score_glue,
    model_card=glue_card,
    reports={name: glue_report(task) for name, task in GLUE_TASKS.items()},
    report_variant=glue_variant,
)
