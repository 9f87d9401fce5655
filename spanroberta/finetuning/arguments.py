"""The flags every fine-tuning script shares (the model arguments extend the ones every script takes), and the
checks made on them before any data is read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import datasets

from ..errors import UserInputError
from ..runs.arguments import ModelArguments, RunArguments
from ..runs.ranges import check_range
from ..runs.validation import check_run, require_output_dir


@dataclass
class FinetuningModelArguments(ModelArguments):
    """The model flags every script takes (a checkpoint is required here), and the fine-tuning scripts' own."""

    ignore_mismatched_sizes: bool = field(
        default=False,
        metadata={"help": "Load a checkpoint whose task head has other shapes (e.g. another number of labels); "
                  "those weights start fresh."},
    )

    def __post_init__(self):
        if self.model_name_or_path is None:
            raise UserInputError("--model_name_or_path is required: the checkpoint to fine-tune (a folder written by "
                                 "save_pretrained or a Hub model id).")


@dataclass
class FinetuningArguments(RunArguments):
    """The training flags every script takes, and the data-handling flags of transformers' example scripts."""

    overwrite_cache: bool = field(
        default=False, metadata={"help": "Redo the tokenizing instead of reusing the datasets cache."}
    )
    pad_to_max_length: bool = field(
        default=False,
        metadata={"help": "Pad every input to --max_seq_length (fixed shapes, e.g. for TPUs) instead of to the "
                  "longest in its batch."},
    )


@dataclass(kw_only=True)
class SampleLimitArguments:
    """The flags that cut each split of a task's data to its first N examples (a question-answering example is a
    question), declared once for the tasks with train, evaluation and test splits: their data arguments inherit
    them. Keyword-only, so that a task's own fields, required ones included, may follow them."""

    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training examples."})
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Keep the first N evaluation examples (of each evaluation set or file)."}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={"help": "Keep the first N test examples (of each test set or file)."}
    )


def check_finetuning_run(
    model_args: FinetuningModelArguments,
    training_args: FinetuningArguments,
    given: set[str],
    sample_limits: dict[str, Any],
) -> None:
    """The checks made once the flags are parsed, before the data is read (see spanroberta.runs.validation);
    `sample_limits` maps the --max_*_samples flags to their values."""
    require_output_dir(given)
    for flag, value in sample_limits.items():
        check_range(flag, value, 1)
    check_run(model_args, training_args, trains=training_args.do_train)
    if training_args.overwrite_cache:
        # Not reusing cache files is what makes `datasets` recompute the tokenizing.
        datasets.disable_caching()


def padding(training_args: FinetuningArguments, max_seq_length: int) -> dict[str, Any]:
    """The collator's padding settings: to --max_seq_length under --pad_to_max_length, else to the longest
    input of each batch (to a multiple of 8 under mixed precision, for the tensor cores)."""
    if training_args.pad_to_max_length:
        return {"padding": "max_length", "max_length": max_seq_length}
    return {"pad_to_multiple_of": 8 if training_args.fp16 or training_args.bf16 else None}
