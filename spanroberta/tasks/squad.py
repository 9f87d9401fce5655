"""SQuAD v1.1 and v2.0, and MRQA 2019's extractive QA files, as data, for run_squad.py.

- Readers: the official nested JSON as the SQuAD site distributes it, flat JSON or JSON-lines records with
  the Hub's columns (id, title, context, question, answers{text, answer_start}), Hub datasets
  (rajpurkar/squad, rajpurkar/squad_v2), and MRQA's JSON lines (a header line, then one context a line with
  its `qas`), gzipped or not, told apart by their content. Whatever the source, a split becomes a
  `datasets.Dataset` with the Hub's columns; an unanswerable question has empty answer lists; MRQA files
  also keep their gold answers, which MRQA's metric scores each file against. Every example is checked before any
  training starts, and a bad one stops the run with an error naming the file, the line or position, and
  the question id.
- Features: question-context pairs split into overlapping windows (the span decoding's own
  `encode_windows`), with the answer's token positions for training, or the character offsets that map
  predictions back to the context for evaluation.
- Post-processing: the model's scores over all windows of a question become `predictions.json`,
  `nbest_predictions.json` and, for v2.0, `null_odds.json`, as the official evaluation scripts read them;
  and the v2.0 no-answer threshold that maximised F1 is kept next to the checkpoint for later runs.

The span decoding itself lives in spanroberta.pipelines.question_answering, shared with the pipeline.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset, Features, List, Value, concatenate_datasets, load_dataset
from transformers import PreTrainedTokenizerBase, Trainer

from spanroberta.errors import utf8_errors
from spanroberta.metrics.squad import mrqa_evaluate, squad_v1_evaluate, squad_v2_evaluate
from spanroberta.pipelines import question_answering
from spanroberta.pipelines.question_answering import (
    WindowScores,
    cls_index,
    context_offsets,
    decode_spans,
    encode_windows,
)
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
THRESHOLD_FILE = "null_score_threshold.json"


class SquadFormatError(ValueError):
    """A SQuAD file or dataset that cannot be used as given; the message says where and why."""


# --- reading and checking ---


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


# --- features ---


def answer_token_span(
    offsets: Sequence[tuple[int, int] | None], start_char: int, end_char: int
) -> tuple[int, int] | None:
    """The first and last tokens of the answer context[start_char:end_char] in a window, or None when the
    window does not hold the whole answer."""
    context = [(position, offset) for position, offset in enumerate(offsets) if offset is not None]
    if not context or context[0][1][0] > start_char or context[-1][1][1] < end_char:
        return None
    start = next(position for position, (_, end) in context if end > start_char)
    end = max(position for position, (begin, _) in context if begin < end_char)
    return (start, end) if start <= end else None


def prepare_train_features(
    examples: Mapping[str, list],
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
    with_is_impossible: bool = False,
) -> dict[str, list]:
    """Windows with their labels, for `Dataset.map(batched=True)`: start/end_positions of the first gold
    answer, or of the first token (<s>) when the window does not hold it or the question has no answer
    (BERT section 4.3). With `with_is_impossible`, also the answerability classifier's label, per window:
    1 where the span label is that first token."""
    encoding = encode_windows(
        tokenizer, examples["question"], examples["context"], max_seq_length, doc_stride, max_query_length
    )
    features = {name: encoding[name] for name in tokenizer.model_input_names if name in encoding}
    features.update(start_positions=[], end_positions=[])
    if with_is_impossible:
        features["is_impossible"] = []
    for window, example in enumerate(encoding["overflow_to_sample_mapping"]):
        null = cls_index(encoding["input_ids"][window], tokenizer.cls_token_id)
        answers = examples["answers"][example]
        span = None
        if answers["answer_start"]:
            start_char = answers["answer_start"][0]
            span = answer_token_span(
                context_offsets(encoding, window), start_char, start_char + len(answers["text"][0])
            )
        start, end = span if span is not None else (null, null)
        features["start_positions"].append(start)
        features["end_positions"].append(end)
        if with_is_impossible:
            features["is_impossible"].append(int(span is None))
    return features


def prepare_eval_features(
    examples: Mapping[str, list],
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int,
    doc_stride: int,
    max_query_length: int,
) -> dict[str, list]:
    """Windows for prediction, for `Dataset.map(batched=True)`: the model inputs plus `example_id` and
    `offset_mapping` (character offsets of context tokens, None elsewhere), which post-processing needs and
    the model must not see (`EVAL_ONLY_COLUMNS`)."""
    encoding = encode_windows(
        tokenizer, examples["question"], examples["context"], max_seq_length, doc_stride, max_query_length
    )
    features = {name: encoding[name] for name in tokenizer.model_input_names if name in encoding}
    windows = range(len(encoding["input_ids"]))
    features["example_id"] = [examples["id"][encoding["overflow_to_sample_mapping"][w]] for w in windows]
    features["offset_mapping"] = [context_offsets(encoding, w) for w in windows]
    return features


EVAL_ONLY_COLUMNS = ("example_id", "offset_mapping")


# --- post-processing ---


@dataclass
class SquadPredictions:
    """Answers for a set of questions, as the official files hold them.

    `predictions`: id -> answer ("" for no answer); `nbest`: id -> the best candidates with their
    probabilities (softmax over the candidates' scores, as BERT's nbest_predictions.json; for v2.0 the null
    answer "" is always listed); `null_odds`
    (v2.0): id -> no-answer score minus best answer score, the official script's --na-prob-file;
    `best_answers`: id -> the best non-empty answer, which the v2.0 scores use with the null odds.
    """

    predictions: dict[str, str] = field(default_factory=dict)
    nbest: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    null_odds: dict[str, float] = field(default_factory=dict)
    best_answers: dict[str, str] = field(default_factory=dict)


def postprocess_predictions(
    examples: Dataset,
    features: Dataset,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    *,
    cls_token_id: int | None,
    version_2_with_negative: bool,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    null_score_diff_threshold: float = 0.0,
    answerability_logits: np.ndarray | None = None,
) -> SquadPredictions:
    """Turns the per-window logits of `features` into answers for `examples`.

    A span scores start_logit + end_logit; the best over all windows of a question wins. For v2.0 the
    question's null odds are null score - best span score (BERT's score_diff), plus, when the model has the
    answerability classifier, its lowest "impossible" logit over the question's windows (the window most
    confident that it holds the answer speaks for the question); the answer is "" when the odds exceed
    `null_score_diff_threshold`.
    """
    windows_of = defaultdict(list)
    for index, example_id in enumerate(features["example_id"]):
        windows_of[example_id].append(index)
    offsets, input_ids = features["offset_mapping"], features["input_ids"]
    result = SquadPredictions()
    for example in examples:
        qid, indices = example["id"], windows_of[example["id"]]
        windows = [
            WindowScores(start_logits[i], end_logits[i], offsets[i], cls_index(input_ids[i], cls_token_id))
            for i in indices
        ]
        spans, null = decode_spans(windows, example["context"], n_best_size, max_answer_length)
        best = spans[0].text if spans else ""
        result.best_answers[qid] = best
        candidates = spans
        if version_2_with_negative:
            odds = null.score - spans[0].score if spans else math.inf
            if answerability_logits is not None:
                odds += float(min(answerability_logits[i] for i in indices))
            result.null_odds[qid] = odds
            result.predictions[qid] = "" if odds > null_score_diff_threshold else best
            # The null answer is always listed, last if it is not among the best (as BERT's script does).
            candidates = sorted([*spans, null], key=lambda span: span.score, reverse=True)[:n_best_size]
            if null not in candidates:
                candidates.append(null)
        else:
            result.predictions[qid] = best
        result.nbest[qid] = _nbest_entries(candidates)
    return result


def _nbest_entries(candidates: Sequence[question_answering.SpanPrediction]) -> list[dict[str, Any]]:
    if not candidates:
        return []
    scores = np.array([candidate.score for candidate in candidates], dtype=np.float64)
    probabilities = np.exp(scores - scores.max())
    probabilities /= probabilities.sum()
    return [
        {
            "text": candidate.text,
            "probability": float(probability),
            "start_logit": candidate.start_score,
            "end_logit": candidate.end_score,
            "answer_start": candidate.start,
        }
        for candidate, probability in zip(candidates, probabilities)
    ]


def score_predictions(
    examples: Dataset,
    predictions: SquadPredictions,
    version_2_with_negative: bool,
    null_score_diff_threshold: float,
    mrqa_gold: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> dict[str, float]:
    """The official scores of the predictions: v1.1's {exact_match, f1}, every key of v2.0's script, or, given the
    gold answers of MRQA files (`QaSplit.mrqa_gold`), MRQA's per-dataset scores and their macro averages.

    v2.0 scores the best non-empty answers with the null odds and the threshold, which gives the same exact
    and f1 as scoring predictions.json, and best thresholds searched over every answer rather than only over
    those the current threshold kept (what SpanBERT's run_squad.py does).
    """
    if mrqa_gold:
        return mrqa_evaluate(mrqa_gold, predictions.predictions)
    gold = {example["id"]: example["answers"]["text"] for example in examples}
    if not version_2_with_negative:
        return squad_v1_evaluate(gold, predictions.predictions)
    return squad_v2_evaluate(gold, predictions.best_answers, predictions.null_odds, null_score_diff_threshold)


def predict_and_score(
    trainer: Trainer,
    examples: Dataset,
    features: Dataset,
    *,
    version_2_with_negative: bool,
    n_best_size: int,
    max_answer_length: int,
    null_score_diff_threshold: float,
    output_dir: str | Path,
    prefix: str = "",
    score: bool = True,
    mrqa_gold: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> tuple[SquadPredictions, dict[str, float]]:
    """Runs the model over `features`, writes the prediction files into `output_dir` (named
    `{prefix}predictions.json`, ...) and, with `score`, returns the official scores (MRQA's, given `mrqa_gold`)."""
    output = trainer.predict(features.remove_columns(list(EVAL_ONLY_COLUMNS)))
    logits = output.predictions
    answerability = logits[2] if getattr(trainer.model.config, "answerability_head", False) else None
    predictions = postprocess_predictions(
        examples,
        features,
        logits[0],
        logits[1],
        cls_token_id=trainer.processing_class.cls_token_id,
        version_2_with_negative=version_2_with_negative,
        n_best_size=n_best_size,
        max_answer_length=max_answer_length,
        null_score_diff_threshold=null_score_diff_threshold,
        answerability_logits=answerability,
    )
    if trainer.is_world_process_zero():
        write_predictions(predictions, output_dir, prefix, version_2_with_negative)
    if not score:
        return predictions, {}
    return predictions, score_predictions(
        examples, predictions, version_2_with_negative, null_score_diff_threshold, mrqa_gold
    )


def write_predictions(
    predictions: SquadPredictions, output_dir: str | Path, prefix: str, version_2_with_negative: bool
) -> None:
    """predictions.json, nbest_predictions.json and, for v2.0, null_odds.json and best_non_null_predictions.json
    (each name after `prefix`).

    The official evaluate-v2.0.py run on best_non_null_predictions.json with `--na-prob-file null_odds.json
    --na-prob-thresh <threshold>` reproduces every number of eval_results.json; run on predictions.json, it
    reproduces exact and f1 (its best_* search cannot revive answers the threshold already replaced by "").
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    files = {"predictions.json": predictions.predictions, "nbest_predictions.json": predictions.nbest}
    if version_2_with_negative:
        files["null_odds.json"] = predictions.null_odds
        files["best_non_null_predictions.json"] = predictions.best_answers
    for name, content in files.items():
        (output_dir / f"{prefix}{name}").write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n")


# --- the v2.0 threshold kept with a checkpoint ---


def save_null_score_threshold(output_dir: str | Path, metrics: Mapping[str, float]) -> Path:
    """Writes v2.0's best_f1_thresh (from `metrics`, the official keys) to THRESHOLD_FILE in `output_dir`.

    Predicting "" only above this null-odds threshold is what makes v2.0 F1 right: SpanBERT's scripts,
    run with the default threshold, gave F1 near 46.
    """
    path = Path(output_dir) / THRESHOLD_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {
        "null_score_diff_threshold": metrics["best_f1_thresh"],
        "best_f1": metrics["best_f1"],
        "best_exact": metrics["best_exact"],
        "questions": metrics["total"],
    }
    path.write_text(json.dumps(content, indent=2) + "\n")
    return path


def load_null_score_threshold(model_name_or_path: str | Path) -> float | None:
    """The threshold saved with a local checkpoint by an earlier evaluation, or None."""
    path = Path(model_name_or_path) / THRESHOLD_FILE
    if not path.is_file():
        return None
    return float(json.loads(path.read_text())["null_score_diff_threshold"])


# --- checkpoints that carry the pipeline ---


def save_qa_checkpoint(trainer: Trainer, output_dir: str | Path) -> None:
    """Saves the model and tokenizer with the question-answering pipeline's code, so that
    `pipeline("question-answering", model=output_dir, trust_remote_code=True)` works without spanroberta.

    transformers 5 has no question-answering pipeline of its own (the task is in its REMOVED_TASKS), so the
    pipeline file named in `custom_pipelines` is the only way to that call without spanroberta, whatever the
    architecture. A stock architecture (BertForQuestionAnswering, RobertaForQuestionAnswering) stays
    transformers' own class, loaded without remote code; only spanroberta's model types carry their modeling code
    too (see modeling_spanroberta). Where spanroberta is imported, its registered pipeline serves the task and
    the checkpoint's copy is not run (`register_question_answering_pipeline`)."""
    pipeline_file = Path(question_answering.__file__)
    trainer.model.config.custom_pipelines = {
        question_answering.TASK: {
            "impl": f"{pipeline_file.stem}.{question_answering.QuestionAnsweringPipeline.__name__}",
            "pt": ["AutoModelForQuestionAnswering"],
            "type": "text",
        }
    }
    trainer.save_model(str(output_dir))
    if trainer.is_world_process_zero():
        shutil.copyfile(pipeline_file, Path(output_dir) / pipeline_file.name)
