"""Which documents are made into blocks together: the groups of `formats.build_blocks` and of streaming.

A group is a run of consecutive documents: at most `documents_per_group` of them, and at most `MAX_GROUP_CHARACTERS`
characters in all (a document of more starts a group of its own). Its blocks depend only on its documents, its
number and the seed, so the in-memory, prepared and streaming modes, which all group by this rule, make the same
blocks whatever the number of processes. The character bound keeps a group's memory (its token ids and blocks,
a few copies of 4 bytes a token) within about a hundred MB however long the corpus's documents are: a thousand
book-length documents would otherwise make one group of gigabytes. Groups of ordinary documents (a thousand
Wikipedia articles hold a few million characters) are cut by their count alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

MAX_GROUP_CHARACTERS = 2**24

Item = TypeVar("Item")


def grouped(
    documents: Iterable[Item], documents_per_group: int, characters: Callable[[Item], int]
) -> Iterator[list[Item]]:
    """Consecutive groups of `documents` by the rule above; `characters(document)` is a document's length."""
    group: list[Item] = []
    size = 0
    for document in documents:
        length = characters(document)
        if group and (len(group) == documents_per_group or size + length > MAX_GROUP_CHARACTERS):
            yield group
            group, size = [], 0
        group.append(document)
        size += length
    if group:
        yield group
