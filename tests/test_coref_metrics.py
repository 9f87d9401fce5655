"""The CoNLL coreference metrics and GAP's scoring against values worked out by hand."""

import pytest

from spanroberta.tasks.coreference.scoring import CorefEvaluator, coref_scores
from spanroberta.tasks.coreference.gap_scoring import GapDecision, gap_answers, gap_scores

# The example of Pradhan et al. 2014 (figure 1): key {a b c} {d e f g}; response {a b} {c d} {f g h i}.
# h and i are twinless (predicted, not gold); e is a gold mention the response lacks.
KEY = [["a", "b", "c"], ["d", "e", "f", "g"]]
RESPONSE = [["a", "b"], ["c", "d"], ["f", "g", "h", "i"]]


def test_pradhan_et_al_example():
    scores = coref_scores([(KEY, RESPONSE)])
    # MUC recall: {a b c} splits into {a b}{c}: 3-2 = 1; {d e f g} into {d}{e}{f g}: 4-3 = 1; over (2 + 3): 2/5.
    # MUC precision: {a b}: 2-1 = 1; {c d} into {c}{d}: 0; {f g h i} into {f g}{h}{i}: 1; over (1 + 1 + 3): 2/5.
    assert scores["muc_recall"] == pytest.approx(0.4)
    assert scores["muc_precision"] == pytest.approx(0.4)
    assert scores["muc_f1"] == pytest.approx(0.4)
    # B-cubed recall: a, b: 2/3 each, c: 1/3; d: 1/4, e: 0, f, g: 2/4 each; (5/3 + 5/4) / 7 = 35/84.
    # B-cubed precision: a, b: 1 each; c, d: 1/2 each; f, g: 2/4 each, h, i: 0; 4 / 8.
    assert scores["b_cubed_recall"] == pytest.approx(35 / 84)
    assert scores["b_cubed_precision"] == pytest.approx(0.5)
    assert scores["b_cubed_f1"] == pytest.approx(2 * (35 / 84) * 0.5 / (35 / 84 + 0.5))  # 45.45%
    # CEAF phi4: phi4({a b c}, {a b}) = 4/5, phi4({d e f g}, {f g h i}) = 4/8: the best alignment sums 1.3
    # (the others: 0.4 + 0.5 or 0.8 + 1/3). Recall 1.3 / 2 gold entities, precision 1.3 / 3 predicted.
    assert scores["ceaf_phi4_recall"] == pytest.approx(0.65)
    assert scores["ceaf_phi4_precision"] == pytest.approx(1.3 / 3)
    assert scores["ceaf_phi4_f1"] == pytest.approx(0.52)
    assert scores["conll_f1"] == pytest.approx((0.4 + scores["b_cubed_f1"] + 0.52) / 3)


def test_perfect_prediction_scores_one_and_empty_prediction_zero():
    perfect = coref_scores([(KEY, KEY)])
    assert all(value == pytest.approx(1.0) for value in perfect.values())
    empty = coref_scores([(KEY, [])])
    assert all(value == 0.0 for value in empty.values())
    assert all(value == 0.0 for value in coref_scores([([], [])]).values())


def test_singletons_kept_or_dropped():
    gold = [["a", "b"], ["c"]]
    predicted = [["a", "b"], ["d"]]
    # Dropped: both sides are {a b}: perfect.
    assert coref_scores([(gold, predicted)])["conll_f1"] == pytest.approx(1.0)
    kept = coref_scores([(gold, predicted)], keep_singletons=True)
    # MUC ignores singletons (|K| - 1 = 0): still perfect.
    assert kept["muc_f1"] == pytest.approx(1.0)
    # B-cubed: a, b score 1, c (gold) and d (predicted) score 0: recall 2/3, precision 2/3.
    assert kept["b_cubed_recall"] == pytest.approx(2 / 3)
    assert kept["b_cubed_precision"] == pytest.approx(2 / 3)
    # CEAF: {a b} aligns with similarity 1, {c} and {d} share nothing: 1/2 and 1/2.
    assert kept["ceaf_phi4_f1"] == pytest.approx(0.5)


def test_sums_are_added_over_documents_before_dividing():
    # Document 1: MUC recall 1/1 (gold {a b}, predicted {a b}); document 2: 0/3 (gold {c d e f} unlinked).
    # Summed: 1/4, not the mean of the documents' recalls (1/2).
    evaluator = CorefEvaluator()
    evaluator.add([["a", "b"]], [["a", "b"]])
    evaluator.add([["c", "d", "e", "f"]], [])
    assert evaluator.scores()["muc_recall"] == pytest.approx(1 / 4)
    # Precision: 1/1 in document 1, nothing predicted in document 2: 1.
    assert evaluator.scores()["muc_precision"] == pytest.approx(1.0)


