#!/usr/bin/env python
"""The share of each evaluated input the model reads, per row of the task benchmark at a size: each task's
evaluation data is prepared as the task benchmark prepares it (tasks/preparation.py) and encoded by the task's own
feature code with the size's budget, and again with a budget long enough to keep every token; the share of an input
is the passage tokens the budget's features hold over the passage tokens of the input. No model is run: it is
tokenization only. The record (`task-coverage`, under benchmarks/results/) holds, per row, the mean and the least
share over the evaluated inputs, which the task table shows beside the score.

    nice python -m benchmarks.tasks.coverage             # the cpu size
    python -m benchmarks.tables.generate                 # the tables, against the newest coverage record

What each row counts as its passage: SQuAD v1.1, v2.0 and MRQA, the context, over all of a question's windows
(`prepare_eval_features`); RACE, the article, in each option's input (`RaceEncoder`), a question's share the mean
over its four options; GLUE, both sentences of the pair (`tokenize_glue`); SemEval, the marked sentence
(`encode_relations`, which keeps a window around both entities); LitBank and GAP, the document's subwords over its
segments (`encode_document`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from benchmarks.common import CHECKPOINT, DATA
from benchmarks.tasks.catalog import SIZES, TASKS
from benchmarks.tasks.preparation import Budget, evaluated_examples
from benchmarks.tasks.rows import COVERAGE_BENCHMARK
from spanroberta.records import start_run, write_record
from spanroberta.tasks.coreference.data import encode_document
from spanroberta.tasks.coreference.documents import read_coref_documents
from spanroberta.tasks.coreference.gap import read_gap
from spanroberta.tasks.glue.data import get_glue_task, tokenize_glue
from spanroberta.tasks.race.data import RaceEncoder, read_race_jsonl
from spanroberta.tasks.relation.data import add_entity_markers, encode_relations, read_relation_file
from spanroberta.tasks.squad.features import prepare_eval_features
from spanroberta.tasks.squad.reading import load_squad_splits
from spanroberta.tasks.squad.task import SquadArguments

# A length no evaluated input reaches: the features built with it keep every token of the input.
WHOLE = 1_000_000
# run_squad.py's and run_relation.py's defaults where a budget names none.
SQUAD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(SquadArguments)}
RELATION_ENCODING = "entity_markers"


def _flag(flags: list[str], name: str) -> list[str]:
    """The values a script's flag takes in the prepared flags (several for RACE's files)."""
    if name not in flags:
        return []
    start = flags.index(name) + 1
    end = next((i for i in range(start, len(flags)) if flags[i].startswith("--")), len(flags))
    return flags[start:end]


def squad_shares(flags: list[str], budget: Budget, tokenizer: PreTrainedTokenizerBase) -> dict[str, list[float]]:
    """Per question, the share of its context's tokens that any of its windows holds."""
    limit = _flag(flags, "--max_eval_samples")
    examples = load_squad_splits(files={"validation": _flag(flags, "--validation_file")[0]}, splits=["validation"],
                                 version_2_with_negative="--version_2_with_negative" in flags,
                                 max_samples={"validation": int(limit[0]) if limit else None})["validation"].examples
    batch = examples.to_dict()
    stride = budget.options.get("doc_stride", SQUAD_DEFAULTS["doc_stride"])
    query = budget.options.get("max_query_length", SQUAD_DEFAULTS["max_query_length"])
    kept, whole = (prepare_eval_features(batch, tokenizer, length, stride, query) for length in (budget.length, WHOLE))
    held: dict[str, set] = {}
    for example_id, offsets in zip(kept["example_id"], kept["offset_mapping"]):
        held.setdefault(example_id, set()).update(tuple(offset) for offset in offsets if offset is not None)
    totals = {example_id: sum(offset is not None for offset in offsets)
              for example_id, offsets in zip(whole["example_id"], whole["offset_mapping"])}  # fmt: skip
    return {"context": [len(held.get(example_id, ())) / totals[example_id] for example_id in batch["id"]]}


def race_shares(flags: list[str], budget: Budget, tokenizer: PreTrainedTokenizerBase) -> dict[str, list[float]]:
    """Per level and question, the mean over its options of the share of the article's tokens its input holds
    (the article is the input's second segment, less its closing special token)."""
    qa_length = budget.options["max_qa_length"]
    kept, whole = RaceEncoder(tokenizer, budget.length, qa_length), RaceEncoder(tokenizer, WHOLE, qa_length)

    def passage(encoded: dict[str, list[list[int]]]) -> list[int]:
        return [sum(types) - 1 for types in encoded["token_type_ids"]]

    shares: dict[str, list[float]] = {}
    for path in _flag(flags, "--validation_file"):
        level = Path(path).stem.split("-")[1]  # race-<level>-reporting.jsonl (preparation.prepare_race)
        for row in read_race_jsonl(Path(path)):
            ours, all_of_it = (passage(encoder.encode(row["article"], row["question"], row["options"]))
                               for encoder in (kept, whole))  # fmt: skip
            shares.setdefault(level, []).append(statistics.fmean(a / b for a, b in zip(ours, all_of_it)))
    return shares


