"""Coreference data for run_coref.py: reading CoNLL-2012 files and e2e-coref's JSON lines, segmenting documents
for the encoder (Joshi et al. 2019, "BERT for Coreference Resolution: Baselines and Analysis", section 2), turning
the model's antecedents into clusters, writing them back in the input's layout, and GAP (Webster et al. 2018).

Layouts read:
- CoNLL-2012 (OntoNotes, LitBank): `#begin document (NAME); part P` ... `#end document`, one token a line (columns
  split by tabs, or by spaces where a line has no tab), a blank line after each sentence, the word in column 4,
  the speaker in column 10 where a line has more than 10 columns, and the cluster brackets in the last column:
  `(12` opens a mention of cluster 12, `12)` closes it, `(12)` is a one-word mention, several joined by `|`; `-`,
  `_` or nothing for none. A file may hold several documents. The document key is `NAME_P` (P as a number:
  `part 000` gives `NAME_0`), as e2e-coref's.
- JSON lines (Lee et al.'s e2e-coref and Joshi et al.'s code before subword tokenization): one document a line,
  `{"doc_key", "sentences": [[word, ...], ...], "speakers": (same shape, optional), "clusters": [[[start, end],
  ...], ...]}` with word indices over the whole document, ends inclusive.
A path is a file, a folder (its `*conll` and JSON-lines files) or a glob. Errors name the file and the document.
"""

from __future__ import annotations

import csv
import glob
import json
import random
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset
from transformers import PreTrainedTokenizerBase

from spanroberta.errors import InputFileNotFoundError, UserInputError, utf8_errors
from spanroberta.metrics.gap import GapDecision
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


def _error(path: Path | str, doc_key: str | None, problem: str) -> UserInputError:
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
_BRACKET = re.compile(r"(\()?(\d+)(\))?")


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
            raise _error(self.path, self.doc_key, f"line {line_number} has {len(columns)} columns; a CoNLL-2012 token "
                         "line has the word in column 4 and the coreference brackets in the last one.")  # fmt: skip
        word_index = len(self.word_lines)
        self.word_lines.append(len(self.lines) - 1)
        self.sentences[-1].append(columns[3])
        self.speakers[-1].append(columns[9] if len(columns) > 10 else "-")
        for part in columns[-1].strip().split("|"):
            if part not in NO_MENTION:
                self._bracket(part, word_index, line_number)

    def _bracket(self, part: str, word_index: int, line_number: int) -> None:
        match = _BRACKET.fullmatch(part)
        if match is None or not (match.group(1) or match.group(3)):
            raise _error(self.path, self.doc_key, f"line {line_number}: {part!r} is not a coreference bracket "
                         "(`(12`, `12)` or `(12)`, several joined by `|`).")  # fmt: skip
        cluster = int(match.group(2))
        if match.group(1) and match.group(3):
            self.clusters[cluster].append((word_index, word_index))
        elif match.group(1):
            self.open[cluster].append(word_index)
        elif not self.open[cluster]:
            raise _error(self.path, self.doc_key, f"line {line_number}: `{part}` closes a mention of cluster {cluster} "
                         "that was never opened (unbalanced brackets).")  # fmt: skip
        else:
            self.clusters[cluster].append((self.open[cluster].pop(), word_index))

    def finish(self, end_line: str) -> CorefDocument:
        self.lines.append(end_line)
        unclosed = sorted(cluster for cluster, starts in self.open.items() if starts)
        if unclosed:
            raise _error(self.path, self.doc_key, f"mentions of cluster(s) {', '.join(map(str, unclosed))} are opened "
                         "but never closed (unbalanced brackets).")  # fmt: skip
        sentences = [sentence for sentence in self.sentences if sentence]
        if not sentences:
            raise _error(self.path, self.doc_key, "the document has no words.")
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
                    raise _error(path, builder.doc_key, f"line {line_number} begins a document before `#end document`.")
                match = _BEGIN.match(line)
                name, part = (match.group(1), match.group(2)) if match else (line[len(_BEGIN_MARK):].strip(), None)
                builder = _ConllDocumentBuilder(path, f"{name}_{int(part or 0)}", line)
            elif line.startswith("#end document"):
                if builder is None:
                    raise _error(path, None, f"line {line_number}: `#end document` without `#begin document`.")
                documents.append(builder.finish(line))
                builder = None
            elif builder is not None:
                builder.add(line, line_number)
            elif line.strip() and not line.startswith("#"):
                raise _error(path, None, f"line {line_number} is outside any `#begin document` ... `#end document`.")
    if builder is not None:
        raise _error(path, builder.doc_key, "the file ends before the document's `#end document`.")
    return documents


