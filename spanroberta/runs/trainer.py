"""The Trainer every script of the project runs: transformers' Trainer, with these changes for runs that are killed,
preempted and resumed.

- **Every checkpoint carries its checksums** (`runs.checkpoint_files.write_checksums`), written once every process
  has saved its files, so that resuming can tell a checkpoint whose bytes changed since from a whole one, and a
  mark while it is being saved, so that one cut off before its checksums is not taken for whole.
- **A run resumed at its end takes no further step.** transformers 5.23's training loop checks `max_steps` only
  after each optimizer step (`DefaultFlowCallback.on_step_end`), so a run resumed from a checkpoint at its last
  step, where `max_steps` is not a whole number of epochs, trained one step more than the uninterrupted run: a run
  killed after its last checkpoint was written, then resumed, ended with other weights (by about one learning rate)
  and a loss logged at `max_steps + 1`. Here the loop is handed no batch once `global_step` has reached
  `max_steps`, and stops.
- **A preemption signal saves and stops** (SIGTERM, SIGUSR1): a checkpoint at the end of the step in progress, then
  the command that resumes it and exit status 75 (`runs.preemption`).
- **A full disk is named**: a save that fails for want of space stops the run with one paragraph, leaving no
  half-written checkpoint (`runs.full_disk`).
- **A resume keeps the batch**: one under another batch (or, in pretraining, sequence length or masking) than the
  checkpoint's is refused, the settings that differ listed, unless --allow_changed_batch (`runs.resume_settings`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .checkpoint_files import SAVING_MARK, write_checksums
from .full_disk import full_disk_error
from .preemption import (PREEMPTED_FILE, SaveOnPreemption, catch_preemption_signals, exit_preempted,
                         stop_if_signalled)  # fmt: skip
from .resume_settings import batch_settings, check_resume_settings, write_resume_settings


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
    """transformers' Trainer whose checkpoints carry their checksums, which stops a run resumed at or past
    `max_steps` before it takes a step, saves and exits on a preemption signal, and names a full disk (see
    above)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.add_callback(ChecksumsOnSave())
        self.preemption = SaveOnPreemption()
        self.add_callback(self.preemption)
        self._preempt_saved = False
        # Saved with each checkpoint and compared at a resume; a script adds what else a step's meaning depends on.
        self.resume_settings: dict[str, Any] = batch_settings(self.args)

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any) -> Any:
        # --auto_find_batch_size picks the batch itself, lower after an out-of-memory: nothing to compare.
        if isinstance(resume_from_checkpoint, str) and not self.args.auto_find_batch_size:
            check_resume_settings(Path(resume_from_checkpoint), self.resume_settings, self.args.allow_changed_batch,
                                  max(1, self.args.n_gpu))  # fmt: skip
        if self.is_world_process_zero():
            (Path(self.args.output_dir) / PREEMPTED_FILE).unlink(missing_ok=True)
        # A signal noted while the model loaded stops every process before a step; a later one saves at the first.
        stop_if_signalled(self.args.output_dir, self.is_world_process_zero())
        with catch_preemption_signals(self.preemption):
            result = super().train(resume_from_checkpoint, *args, **kwargs)
        if self.preemption.stopped_at is not None:
            exit_preempted(self.preemption.requested_by, self.preemption.stopped_at, self.args.output_dir,
                           self.is_world_process_zero())  # fmt: skip
        return result

    def _maybe_log_save_evaluate(self, tr_loss: Any, grad_norm: Any, model: torch.nn.Module, trial: Any, *args: Any,
                                 **kwargs: Any) -> None:
        if self.preemption.stopped_at is not None:
            # Preempted: the checkpoint is saved once, at the step agreed, with no evaluation first (its time is the
            # grace period's, and --save_strategy best would save only a new best); the epoch's end saves no second
            # one.
            self.control.should_evaluate = False
            self.control.should_save = not self._preempt_saved
            self._preempt_saved = True
        super()._maybe_log_save_evaluate(tr_loss, grad_norm, model, trial, *args, **kwargs)

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        # The mark goes into the folder before its first file (transformers has no callback before a save), from
        # the process that writes the checksums, which remove it.
        folder = Path(self._get_output_dir(trial=trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        try:
            if self.is_world_process_zero():
                folder.mkdir(parents=True, exist_ok=True)
                (folder / SAVING_MARK).touch()
                write_resume_settings(folder, self.resume_settings)
            super()._save_checkpoint(model, trial)
        except Exception as error:
            disk_full = full_disk_error(error, folder, remove=self.is_world_process_zero())
            if disk_full is None:
                raise
            raise disk_full from None

    def get_batch_samples(self, epoch_iterator: Any, num_batches: int, device: torch.device) -> tuple[list, Any]:
        if 0 < self.state.max_steps <= self.state.global_step:
            # No batch: the loop takes no step, sees the stop and ends training as the uninterrupted run did.
            self.control.should_training_stop = True
            return [], None
        return super().get_batch_samples(epoch_iterator, num_batches, device)
