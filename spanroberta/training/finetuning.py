"""What the fine-tuning scripts (run_squad.py, run_glue.py, run_race.py, run_relation.py) share: the model and
training arguments, the checks made before a model is loaded, how a checkpoint is loaded with the Auto classes (from
a folder or the Hub), trained (resuming if asked) and saved."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import datasets
from transformers import AutoConfig, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase, Trainer, TrainingArguments

from ..errors import UserInputError
from ..hub import hub_kwargs
from ..models.conventions import returns_mean_loss
from .checkpoints import resume_checkpoint
from .distributed import drop_unused_weight_conversions
from .run_length import fit_to_run_length
from .validation import check_range, check_run, require_output_dir


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


def load_config_and_tokenizer(
    model_args: ModelArguments, **config_overrides: Any
) -> tuple[Any, PreTrainedTokenizerBase]:
    """Loads the config (with task-specific overrides such as num_labels) and the tokenizer."""
    hub_settings = _hub_kwargs(model_args)
    config_source = model_args.config_name or model_args.model_name_or_path
    tokenizer_source = model_args.tokenizer_name or model_args.model_name_or_path
    try:
        config = AutoConfig.from_pretrained(config_source, **config_overrides, **hub_settings)
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_source, **hub_settings)
    # What check_run cannot see before a download: a Hub id that does not exist, no network, no access.
    except OSError as error:
        raise UserInputError(f"Could not load {config_source} or {tokenizer_source}: {error}") from None
    return config, tokenizer


def load_model(model_args: ModelArguments, auto_class: type, config: Any) -> PreTrainedModel:
    """Loads the checkpoint's weights into the task head chosen by `auto_class` (e.g. AutoModelForQuestionAnswering)."""
    model = auto_class.from_pretrained(
        model_args.model_name_or_path, config=config, ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
        **_hub_kwargs(model_args),
        **({"attn_implementation": model_args.attn_implementation} if model_args.attn_implementation else {}),
    )
    drop_unused_weight_conversions(model)
    # Any checkpoint's task head, stock transformers' too, returns a plain mean (models/conventions.py).
    return returns_mean_loss(model)


def train_and_save(
    trainer: Trainer, given: Collection[str] | None, save_model: Callable[[Trainer], None] | None = None
) -> None:
    """Trains (resuming under `--resume_from_checkpoint`, as run_pretraining.py does), saves the model (with
    `save_model` if given, else `trainer.save_model()`), then logs and saves the training metrics and the
    trainer state, as transformers' example scripts do. `given` (the flags set) says which of the warm-up and
    logging interval may be fitted to the run's length (`run_length.fit_to_run_length`; the optimiser and
    schedule are built in `train`, after it)."""
    fit_to_run_length(trainer.args, given, trainer.train_dataset)
    result = trainer.train(resume_from_checkpoint=resume_checkpoint(trainer))
    if save_model is None:
        trainer.save_model()
    else:
        save_model(trainer)
    metrics = {**result.metrics, "train_samples": len(trainer.train_dataset)}
    trainer.log_metrics("train", metrics)
    trainer.save_metrics("train", metrics)
    trainer.save_state()


def publish(trainer: Trainer, model_card: dict[str, Any]) -> None:
    """Pushes the fine-tuned model to the Hub with `--push_to_hub`, or else writes its model card locally."""
    if trainer.args.push_to_hub:
        trainer.push_to_hub(**model_card)
    elif trainer.args.do_train:
        trainer.create_model_card(**model_card)


def _hub_kwargs(model_args: ModelArguments) -> dict[str, Any]:
    return {**hub_kwargs(model_args), "trust_remote_code": model_args.trust_remote_code}
