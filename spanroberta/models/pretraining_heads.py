"""The pretraining heads and losses every encoder shares: SpanBERT's span boundary objective (SBO), the masked LM
and NSP/SOP heads read at the prediction slots, and how each loss is normalised. `SpanRobertaForPreTraining`,
`SpanAlbertForPreTraining` and ELECTRA's generator use this code; it is written once, here.

This file ships with every checkpoint beside the model file that imports it (see `models/__init__.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import gelu
from transformers.modeling_outputs import ModelOutput

from .configuration_spanroberta import SpanRobertaConfig
from .modeling_efficient import fused_decoder_cross_entropy, fuses_decoder_cross_entropy

IGNORE_INDEX = -100


class SpanBoundaryHead(nn.Module):
    """y_i = f(h_{s-1}, h_{e+1}, p_{i-s+1}) (SpanBERT section 3.2, equation 1).

    f is a 2-layer feed-forward network with GELU and layer normalisation, followed by a decoder that shares the
    input word embeddings and has a bias of its own.
    """

    def __init__(self, config: SpanRobertaConfig):
        super().__init__()
        hidden, position_size = config.hidden_size, config.sbo_position_embedding_size
        # The decoder is tied to the word embeddings: E wide where they are factorised (ALBERT), else H.
        output_size = getattr(config, "embedding_size", hidden)
        self.position_embeddings = nn.Embedding(config.max_span_targets, position_size)
        self.dense1 = nn.Linear(2 * hidden + position_size, hidden)
        self.layer_norm1 = nn.LayerNorm(hidden, eps=config.layer_norm_eps)
        self.dense2 = nn.Linear(hidden, output_size)
        self.layer_norm2 = nn.LayerNorm(output_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(output_size, config.vocab_size)

    def forward(
        self, left_boundary: torch.Tensor, right_boundary: torch.Tensor, relative_positions: torch.Tensor
    ) -> torch.Tensor:
        """[..., H], [..., H], [...] (0-based offset inside the span) -> [..., vocab] logits."""
        return self.decoder(self.transform(left_boundary, right_boundary, relative_positions))

    def transform(
        self, left_boundary: torch.Tensor, right_boundary: torch.Tensor, relative_positions: torch.Tensor
    ) -> torch.Tensor:
        """f without the decoder: [..., H], [..., H], [...] -> [..., H] (E for factorised embeddings)."""
        x = torch.cat([left_boundary, right_boundary, self.position_embeddings(relative_positions)], dim=-1)
        x = self.layer_norm1(gelu(self.dense1(x)))
        return self.layer_norm2(gelu(self.dense2(x)))


@dataclass
class SpanRobertaForPreTrainingOutput(ModelOutput):
    """
    Losses are the means over the predicted tokens (or sequences) of the batch; under gradient accumulation
    they are that micro-batch's share of the mean over the whole accumulated batch.

    mlm_logits / sbo_logits (`[batch, slots, vocab]`): one row per prediction slot, aligned with `labels`; slots
    whose label (MLM) or `sbo_relative_positions` (SBO) is -100 hold no target.
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


