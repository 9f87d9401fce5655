"""The statistics every benchmark judges by: the seed t-interval, the bootstrap over evaluated examples and its paired
form (model minus floor on the same examples, resampling seeds and groups), the verdict rule on a task's floor and
aim, and the speed targets.
The measurements and the tables (benchmarks/tables/) import them from here; this module imports no benchmark.

The verdict rule on a score over seeds (a summary: `{"score": spread(...), "sample_noise": [...], "floor": ...,
"paired": ...}`): a verdict needs at least `MIN_SEEDS` seeds and every seed's evaluation-sample noise (the
half-width of the 95% percentile bootstrap over its evaluated examples, `bootstrap_interval`).

The floor's verdict is paired (`paired_difference`, the summary's "paired"): a row is clear of its floor when the
lower bound of the 95% bootstrap interval of the model's score less the floor's, on the same examples, is above 0.
Each draw takes as many seeds as the row has and as many groups of examples as the evaluation holds (an article, a
document, or the example itself where examples share nothing), both with replacement, and scores the model (the
mean over the drawn seeds) and the floor's answer on the same drawn examples, so that what both share (an easy
article, a hard one) cancels and examples that share an article are never counted as independent. No further margin
is asked for: the lower bound is the margin. A summary without the floor's per-example outcomes (a floor computed
before they were kept, or the parity benchmark's) is judged by the margin rule instead: clear when its mean less the
margin (the seed term, the half-width of the 95% t-interval of the mean over seeds, Student's t for n-1 degrees of
freedom: 4.30 for 3 seeds, plus the mean of the seeds' bootstrap half-widths: every seed evaluates the same
examples, so their sampling noise does not average out over seeds) is above the floor. A row meets its aim when its
mean less that margin reaches the aim.

The speed targets, for the spanbert recipe's Trainer path on a GPU at the pairs' per-device batches: its model FLOPs
utilisation compiled at least `MFU_COMPILED`; its real tokens/s over run_mlm's defaults' at least `VS_DEFAULTS` of
its size; its MFU over the tuned transformers peer's at least `MFU_VS_TUNED`; at large, its real tokens/s with
`--fp8` over the bf16 run's of the same code at least `FP8_OVER_BF16`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

# Seeds a verdict needs: with fewer, the standard error over seeds rests on one or two differences and says little.
MIN_SEEDS = 3
# The confidence of both terms of the margin: the seed term's t-interval and the bootstrap's percentile interval.
CONFIDENCE = 0.95
RESAMPLES, BOOTSTRAP_SEED = 1000, 0  # the bootstrap's draws and the seed they are drawn with


def spread(values: Sequence[float]) -> dict[str, float | int | None]:
    """Values over seeds: their count, mean, sample standard deviation (None for one value), least and greatest."""
    return {"n": len(values), "mean": statistics.fmean(values),
            "sd": statistics.stdev(values) if len(values) > 1 else None, "min": min(values), "max": max(values)}


def two_standard_errors(ours: dict[str, Any], theirs: dict[str, Any]) -> float:
    """Two standard errors of the difference of two means (each a `spread`, with its sample sd over n seeds)."""
    return 2 * math.sqrt(ours["sd"] ** 2 / ours["n"] + theirs["sd"] ** 2 / theirs["n"])


def seed_quantile(seeds: int) -> float:
    """Student's t-quantile of a two-sided 95% interval of a mean over `seeds` (n-1 degrees of freedom): 12.71 for
    2 seeds, 4.30 for 3, 2.78 for 5."""
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, seeds - 1))


def bootstrap_interval(count: int, score_of: Callable[[np.ndarray], float], resamples: int = RESAMPLES,
                       seed: int = BOOTSTRAP_SEED, level: float = CONFIDENCE) -> tuple[float, float]:  # fmt: skip
    """The percentile bootstrap interval (Efron and Tibshirani 1993, chapters 6 and 13) of a score over `count`
    examples: `score_of(indices)` scores a draw of as many examples with replacement, `resamples` draws with `seed`;
    the `level` share of the draws' scores lies between the bounds. Undefined scores (NaN) are left out."""
    generator = np.random.default_rng(seed)
    scores = [score_of(generator.integers(0, count, count)) for _ in range(resamples)]
    tail = 100 * (1 - level) / 2
    low, high = np.nanpercentile(scores, [tail, 100 - tail])
    return float(low), float(high)


def paired_difference(model: Sequence[Callable[[np.ndarray], float]], floor: Callable[[np.ndarray], float],
                      groups: Sequence[Any], resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED,
                      level: float = CONFIDENCE) -> tuple[float, float, float]:  # fmt: skip
    """The model's score less the floor's over the same examples, and its paired percentile bootstrap interval:
    `model` scores each seed's outcomes and `floor` the floor's on given example indices (the row's own scorer, so
    that a score that is not a mean of per-example scores, F1 over a set, a correlation, is computed whole on each
    draw); `groups` names each example's group. Each draw resamples the seeds and the groups with replacement (a
    drawn group brings all its examples) and takes the mean of the drawn seeds' scores less the floor's on the same
    examples. Returns the difference on every seed and example, and the bounds; undefined draws (NaN) are left
    out."""
    codes = np.unique(np.asarray(groups, dtype=str), return_inverse=True)[1].ravel()
    if not len(model) or not len(codes):
        raise ValueError("paired_difference takes one seed at least and one group name per example")
    members = [np.flatnonzero(codes == code) for code in range(codes.max() + 1)]
    every = np.arange(len(codes))
    observed = statistics.fmean(score(every) for score in model) - floor(every)
    generator = np.random.default_rng(seed)
    differences = []
    for _ in range(resamples):
        seeds = generator.integers(0, len(model), len(model))
        drawn = np.concatenate([members[i] for i in generator.integers(0, len(members), len(members))])
        scores = {index: model[index](drawn) for index in set(seeds.tolist())}
        differences.append(float(np.mean([scores[index] for index in seeds])) - floor(drawn))
    tail = 100 * (1 - level) / 2
    low, high = np.nanpercentile(differences, [tail, 100 - tail])
    return float(observed), float(low), float(high)


