"""The flags every fine-tuning script shares (the model arguments extend the ones every script takes), and the
checks made on them before any data is read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import datasets
from transformers import TrainingArguments

from ..training.validation import check_range, check_run, require_output_dir


@dataclass
class ModelArguments:
    """Which checkpoint to fine-tune; the flags follow transformers' example scripts."""

    model_name_or_path: str = field(
        metadata={"help": "A folder written by save_pretrained or a Hub model id (spanroberta, RoBERTa, BERT, ...)."}
    )
    config_name: str | None = field(default=None, metadata={"help": "Config name or path, if not the model's."})
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer name or path, if not the model's."})
    cache_dir: str | None = field(default=None, metadata={"help": "Where downloads from the Hub are cached."})
    model_revision: str = field(default="main", metadata={"help": "Branch, tag or commit of the Hub model."})
    token: str | None = field(default=None, metadata={"help": "Hub token for private models."})
    trust_remote_code: bool = field(
        default=False, metadata={"help": "Allow code shipped with the checkpoint (needed without spanroberta installed)."}
    )
    attn_implementation: str | None = field(
        default=None,
        metadata={"help": "Attention kernel: sdpa, eager, flex_attention, flash_attention_2 or flash_attention_3 (these two "
                  "need the flash-attn package and a GPU). Default: transformers' choice (sdpa where available)."},
    )
    ignore_mismatched_sizes: bool = field(
        default=False,
        metadata={"help": "Load a checkpoint whose task head has other shapes (e.g. another number of labels); "
                  "those weights start fresh."},
    )


@dataclass
class FinetuningArguments(TrainingArguments):
    """TrainingArguments with the flags of transformers' example scripts that TrainingArguments lacks."""

    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Train in an --output_dir that holds another run: its checkpoints are deleted first, its "
                  "model overwritten. Without it (or --resume_from_checkpoint), such a folder is refused."},
    )
    overwrite_cache: bool = field(
        default=False, metadata={"help": "Redo the tokenizing instead of reusing the datasets cache."}
    )
    pad_to_max_length: bool = field(
        default=False,
        metadata={"help": "Pad every input to --max_seq_length (fixed shapes, e.g. for TPUs) instead of to the "
                  "longest in its batch."},
    )


def check_finetuning_run(
    model_args: ModelArguments, training_args: FinetuningArguments, given: set[str], sample_limits: dict[str, Any]
) -> None:
    """The checks made once the flags are parsed, before the data is read (see spanroberta.training.validation);
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
