"""A pretraining run's attention plan, made once before any data is read (`plan_attention`): which attention
implementation the model gets, whether rows are packed, whether packed rows take the documents' offsets, and why.
Everything later reads the plan: the config (`AttentionPlan.implementation`), the data stage (whether to pack),
the collator (`takes_offsets`) and the run-settings line (`describe`). The facts it weighs are the models':
`models/packed_attention.py` (which implementations run packed rows where, which apply dropout, and where torch's
flash kernel runs).

- Rows are packed (several documents a row, positions restarting at each) under the doc-sentences input format
  with --pack_documents, unless the encoder family cannot keep a packed row's sequences apart (DeBERTa-v2/v3):
  its rows then hold one document each, with a warning.
- Packed rows under an implementation that cannot run them here (flash attention outside spanroberta's RoBERTa
  encoder, flex_attention on CPU, varlen_fa2 in an encoder with sliding-window layers) are refused.
- With no --attn_implementation, packed rows take varlen_fa2 (each document alone through torch's flash kernel)
  where that kernel runs them: on CUDA under bf16 or fp16, a head size it trains, an encoder with no
  sliding-window layers, a torch built with flash attention 2 for CUDA (not ROCm) and no other flash backend
  activated: the GPU check at commit 43a84f0 (one H200) passed every CUDA test and timed packed rows faster under it
  than under the mask (benchmarks/RESULTS.md). Elsewhere they run under transformers' default, sdpa, with a
  block-diagonal mask, and the plan says why. An implementation given by --attn_implementation is always kept.
- An implementation that cannot apply attention dropout (flex_attention) is refused when the model keeps some:
  the recipe is never changed silently.
"""

from __future__ import annotations

import dataclasses
import logging

import torch
from transformers import CONFIG_MAPPING, AutoConfig, ElectraConfig, PretrainedConfig

from ..errors import UserInputError
from ..hub import hub_kwargs
from ..models.modeling_any_encoder import ENCODER_FAMILIES
from ..models.configuration_spanroberta import get_model_size
from ..models.modeling_electra_pretraining import ELECTRA_SIZES
from ..models.packed_attention import (
    ATTENTION_IMPLEMENTATIONS,
    VARLEN_FA2,
    head_size,
    packed_rows_refusal,
    refuses_dropout,
    varlen_fa2_refusal,
)
from ..objectives.base import ResolvedRecipe
from ..objectives.checkpoint_loading import ROBERTA_MODEL_TYPES
from ..objectives.masked_lm import ENCODER_CONFIGS
from .arguments import PretrainingArguments, PretrainingDataArguments, PretrainingModelArguments

logger = logging.getLogger(__name__)

# Config fields that hold attention dropout (ModernBERT's is attention_dropout).
_ATTENTION_DROPOUT_FIELDS = ("attention_probs_dropout_prob", "attention_dropout")
# BERT's attention dropout, which a checkpoint's config that names none gets from its class.
_BERT_ATTENTION_DROPOUT = 0.1
_PRECISION_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
_FLASH_KERNEL = "packed rows through torch's flash kernel"


@dataclasses.dataclass(frozen=True)
class EncoderFacts:
    """What the plan reads of the model the run will train, known before any data is read.

    model_type: the checkpoint's (or --config_name's); None where the recipe's encoder is built from scratch.
    head_size: the size of one attention head. attention_dropout: the attention dropout it trains with.
    flattens_rows: it runs flash attention on packed rows by flattening the batch (spanroberta's RoBERTa encoder)."""

    model_type: str | None
    head_size: int
    attention_dropout: float
    flattens_rows: bool

    @property
    def can_pack_rows(self) -> bool:
        """Whether its attention can keep a packed row's sequences apart (DeBERTa's cannot)."""
        family = ENCODER_FAMILIES.get(self.model_type)
        return family is None or family.packing is not None

    @property
    def has_sliding_window_layers(self) -> bool:
        """Whether it alternates full and sliding-window layers (ModernBERT), which need sdpa's per-layer masks."""
        family = ENCODER_FAMILIES.get(self.model_type)
        return family is not None and family.packing == "mask_per_attention_type"


