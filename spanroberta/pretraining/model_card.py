"""The model card (README.md) a pretraining run writes beside its model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from transformers import PretrainedConfig, Trainer

if TYPE_CHECKING:
    from ..objectives import PretrainingObjective, ResolvedRecipe
    from .arguments import PretrainingDataArguments

_CARD = """---
library_name: transformers
tags:
- spanroberta
- fill-mask
- span-masking
---

# `{model_type}` checkpoint, pretrained with spanroberta

`run_pretraining.py`, recipe `{recipe_name}`.

| setting | value |
|---|---|
| masking | {recipe.masking} |
| span boundary objective | {recipe.sbo} |
| sentence objective | {recipe.sentence_objective} |
| input format | {recipe.input_format} |
| static masking | {recipe.static_masking} |
| encoder | {model_type}{encoder_shape} |
| layers / hidden / heads | {config.num_hidden_layers} / {config.hidden_size} / {config.num_attention_heads} |
| vocabulary | {config.vocab_size} |
| block length | {max_seq_length} |
| training data | {data} |
| steps | {steps} |

{metrics}

{usage}
"""


def write_model_card(
    trainer: Trainer,
    recipe: ResolvedRecipe,
    objective: PretrainingObjective,
    data_args: PretrainingDataArguments,
) -> None:
    """README.md in the output folder: the recipe as trained, the model's shape, the last evaluation, usage."""
    if not trainer.is_world_process_zero():
        return
    config = trainer.model.config
    eval_lines = [f"| {k} | {v:.4f} |" for k, v in trainer.state.log_history[-1].items() if k.startswith("eval_")]
    card = _CARD.format(
        recipe_name=data_args.recipe,
        recipe=recipe,
        config=config,
        model_type=type(config).model_type,
        encoder_shape=_albert_shape(config),
        max_seq_length=data_args.max_seq_length,
        data=data_args.dataset_name or data_args.train_file or f"prepared data in {data_args.prepared_data_dir}",
        steps=trainer.state.global_step,
        metrics="\n".join(["| metric | value |", "|---|---|", *eval_lines]) if eval_lines else "",
        usage=objective.model_card_usage(config),
    )
    Path(trainer.args.output_dir, "README.md").write_text(card, encoding="utf-8")


def _albert_shape(config: PretrainedConfig) -> str:
    """ALBERT's embedding size and sharing scheme, where the encoder has them."""
    if not hasattr(config, "cross_layer_sharing"):
        return ""
    return f" (embeddings {config.embedding_size}, layers share: {config.cross_layer_sharing})"
