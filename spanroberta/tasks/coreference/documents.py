"""Coreference documents for run_coref.py: reading CoNLL-2012 files and e2e-coref's JSON lines, checking them,
and writing predicted clusters back in the input's layout.

Layouts read:
- CoNLL-2012 (OntoNotes, LitBank): `#begin document (NAME); part P` ... `#end document`, one token a line (columns
  split by tabs, or by spaces where a line has no tab), a blank line after each sentence, the word in column 4,
  the speaker in column 10 where a line has more than 10 columns, and the cluster brackets in the last column:
  `(12` opens a mention of cluster 12, `12)` closes it, `(12)` is a one-word mention, several joined by `|` or side
  by side (`(1(3`, `1)3)`), read as the reference scorer reads them; `-`, `_` or nothing for none. A file may
  hold several documents. The document key is `NAME_P` (P as a number: `part 000` gives `NAME_0`), as
  e2e-coref's.
- JSON lines (Lee et al.'s e2e-coref and Joshi et al.'s code before subword tokenization): one document a line,
  `{"doc_key", "sentences": [[word, ...], ...], "speakers": (same shape, optional), "clusters": [[[start, end],
  ...], ...]}` with word indices over the whole document, ends inclusive.
A path is a file, a folder (its `*conll` and JSON-lines files) or a glob. Errors name the file and the document.
"""

from __future__ import annotations

import glob
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spanroberta.errors import InputFileNotFoundError, UserInputError, utf8_errors
from spanroberta.tasks.json_lines import read_json_lines

JSON_SUFFIXES = (".jsonlines", ".jsonl", ".json", ".gz")
NO_MENTION = ("-", "_", "")
Span = tuple[int, int]


@dataclass
class CorefDocument:
    """A document: its sentences of words, each word's speaker, and its clusters of (start, end) word spans over
    the whole document (ends inclusive). `layout` is "conll" or "jsonlines"; `lines` (CoNLL: the document's lines,
    `#begin` to `#end`, and `word_lines`, the line of each word) or `record` (JSON lines) let predictions be
    written back in the same layout."""

    doc_key: str
    sentences: list[list[str]]
    speakers: list[list[str]]
    clusters: list[list[Span]]
    source: str
    layout: str
    lines: list[str] = field(default_factory=list)
    word_lines: list[int] = field(default_factory=list)
    record: dict[str, Any] | None = None

    @property
    def num_words(self) -> int:
        return sum(len(sentence) for sentence in self.sentences)


def input_error(path: Path | str, doc_key: str | None, problem: str) -> UserInputError:
    where = f"{path}, document {doc_key}" if doc_key is not None else str(path)
    return UserInputError(f"{where}: {problem}")


def coref_files(spec: str) -> list[Path]:
    """The files a path names: the file itself, a folder's CoNLL (`*conll`) and JSON-lines files, or a glob's."""
    path = Path(spec)
    if path.is_dir():
        files = sorted(p for p in path.iterdir()
                       if p.is_file() and (p.name.endswith("conll") or p.suffix in JSON_SUFFIXES))  # fmt: skip
    elif any(char in spec for char in "*?["):
        files = sorted(Path(p) for p in glob.glob(spec) if Path(p).is_file())
    elif path.is_file():
        files = [path]
    else:
        raise InputFileNotFoundError(
            f"{spec} does not exist: give a CoNLL-2012 or JSON-lines file, a folder or a glob."
        )
    if not files:
        raise UserInputError(f"{spec} holds no CoNLL (*conll) or JSON-lines (.jsonlines, .jsonl) file.")
    return files


def read_coref_documents(spec: str) -> list[CorefDocument]:
    """Every document of the files `spec` names (see `coref_files`), checked; all in one layout."""
    documents = []
    for path in coref_files(spec):
        documents += read_jsonlines_file(path) if path.suffix in JSON_SUFFIXES else read_conll_file(path)
    if not documents:
        raise UserInputError(f"{spec} holds no document.")
    layouts = {document.layout for document in documents}
    if len(layouts) > 1:
        raise UserInputError(f"{spec} mixes CoNLL and JSON-lines files; give one layout at a time.")
    keys = [document.doc_key for document in documents]
    if len(set(keys)) < len(keys):
        duplicate = next(key for key in keys if keys.count(key) > 1)
        raise UserInputError(f"{spec}: the document {duplicate} appears twice; each document key must be unique.")
    return documents