def glue_shares(name: str) -> Callable[[list[str], Budget, PreTrainedTokenizerBase], dict[str, list[float]]]:
    def shares(flags: list[str], budget: Budget, tokenizer: PreTrainedTokenizerBase) -> dict[str, list[float]]:
        """Per example, the share of its sentences' tokens (both of a pair) the truncated input holds."""
        task = get_glue_task(name)
        rows = Dataset.from_json(_flag(flags, "--validation_file")[0])
        special = tokenizer.num_special_tokens_to_add(pair=len(task.text_columns) > 1)
        kept, whole = (tokenize_glue(DatasetDict(validation=rows), tokenizer, task, length)["validation"]["input_ids"]
                       for length in (budget.length, WHOLE))  # fmt: skip
        return {"sentences": [(len(a) - special) / (len(b) - special) for a, b in zip(kept, whole)]}

    return shares


def semeval_shares(flags: list[str], budget: Budget, tokenizer: PreTrainedTokenizerBase) -> dict[str, list[float]]:
    """Per sentence, the share of its marked tokens the window around its entities keeps."""
    examples = read_relation_file(_flag(flags, "--validation_file")[0])
    encoding = budget.options.get("entity_markers", RELATION_ENCODING)
    add_entity_markers(tokenizer, examples, encoding)
    special = tokenizer.num_special_tokens_to_add()
    kept, whole = (encode_relations(examples, tokenizer, encoding, length)["input_ids"]
                   for length in (budget.length, WHOLE))  # fmt: skip
    return {"sentence": [(len(a) - special) / (len(b) - special) for a, b in zip(kept, whole)]}


def coref_shares(flags: list[str], budget: Budget, tokenizer: PreTrainedTokenizerBase) -> dict[str, list[float]]:
    """Per LitBank document and GAP example, the share of its subwords its segments hold."""
    start, _, end = _flag(flags, "--eval_documents")[0].partition(":")
    documents = read_coref_documents(_flag(flags, "--validation_file")[0])[int(start):int(end) if end else None]
    gap = [example.document for example in read_gap(Path(_flag(flags, "--gap_file")[0]))]

    def share(document) -> float:
        features = encode_document(document, tokenizer, budget.length)
        return sum(map(sum, features["content_mask"])) / len(features["word_map"])

    return {"LitBank": [share(document) for document in documents], "GAP": [share(document) for document in gap]}


# Per task: its shares by part, and which row each part gives (a task of one row: its only row).
SHARES = {"squad": squad_shares, "squad_v2": squad_shares, "mrqa": squad_shares, "race": race_shares,
          "semeval": semeval_shares, "coref": coref_shares,
          **{name: glue_shares(name) for name in ("cola", "sst2", "mrpc", "stsb", "rte")}}  # fmt: skip
PASSAGE = {"squad": "context", "squad_v2": "context", "mrqa": "context", "race": "article", "semeval": "sentence",
           "coref": "document", **dict.fromkeys(("cola", "sst2", "mrpc", "stsb", "rte"), "sentences")}  # fmt: skip


def row_label(task: str, part: str) -> str:
    """The row a part of a task's shares gives: RACE's level, coreference's row by name, else the task's one row."""
    rows = TASKS[task].rows
    return rows[0].label if len(rows) == 1 else next(row.label for row in rows if row.label.endswith(part))


def task_coverage(size: str, name: str, work: Path, tokenizer: PreTrainedTokenizerBase) -> dict[str, Any]:
    """One task's entry of the record: its budget, the examples it evaluates, and per row the share's mean and
    least over the evaluated inputs, and how many inputs there are."""
    budget = SIZES[size].budgets[name]
    folder = work / size / name
    folder.mkdir(parents=True)
    start = time.perf_counter()
    prepared = TASKS[name].prepare(folder, budget)
    rows = {row_label(name, part): {"passage": PASSAGE[name], "mean": statistics.fmean(shares), "least": min(shares),
                                    "inputs": len(shares)}
            for part, shares in SHARES[name](prepared.flags, budget, tokenizer).items()}  # fmt: skip
    print(f"{size} {name}: " + ", ".join(f"{label} {100 * row['mean']:.1f}% (least {100 * row['least']:.1f}%)"
                                         for label, row in rows.items()), flush=True)  # fmt: skip
    return {"size": size, "task": name, "budget": budget.as_record(),
            "evaluated": evaluated_examples(budget.as_record()), "rows": rows, "seconds": time.perf_counter() - start}


def main(args: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), default=["cpu"])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), help="Default: every task.")
    parser.add_argument("--model", type=Path, default=CHECKPOINT, help="The checkpoint whose tokenizer encodes.")
    parser.add_argument("--records_dir", type=Path, help="Default: benchmarks/results (or $SPANROBERTA_RECORDS_DIR).")
    options = parser.parse_args(args)
    started = start_run()
    if not (DATA / "squad" / "dev-v1.1.json").is_file():
        raise SystemExit(f"The coverage is measured on the shared data in {DATA}, which is absent on this machine.")
    tasks = options.tasks or list(TASKS)
    with tempfile.TemporaryDirectory(prefix="task-coverage-") as folder:
        entries = [task_coverage(size, name, Path(folder), AutoTokenizer.from_pretrained(options.model))
                   for size in options.sizes for name in tasks]  # fmt: skip
    path = write_record(COVERAGE_BENCHMARK, {"sizes": options.sizes, "tasks": tasks, "tokenizer": options.model.name},
                        {"coverage": entries}, started=started, results_dir=options.records_dir, name="coverage")
    print(f"-> {path}")
    return path


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
