"""What the classification tasks share: class ids from logits, and accuracy, with the checks every metric of
predictions against references makes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn import metrics as sk_metrics

ArrayLike = Sequence[float] | np.ndarray


def logits_to_predictions(logits: np.ndarray, is_regression: bool) -> np.ndarray:
    """Class ids from [N, num_labels] logits, or the [N] scores of a regression head."""
    logits = logits[0] if isinstance(logits, tuple) else logits
    return np.squeeze(logits, axis=-1) if is_regression else np.argmax(logits, axis=-1)


def accuracy(predictions: ArrayLike, references: ArrayLike) -> float:
    """The fraction of predictions equal to their reference."""
    predictions, references = checked_arrays(predictions, references)
    return float(sk_metrics.accuracy_score(references, predictions))


def checked_arrays(predictions: ArrayLike, references: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The predictions and references as arrays, refused where their shapes differ or they are empty."""
    predictions, references = np.asarray(predictions), np.asarray(references)
    if predictions.shape != references.shape:
        raise ValueError(f"{predictions.shape[0]} predictions for {references.shape[0]} references: shapes "
                         f"{predictions.shape} and {references.shape} differ.")
    if predictions.size == 0:
        raise ValueError("There are no predictions to score.")
    return predictions, references
