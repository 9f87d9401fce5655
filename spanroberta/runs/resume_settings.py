"""Resuming with the settings a checkpoint was trained with. A checkpoint's step count, epoch and place in the data
mean something only under the batch that trained it: transformers' Trainer resumed with another batch size per
device, gradient accumulation or number of processes skips the saved number of *new* batches, so its epoch, the data
it has seen and the data it sees next are no longer the uninterrupted run's, with one warning. The pretraining run
adds its sequence length and masking, which change what a step trains on.

Each checkpoint holds these settings (`RESUME_SETTINGS_FILE`, written with it); a resume under other values is
refused with the differences listed, unless `--allow_changed_batch` (then it goes on as transformers would, with a
warning). A checkpoint saved before the file existed is checked on its `trainer_state.json`'s `train_batch_size`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transformers import TrainingArguments

from ..errors import UserInputError

logger = logging.getLogger(__name__)

RESUME_SETTINGS_FILE = "spanroberta_resume_settings.json"


def batch_settings(args: TrainingArguments) -> dict[str, Any]:
    """The settings of `args` that make up a step's batch."""
    return {
        "per_device_train_batch_size": args.per_device_train_batch_size,
        "gradient_accumulation_steps": args.gradient_accumulation_steps,
        "processes": args.world_size,
    }


def write_resume_settings(checkpoint: Path, settings: Mapping[str, Any]) -> None:
    (checkpoint / RESUME_SETTINGS_FILE).write_text(json.dumps(dict(settings), indent=1) + "\n", encoding="utf-8")


def saved_settings(checkpoint: Path, devices_per_process: int = 1) -> dict[str, Any]:
    """The settings `checkpoint` was saved under; for one without RESUME_SETTINGS_FILE, the batch size per device
    from its `trainer_state.json` (empty when that says nothing), whose `train_batch_size` counts every device of a
    process (transformers' DataParallel: `devices_per_process`, taken to be the resumed run's)."""
    listing = checkpoint / RESUME_SETTINGS_FILE
    if listing.is_file():
        return json.loads(listing.read_text(encoding="utf-8"))
    state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    batch = state.get("train_batch_size")
    return {} if batch is None else {"per_device_train_batch_size": batch // max(1, devices_per_process)}


def changed_settings(checkpoint: Path, current: Mapping[str, Any], devices_per_process: int = 1) -> list[str]:
    """Each setting that differs between `checkpoint` and `current`, as "name saved there, now here"."""
    saved = saved_settings(checkpoint, devices_per_process)
    return [f"{name} {saved[name]} there, {current[name]} now" for name in current
            if name in saved and saved[name] != current[name]]  # fmt: skip


def check_resume_settings(checkpoint: Path, current: Mapping[str, Any], allow_changed: bool,
                          devices_per_process: int = 1) -> None:
    """Refuses to resume from `checkpoint` under settings other than those it was saved under (`changed_settings`),
    naming each; with `allow_changed`, warns instead."""
    differ = changed_settings(checkpoint, current, devices_per_process)
    if not differ:
        return
    if allow_changed:
        logger.warning("Resuming from %s under other settings (%s), as --allow_changed_batch allows: steps, epochs "
                       "and the data skipped are counted in the new batches.",
                       checkpoint, "; ".join(differ))  # fmt: skip
        return
    raise UserInputError(
        f"--resume_from_checkpoint: {checkpoint} was trained under other settings ({'; '.join(differ)}). Resumed so, "
        "its steps, epoch and place in the data would count batches other than those it trained, and the run would "
        "no longer be the one saved. Resume with the checkpoint's settings, or add --allow_changed_batch to go on "
        "anyway (the steps, epochs and data skipped are then counted in the new batches)."
    )
