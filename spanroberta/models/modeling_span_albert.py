"""SpanALBERT: ALBERT's encoder (Lan et al. 2019) under spanroberta's pretraining heads.

The encoder is transformers' ALBERT (`base_model_prefix = "albert"`, same parameter names): factorised embeddings
(V x E, then E x H; ALBERT section 3.1) and cross-layer parameter sharing. transformers' `AlbertModel` shares whole
layers (`num_hidden_groups`); spanroberta adds ALBERT's two other schemes of Table 4, sharing only the attention or
only the feed-forward network (`config.cross_layer_sharing`). With those, every layer has its own group and the
shared blocks of groups 1.. are the very modules of group 0, declared in `_tied_weights_keys`: a checkpoint stores
them once, loading ties them again, and `num_parameters()` counts each once.

The pretraining objectives (MLM and SBO at the prediction slots, NSP/SOP, losses, `loss_normalisers`) are
`SpanPreTrainingMixin`'s, the same code as for RoBERTa's encoder; this file provides ALBERT's MLM head
(`predictions`, E wide), its pooler and SOP head (`sop_classifier`), so that transformers' `AlbertForPreTraining`
checkpoints load with their MLM and SOP heads (a fresh SBO head); `modeling_span_heads.py` holds that shared code.
Packed rows (restarting `position_ids`) attend within their own sequence through the forward `SpanRobertaModel`
shares with this encoder (`PackedRowsEncoderMixin`, `packed_attention.py`).

This file is copied next to every saved checkpoint (see `auto_map`), with the files it imports relatively.
"""

from __future__ import annotations

import torch
from transformers.models.albert.modeling_albert import (
    AlbertForMaskedLM,
    AlbertForMultipleChoice,
    AlbertForQuestionAnswering,
    AlbertForSequenceClassification,
    AlbertForTokenClassification,
    AlbertMLMHead,
    AlbertModel,
    AlbertPreTrainedModel,
    AlbertSOPHead,
)

from .configuration_span_albert import AUTO_MAP, SpanAlbertConfig
from .configuration_spanroberta import register_for_auto_classes, returns_mean_loss
from .modeling_span_heads import MlmDecoderAsOutputEmbeddings, SlotLabelsForMaskedLM, SpanPreTrainingMixin
from .packed_attention import PackedRowsEncoderMixin

# The submodules of an AlbertLayer that each scheme shares across layers. The FFN's output layer norm goes with
# the FFN, as the attention's goes with the attention. The attention's parameter-holding children are shared
# rather than the AlbertAttention itself, so that each layer keeps a module of its own for transformers' output
# capturing hooks (one module reached through several layers would record each layer's attentions once per layer).
SHARED_SUBMODULES: dict[str, tuple[str, ...]] = {
    "all": (),  # the whole layer, through num_hidden_groups = 1 (transformers' own sharing)
    "none": (),
    "attention": ("attention.query", "attention.key", "attention.value", "attention.dense", "attention.LayerNorm"),
    "ffn": ("ffn", "ffn_output", "full_layer_layer_norm"),
}


class SpanAlbertPreTrainedModel(AlbertPreTrainedModel):
    config_class = SpanAlbertConfig
    config: SpanAlbertConfig

    def post_init(self) -> None:
        self._share_layers()
        super().post_init()

    def _share_layers(self) -> None:
        """Makes the shared blocks of every layer group the modules of group 0 and declares them tied, for the
        encoder this model holds (its own, or the `AlbertModel` inside a task head)."""
        encoder = getattr(self.base_model, "encoder", None)
        shared = SHARED_SUBMODULES[self.config.cross_layer_sharing]
        inner_shares_itself = self.base_model is not self and isinstance(self.base_model, SpanAlbertPreTrainedModel)
        if encoder is None or not shared or inner_shares_itself:
            return  # nothing to share, or a SpanAlbertModel inside that shared its own layers
        prefix = "" if self.base_model is self else f"{self.base_model_prefix}."
        first = encoder.albert_layer_groups[0].albert_layers[0]
        tied = {}
        for index, group in enumerate(encoder.albert_layer_groups[1:], start=1):
            for name in shared:
                parent, _, child = name.rpartition(".")
                setattr(group.albert_layers[0].get_submodule(parent), child, first.get_submodule(name))
                for parameter_name, _ in first.get_submodule(name).named_parameters():
                    key = f"albert_layers.0.{name}.{parameter_name}"
                    groups = f"{prefix}encoder.albert_layer_groups"
                    tied[f"{groups}.{index}.{key}"] = f"{groups}.0.{key}"
        self._tied_weights_keys = {**(self._tied_weights_keys or {}), **tied}


class SpanAlbertModel(PackedRowsEncoderMixin, SpanAlbertPreTrainedModel, AlbertModel):
    """ALBERT's encoder under spanroberta's config: the sharing scheme of `config.cross_layer_sharing`, and packed
    rows, as `SpanRobertaModel` takes them (`PackedRowsEncoderMixin`; flash attention is not supported for packed
    ALBERT rows). Without `position_ids` it is exactly AlbertModel."""


class SpanAlbertForPreTraining(SpanPreTrainingMixin, MlmDecoderAsOutputEmbeddings, SpanAlbertPreTrainedModel):
    """ALBERT's MLM head (`predictions`) + SBO head + optional NSP/SOP head (ALBERT's `sop_classifier` on its
    pooler), every loss from `SpanPreTrainingMixin`.

    Continued pretraining from a transformers `AlbertForPreTraining` checkpoint loads its encoder, MLM head, pooler
    and SOP head; the SBO head starts fresh.
    """

    mlm_head_name = "predictions"

    def __init__(self, config: SpanAlbertConfig):
        super().__init__(config)
        self.albert = SpanAlbertModel(config, add_pooling_layer=self._has_sentence_head())
        self.predictions = AlbertMLMHead(config)
        self.sop_classifier = AlbertSOPHead(config) if self._has_sentence_head() else None
        self._tie_mlm_decoder()
        self._add_sbo_head()
        self.post_init()

    def _mlm_features(self, states: torch.Tensor) -> torch.Tensor:
        head = self.predictions
        return head.LayerNorm(head.activation(head.dense(states)))  # AlbertMLMHead's transform, H -> E

    def _sentence_logits(self, first_token_states: torch.Tensor) -> torch.Tensor:
        pooled = self.albert.pooler_activation(self.albert.pooler(first_token_states[:, 0]))
        return self.sop_classifier(pooled)


@returns_mean_loss
class SpanAlbertForMaskedLM(SlotLabelsForMaskedLM, SpanAlbertPreTrainedModel, AlbertForMaskedLM):
    """ALBERT's masked LM (dense logits, for the fill-mask pipeline), taking labels in transformers' layout or in
    prediction slots."""


@returns_mean_loss
class SpanAlbertForSequenceClassification(SpanAlbertPreTrainedModel, AlbertForSequenceClassification):
    pass


@returns_mean_loss
class SpanAlbertForQuestionAnswering(SpanAlbertPreTrainedModel, AlbertForQuestionAnswering):
    def __init__(self, config: SpanAlbertConfig):
        if config.answerability_head:
            raise ValueError(
                "The answerability head (answerability_head=True) exists for spanroberta's RoBERTa encoder only; "
                "ALBERT checkpoints answer SQuAD 2.0 from the span scores and the [CLS] null score."
            )
        super().__init__(config)


@returns_mean_loss
class SpanAlbertForMultipleChoice(SpanAlbertPreTrainedModel, AlbertForMultipleChoice):
    pass


@returns_mean_loss
class SpanAlbertForTokenClassification(SpanAlbertPreTrainedModel, AlbertForTokenClassification):
    pass


# Registering marks the classes as custom code, so save_pretrained copies this file and those it imports next to
# the weights; the config's auto_map then points every Auto class at them.
register_for_auto_classes(AUTO_MAP, globals())

__all__ = [
    "SpanAlbertPreTrainedModel",
    "SpanAlbertModel",
    "SpanAlbertForPreTraining",
    "SpanAlbertForMaskedLM",
    "SpanAlbertForSequenceClassification",
    "SpanAlbertForQuestionAnswering",
    "SpanAlbertForMultipleChoice",
    "SpanAlbertForTokenClassification",
]
