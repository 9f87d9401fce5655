"""Continued pretraining of transformers' own masked-LM encoders (BERT, and so SpanBERT's released checkpoints;
DistilBERT; ModernBERT; DeBERTa-v2/v3) with SpanBERT's objectives, without changing their architecture.

One path serves every family: `span_pretraining_class(model_class)` takes the family's stock class, as
`AutoModelForMaskedLM` (or `AutoModelForPreTraining`, for the family's sentence head: BERT's NSP) maps its config,
and mixes `EncoderSpanPreTrainingMixin` into it. The result has the stock modules under the stock names, plus
`sbo_head` (SpanBERT section 3.2) on the encoder's last hidden states; its forward pass is
`SpanPreTrainingMixin`'s (the one spanroberta's own encoders use: MLM and SBO read at the collator's prediction
slots, the optional sentence head, the same losses, output fields and `loss_normalisers`). What differs between
families is a few facts, kept as data in `ENCODER_FAMILIES`: where the MLM head's transform and decoder are (so
that the head runs on the gathered slots only, never over [batch, length, vocab]), where the sentence head is, and
how a packed row's sequences are kept apart.

Saving writes the stock checkpoint (the stock class loads it with every encoder and MLM-head weight, no
spanroberta needed) and the SBO head beside it in `SBO_HEAD_FILE`, which stock loaders never read and the next
continuation loads back (`load_sbo_head`). The SBO decoder is tied to the word embeddings and is not stored.

Positions stay the family's own: BERT's, DistilBERT's and DeBERTa's absolute positions and ModernBERT's rotary ones
start at 0, so `first_position_id(config)`, and with it the collator, answers 0 for them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import ModelOutput

from .configuration_spanroberta import SpanHeadSettings
from .modeling_span_heads import SpanPreTrainingMixin
from .packed_attention import packed_attention_inputs

SBO_HEAD_FILE = "sbo_head.safetensors"
SBO_PREFIX = "sbo_head."

# The settings of the pretraining heads that a continued encoder's config carries (as SpanRobertaConfig's do),
# with their defaults.
SPAN_HEAD_DEFAULTS = {setting.name: setting.default for setting in dataclasses.fields(SpanHeadSettings)}


@dataclass(frozen=True)
class MlmHeadLayout:
    """Where a masked-LM class keeps its head: `transform`, the submodules applied in order to the hidden states
    before the decoder; `decoder`, the vocabulary projection (an nn.Linear), or None where the head multiplies by
    the word embeddings itself and adds `decoder_bias` (DeBERTa-v2 with `legacy=False`)."""

    transform: tuple[str, ...]
    decoder: str | None = None
    decoder_bias: str | None = None


@dataclass(frozen=True)
class EncoderFamily:
    """What spanroberta needs to know of a transformers encoder family.

    mlm_heads: the layouts its masked-LM class may have (the first whose modules exist is used).
    sentence_objective, pooler, sentence_classifier: the family's sentence head in its `AutoModelForPreTraining`
        class, if it has one (BERT: NSP, the pooler then a 2-way classifier).
    packing: how packed rows (restarting `position_ids`) are kept apart: "mask" (the base model takes a ready
        4D/block mask as its attention_mask), "mask_per_attention_type" (ModernBERT: one for its global and one for
        its sliding-window layers), or None: its attention cannot take such a mask, so rows are not packed.
    """

    mlm_heads: tuple[MlmHeadLayout, ...]
    sentence_objective: str | None = None
    pooler: str | None = None
    sentence_classifier: str | None = None
    packing: str | None = "mask"


ENCODER_FAMILIES: dict[str, EncoderFamily] = {
    "bert": EncoderFamily(
        mlm_heads=(MlmHeadLayout(("cls.predictions.transform",), "cls.predictions.decoder"),),
        sentence_objective="nsp",
        pooler="bert.pooler",
        sentence_classifier="cls.seq_relationship",
    ),
    "distilbert": EncoderFamily(
        mlm_heads=(MlmHeadLayout(("vocab_transform", "activation", "vocab_layer_norm"), "vocab_projector"),)
    ),
    "modernbert": EncoderFamily(
        mlm_heads=(MlmHeadLayout(("head",), "decoder"),), packing="mask_per_attention_type"
    ),
    # DeBERTa-v3 checkpoints are DeBERTa-v2 models. DebertaV2Model builds its attention mask from a 2D one only
    # (its embeddings multiply by the mask), so a packed row's sequences cannot be kept apart.
    "deberta-v2": EncoderFamily(
        mlm_heads=(
            MlmHeadLayout(("cls.predictions.transform",), "cls.predictions.decoder"),
            MlmHeadLayout(
                ("lm_predictions.lm_head.dense", "lm_predictions.lm_head.transform_act_fn",
                 "lm_predictions.lm_head.LayerNorm"),
                decoder_bias="lm_predictions.lm_head.bias",
            ),  # fmt: skip
        ),
        packing=None,
    ),
}


def add_span_head_settings(config: PretrainedConfig, **settings) -> PretrainedConfig:
    """Sets the pretraining heads' settings on a stock config: `settings` where given, else the config's own (a
    continued checkpoint keeps its SBO head's shape), else SPAN_HEAD_DEFAULTS."""
    for name, default in SPAN_HEAD_DEFAULTS.items():
        value = settings[name] if settings.get(name) is not None else getattr(config, name, default)
        setattr(config, name, value)
    return config


class _WordEmbeddingDecoder(nn.Module):
    """The decoder of a head that multiplies by the word embeddings itself: an nn.Linear's interface (weight,
    bias, forward) over the shared tensors, made per call and never part of the model."""

    def __init__(self, weight: nn.Parameter, bias: nn.Parameter):
        super().__init__()
        self.weight, self.bias = weight, bias

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return F.linear(features, self.weight, self.bias)


class EncoderSpanPreTrainingMixin(SpanPreTrainingMixin):
    """SpanBERT's objectives over a stock masked-LM (or pretraining) class; see the module's docstring. The config
    is the stock one with the heads' settings (`add_span_head_settings`)."""

    def post_init(self) -> None:
        # Runs at the end of the stock __init__, once every stock module exists. What the forward pass looks up is
        # resolved here, once, rather than on every call (which would also cut a compiled graph).
        self._mlm_layout = self._find_mlm_head()
        self._encoder_arguments = frozenset(inspect.signature(self.base_model.forward).parameters)
        self._add_sbo_head()
        super().post_init()

    @property
    def family(self) -> EncoderFamily:
        return ENCODER_FAMILIES[type(self.config).model_type]

    def _sbo_head_settings(self) -> SimpleNamespace:
        config = self.config
        return SimpleNamespace(
            hidden_size=config.hidden_size,
            vocab_size=config.vocab_size,
            max_span_targets=config.max_span_targets,
            sbo_position_embedding_size=config.sbo_position_embedding_size,
            # ModernBERT names its epsilon norm_eps; the decoder is as wide as the (tied) word embeddings.
            layer_norm_eps=getattr(config, "layer_norm_eps", getattr(config, "norm_eps", 1e-12)),
            embedding_size=self.get_input_embeddings().embedding_dim,
        )

    def _find_mlm_head(self) -> MlmHeadLayout:
        for layout in self.family.mlm_heads:
            if all(_has_submodule(self, name) for name in layout.transform):
                return layout
        raise ValueError(f"{type(self).__name__} has none of the MLM head layouts spanroberta knows for its family.")

    def _mlm_features(self, states: torch.Tensor) -> torch.Tensor:
        for name in self._mlm_layout.transform:
            states = self.get_submodule(name)(states)
        return states

    def _mlm_decoder(self) -> nn.Module:
        layout = self._mlm_layout
        if layout.decoder is not None:
            return self.get_submodule(layout.decoder)
        bias = self.get_parameter(layout.decoder_bias)
        return _WordEmbeddingDecoder(self.get_input_embeddings().weight, bias)

    def _sentence_logits(self, first_token_states: torch.Tensor) -> torch.Tensor:
        family = self.family
        pooled = self.get_submodule(family.pooler)(first_token_states)
        return self.get_submodule(family.sentence_classifier)(pooled)

    def _encode(self, encoder_inputs: dict, kwargs: dict) -> ModelOutput:
        """The stock encoder on the inputs it takes (ModernBERT has no token types); packed rows get a mask that
        keeps each sequence to itself (see `EncoderFamily.packing`)."""
        inputs = {
            name: value
            for name, value in encoder_inputs.items()
            if value is not None and name in self._encoder_arguments
        }
        if inputs.get("position_ids") is not None:
            inputs.update(self._packed_attention_inputs(inputs.get("attention_mask"), inputs["position_ids"],
                                                        encoder_inputs.get("sequence_offsets")))  # fmt: skip
        return self.base_model(**inputs, return_dict=True, **kwargs)

    def _packed_attention_inputs(
        self, attention_mask: torch.Tensor | None, position_ids: torch.Tensor, sequence_offsets: torch.Tensor | None
    ) -> dict:
        packing = self.family.packing
        if packing is None:
            raise ValueError(
                f"Packed rows (position_ids) cannot be kept apart in {self.config.model_type}; give one sequence "
                "per row."
            )
        per_attention_type = packing == "mask_per_attention_type"
        return packed_attention_inputs(self, attention_mask, position_ids, per_attention_type=per_attention_type,
                                       sequence_offsets=sequence_offsets)  # fmt: skip

    # Saving and loading: the stock checkpoint, and the SBO head beside it.

    def save_pretrained(self, save_directory, state_dict: dict | None = None, **kwargs) -> None:
        """The stock checkpoint (every weight but the SBO head's) and `SBO_HEAD_FILE` beside it."""
        from safetensors.torch import save_file

        state_dict = self.state_dict() if state_dict is None else state_dict
        stock = {name: value for name, value in state_dict.items() if not name.startswith(SBO_PREFIX)}
        super().save_pretrained(save_directory, state_dict=stock, **kwargs)
        tied = set(self._tied_weights_keys)
        sbo_head = {
            name[len(SBO_PREFIX):]: value.contiguous()
            for name, value in state_dict.items()
            if name.startswith(SBO_PREFIX) and name not in tied
        }
        if sbo_head and kwargs.get("is_main_process", True):
            save_file(sbo_head, str(Path(save_directory) / SBO_HEAD_FILE), metadata={"format": "pt"})

    def load_sbo_head(self, path: str | None) -> bool:
        """Loads the SBO head saved by `save_pretrained` from the file `path` (None: nothing to load); returns
        whether it did. A head of another shape is an error, not a fresh start."""
        if path is None or self.sbo_head is None:
            return False
        from safetensors.torch import load_file

        tied = {name[len(SBO_PREFIX):] for name in self._tied_weights_keys if name.startswith(SBO_PREFIX)}
        result = self.sbo_head.load_state_dict(load_file(path, device="cpu"), strict=False)
        missing = [name for name in result.missing_keys if name not in tied]
        if missing or result.unexpected_keys:
            raise ValueError(f"{path} is not this model's SBO head: missing {missing}, unexpected "
                             f"{result.unexpected_keys}.")  # fmt: skip
        return True

    def load_saved(self, folder: str) -> None:
        """Loads in place what `save_pretrained` wrote to `folder` (resuming a run from its checkpoint)."""
        from transformers.trainer_utils import load_sharded_checkpoint

        single = Path(folder) / "model.safetensors"
        if single.is_file():
            from safetensors.torch import load_file

            result = self.load_state_dict(load_file(str(single), device="cpu"), strict=False)
        else:
            result = load_sharded_checkpoint(self, folder, strict=False)
        tied = set(self._tied_weights_keys)
        missing = [name for name in result.missing_keys if name not in tied and not name.startswith(SBO_PREFIX)]
        if missing:
            raise ValueError(f"The checkpoint {folder} lacks weights of the model: {', '.join(missing[:5])}.")
        sbo_file = Path(folder) / SBO_HEAD_FILE
        self.load_sbo_head(str(sbo_file) if sbo_file.is_file() else None)
        self.tie_weights()


def _has_submodule(model: nn.Module, name: str) -> bool:
    try:
        model.get_submodule(name)
    except AttributeError:
        return False
    return True


@functools.cache
def span_pretraining_class(model_class: type[PreTrainedModel]) -> type[PreTrainedModel]:
    """`model_class` (a family's stock masked-LM or pretraining class) with SpanBERT's objectives mixed in. It
    keeps the stock class's name, so that a saved config's `architectures` names the stock class."""
    return type(model_class.__name__, (EncoderSpanPreTrainingMixin, model_class), {"__module__": __name__})


__all__ = [
    "ENCODER_FAMILIES",
    "EncoderFamily",
    "EncoderSpanPreTrainingMixin",
    "MlmHeadLayout",
    "SBO_HEAD_FILE",
    "SPAN_HEAD_DEFAULTS",
    "add_span_head_settings",
    "span_pretraining_class",
]
