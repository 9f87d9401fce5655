"""Long lines tokenized in pieces (spanroberta.data.line_pieces): where lines are cut, the ids of the pieces joined
against the whole line's for the three kinds of tokenizer, word starts and units across cuts, and the data path
(tokenizing, blocks, tokenizer training) with a piece size shrunk to a few dozen characters."""

import functools
import random

import datasets
import numpy as np
import pytest
from conftest import TINY_TEXT
from tokenizers import BertWordPieceTokenizer
from transformers import BertTokenizerFast

from spanroberta.data import formats, line_pieces, masking_units, tokenizer as tokenizer_training
from spanroberta.data.corpus import MAX_DOCUMENT_CHARACTERS, CorpusSource, load_documents
from spanroberta.data.formats import prepare_blocks, tokenize_documents
from spanroberta.data.line_pieces import encode_lines, in_pieces
from spanroberta.data.masking import word_start_table
from spanroberta.data.tokenizer import train_byte_level_bpe, train_sentencepiece_unigram

PIECE = 40  # characters: a line of a few thousand is cut many times


def long_line(words: int = 3000, seed: int = 0) -> str:
    """Running text with what a cut must not disturb: double spaces, tabs, punctuation, digits, accents, a
    character whose NFKD form starts with a space (¨), a special token. Other whitespace never follows other
    whitespace by one word, so that every stretch of PIECE characters holds a space to cut before."""
    vocabulary = " ".join(TINY_TEXT[:8]).split() + ["café", "naïve", "¨", "1998,", "(span)", "<mask>", "--", "x"]
    rng = random.Random(seed)
    text, separator = "", " "
    for _ in range(words):
        separator = rng.choice(["  ", "\t", " \t "]) if separator == " " and rng.random() < 0.2 else " "
        text += rng.choice(vocabulary) + separator
    return text.strip()


@pytest.fixture(scope="module")
def wordpiece(tmp_path_factory):
    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator([long_line(seed=1)] + TINY_TEXT, vocab_size=300, show_progress=False)
    folder = tmp_path_factory.mktemp("wordpiece")
    trainer.save_model(str(folder))
    return BertTokenizerFast(vocab_file=str(folder / "vocab.txt"))


@pytest.fixture(scope="module")
def unigram():
    return train_sentencepiece_unigram(TINY_TEXT + [long_line(seed=1)], vocab_size=300, show_progress=False)


def test_a_long_line_is_cut_before_a_space_between_words_and_joins_back():
    line = long_line()
    pieces = list(line_pieces.line_pieces(line, PIECE))
    assert len(pieces) > len(line) // PIECE and "".join(pieces) == " " + line  # a line is tokenized after a space
    assert all(len(piece) <= PIECE for piece in pieces)
    for piece in pieces:
        assert piece[0] == " " and not piece[1].isspace()
    for before in pieces[:-1]:
        assert not before[-1].isspace()
    assert list(line_pieces.line_pieces("short line", PIECE)) == [" short line"]
    assert list(line_pieces.line_pieces("", PIECE)) == [" "]
    # no space to cut before: cut at the limit
    assert list(line_pieces.line_pieces("a" * 100 + " b", PIECE)) == [" " + "a" * 39, "a" * 40, "a" * 21 + " b"]


@pytest.mark.parametrize("kind", ["byte-level BPE", "WordPiece", "unigram"])
def test_the_pieces_give_the_ids_of_the_whole_line(kind, tiny_tokenizer, wordpiece, unigram):
    tokenizer = {"byte-level BPE": tiny_tokenizer, "WordPiece": wordpiece, "unigram": unigram}[kind]
    lines = [long_line(), "A short line.", long_line(words=500, seed=2)]
    whole = [tokenizer(" " + line, add_special_tokens=False)["input_ids"] for line in lines]
    calls = []

    def encode(call):
        calls.append(sum(len(text) for text in call))
        return line_pieces._encode(call, tokenizer)

    joined = [np.concatenate(ids).tolist() for ids in in_pieces(lines, encode, PIECE)]
    assert joined == whole
    assert len(calls) > len(lines[0]) // PIECE and max(calls) <= PIECE
    assert [ids.tolist() for ids in encode_lines(lines, tokenizer, PIECE)] == whole
    assert [ids.tolist() for ids in encode_lines(lines, tokenizer)] == whole  # within the default size: unchanged


