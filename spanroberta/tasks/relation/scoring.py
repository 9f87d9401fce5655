"""The official scores of relation classification, as pure functions of the gold and predicted label strings.

- TACRED (Zhang et al. 2017, `score()` in the dataset's scorer, tacred/utils/scorer.py): micro-averaged precision,
  recall and F1 over every relation but the negative one (`no_relation`). A prediction of the negative label is no
  guess; a gold negative is nothing to find.
- SemEval-2010 Task 8 (the official semeval2010_task8_scorer-v1.2.pl): "(9+1)-way classification with
  directionality taken into account", the macro average over the relations of the answer key, Other excluded, of
  each relation's F1, where a relation is a label without its direction suffix "(e1,e2)"/"(e2,e1)" and a
  prediction of the right relation in the wrong direction counts as a guess of that relation that is wrong.

Both return fractions (the scorers print percentages) and the plain accuracy over every label.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

# SemEval-2010 Task 8's direction suffix: Cause-Effect(e2,e1) is the relation Cause-Effect, e2 -> e1.
_DIRECTION = re.compile(r"\(e[12],e[12]\)$")


def accuracy(predictions: Sequence[str], references: Sequence[str]) -> float:
    """The fraction of predictions equal to their gold label, the negative label included."""
    _check(predictions, references)
    return sum(p == g for p, g in zip(predictions, references)) / len(references)


def tacred_score(
    predictions: Sequence[str], references: Sequence[str], negative_label: str = "no_relation"
) -> dict[str, float]:
    """TACRED's micro precision, recall and F1 (keys precision, recall, f1), computed as its official `score()`:
    precision is 1 when nothing but the negative label is predicted and recall 0 when no gold label is positive,
    F1 0 when both are 0."""
    _check(predictions, references)
    correct = guessed = gold = 0
    for guess, answer in zip(predictions, references):
        guessed += guess != negative_label
        gold += answer != negative_label
        correct += guess == answer != negative_label
    precision = correct / guessed if guessed else 1.0
    recall = correct / gold if gold else 0.0
    return {"precision": precision, "recall": recall, "f1": _f1(precision, recall),
            "accuracy": accuracy(predictions, references)}


def relation_type(label: str) -> str:
    """A SemEval label without its direction: "Cause-Effect(e2,e1)" -> "Cause-Effect"."""
    return _DIRECTION.sub("", label)


def semeval_score(
    predictions: Sequence[str], references: Sequence[str], negative_label: str = "Other"
) -> dict[str, float]:
    """SemEval-2010 Task 8's official score: macro-averaged precision, recall and F1 (keys precision, recall, f1)
    over the relations (direction removed) of the gold labels, `negative_label` excluded, as the official scorer's
    (9+1)-way evaluation with directionality. For a relation R:
    - correct: predictions equal to their gold label, R in either direction;
    - guessed: predictions of R in any direction (a wrong direction of a gold R counts here, and is not correct);
    - gold: gold labels of R in any direction;
    P = correct / guessed (0 when nothing was guessed), R = correct / gold, F1 = 2PR / (P + R) (0 when P + R = 0);
    the macro averages divide by the number of relations in the gold labels, as the scorer does."""
    _check(predictions, references)
    correct, guessed, gold = Counter(), Counter(), Counter()
    for guess, answer in zip(predictions, references):
        guessed[relation_type(guess)] += 1
        gold[relation_type(answer)] += 1
        correct[relation_type(answer)] += guess == answer
    relations = sorted(set(gold) - {relation_type(negative_label)})
    if not relations:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0, "accuracy": accuracy(predictions, references)}
    precisions = [correct[r] / guessed[r] if guessed[r] else 0.0 for r in relations]
    recalls = [correct[r] / gold[r] for r in relations]
    f1s = [_f1(p, r) for p, r in zip(precisions, recalls)]
    return {
        "precision": sum(precisions) / len(relations),
        "recall": sum(recalls) / len(relations),
        "f1": sum(f1s) / len(relations),
        "accuracy": accuracy(predictions, references),
    }


SCORERS = {"tacred": tacred_score, "semeval": semeval_score}


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def _check(predictions: Sequence[str], references: Sequence[str]) -> None:
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions for {len(references)} gold labels.")
    if not references:
        raise ValueError("There are no predictions to score.")
