"""RACE (Lai et al. 2017): reading comprehension from English exams, one passage and a question with four
options A to D. Readers for the Hub (ehovy/race), the original RACE folder layout and JSON-lines files;
RoBERTa's encoding of a question with each option; accuracy overall and per school level.

Whatever the source, a question becomes a row with `example_id` (the article's id, e.g. "high10024"),
`question_index` (its position among the article's questions), `level` ("middle", "high" or "" when
unknown), `article`, `question`, `options` (four strings) and `label` (0 to 3 for A to D).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset, load_dataset
from tokenizers import Tokenizer
from transformers import EvalPrediction, PreTrainedTokenizerBase

from spanroberta.errors import require_file, utf8_errors
from spanroberta.tasks.classification import accuracy
from spanroberta.tasks.json_lines import read_json_lines

RACE_HUB_ID = "ehovy/race"
RACE_CONFIGS = {"all": ("middle", "high"), "middle": ("middle",), "high": ("high",)}
ANSWER_LETTERS = ("A", "B", "C", "D")
NUM_OPTIONS = len(ANSWER_LETTERS)
# The original layout names the dev split "dev"; the Hub calls it "validation".
FOLDER_SPLITS = {"train": "train", "validation": "dev", "test": "test"}
COLUMNS = ("example_id", "article", "question", "options", "answer")

# RoBERTa's truncation budgets for RACE (fairseq examples/roberta/README.race.md: --max-option-length 128,
# --max-positions 512): the question with the option is cut to 128 tokens, the whole input to 512.
MAX_QA_LENGTH = 128
MAX_SEQ_LENGTH = 512

# Fine-tuning defaults: the command of fairseq's examples/roberta/README.race.md, which produced RoBERTa's
# RACE result (RoBERTa section 5.3): lr 1e-5 held constant, batch 16 (1 per GPU x 8 accumulation x 2 GPUs),
# 5 epochs, weight decay 0.01, Adam betas (0.9, 0.98), eps 1e-6, no gradient clipping.
RACE_TRAINING_DEFAULTS: dict[str, Any] = {
    "learning_rate": 1e-5,
    "lr_scheduler_type": "constant",
    "per_device_train_batch_size": 16,
    "num_train_epochs": 5,
    "weight_decay": 0.01,
    "adam_beta1": 0.9,
    "adam_beta2": 0.98,
    "adam_epsilon": 1e-6,
    "max_grad_norm": 0.0,
}


# ---------------------------------------------------------------------------------------------------------
# Loading


def load_race(
    split: str,
    config: str = "all",
    data_dir: str | Path | None = None,
    files: Sequence[str | Path] | None = None,
    cache_dir: str | None = None,
) -> Dataset:
    """One split ("train", "validation" or "test"), read and checked: from the original RACE folder
    `data_dir`, from JSON-lines `files` (.jsonl or .jsonl.gz) or, when neither is given, from the Hub.

    `config` ("all", "middle" or "high") picks the school levels from the Hub or the folder; files are
    taken whole. Every question is checked here, so bad input fails before any model is loaded.
    """
    if config not in RACE_CONFIGS:
        raise ValueError(f"Unknown RACE config {config!r}; choose one of {', '.join(RACE_CONFIGS)}.")
    if data_dir is not None and files:
        raise ValueError("Give either --data_dir or --train_file/--validation_file/--test_file, not both.")
    if data_dir is not None:
        rows = read_race_folder(Path(data_dir), FOLDER_SPLITS[split], RACE_CONFIGS[config])
    elif files:
        rows = [row for path in files for row in read_race_jsonl(Path(path))]
    else:
        rows = _read_race_hub(split, config, cache_dir)
    return Dataset.from_list(rows)


def read_race_jsonl(path: Path) -> list[dict[str, Any]]:
    """Questions from a JSON-lines file (gzipped when it ends in .gz) with the Hub's columns
    (example_id, article, question, options, answer)."""
    require_file(path, f"{path}: no such file.")
    rows: list[dict[str, Any]] = []
    counter = _QuestionCounter()
    for line_number, record in read_json_lines(path):
        where = f"{path}, line {line_number} (example_id {record.get('example_id')!r})"
        rows.append(_race_row(record, where, counter))
    if not rows:
        raise ValueError(f"{path}: the file holds no questions.")
    return rows


def read_race_folder(data_dir: Path, split_folder: str, levels: Sequence[str]) -> list[dict[str, Any]]:
    """Questions in the original RACE layout: `data_dir/{train,dev,test}/{middle,high}/*.txt`, one JSON
    article per file with the lists `questions`, `options` and `answers`. Levels the folder lacks are skipped."""
    level_folders = [data_dir / split_folder / level for level in levels if (data_dir / split_folder / level).is_dir()]
    if not level_folders:
        wanted = " or ".join(str(data_dir / split_folder / level) for level in levels)
        raise FileNotFoundError(f"No RACE {split_folder} data: neither {wanted} is a folder.")
    rows: list[dict[str, Any]] = []
    counter = _QuestionCounter()
    for folder in level_folders:
        for path in sorted(folder.glob("*.txt"), key=_natural_key):
            rows.extend(_article_rows(path, folder.name, counter))
    if not rows:
        raise ValueError(f"No questions in {', '.join(map(str, level_folders))}: the folders hold no *.txt files.")
    return rows


def _race_row(record: Mapping[str, Any], where: str, counter: _QuestionCounter) -> dict[str, Any]:
    """Checks one question (all columns present, exactly 4 options, an answer from A to D) and converts it
    to a row; errors name `where`."""
    missing = [column for column in COLUMNS if record.get(column) is None]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}; a RACE question needs {', '.join(COLUMNS)}.")
    options = record["options"]
    if not isinstance(options, list) or len(options) != NUM_OPTIONS:
        found = len(options) if isinstance(options, list) else type(options).__name__
        raise ValueError(f"{where}: options must be a list of exactly {NUM_OPTIONS} (A to D), found {found}.")
    answer = str(record["answer"]).strip()
    if answer not in ANSWER_LETTERS:
        raise ValueError(f"{where}: answer {record['answer']!r} is not one of {', '.join(ANSWER_LETTERS)}.")
    example_id = str(record["example_id"]).removesuffix(".txt")
    return {
        "example_id": example_id,
        "question_index": counter.next(example_id),
        "level": next((level for level in RACE_CONFIGS["all"] if example_id.startswith(level)), ""),
        "article": str(record["article"]),
        "question": str(record["question"]),
        "options": [str(option) for option in options],
        "label": ANSWER_LETTERS.index(answer),
    }


class _QuestionCounter:
    """Numbers the questions of each article in reading order (the Hub repeats the article's id)."""

    def __init__(self) -> None:
        self._seen: Counter[str] = Counter()

    def next(self, example_id: str) -> int:
        self._seen[example_id] += 1
        return self._seen[example_id] - 1


def _article_rows(path: Path, level: str, counter: _QuestionCounter) -> Iterator[dict[str, Any]]:
    try:
        with utf8_errors(path):
            article = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not a RACE article file ({error.msg} at line {error.lineno}).") from None
    missing = [key for key in ("article", "questions", "options", "answers") if key not in article]
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing)}; a RACE file has article, questions, options, answers.")
    lengths = {key: len(article[key]) for key in ("questions", "options", "answers")}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"{path}: the lists questions, options and answers differ in length ({lengths}).")
    # The original files' ids are "high10024.txt"; the Hub's and our ids drop the extension.
    example_id = f"{level}{path.stem}"
    for i, (question, options, answer) in enumerate(zip(article["questions"], article["options"], article["answers"])):
        record = {"example_id": example_id, "article": article["article"], "question": question,
                  "options": options, "answer": answer}
        yield _race_row(record, f"{path}, question {i + 1} (example_id {example_id!r})", counter)


