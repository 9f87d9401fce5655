"""Whether a pretraining run packs its rows, and whether its attention implementation can train it: decided here
once, before any data is read, from the facts `models/packing.py` states about each implementation.

- Rows are packed (several documents a row, positions restarting at each) under the doc-sentences input format
  with --pack_documents, unless the encoder family cannot keep a packed row's sequences apart (DeBERTa-v2/v3):
  its rows then hold one document each, with a warning.
- Packed rows under an implementation that cannot run them here (flash attention outside spanroberta's RoBERTa
  encoder, flex_attention on CPU) are refused.
- With no --attn_implementation, packed rows take varlen_fa2 (each document alone through torch's flash kernel,
  `models/varlen_attention.py`) where that kernel runs them: on CUDA under bf16 or fp16, a head size it takes, an
  encoder with no sliding-window layers: the GPU check at commit 43a84f0 (one H200) passed every CUDA test and
  timed packed rows faster under it than under the mask (benchmarks/RESULTS.md). Elsewhere (CPU, fp32, ...) they run
  under transformers' default, sdpa, with a block-diagonal mask. The run-settings line names the path and why
  (`describe_attention`); an implementation given by --attn_implementation is always kept.
- An implementation that cannot apply attention dropout (flex_attention) is refused when the model keeps some:
  the recipe is never changed silently.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import torch
from transformers import ElectraConfig, PretrainedConfig

from ..errors import UserInputError
from ..hub import hub_kwargs
from ..models.modeling_any_encoder import ENCODER_FAMILIES
from ..models.packing import (
    ATTENTION_IMPLEMENTATIONS,
    head_size,
    packed_rows_refusal,
    refuses_dropout,
)
from ..models.varlen_attention import VARLEN_FA2, varlen_fa2_refusal
from ..objectives.base import ResolvedRecipe
from ..objectives.checkpoint_loading import ROBERTA_MODEL_TYPES, checkpoint_model_type
from ..objectives.masked_lm import ENCODER_CONFIGS

logger = logging.getLogger(__name__)

# Config fields that hold attention dropout (ModernBERT's is attention_dropout).
_ATTENTION_DROPOUT_FIELDS = ("attention_probs_dropout_prob", "attention_dropout")
# BERT's attention dropout, which a checkpoint's config that names none gets from its class.
_BERT_ATTENTION_DROPOUT = 0.1


def packs_rows(recipe: ResolvedRecipe, data_args: Any) -> bool:
    """Whether the run's rows hold several documents each (doc-sentences rows under --pack_documents)."""
    return recipe.input_format == "doc-sentences" and data_args.pack_documents


def plan_packing(model_args: Any, data_args: Any, recipe: ResolvedRecipe, device: torch.device) -> Any:
    """`data_args` with packing turned off where the encoder family cannot pack; refuses (UserInputError) an
    attention implementation (--attn_implementation, None: transformers' default) that could not train this run."""
    source = model_args.model_name_or_path or model_args.config_name
    model_type = checkpoint_model_type(source, model_args) if source else None
    family = ENCODER_FAMILIES.get(model_type)
    if family is not None and family.packing is None and packs_rows(recipe, data_args):
        logger.warning(
            "%s cannot keep the sequences of a packed row apart (its attention builds its mask from a padding mask "
            "only), so doc-sentences rows hold one document's block each, padded (--pack_documents false).",
            model_type,
        )
        data_args = dataclasses.replace(data_args, pack_documents=False)
    attention = model_args.attn_implementation
    if attention is not None and packs_rows(recipe, data_args):
        # Only spanroberta's RoBERTa encoder runs packed rows under flash attention (it flattens the batch).
        flattens_rows = recipe.objective == "masked_lm" and (
            model_type in ROBERTA_MODEL_TYPES if model_type else recipe.encoder == "roberta"
        )
        _check_packed_rows_attention(attention, device, flattens_rows, _has_sliding_window_layers(model_type))
    _check_dropout(attention, model_args, recipe)
    return data_args


def _check_packed_rows_attention(attention: str, device: torch.device, flattens_rows: bool,
                                 sliding_window: bool) -> None:  # fmt: skip
    """Refuses an attention implementation asked for that cannot run packed rows here (transformers' default,
    sdpa with a block-diagonal mask, runs them on every device)."""
    refusal = packed_rows_refusal(attention, device, flattens_rows)
    if refusal is not None:
        hint = "" if "--pack_documents false" in refusal else " Or train one document per row: --pack_documents false."
        raise UserInputError(refusal + hint)
    if attention == VARLEN_FA2 and sliding_window:
        raise UserInputError(
            f"--attn_implementation {VARLEN_FA2} runs every layer over whole sequences, and this encoder has "
            "sliding-window layers: use sdpa or eager for its packed rows, or --pack_documents false."
        )