def test_word_starts_stay_right_across_cuts(tiny_tokenizer):
    """Whole-word masking reads word starts off the ids: after a cut before a space the next word still starts one,
    and a word cut where a piece has no space (byte-level BPE) goes on as the same word."""
    starts = word_start_table(tiny_tokenizer).numpy()
    line = long_line()
    (pieced,) = encode_lines([line], tiny_tokenizer, PIECE)
    whole = np.array(tiny_tokenizer(" " + line, add_special_tokens=False)["input_ids"])
    np.testing.assert_array_equal(starts[pieced], starts[whole])
    word = "quick" * 20
    (cut,) = encode_lines([word], tiny_tokenizer, PIECE)
    assert starts[cut].sum() == 1 and starts[cut[0]]


def test_entity_units_are_found_piece_by_piece(tiny_tokenizer, tmp_path, monkeypatch):
    spacy = pytest.importorskip("spacy")
    nlp = spacy.blank("en")
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "NAME", "pattern": [{"IS_TITLE": True, "OP": "+"}]}])
    nlp.to_disk(tmp_path / "entities")
    units = masking_units.SpacyUnits(tiny_tokenizer, "named-entity", str(tmp_path / "entities"))
    lines = [" ".join(TINY_TEXT[:8])]
    ids = encode_lines(lines, tiny_tokenizer)
    (whole,) = units.mark(lines, ids)
    monkeypatch.setattr(masking_units, "in_pieces", functools.partial(in_pieces, max_chars=PIECE))
    (pieced,) = units.mark(lines, ids)
    # Every sentence starts with a capitalised word: cuts fall between entities here, so the units are the same.
    np.testing.assert_array_equal(pieced, whole)
    assert (whole // units.stride == masking_units.UNIT_START).sum() >= 8


def test_tokenizing_and_blocks_with_tiny_pieces_match_the_whole_lines(tiny_tokenizer, monkeypatch):
    documents = datasets.Dataset.from_dict({"text": [long_line(), "One line.\n" + long_line(words=400, seed=3)]})
    expected_ids = tokenize_documents(documents, tiny_tokenizer)["sentence_ids"]
    expected_blocks = prepare_blocks(documents, tiny_tokenizer, "segment-pair", 64)
    monkeypatch.setattr(formats, "encode_lines", functools.partial(encode_lines, max_chars=PIECE))
    assert tokenize_documents(documents, tiny_tokenizer)["sentence_ids"] == expected_ids
    assert prepare_blocks(documents, tiny_tokenizer, "segment-pair", 64).to_dict() == expected_blocks.to_dict()


def test_a_tokenizer_trained_on_pieces_is_the_one_trained_on_whole_lines(monkeypatch):
    texts = TINY_TEXT + [long_line()]
    whole = train_byte_level_bpe(texts, vocab_size=400, show_progress=False)
    monkeypatch.setattr(tokenizer_training, "TRAINING_PIECE_CHARS", PIECE)
    assert train_byte_level_bpe(texts, vocab_size=400, show_progress=False).get_vocab() == whole.get_vocab()


def test_a_line_read_in_parts_tokenizes_to_the_whole_lines_ids(tiny_tokenizer, tmp_path):
    # A line of more than a document's characters becomes pieces in several documents (`corpus`); full-sentences
    # joins their ids back: they must be the line's own.
    line = " ".join(long_line(seed=seed) for seed in range(40))
    assert len(line) > 2 * MAX_DOCUMENT_CHARACTERS
    path = tmp_path / "line.txt"
    path.write_text(line + "\n")
    documents = load_documents(CorpusSource([str(path)]), cache_dir=str(tmp_path / "cache"))
    assert len(documents) > 2
    parts = tokenize_documents(documents, tiny_tokenizer)["sentence_ids"]
    (whole,) = formats.tokenize_texts([line], tiny_tokenizer)
    assert [token for part in parts for sentence in part for token in sentence] == whole[0]
