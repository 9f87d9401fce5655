"""Streaming mode: pretraining blocks made on the fly from a corpus read lazily, for corpora larger than memory
or disk.

Documents come from `corpus.iter_documents` (read lazily). As in `formats.build_blocks`, consecutive documents form
groups by the rule of `groups.py` (at most `documents_per_group` documents), numbered from 0 in corpus order, and a group's
blocks depend only on its documents, its number and the seed; so streaming yields the same blocks as the
in-memory and prepared modes.

Splitting by process and DataLoader worker: the `num_processes x num_workers` readers each read the whole
document stream and tokenize and pack only the groups g with g % readers == their rank. Every block therefore
belongs to exactly one reader. Reading is the cheap part next to tokenizing; with very many readers on one
machine, the prepared mode (`spanroberta.data.prepared`) reads the corpus once instead.

Each reader cycles through its groups, one pass after another, without ever stopping: the Trainer sees one
endless epoch (train with `max_steps`), no process runs out of data before the others, and a resumed run
replays the same stream. In pass p, a reader shuffles its blocks with a buffer of `shuffle_buffer_size` blocks
(seeded with (seed, p, reader); 10,000 blocks of 512 tokens take 20 MB) and yields each of them exactly once,
with `mask_epoch` = p (or p modulo the number of copies under static masking). Each reader's pass is one epoch
over its share of the corpus: across readers, every block is seen once per epoch and none twice.

Each block also carries an `example_index`, a hash of (group number, position in the group): the same whatever
the number of processes or workers, so that the collator's masks stay a pure function of (seed, epoch, index).
It is hashed rather than, say, group * 2**32 + position because the masks use the index's low 32 bits only.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info
from transformers import PreTrainedTokenizerBase

from ..errors import UserInputError
from .formats import BlockBuilder, token_arrays
from .groups import grouped

logger = logging.getLogger(__name__)

_MASK64 = 2**64 - 1


def stable_block_index(group_index: int, position: int) -> int:
    """A 63-bit index for the `position`-th block of group `group_index` (splitmix64 of the pair)."""
    x = ((group_index << 32) + position + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (x ^ (x >> 31)) >> 1


# eq=False keeps a dataset hashable and compared by identity, as torch's datasets are.
@dataclass(eq=False)
class StreamingBlocks(IterableDataset):
    """An endless stream of pretraining blocks for one process, split between its DataLoader workers.

    read_documents: called once per pass by each reader; returns the corpus's documents in a fixed order (for
        example `functools.partial(corpus.iter_documents, CorpusSource(train_files=[...]))`; it must pickle, for
        workers).
    builder: how a group of tokenized documents becomes blocks (`formats.block_builder`).
    static_masking_copies: None for dynamic masking (a fresh mask each pass); otherwise the number of masks each
        block cycles through (RoBERTa section 4.1's static baseline with `dupe_factor` copies).
    process_index, num_processes: this process among the data-parallel processes.

    Rows hold `input_ids` (and `token_type_ids`, a pair label) as int32 arrays, `example_index` and `mask_epoch`.
    """

    read_documents: Callable[[], Iterable[str]]
    tokenizer: PreTrainedTokenizerBase
    builder: BlockBuilder
    documents_per_group: int = 1000
    shuffle_buffer_size: int = 10_000
    seed: int = 0
    static_masking_copies: int | None = None
    process_index: int = 0
    num_processes: int = 1

    def __post_init__(self) -> None:
        if self.documents_per_group < 1 or self.shuffle_buffer_size < 1:
            raise ValueError("documents_per_group and shuffle_buffer_size must be at least 1.")
        if not 0 <= self.process_index < self.num_processes:
            raise ValueError(f"process_index {self.process_index} is not in [0, {self.num_processes}).")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        worker = get_worker_info()
        num_workers = worker.num_workers if worker is not None else 1
        reader = self.process_index * num_workers + (worker.id if worker is not None else 0)
        readers = self.num_processes * num_workers
        for pass_index in itertools.count():
            rng = np.random.default_rng([self.seed, pass_index, reader])
            count = 0
            for block in _shuffled(self._blocks_of_pass(pass_index, reader, readers), rng, self.shuffle_buffer_size):
                count += 1
                yield block
            if count == 0:
                raise UserInputError(
                    f"Streaming reader {reader} of {readers} (processes x DataLoader workers) got no data: the "
                    f"corpus has fewer groups of {self.documents_per_group} documents than there are readers. Use "
                    "fewer --dataloader_num_workers, a smaller --documents_per_group, or the prepared mode "
                    "(--prepared_data_dir) for a corpus this small."
                )

    def _blocks_of_pass(self, pass_index: int, reader: int, readers: int) -> Iterator[dict[str, Any]]:
        mask_epoch = pass_index if self.static_masking_copies is None else pass_index % self.static_masking_copies
        groups = grouped(self.read_documents(), self.documents_per_group, len)
        replaced = 0
        for group_index, texts in enumerate(groups):
            if group_index % readers != reader:
                continue
            replaced += sum("\ufffd" in text for text in texts)
            documents = token_arrays(texts, self.tokenizer, self.builder.units)
            for position, block in enumerate(self.builder.blocks(documents, group_index)):
                row: dict[str, Any] = {
                    name: np.asarray(value, dtype=np.int32) if isinstance(value, (list, np.ndarray)) else value
                    for name, value in block.items()
                }
                row["example_index"] = stable_block_index(group_index, position)
                row["mask_epoch"] = mask_epoch
                yield row
        if replaced and pass_index == 0:
            logger.warning(
                "Streaming reader %d: %d documents of its share hold U+FFFD, the replacement for bytes that are not "
                "UTF-8 (`grep -naxv '.*' FILE` lists such lines).",
                reader,
                replaced,
            )


def _shuffled(items: Iterator[dict[str, Any]], rng: np.random.Generator, buffer_size: int) -> Iterator[dict[str, Any]]:
    """Each item exactly once, in an order mixed by a buffer of `buffer_size` items (as datasets' shuffle)."""
    buffer: list[dict[str, Any]] = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        slot = int(rng.integers(buffer_size))
        yield buffer[slot]
        buffer[slot] = item
    for slot in rng.permutation(len(buffer)):
        yield buffer[slot]

