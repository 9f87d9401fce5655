"""Where words start: read once per vocabulary id from the tokenizer's markers and script, or per token from the
examples themselves (a segmenter's or the user's own word boundaries).

Markers: byte-level BPE ("Ġ" = a leading space), SentencePiece ("▁"), WordPiece ("##" continues a word). They find
words where spaces separate them. Chinese and Japanese put no space between words, so the markers alone make a
"word" of a whole sentence or phrase, and span masking would mask sentences. As BERT's basic tokenizer does
(`_is_chinese_char`, whose ranges `CJK_IDEOGRAPHS` copies), a token whose text begins with a CJK ideograph starts a
word of its own; so does one that begins with kana (hiragana, katakana: BERT's ranges leave them out, and Japanese
would then stay phrase-sized) or with CJK punctuation ("、", "。", "「", fullwidth "，" and "！"). A byte-level token
that begins mid-character (the second byte of a character's UTF-8) starts nothing. Korean Hangul is written with
spaces between words and keeps the marker rule, as do all other scripts; Thai and other scripts without spaces
whose words are several characters need a segmenter's boundaries (`word_starts` or `word_ids` in the examples).

A word-start column in the examples (`WORD_STARTS_COLUMN`: 1 where a token starts a word, or `WORD_IDS_COLUMN`:
the word of each token, -1 or None outside words, the layout of a fast tokenizer's `word_ids()` fed pre-split
words and of transformers' Chinese whole-word-masking reference files) replaces the vocabulary's table.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase
from transformers.convert_slow_tokenizer import bytes_to_unicode

BPE_MARKER, SENTENCEPIECE_MARKER, WORDPIECE_CONTINUATION = "Ġ", "▁", "##"
WORD_STARTS_COLUMN, WORD_IDS_COLUMN = "word_starts", "word_ids"

# BERT's `_is_chinese_char` (tokenization_bert.py): the CJK Unified Ideographs and their extensions A to E, and the
# compatibility ideographs.
CJK_IDEOGRAPHS = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)  # fmt: skip
# Hiragana, katakana, the katakana phonetic extensions and halfwidth katakana.
KANA = ((0x3040, 0x309F), (0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F))
# CJK Symbols and Punctuation ("、", "。", "「"); of the Halfwidth and Fullwidth Forms, only the punctuation.
CJK_PUNCTUATION = ((0x3000, 0x303F),)
FULLWIDTH_FORMS = (0xFF00, 0xFF65)


def special_token_table(tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    """Bool [len(tokenizer)]: True for `tokenizer.all_special_ids`, which are never masked and are not words."""
    table = torch.zeros(len(tokenizer), dtype=torch.bool)
    table[list(tokenizer.all_special_ids)] = True
    return table


def starts_own_word(character: str) -> bool:
    """Whether a token beginning with `character` starts a word of its own: a CJK ideograph, kana or CJK
    punctuation (fullwidth punctuation included, fullwidth letters and digits not)."""
    code = ord(character)
    if any(low <= code <= high for low, high in (*CJK_IDEOGRAPHS, *KANA, *CJK_PUNCTUATION)):
        return True
    low, high = FULLWIDTH_FORMS
    return low <= code <= high and unicodedata.category(character).startswith("P")


def vocabulary_word_starts(tokenizer: PreTrainedTokenizerBase) -> torch.Tensor | None:
    """Bool [len(tokenizer)]: True for the ids whose token starts a word, read from the vocabulary alone, or None
    when no token of the vocabulary carries a word-start marker.

    The convention is the one most tokens of the vocabulary follow: byte-level BPE ("Ġ" starts a word),
    SentencePiece ("▁" starts a word) or WordPiece ("##" continues a word); a token whose text begins with a CJK
    character (`starts_own_word`) starts one too. Special tokens are False. `masking.word_starts` also starts a
    word after a special token and at a row's start, so packed blocks need no offsets.
    """
    special = special_token_table(tokenizer)
    tokens = [token or "" for token in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))]
    counts = {
        marker: sum(1 for token in tokens if token.startswith(marker))
        for marker in (BPE_MARKER, SENTENCEPIECE_MARKER, WORDPIECE_CONTINUATION)
    }
    marker = max(counts, key=counts.get)
    if counts[marker] == 0:
        return None
    if marker == WORDPIECE_CONTINUATION:
        starts = [not token.startswith(marker) or _begins_cjk(token[len(marker) :]) for token in tokens]
    elif marker == BPE_MARKER:
        first = _byte_level_first_character()
        starts = [token.startswith(marker) or first(token) for token in tokens]
    else:
        starts = [token.startswith(marker) or _begins_cjk(token) for token in tokens]
    return torch.tensor(starts, dtype=torch.bool) & ~special


def _begins_cjk(text: str) -> bool:
    return bool(text) and starts_own_word(text[0])


def _byte_level_first_character():
    """A function of a byte-level BPE token: whether its bytes begin with a whole character that starts a word of its
    own. A token that begins mid-character (a UTF-8 continuation byte) does not; one whose first character is cut
    by the token's end (a CJK character is 3 bytes, and a vocabulary may split it) is read from its lead bytes."""
    byte_of = {character: byte for byte, character in bytes_to_unicode().items()}

    def begins_cjk(token: str) -> bool:
        if not token or any(character not in byte_of for character in token[:4]):
            return _begins_cjk(token)  # an added token, stored as text
        lead = byte_of[token[0]]
        if lead < 0xC0:  # ASCII (no CJK) or a continuation byte (mid-character)
            return False
        width = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
        head = bytes(byte_of[character] for character in token[:width] if character in byte_of)
        if len(head) < width:
            return _cut_character_is_cjk(head, width)
        return _begins_cjk(head.decode("utf-8", errors="ignore"))

    return begins_cjk


