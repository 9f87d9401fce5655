"""The units of an ablation and their folders under --output_dir.

A unit is one pretraining (an arm, with a pretraining seed when several are asked for) or one fine-tuning (an
arm's model on a task with a seed). Each has a folder holding

    model/        the script's --output_dir (a fine-tuning's weights are deleted once scored, unless kept)
    flags.json    the script's flags: `python run_squad.py DIR/finetuning/ARM/TASK/seed-1/flags.json` redoes it
    result.json   written last, atomically: the unit is done exactly when this file exists

    DIR/pretraining/ARM[/pretraining-seed-P]/
    DIR/finetuning/ARM[/pretraining-seed-P]/TASK/seed-S/
    DIR/finetuning/starting-checkpoint/TASK/seed-S/        the starting checkpoint as it is (no pretraining unit)
    DIR/data/TASK/{train,validation}.json      a `split_by_article` task's files

result.json also records the unit's `identity` (the config settings it was run with); a later run whose config
gives the unit other settings stops rather than mix results of two configs in one table.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..runs.checkpoints import checkpoint_problem, find_checkpoints, previous_run_files
from .config import PRETRAINING_SCRIPT, STARTING_CHECKPOINT, AblationConfig, parse_pretraining

RESULT_FILE = "result.json"
FLAGS_FILE = "flags.json"
MODEL_FOLDER = "model"


@dataclass(frozen=True)
class Unit:
    arm: str
    pretraining_seed: int | None = None
    # None for a pretraining unit.
    task: str | None = None
    seed: int | None = None

    @property
    def is_pretraining(self) -> bool:
        return self.task is None

    @property
    def is_starting_checkpoint(self) -> bool:
        """A fine-tuning of the starting checkpoint as it is (finetune_starting_checkpoint): no pretraining unit."""
        return self.arm == STARTING_CHECKPOINT

    def arm_folder(self) -> Path:
        folder = Path(self.arm)
        return folder if self.pretraining_seed is None else folder / f"pretraining-seed-{self.pretraining_seed}"

    def folder(self, root: Path) -> Path:
        if self.is_pretraining:
            return root / "pretraining" / self.arm_folder()
        return root / "finetuning" / self.arm_folder() / self.task / f"seed-{self.seed}"

    def pretraining_unit(self) -> Unit:
        return Unit(self.arm, self.pretraining_seed)

    def describe(self) -> str:
        arm = self.arm if self.pretraining_seed is None else f"{self.arm} (pretraining seed {self.pretraining_seed})"
        if self.is_starting_checkpoint:
            return f"fine-tuning the starting checkpoint on {self.task}, seed {self.seed}"
        if self.is_pretraining:
            return f"pretraining arm {arm}"
        return f"fine-tuning arm {arm} on {self.task}, seed {self.seed}"


def plan(config: AblationConfig) -> list[Unit]:
    """Every arm's pretraining first (so that the loss curves of all arms come early), then every fine-tuning, those
    of the starting checkpoint (when asked for) first."""
    pretraining_seeds = config.pretraining_seeds or (None,)
    pretrainings = [Unit(arm, seed) for arm in config.arms for seed in pretraining_seeds]
    starts = [Unit(STARTING_CHECKPOINT)] * config.finetune_starting_checkpoint
    finetunings = [Unit(unit.arm, unit.pretraining_seed, task, seed)
                   for unit in starts + pretrainings for task in config.tasks for seed in config.seeds]  # fmt: skip
    return pretrainings + finetunings


def identity(config: AblationConfig, unit: Unit) -> dict[str, Any]:
    """The config settings that make the unit what it is; a fine-tuning's include its arm's (the starting
    checkpoint's: its path)."""
    if unit.is_starting_checkpoint:
        pretraining = {"starting_checkpoint": config.pretraining["model_name_or_path"]}
    else:
        pretraining = {"flags": {**config.pretraining, **config.arms[unit.arm]}, "token_budget": config.token_budget,
                       "pretraining_seed": unit.pretraining_seed}  # fmt: skip
    if unit.is_pretraining:
        return pretraining
    task = config.tasks[unit.task]
    return {"pretraining": pretraining, "script": task.script, "flags": task.flags,
            "split_by_article": task.split_by_article, "seed": unit.seed}  # fmt: skip


def unit_flags(config: AblationConfig, unit: Unit, root: Path, world_size: int) -> dict[str, Any]:
    """The flags the unit's script runs with: the config's, plus the folder, model, seed and steps it gets."""
    output_dir = str(unit.folder(root) / MODEL_FOLDER)
    if unit.is_pretraining:
        flags = {**config.pretraining, **config.arms[unit.arm], "output_dir": output_dir}
        if unit.pretraining_seed is not None:
            flags["seed"] = unit.pretraining_seed
        if config.token_budget is not None:
            flags["max_steps"] = steps_for_budget(config.token_budget, flags, world_size)
        return flags
    task = config.tasks[unit.task]
    model = (config.pretraining["model_name_or_path"] if unit.is_starting_checkpoint
             else str(unit.pretraining_unit().folder(root) / MODEL_FOLDER))  # fmt: skip
    flags = {**task.flags, "model_name_or_path": model,
             "seed": unit.seed, "do_train": True, "do_eval": True, "output_dir": output_dir}  # fmt: skip
    if task.split_by_article is not None:
        flags.update(split_files(root, task.name))
    return flags


def steps_for_budget(token_budget: int, flags: dict[str, Any], world_size: int) -> int:
    """Optimizer steps that show at least `token_budget` token slots (blocks x block length), whatever the number
    of processes: the budget is the same for every arm and every launch."""
    return math.ceil(token_budget / token_slots_per_step(flags, world_size))


def token_slots_per_step(flags: dict[str, Any], world_size: int) -> int:
    """Blocks x block length of one optimizer step: per-device batch x accumulation x processes x max_seq_length,
    with the values run_pretraining.py resolves (the recipe's and the demo's defaults included)."""
    _, data_args, training_args = parse_pretraining(flags)
    return (training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps * world_size
            * data_args.max_seq_length)  # fmt: skip


def split_files(root: Path, task: str) -> dict[str, str]:
    folder = root / "data" / task
    return {"train_file": str(folder / "train.json"), "validation_file": str(folder / "validation.json")}


def script_of(config: AblationConfig, unit: Unit) -> str:
    return PRETRAINING_SCRIPT if unit.is_pretraining else config.tasks[unit.task].script


def read_result(config: AblationConfig, unit: Unit, root: Path) -> dict[str, Any] | None:
    """The unit's result, or None when it has not finished. Raises when it was run with other settings."""
    path = unit.folder(root) / RESULT_FILE
    if not path.is_file():
        return None
    result = json.loads(path.read_text(encoding="utf-8"))
    if result.get("identity") != json.loads(json.dumps(identity(config, unit))):
        raise UserInputError(
            f"{root} holds a finished {unit.describe()} that was run with other settings than {config.path} gives it "
            f"(see {path}). One table must not mix two configs: use another --output_dir, or delete "
            f"{unit.folder(root)} (and the fine-tunings of a changed arm) to redo it with the new settings."
        )
    return result


def start_flags(unit_folder: Path) -> dict[str, Any]:
    """How an unfinished unit starts: from its latest complete checkpoint when an earlier attempt left one, over
    the files of an attempt that left none, or afresh."""
    model_dir = unit_folder / MODEL_FOLDER
    if any(checkpoint_problem(folder) is None for _, folder in find_checkpoints(model_dir)):
        return {"resume_from_checkpoint": "true"}
    if previous_run_files(model_dir):
        return {"overwrite_output_dir": "true"}
    return {}


def write_json_atomically(path: Path, content: Any) -> None:
    """Writes to a temporary file in the same folder and renames it: a reader sees the whole file or none."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False,
                                     encoding="utf-8") as file:  # fmt: skip
        json.dump(content, file, indent=2)
        file.write("\n")
    os.replace(file.name, path)