def _has_sliding_window_layers(model_type: str | None) -> bool:
    """Whether the encoder family alternates full and sliding-window layers (ModernBERT), which need sdpa's
    per-layer masks for packed rows."""
    family = ENCODER_FAMILIES.get(model_type)
    return family is not None and family.packing == "mask_per_attention_type"


def choose_packed_rows_attention(config: PretrainedConfig, model_args: Any, training_args: Any,
                                 packed: bool) -> str | None:  # fmt: skip
    """Where no --attn_implementation was given and varlen_fa2's kernel would run the run's packed rows on CUDA,
    sets it on `config` (before the model is built from it) and returns why, for the run-settings line; otherwise
    None. Only CUDA: the default stands on what the GPU check measured there."""
    if (model_args.attn_implementation is not None or not packed or training_args.device.type != "cuda"
            or _varlen_fa2_refusal(config, training_args)):  # fmt: skip
        return None
    config._attn_implementation = VARLEN_FA2
    return f"packed rows on cuda under {_precision(training_args)}"


def describe_attention(config: PretrainedConfig, training_args: Any, packed: bool) -> str:
    """The attention implementation as the run-settings line names it. With packed rows: under varlen_fa2, the
    path they take (the flash kernel, or the block-diagonal mask and why); under sdpa, where varlen_fa2's kernel
    would run them (on CUDA under bf16 or fp16, an encoder with no sliding-window layers), a recommendation of it."""
    name = config._attn_implementation
    if not packed or name not in ("sdpa", VARLEN_FA2):
        return name
    refusal = _varlen_fa2_refusal(config, training_args)
    if name == "sdpa":
        if refusal:
            return name
        return (f"{name}: packed rows under its block-diagonal mask; --attn_implementation {VARLEN_FA2} would run them "
                "through torch's flash kernel here")  # fmt: skip
    if refusal:
        return f"{name}: packed rows under sdpa's block-diagonal mask, since {refusal}"
    return f"{name}: packed rows through torch's flash kernel"


def _varlen_fa2_refusal(config: PretrainedConfig, training_args: Any) -> str | None:
    """Why varlen_fa2's kernel would not run this run's packed rows (None: it would)."""
    if _has_sliding_window_layers(config.model_type):
        return "this encoder has sliding-window layers, which need sdpa's per-layer masks"
    return varlen_fa2_refusal(training_args.device, _training_dtype(training_args), head_size(config))


def _precision(training_args: Any) -> str:
    """The run's precision, as its flags name it."""
    return "bf16" if training_args.bf16 else "fp16" if training_args.fp16 else "fp32"


def _training_dtype(training_args: Any) -> torch.dtype:
    """The dtype autocast computes attention in under the run's precision flags."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[_precision(training_args)]


def _check_dropout(attention: str | None, model_args: Any, recipe: ResolvedRecipe) -> None:
    if not refuses_dropout(attention):
        return
    dropout = _attention_dropout(model_args, recipe)
    if dropout > 0:
        others = ", ".join(other for other in ATTENTION_IMPLEMENTATIONS if not refuses_dropout(other))
        raise UserInputError(
            f"--attn_implementation {attention} cannot apply attention dropout, and this model keeps an attention "
            f"dropout of {dropout:g} in training, as its recipe or checkpoint has it; the run would stop at its "
            f"first step. Choose another attention implementation ({others}), or "
            "train without attention dropout, a change to the recipe: --config_overrides "
            "attention_probs_dropout_prob=0."
        )


def _attention_dropout(model_args: Any, recipe: ResolvedRecipe) -> float:
    """The attention dropout the run's model will have: --config_overrides', else the checkpoint's (or
    --config_name's), else the recipe's encoder's built from scratch."""
    overrides = dict(
        pair.split("=", 1) for pair in (model_args.config_overrides or "").split(",") if "=" in pair
    )
    given = [overrides[name] for name in _ATTENTION_DROPOUT_FIELDS if name in overrides]
    if given:
        try:
            return max(float(value) for value in given)
        except ValueError:
            pass  # not a number: building the config refuses it, in its own words
    source = model_args.config_name or model_args.model_name_or_path
    if source:
        values, _ = PretrainedConfig.get_config_dict(source, **hub_kwargs(model_args))
        fields = [values[name] for name in _ATTENTION_DROPOUT_FIELDS if name in values]
        return max(fields) if fields else _BERT_ATTENTION_DROPOUT
    config_class = ElectraConfig if recipe.objective == "replaced_token_detection" else ENCODER_CONFIGS[recipe.encoder]
    return config_class().attention_probs_dropout_prob