def read_jsonlines_file(path: Path) -> list[CorefDocument]:
    """The documents of one JSON-lines file (one document a line)."""
    documents = []
    for line_number, record in read_json_lines(path, error=UserInputError):
        doc_key = record.get("doc_key", f"at line {line_number}")
        if "subtoken_map" in record:
            raise _error(path, doc_key, "this document is already split into subwords (it has `subtoken_map`, as "
                         "Joshi et al.'s preprocessed files do); give the word-level file (sentences of words).")
        for name in ("doc_key", "sentences", "clusters"):
            if name not in record:
                raise _error(path, doc_key, f"line {line_number} lacks the field `{name}` (each line needs doc_key, "
                             "sentences and clusters; speakers is optional).")  # fmt: skip
        sentences = record["sentences"]
        if not isinstance(sentences, list) or not all(isinstance(s, list) for s in sentences) or not any(sentences):
            raise _error(path, doc_key, "`sentences` must be a non-empty list of lists of words.")
        speakers = record.get("speakers") or [["-"] * len(sentence) for sentence in sentences]
        if [len(s) for s in speakers] != [len(s) for s in sentences]:
            raise _error(path, doc_key, "`speakers` must have one speaker per word, in the shape of `sentences`.")
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
            raise _error(path, doc_key, f"{span!r} in `clusters` is not a [start, end] pair of word indices.")
        start, end = span
        if not 0 <= start <= end < num_words:
            raise _error(path, doc_key, f"the span [{start}, {end}] is out of range: the document has {num_words} "
                         "words, and spans are [start, end] word indices with inclusive ends.")  # fmt: skip
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


# Segmenting and encoding (Joshi et al. 2019 section 2).


def split_into_segments(sentence_ends: Sequence[bool], word_ends: Sequence[bool], budget: int) -> list[tuple[int, int]]:
    """Non-overlapping (start, end) subword ranges (ends inclusive) of at most `budget` subwords covering the
    document, each ending at a sentence end where one fits, else at a word end, else anywhere (a word longer than a
    segment); Joshi et al.'s `split_into_segments`."""
    segments, start, total = [], 0, len(sentence_ends)
    while start < total:
        last = min(start + budget, total) - 1
        end = next((i for i in range(last, start - 1, -1) if sentence_ends[i]), None)
        if end is None:
            end = next((i for i in range(last, start - 1, -1) if word_ends[i]), last)
        segments.append((start, end))
        start = end + 1
    return segments


