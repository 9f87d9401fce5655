#!/usr/bin/env python
"""Fine-tune and evaluate an extractive QA model on SQuAD v1.1 or v2.0, or on MRQA 2019's datasets, with the
Trainer.

Works from any checkpoint with a question-answering head: spanroberta's own pretraining checkpoints,
stock RoBERTa, BERT. The flags follow transformers' examples/pytorch/question-answering/run_qa.py.

    python run_squad.py --model_name_or_path <checkpoint> --output_dir out \\
        --train_file train-v1.1.json --validation_file dev-v1.1.json --do_train --do_eval

MRQA 2019's files (JSON lines, gzipped or not, told from SQuAD's by their content) go to the same flags, several
comma-separated: training reads their union, and each evaluation file is scored on its own with MRQA's metric
(eval_results.json: {dataset}_em and {dataset}_f1 per file, macro_em and macro_f1 their averages); see
docs/mrqa.md.

Writes, into --output_dir: the fine-tuned checkpoint (with the question-answering pipeline's code, which
transformers 5 no longer ships, so that `pipeline("question-answering", model=out, trust_remote_code=True)` works
without spanroberta; a stock BERT or RoBERTa model itself loads without remote code),
predictions.json, nbest_predictions.json, null_odds.json (v2.0) and eval_results.json with the official
evaluation scripts' keys; for v2.0 also null_score_threshold.json, the no-answer threshold that maximised
F1, which later eval-only runs of that checkpoint use unless --null_score_diff_threshold is given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from datasets import Dataset
from transformers import AutoModelForQuestionAnswering, DataCollatorWithPadding, Trainer, set_seed

from spanroberta.tasks.squad.features import prepare_eval_features, prepare_train_features
from spanroberta.tasks.squad.postprocessing import (
    load_null_score_threshold,
    predict_and_score,
    save_null_score_threshold,
    save_qa_checkpoint,
)
from spanroberta.tasks.squad.reading import load_squad_splits
from spanroberta.training.cli import parse_arguments
from spanroberta.training.distributed import finish_processes
from spanroberta.errors import UserInputError
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
from spanroberta.training.validation import check_max_seq_length, check_range, fit_doc_stride, user_errors

logger = logging.getLogger(__name__)


@dataclass
class SquadArguments:
    """Which data, how it is cut into windows, and how answers are decoded."""

    dataset_name: str | None = field(
        default=None, metadata={"help": "A Hub dataset with SQuAD's columns: rajpurkar/squad, rajpurkar/squad_v2."}
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "The Hub dataset's configuration."})
    train_file: str | None = field(
        default=None,
        metadata={"help": "Official nested SQuAD JSON, flat JSON/JSON lines with the Hub's columns, or MRQA JSON "
                  "lines (gzipped or not); several files comma-separated (training reads their union)."},
    )
    validation_file: str | None = field(
        default=None,
        metadata={"help": "Evaluation data, same formats; several MRQA files comma-separated, each scored on its own "
                  "with MRQA's metric (per-dataset and macro-averaged EM/F1)."},
    )
    test_file: str | None = field(
        default=None, metadata={"help": "Data to predict (--do_predict), same formats; answers optional."}
    )
    version_2_with_negative: bool = field(
        default=False, metadata={"help": "SQuAD v2.0: some questions have no answer."}
    )
    max_seq_length: int = field(
        default=384,
        metadata={"help": "Tokens per window, question included (SpanBERT used 512; at most the model's positions)."},
    )
    doc_stride: int = field(
        default=128,
        metadata={"help": "Context tokens that consecutive windows of a long context share (the default is lowered "
                  "to fit a shorter --max_seq_length)."},
    )
    max_query_length: int = field(default=64, metadata={"help": "Questions are cut to this many tokens."})
    n_best_size: int = field(default=20, metadata={"help": "Candidates kept per question in nbest_predictions.json."})
    max_answer_length: int = field(default=30, metadata={"help": "Longest answer, in tokens."})
    null_score_diff_threshold: float | None = field(
        default=None,
        metadata={
            "help": "v2.0: answer '' when null score - best span score exceeds this. Default: the threshold "
            "saved with the checkpoint (null_score_threshold.json) when evaluating without training, else 0."
        },
    )
    answerability_head: bool = field(
        default=False,
        metadata={
            "help": "v2.0: add RoBERTa's answerability classifier, whose loss is added to the span loss "
            "(needs a spanroberta checkpoint)."
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training questions."})
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Evaluate only the first N questions (of each evaluation file)."}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={"help": "Predict only the first N questions (of each test file)."}
    )
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenization."})

    def __post_init__(self):
        for flag in ("max_seq_length", "max_query_length", "n_best_size", "max_answer_length"):
            check_range(flag, getattr(self, flag), 1)
        check_range("doc_stride", self.doc_stride, 0)


# The dataclasses behind the flags (run_ablation.py checks its configs against them).
ARGUMENT_CLASSES = (ModelArguments, SquadArguments, FinetuningArguments)


def main(args: list[str] | None = None) -> dict[str, float]:
    """Runs what the flags (or one JSON/YAML file of them) ask for; returns the evaluation scores (empty
    without --do_eval)."""
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    # Every setting, path and example is checked before a model is loaded, so bad input fails fast.
    with user_errors("run_squad.py", also=(ValueError, FileNotFoundError)):
        (model_args, squad_args, training_args), given = parse_arguments(ARGUMENT_CLASSES, args)
        check_finetuning_run(model_args, training_args, given, {
            "max_train_samples": squad_args.max_train_samples, "max_eval_samples": squad_args.max_eval_samples,
            "max_predict_samples": squad_args.max_predict_samples})  # fmt: skip
        set_seed(training_args.seed)
        wanted = {"train": training_args.do_train, "validation": training_args.do_eval, "test": training_args.do_predict}
        splits = load_squad_splits(
            dataset_name=squad_args.dataset_name,
            dataset_config_name=squad_args.dataset_config_name,
            files={
                "train": squad_args.train_file,
                "validation": squad_args.validation_file,
                "test": squad_args.test_file,
            },
            splits=[split for split, asked in wanted.items() if asked],
            version_2_with_negative=squad_args.version_2_with_negative,
            max_samples={
                "train": squad_args.max_train_samples,
                "validation": squad_args.max_eval_samples,
                "test": squad_args.max_predict_samples,
            },
            cache_dir=model_args.cache_dir,
            token=model_args.token,
        )
        examples = {split: loaded.examples for split, loaded in splits.items()}
        config, tokenizer = load_config_and_tokenizer(model_args)
        check_max_seq_length(squad_args.max_seq_length, config, tokenizer, model_args.model_name_or_path)
        doc_stride = fit_doc_stride(
            squad_args.doc_stride, squad_args.max_seq_length, squad_args.max_query_length, tokenizer, given
        )
        if squad_args.answerability_head and config.model_type != "spanroberta":
            raise UserInputError(
                f"--answerability_head needs a spanroberta checkpoint (SpanRobertaConfig), but "
                f"{model_args.model_name_or_path} is a {config.model_type!r} one."
            )
    if squad_args.answerability_head:
        config.answerability_head = True
    model = load_model(model_args, AutoModelForQuestionAnswering, config)

    windows = {
        "tokenizer": tokenizer,
        "max_seq_length": squad_args.max_seq_length,
        "doc_stride": doc_stride,
        "max_query_length": squad_args.max_query_length,
    }

    def features(split: str, prepare: Callable[..., dict], **extra: bool) -> Dataset:
        with training_args.main_process_first(desc=f"{split} features"):
            return examples[split].map(
                prepare,
                batched=True,
                num_proc=squad_args.preprocessing_num_workers,
                remove_columns=examples[split].column_names,
                fn_kwargs={**windows, **extra},
                desc=f"Windows of the {split} questions",
            )

    with_is_impossible = bool(getattr(config, "answerability_head", False))
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=features("train", prepare_train_features, with_is_impossible=with_is_impossible)
        if training_args.do_train
        else None,
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer, **padding(training_args, squad_args.max_seq_length)),
    )

    if training_args.do_train:
        train_and_save(trainer, given, lambda trainer: save_qa_checkpoint(trainer, training_args.output_dir))

    threshold = squad_args.null_score_diff_threshold
    if threshold is None and not training_args.do_train:
        threshold = load_null_score_threshold(model_args.model_name_or_path)
        if threshold is not None:
            logger.info("Using the null score threshold saved with the checkpoint: %s", threshold)
    threshold = 0.0 if threshold is None else threshold

    decoding = {
        "version_2_with_negative": squad_args.version_2_with_negative,
        "n_best_size": squad_args.n_best_size,
        "max_answer_length": squad_args.max_answer_length,
        "output_dir": training_args.output_dir,
    }
    metrics = {}
    if training_args.do_eval:
        _, metrics = predict_and_score(
            trainer,
            examples["validation"],
            features("validation", prepare_eval_features),
            null_score_diff_threshold=threshold,
            mrqa_gold=splits["validation"].mrqa_gold,
            **decoding,
        )
        if squad_args.version_2_with_negative:
            metrics["null_score_diff_threshold"] = threshold
            if trainer.is_world_process_zero():
                save_null_score_threshold(training_args.output_dir, metrics)
            if squad_args.null_score_diff_threshold is None:
                threshold = metrics["best_f1_thresh"]  # tuned on the evaluation data, used for --do_predict
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)

    if training_args.do_predict:
        predict_and_score(
            trainer,
            examples["test"],
            features("test", prepare_eval_features),
            null_score_diff_threshold=threshold,
            prefix="predict_",
            score=False,
            **decoding,
        )

    mrqa = any(loaded.mrqa_gold for loaded in splits.values())
    dataset = "mrqa" if mrqa else "squad_v2" if squad_args.version_2_with_negative else "squad"
    card = {"finetuned_from": model_args.model_name_or_path, "tasks": "question-answering", "language": "en",
            "dataset_tags": dataset, "dataset": dataset}  # fmt: skip
    publish(trainer, card)
    finish_processes()
    return metrics


if __name__ == "__main__":
    main()
