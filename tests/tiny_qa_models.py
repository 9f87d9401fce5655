"""Untrained question-answering checkpoints of the three kinds transformers 4's pipeline tests used (BERT's
WordPiece, DistilBERT, RoBERTa's byte-level BPE), built offline and saved as a user would have them: what the
conformance tests load with `pipeline("question-answering", model=<folder>)` in place of Hub models."""

import re
import string
from collections.abc import Iterable
from pathlib import Path

from transformers import (
    BertConfig,
    BertForQuestionAnswering,
    BertTokenizer,
    DistilBertConfig,
    DistilBertForQuestionAnswering,
    DistilBertTokenizer,
    RobertaConfig,
    RobertaForQuestionAnswering,
)

from spanroberta.data.tokenizer import train_byte_level_bpe

# Room for transformers 4's default window of 384 tokens.
MAX_POSITIONS = 512
SIZE = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
KINDS = ("bert", "distilbert", "roberta")


def wordpiece_vocab(texts: Iterable[str]) -> dict[str, int]:
    """The texts' words, cased, and every ASCII character alone and as a continuation piece, so that any ASCII
    word tokenizes without [UNK]."""
    words = {word for text in texts for word in re.findall(r"\w+|[^\w\s]", text)}
    characters = set(string.ascii_letters + string.digits + string.punctuation)
    pieces = sorted(words | characters | {f"##{character}" for character in characters})
    return {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *pieces])}


def save_tiny_qa_checkpoints(texts: Iterable[str], root: Path) -> dict[str, Path]:
    """One folder per kind in `root`, each with a QA model and a tokenizer whose vocabulary covers `texts`."""
    texts = list(texts)
    vocab = wordpiece_vocab(texts)
    roberta_tokenizer = train_byte_level_bpe(
        texts * 4, vocab_size=400, min_frequency=1, model_max_length=MAX_POSITIONS, show_progress=False
    )
    built = {
        "bert": (
            BertForQuestionAnswering(BertConfig(vocab_size=len(vocab), max_position_embeddings=MAX_POSITIONS, **SIZE)),
            BertTokenizer(vocab=vocab, do_lower_case=False, model_max_length=MAX_POSITIONS),
        ),
        "distilbert": (
            DistilBertForQuestionAnswering(
                DistilBertConfig(
                    vocab_size=len(vocab), dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                    max_position_embeddings=MAX_POSITIONS,
                )  # fmt: skip
            ),
            DistilBertTokenizer(vocab=vocab, do_lower_case=False, model_max_length=MAX_POSITIONS),
        ),
        "roberta": (
            RobertaForQuestionAnswering(
                RobertaConfig(
                    vocab_size=len(roberta_tokenizer), max_position_embeddings=MAX_POSITIONS + 2, pad_token_id=1,
                    bos_token_id=0, eos_token_id=2, **SIZE,
                )  # fmt: skip
            ),
            roberta_tokenizer,
        ),
    }
    folders = {}
    for kind, (model, tokenizer) in built.items():
        folders[kind] = root / kind
        model.save_pretrained(folders[kind])
        tokenizer.save_pretrained(folders[kind])
    return folders
