"""SpanRoBERTa: RoBERTa's encoder with SpanBERT's pretraining heads. This file is the reference: encoder, heads,
loss, written to be read; `modeling_efficient.py` holds the faster paths, each tested equal to this one.

The encoder is RoBERTa's own (`base_model_prefix = "roberta"`), so weights move freely between spanroberta and
stock RoBERTa checkpoints. `SpanRobertaModel` adds one thing to it: packed rows. Several sequences may share a row
when `position_ids` restart at each of them (transformers' padding-free convention, as `DataCollatorWithFlattening`
emits, with RoBERTa's first position `padding_idx + 1`); every sequence then attends only to itself, under every
attention implementation, and is computed exactly as it would be alone. That forward (`PackedRowsEncoderMixin`) is
ALBERT's encoder's too.

`SpanRobertaForPreTraining` adds, on top of RoBERTa's MLM head:
- the span boundary objective (SBO, SpanBERT section 3.2): each token of a masked span is predicted from the
  encoder outputs at the two tokens just outside the span and a relative-position embedding;
- optionally a sentence-level head: next sentence prediction (BERT) or sentence order prediction (ALBERT).

Predictions come in a fixed number of slots per row (`DataCollatorForSpanMasking`): the heads read the encoder
at those positions only, never over [batch, length, vocab], and nothing in the forward pass depends on how many
tokens a batch masks, so a compiled training step runs whole with no host synchronisation.

The heads, their losses and how each is normalised are `pretraining_heads.py`'s, shared with ALBERT's encoder;
the packed-row mask is `packing.py`'s.

This file is copied next to every saved checkpoint (see `auto_map`), with the files it imports relatively.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import gelu
from transformers.modeling_outputs import (
    BaseModelOutputWithPoolingAndCrossAttentions,
    ModelOutput,
    QuestionAnsweringModelOutput,
)
from transformers.models.roberta.modeling_roberta import (
    RobertaForMaskedLM,
    RobertaForMultipleChoice,
    RobertaForQuestionAnswering,
    RobertaForSequenceClassification,
    RobertaForTokenClassification,
    RobertaLMHead,
    RobertaModel,
    RobertaPreTrainedModel,
)

from .configuration_spanroberta import AUTO_MAP, SpanRobertaConfig
from .conventions import register_for_auto_classes, returns_mean_loss
from .modeling_efficient import encode_at_positions, reads_last_layer_at_positions
from .packing import is_flash_attention, packed_attention_inputs
from .pretraining_heads import (
    MlmDecoderAsOutputEmbeddings,
    SlotLabelsForMaskedLM,
    SpanBoundaryHead,
    SpanPreTrainingMixin,
    SpanRobertaForPreTrainingOutput,
)


class SpanRobertaPreTrainedModel(RobertaPreTrainedModel):
    config_class = SpanRobertaConfig
    config: SpanRobertaConfig


class PackedRowsEncoderMixin:
    """The forward of spanroberta's encoders (RoBERTa's and ALBERT's), which also takes packed rows; mixed in before
    transformers' encoder class, whose forward it calls.

    With `position_ids`, each run of consecutive positions is one sequence (see `packing.py`) and attends only to
    itself, through the inputs `packed_attention_inputs` gives the configured attention implementation (a
    block-diagonal mask for sdpa and eager, the sequences' offsets for varlen_fa2, a block mask for
    flex_attention), or, where `flattens_packed_rows` says so, by flattening the batch into one row. Without
    `position_ids`, or as a decoder (`config.is_decoder`, which packing does not serve), it is exactly the
    encoder's own forward.
    """

    def forward(
        self,
        # Named here, not shared: the Trainer's column filter (like a reader) learns a model's inputs from this list.
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        sequence_offsets: torch.Tensor | None = None,
        **kwargs,
    ) -> ModelOutput | tuple:
        r"""
        sequence_offsets (`[sequences + 1]`, int32): for packed rows, where each sequence starts in the flattened
            batch, then its end, as `DataCollatorForSpanMasking(return_sequence_offsets=True)` gives them; read by
            varlen_fa2 only, which otherwise derives them from `position_ids` (a device synchronisation).
        """
        inputs = {"input_ids": input_ids, "token_type_ids": token_type_ids, "inputs_embeds": inputs_embeds}
        # ALBERT's config has no `is_decoder`: its encoder is never one.
        if position_ids is None or getattr(self.config, "is_decoder", False):
            return self._encoder_forward(attention_mask=attention_mask, position_ids=position_ids, **inputs, **kwargs)
        if self.flattens_packed_rows():
            return self._flattened_forward(attention_mask, position_ids, inputs, kwargs)
        packed = packed_attention_inputs(self, attention_mask, position_ids, inputs_embeds,
                                         sequence_offsets=sequence_offsets)  # fmt: skip
        return self._encoder_forward(position_ids=position_ids, **packed, **inputs, **kwargs)

    def flattens_packed_rows(self) -> bool:
        """Whether packed rows are isolated by flattening the batch (then `_flattened_forward` runs them) rather
        than by the inputs of `packed_attention_inputs`."""
        return False

    def _encoder_forward(self, **inputs) -> ModelOutput | tuple:
        """transformers' encoder forward (of the class this mixin comes before), which reads packed rows only
        through the inputs given."""
        return super().forward(**inputs)


class SpanRobertaModel(PackedRowsEncoderMixin, SpanRobertaPreTrainedModel, RobertaModel):
    """RoBERTa's encoder, under spanroberta's config, that also takes packed rows (`PackedRowsEncoderMixin`): for
    flash attention by flattening the batch into one row whose restarting positions transformers' kernels turn into
    `cu_seqlens`. Without `position_ids`, or as a decoder, it is exactly RobertaModel.
    """

    def flattens_packed_rows(self) -> bool:
        """Flash attention reads `cu_seqlens` from the positions of a single row: packed rows are flattened."""
        return is_flash_attention(self.config)

    def _flattened_forward(
        self, attention_mask: torch.Tensor | None, position_ids: torch.Tensor, inputs: dict, kwargs: dict
    ) -> BaseModelOutputWithPoolingAndCrossAttentions | tuple:
        batch_size, length = position_ids.shape
        if attention_mask is not None:
            # The flattened row has no padding mask: padding becomes a sequence of its own, numbered from the
            # row's first position, so that no real token attends to it.
            padding = ~attention_mask.bool()
            position_ids = torch.where(padding, position_ids[:, :1] + padding.cumsum(-1) - 1, position_ids)
        flat = {
            name: None if value is None else value.reshape(1, batch_size * length, *value.shape[2:])
            for name, value in inputs.items()
        }
        return_dict = kwargs.pop("return_dict", None)
        outputs = self._encoder_forward(position_ids=position_ids.reshape(1, -1), return_dict=True, **flat, **kwargs)

        def rows(hidden: torch.Tensor) -> torch.Tensor:
            return hidden.reshape(batch_size, length, -1)

        last_hidden_state = rows(outputs.last_hidden_state)
        outputs = BaseModelOutputWithPoolingAndCrossAttentions(
            last_hidden_state=last_hidden_state,
            # The flattened row's pooler output read only its first token: pool each row again.
            pooler_output=self.pooler(last_hidden_state) if self.pooler is not None else None,
            hidden_states=None if outputs.hidden_states is None else tuple(map(rows, outputs.hidden_states)),
            # Flash attention returns no attention weights.
            attentions=outputs.attentions,
        )
        return outputs if return_dict is not False else outputs.to_tuple()


class SpanRobertaForPreTraining(SpanPreTrainingMixin, MlmDecoderAsOutputEmbeddings, SpanRobertaPreTrainedModel):
    """MLM head (RoBERTa's, same parameter names) + SBO head + optional NSP/SOP head.

    Continued pretraining from a RoBERTa checkpoint loads its encoder and MLM head; the SBO head starts fresh.
    """

    mlm_head_name = "lm_head"

    def __init__(self, config: SpanRobertaConfig):
        super().__init__(config)
        self.roberta = SpanRobertaModel(config, add_pooling_layer=self._has_sentence_head())
        self.lm_head = RobertaLMHead(config)
        self.sentence_head = nn.Linear(config.hidden_size, 2) if self._has_sentence_head() else None
        self._tie_mlm_decoder()
        self._add_sbo_head()
        self.post_init()

    def _mlm_features(self, states: torch.Tensor) -> torch.Tensor:
        lm_head = self.lm_head
        return lm_head.layer_norm(gelu(lm_head.dense(states)))  # RobertaLMHead's transform

    def _sentence_logits(self, first_token_states: torch.Tensor) -> torch.Tensor:
        return self.sentence_head(self.roberta.pooler(first_token_states))

    def _encode_at(
        self, encoder_inputs: dict, positions: torch.Tensor, kwargs: dict
    ) -> tuple[torch.Tensor, ModelOutput | None]:
        if reads_last_layer_at_positions(self.roberta, kwargs):
            return encode_at_positions(self.roberta, encoder_inputs, positions), None
        return super()._encode_at(encoder_inputs, positions, kwargs)


@returns_mean_loss
class SpanRobertaForMaskedLM(SlotLabelsForMaskedLM, SpanRobertaPreTrainedModel, RobertaForMaskedLM):
    """RoBERTa's masked LM (dense logits, for the fill-mask pipeline), taking labels in transformers' layout or in
    prediction slots; `SpanRobertaForPreTraining` is the sparse one used for pretraining."""


@returns_mean_loss
class SpanRobertaForSequenceClassification(SpanRobertaPreTrainedModel, RobertaForSequenceClassification):
    pass


@returns_mean_loss
class SpanRobertaForMultipleChoice(SpanRobertaPreTrainedModel, RobertaForMultipleChoice):
    pass


@returns_mean_loss
class SpanRobertaForTokenClassification(SpanRobertaPreTrainedModel, RobertaForTokenClassification):
    pass


@dataclass
class SpanRobertaQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    """answerability_logits (`[batch]`): with `config.answerability_head`, the logit that the question has
    no answer in this window."""

    answerability_logits: torch.Tensor | None = None


@returns_mean_loss
class SpanRobertaForQuestionAnswering(SpanRobertaPreTrainedModel, RobertaForQuestionAnswering):
    """RoBERTa's extractive QA head; with `config.answerability_head`, also RoBERTa's SQuAD v2.0 binary
    classifier (RoBERTa section 5.2: "we additionally classify whether a given question is answerable; we
    train this classifier jointly with the span predictor by summing the classification and span loss terms")."""

    def __init__(self, config: SpanRobertaConfig):
        super().__init__(config)
        if config.answerability_head:
            self.answerability_classifier = nn.Sequential(
                nn.Linear(config.hidden_size, config.hidden_size),
                nn.Tanh(),
                nn.Dropout(config.hidden_dropout_prob),
                nn.Linear(config.hidden_size, 1),
            )
            # RoBERTa's __init__ has already run post_init(); initialise the one module added after it.
            self.answerability_classifier.apply(self._init_weights)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        start_positions: torch.LongTensor | None = None,
        end_positions: torch.LongTensor | None = None,
        is_impossible: torch.Tensor | None = None,
        **kwargs,
    ) -> SpanRobertaQuestionAnsweringOutput:
        r"""
        is_impossible (`[batch]`): 1 where the question has no answer in this window; trains the answerability
            classifier (binary cross-entropy added to the span loss). Ignored without `config.answerability_head`.
        """
        wants_hidden_states = kwargs.pop("output_hidden_states", False)
        span_output = super().forward(
            input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            start_positions=start_positions,
            end_positions=end_positions,
            # the answerability classifier reads the last layer's first token
            output_hidden_states=wants_hidden_states or self.config.answerability_head,
            **kwargs,
        )
        if not self.config.answerability_head:
            return SpanRobertaQuestionAnsweringOutput(**span_output)
        first_token = span_output.hidden_states[-1][:, 0]
        answerability_logits = self.answerability_classifier(first_token).squeeze(-1)
        loss = span_output.loss
        if is_impossible is not None:
            answerability_loss = F.binary_cross_entropy_with_logits(
                answerability_logits.float(), is_impossible.view(-1).to(answerability_logits.device).float()
            )
            loss = answerability_loss if loss is None else loss + answerability_loss
        return SpanRobertaQuestionAnsweringOutput(
            loss=loss,
            start_logits=span_output.start_logits,
            end_logits=span_output.end_logits,
            hidden_states=span_output.hidden_states if wants_hidden_states else None,
            attentions=span_output.attentions,
            answerability_logits=answerability_logits,
        )


# Registering marks the classes as custom code, so save_pretrained copies this file and those it imports next to
# the weights; the config's auto_map then points every Auto class at them.
register_for_auto_classes(AUTO_MAP, globals())

__all__ = [
    "SpanRobertaPreTrainedModel",
    "SpanRobertaModel",
    "SpanBoundaryHead",
    "SpanRobertaForPreTraining",
    "SpanRobertaForPreTrainingOutput",
    "SpanRobertaForMaskedLM",
    "SpanRobertaForSequenceClassification",
    "SpanRobertaForMultipleChoice",
    "SpanRobertaForTokenClassification",
    "SpanRobertaForQuestionAnswering",
    "SpanRobertaQuestionAnsweringOutput",
]