def special_tokens_around(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The ids the tokenizer puts before and after a single sequence ([CLS] / [SEP] for BERT, <s> / </s> for
    RoBERTa), found by encoding a word with and without them (transformers 5's tokenizers have no
    `build_inputs_with_special_tokens`)."""
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a")["input_ids"]
    start = next(i for i in range(len(full) - len(bare) + 1) if full[i:i + len(bare)] == bare)
    return full[:start], full[start + len(bare):]


def encode_document(document: CorefDocument, tokenizer: PreTrainedTokenizerBase, max_segment_length: int) -> dict:
    """The model's inputs for one document: its segments (input_ids, attention_mask, content_mask: one list per
    segment, special tokens added), each subword's sentence, word and speaker (sentence_map, word_map,
    speaker_ids), and the gold mentions as subword spans (gold_starts, gold_ends, gold_cluster_ids from 1)."""
    words = [word for sentence in document.sentences for word in sentence]
    # A leading space makes every word tokenized as inside running text (byte-level BPE and SentencePiece mark it;
    # WordPiece ignores it).
    pieces = tokenizer([" " + word for word in words], add_special_tokens=False)["input_ids"]
    subwords, word_map, sentence_map, speaker_ids, word_first, word_last = [], [], [], [], [], []
    speaker_index: dict[str, int] = {}
    word = 0
    for sentence_index, (sentence, speakers) in enumerate(zip(document.sentences, document.speakers)):
        for speaker in speakers:
            ids = pieces[word] or [tokenizer.unk_token_id]
            word_first.append(len(subwords))
            subwords += ids
            word_last.append(len(subwords) - 1)
            word_map += [word] * len(ids)
            sentence_map += [sentence_index] * len(ids)
            speaker_ids += [speaker_index.setdefault(speaker, len(speaker_index))] * len(ids)
            word += 1
    sentence_ends = [i == len(sentence_map) - 1 or sentence_map[i + 1] != s for i, s in enumerate(sentence_map)]
    word_ends = [i == len(word_map) - 1 or word_map[i + 1] != w for i, w in enumerate(word_map)]
    prefix, suffix = special_tokens_around(tokenizer)
    budget = max_segment_length - len(prefix) - len(suffix)
    features: dict[str, Any] = {"input_ids": [], "attention_mask": [], "content_mask": []}
    for start, end in split_into_segments(sentence_ends, word_ends, budget):
        features["input_ids"].append(prefix + subwords[start:end + 1] + suffix)
        features["attention_mask"].append([1] * (len(prefix) + end + 1 - start + len(suffix)))
        features["content_mask"].append([0] * len(prefix) + [1] * (end + 1 - start) + [0] * len(suffix))
    mentions = [(word_first[s], word_last[e], cluster_id)
                for cluster_id, cluster in enumerate(document.clusters, start=1) for s, e in cluster]  # fmt: skip
    features.update(sentence_map=sentence_map, word_map=word_map, speaker_ids=speaker_ids,
                    gold_starts=[m[0] for m in mentions], gold_ends=[m[1] for m in mentions],
                    gold_cluster_ids=[m[2] for m in mentions])  # fmt: skip
    return features


class TrainingWindows(Dataset):
    """Encoded documents for training: a document of more than `max_segments` segments gives a random window of
    that many consecutive segments each time it is read, with the gold mentions inside it (Joshi et al.'s
    `truncate_example`, which bounds the memory a long document takes)."""

    def __init__(self, features: Sequence[dict], max_segments: int):
        self.features, self.max_segments = list(features), max_segments

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, index: int) -> dict:
        features = self.features[index]
        num_segments = len(features["input_ids"])
        if num_segments <= self.max_segments:
            return features
        first = random.randint(0, num_segments - self.max_segments)
        kept = slice(first, first + self.max_segments)
        offset = sum(sum(mask) for mask in features["content_mask"][:first])
        length = sum(sum(mask) for mask in features["content_mask"][kept])
        window = {name: features[name][kept] for name in ("input_ids", "attention_mask", "content_mask")}
        for name in ("sentence_map", "word_map", "speaker_ids"):
            window[name] = features[name][offset:offset + length]
        inside = [i for i, (s, e) in enumerate(zip(features["gold_starts"], features["gold_ends"]))
                  if s >= offset and e < offset + length]  # fmt: skip
        window["gold_starts"] = [features["gold_starts"][i] - offset for i in inside]
        window["gold_ends"] = [features["gold_ends"][i] - offset for i in inside]
        window["gold_cluster_ids"] = [features["gold_cluster_ids"][i] for i in inside]
        return window


@dataclass
class DocumentCollator:
    """One document a batch (as Joshi et al. train): its segments padded to the longest, everything as tensors."""

    pad_token_id: int

    def __call__(self, features: Sequence[dict]) -> dict[str, torch.Tensor]:
        if len(features) != 1:
            raise ValueError(f"Coreference batches hold one document, got {len(features)}.")
        (document,) = features
        width = max(len(ids) for ids in document["input_ids"])
        batch = {}
        for name, fill in (("input_ids", self.pad_token_id), ("attention_mask", 0), ("content_mask", 0)):
            batch[name] = torch.tensor([row + [fill] * (width - len(row)) for row in document[name]], dtype=torch.long)
        for name in ("sentence_map", "word_map", "speaker_ids", "gold_starts", "gold_ends", "gold_cluster_ids"):
            batch[name] = torch.tensor(document[name], dtype=torch.long)
        return batch


# From the model's antecedents to clusters of words.


def predicted_clusters(output: Any, word_map: Sequence[int], keep_singletons: bool = False) -> list[list[Span]]:
    """Clusters of (start, end) word spans from a CorefModel output: each kept span is linked to its best-scoring
    antecedent unless the dummy scores best, and linked spans form clusters (Lee et al.'s `get_predicted_clusters`).
    With `keep_singletons`, each kept span with a positive mention score that is linked to nothing is a cluster."""
    starts, ends = output.top_span_starts.tolist(), output.top_span_ends.tolist()
    best = output.antecedent_scores.argmax(1).tolist()
    antecedents = output.top_antecedents.tolist()
    cluster_of: dict[int, int] = {}
    clusters: list[list[int]] = []
    for span, choice in enumerate(best):
        if choice == 0:
            continue
        antecedent = antecedents[span][choice - 1]
        if antecedent not in cluster_of:
            cluster_of[antecedent] = len(clusters)
            clusters.append([antecedent])
        cluster_of[span] = cluster_of[antecedent]
        clusters[cluster_of[span]].append(span)
    if keep_singletons:
        scores = output.top_span_mention_scores.tolist()
        clusters += [[span] for span in range(len(starts)) if span not in cluster_of and scores[span] > 0]
    return [sorted({(word_map[starts[s]], word_map[ends[s]]) for s in cluster}) for cluster in clusters]


# GAP (Webster et al. 2018).

GAP_COLUMNS = ("ID", "Text", "Pronoun", "Pronoun-offset", "A", "A-offset", "A-coref", "B", "B-offset", "B-coref")
_WORD = re.compile(r"\w+|[^\w\s]")


@dataclass
class GapExample:
    """One GAP example as a document of words, with the words of the pronoun, name A and name B."""

    example_id: str
    pronoun: str
    document: CorefDocument
    pronoun_words: Span
    a_words: Span
    b_words: Span
    a_coref: bool
    b_coref: bool


def read_gap(path: Path) -> list[GapExample]:
    """GAP's TSV: the text split into words (runs of letters and digits, and single punctuation marks) and
    sentences (after `.`, `!` and `?`); the pronoun and the names become the words their character spans overlap."""
    if not path.is_file():
        raise InputFileNotFoundError(f"--gap_file {path} does not exist.")
    with utf8_errors(path), open(path, encoding="utf-8", newline="") as file:
        rows = list(csv.DictReader(file, delimiter="\t", quoting=csv.QUOTE_NONE))
    missing = [column for column in GAP_COLUMNS if rows and column not in rows[0]]
    if not rows or missing:
        raise UserInputError(f"{path} is not a GAP file: it needs a header with {', '.join(GAP_COLUMNS)} and at least "
                             f"one example{f' (missing: {missing})' if missing else ''}.")  # fmt: skip
    return [_gap_example(path, row) for row in rows]


def _gap_example(path: Path, row: dict[str, str]) -> GapExample:
    text, example_id = row["Text"], row["ID"]
    matches = list(_WORD.finditer(text))
    sentences, sentence = [], []
    for match in matches:
        sentence.append(match.group())
        if match.group() in ".!?":
            sentences.append(sentence)
            sentence = []
    sentences += [sentence] if sentence else []

    def words_of(column: str) -> Span:
        mention, offset = row[column], row[f"{column}-offset"]
        if not offset.isdigit() or text[int(offset):int(offset) + len(mention)] != mention:
            raise _error(path, example_id, f"{column} {mention!r} is not at character {offset} of the text.")
        begin, finish = int(offset), int(offset) + len(mention)
        inside = [i for i, m in enumerate(matches) if m.start() < finish and m.end() > begin]
        return inside[0], inside[-1]

    flags = {}
    for column in ("A-coref", "B-coref"):
        if row[column].upper() not in ("TRUE", "FALSE"):
            raise _error(path, example_id, f"{column} must be TRUE or FALSE, not {row[column]!r}.")
        flags[column] = row[column].upper() == "TRUE"
    document = CorefDocument(example_id, sentences, [["-"] * len(s) for s in sentences], [], str(path), "gap")
    return GapExample(example_id, row["Pronoun"], document, words_of("Pronoun"), words_of("A"), words_of("B"),
                      flags["A-coref"], flags["B-coref"])  # fmt: skip


def _overlaps(span: Span, other: Span) -> bool:
    return span[0] <= other[1] and other[0] <= span[1]


def gap_decision(example: GapExample, clusters: Sequence[list[Span]]) -> GapDecision:
    """A (or B) is resolved as the pronoun's antecedent when one predicted cluster holds a mention overlapping the
    pronoun's word and another mention overlapping A's (B's) words; both, one or neither may be."""
    linked = {"a": False, "b": False}
    for cluster in clusters:
        pronoun_mentions = [span for span in cluster if _overlaps(span, example.pronoun_words)]
        if not pronoun_mentions:
            continue
        others = [span for span in cluster if span not in pronoun_mentions]
        linked["a"] |= any(_overlaps(span, example.a_words) for span in others)
        linked["b"] |= any(_overlaps(span, example.b_words) for span in others)
    return GapDecision(example.pronoun, example.a_coref, example.b_coref, linked["a"], linked["b"])


def write_gap_predictions(path: Path, examples: Sequence[GapExample], decisions: Sequence[GapDecision]) -> None:
    """`ID<TAB>A-coref<TAB>B-coref` (TRUE/FALSE) a line, without a header: the system file of GAP's scorer."""
    with open(path, "w", encoding="utf-8") as file:
        for example, decision in zip(examples, decisions):
            a, b = (str(flag).upper() for flag in (decision.predicted_a, decision.predicted_b))
            file.write(f"{example.example_id}\t{a}\t{b}\n")
