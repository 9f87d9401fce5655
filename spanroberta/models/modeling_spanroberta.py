"""SpanRoBERTa: RoBERTa's encoder with SpanBERT's pretraining heads, and RoBERTa's task heads.

The encoder is RoBERTa's own (`base_model_prefix = "roberta"`), so weights move freely between spanroberta and
stock RoBERTa checkpoints. `SpanRobertaModel` adds one thing to it: packed rows. Several sequences may share a row
when `position_ids` restart at each of them (transformers' padding-free convention, as `DataCollatorWithFlattening`
emits, with RoBERTa's first position `padding_idx + 1`); every sequence then attends only to itself, under every
attention implementation, and is computed exactly as it would be alone. That forward (`PackedRowsEncoderMixin`) is
ALBERT's encoder's too (`packed_attention.py`).

`SpanRobertaForPreTraining` adds, on top of RoBERTa's MLM head:
- the span boundary objective (SBO, SpanBERT section 3.2): each token of a masked span is predicted from the
  encoder outputs at the two tokens just outside the span and a relative-position embedding;
- optionally a sentence-level head: next sentence prediction (BERT) or sentence order prediction (ALBERT).

Predictions come in a fixed number of slots per row (`DataCollatorForSpanMasking`): the heads read the encoder
at those positions only, never over [batch, length, vocab], and nothing in the forward pass depends on how many
tokens a batch masks, so a compiled training step runs whole with no host synchronisation.

The forward reads as encoder, heads at the slots, losses (`SpanPreTrainingMixin.forward`); the heads, their losses
and how each is normalised are `modeling_span_heads.py`'s, shared with ALBERT's and the stock encoders; the
packed-row attention is `packed_attention.py`'s. The efficient path (`config.efficient_pretraining`), the last layer
computed only where the heads read it, is beside the reference here (`encode_at_positions`), tested equal to it.

This file is copied next to every saved checkpoint (see `auto_map`), with the files it imports relatively.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import gelu
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import (
    BaseModelOutputWithPoolingAndCrossAttentions,
    ModelOutput,
    QuestionAnsweringModelOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.roberta.modeling_roberta import (
    RobertaForMaskedLM,
    RobertaForMultipleChoice,
    RobertaForQuestionAnswering,
    RobertaForSequenceClassification,
    RobertaForTokenClassification,
    RobertaLayer,
    RobertaLMHead,
    RobertaModel,
    RobertaPreTrainedModel,
    eager_attention_forward,
)

from .configuration_spanroberta import AUTO_MAP, SpanRobertaConfig, register_for_auto_classes, returns_mean_loss
from .modeling_span_heads import (
    MlmDecoderAsOutputEmbeddings,
    SlotLabelsForMaskedLM,
    SpanBoundaryHead,
    SpanPreTrainingMixin,
    SpanRobertaForPreTrainingOutput,
    gather,
)
from .packed_attention import (
    PackedRowsEncoderMixin,
    is_flash_attention,
    packed_attention_inputs,
    packed_sequence_ids,
    takes_dense_mask,
)


class SpanRobertaPreTrainedModel(RobertaPreTrainedModel):
    config_class = SpanRobertaConfig
    config: SpanRobertaConfig


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
        """The reference runs the whole encoder and reads it at `positions`; where `reads_last_layer_at_positions`,
        the last layer runs at `positions` only (`encode_at_positions`, below), with the same numbers."""
        if reads_last_layer_at_positions(self.roberta, kwargs):
            return encode_at_positions(self.roberta, encoder_inputs, positions), None
        return super()._encode_at(encoder_inputs, positions, kwargs)


# The efficient path of `SpanRobertaForPreTraining._encode_at`: the encoder's last layer only where the heads read
# them. The heads read about a quarter of a row (the predicted slots, their span boundaries, the first token), so the
# last layer computes its keys and values everywhere but its queries, attention output and feed-forward network only
# there: about two thirds of that layer's FLOPs saved. Every other layer is RoBERTa's, called as RobertaModel calls
# it, and the attention goes through the configured implementation (sdpa, eager or varlen_fa2; others take the
# reference path). The last layer's few queries take a dense mask under each of them (varlen_fa2 is sdpa there).
# `config.efficient_pretraining = False` runs the reference; tests/test_pretraining_speedups.py holds them equal.


def reads_last_layer_at_positions(encoder: RobertaModel, kwargs: dict) -> bool:
    """Whether `encode_at_positions` applies: turned on, a dense-mask attention (the sparse last layer builds its
    mask itself), and nothing but the heads reads the encoder's output (no hidden states or attentions asked for,
    no extra encoder arguments)."""
    config = encoder.config
    return (
        getattr(config, "efficient_pretraining", True)
        and takes_dense_mask(config)
        and not kwargs
        and not (config.output_hidden_states or config.output_attentions or config.is_decoder)
    )


def encode_at_positions(encoder: RobertaModel, inputs: dict, positions: torch.Tensor) -> torch.Tensor:
    """The encoder's last hidden state at `positions` ([batch, n], any order, repeats allowed): [batch, n, H].

    `encoder` is a `SpanRobertaModel`; `inputs` are its forward arguments (input_ids, attention_mask,
    token_type_ids, position_ids, inputs_embeds, and sequence_offsets where the collator gave them).
    """
    attention_mask, position_ids = inputs["attention_mask"], inputs["position_ids"]
    hidden = encoder.embeddings(
        input_ids=inputs["input_ids"],
        token_type_ids=inputs["token_type_ids"],
        position_ids=position_ids,
        inputs_embeds=inputs["inputs_embeds"],
    )
    if position_ids is None:
        mask = create_bidirectional_mask(config=encoder.config, inputs_embeds=hidden, attention_mask=attention_mask)
        packed = {"attention_mask": mask}
    else:
        packed = packed_attention_inputs(encoder, attention_mask, position_ids, hidden,
                                         sequence_offsets=inputs.get("sequence_offsets"))  # fmt: skip
    *layers, last_layer = encoder.encoder.layer
    for layer in layers:
        hidden = layer(hidden, **packed)
    sequence_ids = None if position_ids is None else packed_sequence_ids(position_ids)
    return _layer_at_positions(last_layer, hidden, _query_mask(attention_mask, sequence_ids, positions), positions)


def _query_mask(
    attention_mask: torch.Tensor | None, sequence_ids: torch.Tensor | None, positions: torch.Tensor
) -> torch.Tensor | None:
    """Bool [batch, 1, n, length]: which keys each query at `positions` attends to (the reference's mask, read at
    those rows; see packed_attention.packed_sequence_mask_function), or None when every query attends to
    every key."""
    mask = None
    if attention_mask is not None:
        mask = attention_mask.bool()[:, None, None, :]
    if sequence_ids is not None:
        same = sequence_ids.gather(1, positions)[:, None, :, None] == sequence_ids[:, None, None, :]
        if mask is not None:
            query_is_padding = ~attention_mask.bool().gather(1, positions)[:, None, :, None]
            same = same & (mask | query_is_padding)
        mask = same
    return mask


def _layer_at_positions(
    layer: RobertaLayer, hidden: torch.Tensor, mask: torch.Tensor | None, positions: torch.Tensor
) -> torch.Tensor:
    """`layer(hidden)` read at `positions` [batch, n], computing queries only there: [batch, n, H]."""
    batch_size, num_queries = positions.shape
    queries_in = gather(hidden, positions)
    attention = layer.attention.self

    def split_heads(x: torch.Tensor) -> torch.Tensor:
        return x.view(batch_size, -1, attention.num_attention_heads, attention.attention_head_size).transpose(1, 2)

    if mask is not None and attention.config._attn_implementation == "eager":
        mask = torch.zeros(mask.shape, dtype=hidden.dtype, device=hidden.device).masked_fill(
            ~mask, torch.finfo(hidden.dtype).min
        )
    attention_function = ALL_ATTENTION_FUNCTIONS.get_interface(
        attention.config._attn_implementation, eager_attention_forward
    )
    context, _ = attention_function(
        attention,
        split_heads(attention.query(queries_in)),
        split_heads(attention.key(hidden)),
        split_heads(attention.value(hidden)),
        mask,
        dropout=attention.dropout.p if attention.training else 0.0,
        scaling=attention.scaling,
    )
    context = context.reshape(batch_size, num_queries, -1)
    return layer.feed_forward_chunk(layer.attention.output(context, queries_in))


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
