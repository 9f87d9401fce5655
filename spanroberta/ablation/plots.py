"""The ablation's figures, as PNG files (matplotlib's Agg backend: no display needed).

- pretraining_loss.png: each arm's logged training loss against the step (from the Trainer's trainer_state.json),
  and, beside it, the MLM loss alone: the total adds SBO's or NSP's loss for the arms that train them, so only
  the MLM loss compares every arm on the same footing.
- scores.png: one panel per task, each arm's score for every seed (dots) with its median (bar) and min-max.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen before pyplot is imported)

from .config import AblationConfig  # noqa: E402
from .reports import headline_metric  # noqa: E402

CURVES = (("loss", "training loss (all heads)"), ("mlm_loss", "MLM loss"))


def plot_pretraining_losses(trainer_states: dict[str, Path], path: Path) -> None:
    """`trainer_states` maps each arm to its trainer_state.json; one line per arm in each panel."""
    figure, axes = plt.subplots(1, len(CURVES), figsize=(6 * len(CURVES), 4), squeeze=False)
    for arm, state_file in trainer_states.items():
        history = json.loads(state_file.read_text(encoding="utf-8"))["log_history"]
        for axis, (key, _) in zip(axes[0], CURVES):
            points = [(entry["step"], entry[key]) for entry in history if key in entry and "step" in entry]
            if points:
                axis.plot(*zip(*points), label=arm)
    for axis, (_, title) in zip(axes[0], CURVES):
        axis.set(title=title, xlabel="step", ylabel="loss")
        if axis.lines:
            axis.legend(fontsize="small")
    _save(figure, path)


def plot_scores(config: AblationConfig, rows: list[dict[str, Any]], path: Path) -> None:
    """Per task, each arm's headline score of every run, its median and its range."""
    tasks = list(config.tasks)
    arms = config.table_arms
    figure, axes = plt.subplots(1, len(tasks), figsize=(max(4, 1.2 * len(arms) + 2) * len(tasks), 4),
                                squeeze=False)  # fmt: skip
    for axis, task in zip(axes[0], tasks):
        metric = headline_metric(config.tasks[task])
        for position, arm in enumerate(arms):
            values = [row["value"] for row in rows if (row["arm"], row["task"], row["metric"]) == (arm, task, metric)]
            if not values:
                continue
            axis.scatter([position] * len(values), values, color="tab:blue", alpha=0.6, s=18)
            axis.vlines(position, min(values), max(values), color="tab:blue")
            axis.hlines(statistics.median(values), position - 0.25, position + 0.25, color="tab:red")
        axis.set_xticks(range(len(arms)), arms, rotation=30, ha="right")
        axis.set(title=f"{task} ({metric})", ylabel="score (0-100)")
    _save(figure, path)


def _save(figure, path: Path) -> None:
    figure.tight_layout()
    temporary = path.with_name(f".{path.name}.tmp.png")
    figure.savefig(temporary, dpi=110)
    plt.close(figure)
    temporary.replace(path)
