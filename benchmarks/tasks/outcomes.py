"""Per-example outcomes of a task benchmark unit (tasks/scores.py): what its script wrote for each evaluation example
at --do_eval, kept in the unit's record in a compact form that scores the row again on any resample of the
evaluation examples (tables/noise.py's bootstrap), each with the project's own scorer:

- GLUE (run_glue.py's eval_predictions.jsonl): the predicted and the gold labels (STS-B: scores), scored by
  spanroberta.metrics.glue's metric of the row (accuracy, F1, Matthews correlation, Spearman correlation);
- SemEval (run_relation.py's eval_predictions.jsonl): the predicted and the gold relations, scored by
  spanroberta.metrics.relation.semeval_score's macro F1;
- SQuAD v1.1, v2.0 and MRQA (run_squad.py's predictions.json against the evaluated questions' gold answers): each
  question's F1 as the official script scores it (spanroberta.metrics.squad: v2.0's no-answer handled as
  evaluate-v2.0.py does), the row's score being their mean;
- RACE (run_race.py's eval_predictions.jsonl): whether each question of the row's level was answered right.

Coreference (run_coref.py) records none: LitBank's CoNLL F1 is a document-level score of 10 documents, and GAP's is
left with it. A unit's outcomes must score its row as its script did (`check_outcomes`), so that a record never holds
outcomes that describe another score.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.tasks.catalog import Prepared, Row, Task
from spanroberta.metrics.glue import METRICS
from spanroberta.metrics.relation import semeval_score
from spanroberta.metrics.squad import squad_v1_question_scores, squad_v2_question_scores
from spanroberta.tasks.squad.reading import load_squad_splits

# How far (0-100) a score recomputed from the outcomes may lie from the script's: the predictions files round
# nothing, so only the float arithmetic of another summation order differs.
RESCORE_TOLERANCE = 1e-6
MEAN = "mean"  # the scorer of outcomes that are per-example values (0-1) whose mean is the score


def outcome_count(outcomes: dict[str, Any]) -> int:
    """How many evaluation examples the outcomes hold."""
    return len(outcomes["values"] if outcomes["scorer"] == MEAN else outcomes["references"])


def resampled(outcomes: dict[str, Any], indices: Sequence[int] | np.ndarray) -> dict[str, Any]:
    """The outcomes of the examples at `indices` (with repeats: a bootstrap resample)."""
    pick = np.asarray(indices)
    if outcomes["scorer"] == MEAN:
        return {"scorer": MEAN, "values": np.asarray(outcomes["values"])[pick]}
    return {"scorer": outcomes["scorer"], "predictions": np.asarray(outcomes["predictions"])[pick],
            "references": np.asarray(outcomes["references"])[pick]}  # fmt: skip


def outcome_score(outcomes: dict[str, Any]) -> float:
    """The row's score (0-100) from its outcomes, by the project's scorer the outcomes name."""
    scorer = outcomes["scorer"]
    if scorer == MEAN:
        return 100 * float(np.mean(outcomes["values"]))
    predictions, references = outcomes["predictions"], outcomes["references"]
    if scorer == "semeval":
        return 100 * semeval_score(list(predictions), list(references))["f1"]
    return 100 * METRICS[scorer](predictions, references)


def unit_outcomes(task: Task, prepared: Prepared, output: Path) -> dict[str, dict[str, Any]]:
    """Per row label, the outcomes of a finished unit read from its script's files in `output`; empty for a task
    whose script writes nothing per evaluated example that scores its rows (coreference)."""
    readers = {"run_glue.py": _glue, "run_relation.py": _relation, "run_squad.py": _squad, "run_race.py": _race}
    reader = readers.get(task.script)
    return {row.label: reader(row, prepared, output) for row in task.rows} if reader else {}


def check_outcomes(label: str, outcomes: dict[str, Any], score: float) -> None:
    """Stops the benchmark where the outcomes do not give the row's score (0-100) as the script computed it (an
    undefined score, as STS-B's Spearman correlation of constant predictions, only by an undefined one)."""
    rescored = outcome_score(outcomes)
    if not (abs(rescored - score) <= RESCORE_TOLERANCE or math.isnan(rescored) and math.isnan(score)):
        raise SystemExit(f"The per-example outcomes of {label} score {rescored!r}, its script {score!r}: "
                         "tasks/outcomes.py reads them otherwise than the script scores them.")  # fmt: skip


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _glue(row: Row, prepared: Prepared, output: Path) -> dict[str, Any]:
    evaluated = _lines(output / "eval_predictions.jsonl")
    return {"scorer": row.metric.removeprefix("eval_"), "predictions": [line["prediction"] for line in evaluated],
            "references": [line["label"] for line in evaluated]}  # fmt: skip


def _relation(row: Row, prepared: Prepared, output: Path) -> dict[str, Any]:
    evaluated = _lines(output / "eval_predictions.jsonl")
    return {"scorer": "semeval", "predictions": [line["predicted"] for line in evaluated],
            "references": [line["gold"] for line in evaluated]}  # fmt: skip


def _race(row: Row, prepared: Prepared, output: Path) -> dict[str, Any]:
    level = row.metric.removeprefix("eval_accuracy_")
    evaluated = [line for line in _lines(output / "eval_predictions.jsonl") if line["level"] == level]
    return {"scorer": MEAN, "values": [int(line["prediction"] == line["answer"]) for line in evaluated]}


def _flag(flags: list[str], name: str) -> str | None:
    return flags[flags.index(name) + 1] if name in flags else None


def _squad(row: Row, prepared: Prepared, output: Path) -> dict[str, Any]:
    """Each evaluated question's F1: the questions read as run_squad.py read them (its flags), scored against
    predictions.json by the official script's rules."""
    version_2 = "--version_2_with_negative" in prepared.flags
    limit = _flag(prepared.flags, "--max_eval_samples")
    split = load_squad_splits(files={"validation": _flag(prepared.flags, "--validation_file")}, splits=["validation"],
                              version_2_with_negative=version_2,
                              max_samples={"validation": int(limit) if limit else None})["validation"]  # fmt: skip
    gold = ({qid: answers for dataset in split.mrqa_gold.values() for qid, answers in dataset.items()}
            if split.mrqa_gold else {example["id"]: example["answers"]["text"] for example in split.examples})
    predictions = json.loads((output / "predictions.json").read_text(encoding="utf-8"))
    scores = squad_v2_question_scores(gold, predictions) if version_2 else squad_v1_question_scores(gold, predictions)
    return {"scorer": MEAN, "values": [f1 for _, f1 in scores.values()]}
