"""How the formats of `formats.py` cut a group of tokenized documents into the segments of their blocks: cuts of
a fixed number of tokens (full-sentences, doc-sentences), and BERT's segment pairs with their NSP or SOP label
(segment-pair, sentence-pair). Sentences longer than a segment are cut into pieces, never dropped."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

# A document is a list of sentences, a sentence an int32 array of token ids. Segments are views of them or joined
# copies, so that a long document is never held as Python ints.
Document = list[np.ndarray]


def packed_segments(documents: list[Document], budget: int, separator: int | None) -> Iterator[np.ndarray]:
    """`budget`-token cuts of each document's tokens, or, given a `separator`, of all documents joined by it."""
    if separator is None:
        streams = [_concatenate(document) for document in documents]
    else:
        # RoBERTa section 4.2 (FULL-SENTENCES): "add an extra separator token between documents".
        parts: list[np.ndarray] = []
        joined = 0
        for document in documents:
            if joined:
                parts.append(np.array([separator], dtype=np.int32))
            parts += document
            joined += sum(len(sentence) for sentence in document)
        streams = [_concatenate(parts)]
    for stream in streams:
        for start in range(0, len(stream), budget):
            yield stream[start : start + budget]


def segment_pairs(
    documents: list[Document], rng: np.random.Generator, budget: int, one_sentence: bool, sentence_order: bool
) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """Segment pairs (A, B, label) from a group of documents, after BERT's create_instances_from_document.

    A chunk of consecutive pieces (at most two for sentence pairs) is cut at a random piece boundary
    into A and B. For NSP, half of the time (and always when the chunk is a single piece, if the group
    has another document) B is replaced by a random stretch of another document, and the pieces of the
    true B start the next chunk. Otherwise B is the true continuation, for SOP swapped with A half of the
    time; a lone piece is then cut in two at a random token (a one-token lone piece cannot be, and is dropped).
    """
    pieces_per_document = [_pieces(document, budget // 2) for document in documents]
    for index, pieces in enumerate(pieces_per_document):
        start = 0
        while start < len(pieces):
            end = _chunk_end(pieces, start, budget, max_pieces=2 if one_sentence else None)
            if not sentence_order and len(documents) > 1 and (end - start == 1 or rng.random() < 0.5):
                a_end = start + 1 if end - start == 1 else int(rng.integers(start + 1, end))
                a = _concatenate(pieces[start:a_end])
                yield a, _random_segment(pieces_per_document, index, rng, budget - len(a), one_sentence), 1
                start = a_end
                continue
            if end - start == 1:
                if len(pieces[start]) == 1:
                    start = end
                    continue
                cut = int(rng.integers(1, len(pieces[start])))
                pieces[start : start + 1] = [pieces[start][:cut], pieces[start][cut:]]
                end += 1
            a_end = int(rng.integers(start + 1, end))
            a, b = _concatenate(pieces[start:a_end]), _concatenate(pieces[a_end:end])
            swapped = sentence_order and rng.random() < 0.5
            yield (b, a, 1) if swapped else (a, b, 0)
            start = end


def _pieces(document: Document, piece_length: int) -> list[np.ndarray]:
    """The document's sentences, cut into pieces of at most `piece_length` tokens.

    Pair formats use half a block, so that any two pieces fit in one block together."""
    return [
        sentence[start : start + piece_length]
        for sentence in document
        for start in range(0, len(sentence), piece_length)
    ]


def _chunk_end(pieces: list[np.ndarray], start: int, budget: int, max_pieces: int | None) -> int:
    """The end of the longest run of pieces from `start` on that fits in `budget` tokens (at least one piece)."""
    end, length = start + 1, len(pieces[start])
    while (
        end < len(pieces)
        and (max_pieces is None or end - start < max_pieces)
        and length + len(pieces[end]) <= budget
    ):
        length += len(pieces[end])
        end += 1
    return end


def _random_segment(
    pieces_per_document: list[list[np.ndarray]], index: int, rng: np.random.Generator, room: int, one_sentence: bool
) -> np.ndarray:
    """Up to `room` tokens of a document other than the `index`-th, from a random piece on (one piece at most
    for sentence pairs)."""
    other = int(rng.integers(len(pieces_per_document) - 1))
    pieces = pieces_per_document[other + (other >= index)]
    start = int(rng.integers(len(pieces)))
    stop = start + 1 if one_sentence else len(pieces)
    taken: list[np.ndarray] = []
    for position in range(start, stop):
        if room <= 0:
            break
        taken.append(pieces[position][:room])
        room -= len(taken[-1])
    return _concatenate(taken)


def _concatenate(pieces: list[np.ndarray]) -> np.ndarray:
    if len(pieces) == 1:
        return pieces[0]  # not copied: a document of one long line is not held twice
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)
