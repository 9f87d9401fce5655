"""How every fine-tuning script loads a checkpoint with the Auto classes (from a folder or the Hub), trains it
(resuming if asked), saves it and publishes it."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from transformers import AutoConfig, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase, Trainer

from ..errors import UserInputError
from ..hub import hub_kwargs
from ..models.configuration_spanroberta import returns_mean_loss
from ..runs.checkpoints import resume_checkpoint
from ..runs.distributed import drop_unused_weight_conversions
from ..runs.run_length import fit_to_run_length
from .arguments import FinetuningModelArguments


def load_config_and_tokenizer(
    model_args: FinetuningModelArguments, **config_overrides: Any
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


def load_model(model_args: FinetuningModelArguments, auto_class: type, config: Any) -> PreTrainedModel:
    """Loads the checkpoint's weights into the task head chosen by `auto_class` (e.g. AutoModelForQuestionAnswering)."""
    model = auto_class.from_pretrained(
        model_args.model_name_or_path, config=config, ignore_mismatched_sizes=model_args.ignore_mismatched_sizes,
        **_hub_kwargs(model_args),
        **({"attn_implementation": model_args.attn_implementation} if model_args.attn_implementation else {}),
    )
    drop_unused_weight_conversions(model)
    # Any checkpoint's task head, stock transformers' too, returns a plain mean (models/configuration_spanroberta.py).
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


def _hub_kwargs(model_args: FinetuningModelArguments) -> dict[str, Any]:
    return {**hub_kwargs(model_args), "trust_remote_code": model_args.trust_remote_code}
