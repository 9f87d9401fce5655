"""Reading corpora into documents (spanroberta.data.corpus) and the bundled demo corpus."""

import csv
import io
import json
import random

import pytest

from spanroberta.data import corpus
from spanroberta.data.corpus import MAX_DOCUMENT_CHARACTERS, CorpusSource, iter_documents, load_documents
from spanroberta.data.line_pieces import cut_line
from spanroberta.data.demo_corpus import demo_corpus_path, generate_demo_corpus


def load(files, tmp_path, **kwargs):
    source = CorpusSource([str(file) for file in files], **kwargs)
    return load_documents(source, cache_dir=str(tmp_path / "cache"))["text"]


def test_text_files_split_documents_at_blank_lines(tmp_path):
    # WikiText's blank lines hold a space; they end documents as empty lines do. Lines are stripped.
    path = tmp_path / "corpus.txt"
    path.write_text(" = Title = \n \n First line . \nSecond line.\n\n\n\nOther document.\n   \nLast one.")
    assert load([path], tmp_path) == ["= Title =", "First line .\nSecond line.", "Other document.", "Last one."]


def test_rows_of_json_lines_and_csv_are_documents(tmp_path):
    jsonl = tmp_path / "corpus.jsonl"
    rows = [{"text": "One.\nTwo.", "id": 1}, {"text": "  \n", "id": 2}, {"text": "Three.\n\nFour.", "id": 3}]
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows))
    # a row's blank lines do not split it: the row is the document
    assert load([jsonl], tmp_path) == ["One.\nTwo.", "Three.\nFour."]

    table = tmp_path / "corpus.csv"
    with table.open("w", newline="") as file:
        csv.writer(file).writerows([["id", "body"], ["a", "Hello there.\nGeneral news."], ["b", "Bye."]])
    assert load([table], tmp_path, text_column_name="body") == ["Hello there.\nGeneral news.", "Bye."]


def test_files_of_different_formats_are_read_together(tmp_path):
    text, jsonl = tmp_path / "a.txt", tmp_path / "b.jsonl"
    text.write_text("From text.\n\nAgain.\n")
    jsonl.write_text(json.dumps({"text": "From json."}) + "\n")
    assert sorted(load([text, jsonl], tmp_path)) == ["Again.", "From json.", "From text."]


def test_a_local_dataset_folder_loads_through_dataset_name(tmp_path):
    folder = tmp_path / "my_dataset"
    folder.mkdir()
    (folder / "train.jsonl").write_text(json.dumps({"content": "A.\nB."}) + "\n")
    documents = load_documents(CorpusSource(dataset_name=str(folder), text_column_name="content"), str(tmp_path / "c"))
    assert documents["text"] == ["A.\nB."]


def test_bad_inputs_raise_errors_naming_the_file(tmp_path):
    missing = tmp_path / "missing.txt"
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load([missing], tmp_path)

    unsupported = tmp_path / "corpus.docx"
    unsupported.write_text("text")
    with pytest.raises(ValueError, match=r"corpus\.docx.*\.txt"):
        load([unsupported], tmp_path)

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="No documents in .*empty.jsonl"):
        load([empty], tmp_path)

    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n\n")
    with pytest.raises(ValueError, match="No documents in .*blank.txt"):
        load([blank], tmp_path)

    other_column = tmp_path / "other.jsonl"
    other_column.write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"other.jsonl has no column 'text'.*'body'"):
        load([other_column], tmp_path)