def _natural_key(path: Path) -> tuple[int, str]:
    return (int(path.stem), "") if path.stem.isdigit() else (-1, path.stem)


def _read_race_hub(split: str, config: str, cache_dir: str | None) -> list[dict[str, Any]]:
    dataset = load_dataset(RACE_HUB_ID, config, split=split, cache_dir=cache_dir)
    counter = _QuestionCounter()
    source = f"{RACE_HUB_ID} ({config}) {split}"
    return [
        _race_row(record, f"{source}, row {i} (example_id {record.get('example_id')!r})", counter)
        for i, record in enumerate(dataset)
    ]


# ---------------------------------------------------------------------------------------------------------
# Encoding


def fill_in_option(question: str, option: str) -> str:
    """RoBERTa's rule for pairing a question with an option (fairseq examples/roberta/preprocess_RACE.py):
    a cloze question ("The author thinks  _  .") gets the option in its blank(s); any other question is
    followed by a space and the option."""
    if "_" in question:
        return question.replace("_", option)
    return f"{question} {option}"


class RaceEncoder:
    """Encodes a question's four options as `<s> question+option </s></s> passage </s>` (RoBERTa's order:
    fairseq's sentence_ranking task puts the option first). The question+option part is cut to
    `max_qa_length` tokens, then the passage keeps what fits in `max_seq_length`.

    Works on a private copy of the tokenizer's `tokenizers` backend with truncation and padding off, so that
    the two budgets are applied exactly, token by token, whatever the shared tokenizer was last set to.
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_seq_length: int = MAX_SEQ_LENGTH,
        max_qa_length: int = MAX_QA_LENGTH,
    ) -> None:
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if not isinstance(backend, Tokenizer):
            raise ValueError(
                f"RACE encoding needs a fast (tokenizers-backed) tokenizer, got {type(tokenizer).__name__}."
            )
        self._backend = Tokenizer.from_str(backend.to_str())
        self._backend.no_truncation()
        self._backend.no_padding()
        special = self._backend.num_special_tokens_to_add(is_pair=True)
        if max_qa_length + special >= max_seq_length:
            raise ValueError(f"max_seq_length {max_seq_length} leaves no room for the passage after "
                             f"{max_qa_length} question+option tokens and {special} special tokens.")
        self.max_seq_length = max_seq_length
        self.max_qa_length = max_qa_length
        self._special = special
        self._with_type_ids = "token_type_ids" in tokenizer.model_input_names

    def encode(self, article: str, question: str, options: Sequence[str]) -> dict[str, list[list[int]]]:
        """Model inputs for one question: each key holds one list of ids per option."""
        # fairseq's preprocessing joins the passage's lines with spaces.
        passage = self._backend.encode(article.replace("\n", " "), add_special_tokens=False)
        encoded: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": []}
        if self._with_type_ids:
            encoded["token_type_ids"] = []
        for option in options:
            qa = self._backend.encode(fill_in_option(question, option), add_special_tokens=False)
            qa.truncate(self.max_qa_length)
            kept = copy.deepcopy(passage)
            kept.truncate(self.max_seq_length - len(qa.ids) - self._special)
            pair = self._backend.post_process(qa, kept, add_special_tokens=True)
            encoded["input_ids"].append(pair.ids)
            encoded["attention_mask"].append(pair.attention_mask)
            if self._with_type_ids:
                encoded["token_type_ids"].append(pair.type_ids)
        return encoded

    def encode_batch(self, batch: Mapping[str, list]) -> dict[str, list]:
        """For `Dataset.map(..., batched=True)`."""
        encoded = [self.encode(a, q, o) for a, q, o in zip(batch["article"], batch["question"], batch["options"])]
        return {key: [example[key] for example in encoded] for key in encoded[0]} if encoded else {}


def encode_race(
    dataset: Dataset,
    tokenizer: PreTrainedTokenizerBase,
    max_seq_length: int = MAX_SEQ_LENGTH,
    max_qa_length: int = MAX_QA_LENGTH,
) -> Dataset:
    """The model's inputs ([4, length] per question) and `label`; the text columns are dropped."""
    encoder = RaceEncoder(tokenizer, max_seq_length, max_qa_length)
    text_columns = [column for column in dataset.column_names if column != "label"]
    return dataset.map(encoder.encode_batch, batched=True, remove_columns=text_columns, desc="Tokenizing")


