"""The pretraining data collator: pads blocks of token ids, masks them, and lays out the predictions (MLM and SBO
targets) as transformers' models take them ([batch, length], the default) or in a fixed number of slots per row."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from spanroberta.data.batch_rows import (
    Row,
    move_padding_left,
    packed_document_ids,
    pad_rows,
    padded_length,
    restarting_positions,
)
from spanroberta.data.masking import (
    MLM_PROBABILITY,
    ngram_length_probabilities,
    random_token_ids,
    replace_masked_tokens,
    row_keys,
    span_length_probabilities,
    span_mask,
    special_token_table,
    token_mask,
    unit_mask,
    vocabulary_word_starts,
    word_starts,
    word_starts_at,
)
from spanroberta.data.word_starts import example_word_starts
from spanroberta.data.masking_units import UNIT_SCHEMES, UNITS_COLUMN
from spanroberta.data.random_streams import mix32
from spanroberta.errors import UserInputError
from spanroberta.models.configuration_spanroberta import (
    IGNORE_INDEX,
    SENTENCE_LABELS,
    SpanRobertaConfig,
    first_position_id,
)
from spanroberta.models.modeling_span_heads import in_slots, prediction_slots, sbo_targets
from spanroberta.models.packed_attention import packed_sequence_offsets

MASKING_SCHEMES = ("span", "word", "token", "ngram", *UNIT_SCHEMES)
# How the targets are laid out: "dense" is transformers' convention for masked LMs ([batch, length], -100 where a
# token is not predicted); "slots" is Google BERT's max_predictions_per_seq layout ([batch, slots]).
LABEL_LAYOUTS = ("dense", "slots")
RETURN_TENSORS = ("pt", "np")
# ALBERT section 4.1: n-grams of at most 3 words.
MAX_NGRAM_LENGTH = 3
# SpanBERT section 5.1: "at 50% of the time" named entities (noun phrases), random whole words otherwise.
SPANBERT_UNIT_SHARE = 0.5
# Outputs that hold positions of the row: they move with the tokens when the padding goes to the left.
_POSITION_FIELDS = ("sbo_left_positions", "sbo_right_positions")


@dataclass
class DataCollatorForSpanMasking:
    """Masks a batch for masked language modelling with SpanBERT's span masking and SBO targets.

    A drop-in for transformers' `DataCollatorForLanguageModeling`: the same arguments, in the same order and with
    the same meaning (`tokenizer`, `mlm`, `whole_word_mask`, `mlm_probability`, `mask_replace_prob`,
    `random_replace_prob`, `pad_to_multiple_of`, `return_tensors` "pt" or "np", `seed`), called the same way (a
    list of mappings with `input_ids`, of lists of ids or of tensors; `return_tensors` may also be given per call).
    By default (`label_layout="dense"`) `labels` is [batch, length], the original id where a token is predicted
    and -100 elsewhere, which every `*ForMaskedLM` and the `Trainer` take unchanged; `mlm=False` gives causal-LM
    labels (the ids, -100 at the pad token) as transformers does. Rows are padded on the tokenizer's
    `padding_side`. Where span masking must differ from token masking, docs/pretraining.md#drop-in says how.
    Ids outside the tokenizer's vocabulary are refused (transformers would pass them to the model's embedding).

    It returns:
    - `input_ids` (masked) and `attention_mask` (the examples' own, when they all carry one), [batch, length];
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
      `sbo_left_positions`, `sbo_right_positions` and `sbo_relative_positions` (see `models/modeling_span_heads.py`'s
      `sbo_targets`), in the same layout as `labels`: per token ([batch, length]) or per slot, -100 where a token
      or slot is not an SBO target;
    - `token_type_ids` (padded with 0), `next_sentence_label` and `sentence_order_label` when the examples
      carry them.

    Special tokens (the tokenizer's, and those an example's `special_tokens_mask` marks) are never masked.
    whole_word_mask: every scheme but "token" masks whole words already; with masking="token" it is refused.
    masking (keyword): "span" (SpanBERT section 3.1: whole-word spans, lengths ~ Geo(geometric_p) truncated to
        [1, max_span_length]), "ngram" (ALBERT section 4.1: whole-word n-grams, p(n) = (1/n) / (1 + 1/2 + 1/3)
        for n <= 3), "word" (whole words, SpanBERT section 5.1's baseline), "token" (RoBERTa's), or masking of
        linguistic units, which the examples carry in a `masking_units` column (`masking_units.MaskingUnits`):
        "named-entity" and "noun-phrase" (SpanBERT section 5.1: half the budget on whole units, half on random
        whole words) or "pmi" (PMI-Masking, Levine et al. 2021: n-grams and lone words drawn alike; see
        `masking.unit_mask`). All but token masking pick 80/10/10 once per run of masked tokens, token masking
        per token. Words are the examples' own when they carry them (a `word_starts` column, 1 where a token starts
        a word, or a `word_ids` column, -1 outside words: a segmenter's boundaries, `data/word_starts.py`), else
        read from the vocabulary's word-start markers ("Ġ", "▁", "##"), with each CJK character a word of its own;
        a vocabulary without markers takes words from the examples' `word_ids()` (fast tokenizers' encodings), or
        else each token as a word, with a warning.

    The mask does not depend on the layout: both give the same predicted positions for the same seed.
    Masks are a pure function of (seed, mask_epoch, example_index) when the examples carry those int fields,
    as `masking_schedule.DynamicMaskingDataset` and `StaticMaskingDataset` provide: reproducible, and identical
    after resuming from a checkpoint (with `seed=None`, the seed is `torch.initial_seed()` when the collator is
    built, which `set_seed` sets). With the Trainer, set `remove_unused_columns=False`, or it strips them.
    Without them, each row's key is drawn from the collator's own generator, seeded with `seed`, or with
    `seed=None` from torch's global generator, as transformers' collator draws its masks: a fresh mask per call.
    """

    tokenizer: PreTrainedTokenizerBase
    mlm: bool = True
    whole_word_mask: bool = False
    mlm_probability: float | None = MLM_PROBABILITY
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    pad_to_multiple_of: int | None = None
    return_tensors: str = "pt"
    seed: int | None = None
    _: KW_ONLY
    masking: str = "span"
    geometric_p: float = 0.2
    max_span_length: int = 10
    max_span_targets: int = 15
    return_sbo_targets: bool | None = None
    max_predictions_per_seq: int | None = None
    first_position_id: int | None = None
    label_layout: str = "dense"
    return_sequence_offsets: bool = False
    sequence_offsets_count: int | None = None

    def __post_init__(self) -> None:
        self._check_settings()
        if self.return_sbo_targets is None:
            self.return_sbo_targets = self.mlm and self.label_layout == "slots"
        if self.first_position_id is None:
            # Without the model's config, positions are numbered as spanroberta's own model numbers them.
            self.first_position_id = first_position_id(SpanRobertaConfig(pad_token_id=self.tokenizer.pad_token_id))

        self._special = special_token_table(self.tokenizer)
        self._replacement_ids = random_token_ids(self._special)
        self._word_start = None if self.masking == "token" else vocabulary_word_starts(self.tokenizer)
        self._warned_token_words = False
        self._span_lengths = {
            "span": span_length_probabilities(self.geometric_p, self.max_span_length),
            "ngram": ngram_length_probabilities(MAX_NGRAM_LENGTH),
            "word": torch.ones(1, dtype=torch.float64),
        }.get(self.masking)
        self._generator = None if self.seed is None else torch.Generator().manual_seed(self.seed)
        # Keyed rows (example_index) need a seed that every DataLoader worker shares: read once, here.
        self._key_seed = torch.initial_seed() if self.seed is None else self.seed

    def _check_settings(self) -> None:
        if self.masking not in MASKING_SCHEMES:
            raise ValueError(f"masking={self.masking!r} is not one of {', '.join(map(repr, MASKING_SCHEMES))}.")
        _check_choice("label_layout", self.label_layout, LABEL_LAYOUTS)
        _check_choice("return_tensors", self.return_tensors, RETURN_TENSORS)
        if self.max_predictions_per_seq is not None and self.label_layout != "slots":
            raise ValueError(
                "max_predictions_per_seq sets the number of prediction slots: it needs label_layout='slots'."
            )
        if self.whole_word_mask and (not self.mlm or self.masking == "token"):
            raise ValueError(
                f"whole_word_mask=True masks whole words, which needs mlm=True and a masking other than 'token' "
                f"(mlm={self.mlm}, masking={self.masking!r}); every other masking masks whole words already."
            )
        if not self.mlm and (self.label_layout == "slots" or self.return_sbo_targets):
            raise ValueError("mlm=False gives causal-LM labels: prediction slots and SBO targets need mlm=True.")
        if self.mlm:
            if self.mlm_probability is None:
                raise ValueError("mlm=True needs an mlm_probability, at least 0 and at most 1.")
            check_masking_rates(self.mlm_probability, self.geometric_p, zero_masking_allowed=True)
            if self.tokenizer.mask_token_id is None:
                raise ValueError(
                    f"{type(self.tokenizer).__name__} has no mask token, which masked language modelling needs; "
                    "pass mlm=False for causal language modelling."
                )
        if self.max_span_length < 1 or self.max_span_targets < 1:
            raise ValueError("max_span_length and max_span_targets must be at least 1.")
        if self.max_predictions_per_seq is not None and self.max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq={self.max_predictions_per_seq} must be at least 1.")
        if min(self.mask_replace_prob, self.random_replace_prob) < 0 or (
            self.mask_replace_prob + self.random_replace_prob > 1
        ):
            raise ValueError("mask_replace_prob and random_replace_prob must be >= 0 and sum to at most 1.")

    def __call__(
        self, examples: Sequence[Mapping[str, Any] | Row], return_tensors: str | None = None
    ) -> dict[str, torch.Tensor | np.ndarray]:
        return_tensors = return_tensors or self.return_tensors
        _check_choice("return_tensors", return_tensors, RETURN_TENSORS)
        # The tensors here are small ([batch, length] integers), so intra-op threads cost more in synchronisation
        # than they save: one thread is faster even on an idle machine, and far faster on a busy one, where every
        # parallel op waits for a preempted thread (benchmarks/RESULTS.md). DataLoader workers run one already.
        with _one_intra_op_thread():
            batch = self._collate(examples)
        return batch if return_tensors == "pt" else {name: value.numpy() for name, value in batch.items()}

    def _collate(self, examples: Sequence[Mapping[str, Any] | Row]) -> dict[str, torch.Tensor]:
        if not len(examples):
            raise ValueError("DataCollatorForSpanMasking got an empty list of examples.")
        examples = [e if isinstance(e, Mapping) else {"input_ids": e} for e in examples]
        lengths = [len(e["input_ids"]) for e in examples]
        length = padded_length(lengths, self.pad_to_multiple_of)
        input_ids = pad_rows([e["input_ids"] for e in examples], self._pad_id(lengths, length), length)
        self._check_ids(input_ids, examples)
        if all("attention_mask" in e for e in examples):
            attention_mask = pad_rows([e["attention_mask"] for e in examples], 0, length)
        else:
            attention_mask = (torch.arange(length) < torch.tensor(lengths)[:, None]).long()

        rows = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.mlm:
            masked, targets = self._mask(input_ids, attention_mask, examples, rows)
        elif any("sequence_lengths" in e for e in examples):
            # Causal-LM labels of packed rows would need positions that restart at each document, which only the
            # masked-LM path builds: refused rather than letting attention and positions run across documents.
            raise ValueError("mlm=False takes unpacked rows: these examples are packed (carry sequence_lengths).")
        else:
            masked, targets = None, {"labels": self._causal_labels(input_ids)}
        rows.update(targets)
        if "token_type_ids" in examples[0]:
            rows["token_type_ids"] = pad_rows([e["token_type_ids"] for e in examples], 0, length)
        padding = length - torch.tensor(lengths)
        if self.tokenizer.padding_side == "left" and bool(padding.any()):
            masked = None if masked is None else move_padding_left({"masked": masked}, padding)["masked"]
            rows = move_padding_left(rows, padding, _POSITION_FIELDS)
        if self.return_sequence_offsets and "position_ids" in rows:  # on the host: no nonzero() on the device
            rows["sequence_offsets"] = self._sequence_offsets(rows["position_ids"], rows["attention_mask"])
        if self.label_layout == "slots":
            slots = self._prediction_slots(masked, examples)
            rows["mlm_positions"] = in_slots(torch.arange(masked.shape[1]).expand_as(masked), slots)
            rows.update({name: in_slots(rows[name], slots) for name in targets})
        for name in SENTENCE_LABELS.values():
            if name in examples[0]:
                rows[name] = torch.tensor([int(e[name]) for e in examples], dtype=torch.long)
        return rows

    def _mask(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        examples: list[Mapping[str, Any]],
        rows: dict[str, torch.Tensor],
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Masks right-padded rows: returns the masked positions and the targets (labels, SBO targets), and writes
        the masked `input_ids` (and the `position_ids` of packed rows) into `rows`."""
        keys = self._row_keys(examples)
        document_ids = packed_document_ids(examples, input_ids.shape[1])
        maskable = attention_mask.bool() & ~self._special[input_ids]
        if all("special_tokens_mask" in e for e in examples):
            maskable &= pad_rows([e["special_tokens_mask"] for e in examples], 1, input_ids.shape[1]) == 0
        if self.masking == "token":
            masked = token_mask(maskable, keys, self.mlm_probability)
        elif self.masking in UNIT_SCHEMES:
            masked = unit_mask(
                self._word_starts(input_ids, maskable, examples),
                maskable,
                self._unit_marks(examples, input_ids.shape[1]),
                keys,
                self.mlm_probability,
                unit_share=None if self.masking == "pmi" else SPANBERT_UNIT_SHARE,
            ).masked
        else:
            masked = span_mask(
                self._word_starts(input_ids, maskable, examples),
                maskable,
                keys,
                self.mlm_probability,
                document_ids=document_ids,
                length_probabilities=self._span_lengths,
            ).masked
        rows["input_ids"], labels = replace_masked_tokens(
            input_ids,
            masked,
            keys,
            self.tokenizer.mask_token_id,
            self._replacement_ids,
            self.mask_replace_prob,
            self.random_replace_prob,
            per_run=self.masking != "token",
        )
        if document_ids is not None:
            rows["position_ids"] = restarting_positions(document_ids, self.first_position_id)
        targets = {"labels": labels}
        if self.return_sbo_targets:
            targets.update(sbo_targets(masked, attention_mask, self.max_span_targets, document_ids))
        return masked, targets

    def _causal_labels(self, input_ids: torch.Tensor) -> torch.Tensor:
        """transformers' causal-LM labels: the ids themselves (the model shifts them), -100 at the pad token."""
        pad_id = self.tokenizer.pad_token_id
        return input_ids.clone() if pad_id is None else input_ids.masked_fill(input_ids == pad_id, IGNORE_INDEX)

    def _pad_id(self, lengths: list[int], length: int) -> int:
        """The tokenizer's pad id; refused only when some row needs padding."""
        pad_id = self.tokenizer.pad_token_id
        if pad_id is None and any(n != length for n in lengths):
            raise ValueError(
                f"The rows of this batch need padding to {length} tokens, and {type(self.tokenizer).__name__} has "
                "no pad token: set one (tokenizer.pad_token = ...), or give rows of one length."
            )
        return 0 if pad_id is None else pad_id

    def _word_starts(
        self, input_ids: torch.Tensor, maskable: torch.Tensor, examples: list[Mapping[str, Any]]
    ) -> torch.Tensor:
        """Bool [B, L]: the maskable tokens that start a word, by the examples' own boundaries (a `word_starts` or
        `word_ids` column), else by the vocabulary's table, else by the examples' `word_ids()` (fast tokenizers'
        encodings), else every token (a warning says so, once)."""
        own = example_word_starts(examples, input_ids.shape[1])
        if own is None and self._word_start is not None:
            return word_starts(input_ids, maskable, self._word_start)
        if own is None:
            own = example_word_starts(examples, input_ids.shape[1], from_encodings=True)
        if own is not None:
            return word_starts_at(own, maskable)
        if not self._warned_token_words:
            warnings.warn(
                f"{type(self.tokenizer).__name__}'s vocabulary marks no word starts ('Ġ', '▁' or '##') and the "
                f"examples carry no word_starts, word_ids nor word_ids(): masking={self.masking!r} takes each token "
                "as a word. Pass the tokenizer's encodings (BatchEncoding) to mask whole words.",
                UserWarning,
                stacklevel=5,  # the caller of the collator
            )
            self._warned_token_words = True
        return maskable

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

    def _unit_marks(self, examples: list[Mapping[str, Any]], length: int) -> torch.Tensor:
        """Long [batch, length]: the unit marks of the examples' tokens (0, outside any unit, on padding)."""
        if not all(UNITS_COLUMN in e for e in examples):
            raise ValueError(
                f"masking={self.masking!r} masks the units found when the blocks were made, and the examples carry "
                f"no {UNITS_COLUMN!r}: make the blocks with prepare_blocks(..., units=...) "
                "(spanroberta.data.masking_units)."
            )
        return pad_rows([e[UNITS_COLUMN] for e in examples], 0, length)

    def _check_ids(self, input_ids: torch.Tensor, examples: list[Mapping[str, Any]]) -> None:
        """Refuses ids outside the vocabulary, which no embedding table of the tokenizer's size can look up."""
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
            return row_keys(self._key_seed, epochs, indices)
        if with_index:
            raise ValueError(
                f"{with_index} of the {len(examples)} examples carry an example_index and the others do not; "
                "masks are keyed by it, so either all or none must have it."
            )
        keys = torch.randint(0, 2**32, (len(examples),), generator=self._generator)
        worker = torch.utils.data.get_worker_info()
        # DataLoader workers each hold a copy of the collator's generator in the same state: tell their draws apart.
        # (Torch's global generator is seeded apart in each worker already.)
        return keys if worker is None or self._generator is None else mix32(keys ^ worker.id)


def check_masking_rates(
    mlm_probability: float, geometric_p: float, flag_prefix: str = "", zero_masking_allowed: bool = False
) -> None:
    """Refuses a share of tokens to predict (`mlm_probability`) outside (0, 1] ([0, 1] with `zero_masking_allowed`,
    as transformers' collator takes it) or a span-length parameter (`geometric_p`, of Geo(p)) outside (0, 1]. The
    collator checks its own settings with it, and run_pretraining.py's flags (`flag_prefix` "--"), where masking
    nothing would train nothing, before any data is read."""
    for name, value, zero_allowed in (("mlm_probability", mlm_probability, zero_masking_allowed),
                                      ("geometric_p", geometric_p, False)):  # fmt: skip
        if not (0 <= value <= 1 if zero_allowed else 0 < value <= 1):
            bound = "at least 0" if zero_allowed else "above 0"
            raise UserInputError(f"{flag_prefix}{name} must be {bound} and at most 1, not {value}.")


@contextmanager
def _one_intra_op_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _check_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}.")