def _cut_character_is_cjk(head: bytes, width: int) -> bool:
    """Whether a character whose UTF-8 begins with `head` (shorter than `width` bytes: the vocabulary split it)
    starts a word of its own, judged by the lowest and the highest character it can be (e.g. any of U+6000-U+6FFF,
    all ideographs, for a lone lead byte 0xE6)."""
    lowest = (head + b"\x80" * width)[:width].decode("utf-8", errors="ignore")
    highest = (head + b"\xbf" * width)[:width].decode("utf-8", errors="ignore")
    return bool(lowest and highest) and starts_own_word(lowest) and starts_own_word(highest)


def example_word_starts(
    examples: Sequence[Mapping[str, Any]], length: int, from_encodings: bool = False
) -> torch.Tensor | None:
    """Bool [B, length]: the tokens that start a word by the examples' own boundaries, False on padding; None when
    the examples carry none. Each example's `WORD_STARTS_COLUMN` is read, else its `WORD_IDS_COLUMN`, else (with
    `from_encodings`, for a vocabulary without markers) the `word_ids()` of a fast tokenizer's encoding. Examples
    of which some carry boundaries and some do not are refused: their words would be of two kinds."""
    rows = [_own_word_starts(example, from_encodings) for example in examples]
    carried = sum(row is not None for row in rows)
    if not carried:
        return None
    if carried < len(rows):
        raise ValueError(
            f"{carried} of the {len(rows)} examples carry their own word boundaries ({WORD_STARTS_COLUMN!r} or "
            f"{WORD_IDS_COLUMN!r}) and the others do not: give them to all examples or to none."
        )
    starts = torch.zeros(len(examples), length, dtype=torch.bool)
    for row, flags in enumerate(rows):
        starts[row, : len(flags)] = flags
    return starts


def _own_word_starts(example: Mapping[str, Any], from_encodings: bool) -> torch.Tensor | None:
    if WORD_STARTS_COLUMN in example:
        return torch.as_tensor(example[WORD_STARTS_COLUMN]).bool()
    if WORD_IDS_COLUMN in example:
        word_ids = [-1 if w is None else int(w) for w in example[WORD_IDS_COLUMN]]
    elif from_encodings and getattr(example, "encodings", None):
        word_ids = [-1 if w is None else w for w in example.word_ids()]
    else:
        return None
    previous = [-1, *word_ids[:-1]]
    return torch.tensor([w >= 0 and w != p for w, p in zip(word_ids, previous)], dtype=torch.bool)
