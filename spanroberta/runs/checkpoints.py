"""Choosing the checkpoint to resume from, skipping checkpoints that a kill left half-written, and the folder names a
checkpoint is saved under.

A checkpoint is written under a temporary name, `tmp-checkpoint-N/checkpoint-N` (transformers' Trainer names the
checkpoint folder itself; the run's `RunTrainer` only moves the folder it is put in), and renamed to `checkpoint-N`
by the main process once every process has written its share and the checksums are written (`put_in_place`). The
name `tmp-checkpoint-N` is not one that `find_checkpoints`, transformers' `get_last_checkpoint` (`^checkpoint-N$`)
or its rotation (`checkpoint-*` globbed in the run folder) takes for a checkpoint, so no reader ever sees half of
one, and a save cut off by a kill leaves only a temporary folder, removed with one line when a run next trains
there (`remove_unfinished_saves`); it is never resumed from.

Checkpoints written before that were saved in place: transformers' Trainer writes weights first, then optimizer,
scheduler and RNG states, and `trainer_state.json` last, so a run killed while saving left a `checkpoint-N` folder
without a valid `trainer_state.json` (with 5.23: only the config and code files). Here a checkpoint counts only
when its `trainer_state.json` parses and its weights are there; incomplete ones are moved aside to
`incomplete-checkpoint-N` (which the Trainer's checkpoint globbing and rotation ignore), so the previous
complete checkpoint is used and the folder is clean for the save that will redo step N. A checkpoint whose
`trainer_state.json` is whole can still hold a damaged file (a full disk, a copy cut short): every file is checked
too (`checkpoint_files`), and such a checkpoint is moved aside alike. Nothing is deleted: a name already taken by an
earlier one gets a number.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from pathlib import Path

from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..errors import UserInputError
from .checkpoint_files import checkpoint_file_problem

logger = logging.getLogger(__name__)

_CHECKPOINT = re.compile(rf"^{PREFIX_CHECKPOINT_DIR}-(\d+)$")
# What save_model writes: safetensors or torch weights, whole or sharded (with an index), or a PEFT adapter;
# DeepSpeed and FSDP write their own folders (global_stepN/, pytorch_model_fsdp_0/).
_WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "adapter_model.safetensors",
    "adapter_model.bin",
)
_WEIGHT_FOLDER_PREFIXES = ("global_step", "pytorch_model_fsdp")
INCOMPLETE_PREFIX = "incomplete-"
STAGING_PREFIX = "tmp-"


def staged_checkpoint(checkpoint: Path) -> Path:
    """Where the checkpoint to be named `checkpoint` (`run/checkpoint-N`) is written:
    `run/tmp-checkpoint-N/checkpoint-N` (the Trainer names the last folder; its staging folder is the one above)."""
    return checkpoint.parent / f"{STAGING_PREFIX}{checkpoint.name}" / checkpoint.name


def put_in_place(staged: Path, checkpoint: Path) -> None:
    """Renames the whole checkpoint `staged` to `checkpoint` and removes its staging folder. A `checkpoint` already
    there (a run resumed from an earlier checkpoint saves the same step again) is moved into the staging folder
    first, and removed with it, so that the name always holds one whole checkpoint."""
    if checkpoint.exists():
        os.replace(checkpoint, staged.parent / "replaced")
    os.replace(staged, checkpoint)
    shutil.rmtree(staged.parent)


def remove_unfinished_saves(output_dir: str | os.PathLike) -> None:
    """Removes the staging folders (`tmp-checkpoint-N`) of saves cut off before they were complete, one line each."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return
    for folder in sorted(output_dir.glob(f"{STAGING_PREFIX}{PREFIX_CHECKPOINT_DIR}-*")):
        shutil.rmtree(folder)
        logger.warning("Removed %s: a save of step %s cut off before it was complete (its checkpoint was never put "
                       "in place); the step is saved again when the run reaches it.", folder,
                       folder.name.rsplit("-", 1)[-1])  # fmt: skip


def checkpoint_problem(folder: str | os.PathLike) -> str | None:
    """Why `folder` is not a complete checkpoint, or None when it is one."""
    folder = Path(folder)
    if not folder.is_dir():
        return "it is not a folder"
    state_file = folder / "trainer_state.json"
    if not state_file.is_file():
        return "trainer_state.json is missing (the run was probably killed while saving it)"
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return "trainer_state.json is truncated"
    if not isinstance(state, dict) or "global_step" not in state:
        return "trainer_state.json holds no global_step"
    has_weights = any((folder / name).is_file() for name in _WEIGHT_FILES) or any(
        entry.is_dir() and entry.name.startswith(_WEIGHT_FOLDER_PREFIXES) for entry in folder.iterdir()
    )
    if not has_weights:
        return "it holds no model weights"
    return checkpoint_file_problem(folder)