def test_exactly_one_source_must_be_given(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        CorpusSource()
    with pytest.raises(ValueError, match="exactly one"):
        CorpusSource(train_files=["a.txt"], dataset_name="wikitext")


def test_the_demo_corpus_ships_with_the_package_and_loads(tmp_path):
    path = demo_corpus_path()
    text = path.read_text(encoding="utf-8")
    assert 100_000 < len(text.encode()) < 1_000_000
    # the shipped file is what the generator writes
    assert text == generate_demo_corpus()

    documents = load([path], tmp_path)
    assert len(documents) == text.count("\n\n") + 1 > 500
    sentences = [sentence for document in documents for sentence in document.split("\n")]
    assert sum(len(document.split("\n")) > 3 for document in documents) > len(documents) / 2
    assert len(set(sentences)) > len(sentences) / 2  # not a handful of sentences repeated


def running_text(characters: int, seed: int = 0) -> str:
    """Words separated by single spaces, with a run of whitespace now and then (where no cut may fall)."""
    rng = random.Random(seed)
    words, size = [], 0
    while size < characters:
        word = rng.choice(["span", "boundary", "objective", "masked", "café", "1998,", "--"])
        separator = rng.choice(["  ", "\t", " \t "]) if rng.random() < 0.1 else " "
        words.append(word + separator)
        size += len(word) + len(separator)
    return "".join(words).strip()


def test_lines_are_read_in_bounded_pieces_cut_as_whole_lines_are(tmp_path):
    lines = [running_text(2000, seed) for seed in range(3)] + ["", " " * 500, "short line", "\t"]
    read = list(corpus._bounded_lines(io.StringIO("\n".join(lines) + "\n"), max_chars=64))
    expected = []
    for line in lines:
        pieces = [piece for piece in cut_line(line, 64) if piece.strip()]
        expected += pieces or [""]  # a blank line, however long, is one ""
    assert read == expected and all(len(piece) <= 64 for piece in read)


def test_a_document_longer_than_the_limit_is_cut_at_line_ends():
    lines = [f"sentence {number} of the document." for number in range(100)]
    parts = list(corpus.document_parts(lines, blank_lines_separate_documents=True, max_characters=300))
    assert len(parts) > 1 and all(len(part) <= 300 for part in parts)
    assert [line for part in parts for line in part.split("\n")] == lines


def test_a_line_longer_than_a_document_is_read_in_parts_that_join_back_to_it(tmp_path):
    line = running_text(3 * MAX_DOCUMENT_CHARACTERS + 1000)
    path = tmp_path / "corpus.txt"
    path.write_text("First document.\n\n" + line + "\nIts last sentence.\n\nLast document.\n")
    documents = load([path], tmp_path)
    assert documents[0] == "First document." and documents[-1] == "Last document."
    assert all(len(document) <= MAX_DOCUMENT_CHARACTERS for document in documents)
    pieces = [piece for document in documents[1:-1] for piece in document.split("\n")]
    # Every cut falls before one space between two words: the stripped pieces joined by a space are the line.
    assert " ".join(pieces[:-1]) == line and pieces[-1] == "Its last sentence."
    assert len(documents) >= 5
    assert list(iter_documents(CorpusSource([str(path)]))) == documents


# --- encodings -------------------------------------------------------------------------------------------------

ENCODED_TEXT = "Café au lait.\nSecond line.\n\nNaïve résumé."


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
def test_a_byte_order_mark_names_the_encoding_and_is_dropped(encoding, tmp_path):
    path = tmp_path / "corpus.txt"
    mark = {"utf-16-le": "\ufeff", "utf-16-be": "\ufeff", "utf-32-be": "\ufeff"}.get(encoding, "")
    path.write_bytes((mark + ENCODED_TEXT).encode(encoding))
    expected = ["Café au lait.\nSecond line.", "Naïve résumé."]
    assert load([path], tmp_path) == expected
    assert list(iter_documents(CorpusSource([str(path)]))) == expected


def test_a_utf16_file_a_reader_takes_as_utf8_is_refused_naming_its_encoding(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(json.dumps({"text": "Café."}).encode("utf-16"))
    with pytest.raises(ValueError) as refused:
        load([path], tmp_path)
    message = str(refused.value)
    assert f"{path} is UTF-16LE text (its byte-order mark says so)" in message
    assert "iconv -f UTF-16 -t UTF-8 corpus.jsonl" in message and "latin1" not in message


def test_a_byte_that_is_not_utf8_gets_advice_for_its_likely_encoding(tmp_path):
    latin1, utf16 = tmp_path / "latin1.jsonl", tmp_path / "utf16.jsonl"
    latin1.write_bytes(json.dumps({"text": "Café."}, ensure_ascii=False).encode("latin1"))
    utf16.write_bytes(json.dumps({"text": "Café."}, ensure_ascii=False).encode("utf-16-le"))
    for path, advice in ((latin1, "iconv -f latin1"), (utf16, "iconv -f UTF-16LE")):
        with pytest.raises(ValueError, match=advice):
            load([path], tmp_path)
