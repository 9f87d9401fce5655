"""The CoNLL-2012 coreference metrics, as the reference scorer defines them (Pradhan et al. 2014, "Scoring
Coreference Partitions of Predicted Mentions: A Reference Implementation"): MUC (Vilain et al. 1995), B-cubed
(Bagga & Baldwin 1998), entity-based CEAF with phi4 (Luo 2005), and the CoNLL F1, the mean of their three F1s.

A document's entities (clusters) are collections of mentions; a mention is any hashable value (a `(start, end)`
span here). Predicted mentions need not be gold ones: as in the reference scorer (section 3 of Pradhan et al.),
such "twinless" mentions are scored by the original formulas, without adding them to the other side. In MUC a
twinless mention forms its own part of the partition (it links nothing); in B-cubed a twinless predicted mention
counts in the precision's denominator with a score of 0 (and a twinless gold mention in the recall's); in CEAF a
predicted entity made only of twinless mentions is aligned to nothing and still counts in the precision's
denominator.

Scores are summed over documents, as the scorer does: each metric adds up its numerators and denominators over
all documents, then divides (a micro average over documents; `CorefEvaluator`). Singletons (entities of one
mention) are kept or dropped on both sides by `keep_singletons`: LitBank annotates them, OntoNotes does not.
An empty side gives 0, never a division error. A gold mention that several predicted entities hold is kept in the
first of them only, as the scorer's `IdentifMentions` does (a twinless one stays in each, as there too).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

Mention = Hashable
Entity = Collection[Mention]

METRICS = ("muc", "b_cubed", "ceaf_phi4")
# The scorer of outcomes that are per-document sums of the metrics, whose CoNLL F1 over their totals is the score.
CONLL = "conll"


@dataclass
class Counts:
    """The sums a metric divides: recall = recall_numerator / recall_denominator, and so for precision."""

    recall_numerator: float = 0.0
    recall_denominator: float = 0.0
    precision_numerator: float = 0.0
    precision_denominator: float = 0.0

    def __add__(self, other: Counts) -> Counts:
        return Counts(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.recall_numerator, self.recall_denominator, self.precision_numerator, self.precision_denominator)

    def scores(self) -> dict[str, float]:
        """precision, recall and F1 as fractions; 0 where a denominator is 0."""
        recall = _divide(self.recall_numerator, self.recall_denominator)
        precision = _divide(self.precision_numerator, self.precision_denominator)
        return {"precision": precision, "recall": recall, "f1": _divide(2 * precision * recall, precision + recall)}


def _divide(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def _as_sets(entities: Iterable[Entity], keep_singletons: bool) -> list[frozenset]:
    sets = [frozenset(entity) for entity in entities]
    return [entity for entity in sets if entity and (keep_singletons or len(entity) > 1)]


def _first_holders_only(predicted: Iterable[Entity], gold: Sequence[frozenset]) -> list[list[Mention]]:
    """`predicted` with each gold mention removed from every entity after the first that holds it."""
    gold_mentions = set().union(*gold)
    seen: set[Mention] = set()
    entities = []
    for entity in predicted:
        kept = []
        for mention in entity:
            if mention in seen:
                continue
            if mention in gold_mentions:
                seen.add(mention)
            kept.append(mention)
        entities.append(kept)
    return entities


def _entity_of(entities: Sequence[frozenset]) -> dict[Mention, int]:
    return {mention: index for index, entity in enumerate(entities) for mention in entity}


def _muc_side(keys: Sequence[frozenset], responses: Sequence[frozenset]) -> tuple[float, float]:
    """MUC's recall sums (Vilain et al. 1995, section 3): for each key entity K, |K| - |p(K)|, where p(K) is K
    partitioned by the response entities, each mention the response lacks forming a part of its own; over the
    sum of |K| - 1. The precision is the same with the roles swapped."""
    response_of = _entity_of(responses)
    numerator = denominator = 0
    for key in keys:
        parts = {response_of.get(mention, ("twinless", mention)) for mention in key}
        numerator += len(key) - len(parts)
        denominator += len(key) - 1
    return numerator, denominator


def muc_counts(gold: Sequence[frozenset], predicted: Sequence[frozenset]) -> Counts:
    recall = _muc_side(gold, predicted)
    precision = _muc_side(predicted, gold)
    return Counts(recall[0], recall[1], precision[0], precision[1])


def _b_cubed_side(keys: Sequence[frozenset], responses: Sequence[frozenset]) -> tuple[float, float]:
    """B-cubed's recall sums (Bagga & Baldwin 1998): for each key mention m in entity K, |K n R(m)| / |K| with
    R(m) the response entity holding m (0 where none does); over the number of key mentions."""
    response_of = _entity_of(responses)
    numerator = 0.0
    for key in keys:
        overlaps = Counter(response_of[mention] for mention in key if mention in response_of)
        numerator += sum(count * count for count in overlaps.values()) / len(key)
    return numerator, sum(len(key) for key in keys)


def b_cubed_counts(gold: Sequence[frozenset], predicted: Sequence[frozenset]) -> Counts:
    recall = _b_cubed_side(gold, predicted)
    precision = _b_cubed_side(predicted, gold)
    return Counts(recall[0], recall[1], precision[0], precision[1])


def ceaf_phi4_counts(gold: Sequence[frozenset], predicted: Sequence[frozenset]) -> Counts:
    """Entity-based CEAF (Luo 2005, section 2): the one-to-one alignment of gold and predicted entities that
    maximises the summed similarity phi4(K, R) = 2 |K n R| / (|K| + |R|) (found with the Hungarian algorithm);
    recall divides that sum by the number of gold entities, precision by the number of predicted ones."""
    similarity = np.zeros((len(gold), len(predicted)))
    for i, key in enumerate(gold):
        for j, response in enumerate(predicted):
            common = len(key & response)
            if common:
                similarity[i, j] = 2 * common / (len(key) + len(response))
    rows, columns = linear_sum_assignment(similarity, maximize=True)
    total = float(similarity[rows, columns].sum())
    return Counts(total, len(gold), total, len(predicted))


_COUNTERS = {"muc": muc_counts, "b_cubed": b_cubed_counts, "ceaf_phi4": ceaf_phi4_counts}


@dataclass
class CorefEvaluator:
    """Adds up each metric's sums over documents (`add`) and scores them all at once (`scores`), as the CoNLL
    reference scorer does for a file of documents."""

    keep_singletons: bool = False
    counts: dict[str, Counts] = field(default_factory=lambda: {name: Counts() for name in METRICS})

    def add(self, gold: Iterable[Entity], predicted: Iterable[Entity]) -> None:
        """One document's gold and predicted entities (each an iterable of mentions)."""
        document = document_counts(gold, predicted, self.keep_singletons)
        for name in METRICS:
            self.counts[name] = self.counts[name] + document[name]

    def scores(self) -> dict[str, float]:
        """`{metric}_{precision,recall,f1}` for muc, b_cubed and ceaf_phi4, and `conll_f1`, their F1s' mean."""
        return scores_of_counts(self.counts)


