"""The pretraining heads and losses every encoder shares: SpanBERT's span boundary objective (SBO), the masked LM
and NSP/SOP heads read at the prediction slots, and how each loss is normalised. `SpanRobertaForPreTraining`,
`SpanAlbertForPreTraining`, the continued stock encoders and ELECTRA's generator use this code; it is written once,
here.

- Masked spans and prediction slots, the layout of the pretraining targets, are defined here once for the collator
  (`data/collator.py`) and for the models' dense-label path. A span is a run of masked tokens (a maximal stretch of
  them: adjacent sampled spans merge), and the span boundary objective's targets follow from the runs
  (`sbo_targets`, SpanBERT section 3.2). Prediction slots are a row's predicted positions in increasing order, then
  unused slots (-100), so that the heads read a fixed number of positions per row whatever the row masks
  (`prediction_slots`, `in_slots`).
- `SpanPreTrainingMixin` is the forward of every MLM pretraining model (RoBERTa's, ALBERT's, the stock encoders'):
  encoder, heads at the slots, losses.
- Each head's decoder and cross-entropy run in one pass (`fused_decoder_cross_entropy`) where that was measured to
  pay, on CPU under autocast; `config.efficient_pretraining = False` runs the reference (the two are tested
  equal).

This file ships with every checkpoint beside the model file that imports it (see `models/__init__.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers.activations import gelu
from transformers.modeling_outputs import ModelOutput

from .configuration_spanroberta import (
    IGNORE_INDEX,
    SENTENCE_LABELS,
    SpanRobertaConfig,
    normalises_loss_by_item_counts,
)
from .packed_attention import packed_sequence_ids

# Masked spans and prediction slots.


def run_starts(masked: torch.Tensor) -> torch.Tensor:
    """Long [B, L]: for each masked token, the position of the first token of its run (a maximal stretch of
    masked tokens, i.e. a merged span); meaningless at unmasked positions."""
    positions = torch.arange(masked.shape[1], device=masked.device).expand_as(masked)
    is_start = masked & ~F.pad(masked[:, :-1], (1, 0), value=False)
    return torch.where(is_start, positions, 0).cummax(1).values


def sbo_targets(
    masked: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    max_span_targets: int = 15,
    document_ids: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The span boundary objective's targets (SpanBERT section 3.2), one run of masked tokens at a time.

    For each token i of a run s..e: `sbo_left_positions` = s-1, `sbo_right_positions` = e+1 and
    `sbo_relative_positions` = i-s (0-based; the paper's p_{i-s+1}). All three are -100 where a token is not
    an SBO target: unmasked tokens, tokens with i-s >= max_span_targets (they stay MLM targets; SpanBERT's code
    truncates pair targets the same way), and whole runs whose s-1 or e+1 is not a real token of the row
    (before its start, past its end, or padding) or, in packed rows (`document_ids`: which sequence of its row
    each token belongs to), not a token of the run's own sequence.
    """
    length = masked.shape[1]
    positions = torch.arange(length, device=masked.device).expand_as(masked)
    inside_row = torch.ones_like(masked) if attention_mask is None else attention_mask.bool()
    start = run_starts(masked)
    is_end = masked & ~F.pad(masked[:, 1:], (0, 1), value=False)
    end = torch.where(is_end, positions, length).flip(1).cummin(1).values.flip(1)

    left, right, relative = start - 1, end + 1, positions - start
    left_ok = (left >= 0) & inside_row.gather(1, left.clamp(min=0))
    right_ok = (right < length) & inside_row.gather(1, right.clamp(max=max(length - 1, 0)))
    if document_ids is not None:
        left_ok &= document_ids.gather(1, left.clamp(min=0)) == document_ids
        right_ok &= document_ids.gather(1, right.clamp(max=max(length - 1, 0))) == document_ids
    is_target = masked & left_ok & right_ok & (relative < max_span_targets)
    return {
        "sbo_left_positions": left.masked_fill(~is_target, IGNORE_INDEX),
        "sbo_right_positions": right.masked_fill(~is_target, IGNORE_INDEX),
        "sbo_relative_positions": relative.masked_fill(~is_target, IGNORE_INDEX),
    }


