"""A word segmenter's words, found once when the corpus is tokenized and stored with the blocks as a `word_starts`
column (1 where a token starts a word), which the collator reads in place of the vocabulary's word starts.

Chinese, Japanese, Thai and other scripts write words without spaces; a segmenter (jieba for Chinese, MeCab through
fugashi for Japanese) cuts a line into words, and the token that begins where a word begins starts one. The flags
ride through the block builder inside the ids, as masking units' marks do (`masking_units`): `id + flag * stride`,
split off into `WORD_STARTS_COLUMN` when the blocks are made, so they follow prepared, packed and streamed blocks
alike. Special tokens and separators the builder inserts carry no flag; `masking.word_starts_at` starts a word after
them and at a row's start.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from transformers import PreTrainedTokenizerBase

from ..errors import UserInputError, require_package
from .line_pieces import in_pieces
from .masking_units import UNIT_SCHEMES, MaskingUnits, unit_stride
from .word_starts import WORD_STARTS_COLUMN

# The segmenters --word_segmenter names, with the packages each needs (all in the `segmenters` extra): jieba for
# Chinese, fugashi (MeCab with unidic-lite's dictionary) for Japanese.
SEGMENTER_PACKAGES = {"jieba": ("jieba",), "fugashi": ("fugashi", "unidic_lite")}
WORD_SEGMENTERS = tuple(SEGMENTER_PACKAGES)
SEGMENTERS_INSTALL = '`pip install -e ".[segmenters]"` in the checkout'


def load_segmenter(name: str) -> Callable[[str], list[str]]:
    """The function that cuts a text into words, in order (whitespace between them may be left out) for
    --word_segmenter `name`."""
    check_segmenter_settings(name, None)
    for package in SEGMENTER_PACKAGES[name]:
        require_package(package, f"--word_segmenter {name}", install=SEGMENTERS_INSTALL)
    if name == "jieba":
        import jieba

        return jieba.lcut
    return _mecab_words()


def _mecab_words() -> Callable[[str], list[str]]:
    """MeCab's words (their surfaces; MeCab drops whitespace) with unidic-lite's dictionary, named outright: fugashi
    alone would take the full UniDic first where that is installed, and cut the words otherwise."""
    import fugashi
    import unidic_lite

    dictionary = Path(unidic_lite.DICDIR)
    tagger = fugashi.Tagger(f'-d "{dictionary}" -r "{dictionary / "mecabrc"}"')
    return lambda text: [word.surface for word in tagger(text)]


def check_segmenter_settings(word_segmenter: str | None, masking: str | None) -> None:
    """Refuses a segmenter that --word_segmenter does not name, or one asked for with a masking scheme that does not
    read it (whether its package is installed is checked where it is loaded, `load_segmenter`)."""
    if word_segmenter is None:
        return
    if word_segmenter not in WORD_SEGMENTERS:
        raise UserInputError(f"--word_segmenter {word_segmenter!r} is not one of {', '.join(WORD_SEGMENTERS)}.")
    if masking in ("token", *UNIT_SCHEMES):
        what = "masks tokens, not words" if masking == "token" else "finds its units on the vocabulary's words"
        raise UserInputError(
            f"--word_segmenter gives words to span, word and n-gram masking; --masking {masking} {what}."
        )


class WordSegmenter:
    """Marks the tokens that start a segmenter's words; the block builder takes it where it takes masking units
    (`mark`, `stride`, `name`, and the `column` the marks are split into). `segment` (a text -> its words, in
    order) is what runs; `name` is what the prepared data's manifest records. A named segmenter (`WORD_SEGMENTERS`)
    is pickled by name and loaded again in each process."""

    column = WORD_STARTS_COLUMN

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, name: str, segment: Callable[[str], list[str]] | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.stride = unit_stride(tokenizer)
        self.name = f"segmenter:{name}"
        self.segmenter_name = name
        self._named = segment is None
        self._segment = load_segmenter(name) if segment is None else segment

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_segment": None} if self._named else self.__dict__

    def mark(self, lines: list[str], sentences: list[np.ndarray]) -> list[np.ndarray]:
        """The token ids of each line, each plus stride where the token starts a word (int32)."""
        if self._segment is None:
            self._segment = load_segmenter(self.segmenter_name)
        marked = []
        # Piece by piece, as the ids were tokenized (`line_pieces`): no word spans two pieces.
        for expected, pieces in zip(sentences, in_pieces(lines, self._piece_starts)):
            ids = np.concatenate([ids for ids, _ in pieces]) if pieces else np.zeros(0, dtype=np.int32)
            if not np.array_equal(ids, expected):
                raise ValueError("The tokenizer gives other ids with offsets than without; cannot align the words.")
            starts = np.concatenate([starts for _, starts in pieces]) if pieces else np.zeros(0, dtype=np.int64)
            marked.append((np.asarray(expected, dtype=np.int64) + self.stride * starts).astype(np.int32))
        return marked

    def __repr__(self) -> str:
        return f"WordSegmenter({self.segmenter_name})"

    def _piece_starts(self, pieces: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per piece: its ids and, per token, 1 where it begins where a word begins (the first token there: the
        byte pieces of one character share its offsets), else 0. A token that begins inside a word continues it,
        so a word whose start a token merged into the word before joins that word."""
        encodings = self.tokenizer(pieces, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        found = []
        for piece, ids, offsets in zip(pieces, encodings["input_ids"], encodings["offset_mapping"]):
            offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
            first, spans_text = offsets[:, 0], offsets[:, 1] > offsets[:, 0]
            # The start of the last token before each one that spans text (-1: none).
            spanning = np.where(spans_text, np.arange(len(offsets)), -1)
            before = np.maximum.accumulate(np.concatenate([[-1], spanning[:-1]])) if len(offsets) else spanning
            previous_first = np.where(before >= 0, first[np.maximum(before, 0)], -1)
            at_word = np.isin(first, _word_starts(piece, self._segment(piece)))
            found.append((np.asarray(ids, dtype=np.int32), (spans_text & at_word & (first != previous_first)) * 1))
        return found


def _word_starts(text: str, words: list[str]) -> list[int]:
    """The first character of each word that is not whitespace, found in order in `text`."""
    starts, position = [], 0
    for word in words:
        start = text.find(word, position)
        if start < 0:
            raise ValueError(f"The segmenter's word {word!r} is not in its text after character {position}.")
        position = start + len(word)
        if word.strip():
            starts.append(start + len(word) - len(word.lstrip()))
    return starts


# What marks the ids of tokenized lines for the block builder: masking units, or a segmenter's word starts.
TokenMarker = MaskingUnits | WordSegmenter
