"""Training a tokenizer on the corpus: a byte-level BPE vocabulary, as RoBERTa does (RoBERTa section 4.4: 50K
byte-level BPE units), or a SentencePiece-style unigram vocabulary, as ALBERT does (30,000 ids)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from tokenizers import AddedToken, ByteLevelBPETokenizer
from tokenizers.trainers import UnigramTrainer
from transformers import AlbertTokenizer, RobertaTokenizerFast

from .line_pieces import line_pieces

# The trainers are fed pieces of at most this many characters: on pieces of 2^18 (what tokenizing takes at a
# time), the `tokenizers` 0.23 trainers keep memory that grows with the number of pieces, about 1.3 MB per MB of
# text; on pieces of 2^14 they keep a dozen MB whatever the text (benchmarks/reliability/long_line.py measures a run).
TRAINING_PIECE_CHARS = 2**14

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
    """Each non-blank line as `formats.token_arrays` tokenizes it (`line_pieces`): after a space, so that the
    vocabulary learns the word-initial ("Ġ") forms that the pretraining data uses, and a long line in pieces, so
    that the trainer's memory does not grow with a line (it counts the same words)."""
    for text in texts:
        for line in text.split("\n"):
            if line.strip():
                yield from line_pieces(line.strip(), TRAINING_PIECE_CHARS)


def _merges(bpe: ByteLevelBPETokenizer) -> list[tuple[str, str]]:
    model = json.loads(bpe._tokenizer.to_str())["model"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]


# ALBERT's special tokens, in the ids of its released vocabularies: <pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4.
ALBERT_SPECIAL_TOKENS = ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]


def train_sentencepiece_unigram(
    texts: Iterable[str],
    vocab_size: int = 30000,
    model_max_length: int = 512,
    show_progress: bool = True,
) -> AlbertTokenizer:
    """Trains a SentencePiece-style unigram vocabulary on `texts` (ALBERT section 4.1: "we tokenize the input using
    SentencePiece (Kudo & Richardson, 2018) as in XLNet", 30,000 ids) with the `tokenizers` library, and wraps it as
    transformers' ALBERT tokenizer: ALBERT's normalisation (lower case, accents stripped), "▁" word starts
    (Metaspace), its special tokens and template `[CLS] A [SEP] B [SEP]` with token types 0 and 1.

    `vocab_size` counts the special tokens; a small corpus may yield fewer pieces.
    """
    # ALBERT's own pipeline (normaliser, pre-tokenizer, decoder, template), with a unigram model trained here.
    backend = AlbertTokenizer()._tokenizer
    trainer = UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=ALBERT_SPECIAL_TOKENS,
        unk_token="<unk>",
        show_progress=show_progress,
    )
    backend.train_from_iterator(_lines(texts), trainer=trainer)
    vocab = [tuple(piece) for piece in json.loads(backend.to_str())["model"]["vocab"]]
    if len(vocab) <= len(ALBERT_SPECIAL_TOKENS):
        raise ValueError("The tokenizer's training text is empty: there is nothing to learn a vocabulary from.")
    # transformers' ALBERT tokenizer leaves token_type_ids out of its outputs; ALBERT's segment pairs use them.
    return AlbertTokenizer(
        vocab=vocab,
        model_max_length=model_max_length,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )
