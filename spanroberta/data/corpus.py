"""Reading a pretraining corpus into documents, the unit that the RoBERTa input formats pack and pair.

A document is one row of the returned dataset: its sentences (or paragraphs), one per line. Where the
text comes from decides where documents end:

- text files (`.txt`, `.text`, `.raw`): a blank line separates documents, each other line is a sentence
  or a paragraph (the layout of BERT's and RoBERTa's pretraining text);
- `datasets` datasets (a Hub name, or local `.json`/`.jsonl`/`.csv`/`.parquet` files): each row of the
  text column is a document and its lines are its sentences.

Lines are stripped and blank ones dropped. Everything runs through `datasets`, so it is cached by
fingerprint: a second call with the same files (unchanged on disk) reads the cache.

`load_documents` reads everything before returning, so bad input (a missing or empty file, a byte that is not
UTF-8) is reported up front, naming the file and line. `iter_documents` reads the same sources lazily with
`datasets` streaming (for corpora larger than memory or disk); it cannot look ahead, so it replaces bytes that
are not UTF-8 with U+FFFD in text files instead of stopping the run (see `spanroberta.data.streaming`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import datasets

from ..errors import UserInputError, not_utf8_error, require_file

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
        documents = _rows_to_documents(raw, source.text_column_name, where, blank_lines_separate_documents=False)
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
    """The documents of `load_documents`, in the same order, read lazily with `datasets` streaming.

    Nothing is cached and memory does not grow with the corpus. Text files are decoded with
    `errors="replace"`: a byte that is not UTF-8 becomes U+FFFD rather than stopping a run that is already
    training; other formats that hold such a byte raise a `UserInputError` naming the file and line.
    """
    if source.dataset_name is not None:
        raw = datasets.load_dataset(source.dataset_name, source.dataset_config_name, split=source.split,
                                    streaming=True)  # fmt: skip
        yield from _stream_documents(raw, source.text_column_name, blank_lines_separate_documents=False)
        return
    for builder, files in _files_by_builder(source.train_files).items():
        is_text = builder == "text"
        options = {"sample_by": "paragraph", "encoding_errors": "replace"} if is_text else {}
        raw = datasets.load_dataset(builder, data_files=files, split="train", streaming=True, **options)
        try:
            yield from _stream_documents(raw, "text" if is_text else source.text_column_name, is_text)
        except UnicodeDecodeError:
            raise _not_utf8_error(files) from None


def _stream_documents(
    raw: datasets.IterableDataset, column: str, blank_lines_separate_documents: bool
) -> Iterator[str]:
    # `iter` rather than `iter(raw)`: inside a DataLoader worker, iterating a datasets IterableDataset directly
    # would hand the worker only some of its files; spanroberta.data.streaming splits the stream itself.
    for batch in raw.iter(batch_size=1000):
        if column not in batch:
            raise UserInputError(
                f"The data has no column {column!r} (its columns: {list(batch)}); set --text_column_name."
            )
        yield from _split_documents(batch[column], blank_lines_separate_documents)["text"]


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
    is_text = builder == "text"
    # The text builder's "paragraph" mode yields the text between "\n\n"s; lines holding only spaces
    # (WikiText's blank lines are " ") also end a document, which `_rows_to_documents` handles.
    options = {"sample_by": "paragraph"} if is_text else {}
    column = "text" if is_text else text_column_name
    try:
        raw = datasets.load_dataset(builder, data_files=files, split="train", cache_dir=cache_dir, **options)
        return _rows_to_documents(raw, column, ", ".join(files), blank_lines_separate_documents=is_text)
    except datasets.exceptions.DatasetGenerationError as error:
        if isinstance(error.__cause__, UnicodeDecodeError):
            raise _not_utf8_error(files) from None
        if builder == "json" and (bad_json := _bad_json_error(files)) is not None:
            raise bad_json from None
        raise
    except UnicodeDecodeError:
        # JSON and CSV readers keep the raw bytes; decoding fails when the rows are read.
        raise _not_utf8_error(files) from None


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
    file parses (the failure was another one). A file is JSON lines, or one JSON document over many lines."""
    for file in files:
        with open(file, encoding="utf-8") as lines:
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


def _rows_to_documents(
    raw: datasets.Dataset, column: str, source: str, blank_lines_separate_documents: bool
) -> datasets.Dataset:
    if column not in raw.column_names:
        raise UserInputError(
            f"{source} has no column {column!r} (its columns: {raw.column_names}); set text_column_name."
        )
    return raw.map(
        _split_documents,
        batched=True,
        input_columns=[column],
        remove_columns=raw.column_names,
        fn_kwargs={"blank_lines_separate_documents": blank_lines_separate_documents},
        desc="Reading documents",
    )


def _split_documents(texts: list[str | None], blank_lines_separate_documents: bool) -> dict[str, list[str]]:
    documents = []
    for text in texts:
        lines = [line.strip() for line in (text or "").split("\n")]
        if blank_lines_separate_documents:
            groups = [list(group) for non_blank, group in itertools.groupby(lines, key=bool) if non_blank]
        else:
            groups = [[line for line in lines if line]]
        documents.extend("\n".join(group) for group in groups if group)
    return {"text": documents}
