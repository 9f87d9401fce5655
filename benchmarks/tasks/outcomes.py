"""Per-example outcomes of a task benchmark unit (tasks/scores.py): what its script wrote for each evaluation example
at --do_eval, kept in the unit's record in a compact form that scores the row again on any resample of the
evaluation examples (benchmarks/statistics.py's bootstrap), each with the project's own scorer:

- GLUE (run_glue.py's eval_predictions.jsonl): the predicted and the gold labels (STS-B: scores), scored by
  spanroberta.metrics.glue's metric of the row (accuracy, F1, Matthews correlation, Spearman correlation);
- SemEval (run_relation.py's eval_predictions.jsonl): the predicted and the gold relations, scored by
  spanroberta.metrics.relation.semeval_score's macro F1;
- SQuAD v1.1, v2.0 and MRQA (run_squad.py's predictions.json against the evaluated questions' gold answers): each
  question's F1 as the official script scores it (spanroberta.metrics.squad: v2.0's no-answer handled as
  evaluate-v2.0.py does), the row's score being their mean;
- RACE (run_race.py's eval_predictions.jsonl): whether each question of the row's level was answered right;
- LitBank (run_coref.py's eval_predictions.conll against the evaluated documents' gold clusters): each document's
  MUC, B-cubed and CEAF-phi4 sums, which the CoNLL scorer adds up over documents before it divides
  (spanroberta.metrics.coreference), so the example a resample draws is a document, as in the scorer;
- GAP (run_coref.py's gap_predictions.tsv against the GAP file's gold): each example's predicted and gold A-coref
  and B-coref, scored by spanroberta.metrics.gap's overall F1.

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

from benchmarks.tasks.catalog import Row, Task
from benchmarks.tasks.preparation import Prepared
from spanroberta.finetuning.coreference_task import select_documents
from spanroberta.metrics.coreference import METRICS as COREF_METRICS, Counts, document_counts, scores_of_counts
from spanroberta.metrics.gap import GapDecision, gap_scores
from spanroberta.metrics.glue import METRICS
from spanroberta.metrics.relation import semeval_score
from spanroberta.metrics.squad import squad_v1_question_scores, squad_v2_question_scores
from spanroberta.task_data.coreference import read_coref_documents, read_gap
from spanroberta.task_data.gap import read_gap_predictions
from spanroberta.task_data.squad.reading import load_squad_splits

# How far (0-100) a score recomputed from the outcomes may lie from the script's: the predictions files round
# nothing, so only the float arithmetic of another summation order differs.
RESCORE_TOLERANCE = 1e-6
MEAN = "mean"  # the scorer of outcomes that are per-example values (0-1) whose mean is the score
CONLL = "conll"  # per-document sums of the coreference metrics, whose CoNLL F1 over their totals is the score
GAP = "gap"  # per-example A-coref and B-coref decisions, scored by GAP's overall F1


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
    if scorer == "semeval":
        return 100 * semeval_score(list(predictions), list(references))["f1"]
    return 100 * METRICS[scorer](predictions, references)


def unit_outcomes(task: Task, prepared: Prepared, output: Path) -> dict[str, dict[str, Any]]:
    """Per row label, the outcomes of a finished unit read from its script's files in `output`."""
    readers = {"run_glue.py": _glue, "run_relation.py": _relation, "run_squad.py": _squad, "run_race.py": _race,
               "run_coref.py": _coref}  # fmt: skip
    return {row.label: readers[task.script](row, prepared, output) for row in task.rows}


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


def _coref(row: Row, prepared: Prepared, output: Path) -> dict[str, Any]:
    """LitBank's per-document sums, or GAP's per-example decisions (the row's metric says which): the gold read as
    run_coref.py read it (its flags), the predictions from the files it wrote."""
    if row.metric == "gap_overall_f1":
        predicted = read_gap_predictions(output / "gap_predictions.tsv")
        examples = read_gap(Path(_flag(prepared.flags, "--gap_file")))
        return {"scorer": GAP, "predictions": [list(predicted[example.example_id]) for example in examples],
                "references": [[example.a_coref, example.b_coref] for example in examples]}  # fmt: skip
    gold = select_documents(read_coref_documents(_flag(prepared.flags, "--validation_file")),
                            _flag(prepared.flags, "--eval_documents"), "eval_documents")  # fmt: skip
    written = read_coref_documents(str(output / f"eval_predictions.{gold[0].layout}"))
    predicted = {document.doc_key: document.clusters for document in written}
    keep_singletons = "--keep_singletons" in prepared.flags
    counts = [document_counts(document.clusters, predicted[document.doc_key], keep_singletons) for document in gold]
    return {"scorer": CONLL, "counts": [[list(document[name].as_tuple()) for name in COREF_METRICS]
                                        for document in counts]}  # fmt: skip
