"""GLUE's official metrics, computed locally with scikit-learn and scipy.

`evaluate.load("glue", ...)` fetches its script from the Hub and fails offline, so the five metrics GLUE
uses are implemented here (accuracy in tasks/classification.py, which the other classification tasks share).
Each takes predictions and references (any sequence or array) and returns a plain float, so the results can be
written to JSON as they are.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats
from sklearn import metrics as sk_metrics

from spanroberta.tasks.classification import ArrayLike, accuracy, checked_arrays


def f1(predictions: ArrayLike, references: ArrayLike) -> float:
    """Binary F1 of the positive class 1 (MRPC's "equivalent", QQP's "duplicate"), as GLUE reports it."""
    predictions, references = checked_arrays(predictions, references)
    return float(sk_metrics.f1_score(references, predictions, pos_label=1, average="binary", zero_division=0.0))


def matthews_correlation(predictions: ArrayLike, references: ArrayLike) -> float:
    """Matthews correlation coefficient (CoLA's metric); 0.0 when a side is constant."""
    predictions, references = checked_arrays(predictions, references)
    return float(sk_metrics.matthews_corrcoef(references, predictions))


def pearson(predictions: ArrayLike, references: ArrayLike) -> float:
    """Pearson correlation (STS-B); NaN when a side is constant, as the coefficient is undefined then."""
    predictions, references = checked_arrays(predictions, references)
    if _is_constant(predictions) or _is_constant(references):
        return float("nan")
    return float(stats.pearsonr(predictions, references)[0])


def spearmanr(predictions: ArrayLike, references: ArrayLike) -> float:
    """Spearman rank correlation (STS-B); NaN when a side is constant."""
    predictions, references = checked_arrays(predictions, references)
    if _is_constant(predictions) or _is_constant(references):
        return float("nan")
    return float(stats.spearmanr(predictions, references)[0])


METRICS: dict[str, Callable[[ArrayLike, ArrayLike], float]] = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_correlation": matthews_correlation,
    "pearson": pearson,
    "spearmanr": spearmanr,
}


def _is_constant(values: np.ndarray) -> bool:
    return bool(np.all(values == values.flat[0]))
