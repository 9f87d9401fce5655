"""The fine-tuning tasks, each declared once (a `FineTuningTask`, run by spanroberta.finetuning.task's
`run_task`): the run_*.py scripts run them, and so does the ablation driver, by name or by their script's name, from
an installed package as from a checkout."""

from __future__ import annotations

from ..errors import UserInputError
from .task import FineTuningTask
from .coreference_task import COREFERENCE
from .glue_task import GLUE
from .race_task import RACE
from .relation_task import RELATION
from .squad_task import SQUAD

FINETUNING_TASKS: dict[str, FineTuningTask] = {task.name: task for task in (SQUAD, GLUE, RACE, RELATION, COREFERENCE)}
# An ablation config names a task by the script that runs it (`script: run_squad.py`).
TASKS_BY_SCRIPT: dict[str, FineTuningTask] = {task.script: task for task in FINETUNING_TASKS.values()}


def task_of_script(script: str) -> FineTuningTask:
    """The task that `script` (run_squad.py, ...) runs."""
    if script not in TASKS_BY_SCRIPT:
        raise UserInputError(f"No fine-tuning task is run by {script!r}; the scripts are {', '.join(TASKS_BY_SCRIPT)}.")
    return TASKS_BY_SCRIPT[script]
