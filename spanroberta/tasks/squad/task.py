"""run_squad.py's task: extractive QA on SQuAD v1.1 and v2.0, or on MRQA 2019's datasets (their reading, windows and
answer decoding are spanroberta.tasks.squad's). The flags follow transformers' examples/pytorch/question-answering/
run_qa.py; so do the scores' scale, percentages (eval_exact_match, eval_f1, eval_{dataset}_f1 for MRQA)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset
from transformers import AutoModelForQuestionAnswering, Trainer

from spanroberta.errors import UserInputError
from spanroberta.finetuning.arguments import SampleLimitArguments
from spanroberta.finetuning.task import (
    PERCENTAGE,
    FineTuningRun,
    FineTuningTask,
    Report,
    check_model_length,
    save_outcomes,
)
from spanroberta.runs.ranges import check_range
from spanroberta.runs.validation import fit_doc_stride
from spanroberta.tasks.squad.features import prepare_eval_features, prepare_train_features
from spanroberta.tasks.squad.postprocessing import (
    load_null_score_threshold,
    predict_and_score,
    question_outcomes,
    save_null_score_threshold,
    save_qa_checkpoint,
)
from spanroberta.tasks.squad.reading import QaSplit, is_mrqa_file, load_squad_splits
from spanroberta.tasks.squad.scoring import V1_KEYS, V2_KEYS

logger = logging.getLogger(__name__)


@dataclass
class SquadArguments(SampleLimitArguments):
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
    preprocessing_num_workers: int | None = field(default=None, metadata={"help": "Processes for tokenization."})

    def __post_init__(self):
        for flag in ("max_seq_length", "max_query_length", "n_best_size", "max_answer_length"):
            check_range(flag, getattr(self, flag), 1)
        check_range("doc_stride", self.doc_stride, 0)


def read_squad(run: FineTuningRun) -> dict[str, QaSplit]:
    """The questions of every split the run asks for (and, for MRQA files, their gold answers)."""
    squad_args, training_args = run.data_args, run.training_args
    wanted = {"train": training_args.do_train, "validation": training_args.do_eval, "test": training_args.do_predict}
    return load_squad_splits(
        dataset_name=squad_args.dataset_name,
        dataset_config_name=squad_args.dataset_config_name,
        files={"train": squad_args.train_file, "validation": squad_args.validation_file, "test": squad_args.test_file},
        splits=[split for split, asked in wanted.items() if asked],
        version_2_with_negative=squad_args.version_2_with_negative,
        max_samples={"train": squad_args.max_train_samples, "validation": squad_args.max_eval_samples,
                     "test": squad_args.max_predict_samples},  # fmt: skip
        cache_dir=run.model_args.cache_dir,
        token=run.model_args.token,
    )


def prepare_squad(run: FineTuningRun) -> None:
    """The window length checked against the model, the stride fitted to it, and the answerability head asked
    for only where the checkpoint can have one."""
    squad_args = run.data_args
    check_model_length(run)
    run.settings["doc_stride"] = fit_doc_stride(
        squad_args.doc_stride, squad_args.max_seq_length, squad_args.max_query_length, run.tokenizer, run.given
    )
    if squad_args.answerability_head:
        if run.config.model_type != "spanroberta":
            raise UserInputError(
                f"--answerability_head needs a spanroberta checkpoint (SpanRobertaConfig), but "
                f"{run.model_args.model_name_or_path} is a {run.config.model_type!r} one."
            )
        run.config.answerability_head = True


def windows(run: FineTuningRun, split: str, prepare: Callable[..., dict], **extra: bool) -> Dataset:
    """The questions of `split` cut into windows by `prepare` (the train or the eval features)."""
    examples = run.data[split].examples
    settings = {"tokenizer": run.tokenizer, "max_seq_length": run.data_args.max_seq_length,
                "doc_stride": run.settings["doc_stride"], "max_query_length": run.data_args.max_query_length}
    with run.training_args.main_process_first(desc=f"{split} features"):
        return examples.map(
            prepare,
            batched=True,
            num_proc=run.data_args.preprocessing_num_workers,
            remove_columns=examples.column_names,
            fn_kwargs={**settings, **extra},
            desc=f"Windows of the {split} questions",
        )


def encode_squad(run: FineTuningRun) -> dict[str, Dataset]:
    """The training windows; evaluation and prediction cut theirs when they decode."""
    if not run.training_args.do_train:
        return {}
    with_is_impossible = bool(getattr(run.config, "answerability_head", False))
    return {"train": windows(run, "train", prepare_train_features, with_is_impossible=with_is_impossible)}


def null_score_threshold(run: FineTuningRun) -> float:
    """v2.0's no-answer threshold: the flag's, else the one saved with a checkpoint evaluated without training, else
    0."""
    threshold = run.data_args.null_score_diff_threshold
    if threshold is None and not run.training_args.do_train:
        threshold = load_null_score_threshold(run.model_args.model_name_or_path)
        if threshold is not None:
            logger.info("Using the null score threshold saved with the checkpoint: %s", threshold)
    return 0.0 if threshold is None else threshold


def score_squad(run: FineTuningRun, trainer: Trainer) -> dict[str, dict[str, float]]:
    """The official scores of the evaluation questions (predictions.json and the other official files beside them,
    each question's scores in eval_outcomes.json), and the test questions' predictions (predict_predictions.json,
    ...)."""
    squad_args, output_dir = run.data_args, run.training_args.output_dir
    threshold = null_score_threshold(run)
    decoding = {"version_2_with_negative": squad_args.version_2_with_negative, "n_best_size": squad_args.n_best_size,
                "max_answer_length": squad_args.max_answer_length, "output_dir": output_dir}  # fmt: skip
    results = {}
    if run.training_args.do_eval:
        evaluated = run.data["validation"]
        predictions, metrics = predict_and_score(
            trainer, evaluated.examples, windows(run, "validation", prepare_eval_features),
            null_score_diff_threshold=threshold, mrqa_gold=evaluated.mrqa_gold, **decoding,
        )  # fmt: skip
        outcomes = question_outcomes(evaluated.examples, predictions, squad_args.version_2_with_negative,
                                     evaluated.mrqa_gold)  # fmt: skip
        save_outcomes(trainer, "eval", {f"eval_{name}": outcome for name, outcome in outcomes.items()})
        if squad_args.version_2_with_negative:
            metrics["null_score_diff_threshold"] = threshold
            if trainer.is_world_process_zero():
                save_null_score_threshold(output_dir, metrics)
            if squad_args.null_score_diff_threshold is None:
                threshold = metrics["best_f1_thresh"]  # tuned on the evaluation data, used for --do_predict
        metrics["samples"] = len(run.data["validation"].examples)
        results["eval"] = {f"eval_{name}": value for name, value in metrics.items()}
    if run.training_args.do_predict:
        predict_and_score(trainer, run.data["test"].examples, windows(run, "test", prepare_eval_features),
                          null_score_diff_threshold=threshold, prefix="predict_", score=False, **decoding)  # fmt: skip
    return results


def squad_card(run: FineTuningRun) -> dict[str, Any]:
    mrqa = any(loaded.mrqa_gold for loaded in run.data.values())
    dataset = "mrqa" if mrqa else "squad_v2" if run.data_args.version_2_with_negative else "squad"
    return {"tasks": "question-answering", "dataset_tags": dataset, "dataset": dataset}


# The official scorers' scores, percentages; v2.0's counts and thresholds beside them (the threshold the answers were
# decoded with too); MRQA's macro averages, with each dataset's {dataset}_em and _f1.
_V2_COUNTS_AND_THRESHOLDS = ("total", "HasAns_total", "NoAns_total", "best_exact_thresh", "best_f1_thresh",
                             "null_score_diff_threshold")  # fmt: skip
SQUAD_REPORTS = {
    "squad": Report(V1_KEYS, "f1", PERCENTAGE, other=("samples",)),
    "squad_v2": Report(tuple(key for key in V2_KEYS if key not in _V2_COUNTS_AND_THRESHOLDS and not key.startswith(
        "best_")), "f1", PERCENTAGE, other=("samples", "best_exact", "best_f1", *_V2_COUNTS_AND_THRESHOLDS)),
    "mrqa": Report(("macro_em", "macro_f1"), "macro_f1", PERCENTAGE, named_by_data=r".+_(em|f1)", other=("samples",)),
}  # fmt: skip


def squad_variant(flags: dict[str, Any]) -> str:
    """v2.0 by its flag; MRQA when several evaluation files are given (only MRQA files may be), or one that holds
    MRQA's layout (a file that is not there yet, such as an ablation's split_by_article file, is SQuAD's)."""
    if flags.get("version_2_with_negative"):
        return "squad_v2"
    files = [path.strip() for path in str(flags.get("validation_file") or "").split(",") if path.strip()]
    if len(files) > 1 or (files and Path(files[0]).is_file() and is_mrqa_file(Path(files[0]))):
        return "mrqa"
    return "squad"


SQUAD = FineTuningTask(
    name="squad",
    task_arguments=(SquadArguments,),
    read=read_squad,
    prepare=prepare_squad,
    auto_class=AutoModelForQuestionAnswering,
    encode=encode_squad,
    # The checkpoint carries the question-answering pipeline's code (transformers 5 ships none).
    save_model=lambda trainer: save_qa_checkpoint(trainer, trainer.args.output_dir),
    score=score_squad,
    model_card=squad_card,
    reports=SQUAD_REPORTS,
    report_variant=squad_variant,
)