def document_counts(gold: Iterable[Entity], predicted: Iterable[Entity], keep_singletons: bool) -> dict[str, Counts]:
    """Each metric's sums for one document's gold and predicted entities: what `CorefEvaluator` adds up over
    documents, and what a bootstrap over documents resamples."""
    gold_sets = _as_sets(gold, keep_singletons)
    predicted_sets = _as_sets(_first_holders_only(predicted, gold_sets), keep_singletons)
    return {name: _COUNTERS[name](gold_sets, predicted_sets) for name in METRICS}


def document_outcomes(
    documents: Iterable[tuple[Iterable[Entity], Iterable[Entity]]], keep_singletons: bool
) -> dict[str, Any]:
    """The per-example outcomes of (gold entities, predicted entities) pairs, one a document: each document's sums
    of every metric, [document, metric, (recall numerator, denominator, precision numerator, denominator)], which
    the scorer adds up over documents before it divides, so that a resample of them draws documents, as it counts."""
    counts = [document_counts(gold, predicted, keep_singletons) for gold, predicted in documents]
    return {"scorer": CONLL, "counts": [[list(document[name].as_tuple()) for name in METRICS] for document in counts]}


def scores_of_counts(counts: dict[str, Counts]) -> dict[str, float]:
    """`{metric}_{precision,recall,f1}` and `conll_f1` (the mean of the three F1s) from each metric's summed sums."""
    results = {}
    for name in METRICS:
        results.update({f"{name}_{kind}": value for kind, value in counts[name].scores().items()})
    results["conll_f1"] = sum(results[f"{name}_f1"] for name in METRICS) / len(METRICS)
    return results


def coref_scores(
    documents: Iterable[tuple[Iterable[Entity], Iterable[Entity]]], keep_singletons: bool = False
) -> dict[str, float]:
    """The CoNLL metrics over (gold entities, predicted entities) pairs, one a document (see `CorefEvaluator`)."""
    evaluator = CorefEvaluator(keep_singletons=keep_singletons)
    for gold, predicted in documents:
        evaluator.add(gold, predicted)
    return evaluator.scores()


__all__ = ["METRICS", "Counts", "CorefEvaluator", "b_cubed_counts", "ceaf_phi4_counts", "coref_scores",
           "document_counts", "muc_counts", "scores_of_counts"]