_BEGIN_MARK = "#begin document"
_BEGIN = re.compile(r"#begin document \(?(.*?)\)?;?(?: part (\d+))?\s*$")
# The reference scorer's (v8.01, CorScorer.pm `GetCoreference`) reading of a cell: double antecedents `(1+2)`
# dropped, then every one-word mention `(12)`, then every opening `(12`, then every closing `12)`, each removed
# from the cell as it is found, whatever joins them (`|` or nothing: `(1(3`, `1)3)`, `(1)|(3`).
_DOUBLE_ANTECEDENT = re.compile(r"\((\d+\+\d)\)")
_ONE_WORD, _OPENING, _CLOSING = re.compile(r"\((\d+)\)"), re.compile(r"\((\d+)"), re.compile(r"(\d+)\)")


def _take_all(pattern: re.Pattern, cell: str) -> tuple[list[str], str]:
    """Perl's `while ($cell =~ s/pattern//)`: the first group of each match, and the cell without the matches (each
    removed before the next is searched, as the scorer does)."""
    found = []
    while match := pattern.search(cell):
        found.append(match.group(1))
        cell = cell[:match.start()] + cell[match.end():]
    return found, cell


class _ConllDocumentBuilder:
    """Collects one CoNLL document's words, speakers and brackets, line by line."""

    def __init__(self, path: Path, doc_key: str, begin_line: str):
        self.path, self.doc_key = path, doc_key
        self.lines, self.word_lines = [begin_line], []
        self.sentences: list[list[str]] = [[]]
        self.speakers: list[list[str]] = [[]]
        self.open: dict[int, list[int]] = defaultdict(list)
        self.clusters: dict[int, list[Span]] = defaultdict(list)

    def add(self, line: str, line_number: int) -> None:
        self.lines.append(line)
        if not line.strip():
            if self.sentences[-1]:
                self.sentences.append([])
                self.speakers.append([])
            return
        columns = line.split("\t") if "\t" in line else line.split()
        if len(columns) < 5:
            raise input_error(self.path, self.doc_key, f"line {line_number} has {len(columns)} columns; a CoNLL-2012 "
                              "token line has the word in column 4 and the coreference brackets in the last one.")
        word_index = len(self.word_lines)
        self.word_lines.append(len(self.lines) - 1)
        self.sentences[-1].append(columns[3])
        self.speakers[-1].append(columns[9] if len(columns) > 10 else "-")
        self._brackets(columns[-1].strip(), word_index, line_number)

    def _brackets(self, cell: str, word_index: int, line_number: int) -> None:
        _, rest = _take_all(_DOUBLE_ANTECEDENT, cell)
        one_word, rest = _take_all(_ONE_WORD, rest)
        openings, rest = _take_all(_OPENING, rest)
        closings, rest = _take_all(_CLOSING, rest)
        if rest.strip("|-_ "):
            raise input_error(self.path, self.doc_key, f"line {line_number}: {cell!r} is not a cell of coreference "
                              "brackets (`(12`, `12)` or `(12)`, several joined by `|` or side by side; `-` for none).")
        for cluster in map(int, one_word):
            self.clusters[cluster].append((word_index, word_index))
        for cluster in map(int, openings):
            self.open[cluster].append(word_index)
        for cluster in map(int, closings):
            if not self.open[cluster]:
                raise input_error(self.path, self.doc_key, f"line {line_number}: `{cluster})` closes a mention of "
                                  f"cluster {cluster} that was never opened (unbalanced brackets).")  # fmt: skip
            self.clusters[cluster].append((self.open[cluster].pop(), word_index))

    def finish(self, end_line: str) -> CorefDocument:
        self.lines.append(end_line)
        unclosed = sorted(cluster for cluster, starts in self.open.items() if starts)
        if unclosed:
            raise input_error(self.path, self.doc_key, f"mentions of cluster(s) {', '.join(map(str, unclosed))} are "
                              "opened but never closed (unbalanced brackets).")
        sentences = [sentence for sentence in self.sentences if sentence]
        if not sentences:
            raise input_error(self.path, self.doc_key, "the document has no words.")
        clusters = [sorted(self.clusters[cluster]) for cluster in sorted(self.clusters)]
        return CorefDocument(self.doc_key, sentences, [s for s in self.speakers if s], clusters, str(self.path),
                             "conll", lines=self.lines, word_lines=self.word_lines)  # fmt: skip