@dataclasses.dataclass(frozen=True)
class AttentionRequest:
    """What the run asks of its attention, and where it runs.

    attn_implementation: --attn_implementation (None: the plan chooses). packed_rows_asked: doc-sentences rows under
    --pack_documents. precision: "bf16", "fp16" or "fp32", as the run's flags name it. batches_reach_the_model_whole:
    no nn.DataParallel or accelerate's dispatched batches, which cut every tensor along its first dimension and so
    would cut the documents' offsets wrongly (the model then derives them from the rows it gets)."""

    attn_implementation: str | None
    packed_rows_asked: bool
    device: torch.device
    precision: str
    batches_reach_the_model_whole: bool = True


@dataclasses.dataclass(frozen=True)
class AttentionPlan:
    """The run's attention, decided once (`plan_attention`).

    implementation: what the model's config gets (None: transformers' default, sdpa where the encoder has it).
    packs_rows: several documents share a row. takes_offsets: packed rows go through torch's flash kernel with the
    documents' offsets, which the collator computes on the host with each batch. reason: the path packed rows take
    and why, for the run-settings line (None: nothing to say, as for rows that are not packed). chosen_by: why the
    plan chose `implementation` where the user did not (None: the user's, or transformers' default)."""

    implementation: str | None
    packs_rows: bool
    takes_offsets: bool
    reason: str | None = None
    chosen_by: str | None = None

    def describe(self, resolved: str) -> str:
        """The attention as the run-settings line names it: `resolved`, the implementation the built model runs
        (transformers' default resolved), then the path packed rows take and why."""
        return resolved if self.reason is None else f"{resolved}: {self.reason}"


def plan_attention(request: AttentionRequest, encoder: EncoderFacts) -> AttentionPlan:
    """The run's attention plan; refuses (UserInputError) an implementation asked for that could not train it."""
    asked = request.attn_implementation
    packs = request.packed_rows_asked and encoder.can_pack_rows
    if request.packed_rows_asked and not packs:
        logger.warning(
            "%s cannot keep the sequences of a packed row apart (its attention builds its mask from a padding mask "
            "only), so doc-sentences rows hold one document's block each, padded (--pack_documents false).",
            encoder.model_type,
        )
    if asked is not None and packs:
        _check_packed_rows_attention(asked, request.device, encoder)
    _check_dropout(asked, encoder.attention_dropout)
    if not packs:
        return AttentionPlan(asked, packs_rows=False, takes_offsets=False)
    refusal = _varlen_fa2_refusal(request, encoder)
    whole = request.batches_reach_the_model_whole
    if asked is None and refusal is None:
        return AttentionPlan(VARLEN_FA2, True, whole, _FLASH_KERNEL, f"packed rows on cuda under {request.precision}")
    if asked in (None, VARLEN_FA2) and refusal is not None:
        return AttentionPlan(asked, True, False, f"packed rows under sdpa's block-diagonal mask, since {refusal}")
    if asked == VARLEN_FA2:
        return AttentionPlan(asked, True, whole, _FLASH_KERNEL)
    if asked == "sdpa" and refusal is None:
        recommendation = f"--attn_implementation {VARLEN_FA2} would run them through torch's flash kernel here"
        return AttentionPlan(asked, True, False, f"packed rows under its block-diagonal mask; {recommendation}")
    return AttentionPlan(asked, packs_rows=True, takes_offsets=False)


def plan_run_attention(
    model_args: PretrainingModelArguments,
    data_args: PretrainingDataArguments,
    training_args: PretrainingArguments,
    recipe: ResolvedRecipe,
) -> AttentionPlan:
    """`plan_attention` for the run's flags, its device and the model its config will build."""
    request = AttentionRequest(
        attn_implementation=model_args.attn_implementation,
        packed_rows_asked=recipe.input_format == "doc-sentences" and data_args.pack_documents,
        device=training_args.device,
        precision=run_precision(training_args),
        batches_reach_the_model_whole=_batches_reach_the_model_whole(training_args),
    )
    return plan_attention(request, read_encoder_facts(model_args, recipe))


def run_precision(training_args: PretrainingArguments) -> str:
    """The run's precision as its flags name it: "bf16", "fp16" or "fp32"."""
    return "bf16" if training_args.bf16 else "fp16" if training_args.fp16 else "fp32"


def _batches_reach_the_model_whole(training_args: PretrainingArguments) -> bool:
    """Whether each batch the collator makes reaches one model whole (see `AttentionRequest`)."""
    dispatched = getattr(training_args.accelerator_config, "dispatch_batches", None)
    return training_args.n_gpu <= 1 and not dispatched


