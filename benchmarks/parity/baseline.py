"""The transformers side of the fine-tuning parity benchmark (benchmarks/PARITY.md): the stock Auto task heads and
Trainer, with the pre- and post-processing of transformers' example scripts written out here, independently of
spanroberta (only the shared data and metric formulas of parity_tasks are used):

- SQuAD follows examples/pytorch/question-answering/run_qa.py (`prepare_train_features`,
  `prepare_validation_features`) and utils_qa.py (`postprocess_qa_predictions`, v1.1: n-best 20, answers of at
  most 30 tokens);
- SST-2, MRPC and RTE follow examples/pytorch/text-classification/run_glue.py run with `--pad_to_max_length
  False` (its `task_to_keys` columns, labels from the training file, padding by `DataCollatorWithPadding`); its
  tokenizer call (`truncation=True, max_length=max_seq_length`) is the same call run_glue.py of this project
  makes, so for GLUE the comparison checks the model, training and evaluation path, not the tokenization;
- RACE follows examples/pytorch/multiple-choice/run_swag.py's `preprocess_function` with RACE's columns (the
  passage as SWAG's context, "question option" as its header and ending) and `DataCollatorForMultipleChoice`.

The spanroberta side (parity/finetuning.py) calls the project's run_squad.py, run_glue.py and run_race.py.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset
from transformers import (AutoConfig, AutoModelForMultipleChoice, AutoModelForQuestionAnswering,
                          AutoModelForSequenceClassification, AutoTokenizer, DataCollatorForMultipleChoice,
                          DataCollatorWithPadding, EvalPrediction, Trainer, TrainingArguments, set_seed)  # fmt: skip

from benchmarks.common import CHECKPOINT, squad_v1_scores
from benchmarks.parity.common import Outcome, TaskSize, accuracy, binary_f1, read_rows

# run_glue.py's task_to_keys: the text columns of each GLUE task the benchmark runs.
GLUE_COLUMNS = {"sst2": ("sentence",), "mrpc": ("sentence1", "sentence2"), "rte": ("sentence1", "sentence2")}


def qa_tokenize(tokenizer: Any, examples: dict[str, list], size: TaskSize) -> Any:
    """run_qa.py: questions without leading spaces, question first, only the context truncated, overlapping
    windows of the context (stride = shared tokens)."""
    questions = [question.lstrip() for question in examples["question"]]
    return tokenizer(questions, examples["context"], truncation="only_second",
                     max_length=min(size.max_seq_length, tokenizer.model_max_length), stride=size.doc_stride,
                     return_overflowing_tokens=True, return_offsets_mapping=True, padding=False)  # fmt: skip


def qa_train_features(examples: dict[str, list], tokenizer: Any, size: TaskSize) -> dict[str, list]:
    """run_qa.py's prepare_train_features: the first answer's token span, or the [CLS] position when the
    window does not hold the whole answer."""
    tokenized = qa_tokenize(tokenizer, examples, size)
    sample_mapping = tokenized.pop("overflow_to_sample_mapping")
    offset_mapping = tokenized.pop("offset_mapping")
    tokenized["start_positions"], tokenized["end_positions"] = [], []
    for i, offsets in enumerate(offset_mapping):
        input_ids = tokenized["input_ids"][i]
        cls_index = input_ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in input_ids else 0
        sequence_ids = tokenized.sequence_ids(i)
        answers = examples["answers"][sample_mapping[i]]
        start_char = answers["answer_start"][0]
        end_char = start_char + len(answers["text"][0])
        token_start = 0
        while sequence_ids[token_start] != 1:
            token_start += 1
        token_end = len(input_ids) - 1
        while sequence_ids[token_end] != 1:
            token_end -= 1
        if not (offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char):
            tokenized["start_positions"].append(cls_index)
            tokenized["end_positions"].append(cls_index)
            continue
        while token_start < len(offsets) and offsets[token_start][0] <= start_char:
            token_start += 1
        tokenized["start_positions"].append(token_start - 1)
        while offsets[token_end][1] >= end_char:
            token_end -= 1
        tokenized["end_positions"].append(token_end + 1)
    return tokenized


def qa_eval_features(examples: dict[str, list], tokenizer: Any, size: TaskSize) -> dict[str, list]:
    """run_qa.py's prepare_validation_features: each window's example id, and offsets only on context tokens."""
    tokenized = qa_tokenize(tokenizer, examples, size)
    sample_mapping = tokenized.pop("overflow_to_sample_mapping")
    tokenized["example_id"] = []
    for i in range(len(tokenized["input_ids"])):
        sequence_ids = tokenized.sequence_ids(i)
        tokenized["example_id"].append(examples["id"][sample_mapping[i]])
        tokenized["offset_mapping"][i] = [offset if sequence_ids[k] == 1 else None
                                          for k, offset in enumerate(tokenized["offset_mapping"][i])]  # fmt: skip
    return tokenized


def qa_postprocess(examples: Dataset, features: Dataset, start_logits: np.ndarray, end_logits: np.ndarray,
                   n_best_size: int = 20, max_answer_length: int = 30) -> dict[str, str]:  # fmt: skip
    """utils_qa.py's postprocess_qa_predictions (v1.1): per window, the n_best_size best starts x best ends that
    are context tokens, in order, at most max_answer_length long; the best score over the windows wins."""
    windows = collections.defaultdict(list)
    for index, example_id in enumerate(features["example_id"]):
        windows[example_id].append(index)
    offset_mappings = features["offset_mapping"]
    predictions = {}
    for example in examples:
        candidates = []
        for index in windows[example["id"]]:
            offsets, starts, ends = offset_mappings[index], start_logits[index], end_logits[index]
            for start in np.argsort(starts)[-1 : -n_best_size - 1 : -1].tolist():
                for end in np.argsort(ends)[-1 : -n_best_size - 1 : -1].tolist():
                    if start >= len(offsets) or end >= len(offsets) or offsets[start] is None or offsets[end] is None:
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    candidates.append((starts[start] + ends[end], offsets[start][0], offsets[end][1]))
        best = max(candidates, default=None)
        predictions[example["id"]] = example["context"][best[1] : best[2]] if best else "empty"
    return predictions


def glue_features(tokenizer: Any, rows: list[dict], columns: Sequence[str], size: TaskSize) -> Dataset:
    """run_glue.py: the sentence (pair) truncated to max_seq_length, padded later by the collator."""
    dataset = Dataset.from_list(rows)

    def encode(batch: dict[str, list]) -> Any:
        return tokenizer(*(batch[column] for column in columns), truncation=True, max_length=size.max_seq_length)

    return dataset.map(encode, batched=True, remove_columns=[c for c in dataset.column_names if c != "label"])


def race_features(tokenizer: Any, rows: list[dict], size: TaskSize) -> Dataset:
    """run_swag.py's preprocess_function with RACE's columns: the passage (SWAG's context) paired with
    "question option" (SWAG's header and ending) for each option, `truncation=True` (longest first)."""

    def encode(batch: dict[str, list]) -> dict[str, list]:
        first = list(chain(*[[article] * 4 for article in batch["article"]]))
        second = list(chain(*[[f"{question} {option}" for option in options]
                              for question, options in zip(batch["question"], batch["options"])]))  # fmt: skip
        tokenized = tokenizer(first, second, truncation=True, max_length=size.max_seq_length)
        encoded = {key: [values[i : i + 4] for i in range(0, len(values), 4)] for key, values in tokenized.items()}
        return {**encoded, "label": ["ABCD".index(answer) for answer in batch["answer"]]}

    dataset = Dataset.from_list(rows)
    return dataset.map(encode, batched=True, remove_columns=dataset.column_names)


def baseline_trainer(
    model: Any, tokenizer: Any, hp: dict, out: Path, train: Dataset, collator: Any,
    compute_metrics: Callable | None = None, eval_dataset: Dataset | None = None,
) -> Trainer:  # fmt: skip
    args = TrainingArguments(output_dir=str(out), **hp)
    return Trainer(model=model, args=args, train_dataset=train, eval_dataset=eval_dataset, processing_class=tokenizer,
                   data_collator=collator, compute_metrics=compute_metrics)  # fmt: skip


def train_baseline(trainer: Trainer) -> tuple[float, int, float]:
    result = trainer.train()
    trainer.save_model()  # as the example scripts do, so both sides pay for writing the model
    return result.training_loss, trainer.state.global_step, result.metrics["train_runtime"]


def baseline_squad(files: dict[str, Path], size: TaskSize, hp: dict, out: Path) -> Outcome:
    set_seed(hp["seed"])  # run_qa.py seeds before the model is built, so the new head is seeded too
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    model = AutoModelForQuestionAnswering.from_pretrained(CHECKPOINT)
    train, examples = (Dataset.from_list(read_rows(files[s])) for s in ("train", "validation"))
    train = train.map(qa_train_features, batched=True, remove_columns=train.column_names,
                      fn_kwargs={"tokenizer": tokenizer, "size": size})  # fmt: skip
    features = examples.map(qa_eval_features, batched=True, remove_columns=examples.column_names,
                            fn_kwargs={"tokenizer": tokenizer, "size": size})  # fmt: skip
    trainer = baseline_trainer(model, tokenizer, hp, out, train, DataCollatorWithPadding(tokenizer))
    loss, steps, seconds = train_baseline(trainer)
    logits = trainer.predict(features.remove_columns(["example_id", "offset_mapping"])).predictions
    predictions = qa_postprocess(examples, features, logits[0], logits[1])
    gold = {example["id"]: example["answers"]["text"] for example in examples}
    return Outcome(squad_v1_scores(gold, predictions), loss, steps, seconds, extra={"train_features": len(train)})


def baseline_classification(task: str, files: dict[str, Path], size: TaskSize, hp: dict, out: Path) -> Outcome:
    """run_glue.py (a GLUE task) or run_swag.py (RACE)."""
    set_seed(hp["seed"])
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    train_rows, eval_rows = read_rows(files["train"]), read_rows(files["validation"])
    if task == "race":
        model = AutoModelForMultipleChoice.from_pretrained(CHECKPOINT)
        train, evaluation = (race_features(tokenizer, rows, size) for rows in (train_rows, eval_rows))
        collator = DataCollatorForMultipleChoice(tokenizer)
    else:
        # run_glue.py with local files: the labels are the training file's distinct values, sorted.
        labels = sorted({row["label"] for row in train_rows})
        config = AutoConfig.from_pretrained(CHECKPOINT, num_labels=len(labels), finetuning_task=task)
        model = AutoModelForSequenceClassification.from_pretrained(CHECKPOINT, config=config)
        train, evaluation = (glue_features(tokenizer, rows, GLUE_COLUMNS[task], size)
                             for rows in (train_rows, eval_rows))  # fmt: skip
        collator = DataCollatorWithPadding(tokenizer)

    def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
        predicted = np.argmax(prediction.predictions, axis=-1)
        scores = {"accuracy": accuracy(predicted, prediction.label_ids)}
        return {**scores, "f1": binary_f1(predicted, prediction.label_ids)} if task == "mrpc" else scores

    trainer = baseline_trainer(model, tokenizer, hp, out, train, collator, compute_metrics, evaluation)
    loss, steps, seconds = train_baseline(trainer)
    metrics = {key.removeprefix("eval_"): value for key, value in trainer.evaluate().items()
               if key.removeprefix("eval_") in ("accuracy", "f1")}  # fmt: skip
    return Outcome(metrics, loss, steps, seconds)
