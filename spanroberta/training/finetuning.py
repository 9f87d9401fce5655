"""What the fine-tuning scripts (run_squad.py, run_glue.py, run_race.py) share: the model arguments and
how a checkpoint is loaded with the Auto classes, from a folder or the Hub."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from transformers import AutoConfig, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase, Trainer


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


def load_config_and_tokenizer(
    model_args: ModelArguments, **config_overrides: Any
) -> tuple[Any, PreTrainedTokenizerBase]:
    """Loads the config (with task-specific overrides such as num_labels) and the tokenizer."""
    hub_kwargs = _hub_kwargs(model_args)
    config = AutoConfig.from_pretrained(
        model_args.config_name or model_args.model_name_or_path, **config_overrides, **hub_kwargs
    )
    tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name or model_args.model_name_or_path, **hub_kwargs)
    return config, tokenizer


def load_model(model_args: ModelArguments, auto_class: type, config: Any) -> PreTrainedModel:
    """Loads the checkpoint's weights into the task head chosen by `auto_class` (e.g. AutoModelForQuestionAnswering)."""
    model = auto_class.from_pretrained(model_args.model_name_or_path, config=config, **_hub_kwargs(model_args))
    # The task heads take **kwargs, so transformers 5's Trainer believes they normalise their loss by
    # `num_items_in_batch` and stops dividing by the gradient-accumulation steps; they return a plain mean,
    # which would then be inflated by the accumulation factor. Declaring it keeps the Trainer's division.
    model.accepts_loss_kwargs = False
    return model


def train_and_save(trainer: Trainer, save_model: Callable[[Trainer], None] | None = None) -> None:
    """Trains (resuming from `--resume_from_checkpoint` if given), saves the model (with `save_model` if given,
    else `trainer.save_model()`), then logs and saves the training metrics and the trainer state, as
    transformers' example scripts do."""
    result = trainer.train(resume_from_checkpoint=trainer.args.resume_from_checkpoint)
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
    return {
        "cache_dir": model_args.cache_dir,
        "revision": model_args.model_revision,
        "token": model_args.token,
        "trust_remote_code": model_args.trust_remote_code,
    }
