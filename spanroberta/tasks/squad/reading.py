"""Reading SQuAD v1.1 and v2.0, and MRQA 2019's extractive QA files, into `datasets.Dataset`s with the Hub's columns.

The official nested JSON as the SQuAD site distributes it, flat JSON or JSON-lines records with the Hub's columns
(id, title, context, question, answers{text, answer_start}), Hub datasets (rajpurkar/squad, rajpurkar/squad_v2), and
MRQA's JSON lines (a header line, then one context a line with its `qas`), gzipped or not, told apart by their
content. An unanswerable question has empty answer lists; MRQA files also keep their gold answers, which MRQA's
metric scores each file against. Every example is checked before any training starts, and a bad one stops the run
with an error naming the file, the line or position, and the question id.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset, Features, List, Value, concatenate_datasets, load_dataset

from spanroberta.errors import require_file, utf8_errors
from spanroberta.tasks.json_lines import open_text, read_json_lines

logger = logging.getLogger(__name__)

SQUAD_FEATURES = Features(
    {
        "id": Value("string"),
        "title": Value("string"),
        "context": Value("string"),
        "question": Value("string"),
        "answers": {"text": List(Value("string")), "answer_start": List(Value("int32"))},
    }
)


class SquadFormatError(ValueError):
    """A SQuAD file or dataset that cannot be used as given; the message says where and why."""


@dataclass(frozen=True)
class QaSplit:
    """A split's questions from every file given for it (or from the Hub), in order, with the Hub's columns; and,
    for MRQA files, the gold answers that MRQA's metric scores each file's questions against:
    {dataset name from the file's header: {qid: answers}} (empty for SQuAD data)."""

    examples: Dataset
    mrqa_gold: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def read_squad_file(path: str | Path, version_2_with_negative: bool, require_answers: bool = True) -> Dataset:
    """Reads and checks one SQuAD file: the official nested JSON, a JSON list of flat records (or
    {"data": [records]}), or JSON lines (.jsonl); gzipped or not. Test files may leave out answers
    (`require_answers=False`). An MRQA file is read as `read_mrqa_file` reads it."""
    path = Path(path)
    if is_mrqa_file(path):
        return read_mrqa_file(path, require_answers)[0]
    if path.suffix == ".jsonl":
        records = _json_lines(path)
    else:
        records = _json_records(path)
    return _checked_dataset(records, str(path), version_2_with_negative, require_answers)


def is_mrqa_file(path: Path) -> bool:
    """Whether `path` holds MRQA 2019's layout, by its first line: the header {"header": {"dataset", "split"}}, or
    (a file that lost its header, which `read_mrqa_file` then names) a context with its `qas`."""
    with utf8_errors(path), open_text(path) as file:
        first = next((line for line in file if line.strip()), "")
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        return False  # an indented SQuAD JSON file, whose first line is "{"
    return isinstance(record, dict) and ("header" in record or {"context", "qas"} <= set(record))


def read_mrqa_file(path: str | Path, require_answers: bool = True) -> tuple[Dataset, str, dict[str, list[str]]]:
    """Reads and checks one MRQA 2019 file (JSON lines, gzipped or not): a header line {"header": {"dataset",
    "split"}}, then one context a line {context, qas: [{qid, question, answers, detected_answers}]}.

    Returns the questions with the Hub's columns (id: the qid; title: the dataset), the dataset's name, and the
    gold answers {qid: answers} that the official metric scores against. The answer to train on is the first
    occurrence of a detected answer: the earliest of all `detected_answers` char_spans (whose ends are
    inclusive), with the context's text there, as SpanBERT's run_mrqa.py and the MRQA baseline take it.
    Test files may leave out answers (`require_answers=False`)."""
    path = Path(path)
    lines = read_json_lines(path, error=SquadFormatError)
    number, header = next(lines, (1, {}))
    header = header.get("header")
    if not (isinstance(header, dict) and all(isinstance(header.get(key), str) for key in ("dataset", "split"))):
        raise SquadFormatError(
            f"{path}, line {number}: an MRQA file starts with its header line, {{\"header\": {{\"dataset\": NAME, "
            "\"split\": SPLIT}}}, then holds one context a line; this line is not that header."
        )
    gold: dict[str, list[str]] = {}
    records = _mrqa_records(path, lines, header["dataset"], gold, require_answers)
    return _checked_dataset(records, str(path), False, require_answers), header["dataset"], gold


def _mrqa_records(
    path: Path, lines: Iterator[tuple[int, dict]], dataset: str, gold: dict[str, list[str]], require_answers: bool
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The questions of every context line as the Hub's records; each question's gold answers go into `gold`."""
    for number, line in lines:
        where = f"{path}, line {number}"
        context, qas = line.get("context"), line.get("qas")
        if not isinstance(context, str) or not isinstance(qas, list):
            raise SquadFormatError(f"{where}: expected a context line, {{\"context\": TEXT, \"qas\": [questions]}}.")
        for qa in qas:
            qid = qa.get("qid") if isinstance(qa, dict) else None
            if not isinstance(qid, str):
                raise SquadFormatError(f"{where}: each of `qas` needs a string `qid`.")
            answers = qa.get("answers")
            if (require_answers or answers is not None) and not (
                isinstance(answers, list) and answers and all(isinstance(answer, str) for answer in answers)
            ):  # fmt: skip
                raise SquadFormatError(f"{where}: question {qid!r}: `answers` must be a non-empty list of strings.")
            gold[qid] = answers or []
            record = {"id": qid, "title": dataset, "context": context, "question": qa.get("question")}
            if require_answers or qa.get("detected_answers") is not None:
                start, end = _first_detected_span(qa.get("detected_answers"), context, f"{where}: question {qid!r}")
                record["answers"] = {"text": [context[start : end + 1]], "answer_start": [start]}
            yield f"line {number}", record


def _first_detected_span(detected: Any, context: str, where: str) -> tuple[int, int]:
    """The earliest (start, inclusive end) of all char_spans of `detected_answers`, checked against the context."""
    spans = [span for answer in detected if isinstance(answer, dict) for span in answer.get("char_spans") or []] \
        if isinstance(detected, list) else []  # fmt: skip
    if not spans:
        raise SquadFormatError(f"{where}: `detected_answers` must list answers with their `char_spans` in the context.")
    for span in spans:
        if not (isinstance(span, list) and len(span) == 2 and all(isinstance(edge, int) for edge in span)
                and 0 <= span[0] <= span[1] < len(context)):  # fmt: skip
            raise SquadFormatError(
                f"{where}: char_span {span!r} is not [start, end] inside the context of {len(context)} characters "
                "(MRQA's ends are inclusive)."
            )
    start, end = min(spans)
    return start, end


def check_squad_dataset(
    dataset: Dataset, source: str, version_2_with_negative: bool, require_answers: bool = True
) -> Dataset:
    """Checks a split loaded from the Hub as `read_squad_file` checks a file; returns it with the Hub's columns."""
    records = ((f"row {index}", dict(row)) for index, row in enumerate(dataset))
    return _checked_dataset(records, source, version_2_with_negative, require_answers)


def load_squad_splits(
    *,
    dataset_name: str | None = None,
    dataset_config_name: str | None = None,
    files: Mapping[str, str | None] | None = None,
    splits: Sequence[str],
    version_2_with_negative: bool,
    max_samples: Mapping[str, int | None] | None = None,
    cache_dir: str | None = None,
    token: str | None = None,
) -> dict[str, QaSplit]:
    """The checked splits ("train", "validation", "test") asked for, from the Hub or from files.

    `files` maps a split to its file, or to several, comma-separated: SQuAD or MRQA files, told apart by their
    content. Several training files train on their union (as MRQA's baseline trains on its six training sets);
    several evaluation files must be MRQA files, each scored on its own. `max_samples` keeps the first N questions
    of each split, or of each file of a split. Only the test split may come without answers.
    """
    if (dataset_name is None) == (not any((files or {}).values())):
        raise ValueError("Give either --dataset_name or data files (--train_file/--validation_file/--test_file).")
    limits = max_samples or {}
    loaded = {}
    if dataset_name is not None:
        hub = load_dataset(dataset_name, dataset_config_name, cache_dir=cache_dir, token=token)
        for split in splits:
            if split not in hub:
                raise ValueError(f"{dataset_name} has no {split!r} split (it has {', '.join(hub)}).")
            checked = check_squad_dataset(
                hub[split], f"{dataset_name} [{split}]", version_2_with_negative, require_answers=split != "test"
            )
            loaded[split] = QaSplit(_first(checked, limits.get(split)))
        return loaded
    for split in splits:
        paths = [path.strip() for path in ((files or {}).get(split) or "").split(",") if path.strip()]
        if not paths:
            raise ValueError(f"The {split} split needs --{split}_file.")
        loaded[split] = _read_split(split, paths, version_2_with_negative, limits.get(split))
    return loaded


def _read_split(split: str, paths: list[str], version_2_with_negative: bool, limit: int | None) -> QaSplit:
    """One split's files: each read, checked and cut to `limit` questions, then joined."""
    parts, gold, origin = [], {}, {}
    for path in paths:
        require_file(path, f"--{split}_file {path}: no such file.")
        if not is_mrqa_file(Path(path)):
            parts.append(_first(read_squad_file(path, version_2_with_negative, split != "test"), limit))
            continue
        if version_2_with_negative:
            raise ValueError(f"{path} is an MRQA file: MRQA's questions all have answers (SQuAD v1.1's task). "
                             "Drop --version_2_with_negative.")  # fmt: skip
        examples, dataset, answers = read_mrqa_file(path, require_answers=split != "test")
        if dataset in gold:
            raise ValueError(f"{path} and {origin[dataset]} are both MRQA's {dataset!r} (their headers say so): "
                             f"each dataset is scored once, so give one file of each to --{split}_file.")  # fmt: skip
        parts.append(_first(examples, limit))
        gold[dataset], origin[dataset] = {qid: answers[qid] for qid in parts[-1]["id"]}, path
    if split == "validation" and len(paths) > 1 and len(gold) < len(paths):
        raise ValueError(
            f"--validation_file gives {len(paths)} files, not all of them MRQA files: several evaluation files are "
            "scored one by one with MRQA's metric, so each must be an MRQA file (a header line, then one context a "
            "line). Evaluate a SQuAD file on its own."
        )
    examples = parts[0] if len(parts) == 1 else concatenate_datasets(parts)
    if len(set(examples["id"])) < len(examples):
        raise SquadFormatError(f"The {split} files {', '.join(paths)} share question ids: each question must have its "
                               "own id (the predictions are keyed by it). Give each file once.")  # fmt: skip
    return QaSplit(examples, gold)


def _first(examples: Dataset, limit: int | None) -> Dataset:
    return examples if limit is None else examples.select(range(min(limit, len(examples))))


def _json_lines(path: Path) -> Iterator[tuple[str, Any]]:
    for number, record in read_json_lines(path, error=SquadFormatError):
        yield f"line {number}", record


def _json_records(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        with utf8_errors(path), open_text(path) as file:
            content = json.loads(file.read())
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":
            # JSON lines in a .json file, as `Dataset.to_json` writes them and run_qa.py reads them
            yield from _json_lines(path)
            return
        raise SquadFormatError(f"{path}, line {error.lineno}: not valid JSON ({error.msg}).") from None
    data = content.get("data") if isinstance(content, dict) else content
    if not isinstance(data, list):
        raise SquadFormatError(
            f"{path}: expected the official SQuAD JSON ({{'version', 'data': [articles]}}), "
            "a list of records, or {'data': [records]}."
        )
    if data and isinstance(data[0], dict) and "paragraphs" in data[0]:
        yield from _nested_records(data, path)
    else:
        yield from ((f"record {index}", record) for index, record in enumerate(data))


def _nested_records(articles: list, path: Path) -> Iterator[tuple[str, dict]]:
    """The official nested layout, flattened to the Hub's records."""
    for a, article in enumerate(articles):
        title = article.get("title", "") if isinstance(article, dict) else ""
        where = f"article {a} ({title!r})" if title else f"article {a}"
        if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
            raise SquadFormatError(f"{path}, {where}: has no 'paragraphs' list.")
        for p, paragraph in enumerate(article["paragraphs"]):
            if not isinstance(paragraph, dict) or "context" not in paragraph or "qas" not in paragraph:
                raise SquadFormatError(f"{path}, {where}, paragraph {p}: needs 'context' and 'qas'.")
            for q, qa in enumerate(paragraph["qas"]):
                if not isinstance(qa, dict):
                    raise SquadFormatError(f"{path}, {where}, paragraph {p}, question {q}: not an object.")
                record = {"title": title, "context": paragraph["context"]}
                record.update({key: qa[key] for key in ("id", "question") if key in qa})
                if qa.get("is_impossible") and qa.get("answers"):
                    raise SquadFormatError(
                        f"{path}, {where}, question id {qa.get('id')!r}: is_impossible is true but it has answers."
                    )
                if "answers" in qa:
                    answers = qa["answers"]
                    if not isinstance(answers, list) or not all(isinstance(answer, dict) for answer in answers):
                        raise SquadFormatError(
                            f"{path}, {where}, question id {qa.get('id')!r}: 'answers' must be a list of "
                            "{'text', 'answer_start'}."
                        )
                    record["answers"] = {
                        "text": [answer.get("text") for answer in answers],
                        "answer_start": [answer.get("answer_start") for answer in answers],
                    }
                yield f"{where}, paragraph {p}", record


def _checked_dataset(
    records: Iterable[tuple[str, Any]], source: str, version_2_with_negative: bool, require_answers: bool
) -> Dataset:
    rows, seen = [], {}
    first_unanswerable = None
    for where, record in records:
        row = _checked_record(record, f"{source}, {where}", require_answers)
        if row["id"] in seen:
            raise SquadFormatError(f"{source}, {where}: question id {row['id']!r} already used ({seen[row['id']]}).")
        seen[row["id"]] = where
        if require_answers and not row["answers"]["text"] and first_unanswerable is None:
            first_unanswerable = f"{source}, {where}: question id {row['id']!r}"
        rows.append(row)
    if not rows:
        raise SquadFormatError(f"{source}: holds no question.")
    if require_answers:
        if first_unanswerable and not version_2_with_negative:
            raise SquadFormatError(
                f"{first_unanswerable} has no answer: this is SQuAD v2.0 data (unanswerable questions). "
                "Pass --version_2_with_negative to train and evaluate on it."
            )
        if version_2_with_negative and first_unanswerable is None:
            raise SquadFormatError(
                f"{source}: --version_2_with_negative is set but no question is unanswerable; this looks like "
                "SQuAD v1.1 data. Drop --version_2_with_negative."
            )
    return Dataset.from_list(rows, features=SQUAD_FEATURES)


def _checked_record(record: Any, where: str, require_answers: bool) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise SquadFormatError(f"{where}: expected an object with id, context, question and answers.")
    qid = record.get("id")
    required = ("id", "context", "question", "answers") if require_answers else ("id", "context", "question")
    missing = [key for key in required if record.get(key) is None]
    if missing:
        named = f"question id {qid!r}" if qid is not None else "a question without an id"
        raise SquadFormatError(f"{where}: {named} is missing {', '.join(repr(key) for key in missing)}.")
    where = f"{where}: question id {qid!r}"
    context, question = record["context"], record["question"]
    if not isinstance(context, str) or not context.strip():
        raise SquadFormatError(f"{where} has an empty context.")
    if not isinstance(question, str) or not question.strip():
        raise SquadFormatError(f"{where} has an empty question.")
    answers = record.get("answers") or {"text": [], "answer_start": []}
    texts, starts = (answers.get("text"), answers.get("answer_start")) if isinstance(answers, dict) else (None, None)
    if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
        raise SquadFormatError(f"{where}: answers needs lists 'text' and 'answer_start' of the same length.")
    for text, start in zip(texts, starts):
        if not isinstance(text, str) or not text:
            raise SquadFormatError(f"{where} has an empty answer text.")
        if not isinstance(start, int) or isinstance(start, bool):
            raise SquadFormatError(f"{where}: answer_start {start!r} of {text!r} is not a character offset.")
        found = context[start : start + len(text)]
        if found != text:
            raise SquadFormatError(
                f"{where}: answer {text!r} does not match the context at answer_start {start} "
                f"(the context has {found!r} there)."
            )
    return {
        "id": str(qid),
        "title": str(record.get("title") or ""),
        "context": context,
        "question": question,
        "answers": {"text": texts, "answer_start": starts},
    }
