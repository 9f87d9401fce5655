"""The life cycle every fine-tuning script shares, as transformers' example scripts run it: parse the flags, check
them and the data before a model is loaded, load the checkpoint, preprocess, train, evaluate, predict, write the
model card or push to the Hub.

A task (each folder of spanroberta/tasks/, its declaration in the folder's task.py) declares only
what is its own, as a `FineTuningTask`: its data flags, how it reads and encodes its data, its collator, how it scores
and what its model card says. `run_task(task, args)` runs the rest, so that every script behaves alike (the same
checks, seeding, resuming, metric files and card) and a script's `main` is its task's `FineTuningTask.main`.

Metrics: every split's metrics are saved as `{split}_results.json` (eval_results.json, predict_results.json, ...)
with keys that start with the split's name and an underscore (eval_f1, eval_samples), as the Trainer writes its own
(with the training epoch beside them). Their scale is the one each task's official scorer uses: percentages for
extractive QA (as transformers' run_qa.py), fractions for the others (as its text-classification script). Each task
declares what its evaluation writes (`Report`: the scores' names, their scale and the headline), the one place the
ablation's tables and the task benchmark read it from. Beside a split's results, a task writes each evaluated
example's outcome (`save_outcomes`: `{split}_outcomes.json`), from which the task benchmark scores any resample of
the examples.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from transformers import (
    DataCollatorWithPadding,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Trainer,
    set_seed,
)

from ..runs.cli import parse_arguments
from ..runs.checkpoints import previous_run_files
from ..runs.distributed import finish_processes
from ..runs.preemption import signals_noted, stop_if_signalled
from ..runs.trainer import RunTrainer
from ..runs.output_folder import check_output_folder_owner, claim_output_folder
from .arguments import FinetuningArguments, FinetuningModelArguments, check_finetuning_run, padding
from .model_steps import load_config_and_tokenizer, load_model, publish, train_and_save
from ..runs.validation import check_max_seq_length, user_errors


@dataclass
class FineTuningRun:
    """One run of a task: its parsed arguments (`FinetuningModelArguments` first, the training arguments last, the
    task's own in between), the flags the user gave, and what each stage leaves for the next ones."""

    arguments: tuple[Any, ...]
    given: set[str]
    # What the task's `read` returned: the examples of every split asked for (and whatever else it read with them).
    data: Any = None
    config: PretrainedConfig | None = None
    tokenizer: PreTrainedTokenizerBase | None = None
    # What the task's `prepare` derived from the flags and the checkpoint (e.g. a window stride fitted to the model).
    settings: dict[str, Any] = field(default_factory=dict)
    # The encoded datasets, by phase: "train" and "eval" go to the Trainer.
    encoded: dict[str, Any] = field(default_factory=dict)

    @property
    def model_args(self) -> FinetuningModelArguments:
        return self.arguments[0]

    @property
    def data_args(self) -> Any:
        return self.arguments[1]

    @property
    def training_args(self) -> FinetuningArguments:
        return self.arguments[-1]


def check_model_length(run: FineTuningRun) -> None:
    """The usual `prepare`: a --max_seq_length the checkpoint cannot hold is refused."""
    check_max_seq_length(run.data_args.max_seq_length, run.config, run.tokenizer, run.model_args.model_name_or_path)


def padding_collator(collator_class: type) -> Callable[[FineTuningRun], Any]:
    """A `collator` hook: `collator_class(tokenizer)` padding as --pad_to_max_length and the precision ask."""
    return lambda run: collator_class(run.tokenizer, **padding(run.training_args, run.data_args.max_seq_length))


# The scorer of outcomes that are per-example values (0-1) whose mean is the score.
MEAN = "mean"


def output_file(trainer: Trainer, name: str) -> Path | None:
    """Where a run writes its file `name` (predictions, outcomes): in its output folder, made if missing, on the main
    process, which alone writes the run's files; None on the other processes."""
    if not trainer.is_world_process_zero():
        return None
    output_dir = Path(trainer.args.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    return output_dir / name


def save_outcomes(trainer: Trainer, split: str, outcomes: dict[str, dict[str, Any]]) -> None:
    """Writes `{split}_outcomes.json` beside `{split}_results.json`: for a score's key there (eval_f1, ...), each
    evaluated example's outcome in a compact form that scores it again on any resample of the examples (the task
    benchmark's bootstrap): `scorer` names how (MEAN, a metric's name, a task's scorer) and every other field is a
    list with one entry an example (an example being what the official scorer counts: a question, a document)."""
    if path := output_file(trainer, f"{split}_outcomes.json"):
        path.write_text(json.dumps(outcomes), encoding="utf-8")


FRACTION, PERCENTAGE = "fraction", "percentage"


@dataclass(frozen=True)
class Report:
    """What a task's evaluation writes to `{split}_results.json`: its scores (`keys`, their names after the `{split}_`
    prefix), on which scale (fractions or percentages, as the task's official scorer gives them), the one a table
    shows first (`headline`), for scores named after the data (per-dataset ones) a pattern of further names,
    and the other numbers the task writes beside them (counts, thresholds; the Trainer adds its loss and timing)."""

    keys: tuple[str, ...]
    headline: str
    scale: str = FRACTION  # FRACTION or PERCENTAGE
    # A regular expression of further score names, for scores named after the data (`{dataset}_f1`).
    named_by_data: str | None = None
    other: tuple[str, ...] = ()
    split: str = "eval"  # the file is {split}_results.json; its keys start with {split}_

    def __post_init__(self):
        if self.headline not in self.keys or self.scale not in (FRACTION, PERCENTAGE):
            raise ValueError(f"A report's headline is one of its keys and its scale {FRACTION} or {PERCENTAGE}: {self}")

    @property
    def results_file(self) -> str:
        """The file the Trainer's save_metrics writes the split's scores to."""
        return f"{self.split}_results.json"

    @property
    def outcomes_file(self) -> str:
        """The file `save_outcomes` writes the split's per-example outcomes to."""
        return f"{self.split}_outcomes.json"

    @property
    def to_percent(self) -> float:
        """The factor that puts a score on the 0-100 scale the papers report (eval_accuracy 0.71 is 71.0)."""
        return 100.0 if self.scale == FRACTION else 1.0

    def declares(self, name: str) -> bool:
        """Whether `name` (without the split's prefix) is one of the scores: a key, or a name of the data's."""
        return name in self.keys or bool(self.named_by_data and re.fullmatch(self.named_by_data, name))


@dataclass(frozen=True)
class FineTuningTask:
    """What one fine-tuning task is: its flags and the stages that are its own. Each hook takes the
    `FineTuningRun` (which holds what the earlier stages left) in the order `run_task` calls them."""

    # The registry's name of the task; its script is run_{name}.py.
    name: str
    # The task's own argument dataclasses (its data flags, ...), which stand between FinetuningModelArguments and the
    # training arguments on the command line.
    task_arguments: tuple[type, ...]
    # Reads and checks the data of every split the run asks for, before a model is loaded.
    read: Callable[[FineTuningRun], Any]
    # The datasets by phase ("train" and "eval" go to the Trainer).
    encode: Callable[[FineTuningRun], dict[str, Any]]
    # The metrics of each split it scores ({"eval": {...}, "predict": {...}}), with its prediction files written.
    score: Callable[[FineTuningRun, Trainer], dict[str, dict[str, float]]]
    # The model card's fields of the task (Trainer.create_model_card's arguments); `run_task` adds the checkpoint
    # fine-tuned from and the language.
    model_card: Callable[[FineTuningRun], dict[str, Any]]
    # The head the checkpoint is loaded into (AutoModelForQuestionAnswering, ...), unless `build_model` is given.
    auto_class: type | None = None
    build_model: Callable[[FineTuningRun], PreTrainedModel] | None = None
    # Fills the defaults a recipe gives (a `--task_preset`) into the parsed arguments, the flags given winning.
    presets: Callable[[tuple[Any, ...], set[str]], tuple[Any, ...]] | None = None
    # The config's task fields (e.g. num_labels), from the data read.
    config_overrides: Callable[[FineTuningRun], dict[str, Any]] | None = None
    # The checks and settings that need the checkpoint's config and tokenizer, before its weights are loaded.
    prepare: Callable[[FineTuningRun], None] = check_model_length
    collator: Callable[[FineTuningRun], Any] = padding_collator(DataCollatorWithPadding)
    compute_metrics: Callable[[FineTuningRun], Callable | None] = lambda run: None
    trainer_class: type[RunTrainer] = RunTrainer
    # Further arguments of `trainer_class` (a task learning rate).
    trainer_arguments: Callable[[FineTuningRun], dict[str, Any]] = lambda run: {}
    # How the trained model is saved (default: Trainer.save_model).
    save_model: Callable[[Trainer], None] | None = None
    training_arguments: type = FinetuningArguments
    # What its evaluation writes, by name: one report per variant of the task (each dataset or subtask it
    # scores apart) and per further split it scores (a further file beside eval_results.json).
    reports: dict[str, Report] = field(default_factory=dict)
    # The variant that an ablation config's flags choose (None: none of them, e.g. a subtask that does not exist);
    # unset where the task has one report of the evaluation split.
    report_variant: Callable[[dict[str, Any]], str | None] | None = None

    @property
    def script(self) -> str:
        """The script that runs the task (an ablation config's `script`)."""
        return f"run_{self.name}.py"

    @property
    def argument_classes(self) -> tuple[type, ...]:
        """Every argument dataclass of the script: FinetuningModelArguments first, the training arguments last."""
        return (FinetuningModelArguments, *self.task_arguments, self.training_arguments)

    def report(self, flags: dict[str, Any]) -> Report | None:
        """The report of the evaluation split that a run with these flags writes (None: no such variant)."""
        if self.report_variant is None:
            (only,) = (report for report in self.reports.values() if report.split == "eval")
            return only
        return self.reports.get(self.report_variant(flags))

    def parse(self, args: list[str] | None) -> FineTuningRun:
        """The flags (or one JSON/YAML file of them) parsed into the task's argument classes."""
        arguments, given = parse_arguments(self.argument_classes, args)
        if self.presets is not None:
            arguments = self.presets(arguments, given)
        return FineTuningRun(arguments, given)

    def main(self, args: list[str] | None = None) -> dict[str, float]:
        """The task's script: runs what the flags (or one JSON/YAML file of them) ask for; returns the evaluation
        metrics (empty without --do_eval). A preemption signal outside training is noted, not fatal
        (`runs.preemption`)."""
        with signals_noted(self.script):
            return run_task(self, args)


def run_task(task: FineTuningTask, args: list[str] | None = None) -> dict[str, float]:
    """Runs what the flags (or one JSON/YAML file of them) ask for; returns the evaluation metrics (empty without
    --do_eval)."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    # Every setting, path and example is checked before a model is loaded, so bad input fails fast.
    with user_errors(task.script, also=(ValueError, FileNotFoundError)):
        run = task.parse(args)
        check_finetuning_run(run.model_args, run.training_args, run.given, sample_limits(run.data_args))
        check_output_folder_owner(run.training_args.output_dir, task.script, run.training_args.overwrite_output_dir,
                                  previous_run_files)  # fmt: skip
        # Seeded before the model is built, so that the new task head starts the same for the same --seed.
        set_seed(run.training_args.seed)
        run.data = task.read(run)
        overrides = task.config_overrides(run) if task.config_overrides else {}
        run.config, run.tokenizer = load_config_and_tokenizer(run.model_args, **overrides)
        task.prepare(run)
        # Every process learns whether the folder is this run's, and whether a preemption signal came meanwhile,
        # before any builds its model.
        claim_output_folder(run.training_args.output_dir, task.script, takes_lock=run.training_args.should_save)
    stop_if_signalled(run.training_args.output_dir, is_main_process=run.training_args.process_index == 0)
    model = task.build_model(run) if task.build_model else load_model(run.model_args, task.auto_class, run.config)
    run.encoded = task.encode(run)
    trainer = task.trainer_class(
        model=model,
        args=run.training_args,
        train_dataset=run.encoded.get("train"),
        eval_dataset=run.encoded.get("eval"),
        processing_class=run.tokenizer,
        data_collator=task.collator(run),
        compute_metrics=task.compute_metrics(run),
        **task.trainer_arguments(run),
    )
    if run.training_args.do_train:
        # A resume under other settings than the checkpoint's, or a full disk at a save, ends the run in one paragraph.
        with user_errors(task.script):
            train_and_save(trainer, run.given, task.save_model)
    results = task.score(run, trainer)
    for split, metrics in results.items():
        _check_metric_keys(task, split, metrics)
        # An undefined score (GAP's bias with a gender's F1 at 0) is null in the file and "-" in the log, as the
        # official scorer prints it.
        trainer.log_metrics(split, {name: "-" if value is None else value for name, value in metrics.items()})
        trainer.save_metrics(split, metrics)
    publish(trainer, {"finetuned_from": run.model_args.model_name_or_path, "language": "en", **task.model_card(run)})
    finish_processes()
    return results.get("eval", {})


class ArgumentDataclass(Protocol):
    """An instance of an argument dataclass, whatever its flags (what `dataclasses.fields` reads)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]


def sample_limits(data_args: ArgumentDataclass) -> dict[str, int | None]:
    """The task's --max_*_samples flags (how many examples, or documents, each split keeps) and their values."""
    return {spec.name: getattr(data_args, spec.name) for spec in dataclasses.fields(data_args)
            if spec.name.startswith("max_") and spec.name.endswith("_samples")}  # fmt: skip


def _check_metric_keys(task: FineTuningTask, split: str, metrics: dict[str, float]) -> None:
    """Every key of `{split}_results.json` starts with the split's name, as the Trainer's own do (besides the epoch
    the Trainer adds): readers of the files (the ablation's tables) rely on it."""
    stray = sorted(name for name in metrics if not name.startswith(f"{split}_") and name != "epoch")
    if stray:
        raise AssertionError(f"{task.script} scored {split} metrics without the {split}_ prefix: {', '.join(stray)}")