def _varlen_fa2_refusal(request: AttentionRequest, encoder: EncoderFacts) -> str | None:
    """Why varlen_fa2's kernel would not train this run's packed rows (None: it would). The default takes it on CUDA
    only, where the GPU check measured it."""
    if encoder.has_sliding_window_layers:
        return "this encoder has sliding-window layers, which need sdpa's per-layer masks"
    refusal = varlen_fa2_refusal(request.device, _PRECISION_DTYPES[request.precision], encoder.head_size,
                                 encoder.attention_dropout, backward=True)  # fmt: skip
    if refusal is None and request.device.type != "cuda" and request.attn_implementation is None:
        return f"{VARLEN_FA2} is the default for packed rows on cuda only"
    return refusal


def _check_packed_rows_attention(attention: str, device: torch.device, encoder: EncoderFacts) -> None:
    """Refuses an attention implementation asked for that cannot run packed rows here (transformers' default,
    sdpa with a block-diagonal mask, runs them on every device)."""
    refusal = packed_rows_refusal(attention, device, encoder.flattens_rows)
    if refusal is not None:
        hint = "" if "--pack_documents false" in refusal else " Or train one document per row: --pack_documents false."
        raise UserInputError(refusal + hint)
    if attention == VARLEN_FA2 and encoder.has_sliding_window_layers:
        raise UserInputError(
            f"--attn_implementation {VARLEN_FA2} runs every layer over whole sequences, and this encoder has "
            "sliding-window layers: use sdpa or eager for its packed rows, or --pack_documents false."
        )


def _check_dropout(attention: str | None, dropout: float) -> None:
    if refuses_dropout(attention) and dropout > 0:
        others = ", ".join(other for other in ATTENTION_IMPLEMENTATIONS if not refuses_dropout(other))
        raise UserInputError(
            f"--attn_implementation {attention} cannot apply attention dropout, and this model keeps an attention "
            f"dropout of {dropout:g} in training, as its recipe or checkpoint has it; the run would stop at its "
            f"first step. Choose another attention implementation ({others}), or "
            "train without attention dropout, a change to the recipe: --config_overrides "
            "attention_probs_dropout_prob=0."
        )


def read_encoder_facts(model_args: PretrainingModelArguments, recipe: ResolvedRecipe) -> EncoderFacts:
    """The facts the plan reads of the run's model, from the config the objective will build it from, read here
    before any data: the checkpoint's (or --config_name's), else the recipe's encoder at --model_size, with
    --config_overrides (one that does not parse is left out: building the config refuses it, in its own words)."""
    source = model_args.config_name or model_args.model_name_or_path
    if source:
        values, _ = PretrainedConfig.get_config_dict(source, **hub_kwargs(model_args))
        model_type = values.get("model_type")
        # The family's own class, which maps its field names (DistilBERT's `dim`) to the common ones.
        known = model_type in CONFIG_MAPPING
        config = AutoConfig.for_model(**values) if known else PretrainedConfig.from_dict(values)
    else:
        config, model_type = _fresh_config(model_args.model_size, recipe), None
    if model_args.config_overrides:
        try:
            config.update_from_string(model_args.config_overrides)
        except ValueError:
            pass
    dropouts = [getattr(config, name) for name in _ATTENTION_DROPOUT_FIELDS if hasattr(config, name)]
    # Only spanroberta's RoBERTa encoder runs packed rows under flash attention (it flattens the batch).
    roberta = model_type in ROBERTA_MODEL_TYPES if model_type else recipe.encoder == "roberta"
    return EncoderFacts(
        model_type=model_type,
        head_size=head_size(config),
        attention_dropout=float(max(dropouts)) if dropouts else _BERT_ATTENTION_DROPOUT,
        flattens_rows=recipe.objective == "masked_lm" and roberta,
    )


def _fresh_config(model_size: str, recipe: ResolvedRecipe) -> PretrainedConfig:
    """The recipe's encoder at `model_size`, as the objective builds it from scratch (its vocabulary aside)."""
    if recipe.objective == "replaced_token_detection":
        return ElectraConfig(**ELECTRA_SIZES[model_size].shape)
    return ENCODER_CONFIGS[recipe.encoder](**get_model_size(model_size))
