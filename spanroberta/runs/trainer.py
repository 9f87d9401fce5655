"""The Trainer every script of the project runs: transformers' Trainer, with these changes for runs that are killed,
preempted and resumed.

- **A checkpoint is whole or absent**: it is written under a temporary name (`tmp-checkpoint-N/checkpoint-N`: the
  folder transformers' `_save_checkpoint` puts it in, `_get_output_dir`, is moved for the save) and renamed to
  `checkpoint-N` by the main process once every process has written its share and the checksums are written
  (`runs.checkpoint_files.write_checksums`, so that resuming can tell a checkpoint whose bytes changed since from a
  whole one); the rotation (--save_total_limit) and `best_model_checkpoint` then see the final name
  (`runs.checkpoints`). A save cut off by a kill leaves only the temporary folder, removed when a run next trains.
- **A run resumed at its end takes no further step.** transformers 5.23's training loop checks `max_steps` only
  after each optimizer step (`DefaultFlowCallback.on_step_end`), so a run resumed from a checkpoint at its last
  step, where `max_steps` is not a whole number of epochs, trained one step more than the uninterrupted run: a run
  killed after its last checkpoint was written, then resumed, ended with other weights (by about one learning rate)
  and a loss logged at `max_steps + 1`. Here the loop is handed no batch once `global_step` has reached
  `max_steps`, and stops.
- **A preemption signal saves and stops** (SIGTERM, SIGUSR1): a checkpoint at the end of the step in progress, then
  the command that resumes it and exit status 75 (`runs.preemption`).
- **A failed save stops every process**: a checkpoint's save, and the model's at the end, ends on every process
  with an all-reduce of whether it failed anywhere (`runs.distributed.any_process`), so that no process waits
  forever at the next barrier for one that failed. A failure for want of room (a full disk, a quota, the file size
  limit) is told in one paragraph by the process that met it (`runs.full_disk`), the others stop with one line; no
  half-written checkpoint is left. Under DeepSpeed a shard's failed write is held until DeepSpeed's own barrier at
  the end of its `save_checkpoint` is passed, then raised.
- **A resume keeps the batch**: one under another batch (or, in pretraining, sequence length or masking) than the
  checkpoint's is refused, the settings that differ listed, unless --allow_changed_batch (`runs.resume_settings`).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from .checkpoint_files import write_checksums
from .checkpoints import put_in_place, remove_unfinished_saves, staged_checkpoint
from .distributed import any_process
from .full_disk import DiskFullError, SaveFailedElsewhere, full_disk_error
from .preemption import (PREEMPTED_FILE, SaveOnPreemption, catch_preemption_signals, exit_preempted,
                         stop_if_signalled)  # fmt: skip
from .resume_settings import batch_settings, check_resume_settings, write_resume_settings

TRAINER_STATE_FILE = "trainer_state.json"


def told_failure(failure: Exception, saving: Path, run_dir: Path, staging: Path | None) -> Exception:
    """`failure` of saving `saving` (into `run_dir`; written under `staging` where given) as the run stops with it: a
    full disk or a file size limit in one paragraph (`DiskFullError`), any other error as it is."""
    if isinstance(failure, (DiskFullError, SaveFailedElsewhere)):
        return failure
    left = (f"Nothing of {saving.name} is left: it was written under {staging.name}, which is removed."
            if staging is not None else
            f"The files written to {saving} may be incomplete; once there is room, the same command with "
            "--resume_from_checkpoint true writes them again.")  # fmt: skip
    written = staging if staging is not None else saving
    return full_disk_error(failure, saving, run_dir, written, left) or failure


class RunTrainer(Trainer):
    """transformers' Trainer whose checkpoints are whole or absent and carry their checksums, which stops a run
    resumed at or past `max_steps` before it takes a step, saves and exits on a preemption signal, and stops every
    process on a failed save, naming a full disk (see above)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.preemption = SaveOnPreemption()
        self.add_callback(self.preemption)
        self._preempt_saved = False
        # While a checkpoint is saved: the staging folder that `_get_output_dir` names for transformers' save.
        self._staging_folder: Path | None = None
        # Saved with each checkpoint and compared at a resume; a script adds what else a step's meaning depends on.
        self.resume_settings: dict[str, Any] = batch_settings(self.args)

    def train(self, resume_from_checkpoint: str | bool | None = None, *args: Any, **kwargs: Any) -> Any:
        # --auto_find_batch_size picks the batch itself, lower after an out-of-memory: nothing to compare.
        if isinstance(resume_from_checkpoint, str) and not self.args.auto_find_batch_size:
            check_resume_settings(Path(resume_from_checkpoint), self.resume_settings, self.args.allow_changed_batch,
                                  max(1, self.args.n_gpu))  # fmt: skip
        if self.is_world_process_zero():
            (Path(self.args.output_dir) / PREEMPTED_FILE).unlink(missing_ok=True)
            remove_unfinished_saves(self.args.output_dir)
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

    def _get_output_dir(self, trial: Any) -> str:
        return str(self._staging_folder) if self._staging_folder is not None else super()._get_output_dir(trial)

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        checkpoint = Path(self._get_output_dir(trial=trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        staged = staged_checkpoint(checkpoint)
        with self._stop_every_process_on_failure(checkpoint, staged.parent):
            if self.is_world_process_zero():
                staged.mkdir(parents=True, exist_ok=True)
                write_resume_settings(staged, self.resume_settings)
        # transformers' save runs collectives (the FLOPs' all-gather, a barrier, DeepSpeed's): a failure is agreed
        # where every process stands at the same place, or the others would wait in one the failed process skipped.
        # Hence the agreement above, one after the weights (`save_model`) and one after the whole save.
        with self._stop_every_process_on_failure(checkpoint, staged.parent):
            self._staging_folder = staged.parent
            try:
                super()._save_checkpoint(model, trial)
            finally:
                self._staging_folder = None
            # transformers names the best checkpoint where it found it: this one, still under its staging name.
            if self.state.best_model_checkpoint == str(staged):
                self.state.best_model_checkpoint = str(checkpoint)
                if self.args.should_save:
                    self.state.save_to_json(str(staged / TRAINER_STATE_FILE))
        # Every process has written its share (the all-reduce above is the barrier): the main one puts it in place.
        with self._stop_every_process_on_failure(checkpoint, staged.parent):
            if self.is_world_process_zero():
                write_checksums(staged)
                put_in_place(staged, checkpoint)
                # transformers' rotation ran in the staging folder, where it had nothing to delete.
                rotate_checkpoints(output_dir=str(checkpoint.parent), save_total_limit=self.args.save_total_limit,
                                   best_model_checkpoint=self.state.best_model_checkpoint, use_mtime=True)  # fmt: skip

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        if self._staging_folder is not None:
            # A checkpoint's weights: `_save_checkpoint` names a failure once every process has written its share.
            checkpoint = self._staging_folder.parent / Path(output_dir).name
            with self._stop_every_process_on_failure(checkpoint, None, name_failure=False):
                super().save_model(output_dir, _internal_call)
            return
        with self._stop_every_process_on_failure(Path(output_dir or self.args.output_dir), None):
            super().save_model(output_dir, _internal_call)

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        engine = getattr(self.model_wrapped, "checkpoint_engine", None) if self.is_deepspeed_enabled else None
        if engine is None:
            return super()._save_optimizer_and_scheduler(output_dir)
        # DeepSpeed's save_checkpoint ends at a barrier: a process whose shard failed to write goes on to it, so
        # that the others are not left waiting there, and raises the failure after it.
        failures: list[Exception] = []
        write = engine.save

        def write_or_record(*args: Any, **kwargs: Any) -> Any:
            try:
                return write(*args, **kwargs)
            except Exception as error:  # any: raised again once DeepSpeed's barrier is passed
                failures.append(error)

        engine.save = write_or_record
        try:
            super()._save_optimizer_and_scheduler(output_dir)
        finally:
            engine.save = write
        if failures:
            raise failures[0]

    @contextlib.contextmanager
    def _stop_every_process_on_failure(self, saving: Path, staging: Path | None,
                                       name_failure: bool = True) -> Iterator[None]:  # fmt: skip
        """Every process runs the block, then learns whether it failed on any: if so, the main process removes the
        `staging` folder (when given), the process whose block failed for want of room raises the one-paragraph
        `DiskFullError` (with `name_failure`; else its error as it is), one whose block raised another error raises
        that error, and the others `SaveFailedElsewhere`. Blocks nest: a failure agreed inside is agreed again, by
        every process, outside."""
        failure = None
        try:
            yield
        except Exception as error:  # any: the other processes must learn of it before their next barrier
            failure = error
        # Told before the agreement: after it, the main process removes the staging folder that the telling reads.
        told = (told_failure(failure, saving, Path(self.args.output_dir), staging)
                if failure is not None and name_failure else failure)
        if not any_process(failure is not None, self.args.device):
            return
        if staging is not None and self.is_world_process_zero():
            shutil.rmtree(staging, ignore_errors=True)
        if told is None:
            raise SaveFailedElsewhere(f"Saving {saving} failed on another process of this run (its message says "
                                      "why); this process stops too.")  # fmt: skip
        if told is failure:
            raise failure
        raise told from None

    def get_batch_samples(self, epoch_iterator: Any, num_batches: int, device: torch.device) -> tuple[list, Any]:
        if 0 < self.state.max_steps <= self.state.global_step:
            # No batch: the loop takes no step, sees the stop and ends training as the uninterrupted run did.
            self.control.should_training_stop = True
            return [], None
        return super().get_batch_samples(epoch_iterator, num_batches, device)
