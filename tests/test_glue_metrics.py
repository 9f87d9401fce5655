"""GLUE's metrics against values worked out by hand on fixed predictions."""

import math

import numpy as np
import pytest
from transformers import EvalPrediction

from spanroberta.tasks.glue.scoring import (
    accuracy,
    f1,
    matthews_correlation,
    pearson,
    spearmanr,
)
from spanroberta.tasks.glue.data import GLUE_TASKS, glue_compute_metrics, glue_metrics

# Confusion matrix of these: TP=2 (i 0, 4), FP=1 (i 1), FN=1 (i 5), TN=2 (i 2, 3).
PREDICTIONS = [1, 1, 0, 0, 1, 0]
REFERENCES = [1, 0, 0, 0, 1, 1]


def test_classification_metrics_match_the_confusion_matrix():
    assert accuracy(PREDICTIONS, REFERENCES) == pytest.approx(4 / 6)
    # F1 = 2TP / (2TP + FP + FN) = 4 / 6
    assert f1(PREDICTIONS, REFERENCES) == pytest.approx(4 / 6)
    # MCC = (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (4 - 1) / sqrt(3*3*3*3)
    assert matthews_correlation(PREDICTIONS, REFERENCES) == pytest.approx(1 / 3)


def test_f1_is_that_of_the_positive_class():
    # All wrong on class 1, all right on class 0: F1 of class 1 is 0 although accuracy is 1/2.
    assert f1([0, 0], [1, 0]) == 0.0
    assert accuracy([0, 0], [1, 0]) == 0.5


def test_matthews_correlation_signs_and_constant_predictions():
    assert matthews_correlation([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert matthews_correlation([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)
    assert matthews_correlation([1, 1, 1, 1], [1, 0, 1, 0]) == 0.0


def test_correlations_by_hand():
    # Deviations from the means: x (-1.5, -0.5, 0.5, 1.5), y (-3, -1, 0, 4): r = 11 / sqrt(5 * 26).
    assert pearson([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(130))
    assert spearmanr([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(1.0)
    # Rank differences (0, 1, 1, 0): rho = 1 - 6 * 2 / (4 * 15).
    assert spearmanr([0.1, 0.2, 0.3, 0.4], [1.0, 3.0, 2.0, 4.0]) == pytest.approx(0.8)
    assert math.isnan(pearson([2.5, 2.5, 2.5], [1.0, 2.0, 3.0]))


def test_each_task_reports_its_official_metrics():
    expected = {
        "cola": {"matthews_correlation"},
        "sst2": {"accuracy"},
        "mrpc": {"f1", "accuracy"},
        "stsb": {"pearson", "spearmanr"},
        "qqp": {"f1", "accuracy"},
        "mnli": {"accuracy"},
        "qnli": {"accuracy"},
        "rte": {"accuracy"},
        "wnli": {"accuracy"},
    }
    assert {name: set(task.metrics) for name, task in GLUE_TASKS.items()} == expected
    assert glue_metrics("MRPC", PREDICTIONS, REFERENCES) == pytest.approx({"f1": 4 / 6, "accuracy": 4 / 6})


def test_compute_metrics_turns_logits_into_predictions():
    logits = np.array([[0.1, 0.9], [2.0, -1.0], [0.0, 3.0]])
    metrics = glue_compute_metrics("rte")(EvalPrediction(predictions=logits, label_ids=np.array([1, 1, 1])))
    assert metrics == pytest.approx({"accuracy": 2 / 3})
    scores = np.array([[1.0], [2.0], [3.5]])
    metrics = glue_compute_metrics("stsb")(EvalPrediction(predictions=scores, label_ids=np.array([1.0, 2.0, 3.0])))
    assert metrics == pytest.approx({"pearson": pearson([1, 2, 3.5], [1, 2, 3]), "spearmanr": 1.0})


def test_mismatched_lengths_are_an_error():
    with pytest.raises(ValueError, match="3 predictions for 2 references"):
        accuracy([1, 0, 1], [1, 0])
