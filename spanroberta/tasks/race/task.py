"""run_race.py's task: RACE, the 4-option reading-comprehension exams (middle and high school), from the Hub, RACE's
own folder or JSON lines; accuracy overall, on middle and on high school (fractions: eval_accuracy,
eval_accuracy_middle, eval_accuracy_high), each question's prediction in eval_predictions.jsonl. The training
defaults are RoBERTa's RACE recipe (spanroberta/tasks/race/data.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from datasets import Dataset
from transformers import AutoModelForMultipleChoice, DataCollatorForMultipleChoice, Trainer

from spanroberta.finetuning.arguments import FinetuningArguments, SampleLimitArguments
from spanroberta.finetuning.task import (
    MEAN,
    FineTuningRun,
    FineTuningTask,
    Report,
    check_model_length,
    output_file,
    padding_collator,
    save_outcomes,
)
from spanroberta.runs.cli import with_defaults
from spanroberta.runs.ranges import check_range
from spanroberta.runs.validation import fit_max_qa_length
from spanroberta.tasks.race.data import (
    MAX_QA_LENGTH,
    MAX_SEQ_LENGTH,
    RACE_CONFIGS,
    RACE_TRAINING_DEFAULTS,
    encode_race,
    load_race,
    race_compute_metrics,
    race_metrics,
    write_race_predictions,
)


@dataclass
class RaceDataArguments(SampleLimitArguments):
    dataset_config_name: str = field(
        default="all", metadata={"help": f"School levels, from the Hub or --data_dir: {', '.join(RACE_CONFIGS)}."}
    )
    data_dir: str | None = field(
        default=None, metadata={"help": "RACE's original folder: {train,dev,test}/{high,middle}/*.txt."}
    )
    train_file: list[str] | None = field(
        default=None, metadata={"help": "JSON lines (.jsonl or .jsonl.gz) with the Hub's columns; several allowed."}
    )
    validation_file: list[str] | None = field(default=None, metadata={"help": "JSON lines; several allowed."})
    test_file: list[str] | None = field(default=None, metadata={"help": "JSON lines; several allowed."})
    max_seq_length: int = field(
        default=MAX_SEQ_LENGTH,
        metadata={"help": "Tokens per option (at most the model's positions); the passage keeps what fits."},
    )
    max_qa_length: int = field(
        default=MAX_QA_LENGTH,
        metadata={"help": "The question with the option is cut to this many tokens (the default is lowered to "
                  "fit a shorter --max_seq_length)."},
    )

    def __post_init__(self):
        check_range("max_seq_length", self.max_seq_length, 1)
        check_range("max_qa_length", self.max_qa_length, 1)


# TrainingArguments with RoBERTa's RACE hyperparameters as defaults, so that --help shows what a run applies.
RaceTrainingArguments = with_defaults(FinetuningArguments, RACE_TRAINING_DEFAULTS, "RaceTrainingArguments", __name__)

# The phases, their split and the flags that choose their data.
PHASES = {"train": ("train", "train_file", "max_train_samples"),
          "eval": ("validation", "validation_file", "max_eval_samples"),
          "predict": ("test", "test_file", "max_predict_samples")}  # fmt: skip


def read_race(run: FineTuningRun) -> dict[str, Dataset]:
    """The questions of every phase asked for, by phase, each cut to its --max_*_samples."""
    data_args, training_args = run.data_args, run.training_args
    asked = {"train": training_args.do_train, "eval": training_args.do_eval, "predict": training_args.do_predict}
    raw = {}
    for phase, (split, files_flag, limit_flag) in PHASES.items():
        if asked[phase]:
            files = getattr(data_args, files_flag)
            dataset = load_race(split, data_args.dataset_config_name, data_args.data_dir, files,
                                run.model_args.cache_dir)
            limit = getattr(data_args, limit_flag)
            raw[phase] = dataset.select(range(min(limit, len(dataset)))) if limit is not None else dataset
    return raw


def prepare_race(run: FineTuningRun) -> None:
    """The option length checked against the model, and the question+option budget fitted to it."""
    check_model_length(run)
    run.settings["max_qa_length"] = fit_max_qa_length(
        run.data_args.max_qa_length, run.data_args.max_seq_length, run.tokenizer, run.given
    )


def score_race(run: FineTuningRun, trainer: Trainer) -> dict[str, dict[str, float]]:
    """Accuracy overall and by school level, each question's prediction ({phase}_predictions.jsonl) and whether
    it is right, for each accuracy ({phase}_outcomes.json)."""
    results = {}
    for phase in ("eval", "predict"):
        if phase not in run.encoded:
            continue
        output = trainer.predict(run.encoded[phase], metric_key_prefix=phase)
        predictions = np.argmax(output.predictions, axis=-1)
        by_level = race_metrics(predictions, output.label_ids, run.data[phase]["level"])
        results[phase] = {**output.metrics, **{f"{phase}_{name}": value for name, value in by_level.items()},
                          f"{phase}_samples": len(run.encoded[phase])}  # fmt: skip
        # Whether each question was answered right, for the accuracy over all questions and over each level's.
        right = (predictions == np.asarray(run.data[phase]["label"])).astype(int)
        levels = np.asarray(run.data[phase]["level"])
        asked = {f"accuracy_{level}": levels == level for level in RACE_CONFIGS["all"]}
        asked["accuracy"] = np.full(len(levels), True)
        outcomes = {f"{phase}_{name}": {"scorer": MEAN, "values": right[asked[name]].tolist()} for name in by_level}
        save_outcomes(trainer, phase, outcomes)
        if path := output_file(trainer, f"{phase}_predictions.jsonl"):
            write_race_predictions(path, run.data[phase], output.predictions)
    return results


def race_card(run: FineTuningRun) -> dict[str, Any]:
    data_args = run.data_args
    card = {"tasks": "multiple-choice", "dataset": "RACE"}
    # The Hub dataset is named only when the run read it; --data_dir and files are the user's own copies.
    if data_args.data_dir is None and not any(getattr(data_args, flag) for _, flag, _ in PHASES.values()):
        card.update(dataset_tags="ehovy/race", dataset_args=data_args.dataset_config_name)
    return card


RACE = FineTuningTask(
    name="race",
    task_arguments=(RaceDataArguments,),
    training_arguments=RaceTrainingArguments,
    read=read_race,
    prepare=prepare_race,
    auto_class=AutoModelForMultipleChoice,
    encode=lambda run: {phase: encode_race(dataset, run.tokenizer, run.data_args.max_seq_length,
                                           run.settings["max_qa_length"]) for phase, dataset in run.data.items()},
    collator=padding_collator(DataCollatorForMultipleChoice),
    compute_metrics=lambda run: race_compute_metrics,
    score=score_race,
    model_card=race_card,
    reports={"race": Report(("accuracy", "accuracy_middle", "accuracy_high"), "accuracy", other=("samples",))},
)
