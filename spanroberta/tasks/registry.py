"""The fine-tuning tasks, each declared once in its folder (a `FineTuningTask`, run by spanroberta.finetuning.task's
`run_task`): the run_*.py scripts run them, and so does the ablation driver, by name or by their script's name, from
an installed package as from a checkout. A new task is a folder beside these, its run_*.py script, and its entry
here."""

from __future__ import annotations

from spanroberta.errors import UserInputError
from spanroberta.finetuning.task import FineTuningTask
from spanroberta.tasks.coreference.task import COREFERENCE
from spanroberta.tasks.glue.task import GLUE
from spanroberta.tasks.race.task import RACE
from spanroberta.tasks.relation.task import RELATION
from spanroberta.tasks.squad.task import SQUAD

FINETUNING_TASKS: dict[str, FineTuningTask] = {task.name: task for task in (SQUAD, GLUE, RACE, RELATION, COREFERENCE)}
# An ablation config names a task by the script that runs it (`script: run_squad.py`).
TASKS_BY_SCRIPT: dict[str, FineTuningTask] = {task.script: task for task in FINETUNING_TASKS.values()}


def task_of_script(script: str) -> FineTuningTask:
    """The task that `script` (run_squad.py, ...) runs."""
    if script not in TASKS_BY_SCRIPT:
        raise UserInputError(f"No fine-tuning task is run by {script!r}; the scripts are {', '.join(TASKS_BY_SCRIPT)}.")
    return TASKS_BY_SCRIPT[script]
