"""How a line is tokenized: after a space, in pieces of bounded length, so that memory does not grow with a line.

The space: a line is tokenized as running text would have it. Byte-level BPE then marks its first word as a word
start ("Ġ"), so whole-word and span masking never join a sentence's first word to the last word of the sentence
before; WordPiece and SentencePiece tokenizers ignore it.

The pieces: a fast tokenizer keeps, for each text of a call, several records per character (the normalised string
and its alignments, the pre-tokenized words) and per token (the `Encoding`): tens of bytes per character, a hundred
on one long line, so a single 50 MB line took gigabytes. Here no call sees more than `MAX_CALL_CHARS` characters: a
longer line is cut into pieces (`line_pieces`) whose results are joined back per line (`in_pieces`).

Where a line is cut: before a single space that sits between two characters that are not whitespace, the last such
space that keeps the piece within the limit. Every tokenizer spanroberta trains or names splits its words there
anyway, so the pieces' ids joined are the whole line's ids:
- byte-level BPE (RoBERTa, GPT-2): the pre-tokenizer's matches never run from a character that is not whitespace
  into the space after it, and a match starts at such a space (" word" becomes "Ġword"); a piece after a cut starts
  with its space, so an `add_prefix_space` adds nothing;
- WordPiece (BERT): words end at every whitespace; the normaliser works character by character;
- SentencePiece-style unigram (ALBERT): Metaspace splits before every "▁" and prepends none to a piece that starts
  with a space; the normaliser collapses only runs of two or more spaces, which a cut never falls in (NFKD turns
  no character other than whitespace into one that ends with a space).
What could differ, for tokenizers outside these: a normaliser or pre-tokenizer that reads across such a space (a
unigram model without pre-tokenization, a replacement of a pattern holding a space), or an added token that strips
the space after it (`rstrip`). A stretch of `max_chars` characters with no such space (text without spaces, or a
long run of symbols) is cut at its last character instead: the word there is then tokenized as two words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

import numpy as np
from transformers import PreTrainedTokenizerBase

# At most this many characters per tokenizer call: its memory then stays within a few tens of MB whatever the
# line (and calls of a quarter million characters tokenize as fast as larger ones).
MAX_CALL_CHARS = 2**18

Result = TypeVar("Result")


def line_pieces(line: str, max_chars: int = MAX_CALL_CHARS) -> Iterator[str]:
    """The text the line is tokenized as, the line after a space, in consecutive pieces of at most `max_chars`
    characters (at least 1), cut where the module says; a text within the limit is its only piece. The whole text
    is never built: a long line is not copied."""
    # The first piece holds the space, so one character of the line fewer.
    pieces = _pieces(line, max_chars - 1, max_chars)
    yield " " + next(pieces)
    yield from pieces


def cut_line(line: str, max_chars: int = MAX_CALL_CHARS) -> Iterator[str]:
    """The line itself in consecutive pieces of at most `max_chars` characters, cut where the module says: how a
    corpus reader keeps a long line's pieces within the limit (`corpus`); a piece after a cut starts with its
    space."""
    return _pieces(line, max_chars, max_chars)


def _pieces(line: str, first_limit: int, limit: int) -> Iterator[str]:
    start, size = 0, first_limit
    while len(line) - start > size:
        end = _cut(line, start, start + size)
        yield line[start:end]
        start, size = end, limit
    yield line[start:]


def _cut(line: str, start: int, limit: int) -> int:
    """The last cut in line[start + 1 : limit + 1]: before a space between two characters that are not whitespace,
    or at `limit` when there is none."""
    end = limit + 1
    while (space := line.rfind(" ", start + 1, end)) != -1:
        if not line[space - 1].isspace() and space + 1 < len(line) and not line[space + 1].isspace():
            return space
        end = space
    return limit


def in_pieces(
    lines: Sequence[str], process: Callable[[list[str]], Sequence[Result]], max_chars: int = MAX_CALL_CHARS
) -> list[list[Result]]:
    """Per line, the results of its pieces in order: `process` is called on runs of consecutive pieces of at most
    `max_chars` characters in all, and returns one result per piece."""
    results: list[list[Result]] = [[] for _ in lines]
    call: list[str] = []
    owners: list[int] = []
    size = 0
    for number, line in enumerate(lines):
        for piece in line_pieces(line, max_chars):
            if call and size + len(piece) > max_chars:
                _run(process, call, owners, results)
                size = 0
            call.append(piece)
            owners.append(number)
            size += len(piece)
    if call:
        _run(process, call, owners, results)
    return results


def _run(process: Callable[[list[str]], Sequence[Result]], call: list[str], owners: list[int],
         results: list[list[Result]]) -> None:  # fmt: skip
    """Hands each result of `process(call)` to the line its piece came from, and empties the call."""
    for owner, result in zip(owners, process(call), strict=True):
        results[owner].append(result)
    call.clear()
    owners.clear()


def encode_lines(
    lines: Sequence[str], tokenizer: PreTrainedTokenizerBase, max_chars: int = MAX_CALL_CHARS
) -> list[np.ndarray]:
    """Token ids of each line (int32) tokenized after a space, in pieces (`in_pieces`); no special tokens, no
    truncation."""
    pieces = in_pieces(lines, lambda call: _encode(call, tokenizer), max_chars)
    return [ids[0] if len(ids) == 1 else np.concatenate(ids) for ids in pieces]


def _encode(texts: list[str], tokenizer: PreTrainedTokenizerBase) -> list[np.ndarray]:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if (
        backend is not None
        and backend.truncation is None
        and backend.padding is None
        and backend.encode_special_tokens == tokenizer.split_special_tokens
    ):
        # What `tokenizer(texts)` runs, without building an `Encoding` per text (offsets, word ids) and
        # converting it to Python lists, most of the tokenizer's time (benchmarks/speed/data_prep.py measures it).
        # Only when the backend is set as that call would set it, so the ids are the same.
        encodings = backend.encode_batch_fast(texts, add_special_tokens=False)
        return [np.array(encoding.ids, dtype=np.int32) for encoding in encodings]
    # verbose=False: lines longer than the model's maximum length are expected (blocks cut them).
    ids = tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]
    return [np.array(line_ids, dtype=np.int32) for line_ids in ids]
