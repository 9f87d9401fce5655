"""The evaluation-sample noise of a task benchmark score: how much the score would move on another draw of as many
evaluation examples, from the per-example outcomes a unit's record holds (tasks/outcomes.py).

The percentile bootstrap (Efron and Tibshirani 1993, An Introduction to the Bootstrap, chapters 6 and 13): the
evaluation examples are drawn with replacement as many times as there are, `RESAMPLES` times with a fixed seed, the
row's score is recomputed on each draw with the project's own scorer (`outcomes.outcome_score`), and the 2.5th and
97.5th percentiles of those scores bound the 95% interval; the noise is half its width. With RTE's 277 dev pairs it
is a few points of accuracy, which the spread over seeds does not show: every seed evaluates the same pairs.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np

from benchmarks.tasks.outcomes import outcome_count, outcome_score, resampled

RESAMPLES = 1000
LEVEL = 0.95  # the interval's coverage
SEED = 0


def bootstrap_interval(outcomes: dict[str, Any], resamples: int = RESAMPLES, seed: int = SEED,
                       level: float = LEVEL) -> tuple[float, float]:  # fmt: skip
    """The percentile bootstrap interval (0-100) of the score of `outcomes`: the `level` share of the scores of
    `resamples` resamples of the examples (drawn with `seed`) between its bounds. Resamples whose score is
    undefined (a constant side of a correlation) are left out."""
    count = outcome_count(outcomes)
    generator = np.random.default_rng(seed)
    scores = [outcome_score(resampled(outcomes, generator.integers(0, count, count))) for _ in range(resamples)]
    tail = 100 * (1 - level) / 2
    low, high = np.nanpercentile(scores, [tail, 100 - tail])
    return float(low), float(high)


def sample_noise(outcomes: dict[str, Any]) -> float:
    """Half the width of the 95% percentile bootstrap interval of the score of `outcomes` (0-100)."""
    return _half_width(json.dumps(outcomes, sort_keys=True))


@functools.lru_cache(maxsize=None)
def _half_width(outcomes: str) -> float:
    # Keyed by the outcomes' JSON: the tables ask for the same record's noise once per table, headline and page.
    low, high = bootstrap_interval(json.loads(outcomes))
    return (high - low) / 2
