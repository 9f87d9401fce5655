"""Training a byte-level BPE vocabulary, as RoBERTa does (RoBERTa section 4.4: 50K byte-level BPE units)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from tokenizers import AddedToken, ByteLevelBPETokenizer
from transformers import RobertaTokenizerFast

# RoBERTa's special tokens and their ids: <s>=0, <pad>=1, </s>=2, <unk>=3; <mask> is added last.
ROBERTA_SPECIAL_TOKENS = ["<s>", "<pad>", "</s>", "<unk>"]
MASK_TOKEN = "<mask>"


def train_byte_level_bpe(
    texts: Iterable[str],
    vocab_size: int = 50265,
    min_frequency: int = 2,
    model_max_length: int = 512,
    show_progress: bool = True,
) -> RobertaTokenizerFast:
    """Trains a byte-level BPE on `texts` and wraps it as a RoBERTa tokenizer with RoBERTa's special tokens.

    `vocab_size` counts the special tokens (RoBERTa's is 50265, `<mask>` being the last id).
    """
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        _lines(texts),
        vocab_size=vocab_size - 1,
        min_frequency=min_frequency,
        special_tokens=ROBERTA_SPECIAL_TOKENS,
        show_progress=show_progress,
    )
    vocab = bpe.get_vocab()
    if len(vocab) <= len(ROBERTA_SPECIAL_TOKENS) + 256:
        raise ValueError("The tokenizer's training text is empty: there is nothing to learn a vocabulary from.")
    vocab[MASK_TOKEN] = len(vocab)
    merges = _merges(bpe)
    # transformers 5.23: RobertaTokenizerFast(vocab_file=..., merges_file=...) silently builds an empty
    # tokenizer, so the vocabulary and merges are passed as objects.
    # RoBERTa's <mask> swallows the space before it, so "a <mask> b" masks the word " b"'s slot cleanly.
    mask_token = AddedToken(MASK_TOKEN, lstrip=True, rstrip=False, normalized=False, special=True)
    return RobertaTokenizerFast(
        vocab=vocab, merges=merges, mask_token=mask_token, model_max_length=model_max_length
    )


def _lines(texts: Iterable[str]) -> Iterator[str]:
    """Each non-blank line after a space, as `formats.tokenize_texts` tokenizes them, so that the vocabulary
    learns the word-initial ("Ġ") forms that the pretraining data uses."""
    for text in texts:
        for line in text.split("\n"):
            if line.strip():
                yield " " + line.strip()


def _merges(bpe: ByteLevelBPETokenizer) -> list[tuple[str, str]]:
    model = json.loads(bpe._tokenizer.to_str())["model"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