# The verdict rule, on a summary of one row's (or one side's) seeds.
def seed_spread(summary: dict[str, Any]) -> float | None:
    """The seed term: the half-width of the 95% t-interval of the mean over seeds, t(n-1) sd / sqrt(n) (None with
    one seed)."""
    score = summary["score"]
    return None if score["sd"] is None else seed_quantile(score["n"]) * score["sd"] / math.sqrt(score["n"])


def evaluation_noise(summary: dict[str, Any]) -> float | None:
    """The sample term: the mean 95% bootstrap half-width over every seed's record; None unless each holds its
    outcomes, so that the term never rests on some of the seeds."""
    noise = summary["sample_noise"]
    return statistics.fmean(noise) if noise and len(noise) == summary["score"]["n"] else None


def no_verdict(summary: dict[str, Any]) -> str | None:
    """Why a summary has no verdict (too few seeds, or not every seed's evaluation-sample noise recorded), or None
    where it has one."""
    seeds, sampled = summary["score"]["n"], len(summary["sample_noise"])
    if seeds < MIN_SEEDS:
        return f"{seeds} seed{'s' if seeds > 1 else ''}: no verdict"
    if not sampled:
        return "sample noise not recorded: no verdict"
    if sampled < seeds:
        return f"sample noise of {sampled} of {seeds} seeds: no verdict"
    return None


def verdict_margin(summary: dict[str, Any]) -> float | None:
    """The margin a verdict allows for: the seed spread plus the evaluation-sample noise; None without a verdict."""
    return None if no_verdict(summary) else seed_spread(summary) + evaluation_noise(summary)


def clear_of_floor(summary: dict[str, Any], margin: float) -> bool:
    """The margin rule: whether the mean less `margin` is above the floor."""
    return summary["score"]["mean"] - margin > summary["floor"]


def row_clear_of_floor(summary: dict[str, Any]) -> bool | None:
    """The verdict on the floor: the paired rule's where the summary holds its interval (`paired_difference`),
    else the margin rule's; None without a verdict."""
    margin = verdict_margin(summary)
    if margin is None:
        return None
    paired = summary.get("paired")
    return paired[1] > 0 if paired is not None else clear_of_floor(summary, margin)


# The verdict column's header: the rule its verdicts follow.
CLEAR_HEADER = "clear of floor: model − floor, paired 95% interval, lower bound > 0"


def clear_text(summary: dict[str, Any]) -> str:
    """The verdict on the floor as the tables word it: "yes" or "**no**" with the paired difference and its
    interval (or, without the floor's outcomes, by which rule), or why there is none (`no_verdict`)."""
    clear = row_clear_of_floor(summary)
    if clear is None:
        return no_verdict(summary)
    word = "yes" if clear else "**no**"
    paired = summary.get("paired")
    if paired is None:
        return f"{word} (margin rule: no per-example floor outcomes)"
    return f"{word}: {paired[0]:+.1f} [{paired[1]:+.1f}, {paired[2]:+.1f}]"


def short_of_aim(aim: float | None, summary: dict[str, Any]) -> bool | None:
    """The verdict on an aim: whether the mean less the margin falls below it; None without an aim or a verdict."""
    margin = verdict_margin(summary)
    return None if aim is None or margin is None else summary["score"]["mean"] - margin < aim


# The speed targets (see the module's docstring).
MFU_COMPILED = 0.35
VS_DEFAULTS = {"base": 1.5, "large": 1.3}
MFU_VS_TUNED = 1.0
FP8_OVER_BF16 = 1.3


@dataclass(frozen=True)
class Verdict:
    """One speed target against one record: the least value that meets it and the record's (None: not recorded)."""

    target: str  # "mfu", "vs_defaults", "mfu_vs_tuned" or "fp8"
    floor: float
    value: float | None

    @property
    def met(self) -> bool | None:
        return None if self.value is None else self.value >= self.floor

    def shown(self, value: float | None) -> str:
        """A value as this target reads it: MFU in percent, the others as ratios."""
        if value is None:
            return "-"
        return f"{100 * value:.1f}%" if self.target == "mfu" else f"{value:.2f}x"

    def verdict(self) -> str:
        met = {True: "**met**", False: "**not met**", None: "not measured"}[self.met]
        return f"{met} (target >= {self.shown(self.floor)})"


def speed_verdicts(model_size: str, compiled: bool, fp8: bool, run: dict[str, Any],
                   bf16_rate: float | None = None) -> list[Verdict]:  # fmt: skip
    """The targets a Trainer run of the spanbert recipe answers to (`run`: its figures in a trainer record), by its
    model size, compilation and precision; an fp8 run's against `bf16_rate`, the real tokens/s of the bf16 run of the
    same code, size and compilation. None for a size without targets."""
    if model_size not in VS_DEFAULTS:
        return []
    if fp8:
        rate = run.get("real_tokens_per_second")
        value = rate / bf16_rate if rate and bf16_rate else None
        return [Verdict("fp8", FP8_OVER_BF16, value)] if model_size == "large" else []
    found = [Verdict("vs_defaults", VS_DEFAULTS[model_size], run.get("ratio_to_baseline")),
             Verdict("mfu_vs_tuned", MFU_VS_TUNED, run.get("mfu_over_tuned"))]  # fmt: skip
    return [Verdict("mfu", MFU_COMPILED, run.get("mfu")), *found] if compiled else found