class SpanPreTrainingMixin:
    """The pretraining objectives over an encoder: MLM and SBO at the prediction slots, an optional NSP/SOP head,
    and their losses, written once for every encoder. A model class mixes it in and provides:
    - the encoder as its `base_model`, the MLM decoder as its output embeddings and `self.sbo_head`;
    - `_mlm_features(states)`: its MLM head's transform before the decoder;
    - `_sentence_logits(first_token_states)`: [batch, 1, H] -> [batch, 2], through its pooler;
    - optionally a faster `_states_at` (the default runs the whole encoder and reads it at the positions), its own
      `_encode` (how the encoder is called) or `_mlm_decoder` (default: the output embeddings).
    """

    config: SpanRobertaConfig
    sbo_head: SpanBoundaryHead | None
    # The losses are normalised by the Trainer's `num_items_in_batch` (and the counts of `loss_normalisers`), so
    # the Trainer must not divide them again by the gradient-accumulation steps.
    accepts_loss_kwargs = True

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        mlm_positions: torch.LongTensor | None = None,
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
        position_ids (`[batch, length]`): for packed rows, positions that restart at each sequence (see
            `SpanRobertaModel`); `DataCollatorForSpanMasking` gives them for packed doc-sentences.
        mlm_positions, labels (`[batch, slots]`): the positions predicted and their original token ids, -100 in
            unused slots.
        sbo_left_positions, sbo_right_positions, sbo_relative_positions (`[batch, slots]`): for the slots whose
            token is an SBO target, the positions of the tokens just outside its span and its 0-based offset in
            the span; -100 in the other slots. `DataCollatorForSpanMasking` produces all five.
        next_sentence_label (`[batch]`): 0 if the second segment follows the first, 1 if it is random (BERT).
        sentence_order_label (`[batch]`): 0 if the segments are in order, 1 if swapped (ALBERT).
        num_items_in_batch, num_sbo_items_in_batch, num_sentence_items_in_batch: the number of MLM targets,
            SBO targets and labelled sequences in the whole accumulated (and, across processes, global) batch
            (`loss_normalisers` counts them in a batch). transformers' Trainer passes the first; spanroberta's
            `PretrainingTrainer` passes all three, which makes gradient accumulation exact. Without them each
            loss is this batch's own mean.
        """
        if labels is not None and mlm_positions is None:
            raise ValueError(
                "SpanRobertaForPreTraining takes its predictions in slots: labels and mlm_positions of shape "
                "[batch, slots], as DataCollatorForSpanMasking makes them."
            )
        encoder_inputs = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "token_type_ids": token_type_ids,
            "position_ids": position_ids,
            "inputs_embeds": inputs_embeds,
        }
        result = SpanRobertaForPreTrainingOutput()
        if labels is None:
            # No predictions: the encoder's outputs alone (and the sentence head's, if any).
            outputs = self._encode(encoder_inputs, kwargs)
            result.hidden_states, result.attentions = outputs.hidden_states, outputs.attentions
            if self.config.sentence_objective != "none":
                result.sentence_logits = self._sentence_logits(outputs.last_hidden_state[:, :1])
            return result

        with_sbo = self.sbo_head is not None and sbo_relative_positions is not None
        read = [mlm_positions] + ([sbo_left_positions, sbo_right_positions] if with_sbo else [])
        with_sentence_head = self.config.sentence_objective != "none"
        if with_sentence_head:
            read.append(torch.zeros_like(mlm_positions[:, :1]))  # the first token, for the pooler
        states, outputs = self._states_at(encoder_inputs, torch.cat(read, dim=1).clamp(min=0), kwargs)
        if outputs is not None:
            result.hidden_states, result.attentions = outputs.hidden_states, outputs.attentions
        num_slots = mlm_positions.shape[1]
        mlm_states, states = states[:, :num_slots], states[:, num_slots:]

        losses = []
        mlm_count = (labels != IGNORE_INDEX).sum()
        mlm_features = self._mlm_features(mlm_states)
        result.mlm_logits, mlm_total = decoder_cross_entropy(self.config, mlm_features, self._mlm_decoder(), labels)
        result.mlm_loss = normalised_loss(mlm_total, mlm_count, num_items_in_batch)
        losses.append(result.mlm_loss)

        if with_sbo:
            left, right = states[:, :num_slots], states[:, num_slots : 2 * num_slots]
            states = states[:, 2 * num_slots :]
            is_target = sbo_relative_positions != IGNORE_INDEX
            sbo_features = self.sbo_head.transform(left, right, sbo_relative_positions.clamp(min=0))
            sbo_targets = labels.masked_fill(~is_target, IGNORE_INDEX)
            result.sbo_logits, sbo_total = decoder_cross_entropy(
                self.config, sbo_features, self.sbo_head.decoder, sbo_targets
            )
            # Without their own global count, SBO targets are weighted by this batch's share of the MLM targets.
            result.sbo_loss = normalised_loss(
                sbo_total, is_target.sum(), num_sbo_items_in_batch, reference=(mlm_count, num_items_in_batch)
            )
            losses.append(self.config.sbo_loss_weight * result.sbo_loss)

        if with_sentence_head:
            result.sentence_logits = self._sentence_logits(states)
            nsp = self.config.sentence_objective == "nsp"
            sentence_labels = next_sentence_label if nsp else sentence_order_label
            if sentence_labels is not None:
                sentence_labels = sentence_labels.view(-1)
                sentence_total = F.cross_entropy(
                    result.sentence_logits.float(), sentence_labels, ignore_index=IGNORE_INDEX, reduction="sum"
                )
                sentence_loss = normalised_loss(
                    sentence_total,
                    (sentence_labels != IGNORE_INDEX).sum(),
                    num_sentence_items_in_batch,
                    reference=(mlm_count, num_items_in_batch),
                )
                setattr(result, f"{self.config.sentence_objective}_loss", sentence_loss)
                losses.append(sentence_loss)

        result.loss = torch.stack(losses).sum()
        return result

    def _states_at(
        self, encoder_inputs: dict, positions: torch.Tensor, kwargs: dict
    ) -> tuple[torch.Tensor, ModelOutput | None]:
        """The encoder's last hidden state at `positions` [batch, n] -> [batch, n, H], and the encoder's outputs
        when it was run whole (for hidden states and attentions asked for)."""
        outputs = self._encode(encoder_inputs, kwargs)
        return gather(outputs.last_hidden_state, positions), outputs

    def _encode(self, encoder_inputs: dict, kwargs: dict) -> ModelOutput:
        """The encoder run whole on `encoder_inputs` (input_ids, attention_mask, token_type_ids, position_ids,
        inputs_embeds)."""
        return self.base_model(**encoder_inputs, return_dict=True, **kwargs)

    def _mlm_decoder(self) -> nn.Module:
        """The MLM head's decoder, from `_mlm_features` to vocabulary logits: the output embeddings."""
        return self.get_output_embeddings()

    @staticmethod
    def loss_normalisers(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The targets each head has in `batch`, by the name of the forward argument that takes their count over
        the accumulated (and global) batch. Summed over micro-batches and processes by the trainer."""
        counts = {}
        if "labels" in batch:
            counts["num_items_in_batch"] = batch["labels"].ne(IGNORE_INDEX).sum()
        if "sbo_relative_positions" in batch:
            counts["num_sbo_items_in_batch"] = batch["sbo_relative_positions"].ne(IGNORE_INDEX).sum()
        sentence_labels = [batch[name] for name in ("next_sentence_label", "sentence_order_label") if name in batch]
        if sentence_labels:
            counts["num_sentence_items_in_batch"] = sum(labels.ne(IGNORE_INDEX).sum() for labels in sentence_labels)
        return counts


def gather(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """hidden [batch, length, H] at positions [batch, n] -> [batch, n, H]."""
    return hidden.gather(1, positions[..., None].expand(-1, -1, hidden.shape[-1]))


def decoder_cross_entropy(
    config: SpanRobertaConfig, features: torch.Tensor, decoder: nn.Linear, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(decoder(features), the cross-entropy of those logits against `targets` summed over the targets that are
    not -100). [batch, slots, H] -> [batch, slots, vocab] and a scalar."""
    if fuses_decoder_cross_entropy(config, features, decoder):
        return fused_decoder_cross_entropy(features, decoder, targets)
    logits = decoder(features)
    total = F.cross_entropy(
        logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="sum"
    )
    return logits, total


def normalised_loss(
    total: torch.Tensor,
    local_count: torch.Tensor,
    global_count: torch.Tensor | int | None,
    reference: tuple[torch.Tensor | None, torch.Tensor | int | None] = (None, None),
) -> torch.Tensor:
    """A loss summed over this batch's targets (`total`), divided so that the accumulated batch gets its mean.

    With the global count of these targets the division is exact. Without it, this batch's own mean is weighted
    by its share (local / global) of the `reference` targets when that global count is known, which keeps the
    gradient-accumulation scaling right. Without targets a loss is 0. No value is read on the host.
    """
    if global_count is not None:
        return total / torch.as_tensor(global_count, device=total.device).clamp(min=1)
    mean = total / local_count.clamp(min=1)
    local_reference, global_reference = reference
    if local_reference is not None and global_reference is not None:
        return mean * local_reference / torch.as_tensor(global_reference, device=total.device).clamp(min=1)
    return mean
