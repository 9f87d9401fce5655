#!/usr/bin/env python
"""Fine-tune and evaluate on a GLUE task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI).

    python run_glue.py --model_name_or_path CKPT --task_name rte --do_train --do_eval --output_dir out
    python run_glue.py ... --task_preset roberta                # RoBERTa's per-task recipe; your flags win
    python run_glue.py ... --data_dir glue_data                 # the original GLUE files instead of the Hub
    python run_glue.py ... --train_file train.csv --validation_file dev.jsonl
    python run_glue.py ... --do_predict                         # writes the leaderboard's TASK.tsv
    accelerate launch run_glue.py ...                           # several GPUs

The metrics (GLUE's official ones, computed offline) go to OUTPUT_DIR/eval_results.json.
`python run_glue.py --help` lists every flag.
"""

from dataclasses import dataclass, field
from pathlib import Path

from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding, Trainer, set_seed

from spanroberta.metrics.glue import logits_to_predictions
from spanroberta.tasks.glue import (
    TASK_PRESETS,
    get_glue_task,
    glue_compute_metrics,
    glue_config_overrides,
    load_glue,
    requested_splits,
    task_preset_defaults,
    tokenize_glue,
    write_glue_submission,
)
from spanroberta.training.cli import apply_defaults, parse_arguments
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
from spanroberta.training.validation import check_max_seq_length, check_range, user_errors


@dataclass
class GlueDataArguments:
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
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N examples of each dev set."})
    max_predict_samples: int | None = field(default=None, metadata={"help": "Keep the first N test examples."})

    def __post_init__(self):
        check_range("max_seq_length", self.max_seq_length, 1)

    def data_files(self) -> dict[str, str]:
        task = get_glue_task(self.task_name)
        files = {"train": self.train_file, task.eval_splits[0].name: self.validation_file,
                 task.test_splits[0].name: self.test_file}
        return {split: path for split, path in files.items() if path is not None}


# The dataclasses behind the flags (run_ablation.py checks its configs against them).
ARGUMENT_CLASSES = (ModelArguments, GlueDataArguments, FinetuningArguments)


def parse_glue_arguments(
    args: list[str] | None = None,
) -> tuple[tuple[ModelArguments, GlueDataArguments, FinetuningArguments], set[str]]:
    """The arguments (with --task_preset's hyperparameters where no flag was given) and the flags given."""
    arguments, given = parse_arguments(ARGUMENT_CLASSES, args)
    data_args = arguments[1]
    if data_args.task_preset is not None:
        arguments = apply_defaults(arguments, task_preset_defaults(data_args.task_preset, data_args.task_name), given)
    return arguments, given


def main(args: list[str] | None = None) -> None:
    # Everything is read and checked before a model is loaded, so bad input fails fast.
    with user_errors("run_glue.py", also=(ValueError, FileNotFoundError)):
        (model_args, data_args, training_args), given = parse_glue_arguments(args)
        check_finetuning_run(model_args, training_args, given, {
            "max_train_samples": data_args.max_train_samples, "max_eval_samples": data_args.max_eval_samples,
            "max_predict_samples": data_args.max_predict_samples})  # fmt: skip
        # Seeded before the model is built, so that the new task head starts the same for the same --seed.
        set_seed(training_args.seed)
        task = get_glue_task(data_args.task_name)
        data_files = data_args.data_files()
        splits = requested_splits(task, training_args.do_train, training_args.do_eval, training_args.do_predict,
                                  from_files=bool(data_files))
        raw = load_glue(task, splits, data_args.data_dir, data_files, model_args.cache_dir)
        config, tokenizer = load_config_and_tokenizer(model_args, **glue_config_overrides(task))
        check_max_seq_length(data_args.max_seq_length, config, tokenizer, model_args.model_name_or_path)
    limits = {"train": data_args.max_train_samples, **{s.name: data_args.max_eval_samples for s in task.eval_splits},
              **{s.name: data_args.max_predict_samples for s in task.test_splits}}
    for name, limit in limits.items():
        if name in raw and limit is not None:
            raw[name] = raw[name].select(range(min(limit, len(raw[name]))))

    model = load_model(model_args, AutoModelForSequenceClassification, config)
    encoded = tokenize_glue(raw, tokenizer, task, data_args.max_seq_length)

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=encoded["train"] if training_args.do_train else None,
        eval_dataset=encoded[task.eval_splits[0].name] if training_args.do_eval else None,
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer, **padding(training_args, data_args.max_seq_length)),
        compute_metrics=glue_compute_metrics(task.name),
    )

    if training_args.do_train:
        train_and_save(trainer, given)

    if training_args.do_eval:
        metrics = {}
        for split in (s for s in task.eval_splits if s.name in encoded):
            dataset = encoded[split.name]
            split_metrics = {**trainer.evaluate(eval_dataset=dataset), "eval_samples": len(dataset)}
            metrics.update({f"{name}{split.metric_suffix}": value for name, value in split_metrics.items()})
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)

    if training_args.do_predict:
        for split in (s for s in task.test_splits if s.name in encoded):
            output = trainer.predict(encoded[split.name], metric_key_prefix="predict")
            if trainer.is_world_process_zero():
                predictions = logits_to_predictions(output.predictions, task.is_regression)
                output_dir = Path(training_args.output_dir)
                output_dir.mkdir(parents=True, exist_ok=True)
                write_glue_submission(output_dir / split.submission_file, task, encoded[split.name]["idx"], predictions)

    card = {"finetuned_from": model_args.model_name_or_path, "tasks": "text-classification", "language": "en",
            "dataset_tags": "glue", "dataset_args": task.name, "dataset": f"GLUE {task.folder}"}
    publish(trainer, card)
    finish_processes()


if __name__ == "__main__":
    main()
