"""SpanRoBERTa: RoBERTa's encoder with SpanBERT's pretraining heads.

The encoder is RoBERTa's own (`base_model_prefix = "roberta"`), so weights move freely between spanroberta and
stock RoBERTa checkpoints. `SpanRobertaForPreTraining` adds, on top of RoBERTa's MLM head:
- the span boundary objective (SBO, SpanBERT section 3.2): each token of a masked span is predicted from the
  encoder outputs at the two tokens just outside the span and a relative-position embedding;
- optionally a sentence-level head: next sentence prediction (BERT) or sentence order prediction (ALBERT).

Both token-level heads are sparse: they run only at the predicted positions, never over [batch, length, vocab].
In training the encoder's last layer is sparse too: it runs only where a head reads its output (see
`_encode_for_heads`), and each head's decoder and cross-entropy run fused (see `_DecoderCrossEntropy`).

This file is copied next to every saved checkpoint (see `auto_map`), so it imports nothing from spanroberta
besides its configuration.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import gelu
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_outputs import ModelOutput, QuestionAnsweringModelOutput
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
)

from .configuration_spanroberta import SpanRobertaConfig

IGNORE_INDEX = -100


class SpanRobertaPreTrainedModel(RobertaPreTrainedModel):
    config_class = SpanRobertaConfig
    config: SpanRobertaConfig

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, SpanBoundaryHead):
            nn.init.zeros_(module.decoder.bias)


class SpanRobertaModel(SpanRobertaPreTrainedModel, RobertaModel):
    """The bare RoBERTa encoder, under spanroberta's config."""


class SpanBoundaryHead(nn.Module):
    """y_i = f(h_{s-1}, h_{e+1}, p_{i-s+1}) (SpanBERT section 3.2, equation 1).

    f is a 2-layer feed-forward network with GELU and layer normalisation, followed by a decoder that shares the
    input word embeddings and has a bias of its own.
    """

    def __init__(self, config: SpanRobertaConfig):
        super().__init__()
        hidden, position_size = config.hidden_size, config.sbo_position_embedding_size
        self.position_embeddings = nn.Embedding(config.max_span_targets, position_size)
        self.dense1 = nn.Linear(2 * hidden + position_size, hidden)
        self.layer_norm1 = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.dense2 = nn.Linear(hidden, hidden)
        self.layer_norm2 = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(hidden, config.vocab_size)

    def forward(
        self, left_boundary: torch.Tensor, right_boundary: torch.Tensor, relative_positions: torch.Tensor
    ) -> torch.Tensor:
        """[N, H], [N, H], [N] (0-based offset inside the span) -> [N, vocab] logits."""
        return self.decoder(self.transform(left_boundary, right_boundary, relative_positions))

    def transform(
        self, left_boundary: torch.Tensor, right_boundary: torch.Tensor, relative_positions: torch.Tensor
    ) -> torch.Tensor:
        """f without the decoder: [N, H], [N, H], [N] -> [N, H]."""
        x = torch.cat([left_boundary, right_boundary, self.position_embeddings(relative_positions)], dim=-1)
        x = self.layer_norm1(gelu(self.dense1(x)))
        return self.layer_norm2(gelu(self.dense2(x)))


@dataclass
class SpanRobertaForPreTrainingOutput(ModelOutput):
    """
    Losses are the means over the predicted tokens (or sequences) of the batch; under gradient accumulation
    they are that micro-batch's share of the mean over the whole accumulated batch.

    mlm_logits / sbo_logits are sparse: one row per predicted token, in the row-major order of
    `labels != -100` (MLM) and `sbo_relative_positions != -100` (SBO).
    """

    loss: torch.Tensor | None = None
    mlm_loss: torch.Tensor | None = None
    sbo_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None
    sop_loss: torch.Tensor | None = None
    mlm_logits: torch.Tensor | None = None
    sbo_logits: torch.Tensor | None = None
    sentence_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None