def prediction_slots(masked: torch.Tensor, num_slots: int) -> torch.Tensor:
    """Long [batch, num_slots]: the masked positions of each row in increasing order, then -1 (unused slots). A row
    with more masked positions than slots keeps its first `num_slots`."""
    order = torch.argsort((~masked).to(torch.uint8), dim=1, stable=True)[:, :num_slots]
    order = F.pad(order, (0, num_slots - order.shape[1]), value=-1)
    slot = torch.arange(num_slots, device=masked.device)
    return order.masked_fill(slot >= masked.sum(1, keepdim=True), -1)


def in_slots(dense: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """The values of `dense` [batch, length] at the prediction slots [batch, slots], -100 in unused slots."""
    if dense.shape[1] == 0:  # rows of no tokens: every slot is unused
        return torch.full_like(slots, IGNORE_INDEX, dtype=dense.dtype)
    return dense.gather(1, slots.clamp(min=0)).masked_fill(slots < 0, IGNORE_INDEX)


def write_at_slots(
    dense: torch.Tensor, positions: torch.Tensor, values: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    """`dense` [batch, length] with `values` [batch, slots] written at `positions` where `valid` (the inverse of
    `in_slots`); unused slots are written to a scratch column that is then dropped."""
    length = dense.shape[1]
    target = torch.where(valid, positions, length)
    widened = F.pad(dense, (0, 1))
    return widened.scatter(1, target, values.to(dense.dtype))[:, :length].contiguous()


# The heads and their losses.

# The span boundary objective's fields of a slot batch (`sbo_targets`).
SBO_FIELDS = ("sbo_left_positions", "sbo_right_positions", "sbo_relative_positions")


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


class SboTargets(NamedTuple):
    """The span boundary objective's fields of a batch, per prediction slot (`[batch, slots]`; -100 where a slot is
    not an SBO target), or None: the positions just outside the slot's span and its 0-based offset in the span."""

    left: torch.Tensor | None
    right: torch.Tensor | None
    relative: torch.Tensor | None


class GlobalCounts(NamedTuple):
    """Each head's targets in the whole accumulated (and global) batch, as the trainer gives them
    (`SpanPreTrainingMixin.loss_normalisers`), or None where it does not."""

    mlm: torch.Tensor | int | None
    sbo: torch.Tensor | int | None
    sentence: torch.Tensor | int | None


@dataclass
class SpanRobertaForPreTrainingOutput(ModelOutput):
    """
    Losses are the means over the predicted tokens (or sequences) of the batch; under gradient accumulation
    they are that micro-batch's share of the mean over the whole accumulated batch.

    mlm_logits / sbo_logits (`[batch, slots, vocab]`): one row per prediction slot, aligned with `mlm_labels`;
    slots whose label (MLM) or `sbo_relative_positions` (SBO) is -100 hold no target. With labels in transformers'
    layout (`[batch, length]`), the slots are each row's labelled positions in increasing order.
    mlm_labels, sbo_relative_positions (`[batch, slots]`): the targets of those slots, as the heads read them (the
    input's in the slot layout, laid out in slots from dense labels otherwise), for evaluation.
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
    mlm_labels: torch.Tensor | None = None
    sbo_relative_positions: torch.Tensor | None = None


@normalises_loss_by_item_counts
class SpanPreTrainingMixin:
    """The pretraining objectives over an encoder: MLM and SBO at the prediction slots, an optional NSP/SOP head,
    and their losses, written once for every encoder. A model class mixes it in and provides:
    - the encoder as its `base_model`, the MLM decoder as its output embeddings and `self.sbo_head`;
    - `_mlm_features(states)`: its MLM head's transform before the decoder;
    - `_sentence_logits(first_token_states)`: [batch, 1, H] -> [batch, 2], through its pooler;
    - optionally a faster `_encode_at` (the default runs the whole encoder and reads it at the positions), its own
      `_encode` (how the encoder is called) or `_mlm_decoder` (default: the output embeddings).

    Each loss is summed over its targets and divided by their count in the whole accumulated batch when the trainer
    gives it (`loss_normalisers`), which makes gradient accumulation exact (see `configuration_spanroberta`).
    """

    config: SpanRobertaConfig
    sbo_head: SpanBoundaryHead | None

    def _add_sbo_head(self) -> None:
        """Adds `self.sbo_head` when `config.use_sbo` (else None), its decoder tied to the word embeddings as the MLM
        decoder is (stored once in a checkpoint). Called in `__init__` once the encoder exists, before `post_init`."""
        self.sbo_head = SpanBoundaryHead(self._sbo_head_settings()) if self.config.use_sbo else None
        if self.sbo_head is not None:
            embeddings = self.get_input_embeddings().weight
            embeddings_name = next(name for name, parameter in self.named_parameters() if parameter is embeddings)
            tied = dict(getattr(self, "_tied_weights_keys", None) or {})
            self._tied_weights_keys = {**tied, "sbo_head.decoder.weight": embeddings_name}

    def _sbo_head_settings(self) -> SpanRobertaConfig:
        """What the SBO head's shape is read from (`SpanBoundaryHead`): the config."""
        return self.config

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, SpanBoundaryHead):
            nn.init.zeros_(module.decoder.bias)

    def forward(
        self,
        # Named here, not shared: the Trainer's column filter (like a reader) learns a model's inputs from this list.
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        sequence_offsets: torch.Tensor | None = None,
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
        Predictions in slots, as `DataCollatorForSpanMasking` makes them (`[batch, slots]`, -100 in unused slots):
            `mlm_positions`, `labels`: the positions predicted, their original ids; `sbo_left_positions`,
            `sbo_right_positions`, `sbo_relative_positions`: an SBO target's span boundaries, its offset in it.
            Or transformers' layout: `labels` `[batch, length]`, -100 where not predicted (see `_dense_to_slots`).
        position_ids (`[batch, length]`): for packed rows, positions that restart at each sequence (packing.py).
        sequence_offsets (`[sequences + 1]`, int32): for packed rows under varlen_fa2, the sequences' offsets in
            the flattened batch, from the collator (`SpanRobertaModel` says more).
        next_sentence_label, sentence_order_label (`[batch]`): the sentence head's labels (`SENTENCE_LABELS`).
        num_items_in_batch, num_sbo_items_in_batch, num_sentence_items_in_batch: each head's targets in the
            whole accumulated (and global) batch (`loss_normalisers`); without them a loss is this batch's mean.
        """
        # Without labels the encoder's outputs are all a caller asks for (feature extraction, fill-mask).
        encoder_inputs = dict(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                              position_ids=position_ids, inputs_embeds=inputs_embeds)  # fmt: skip
        if sequence_offsets is not None:
            encoder_inputs["sequence_offsets"] = sequence_offsets
        if labels is None:
            return self._encoder_output(encoder_inputs, kwargs)
        sbo = SboTargets(sbo_left_positions, sbo_right_positions, sbo_relative_positions)
        if mlm_positions is None:  # transformers' layout, [batch, length]: into slots
            mlm_positions, labels, sbo = self._dense_to_slots(labels, sbo, attention_mask, position_ids)
        sbo = sbo if self.sbo_head is not None and sbo.relative is not None else None
        # The encoder, read where the heads read it: {"mlm", "sbo_left", "sbo_right": [batch, slots, H], "first":
        # [batch, 1, H]}.
        states, result = self._states_at(encoder_inputs, self._read_positions(mlm_positions, sbo), kwargs)
        # The heads and their losses: logits [batch, slots, V] (MLM, SBO) and [batch, 2] (NSP/SOP).
        sentence_labels = next_sentence_label if self.config.sentence_objective == "nsp" else sentence_order_label
        global_counts = GlobalCounts(num_items_in_batch, num_sbo_items_in_batch, num_sentence_items_in_batch)
        losses = self._heads(result, states, labels, sbo, sentence_labels, global_counts)
        # Each term is already normalised by its own head's global target count (loss_normalisers): a plain sum.
        result.loss = torch.stack(losses).sum()
        return result

    def _heads(
        self, result: SpanRobertaForPreTrainingOutput, states: dict[str, torch.Tensor], labels: torch.Tensor,
        sbo: SboTargets | None, sentence_labels: torch.Tensor | None, global_counts: GlobalCounts,
    ) -> list[torch.Tensor]:  # fmt: skip
        """Fills `result` with each head's logits and loss, from the encoder's `states` where the heads read it
        (`_read_positions`), the slots' `labels` and SBO targets (None: no SBO), and the sentence labels; returns
        the terms of the total loss (SBO's weighted by `config.sbo_loss_weight`)."""
        # Without a global count of their own, the other heads' losses weigh in by this batch's share of MLM targets.
        mlm_counts = ((labels != IGNORE_INDEX).sum(), global_counts.mlm)
        result.mlm_logits, result.mlm_loss = self._mlm_loss(states["mlm"], labels, mlm_counts)  # [batch, slots, V]
        result.mlm_labels, losses = labels, [result.mlm_loss]
        if sbo is not None:
            result.sbo_relative_positions = sbo.relative
            result.sbo_logits, result.sbo_loss = self._sbo_loss(  # [batch, slots, V]
                states["sbo_left"], states["sbo_right"], sbo.relative, labels, global_counts.sbo, mlm_counts
            )
            losses.append(self.config.sbo_loss_weight * result.sbo_loss)
        if self._has_sentence_head():
            result.sentence_logits, sentence_loss = self._sentence_loss(  # [batch, 2]
                states["first"], sentence_labels, global_counts.sentence, mlm_counts
            )
            if sentence_loss is not None:
                setattr(result, f"{self.config.sentence_objective}_loss", sentence_loss)
                losses.append(sentence_loss)
        return losses

    def _has_sentence_head(self) -> bool:
        return self.config.sentence_objective != "none"

    def _encoder_output(self, encoder_inputs: dict, kwargs: dict) -> SpanRobertaForPreTrainingOutput:
        """Without labels, no predictions: the encoder's outputs alone (and the sentence head's, if any)."""
        outputs = self._encode(encoder_inputs, kwargs)
        result = SpanRobertaForPreTrainingOutput(hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        if self._has_sentence_head():
            result.sentence_logits = self._sentence_logits(outputs.last_hidden_state[:, :1])
        return result

    def _dense_to_slots(
        self,
        labels: torch.Tensor,
        sbo: SboTargets,
        attention_mask: torch.Tensor | None,
        position_ids: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor, SboTargets]:
        """transformers' layout in prediction slots: `labels` `[batch, length]` (-100 where not predicted), and the
        SBO fields in the same layout if given, become (mlm_positions, labels, SBO fields) `[batch, slots]`, a row's
        labelled positions in increasing order, as many slots as the row with the most. Without SBO fields, the SBO
        targets follow from the runs of labelled tokens, as the collator derives them (`sbo_targets`): a run
        is a span, the tokens just outside it (in its row and packed sequence) its boundaries.

        The number of slots is read on the host, so this path does not compile whole; the slot layout does.
        """
        masked = labels != IGNORE_INDEX
        slots = prediction_slots(masked, max(int(masked.sum(1).max()), 1))
        if self.sbo_head is not None and sbo.relative is None:
            document_ids = None if position_ids is None else packed_sequence_ids(position_ids)
            derived = sbo_targets(masked, attention_mask, self.config.max_span_targets, document_ids)
            sbo = SboTargets(*(derived[f"sbo_{field}_positions"] for field in SboTargets._fields))
        sbo = SboTargets(*(None if field is None else in_slots(field, slots) for field in sbo))
        positions = torch.arange(labels.shape[1], device=labels.device).expand_as(labels)
        return in_slots(positions, slots), in_slots(labels, slots), sbo

    def _read_positions(self, mlm_positions: torch.Tensor, sbo: SboTargets | None) -> dict[str, torch.Tensor]:
        """Where the heads read the encoder, {read: positions [batch, n]}: the MLM slots, their spans' left and
        right boundaries (with SBO), and the first token, which the sentence head's pooler reads."""
        reads = {"mlm": mlm_positions}
        if sbo is not None:
            reads["sbo_left"], reads["sbo_right"] = sbo.left, sbo.right
        if self._has_sentence_head():
            reads["first"] = torch.zeros_like(mlm_positions[:, :1])
        return reads

    def _states_at(
        self, encoder_inputs: dict, reads: dict[str, torch.Tensor], kwargs: dict
    ) -> tuple[dict[str, torch.Tensor], SpanRobertaForPreTrainingOutput]:
        """The encoder's last hidden state where each head reads it: {name: positions [batch, n]} -> {name:
        [batch, n, H]} (-100 positions read position 0), and the output to fill, holding the encoder's hidden
        states and attentions when it was run whole and they were asked for."""
        positions = torch.cat(list(reads.values()), dim=1).clamp(min=0)
        states, outputs = self._encode_at(encoder_inputs, positions, kwargs)
        result = SpanRobertaForPreTrainingOutput()
        if outputs is not None:
            result.hidden_states, result.attentions = outputs.hidden_states, outputs.attentions
        return dict(zip(reads, states.split([read.shape[1] for read in reads.values()], dim=1))), result

    def _encode_at(
        self, encoder_inputs: dict, positions: torch.Tensor, kwargs: dict
    ) -> tuple[torch.Tensor, ModelOutput | None]:
        """The encoder's last hidden state at `positions` [batch, n] -> [batch, n, H], and the encoder's outputs
        when it was run whole. This runs the whole encoder; a model may override it with a faster path."""
        outputs = self._encode(encoder_inputs, kwargs)
        return gather(outputs.last_hidden_state, positions), outputs

    def _encode(self, encoder_inputs: dict, kwargs: dict) -> ModelOutput:
        """The encoder run whole on `encoder_inputs` (input_ids, attention_mask, token_type_ids, position_ids,
        inputs_embeds)."""
        return self.base_model(**encoder_inputs, return_dict=True, **kwargs)

    def _mlm_decoder(self) -> nn.Module:
        """The MLM head's decoder, from `_mlm_features` to vocabulary logits: the output embeddings."""
        return self.get_output_embeddings()

    def _mlm_loss(
        self, states: torch.Tensor, labels: torch.Tensor, counts: tuple[torch.Tensor, torch.Tensor | int | None]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """MLM: [batch, slots, H] at the predicted positions, their labels [batch, slots] -> logits [batch, slots,
        vocab] and the loss, normalised by `counts` (this batch's targets, the accumulated batch's)."""
        features = self._mlm_features(states)
        logits, total = decoder_cross_entropy(self.config, features, self._mlm_decoder(), labels)
        return logits, normalised_loss(total, *counts)

    def _sbo_loss(
        self,
        left: torch.Tensor,
        right: torch.Tensor,
        relative_positions: torch.Tensor,
        labels: torch.Tensor,
        global_count: torch.Tensor | int | None,
        mlm_counts: tuple[torch.Tensor, torch.Tensor | int | None],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """SBO (SpanBERT section 3.2): each slot's token from its span's boundaries [batch, slots, H] and its
        offset in the span [batch, slots] (-100: not an SBO target) -> logits [batch, slots, vocab] and the loss."""
        is_target = relative_positions != IGNORE_INDEX
        features = self.sbo_head.transform(left, right, relative_positions.clamp(min=0))
        targets = labels.masked_fill(~is_target, IGNORE_INDEX)
        logits, total = decoder_cross_entropy(self.config, features, self.sbo_head.decoder, targets)
        return logits, normalised_loss(total, is_target.sum(), global_count, reference=mlm_counts)

    def _sentence_loss(
        self,
        first_token_states: torch.Tensor,
        labels: torch.Tensor | None,
        global_count: torch.Tensor | int | None,
        mlm_counts: tuple[torch.Tensor, torch.Tensor | int | None],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """NSP or SOP: [batch, 1, H] at the first token, labels [batch] (-100: unlabelled) -> logits [batch, 2] and
        the loss (None without labels)."""
        logits = self._sentence_logits(first_token_states)
        if labels is None:
            return logits, None
        labels = labels.view(-1)
        total = F.cross_entropy(logits.float(), labels, ignore_index=IGNORE_INDEX, reduction="sum")
        return logits, normalised_loss(total, (labels != IGNORE_INDEX).sum(), global_count, reference=mlm_counts)

    @staticmethod
    def loss_normalisers(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The targets each head has in `batch`, by the name of the forward argument that takes their count over
        the accumulated (and global) batch. Summed over micro-batches and processes by the trainer."""
        counts = {}
        if "labels" in batch:
            counts["num_items_in_batch"] = batch["labels"].ne(IGNORE_INDEX).sum()
        if "sbo_relative_positions" in batch:
            counts["num_sbo_items_in_batch"] = batch["sbo_relative_positions"].ne(IGNORE_INDEX).sum()
        sentence_labels = [batch[name] for name in SENTENCE_LABELS.values() if name in batch]
        if sentence_labels:
            counts["num_sentence_items_in_batch"] = sum(labels.ne(IGNORE_INDEX).sum() for labels in sentence_labels)
        return counts


class MlmDecoderAsOutputEmbeddings:
    """The output embeddings of spanroberta's own pretraining classes: the decoder of their MLM head, the module
    named `mlm_head_name` (RoBERTa's `lm_head`, ALBERT's `predictions`: the names transformers' checkpoints use),
    tied to the word embeddings, its bias to the head's, as transformers' RoBERTa and ALBERT tie them."""

    mlm_head_name: str

    def _tie_mlm_decoder(self) -> None:
        """Declares the ties (called in `__init__`, before `post_init` reads them)."""
        head, encoder = self.mlm_head_name, self.base_model_prefix
        self._tied_weights_keys = {
            **(self._tied_weights_keys or {}),
            f"{head}.decoder.weight": f"{encoder}.embeddings.word_embeddings.weight",
            f"{head}.decoder.bias": f"{head}.bias",
        }

    def get_output_embeddings(self) -> nn.Module:
        return getattr(self, self.mlm_head_name).decoder

    def set_output_embeddings(self, new_embeddings: nn.Module) -> None:
        getattr(self, self.mlm_head_name).decoder = new_embeddings


class SlotLabelsForMaskedLM:
    """Lets a transformers masked LM (dense logits, `[batch, length, vocab]`) also take the prediction slots of
    `DataCollatorForSpanMasking`: `labels` `[batch, slots]` with `mlm_positions` are laid out as transformers'
    `[batch, length]` labels (-100 elsewhere), which gives the loss of the same mask in either layout. The SBO fields
    a slot batch may carry are dropped: a masked LM has no SBO head (`SpanRobertaForPreTraining` has). The stock
    arguments stay named, since the Trainer keeps only the dataset columns a forward names."""

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        mlm_positions: torch.LongTensor | None = None,
        **kwargs,
    ):
        if labels is not None and mlm_positions is not None:
            shape = (input_ids if input_ids is not None else inputs_embeds).shape[:2]
            unlabelled = torch.full(shape, IGNORE_INDEX, dtype=labels.dtype, device=labels.device)
            labels = write_at_slots(unlabelled, mlm_positions.clamp(min=0), labels, labels != IGNORE_INDEX)
        # A stock masked LM keeps packed sequences apart by no offsets of its own: they go with the SBO fields.
        stock_inputs = {name: value for name, value in kwargs.items() if name not in (*SBO_FIELDS, "sequence_offsets")}
        return super().forward(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
            position_ids=position_ids, inputs_embeds=inputs_embeds, labels=labels, **stock_inputs,
        )  # fmt: skip


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


# The fused decoder cross-entropy, the efficient path of `decoder_cross_entropy`.


def fuses_decoder_cross_entropy(config, x: torch.Tensor, decoder: nn.Linear) -> bool:
    """Whether `fused_decoder_cross_entropy` applies: turned on, and training on CPU under autocast, where it was
    measured to pay (with bf16: benchmarks/speed/heads.py, its records in benchmarks/RESULTS.md).
    In float32 it was not measured to pay at the step level, and on GPUs it has not been measured."""
    training = torch.is_grad_enabled() and (x.requires_grad or decoder.weight.requires_grad)
    return (
        getattr(config, "efficient_pretraining", True)
        and training
        and x.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
    )


def fused_decoder_cross_entropy(
    x: torch.Tensor, decoder: nn.Linear, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(decoder(x), its cross-entropy against `targets` summed over the targets that are not -100), for x of shape
    [..., H] and targets [...]: the numbers of the reference, through `_DecoderCrossEntropy`."""
    logits, total = _DecoderCrossEntropy.apply(x.flatten(0, -2), decoder.weight, decoder.bias, targets.flatten())
    return logits.view(*x.shape[:-1], -1), total


# Rows of logits whose float32 copy fits in 4 MiB: the fused cross-entropy works through the logits a few rows at a
# time so that its passes over them hit the CPU's cache rather than its memory.
_CROSS_ENTROPY_CHUNK_BYTES = 4 << 20


class _DecoderCrossEntropy(torch.autograd.Function):
    """(logits, loss): logits = x @ weight.T + bias, and the cross-entropy of the logits against `targets`,
    summed over the rows whose target is not -100. The numbers of F.linear then
    F.cross_entropy(logits.float(), ignore_index=-100, reduction="sum").

    As the loss is a plain sum, its gradient with respect to the logits, softmax - one-hot (zero in ignored rows),
    is known in the forward pass. Computing it there, a few rows at a time while they are in the CPU's cache,
    replaces the float32 passes over [rows, vocab] of log_softmax, its backward and the dtype casts, and the
    backward pass only multiplies. Under autocast the matmuls run in its dtype and the softmax in float32, as
    autocast and `logits.float()` have them.
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
                valid = (targets[rows] != IGNORE_INDEX)[:, None]
                chunk_targets = targets[rows, None].clamp(min=0)
                log_normaliser = chunk.logsumexp(1, keepdim=True)
                loss += ((log_normaliser - chunk.gather(1, chunk_targets)) * valid).sum()
                softmax = chunk.sub_(log_normaliser).exp_()
                softmax.scatter_add_(1, chunk_targets, softmax.new_full(chunk_targets.shape, -1.0))
                softmax.mul_(valid)
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


__all__ = [
    "SBO_FIELDS",
    "MlmDecoderAsOutputEmbeddings",
    "SlotLabelsForMaskedLM",
    "SpanBoundaryHead",
    "SpanPreTrainingMixin",
    "SpanRobertaForPreTrainingOutput",
    "decoder_cross_entropy",
    "fused_decoder_cross_entropy",
    "gather",
    "in_slots",
    "normalised_loss",
    "prediction_slots",
    "run_starts",
    "sbo_targets",
    "write_at_slots",
]
