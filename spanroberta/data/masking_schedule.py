"""Dynamic and static masking schedules (RoBERTa section 4.1), as dataset wrappers.

Both attach `example_index` and `mask_epoch` to every row; `DataCollatorForSpanMasking` derives the row's mask
from (seed, mask_epoch, example_index) alone, as fairseq does. So the mask of a row never depends on the
DataLoader's order, prefetching, workers or a resume from a checkpoint.

- `DynamicMaskingDataset`: a fresh mask each epoch (RoBERTa's choice). The Trainer (through accelerate's
  `DataLoaderShard.set_epoch`) calls `set_epoch(epoch)` before each epoch.
- `StaticMaskingDataset`: BERT's static masking as RoBERTa replicated it, the data duplicated `dupe_factor`
  times with a different mask per copy, each copy keeping its mask every epoch.

With the Trainer, pass `remove_unused_columns=False` in the TrainingArguments: otherwise the Trainer drops
`example_index` and `mask_epoch` before the collator sees them (they are not arguments of the model's forward).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.utils.data import Dataset


def _as_row(row: Mapping[str, Any] | Sequence[int]) -> dict[str, Any]:
    return dict(row) if isinstance(row, Mapping) else {"input_ids": row}


class DynamicMaskingDataset(Dataset):
    """Row i of `blocks` plus example_index=i and mask_epoch=the current epoch (set by `set_epoch`).

    `blocks` is any sized dataset of rows: a `datasets.Dataset` with `input_ids` (and, say,
    `next_sentence_label`), or a list of id lists.
    """

    def __init__(self, blocks: Sequence[Mapping[str, Any]] | Sequence[Sequence[int]]) -> None:
        self.blocks = blocks
        # In shared memory so that DataLoader workers see set_epoch even when persistent (not re-created each
        # epoch): forked workers share the page, spawned ones receive a handle to it.
        self._epoch = torch.zeros((), dtype=torch.long).share_memory_()

    @property
    def epoch(self) -> int:
        return int(self._epoch)

    def set_epoch(self, epoch: int) -> None:
        self._epoch.fill_(epoch)

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, index: int) -> dict[str, Any]:
        row = _as_row(self.blocks[index])
        row["example_index"] = index
        row["mask_epoch"] = self.epoch
        return row


class StaticMaskingDataset(Dataset):
    """`dupe_factor` copies of `blocks`: item j is row j % N with example_index=j % N and mask_epoch=j // N.

    The mask of copy c is the one dynamic masking gives in epoch c, whatever the training epoch, so each copy
    keeps one mask for the whole run. This is the same as masking `dupe_factor` copies at preprocessing time
    (RoBERTa section 4.1 duplicates the data 10 times), without storing them.
    """

    def __init__(self, blocks: Sequence[Mapping[str, Any]] | Sequence[Sequence[int]], dupe_factor: int = 10) -> None:
        if dupe_factor < 1:
            raise ValueError(f"dupe_factor={dupe_factor} must be at least 1.")
        self.blocks = blocks
        self.dupe_factor = dupe_factor

    def __len__(self) -> int:
        return len(self.blocks) * self.dupe_factor

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is out of range for {len(self)} items.")
        copy, block = divmod(index, len(self.blocks))
        row = _as_row(self.blocks[block])
        row["example_index"] = block
        row["mask_epoch"] = copy
        return row
