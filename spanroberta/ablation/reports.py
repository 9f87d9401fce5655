"""An ablation's fine-tuning tasks: a task's spec (`TaskSpec`), and the scores of its runs, read as the fine-tuning
task declares them (spanroberta.finetuning's `Report`: the scores it writes to eval_results.json, on which scale,
and the one a task's column shows).

Scores are on a 0-100 scale, as the papers report them: SQuAD's and MRQA's official metrics already give
percentages; run_glue.py, run_race.py, run_relation.py and run_coref.py give fractions (eval_accuracy 0.71 is 71.0
here). A task may have variants that its flags choose: SQuAD v1.1, v2.0 or MRQA for run_squad.py, the GLUE task for
run_glue.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import UserInputError
from ..tasks.registry import task_of_script
from ..finetuning.task import Report


@dataclass(frozen=True)
class TaskSpec:
    """A fine-tuning task: its script and that script's flags; `metric` is the score its column shows (None: the
    script's usual one), `split_by_article` a SQuAD file to split by article into train and evaluation files."""

    name: str
    script: str
    flags: dict[str, Any]
    metric: str | None = None
    split_by_article: dict[str, Any] | None = None


# Every fine-tuning's eval_results.json key starts with it (spanroberta.finetuning.task).
EVAL_PREFIX = "eval_"


def report(task: TaskSpec) -> Report | None:
    """What the task's script writes, as its task declares it (the variant its flags choose); None for a GLUE
    task_name that does not exist (run_glue.py's own check reports it)."""
    return task_of_script(task.script).report(task.flags)


def metric_names(task: TaskSpec) -> tuple[str, ...]:
    """The scores the task's script writes, by their names in results.json (without eval_)."""
    found = report(task)
    return found.keys if found else ()


def known_metric(task: TaskSpec, name: str) -> bool:
    """Whether the task's script writes a score of that name: one of its metrics, or one named by its data."""
    found = report(task)
    return found is not None and found.declares(name)


def headline_metric(task: TaskSpec) -> str:
    """The score of the task's column: the config's `metric`, else the table's headline for the task."""
    return task.metric if task.metric is not None else report(task).headline


def scores(task: TaskSpec, eval_results: dict[str, float]) -> dict[str, float]:
    """The task's scores from its eval_results.json, on a 0-100 scale. Stops when the headline is missing: the
    script then writes other keys than the table says, and the task's column would stay empty."""
    found = report(task)
    prefix = EVAL_PREFIX
    names = [name for name in found.keys if prefix + name in eval_results]
    if found.named_by_data:
        written = [key[len(prefix) :] for key in eval_results if key.startswith(prefix)]
        names += [name for name in written if found.declares(name) and name not in names]
    headline = headline_metric(task)
    if headline not in names:
        raise UserInputError(
            f"Task {task.name!r}: {task.script}'s eval_results.json has no {prefix}{headline} (it has "
            f"{', '.join(sorted(eval_results)) or 'nothing'}), so its column would stay empty. The task's `reports` "
            "(its task.py in spanroberta/tasks/) say which keys it writes: make the two agree."
        )
    return {name: found.to_percent * float(eval_results[prefix + name]) for name in names}