# ---------------------------------------------------------------------------------------------------------
# Results


def race_metrics(
    predictions: Sequence[int], labels: Sequence[int], levels: Sequence[str] | None = None
) -> dict[str, float]:
    """Accuracy over all questions and, when `levels` holds both school levels, for middle and high apart
    (RACE results are reported that way: RoBERTa Table 7)."""
    metrics = {"accuracy": accuracy(predictions, labels)}
    if levels is None:
        return metrics
    predictions, labels, levels = np.asarray(predictions), np.asarray(labels), np.asarray(levels)
    if levels.shape != labels.shape:
        raise ValueError(f"{len(levels)} levels for {len(labels)} labels.")
    if all(np.any(levels == level) for level in RACE_CONFIGS["all"]):
        for level in RACE_CONFIGS["all"]:
            chosen = levels == level
            metrics[f"accuracy_{level}"] = accuracy(predictions[chosen], labels[chosen])
    return metrics


def race_compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
    """The Trainer's `compute_metrics`: accuracy of the highest-scoring option."""
    return race_metrics(np.argmax(eval_prediction.predictions, axis=-1), eval_prediction.label_ids)


def write_race_predictions(path: str | Path, dataset: Dataset, logits: np.ndarray) -> None:
    """One JSON line per question: its ids, the predicted and the true answer letter and the softmax over
    the four options."""
    if len(dataset) != len(logits):
        raise ValueError(f"{len(logits)} predictions for {len(dataset)} questions.")
    # The prediction is the argmax of the logits, as in the metrics: near-equal logits can round to equal
    # probabilities, whose argmax would then break the tie differently.
    predictions = np.argmax(logits, axis=-1)
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    probabilities = shifted / shifted.sum(axis=-1, keepdims=True)
    columns = dataset.select_columns(["example_id", "question_index", "level", "label"])
    with open(path, "w", encoding="utf-8") as file:
        for row, prediction, probs in zip(columns, predictions, probabilities):
            line = {
                "example_id": row["example_id"],
                "question_index": row["question_index"],
                "level": row["level"],
                "prediction": ANSWER_LETTERS[int(prediction)],
                "answer": ANSWER_LETTERS[row["label"]],
                "probabilities": [round(float(p), 4) for p in probs],
            }
            file.write(json.dumps(line) + "\n")