def find_checkpoints(output_dir: str | os.PathLike) -> list[tuple[int, Path]]:
    """The `checkpoint-N` folders of `output_dir` as (N, path), newest first."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = [(int(match[1]), entry) for entry in output_dir.iterdir() if (match := _CHECKPOINT.match(entry.name))]
    return sorted(found, reverse=True)


def previous_run_files(output_dir: str | os.PathLike) -> list[str]:
    """What in `output_dir` a finished or interrupted training run left: checkpoints, weights, trainer state."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    checkpoints = [folder.name for _, folder in find_checkpoints(output_dir)]
    files = [name for name in (*_WEIGHT_FILES, "trainer_state.json") if (output_dir / name).is_file()]
    return checkpoints + files


def resolve_resume_checkpoint(
    resume_from_checkpoint: str | bool | None, output_dir: str
) -> tuple[str | None, list[tuple[Path, str]]]:
    """The checkpoint folder to resume from, and the incomplete checkpoints newer than it with what is wrong with
    each.

    `resume_from_checkpoint` is None/False/"false" (start afresh), True/"true" (the latest complete checkpoint
    of `output_dir`) or a folder (which must be complete). Raises a `UserInputError` when there is nothing to
    resume from.
    """
    if isinstance(resume_from_checkpoint, str) and resume_from_checkpoint.lower() in ("true", "false"):
        resume_from_checkpoint = resume_from_checkpoint.lower() == "true"
    if not resume_from_checkpoint:
        return None, []
    if resume_from_checkpoint is not True:
        problem = checkpoint_problem(resume_from_checkpoint)
        if problem:
            raise UserInputError(
                f"--resume_from_checkpoint {resume_from_checkpoint} is not a complete checkpoint: {problem}. Give "
                "another checkpoint folder, or `true` for the latest complete one in --output_dir."
            )
        return str(resume_from_checkpoint), []
    incomplete = []
    for step, folder in find_checkpoints(output_dir):
        problem = checkpoint_problem(folder)
        if problem is None:
            return str(folder), incomplete
        incomplete.append((folder, problem))
    raise UserInputError(
        f"--resume_from_checkpoint true: {output_dir} holds no complete checkpoint to resume from"
        f"{' (only incomplete ones)' if incomplete else ''}. Leave the flag out to start training afresh."
    )


def set_aside(incomplete: list[tuple[Path, str]], resumed_from: str) -> None:
    """Renames each incomplete `checkpoint-N` to `incomplete-checkpoint-N` (`incomplete-checkpoint-N.2`, ... when
    an earlier one has that name), saying why and which checkpoint the run resumes from instead."""
    for folder, problem in incomplete:
        target = folder.with_name(INCOMPLETE_PREFIX + folder.name)
        number = 1
        while target.exists():
            number += 1
            target = folder.with_name(f"{INCOMPLETE_PREFIX}{folder.name}.{number}")
        os.replace(folder, target)
        logger.warning("Not resuming from %s: %s. It is moved aside, as it is, to %s; the run resumes from %s, the "
                       "newest complete checkpoint.", folder, problem, target, resumed_from)  # fmt: skip


def resume_checkpoint(trainer: Trainer) -> str | None:
    """The checkpoint that `trainer.train` should resume from under `--resume_from_checkpoint` (None: start
    afresh), after the incomplete newer ones are moved aside; checks that it was written by a run with this
    model's shape, and logs which one it is."""
    args = trainer.args
    checkpoint, incomplete = resolve_resume_checkpoint(args.resume_from_checkpoint, args.output_dir)
    # Every process has chosen its checkpoint before the main one renames the incomplete ones.
    trainer.accelerator.wait_for_everyone()
    if checkpoint is None:
        return None
    if args.should_save:
        set_aside(incomplete, checkpoint)
    _check_same_model(Path(checkpoint), trainer.model.config)
    step = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))["global_step"]
    logger.warning("Resuming from %s (step %d): its weights, optimizer, scheduler, data order and RNG states.",
                   checkpoint, step)  # fmt: skip
    return checkpoint


# Settings that change the shape of the weights: a checkpoint that differs in one came from another run.
_SHAPE_SETTINGS = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                   "max_position_embeddings", "num_labels")  # fmt: skip


def _check_same_model(checkpoint: Path, config) -> None:
    config_file = checkpoint / "config.json"
    if not config_file.is_file():
        return
    saved = json.loads(config_file.read_text(encoding="utf-8"))
    current = config.to_dict()
    current["num_labels"] = config.num_labels
    if "id2label" in saved:
        saved["num_labels"] = len(saved["id2label"])
    differ = [f"{key} {saved[key]} there, {current[key]} here" for key in _SHAPE_SETTINGS
              if key in saved and key in current and saved[key] != current[key]]  # fmt: skip
    if differ:
        raise UserInputError(
            f"--resume_from_checkpoint: {checkpoint} was written by a run with another model ({'; '.join(differ)}), "
            "so it cannot be resumed with these settings. Resume with that run's settings, or start afresh in a new "
            "--output_dir."
        )
