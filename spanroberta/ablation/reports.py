"""An ablation's fine-tuning tasks: a task's spec (`TaskSpec`), and what each fine-tuning script reports, as a
table (`REPORTS`): the scores it writes to eval_results.json, on which scale, and the one a task's column shows.

Scores are on a 0-100 scale, as the papers report them: SQuAD's and MRQA's official metrics already give
percentages; run_glue.py, run_race.py, run_relation.py and run_coref.py give fractions (eval_accuracy 0.71 is 71.0
here). A script's row may have variants that its flags choose: SQuAD v1.1, v2.0 or MRQA for run_squad.py, the GLUE
task for run_glue.py. The scripts themselves are looked up when a config is read (config.py), not here: a script in
the table may be missing from a checkout, which is then reported in one paragraph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..task_data.glue import GLUE_TASKS, get_glue_task
from ..task_data.squad.reading import is_mrqa_file


@dataclass(frozen=True)
class TaskSpec:
    """A fine-tuning task: its script and that script's flags; `metric` is the score its column shows (None: the
    script's usual one), `split_by_article` a SQuAD file to split by article into train and evaluation files."""

    name: str
    script: str
    flags: dict[str, Any]
    metric: str | None = None
    split_by_article: dict[str, Any] | None = None


@dataclass(frozen=True)
class Report:
    """What one kind of fine-tuning writes: its scores (their names in results.json; eval_results.json has them after
    `eval_`), the one its column shows, whether they are fractions (shown x100) or percentages, and, for scores named
    after the data (MRQA's per-dataset ones), a pattern of further names."""

    metrics: tuple[str, ...]
    headline: str
    fractions: bool = True
    named_by_data: str | None = None


# The headlines are SpanBERT's: SQuAD F1 (Table 1), MRQA F1 (Table 2), coreference's CoNLL F1, the average of MUC,
# B-cubed and CEAF-phi4 F1 (Table 3), relation extraction F1 (Table 4); RACE and GLUE as RoBERTa reports them.
_COREF_METRICS = tuple(f"{metric}_{part}" for metric in ("muc", "b_cubed", "ceaf_phi4", "conll")
                       for part in ("precision", "recall", "f1"))  # fmt: skip
REPORTS: dict[str, dict[str, Report]] = {
    "run_squad.py": {
        "squad": Report(("exact_match", "f1"), "f1", fractions=False),
        "squad_v2": Report(("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"), "f1",
                           fractions=False),  # fmt: skip
        # Several MRQA evaluation files: each dataset's {dataset}_em/_f1, and their macro averages.
        "mrqa": Report(("macro_em", "macro_f1"), "macro_f1", fractions=False, named_by_data=r".+_(em|f1)"),
    },
    "run_glue.py": {
        name: Report(tuple(f"{metric}{split.metric_suffix}" for split in task.eval_splits for metric in task.metrics),
                     task.metrics[0])  # MRPC F1, STS-B Pearson, CoLA Matthews correlation, accuracy elsewhere
        for name, task in GLUE_TASKS.items()
    },  # fmt: skip
    "run_race.py": {"race": Report(("accuracy", "accuracy_middle", "accuracy_high"), "accuracy")},
    "run_relation.py": {"relation": Report(("precision", "recall", "f1", "accuracy"), "f1")},
    "run_coref.py": {"coref": Report(_COREF_METRICS, "conll_f1")},
}
FINETUNING_SCRIPTS = tuple(REPORTS)
# Every fine-tuning's eval_results.json key starts with it (spanroberta.finetuning.task).
EVAL_PREFIX = "eval_"


def report(task: TaskSpec) -> Report | None:
    """The table's row for the task, the variant its flags choose; None for a GLUE task_name that does not exist
    (run_glue.py's own check reports it)."""
    variants = REPORTS[task.script]
    if task.script == "run_glue.py":
        try:
            return variants[get_glue_task(str(task.flags.get("task_name"))).name]
        except ValueError:
            return None
    if task.script == "run_squad.py":
        return variants[_squad_variant(task.flags)]
    (only,) = variants.values()
    return only


def _squad_variant(flags: dict[str, Any]) -> str:
    """v2.0 by its flag; MRQA when several evaluation files are given (only MRQA files may be), or one that holds
    MRQA's layout (a file that is not there yet, such as a split_by_article file, is SQuAD's)."""
    if flags.get("version_2_with_negative"):
        return "squad_v2"
    files = [path.strip() for path in str(flags.get("validation_file") or "").split(",") if path.strip()]
    if len(files) > 1 or (files and Path(files[0]).is_file() and is_mrqa_file(Path(files[0]))):
        return "mrqa"
    return "squad"


def metric_names(task: TaskSpec) -> tuple[str, ...]:
    """The scores the task's script writes, by their names in results.json (without eval_)."""
    found = report(task)
    return found.metrics if found else ()


def known_metric(task: TaskSpec, name: str) -> bool:
    """Whether the task's script writes a score of that name: one of its metrics, or one named by its data."""
    found = report(task)
    return found is not None and (name in found.metrics or bool(
        found.named_by_data and re.fullmatch(found.named_by_data, name)))  # fmt: skip


def headline_metric(task: TaskSpec) -> str:
    """The score of the task's column: the config's `metric`, else the table's headline for the task."""
    return task.metric if task.metric is not None else report(task).headline


def scores(task: TaskSpec, eval_results: dict[str, float]) -> dict[str, float]:
    """The task's scores from its eval_results.json, on a 0-100 scale. Stops when the headline is missing: the
    script then writes other keys than the table says, and the task's column would stay empty."""
    found = report(task)
    prefix = EVAL_PREFIX
    names = [name for name in found.metrics if prefix + name in eval_results]
    if found.named_by_data:
        written = [key[len(prefix) :] for key in eval_results if key.startswith(prefix)]
        names += [name for name in written if re.fullmatch(found.named_by_data, name) and name not in names]
    headline = headline_metric(task)
    if headline not in names:
        raise UserInputError(
            f"Task {task.name!r}: {task.script}'s eval_results.json has no {prefix}{headline} (it has "
            f"{', '.join(sorted(eval_results)) or 'nothing'}), so its column would stay empty. spanroberta/ablation/"
            "tasks.py's REPORTS table says which keys each script writes: make the two agree."
        )
    scale = 100.0 if found.fractions else 1.0
    return {name: scale * float(eval_results[prefix + name]) for name in names}
