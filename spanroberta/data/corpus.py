"""Reading a pretraining corpus into documents, the unit that the RoBERTa input formats pack and pair.

A document is one row of the returned dataset: its sentences (or paragraphs), one per line. Where the
text comes from decides where documents end:

- text files (`.txt`, `.text`, `.raw`): a blank line separates documents, each other line is a sentence
  or a paragraph (the layout of BERT's and RoBERTa's pretraining text);
- `datasets` datasets (a Hub name, or local `.json`/`.jsonl`/`.csv`/`.parquet` files): each row of the
  text column is a document and its lines are its sentences.

Lines are stripped and blank ones dropped. Everything runs through `datasets`, so it is cached by
fingerprint: a second call with the same files (unchanged on disk) reads the cache.

Memory does not grow with a line or a document. Text files are read `MAX_CALL_CHARS` characters at a time, a longer
line as its pieces (`line_pieces.cut_line`: cut before a space, each piece then a line of its own), and a document
longer than `MAX_DOCUMENT_CHARACTERS` characters becomes several documents, cut at a line's end. That cut is a
deviation from the papers' documents, which have no length limit: full-sentences puts a separator token between
the parts (one in about 60,000 tokens), doc-sentences ends a part's last block there, and the pair formats draw a
random segment B from the group's other documents, which may be another part of the same text. It concerns
documents of more than 262,144 characters (a book; Wikipedia's longest articles); others are read whole. A row of
a JSON, CSV or Parquet file is read whole by its reader before it is cut.

`load_documents` reads everything before returning, so bad input (a missing or empty file, a byte that is not
UTF-8) is reported up front, naming the file and line. `iter_documents` reads the same sources lazily with
`datasets` streaming (for corpora larger than memory or disk); it cannot look ahead, so it replaces bytes that
are not UTF-8 with U+FFFD in text files instead of stopping the run (see `spanroberta.data.streaming`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import datasets
from datasets.fingerprint import Hasher

from ..errors import UserInputError, not_utf8_error, require_file, text_encoding, utf8_errors
from .line_pieces import MAX_CALL_CHARS, cut_line

# A document longer than this (in characters, its lines joined by "\n") is read as several: see the module's
# docstring. Lines are read in pieces of at most MAX_CALL_CHARS, no longer than this, so every part fits.
MAX_DOCUMENT_CHARACTERS = 2**18
# Documents handled at a time (written to the cache, tokenized, read back): with documents of at most
# MAX_DOCUMENT_CHARACTERS, at most 16 M characters (`datasets` takes a thousand by default).
DOCUMENTS_PER_BATCH = 64

# The `datasets` packaged builder that reads each supported file extension.
BUILDERS_BY_EXTENSION = {
    ".txt": "text",
    ".text": "text",
    ".raw": "text",  # WikiText's files
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".parquet": "parquet",
}


@dataclass(frozen=True)
class CorpusSource:
    """Where a corpus's documents come from: `train_files` (text files, or json/jsonl/csv/parquet files with a
    `text_column_name` column), or `dataset_name` (+ `dataset_config_name`, `split`) for `datasets.load_dataset`;
    exactly one of the two."""

    train_files: list[str] | None = None
    dataset_name: str | None = None
    dataset_config_name: str | None = None
    split: str = "train"
    text_column_name: str = "text"

    def __post_init__(self):
        if (self.train_files is None) == (self.dataset_name is None):
            raise ValueError("Give exactly one of train_files and dataset_name.")
        if self.train_files is not None and not self.train_files:
            raise UserInputError("train_files is empty: give at least one file.")


def load_documents(source: CorpusSource, cache_dir: str | None = None) -> datasets.Dataset:
    """Reads `source` into a dataset of documents: one column, `text`, one document per row, its sentences joined
    by "\\n" (files of one format are read together, formats in the order they first appear in `train_files`)."""
    if source.dataset_name is not None:
        name, config, split = source.dataset_name, source.dataset_config_name, source.split
        where = f"dataset {name!r} (config {config!r}, split {split!r})"
        raw = datasets.load_dataset(name, config, split=split, cache_dir=cache_dir)
        documents = _rows_to_documents(raw, source.text_column_name, where)
    else:
        parts = [
            _load_files(files, builder, source.text_column_name, cache_dir)
            for builder, files in _files_by_builder(source.train_files).items()
        ]
        documents = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
        where = ", ".join(source.train_files)
    if len(documents) == 0:
        raise UserInputError(f"No documents in {where}: every line is blank.")
    return documents


def iter_documents(source: CorpusSource) -> Iterator[str]:
    """The documents of `load_documents`, in the same order, read lazily: text files by `read_text_documents`,
    other sources with `datasets` streaming.

    Nothing is cached and memory does not grow with the corpus. Text files are decoded with
    `errors="replace"`: a byte that is not UTF-8 becomes U+FFFD rather than stopping a run that is already
    training; other formats that hold such a byte raise a `UserInputError` naming the file and line.
    """
    if source.dataset_name is not None:
        raw = datasets.load_dataset(source.dataset_name, source.dataset_config_name, split=source.split,
                                    streaming=True)  # fmt: skip
        yield from _stream_documents(raw, source.text_column_name)
        return
    for builder, files in _files_by_builder(source.train_files).items():
        if builder == "text":
            yield from read_text_documents(files, errors="replace")
            continue
        raw = datasets.load_dataset(builder, data_files=files, split="train", streaming=True)
        try:
            yield from _stream_documents(raw, source.text_column_name)
        except UnicodeDecodeError:
            raise _not_utf8_error(files) from None


def _stream_documents(raw: datasets.IterableDataset, column: str) -> Iterator[str]:
    # `iter` rather than `iter(raw)`: inside a DataLoader worker, iterating a datasets IterableDataset directly
    # would hand the worker only some of its files; spanroberta.data.streaming splits the stream itself.
    for batch in raw.iter(batch_size=1000):
        if column not in batch:
            raise UserInputError(
                f"The data has no column {column!r} (its columns: {list(batch)}); set --text_column_name."
            )
        yield from _split_documents(batch[column])["text"]


def _files_by_builder(train_files: list[str]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for file in train_files:
        path = Path(file)
        require_file(path, f"File not found: {file}")
        builder = BUILDERS_BY_EXTENSION.get(path.suffix.lower())
        if builder is None:
            supported = ", ".join(BUILDERS_BY_EXTENSION)
            raise UserInputError(f"Unsupported file extension in {file}: expected one of {supported}.")
        # `datasets` fails with an opaque error on an empty file.
        if path.stat().st_size == 0:
            raise UserInputError(f"No documents in {file}: the file is empty.")
        groups.setdefault(builder, []).append(str(path))
    return groups


def _load_files(files: list[str], builder: str, text_column_name: str, cache_dir: str | None) -> datasets.Dataset:
    try:
        if builder == "text":
            return _load_text_files(files, cache_dir)
        raw = datasets.load_dataset(builder, data_files=files, split="train", cache_dir=cache_dir)
        return _rows_to_documents(raw, text_column_name, ", ".join(files))
    except datasets.exceptions.DatasetGenerationError as error:
        if isinstance(error.__cause__, UnicodeDecodeError):
            raise _not_utf8_error(files) from None
        if builder == "json" and (bad_json := _bad_json_error(files)) is not None:
            raise bad_json from None
        raise
    except UnicodeDecodeError:
        # JSON and CSV readers keep the raw bytes; decoding fails when the rows are read.
        raise _not_utf8_error(files) from None


def _load_text_files(files: list[str], cache_dir: str | None) -> datasets.Dataset:
    """The documents of text files (`read_text_documents`), cached under a fingerprint of the files' paths, sizes and
    modification times, as `datasets`' own builders key theirs."""
    stamps = [(str(Path(file).resolve()), Path(file).stat().st_size, Path(file).stat().st_mtime_ns) for file in files]
    # A file with a byte-order mark is read by the codec it names: such a file's documents are new to any cache.
    stamps += [(file, encoding) for file in files if (encoding := text_encoding(file)) != "utf-8"]
    try:
        return datasets.Dataset.from_generator(
            _text_rows,
            features=datasets.Features({"text": datasets.Value("string")}),
            gen_kwargs={"files": files},
            cache_dir=cache_dir,
            fingerprint=Hasher.hash(["spanroberta text documents", stamps, MAX_CALL_CHARS, MAX_DOCUMENT_CHARACTERS]),
            writer_batch_size=DOCUMENTS_PER_BATCH,
        )
    except ValueError:
        # `datasets` refuses a generator that yields nothing with an error about its split.
        if next(read_text_documents(files, errors="replace"), None) is None:
            raise UserInputError(f"No documents in {', '.join(files)}: every line is blank.") from None
        raise