def test_twinless_predicted_mentions_lower_precision_only():
    # Gold {a b}; predicted {a b x}: x is no gold mention.
    scores = coref_scores([([["a", "b"]], [["a", "b", "x"]])])
    # MUC: recall (2-1)/1 = 1; precision {a b x} parts {a b}{x}: (3-2)/2 = 1/2.
    assert scores["muc_recall"] == pytest.approx(1.0)
    assert scores["muc_precision"] == pytest.approx(0.5)
    # B-cubed precision: a, b: 2/3 each, x: 0; 4/3 over 3 mentions = 4/9. Recall: a, b: 2/2: 1.
    assert scores["b_cubed_precision"] == pytest.approx(4 / 9)
    assert scores["b_cubed_recall"] == pytest.approx(1.0)
    # CEAF: phi4 = 2*2/(2+3) = 4/5 for both.
    assert scores["ceaf_phi4_f1"] == pytest.approx(0.8)


def test_gap_scores_by_gender_and_bias():
    decisions = [
        # he: A right (TP), B wrongly linked (FP).
        GapDecision("he", gold_a=True, gold_b=False, predicted_a=True, predicted_b=True),
        # His: A missed (FN), B rightly unlinked (TN).
        GapDecision("His", gold_a=True, gold_b=False, predicted_a=False, predicted_b=False),
        # she: B right (TP), A rightly unlinked.
        GapDecision("she", gold_a=False, gold_b=True, predicted_a=False, predicted_b=True),
        # her: neither gold, A predicted (FP).
        GapDecision("her", gold_a=False, gold_b=False, predicted_a=True, predicted_b=False),
    ]
    scores = gap_scores(decisions)
    # Masculine: TP 1, FP 1, FN 1: precision 1/2, recall 1/2, F1 1/2.
    assert scores["masculine_precision"] == pytest.approx(0.5)
    assert scores["masculine_recall"] == pytest.approx(0.5)
    assert scores["masculine_f1"] == pytest.approx(0.5)
    # Feminine: TP 1, FP 1, FN 0: precision 1/2, recall 1, F1 2/3.
    assert scores["feminine_f1"] == pytest.approx(2 / 3)
    # Overall: TP 2, FP 2, FN 1: precision 1/2, recall 2/3, F1 4/7.
    assert scores["overall_f1"] == pytest.approx(4 / 7)
    assert scores["bias"] == pytest.approx((2 / 3) / 0.5)
    # gap_scorer.py prints "-" for the bias when either F1 is 0: undefined, not 0.
    assert gap_scores([])["bias"] is None
    no_feminine_hit = [decisions[0], GapDecision("she", gold_a=True, gold_b=False, predicted_a=False, predicted_b=False)]
    assert gap_scores(no_feminine_hit)["feminine_f1"] == 0.0 and gap_scores(no_feminine_hit)["bias"] is None


def test_a_gold_mention_in_two_predicted_entities_counts_in_the_first_only():
    gold = [[(0, 0), (2, 2)], [(4, 4), (6, 6)]]
    # (2, 2) is predicted in two entities: as the reference scorer, the second loses it.
    repeated = [[(0, 0), (2, 2)], [(2, 2), (4, 4), (6, 6)]]
    assert coref_scores([(gold, repeated)]) == coref_scores([(gold, gold)])
    assert coref_scores([(gold, repeated)])["conll_f1"] == pytest.approx(1.0)
    # A twinless mention (8, 8) predicted twice stays in both entities.
    evaluator = CorefEvaluator()
    evaluator.add(gold, [[(0, 0), (2, 2), (8, 8)], [(4, 4), (6, 6), (8, 8)]])
    assert evaluator.counts["b_cubed"].precision_denominator == 6


def test_gap_answers_count_each_kind_of_answer():
    decisions = [GapDecision("he", True, False, True, True), GapDecision("she", False, True, False, False),
                 GapDecision("his", True, False, True, False), GapDecision("her", False, True, True, True)]  # fmt: skip
    assert gap_answers(decisions) == {"answered_neither": 0.25, "answered_a": 0.25, "answered_b": 0.0,
                                      "answered_both": 0.5}  # fmt: skip
    assert gap_answers([]) == dict.fromkeys(["answered_neither", "answered_a", "answered_b", "answered_both"], 0.0)
