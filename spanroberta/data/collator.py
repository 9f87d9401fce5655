"""The pretraining data collator: pads blocks of token ids, masks them, and lays out the predictions (MLM and SBO
targets) as transformers' models take them ([batch, length], the default) or in a fixed number of slots per row."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedTokenizerBase

from spanroberta.data.masking import (
    ngram_length_probabilities,
    random_token_ids,
    replace_masked_tokens,
    row_keys,
    span_length_probabilities,
    span_mask,
    special_token_table,
    token_mask,
    unit_mask,
    word_start_table,
    word_starts,
)
from spanroberta.data.masking_units import UNIT_SCHEMES, UNITS_COLUMN
from spanroberta.data.random_streams import mix32
from spanroberta.errors import UserInputError
from spanroberta.models.configuration_spanroberta import SENTENCE_LABELS, SpanRobertaConfig, first_position_id
from spanroberta.models.spans import in_slots, prediction_slots, sbo_targets
from spanroberta.models.varlen_attention import packed_sequence_offsets

MASKING_SCHEMES = ("span", "word", "token", "ngram", *UNIT_SCHEMES)
# How the targets are laid out: "dense" is transformers' convention for masked LMs ([batch, length], -100 where a
# token is not predicted); "slots" is Google BERT's max_predictions_per_seq layout ([batch, slots]).
LABEL_LAYOUTS = ("dense", "slots")
# ALBERT section 4.1: n-grams of at most 3 words.
MAX_NGRAM_LENGTH = 3
# SpanBERT section 5.1: "at 50% of the time" named entities (noun phrases), random whole words otherwise.
SPANBERT_UNIT_SHARE = 0.5


@dataclass
class DataCollatorForSpanMasking:
    """Masks a batch for masked language modelling with SpanBERT's span masking and SBO targets.

    A drop-in for transformers' `DataCollatorForLanguageModeling`: by default (`label_layout="dense"`) `labels` is
    [batch, length], the original id where a token is predicted and -100 elsewhere, which every `*ForMaskedLM`
    and the `Trainer` take unchanged.

    Call it on a list of examples, each a mapping with `input_ids` (a list or a tensor, of any length) or a bare
    sequence of ids. It returns:
    - `input_ids` (masked) and `attention_mask`, [batch, length];
    - `position_ids` [batch, length] for packed rows (examples carrying `sequence_lengths`, from
      `formats.pack_sequences`): they restart at `first_position_id` at each packed sequence, the padding-free
      convention of transformers' `DataCollatorWithFlattening` with RoBERTa's first position; padding is a
      sequence of its own. Masking never crosses a packed sequence, nor do SBO boundaries;
    - with `return_sequence_offsets`, for packed rows, `sequence_offsets` (int32 [sequences + 1]): where each packed
      sequence (padding included) starts in the flattened batch [batch * length], then its end, as the varlen_fa2
      attention reads them; computed here on the host, so that the model's forward need not read them from the
      device. With `sequence_offsets_count`, padded to that many entries with zero-length sequences at the end
      (the last offset repeated), so that every batch's offsets have one shape: a compiled step then needs one
      graph with no dynamic size, as CUDA graphs do;
    - `labels`, in the layout `label_layout` names:
      "dense": [batch, length], -100 where a token is not predicted (transformers' convention);
      "slots": the predictions in a fixed number of slots per row, `max_predictions_per_seq` (default
      ceil(mlm_probability x length), which no row's budget exceeds), as Google BERT's `max_predictions_per_seq`:
      `mlm_positions` (the positions predicted, in increasing order) and `labels` (their original ids), both
      -100 in unused slots. Fixed shapes let a compiled training step run without host synchronisation, so
      `run_pretraining.py` uses this layout;
    - when `return_sbo_targets` (default: in the slot layout only, since stock masked LMs take no SBO inputs),
      `sbo_left_positions`, `sbo_right_positions` and `sbo_relative_positions` (see `models/spans.py`'s
      `sbo_targets`), in the same layout as `labels`: per token ([batch, length]) or per slot, -100 where a token
      or slot is not an SBO target;
    - `token_type_ids` (padded with 0), `next_sentence_label` and `sentence_order_label` when the examples
      carry them.

    masking: "span" (SpanBERT section 3.1: whole-word spans, lengths ~ Geo(geometric_p) truncated to
        [1, max_span_length]), "ngram" (ALBERT section 4.1: whole-word n-grams, p(n) = (1/n) / (1 + 1/2 + 1/3)
        for n <= 3), "word" (whole words, SpanBERT section 5.1's baseline), "token" (RoBERTa's), or masking of
        linguistic units, which the examples carry in a `masking_units` column (`masking_units.MaskingUnits`):
        "named-entity" and "noun-phrase" (SpanBERT section 5.1: half the budget on whole units, half on random
        whole words) or "pmi" (PMI-Masking, Levine et al. 2021: n-grams and lone words drawn alike; see
        `masking.unit_mask`). All but token masking pick 80/10/10 once per run of masked tokens, token masking
        per token.

    The mask does not depend on the layout: both give the same predicted positions for the same seed.
    Masks are a pure function of (seed, mask_epoch, example_index) when the examples carry those int fields,
    as `masking_schedule.DynamicMaskingDataset` and `StaticMaskingDataset` provide: reproducible, and identical
    after resuming from a checkpoint. With the Trainer, set `remove_unused_columns=False`, or it strips them.
    Without them, row keys come from the collator's own generator (seeded with `seed`): a fresh mask per call.
    """

    tokenizer: PreTrainedTokenizerBase
    mlm_probability: float = 0.15
    masking: str = "span"
    geometric_p: float = 0.2
    max_span_length: int = 10
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    max_span_targets: int = 15
    return_sbo_targets: bool | None = None
    seed: int = 0
    pad_to_multiple_of: int | None = None
    max_predictions_per_seq: int | None = None
    first_position_id: int | None = None
    label_layout: str = "dense"
    return_sequence_offsets: bool = False
    sequence_offsets_count: int | None = None

    def __post_init__(self) -> None:
        if self.masking not in MASKING_SCHEMES:
            raise ValueError(f"masking={self.masking!r} is not one of {', '.join(map(repr, MASKING_SCHEMES))}.")
        if self.label_layout not in LABEL_LAYOUTS:
            raise ValueError(
                f"label_layout={self.label_layout!r} is not one of {', '.join(map(repr, LABEL_LAYOUTS))}."
            )
        if self.max_predictions_per_seq is not None and self.label_layout != "slots":
            raise ValueError(
                "max_predictions_per_seq sets the number of prediction slots: it needs label_layout='slots'."
            )
        if self.return_sbo_targets is None:
            self.return_sbo_targets = self.label_layout == "slots"
        check_masking_rates(self.mlm_probability, self.geometric_p)
        if self.max_span_length < 1 or self.max_span_targets < 1:
            raise ValueError("max_span_length and max_span_targets must be at least 1.")
        if self.max_predictions_per_seq is not None and self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq} must be at least 1.")
        if min(self.mask_replace_prob, self.random_replace_prob) < 0 or (
            self.mask_replace_prob + self.random_replace_prob > 1
        ):
            raise ValueError("mask_replace_prob and random_replace_prob must be >= 0 and sum to at most 1.")
        name = type(self.tokenizer).__name__
        if self.tokenizer.mask_token_id is None:
            raise ValueError(f"{name} has no mask token, which masked language modelling needs.")
        if self.tokenizer.pad_token_id is None:
            raise ValueError(f"{name} has no pad token, which padding the batch needs.")
        if self.first_position_id is None:
            # Without the model's config, positions are numbered as spanroberta's own model numbers them.
            self.first_position_id = first_position_id(SpanRobertaConfig(pad_token_id=self.tokenizer.pad_token_id))

        self._special = special_token_table(self.tokenizer)
        self._replacement_ids = random_token_ids(self._special)
        self._word_start = None if self.masking == "token" else word_start_table(self.tokenizer)
        self._span_lengths = {
            "span": span_length_probabilities(self.geometric_p, self.max_span_length),
            "ngram": ngram_length_probabilities(MAX_NGRAM_LENGTH),
            "word": torch.ones(1, dtype=torch.float64),
        }.get(self.masking)
        self._generator = torch.Generator().manual_seed(self.seed)

    def __call__(self, examples: Sequence[Mapping[str, Any] | Sequence[int] | torch.Tensor]) -> dict[str, torch.Tensor]:
        # The tensors here are small ([batch, length] integers), so intra-op threads cost more in synchronisation
        # than they save: one thread is faster even on an idle machine, and far faster on a busy one, where every
        # parallel op waits for a preempted thread (benchmarks/RESULTS.md). DataLoader workers run one already.
        with _one_intra_op_thread():
            return self._collate(examples)

    def _collate(self, examples: Sequence[Mapping[str, Any] | Sequence[int] | torch.Tensor]) -> dict[str, torch.Tensor]:
        if not examples:
            raise ValueError("DataCollatorForSpanMasking got an empty list of examples.")
        examples = [e if isinstance(e, Mapping) else {"input_ids": e} for e in examples]
        input_ids, attention_mask = self._pad([e["input_ids"] for e in examples], self.tokenizer.pad_token_id)
        self._check_ids(input_ids, examples)
        keys = self._row_keys(examples)
        document_ids = self._document_ids(examples, input_ids.shape[1])

        maskable = attention_mask.bool() & ~self._special[input_ids]
        if self.masking == "token":
            masked = token_mask(maskable, keys, self.mlm_probability)
        elif self.masking in UNIT_SCHEMES:
            masked = unit_mask(
                word_starts(input_ids, maskable, self._word_start),
                maskable,
                self._unit_marks(examples),
                keys,
                self.mlm_probability,
                unit_share=None if self.masking == "pmi" else SPANBERT_UNIT_SHARE,
            ).masked
        else:
            masked = span_mask(
                word_starts(input_ids, maskable, self._word_start),
                maskable,
                keys,
                self.mlm_probability,
                document_ids=document_ids,
                length_probabilities=self._span_lengths,
            ).masked
        inputs, labels = replace_masked_tokens(
            input_ids,
            masked,
            keys,
            self.tokenizer.mask_token_id,
            self._replacement_ids,
            self.mask_replace_prob,
            self.random_replace_prob,
            per_run=self.masking != "token",
        )

        batch = {"input_ids": inputs, "attention_mask": attention_mask}
        if document_ids is not None:
            batch["position_ids"] = _restarting_positions(document_ids, self.first_position_id)
            if self.return_sequence_offsets:  # on the host: no nonzero() on the device
                batch["sequence_offsets"] = self._sequence_offsets(batch["position_ids"], attention_mask)
        targets = {"labels": labels}
        if self.return_sbo_targets:
            targets.update(sbo_targets(masked, attention_mask, self.max_span_targets, document_ids))
        if self.label_layout == "slots":
            slots = self._prediction_slots(masked, examples)
            batch["mlm_positions"] = in_slots(torch.arange(masked.shape[1]).expand_as(masked), slots)
            targets = {name: in_slots(value, slots) for name, value in targets.items()}
        batch.update(targets)
        if "token_type_ids" in examples[0]:
            batch["token_type_ids"] = self._pad([e["token_type_ids"] for e in examples], 0)[0]
        for name in SENTENCE_LABELS.values():
            if name in examples[0]:
                batch[name] = torch.tensor([int(e[name]) for e in examples], dtype=torch.long)
        return batch

    def _sequence_offsets(self, position_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The packed sequences' offsets, padded to `sequence_offsets_count` entries where it is set."""
        offsets = packed_sequence_offsets(position_ids, attention_mask)
        count = self.sequence_offsets_count
        if count is None:
            return offsets
        if len(offsets) > count:
            raise ValueError(
                f"This batch holds {len(offsets) - 1} packed sequences (padding included), more than the "
                f"{count - 1} that sequence_offsets_count={count} leaves room for: raise it."
            )
        return torch.nn.functional.pad(offsets, (0, count - len(offsets)), value=int(offsets[-1]))

    def _prediction_slots(self, masked: torch.Tensor, examples: list[Mapping[str, Any]]) -> torch.Tensor:
        """Long [batch, slots]: the masked positions of each row in increasing order, then -1 (unused slots)."""
        length = masked.shape[1]
        most = max(math.ceil(self.mlm_probability * length), 1)  # no row's budget exceeds it
        num_slots = self.max_predictions_per_seq or most
        if num_slots < most:
            # Checked against the most a row can mask rather than what this batch masks, so that a run fails on
            # its first batch rather than on an unlucky one hours later.
            raise ValueError(
                f"max_predictions_per_seq={num_slots} is below what a row of {length} tokens can mask at "
                f"mlm_probability={self.mlm_probability} ({most}); raise it to {most} or leave it unset."
            )
        counts = masked.sum(1)
        if int(counts.max()) > num_slots:
            i = int(counts.argmax())
            raise ValueError(
                f"example {i} of the batch (example_index={examples[i].get('example_index')}) has {int(counts[i])} "
                f"masked tokens, more than max_predictions_per_seq={num_slots}; raise it."
            )
        return prediction_slots(masked, num_slots)

    def _unit_marks(self, examples: list[Mapping[str, Any]]) -> torch.Tensor:
        """Long [batch, length]: the unit marks of the examples' tokens (0, outside any unit, on padding)."""
        if not all(UNITS_COLUMN in e for e in examples):
            raise ValueError(
                f"masking={self.masking!r} masks the units found when the blocks were made, and the examples carry "
                f"no {UNITS_COLUMN!r}: make the blocks with prepare_blocks(..., units=...) "
                "(spanroberta.data.masking_units)."
            )
        return self._pad([e[UNITS_COLUMN] for e in examples], 0)[0]

    def _document_ids(self, examples: list[Mapping[str, Any]], length: int) -> torch.Tensor | None:
        """Long [batch, length]: the packed sequence of each token (padding forms one more), or None when the
        examples are not packed."""
        packed = sum("sequence_lengths" in e for e in examples)
        if not packed:
            return None
        if packed != len(examples):
            raise ValueError(
                f"{packed} of the {len(examples)} examples are packed (carry sequence_lengths) and the others are "
                "not; a batch holds one kind."
            )
        document_ids = np.zeros((len(examples), length), dtype=np.int64)
        for row, example in enumerate(examples):
            lengths = np.asarray(example["sequence_lengths"], dtype=np.int64)
            if lengths.sum() != len(example["input_ids"]) or (lengths < 1).any():
                raise ValueError(
                    f"example {row} of the batch (example_index={example.get('example_index')}) has "
                    f"sequence_lengths {lengths.tolist()}, which do not split its {len(example['input_ids'])} tokens."
                )
            # Padding, if any, is a sequence of its own: its positions restart too, so they never run past the
            # position table, and flattening the batch for flash attention keeps it apart.
            starts = np.zeros(length + 1, dtype=np.int64)
            starts[np.cumsum(lengths)] = 1
            document_ids[row] = np.cumsum(starts[:length])
        return torch.from_numpy(document_ids)

    def _pad(self, rows: list[Sequence[int] | torch.Tensor], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Right-pads rows to the longest (rounded up to `pad_to_multiple_of`); returns (ids, attention mask).

        Goes through numpy, which turns a list of lists into an array several times faster than torch.tensor.
        """
        rows = [row.numpy() if isinstance(row, torch.Tensor) else row for row in rows]
        lengths = [len(row) for row in rows]
        length = max(lengths)
        if self.pad_to_multiple_of:
            length = -(-length // self.pad_to_multiple_of) * self.pad_to_multiple_of
        if all(n == length for n in lengths):
            # The common case, packed blocks of one length: one conversion, no per-row copy.
            return torch.from_numpy(np.asarray(rows, dtype=np.int64)), torch.ones(len(rows), length, dtype=torch.long)
        ids = np.full((len(rows), length), pad_id, dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : lengths[i]] = row
        attention_mask = (torch.arange(length) < torch.tensor(lengths)[:, None]).long()
        return torch.from_numpy(ids), attention_mask

    def _check_ids(self, input_ids: torch.Tensor, examples: list[Mapping[str, Any]]) -> None:
        out_of_vocabulary = ((input_ids < 0) | (input_ids >= len(self._special))).any(1)
        if bool(out_of_vocabulary.any()):
            i = int(out_of_vocabulary.nonzero()[0])
            where = f"example {i} of the batch (example_index={examples[i].get('example_index')})"
            raise ValueError(f"{where} has token ids outside the tokenizer's vocabulary of {len(self._special)}.")

    def _row_keys(self, examples: list[Mapping[str, Any]]) -> torch.Tensor:
        with_index = sum("example_index" in e for e in examples)
        if with_index == len(examples):
            indices = torch.tensor([int(e["example_index"]) for e in examples], dtype=torch.long)
            epochs = torch.tensor([int(e.get("mask_epoch", 0)) for e in examples], dtype=torch.long)
            return row_keys(self.seed, epochs, indices)
        if with_index:
            raise ValueError(
                f"{with_index} of the {len(examples)} examples carry an example_index and the others do not; "
                "masks are keyed by it, so either all or none must have it."
            )
        keys = torch.randint(0, 2**32, (len(examples),), generator=self._generator)
        worker = torch.utils.data.get_worker_info()
        # DataLoader workers each hold a copy of the generator in the same state: tell their draws apart.
        return keys if worker is None else mix32(keys ^ worker.id)


def check_masking_rates(mlm_probability: float, geometric_p: float, flag_prefix: str = "") -> None:
    """Refuses a share of tokens to predict (`mlm_probability`) or a span-length parameter (`geometric_p`, of
    Geo(p)) outside (0, 1]. The collator checks its own settings with it, and run_pretraining.py's flags
    (`flag_prefix` "--") before any data is read."""
    for name, value in (("mlm_probability", mlm_probability), ("geometric_p", geometric_p)):
        if not 0 < value <= 1:
            raise UserInputError(f"{flag_prefix}{name} must be above 0 and at most 1, not {value}.")


def _restarting_positions(document_ids: torch.Tensor, first_position_id: int) -> torch.Tensor:
    """Position ids that restart at `first_position_id` at each packed sequence (a change of document id)."""
    positions = torch.arange(document_ids.shape[1]).expand_as(document_ids)
    is_start = F.pad(document_ids[:, 1:] != document_ids[:, :-1], (1, 0), value=True)
    return positions - torch.where(is_start, positions, 0).cummax(1).values + first_position_id


@contextmanager
def _one_intra_op_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
