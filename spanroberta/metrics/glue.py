"""GLUE's official metrics, computed locally with scikit-learn and scipy.

`evaluate.load("glue", ...)` fetches its script from the Hub and fails offline, so the five metrics GLUE
uses are implemented here. Each takes predictions and references (any sequence or array) and returns a
plain float, so the results can be written to JSON as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats
from sklearn import metrics as sk_metrics


ArrayLike = Sequence[float] | np.ndarray


def accuracy(predictions: ArrayLike, references: ArrayLike) -> float:
    """The fraction of predictions equal to their reference."""
    predictions, references = _checked(predictions, references)
    return float(sk_metrics.accuracy_score(references, predictions))


def f1(predictions: ArrayLike, references: ArrayLike) -> float:
    """Binary F1 of the positive class 1 (MRPC's "equivalent", QQP's "duplicate"), as GLUE reports it."""
    predictions, references = _checked(predictions, references)
    return float(sk_metrics.f1_score(references, predictions, pos_label=1, average="binary", zero_division=0.0))


def matthews_correlation(predictions: ArrayLike, references: ArrayLike) -> float:
    """Matthews correlation coefficient (CoLA's metric); 0.0 when a side is constant."""
    predictions, references = _checked(predictions, references)
    return float(sk_metrics.matthews_corrcoef(references, predictions))


def pearson(predictions: ArrayLike, references: ArrayLike) -> float:
    """Pearson correlation (STS-B); NaN when a side is constant, as the coefficient is undefined then."""
    predictions, references = _checked(predictions, references)
    if _is_constant(predictions) or _is_constant(references):
        return float("nan")
    return float(stats.pearsonr(predictions, references)[0])


def spearmanr(predictions: ArrayLike, references: ArrayLike) -> float:
    """Spearman rank correlation (STS-B); NaN when a side is constant."""
    predictions, references = _checked(predictions, references)
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


def logits_to_predictions(logits: np.ndarray, is_regression: bool) -> np.ndarray:
    """Class ids from [N, num_labels] logits, or the [N] scores of a regression head."""
    logits = logits[0] if isinstance(logits, tuple) else logits
    return np.squeeze(logits, axis=-1) if is_regression else np.argmax(logits, axis=-1)


def _checked(predictions: ArrayLike, references: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    predictions, references = np.asarray(predictions), np.asarray(references)
    if predictions.shape != references.shape:
        raise ValueError(f"{predictions.shape[0]} predictions for {references.shape[0]} references: shapes "
                         f"{predictions.shape} and {references.shape} differ.")
    if predictions.size == 0:
        raise ValueError("There are no predictions to score.")
    return predictions, references


def _is_constant(values: np.ndarray) -> bool:
    return bool(np.all(values == values.flat[0]))
