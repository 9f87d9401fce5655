"""Per-example outcomes of a task benchmark unit (tasks/scores.py): what its script's evaluation wrote for each
evaluated example beside its scores (`Report.outcomes_file`: eval_outcomes.json, gap_outcomes.json; see
spanroberta.finetuning.task's `save_outcomes`), kept in the unit's record in a compact form that scores the row
again on any resample of the evaluation examples (benchmarks/statistics.py's bootstrap), each with the project's own scorer:

- GLUE: the predicted and the gold labels (STS-B: scores), scored by the GLUE metric of the row (accuracy, F1,
  Matthews correlation, Spearman correlation);
- relation extraction: the predicted and the gold relations, scored by the official scorer the run used
  (SemEval-2010 Task 8's macro F1, TACRED's micro F1);
- SQuAD v1.1, v2.0 and MRQA, and RACE: each question's F1 (exact match) or whether it was answered right, the
  row's score being their mean;
- coreference: each document's MUC, B-cubed and CEAF-phi4 sums, which the CoNLL scorer adds up over documents
  before it divides, so the example a resample draws is a document, as in the scorer;
- GAP: each example's predicted and gold A-coref and B-coref, scored by GAP's overall F1.

A unit's outcomes must score its row as its script did (`check_outcomes`), so that a record never holds outcomes
that describe another score.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.tasks.catalog import Task
from spanroberta.finetuning.task import MEAN
from spanroberta.tasks.coreference.gap_scoring import GAP, GapDecision, gap_scores
from spanroberta.tasks.coreference.scoring import CONLL, METRICS as COREF_METRICS, Counts, scores_of_counts
from spanroberta.tasks.glue.scoring import METRICS
from spanroberta.tasks.relation.scoring import SCORERS as RELATION_SCORERS

# How far (0-100) a score recomputed from the outcomes may lie from the script's: the outcomes round
# nothing, so only the float arithmetic of another summation order differs.
RESCORE_TOLERANCE = 1e-6


def _per_example(outcomes: dict[str, Any]) -> dict[str, Any]:
    """The outcomes' per-example lists (every field but the scorer's name), one entry an evaluated example."""
    return {name: value for name, value in outcomes.items() if name != "scorer"}


def outcome_count(outcomes: dict[str, Any]) -> int:
    """How many evaluation examples the outcomes hold."""
    return len(next(iter(_per_example(outcomes).values())))


def resampled(outcomes: dict[str, Any], indices: Sequence[int] | np.ndarray) -> dict[str, Any]:
    """The outcomes of the examples at `indices` (with repeats: a bootstrap resample)."""
    pick = np.asarray(indices)
    return {"scorer": outcomes["scorer"],
            **{name: np.asarray(value)[pick] for name, value in _per_example(outcomes).items()}}  # fmt: skip


def outcome_score(outcomes: dict[str, Any]) -> float:
    """The row's score (0-100) from its outcomes, by the project's scorer the outcomes name."""
    scorer = outcomes["scorer"]
    if scorer == MEAN:
        return 100 * float(np.mean(outcomes["values"]))
    if scorer == CONLL:  # [document, metric, (recall numerator, denominator, precision numerator, denominator)]
        summed = np.asarray(outcomes["counts"], dtype=float).sum(axis=0)
        return 100 * scores_of_counts({name: Counts(*summed[i]) for i, name in enumerate(COREF_METRICS)})["conll_f1"]
    predictions, references = outcomes["predictions"], outcomes["references"]
    if scorer == GAP:  # [example, (A-coref, B-coref)]
        decisions = (GapDecision("", *gold, *predicted) for predicted, gold in zip(predictions, references))
        return 100 * gap_scores(decisions)["overall_f1"]
    if scorer in RELATION_SCORERS:
        return 100 * RELATION_SCORERS[scorer](list(predictions), list(references))["f1"]
    return 100 * METRICS[scorer](predictions, references)


def unit_outcomes(task: Task, output: Path) -> dict[str, dict[str, Any]]:
    """Per row label, the outcomes of a finished unit, as its script wrote them in `output` for the row's score."""
    outcomes = {}
    for row in task.rows:
        path = output / row.report.outcomes_file
        written = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        if row.metric not in written:
            raise SystemExit(f"{task.script} wrote no outcomes of {row.metric} to {path}: its task's evaluation "
                             "writes each score's per-example outcomes (spanroberta.finetuning.task.save_outcomes).")
        outcomes[row.label] = written[row.metric]
    return outcomes


def check_outcomes(label: str, outcomes: dict[str, Any], score: float) -> None:
    """Stops the benchmark where the outcomes do not give the row's score (0-100) as the script computed it (an
    undefined score, as STS-B's Spearman correlation of constant predictions, only by an undefined one)."""
    rescored = outcome_score(outcomes)
    if not (abs(rescored - score) <= RESCORE_TOLERANCE or math.isnan(rescored) and math.isnan(score)):
        raise SystemExit(f"The per-example outcomes of {label} score {rescored!r}, its script {score!r}: "
                         "the task writes outcomes that score otherwise than its evaluation.")  # fmt: skip