class SpanRobertaForPreTraining(SpanRobertaPreTrainedModel):
    """MLM head (RoBERTa's, same parameter names) + SBO head + optional NSP/SOP head.

    Continued pretraining from a RoBERTa checkpoint loads its encoder and MLM head; the SBO head starts fresh.
    """

    _tied_weights_keys = {
        "lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight",
        "lm_head.decoder.bias": "lm_head.bias",
    }
    _sbo_tied_weights_keys = {"sbo_head.decoder.weight": "roberta.embeddings.word_embeddings.weight"}
    # The losses are normalised by the Trainer's `num_items_in_batch` (and the counts below), so the
    # Trainer must not divide them again by the gradient-accumulation steps.
    accepts_loss_kwargs = True

    def __init__(self, config: SpanRobertaConfig):
        super().__init__(config)
        has_sentence_head = config.sentence_objective != "none"
        self.roberta = RobertaModel(config, add_pooling_layer=has_sentence_head)
        self.lm_head = RobertaLMHead(config)
        self.sbo_head = SpanBoundaryHead(config) if config.use_sbo else None
        self.sentence_head = nn.Linear(config.hidden_size, 2) if has_sentence_head else None
        if config.use_sbo:
            self._tied_weights_keys = {**self._tied_weights_keys, **self._sbo_tied_weights_keys}
        self.post_init()

    def get_output_embeddings(self) -> nn.Module:
        return self.lm_head.decoder

    def set_output_embeddings(self, new_embeddings: nn.Module) -> None:
        self.lm_head.decoder = new_embeddings

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        sbo_left_positions: torch.LongTensor | None = None,
        sbo_right_positions: torch.LongTensor | None = None,
        sbo_relative_positions: torch.LongTensor | None = None,
        next_sentence_label: torch.LongTensor | None = None,
        sentence_order_label: torch.LongTensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        num_sbo_items_in_batch: torch.Tensor | int | None = None,
        num_sentence_items_in_batch: torch.Tensor | int | None = None,
        **kwargs,
    ) -> SpanRobertaForPreTrainingOutput:
        r"""
        labels (`[batch, length]`): the original token ids at the predicted positions, -100 elsewhere.
        sbo_left_positions, sbo_right_positions, sbo_relative_positions (`[batch, length]`): for each SBO target
            token, the positions of the tokens just outside its span and its 0-based offset in the span; -100 at
            every other position. `DataCollatorForSpanMasking` produces all four.
        next_sentence_label (`[batch]`): 0 if the second segment follows the first, 1 if it is random (BERT).
        sentence_order_label (`[batch]`): 0 if the segments are in order, 1 if swapped (ALBERT).
        num_items_in_batch, num_sbo_items_in_batch, num_sentence_items_in_batch: the number of MLM targets,
            SBO targets and labelled sequences in the whole accumulated (and, across processes, global) batch.
            transformers' Trainer passes the first; spanroberta's `PretrainingTrainer` passes all three, which
            makes gradient accumulation exact. Without them each loss is this batch's own mean.
        """
        if labels is not None and self._can_encode_for_heads(attention_mask, kwargs):
            read = self._positions_read_by_heads(labels, sbo_left_positions, sbo_right_positions)
            sequence_output = self._encode_for_heads(
                input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds, read
            )
            pooler = self.roberta.pooler
            pooler_output = pooler(sequence_output) if pooler is not None else None
            result = SpanRobertaForPreTrainingOutput()
        else:
            outputs = self.roberta(
                input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                position_ids=position_ids,
                inputs_embeds=inputs_embeds,
                return_dict=True,
                **kwargs,
            )
            sequence_output, pooler_output = outputs.last_hidden_state, outputs.pooler_output
            result = SpanRobertaForPreTrainingOutput(hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        losses = []
        # Without their own global counts, the SBO and sentence losses are weighted by this batch's share of
        # the MLM targets (the one count transformers' stock Trainer passes).
        mlm_count = None

        if labels is not None:
            predicted = labels != IGNORE_INDEX
            mlm_count = predicted.sum()
            lm_head = self.lm_head
            mlm_features = lm_head.layer_norm(gelu(lm_head.dense(sequence_output[predicted])))  # RobertaLMHead's
            result.mlm_logits, mlm_total = _decoder_cross_entropy(mlm_features, lm_head.decoder, labels[predicted])
            result.mlm_loss = _normalised_loss(mlm_total, mlm_count, num_items_in_batch)
            losses.append(result.mlm_loss)

            if self.sbo_head is not None and sbo_relative_positions is not None:
                targets = sbo_relative_positions != IGNORE_INDEX
                rows = targets.nonzero(as_tuple=True)[0]
                sbo_features = self.sbo_head.transform(
                    sequence_output[rows, sbo_left_positions[targets]],
                    sequence_output[rows, sbo_right_positions[targets]],
                    sbo_relative_positions[targets],
                )
                sbo_targets = labels[targets]
                result.sbo_logits, sbo_total = _decoder_cross_entropy(sbo_features, self.sbo_head.decoder, sbo_targets)
                result.sbo_loss = _normalised_loss(
                    sbo_total,
                    sbo_targets.numel(),
                    num_sbo_items_in_batch,
                    reference=(mlm_count, num_items_in_batch),
                )
                losses.append(self.config.sbo_loss_weight * result.sbo_loss)

        if self.sentence_head is not None:
            result.sentence_logits = self.sentence_head(pooler_output)
            sentence_label = next_sentence_label if self.config.sentence_objective == "nsp" else sentence_order_label
            if sentence_label is not None:
                labelled = sentence_label.view(-1) != IGNORE_INDEX
                sentence_total = F.cross_entropy(
                    result.sentence_logits[labelled].float(), sentence_label.view(-1)[labelled], reduction="sum"
                )
                sentence_loss = _normalised_loss(
                    sentence_total,
                    labelled.sum(),
                    num_sentence_items_in_batch,
                    reference=(mlm_count, num_items_in_batch),
                )
                setattr(result, f"{self.config.sentence_objective}_loss", sentence_loss)
                losses.append(sentence_loss)

        if losses:
            result.loss = torch.stack(losses).sum()
        return result

    def _can_encode_for_heads(self, attention_mask: torch.Tensor | None, kwargs: dict) -> bool:
        """Whether the sparse last layer applies: nothing but the heads reads the encoder's output (no hidden
        states or attentions asked for, no extra encoder arguments) and any padding mask is a plain 2D one."""
        config = self.config
        return (
            not kwargs
            and not (config.output_hidden_states or config.output_attentions or config.is_decoder)
            and (attention_mask is None or attention_mask.dim() == 2)
        )

    def _positions_read_by_heads(
        self, labels: torch.Tensor, left_positions: torch.Tensor | None, right_positions: torch.Tensor | None
    ) -> torch.Tensor:
        """Bool [batch, length]: the MLM targets, the SBO boundary tokens and, for a sentence head, the first token."""
        read = labels != IGNORE_INDEX
        if self.sbo_head is not None and left_positions is not None and right_positions is not None:
            for boundary in (left_positions, right_positions):
                targets = boundary != IGNORE_INDEX
                read[targets.nonzero(as_tuple=True)[0], boundary[targets]] = True
        if self.sentence_head is not None:
            read[:, 0] = True
        return read

    def _encode_for_heads(
        self,
        input_ids: torch.Tensor | None,
        attention_mask: torch.Tensor | None,
        token_type_ids: torch.Tensor | None,
        position_ids: torch.Tensor | None,
        inputs_embeds: torch.Tensor | None,
        read: torch.Tensor,
    ) -> torch.Tensor:
        """The encoder's last hidden state at the `read` positions ([batch, length, hidden]; zeros elsewhere).

        The heads read about a quarter of the positions (15% are predicted, plus the span boundaries), so the
        last layer computes its keys and values everywhere but its queries, attention output and feed-forward
        network only where they are read: about two thirds of that layer's FLOPs saved. Every other layer is
        RoBERTa's, called as RobertaModel calls it.
        """
        roberta = self.roberta
        hidden = roberta.embeddings(
            input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids, inputs_embeds=inputs_embeds
        )
        mask = create_bidirectional_mask(config=self.config, inputs_embeds=hidden, attention_mask=attention_mask)
        *layers, last_layer = roberta.encoder.layer
        for layer in layers:
            hidden = layer(hidden, mask)
        return _layer_at_positions(last_layer, hidden, attention_mask, read)


def _layer_at_positions(
    layer: RobertaLayer, hidden: torch.Tensor, attention_mask: torch.Tensor | None, read: torch.Tensor
) -> torch.Tensor:
    """`layer(hidden)` at the `read` positions (bool [batch, length]) only, zeros elsewhere.

    Each row's read positions are gathered, in order, into `width` query slots (the most any row reads); rows
    that read fewer fill their spare slots with unread positions, computed and kept (harmless).
    """
    batch_size, length, _ = hidden.shape
    width = max(int(read.sum(1).max()), 1)
    positions = torch.argsort((~read).to(torch.uint8), dim=1, stable=True)[:, :width]
    rows = torch.arange(batch_size, device=hidden.device)[:, None].expand_as(positions)
    queries_in = hidden[rows, positions]

    attention = layer.attention.self

    def split_heads(x: torch.Tensor) -> torch.Tensor:
        return x.view(batch_size, -1, attention.num_attention_heads, attention.attention_head_size).transpose(1, 2)

    padding = None
    if attention_mask is not None and not bool(attention_mask.all()):
        padding = attention_mask.bool()[:, None, None, :]  # keys only: [batch, 1, 1, length]
    context = F.scaled_dot_product_attention(
        split_heads(attention.query(queries_in)),
        split_heads(attention.key(hidden)),
        split_heads(attention.value(hidden)),
        attn_mask=padding,
        dropout_p=attention.dropout.p if attention.training else 0.0,
        scale=attention.scaling,
    )
    context = context.transpose(1, 2).reshape(batch_size, width, -1)
    out = layer.feed_forward_chunk(layer.attention.output(context, queries_in))
    return out.new_zeros(batch_size, length, out.shape[-1]).index_put((rows, positions), out)


# Rows of logits whose float32 copy fits in 4 MiB: the fused cross-entropy works through the logits a few rows at a
# time so that its passes over them hit the CPU's cache rather than its memory.
_CROSS_ENTROPY_CHUNK_BYTES = 4 << 20


class _DecoderCrossEntropy(torch.autograd.Function):
    """(logits, loss): logits = x @ weight.T + bias, and the cross-entropy of the logits against `targets`,
    summed over the rows. The numbers of F.linear then F.cross_entropy(logits.float(), reduction="sum").

    As the loss is a plain sum, its gradient with respect to the logits, softmax - one-hot, is known in the forward
    pass. Computing it there, a few rows at a time while they are in the CPU's cache, replaces the float32 passes
    over [rows, vocab] of log_softmax, its backward and the dtype casts, and the backward pass only multiplies.
    Under autocast the matmuls run in its dtype and the softmax in float32, as autocast and `logits.float()` have
    them.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, targets):
        device = x.device.type
        if torch.is_autocast_enabled(device):
            dtype = torch.get_autocast_dtype(device)
            x, weight, bias = x.to(dtype), weight.to(dtype), bias.to(dtype)
        with torch.autocast(device, enabled=False):
            logits = torch.addmm(bias, x, weight.t())
            grad = torch.empty_like(logits)
            loss = torch.zeros((), dtype=torch.float32, device=x.device)
            grad_bias = torch.zeros(logits.shape[1], dtype=torch.float32, device=x.device)
            chunk_rows = min(len(x), max(1, _CROSS_ENTROPY_CHUNK_BYTES // (4 * logits.shape[1])))
            # One float32 buffer serves every chunk: on CPU, first touching fresh memory (page faults) costs
            # more than the arithmetic done in it.
            buffer = logits.new_empty((chunk_rows, logits.shape[1]), dtype=torch.float32)
            for start in range(0, len(x), chunk_rows):
                rows = slice(start, start + chunk_rows)
                chunk_logits = logits[rows]
                chunk = buffer[: len(chunk_logits)].copy_(chunk_logits)
                chunk_targets = targets[rows, None]
                log_normaliser = chunk.logsumexp(1, keepdim=True)
                loss += (log_normaliser - chunk.gather(1, chunk_targets)).sum()
                softmax = chunk.sub_(log_normaliser).exp_()
                softmax.scatter_add_(1, chunk_targets, softmax.new_full(chunk_targets.shape, -1.0))
                grad_bias += softmax.sum(0)
                grad[rows] = softmax
        ctx.save_for_backward(x, weight, grad, grad_bias)
        ctx.set_materialize_grads(False)
        return logits, loss

    @staticmethod
    def backward(ctx, grad_logits, grad_loss):
        x, weight, grad, grad_bias = ctx.saved_tensors
        # When only the loss is differentiated (training), its gradient is a scalar. It scales the operands and
        # products that are far smaller than [rows, vocab] and [vocab, hidden]: x, the bias gradient, x's gradient.
        scale = grad_loss if grad_logits is None else None
        if scale is None:
            grad = grad_logits if grad_loss is None else grad * grad_loss + grad_logits
            grad_bias = grad.sum(0, dtype=torch.float32)
        else:
            grad_bias = grad_bias * scale
        needs_x, needs_weight, needs_bias, _ = ctx.needs_input_grad
        grad_x = grad @ weight if needs_x else None
        if grad_x is not None and scale is not None:
            grad_x = grad_x * scale
        grad_weight = grad.t() @ (x if scale is None else x * scale) if needs_weight else None
        return grad_x, grad_weight, grad_bias if needs_bias else None, None


def _decoder_cross_entropy(
    x: torch.Tensor, decoder: nn.Linear, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(decoder(x), its cross-entropy against `targets` summed over rows).

    Fused (`_DecoderCrossEntropy`) when training on CPU under autocast, where it was measured to pay (with bf16,
    each head 1.6x at the small config and 1.12-1.15x at base, a small step 1.10-1.18x; benchmarks/RESULTS.md);
    in float32 it was not measured to pay at the step level, and it has not been measured on GPUs.
    """
    training = torch.is_grad_enabled() and (x.requires_grad or decoder.weight.requires_grad)
    if training and x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        return _DecoderCrossEntropy.apply(x, decoder.weight, decoder.bias, targets)
    logits = decoder(x)
    return logits, F.cross_entropy(logits.float(), targets, reduction="sum")


def _normalised_loss(
    total: torch.Tensor,
    local_count: torch.Tensor | int,
    global_count: torch.Tensor | int | None,
    reference: tuple[torch.Tensor | int | None, torch.Tensor | int | None] = (None, None),
) -> torch.Tensor:
    """A loss summed over this batch's targets (`total`), divided so that the accumulated batch gets its mean.

    With the global count of these targets the division is exact. Without it, this batch's own mean is weighted
    by its share (local / global) of the `reference` targets when that global count is known, which keeps the
    gradient-accumulation scaling right.
    """
    if global_count is not None:
        return total / global_count
    mean = total / max(int(local_count), 1)
    local_reference, global_reference = reference
    if local_reference is not None and global_reference is not None:
        return mean * local_reference / global_reference
    return mean


class SpanRobertaForMaskedLM(SpanRobertaPreTrainedModel, RobertaForMaskedLM):
    """RoBERTa's masked LM (dense logits, for the fill-mask pipeline); `SpanRobertaForPreTraining` is the
    sparse one used for pretraining."""

    accepts_loss_kwargs = False


class SpanRobertaForSequenceClassification(SpanRobertaPreTrainedModel, RobertaForSequenceClassification):
    accepts_loss_kwargs = False


class SpanRobertaForMultipleChoice(SpanRobertaPreTrainedModel, RobertaForMultipleChoice):
    accepts_loss_kwargs = False


class SpanRobertaForTokenClassification(SpanRobertaPreTrainedModel, RobertaForTokenClassification):
    accepts_loss_kwargs = False


@dataclass
class SpanRobertaQuestionAnsweringOutput(QuestionAnsweringModelOutput):
    """answerability_logits (`[batch]`): with `config.answerability_head`, the logit that the question has
    no answer in this window."""

    answerability_logits: torch.Tensor | None = None


class SpanRobertaForQuestionAnswering(SpanRobertaPreTrainedModel, RobertaForQuestionAnswering):
    """RoBERTa's extractive QA head; with `config.answerability_head`, also RoBERTa's SQuAD v2.0 binary
    classifier (RoBERTa section 5.2: "we additionally classify whether a given question is answerable; we
    train this classifier jointly with the span predictor by summing the classification and span loss terms")."""

    accepts_loss_kwargs = False

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


# Registering marks the classes as custom code, so save_pretrained copies this file and its configuration
# next to the weights; the config's auto_map then points every Auto class at them.
SpanRobertaConfig.register_for_auto_class()
for _auto_class, _class_path in SpanRobertaConfig().auto_map.items():
    if _auto_class != "AutoConfig":
        globals()[_class_path.split(".")[-1]].register_for_auto_class(_auto_class)

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