def _text_rows(files: list[str]) -> Iterator[dict[str, str]]:
    for document in read_text_documents(files):
        yield {"text": document}


def read_text_documents(files: list[str], errors: str = "strict") -> Iterator[str]:
    """The documents of text files, in order: a blank line (or one of whitespace only, as WikiText's) ends a
    document, each other line is a sentence or paragraph. Read `MAX_CALL_CHARS` characters at a time, so memory
    does not grow with a line (`_bounded_lines`), and in parts of at most `MAX_DOCUMENT_CHARACTERS` characters
    (`document_parts`). Read as UTF-8, or as the UTF-16 or UTF-32 that a byte-order mark names (a UTF-8 mark is
    dropped too: `errors.text_encoding`). `errors`: how bytes that do not decode are read ("strict" raises)."""
    for file in files:
        with open(file, encoding=text_encoding(file), errors=errors) as text:
            yield from document_parts(_bounded_lines(text), blank_lines_separate_documents=True)


def _not_utf8_error(files: list[str]) -> UserInputError:
    """The error naming the first file and line that is not UTF-8. Only called once reading failed, so reading
    the files again costs nothing on good input."""
    for file in files:
        try:
            Path(file).read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            return not_utf8_error(file)
    return UserInputError(f"{', '.join(files)}: the text is not valid UTF-8.")


