"""Rows of a batch as `DataCollatorForSpanMasking` lays them out: padding to one length, moving the padding to
the left for tokenizers that pad there, and the packed sequences of packed rows (their document ids and the
position ids that restart at each)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

# Row: a list of ids, a numpy array or a tensor, as datasets, tokenizers and users hand them over.
Row = Sequence[int] | np.ndarray | torch.Tensor


def padded_length(lengths: Sequence[int], pad_to_multiple_of: int | None) -> int:
    """The longest row's length, rounded up to `pad_to_multiple_of`."""
    length = max(lengths, default=0)
    if pad_to_multiple_of:
        length = -(-length // pad_to_multiple_of) * pad_to_multiple_of
    return length


def pad_rows(rows: Sequence[Row], pad_id: int, length: int) -> torch.Tensor:
    """Long [batch, length]: the rows, right-padded with `pad_id`. The rows themselves are never written to.

    Goes through numpy, which turns a list of lists into an array several times faster than torch.tensor.
    """
    rows = [row.numpy() if isinstance(row, torch.Tensor) else row for row in rows]
    if all(len(row) == length for row in rows):
        # The common case, packed blocks of one length: one conversion (a copy), no per-row copy.
        return torch.from_numpy(np.asarray(rows, dtype=np.int64).reshape(len(rows), length))
    ids = np.full((len(rows), length), pad_id, dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    return torch.from_numpy(ids)


def move_padding_left(
    tensors: Mapping[str, torch.Tensor], padding: torch.Tensor, position_fields: Sequence[str] = ()
) -> dict[str, torch.Tensor]:
    """The [batch, length] `tensors` of right-padded rows with each row's `padding` (long [batch], its number of
    padding tokens) moved to its start. Values of `position_fields` that are positions (>= 0) move with them.

    Masks are drawn on right-padded rows and moved afterwards, so that a row's mask does not depend on how much
    padding the batch gives it, whichever side the tokenizer pads.
    """
    length = next(iter(tensors.values())).shape[1]
    source = (torch.arange(length) - padding[:, None]) % max(length, 1)
    moved = {}
    for name, tensor in tensors.items():
        tensor = tensor.gather(1, source)
        if name in position_fields:
            tensor = torch.where(tensor >= 0, tensor + padding[:, None], tensor)
        moved[name] = tensor
    return moved


def packed_document_ids(examples: Sequence[Mapping[str, Any]], length: int) -> torch.Tensor | None:
    """Long [batch, length]: the packed sequence of each token of right-padded rows (padding forms one more), or
    None when the examples are not packed (carry no `sequence_lengths`, from `formats.pack_sequences`)."""
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


def restarting_positions(document_ids: torch.Tensor, first_position_id: int) -> torch.Tensor:
    """Position ids that restart at `first_position_id` at each packed sequence (a change of document id)."""
    positions = torch.arange(document_ids.shape[1]).expand_as(document_ids)
    is_start = F.pad(document_ids[:, 1:] != document_ids[:, :-1], (1, 0), value=True)
    return positions - torch.where(is_start, positions, 0).cummax(1).values + first_position_id
