"""What `--recipe electra` changes in a pretraining run: the model (an ELECTRA discriminator and generator, see
`spanroberta.models.modeling_electra_pretraining`) and the paper's training defaults. The data, masking, trainer and
checkpointing are the toolkit's own."""

from __future__ import annotations

import math
from pathlib import Path

from transformers import ElectraConfig, PreTrainedTokenizerBase

from ..models.modeling_electra_pretraining import GENERATOR_FOLDER, ElectraForReplacedTokenDetection, generator_config
from .arguments import PretrainingArguments, PretrainingModelArguments
from .checkpoint_loading import check_loading_report
from .cli import apply_defaults
from .recipes import ELECTRA_SIZES


def electra_training_defaults(model_args: PretrainingModelArguments, training_args: PretrainingArguments) -> dict:
    """ELECTRA's Table 6 for the model size: mask rate, learning rate, and the batch size reached through gradient
    accumulation over the processes and `--per_device_train_batch_size` (the other optimiser settings are the
    recipe's `flag_defaults`)."""
    size = ELECTRA_SIZES[model_args.model_size]
    defaults = {"mlm_probability": size.mask_rate}
    if size.learning_rate is not None:
        defaults["learning_rate"] = size.learning_rate
    if size.batch_size is not None:
        per_step = training_args.per_device_train_batch_size * max(training_args.world_size, 1)
        defaults["gradient_accumulation_steps"] = max(1, math.ceil(size.batch_size / per_step))
    return defaults


def apply_electra_defaults(arguments: tuple, given: set[str]) -> tuple:
    """`arguments` (model, data, training) with ELECTRA's defaults for every flag not in `given`."""
    model_args, _, training_args = arguments
    return apply_defaults(arguments, electra_training_defaults(model_args, training_args), given)


def build_electra_config(
    model_args: PretrainingModelArguments, tokenizer: PreTrainedTokenizerBase
) -> ElectraConfig:
    """The discriminator's config (with `rtd_loss_weight` and `generator_size`): Google's from
    --model_name_or_path, else ELECTRA's shape for --model_size."""
    if model_args.model_name_or_path:
        config = ElectraConfig.from_pretrained(model_args.model_name_or_path, **_hub_kwargs(model_args))
    else:
        config = ElectraConfig(
            **ELECTRA_SIZES[model_args.model_size].shape,
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            type_vocab_size=2 if "token_type_ids" in tokenizer.model_input_names else 1,
        )
        if model_args.embedding_size is not None:
            config.embedding_size = model_args.embedding_size
        config.generator_size = model_args.generator_size or ELECTRA_SIZES[model_args.model_size].generator_size
    config.rtd_loss_weight = model_args.rtd_loss_weight
    return config


def build_electra_model(
    model_args: PretrainingModelArguments, config: ElectraConfig
) -> ElectraForReplacedTokenDetection:
    """From scratch, or continuing from an ELECTRA discriminator and its generator (--generator_name_or_path, else
    the discriminator's generator/ folder)."""
    if not model_args.model_name_or_path:
        return ElectraForReplacedTokenDetection(config, generator_config(config, config.generator_size))
    generator_path = model_args.generator_name_or_path or str(Path(model_args.model_name_or_path) / GENERATOR_FOLDER)
    return ElectraForReplacedTokenDetection.from_pretrained_parts(
        model_args.model_name_or_path,
        generator_path,
        rtd_loss_weight=model_args.rtd_loss_weight,
        config=config,
        # Every weight of both parts must load: nothing is trained from silently random weights.
        check_loading=lambda path, report: check_loading_report(path, "electra", report, fresh_heads=()),
        **_hub_kwargs(model_args),
    )


def _hub_kwargs(model_args: PretrainingModelArguments) -> dict:
    return {"cache_dir": model_args.cache_dir, "revision": model_args.model_revision, "token": model_args.token}

