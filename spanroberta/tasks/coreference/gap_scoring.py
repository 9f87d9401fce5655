"""GAP's official scoring (Webster et al. 2018, "Mind the GAP: A Balanced Corpus of Gendered Ambiguous Pronouns",
section 5, and its gap_scorer.py).

Each example makes two binary decisions, whether the pronoun corefers with name A and whether with name B; every
decision counts as a true positive, false positive or false negative (true negatives are not used). Precision,
recall and F1 are computed over all decisions, then over the examples with a masculine pronoun (he, him, his) and
with a feminine one (she, her, hers) alone, and the bias is the feminine F1 over the masculine F1: undefined
(None here, "-" in the official scorecard) when either F1 is 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MASCULINE_PRONOUNS = frozenset({"he", "him", "his"})
FEMININE_PRONOUNS = frozenset({"she", "her", "hers"})


@dataclass(frozen=True)
class GapDecision:
    """One example: its pronoun, the gold A-coref and B-coref, and the predicted ones."""

    pronoun: str
    gold_a: bool
    gold_b: bool
    predicted_a: bool
    predicted_b: bool


# The scorer of outcomes that are per-example A-coref and B-coref decisions, scored by GAP's overall F1.
GAP = "gap"


def gap_outcomes(decisions: Iterable[GapDecision]) -> dict[str, Any]:
    """The per-example outcomes of GAP's decisions: each example's predicted and gold (A-coref, B-coref)."""
    decisions = list(decisions)
    return {"scorer": GAP, "predictions": [[d.predicted_a, d.predicted_b] for d in decisions],
            "references": [[d.gold_a, d.gold_b] for d in decisions]}  # fmt: skip


def _precision_recall_f1(decisions: list[GapDecision]) -> dict[str, float]:
    pairs = [(d.gold_a, d.predicted_a) for d in decisions] + [(d.gold_b, d.predicted_b) for d in decisions]
    true_positives = sum(gold and predicted for gold, predicted in pairs)
    false_positives = sum(predicted and not gold for gold, predicted in pairs)
    false_negatives = sum(gold and not predicted for gold, predicted in pairs)
    precision = true_positives / (true_positives + false_positives) if true_positives + false_positives else 0.0
    recall = true_positives / (true_positives + false_negatives) if true_positives + false_negatives else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def gap_scores(decisions: Iterable[GapDecision]) -> dict[str, float | None]:
    """`{overall,masculine,feminine}_{precision,recall,f1}` and `bias` (feminine F1 / masculine F1), all fractions.
    The bias is None when either F1 is 0, where gap_scorer.py prints "-". A pronoun neither masculine nor
    feminine counts in the overall score only."""
    decisions = list(decisions)
    groups = {
        "overall": decisions,
        "masculine": [d for d in decisions if d.pronoun.lower() in MASCULINE_PRONOUNS],
        "feminine": [d for d in decisions if d.pronoun.lower() in FEMININE_PRONOUNS],
    }
    results: dict[str, float | None] = {}
    for group, members in groups.items():
        results.update({f"{group}_{name}": value for name, value in _precision_recall_f1(members).items()})
    masculine, feminine = results["masculine_f1"], results["feminine_f1"]
    results["bias"] = feminine / masculine if masculine and feminine else None
    return results


def gap_answers(decisions: Iterable[GapDecision]) -> dict[str, float]:
    """Not part of the official score: the share of examples answered neither, A only, B only and both. GAP's gold
    is never both (a pronoun refers to one name at most), so "both" counts predictions that merged A and B into the
    pronoun's cluster, and "neither" those that left the pronoun in no cluster with a name: where a model's F1 falls
    short, these say which way."""
    decisions = list(decisions)
    answers = {"neither": (False, False), "a": (True, False), "b": (False, True), "both": (True, True)}
    return {f"answered_{name}": sum((d.predicted_a, d.predicted_b) == answer for d in decisions) / len(decisions)
            if decisions else 0.0 for name, answer in answers.items()}  # fmt: skip


__all__ = ["FEMININE_PRONOUNS", "GapDecision", "MASCULINE_PRONOUNS", "gap_answers", "gap_scores"]
