#!/usr/bin/env python
"""Fine-tune and evaluate on RACE, the 4-option reading-comprehension exams (middle and high school).

    python run_race.py --model_name_or_path CKPT --do_train --do_eval --output_dir out   # from the Hub (ehovy/race)
    python run_race.py ... --data_dir RACE        # the original layout: RACE/{train,dev,test}/{high,middle}/*.txt
    python run_race.py ... --validation_file dev.high.jsonl dev.middle.jsonl            # JSON lines, .gz too
    accelerate launch run_race.py ...                                                    # several GPUs

Defaults follow RoBERTa's RACE recipe (lr 1e-5, batch 16, 5 epochs; see spanroberta/tasks/race.py); the flags
you pass win. Accuracy (overall, middle, high) goes to OUTPUT_DIR/eval_results.json and each question's
prediction to OUTPUT_DIR/eval_predictions.jsonl (predict_* for --do_predict).
`python run_race.py --help` lists every flag.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from transformers import AutoModelForMultipleChoice, DataCollatorForMultipleChoice, Trainer, set_seed

from spanroberta.tasks.race import (
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
from spanroberta.training.cli import parse_arguments, with_defaults
from spanroberta.training.distributed import finish_processes
from spanroberta.training.finetuning import (
    FinetuningArguments,
    ModelArguments,
    check_finetuning_run,
    load_config_and_tokenizer,
    load_model,
    padding,
    publish,
    train_and_save,
)
from spanroberta.training.validation import check_max_seq_length, check_range, fit_max_qa_length, user_errors


@dataclass
class RaceDataArguments:
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
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training questions."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N dev questions."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep the first N test questions."})

    def __post_init__(self):
        check_range("max_seq_length", self.max_seq_length, 1)
        check_range("max_qa_length", self.max_qa_length, 1)


# TrainingArguments with RoBERTa's RACE hyperparameters as defaults, so that --help shows what a run applies.
RaceTrainingArguments = with_defaults(FinetuningArguments, RACE_TRAINING_DEFAULTS, "RaceTrainingArguments", __name__)


# The dataclasses behind the flags (run_ablation.py checks its configs against them).
ARGUMENT_CLASSES = (ModelArguments, RaceDataArguments, RaceTrainingArguments)

# The phases, their split and the flags that choose their data.
PHASES = {"train": ("train", "train_file", "max_train_samples"),
          "eval": ("validation", "validation_file", "max_eval_samples"),
          "predict": ("test", "test_file", "max_predict_samples")}


def parse_race_arguments(
    args: list[str] | None = None,
) -> tuple[tuple[ModelArguments, RaceDataArguments, FinetuningArguments], set[str]]:
    """The arguments and the flags given."""
    return parse_arguments(ARGUMENT_CLASSES, args)


def main(args: list[str] | None = None) -> None:
    # Everything is read and checked before a model is loaded, so bad input fails fast.
    with user_errors("run_race.py", also=(ValueError, FileNotFoundError)):
        (model_args, data_args, training_args), given = parse_race_arguments(args)
        check_finetuning_run(model_args, training_args, given, {
            flag: getattr(data_args, flag) for _, _, flag in PHASES.values()})  # fmt: skip
        # Seeded before the model is built, so that the new task head starts the same for the same --seed.
        set_seed(training_args.seed)
        asked = {"train": training_args.do_train, "eval": training_args.do_eval, "predict": training_args.do_predict}
        raw = {}
        for phase, (split, files_flag, limit_flag) in PHASES.items():
            if asked[phase]:
                files = getattr(data_args, files_flag)
                dataset = load_race(
                    split, data_args.dataset_config_name, data_args.data_dir, files, model_args.cache_dir
                )
                limit = getattr(data_args, limit_flag)
                raw[phase] = dataset.select(range(min(limit, len(dataset)))) if limit is not None else dataset
        config, tokenizer = load_config_and_tokenizer(model_args)
        check_max_seq_length(data_args.max_seq_length, config, tokenizer, model_args.model_name_or_path)
        max_qa_length = fit_max_qa_length(data_args.max_qa_length, data_args.max_seq_length, tokenizer, given)

    model = load_model(model_args, AutoModelForMultipleChoice, config)
    encoded = {phase: encode_race(dataset, tokenizer, data_args.max_seq_length, max_qa_length)
               for phase, dataset in raw.items()}

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=encoded.get("train"),
        eval_dataset=encoded.get("eval"),
        processing_class=tokenizer,
        data_collator=DataCollatorForMultipleChoice(tokenizer, **padding(training_args, data_args.max_seq_length)),
        compute_metrics=race_compute_metrics,
    )

    if training_args.do_train:
        train_and_save(trainer, given)

    for phase, prefix in (("eval", "eval"), ("predict", "predict")):
        if phase not in encoded:
            continue
        output = trainer.predict(encoded[phase], metric_key_prefix=prefix)
        predictions = np.argmax(output.predictions, axis=-1)
        by_level = race_metrics(predictions, output.label_ids, raw[phase]["level"])
        metrics = {**output.metrics, **{f"{prefix}_{name}": value for name, value in by_level.items()},
                   f"{prefix}_samples": len(encoded[phase])}
        trainer.log_metrics(prefix, metrics)
        trainer.save_metrics(prefix, metrics)
        if trainer.is_world_process_zero():
            output_dir = Path(training_args.output_dir)
            output_dir.mkdir(parents=True, exist_ok=True)
            write_race_predictions(output_dir / f"{prefix}_predictions.jsonl", raw[phase], output.predictions)

    card = {"finetuned_from": model_args.model_name_or_path, "tasks": "multiple-choice", "language": "en",
            "dataset": "RACE"}
    # The Hub dataset is named only when the run read it; --data_dir and files are the user's own copies.
    if data_args.data_dir is None and not any(getattr(data_args, flag) for _, flag, _ in PHASES.values()):
        card.update(dataset_tags="ehovy/race", dataset_args=data_args.dataset_config_name)
    publish(trainer, card)
    finish_processes()


if __name__ == "__main__":
    main()
