"""The Trainer every script of the project runs: transformers' Trainer, with two changes for runs that are killed and
resumed.

- **Every checkpoint carries its checksums** (`runs.checkpoint_files.write_checksums`), written once every process
  has saved its files, so that resuming can tell a checkpoint whose bytes changed since from a whole one, and a
  mark while it is being saved, so that one cut off before its checksums is not taken for whole.
- **A run resumed at its end takes no further step.** transformers 5.23's training loop checks `max_steps` only
  after each optimizer step (`DefaultFlowCallback.on_step_end`), so a run resumed from a checkpoint at its last
  step, where `max_steps` is not a whole number of epochs, trained one step more than the uninterrupted run: a run
  killed after its last checkpoint was written, then resumed, ended with other weights (by about one learning rate)
  and a loss logged at `max_steps + 1`. Here the loop is handed no batch once `global_step` has reached
  `max_steps`, and stops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .checkpoint_files import SAVING_MARK, write_checksums


class ChecksumsOnSave(TrainerCallback):
    """Writes the checksums of the checkpoint just saved, from the main process, once every process has written
    its share of it (its RNG state; under DeepSpeed, its shards); that removes the checkpoint's saving mark."""

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.barrier()
        checkpoint = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if state.is_world_process_zero and checkpoint.is_dir():
            write_checksums(checkpoint)


class RunTrainer(Trainer):
    """transformers' Trainer whose checkpoints carry their checksums, and which stops a run resumed at or past
    `max_steps` before it takes a step (see above)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.add_callback(ChecksumsOnSave())

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        # The mark goes into the folder before its first file (transformers has no callback before a save), from
        # the process that writes the checksums, which remove it.
        if self.is_world_process_zero():
            folder = Path(self._get_output_dir(trial=trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / SAVING_MARK).touch()
        super()._save_checkpoint(model, trial)

    def get_batch_samples(self, epoch_iterator: Any, num_batches: int, device: torch.device) -> tuple[list, Any]:
        if 0 < self.state.max_steps <= self.state.global_step:
            # No batch: the loop takes no step, sees the stop and ends training as the uninterrupted run did.
            self.control.should_training_stop = True
            return [], None
        return super().get_batch_samples(epoch_iterator, num_batches, device)