def read_conll_file(path: Path) -> list[CorefDocument]:
    """The documents of one CoNLL-2012 file (several `#begin document` blocks allowed)."""
    documents, builder = [], None
    with utf8_errors(path), open(path, encoding="utf-8") as file:
        for line_number, raw in enumerate(file, start=1):
            line = raw.rstrip("\n")
            if line.startswith(_BEGIN_MARK):
                if builder is not None:
                    raise input_error(path, builder.doc_key,
                                      f"line {line_number} begins a document before `#end document`.")
                match = _BEGIN.match(line)
                name, part = (match.group(1), match.group(2)) if match else (line[len(_BEGIN_MARK):].strip(), None)
                builder = _ConllDocumentBuilder(path, f"{name}_{int(part or 0)}", line)
            elif line.startswith("#end document"):
                if builder is None:
                    raise input_error(path, None, f"line {line_number}: `#end document` without `#begin document`.")
                documents.append(builder.finish(line))
                builder = None
            elif builder is not None:
                builder.add(line, line_number)
            elif line.strip() and not line.startswith("#"):
                raise input_error(path, None,
                                  f"line {line_number} is outside any `#begin document` ... `#end document`.")
    if builder is not None:
        raise input_error(path, builder.doc_key, "the file ends before the document's `#end document`.")
    return documents


def read_jsonlines_file(path: Path) -> list[CorefDocument]:
    """The documents of one JSON-lines file (one document a line)."""
    documents = []
    for line_number, record in read_json_lines(path, error=UserInputError):
        doc_key = record.get("doc_key", f"at line {line_number}")
        if "subtoken_map" in record:
            raise input_error(path, doc_key, "this document is already split into subwords (it has `subtoken_map`, "
                              "as Joshi et al.'s preprocessed files do); give the word-level file (sentences of "
                              "words).")
        for name in ("doc_key", "sentences", "clusters"):
            if name not in record:
                raise input_error(path, doc_key, f"line {line_number} lacks the field `{name}` (each line needs "
                                  "doc_key, sentences and clusters; speakers is optional).")
        sentences = record["sentences"]
        if not isinstance(sentences, list) or not all(isinstance(s, list) for s in sentences) or not any(sentences):
            raise input_error(path, doc_key, "`sentences` must be a non-empty list of lists of words.")
        speakers = record.get("speakers") or [["-"] * len(sentence) for sentence in sentences]
        if [len(s) for s in speakers] != [len(s) for s in sentences]:
            raise input_error(path, doc_key, "`speakers` must have one speaker per word, in the shape of `sentences`.")
        num_words = sum(len(sentence) for sentence in sentences)
        clusters = [_checked_cluster(path, doc_key, cluster, num_words) for cluster in record["clusters"]]
        documents.append(CorefDocument(str(doc_key), [[str(w) for w in s] for s in sentences if s],
                                       [[str(p) for p in s] for s in speakers if s], clusters, str(path), "jsonlines",
                                       record=record))  # fmt: skip
    return documents


def _checked_cluster(path: Path, doc_key: str, cluster: Any, num_words: int) -> list[Span]:
    spans = []
    for span in cluster if isinstance(cluster, list) else [cluster]:
        if not (isinstance(span, list) and len(span) == 2 and all(isinstance(i, int) for i in span)):
            raise input_error(path, doc_key, f"{span!r} in `clusters` is not a [start, end] pair of word indices.")
        start, end = span
        if not 0 <= start <= end < num_words:
            raise input_error(path, doc_key, f"the span [{start}, {end}] is out of range: the document has "
                              f"{num_words} words, and spans are [start, end] word indices with inclusive ends.")
        spans.append((start, end))
    return sorted(spans)


def write_coref_documents(path: Path, documents: Sequence[CorefDocument], clusters: Sequence[list[list[Span]]]) -> None:
    """Writes `documents` with `clusters` (one list per document) in their input layout: CoNLL with the last
    column rewritten, or JSON lines with `clusters` replaced."""
    with open(path, "w", encoding="utf-8") as file:
        for document, predicted in zip(documents, clusters):
            if document.layout == "jsonlines":
                record = {**document.record, "clusters": [[list(span) for span in cluster] for cluster in predicted]}
                file.write(_json_line(record))
            else:
                file.write("\n".join(_conll_lines(document, predicted)) + "\n")


def _json_line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def _conll_lines(document: CorefDocument, clusters: Sequence[list[Span]]) -> list[str]:
    brackets: list[list[str]] = [[] for _ in range(document.num_words)]
    for cluster_id, cluster in enumerate(clusters):
        for start, end in sorted(cluster, key=lambda span: (span[0], -span[1])):
            if start == end:
                brackets[start].append(f"({cluster_id})")
            else:
                brackets[start].append(f"({cluster_id}")
                brackets[end].append(f"{cluster_id})")
    lines = list(document.lines)
    for word, line_index in enumerate(document.word_lines):
        line = lines[line_index]
        separator = "\t" if "\t" in line else None
        columns = line.split(separator)
        empty = columns[-1] if columns[-1].strip() in NO_MENTION else "-"
        columns[-1] = "|".join(brackets[word]) or empty
        lines[line_index] = (separator or "   ").join(columns)
    return lines