def _bad_json_error(files: list[str]) -> UserInputError | None:
    """The error naming the first file and line that is not JSON, once the json builder failed; None when every
    file parses (the failure was another one). A file is JSON lines, or one JSON document over many lines; one that
    is not UTF-8 is refused as such (pyarrow's JSON reader says only that it does not parse)."""
    for file in files:
        with utf8_errors(file), open(file, encoding="utf-8") as lines:
            parsed_a_line = False
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    json.loads(line)
                except json.JSONDecodeError as error:
                    return _json_line_error(file, number, error) if parsed_a_line else _whole_json_error(file)
                parsed_a_line = True
    return None


def _whole_json_error(file: str) -> UserInputError | None:
    """A file whose first line is not a JSON value by itself: one document, which must parse as a whole."""
    try:
        with open(file, encoding="utf-8") as document:
            json.load(document)
    except json.JSONDecodeError as error:
        return _json_line_error(file, error.lineno, error)
    return None


def _json_line_error(file: str, number: int, error: json.JSONDecodeError) -> UserInputError:
    return UserInputError(
        f"{file}, line {number}: not valid JSON ({error.msg}); the file is cut short or damaged there. A JSON corpus "
        "holds one JSON object a line (JSON lines), each with the text column, or one JSON list of such objects."
    )


def _rows_to_documents(raw: datasets.Dataset, column: str, source: str) -> datasets.Dataset:
    """Each row of `raw`'s `column` a document (its blank lines do not split it), cut as `document_parts` cuts."""
    if column not in raw.column_names:
        raise UserInputError(
            f"{source} has no column {column!r} (its columns: {raw.column_names}); set text_column_name."
        )
    return raw.map(
        _split_documents,
        batched=True,
        input_columns=[column],
        remove_columns=raw.column_names,
        writer_batch_size=DOCUMENTS_PER_BATCH,
        desc="Reading documents",
    )


def _split_documents(texts: list[str | None]) -> dict[str, list[str]]:
    documents = []
    for text in texts:
        lines = _bounded_lines(io.StringIO(text or "", newline="\n"))
        documents.extend(document_parts(lines, blank_lines_separate_documents=False))
    return {"text": documents}


def document_parts(
    lines: Iterable[str], blank_lines_separate_documents: bool, max_characters: int = MAX_DOCUMENT_CHARACTERS
) -> Iterator[str]:
    """The documents of `lines` (each at most `max_characters` long), their lines stripped, blank ones dropped and
    joined by "\n": with `blank_lines_separate_documents` a blank line ends a document, otherwise all of `lines` is
    one. A document that would pass `max_characters` is cut before the line that would take it there."""
    part: list[str] = []
    size = 0
    for line in lines:
        line = line.strip()
        if not line:
            if part and blank_lines_separate_documents:
                yield "\n".join(part)
                part, size = [], 0
            continue
        if part and size + 1 + len(line) > max_characters:
            yield "\n".join(part)
            part, size = [], 0
        size += len(line) + (1 if part else 0)
        part.append(line)
    if part:
        yield "\n".join(part)


def _bounded_lines(text: TextIO, max_chars: int = MAX_CALL_CHARS) -> Iterator[str]:
    """The lines of `text`, without their newline, read `max_chars` characters at a time: a longer line comes as its
    pieces (`line_pieces.cut_line`, the same pieces as cutting the whole line), and those that hold only whitespace
    are left out; a line of whitespace only (however long) comes as one "", so it still ends a document."""
    rest, line_has_text = "", False
    while True:
        read = text.readline(max_chars)
        line = rest + read
        ended = not read or read.endswith("\n")
        pieces = list(cut_line(line.removesuffix("\n"), max_chars)) if line else []
        # An unfinished line keeps its last piece: where it is cut depends on what follows.
        rest = "" if ended else pieces.pop()
        for piece in pieces:
            if piece.strip():
                line_has_text = True
                yield piece
        if ended:
            if line and not line_has_text:
                yield ""
            if not read:
                return
            line_has_text = False
