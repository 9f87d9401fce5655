"""Graceful preemption: a run told to stop (SIGTERM, or SIGUSR1) finishes the optimizer step in progress, saves a
complete checkpoint, says in one line where it is and how to resume, and exits with `PREEMPTED_EXIT_CODE`.

SLURM (`--signal`), Kubernetes and spot instances send SIGTERM, then SIGKILL after a grace period; SLURM can send
SIGUSR1 some time ahead instead. The signal handler only sets a flag (saving from inside a handler would interrupt a
step, or another save, half-way); `SaveOnPreemption.on_step_end` reads it once each optimizer step has ended. In a
distributed run the flag is all-reduced first, so that every process stops after the same step, even when the
signal reached only some of them or reached them during different steps: the save is collective (DeepSpeed's
shards, the barrier before the checksums). That costs one 1-element all-reduce per optimizer step, and only where
torch.distributed is initialised. It runs on a CPU tensor over a gloo group of its own (the run's own group where
that is gloo already), so that it never waits for the GPU: an NCCL all-reduce read back with `.item()` would make
every step wait on the host.

The exit code is 75 (EX_TEMPFAIL in sysexits.h: a temporary failure, to be tried again), not 143 (128 + SIGTERM,
what a shell reports for a process the signal killed): a job script can tell a run that saved and stopped from one
that was killed without saving, and requeue it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .distributed import finish_processes

PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
PREEMPTED_EXIT_CODE = 75
RESUME_FLAG = "--resume_from_checkpoint"
# Written into the output folder by a preempted run's main process, removed when a run trains there again: under a
# launcher (accelerate launch, torchrun, deepspeed) the job sees the launcher's status, not the processes' 75.
PREEMPTED_FILE = "spanroberta_preempted.json"


class SaveOnPreemption(TrainerCallback):
    """Stops training, with a checkpoint saved, at the end of the first optimizer step after a preemption signal
    (`requested_by`, set by `catch_preemption_signals`); `stopped_at` is then the step saved."""

    def __init__(self) -> None:
        self.requested_by: str | None = None
        self.stopped_at: int | None = None
        self._flag_group: Any = None

    def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                       **kwargs: Any) -> None:
        # Every process begins training together, so the group is made collectively here, once.
        if torch.distributed.is_available() and torch.distributed.is_initialized() and self._flag_group is None:
            on_cpu = torch.distributed.get_backend() == "gloo"
            self._flag_group = torch.distributed.group.WORLD if on_cpu else torch.distributed.new_group(backend="gloo")

    def request(self, signal_number: int, frame: FrameType | None = None) -> None:
        """The signal handler: only sets the flag, and says so (os.write: no lock a handler could find held)."""
        self.requested_by = signal.Signals(signal_number).name
        os.write(2, f"\n{self.requested_by} received: the run saves a checkpoint after the step in progress, "
                    "then stops.\n".encode())  # fmt: skip

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                     **kwargs: Any) -> None:
        # A group left alive past training would outlive the process group's teardown (runs.distributed).
        if self._flag_group is not None and self._flag_group is not torch.distributed.group.WORLD:
            torch.distributed.destroy_process_group(self._flag_group)
        self._flag_group = None

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        if self.stopped_at is None and self._agreed(args):
            control.should_save = True
            control.should_training_stop = True
            self.stopped_at = state.global_step

    def _agreed(self, args: TrainingArguments) -> bool:
        """Whether any process was told to stop."""
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return self.requested_by is not None
        flag = torch.tensor([self.requested_by is not None], dtype=torch.int32)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX, group=self._flag_group)
        return bool(flag.item())


@contextlib.contextmanager
def catch_preemption_signals(callback: SaveOnPreemption) -> Iterator[None]:
    """Inside the block, PREEMPTION_SIGNALS set `callback`'s flag instead of what they did before (SIGTERM's default:
    end the process at once); the previous handlers are back afterwards. Outside the main thread, where Python
    cannot install handlers, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, callback.request) for number in PREEMPTION_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def resume_command(argv: Sequence[str], checkpoint: str) -> str:
    """The command `argv` (sys.argv: the script, then its flags) with `--resume_from_checkpoint checkpoint` in place
    of any it had."""
    flags, skip = [], False
    for token in argv[1:]:
        if skip:
            skip = False
        elif token == RESUME_FLAG:
            skip = True
        elif not token.startswith(RESUME_FLAG + "="):
            flags.append(token)
    return shlex.join(["python", argv[0], *flags, RESUME_FLAG, checkpoint])


def preempted_message(signal_name: str, step: int, output_dir: str, argv: Sequence[str]) -> str:
    """The line a preempted run ends with: the signal, the checkpoint saved and the command that resumes it."""
    checkpoint = str(Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{step}")
    return (f"{Path(argv[0]).name}: stopped by {signal_name} after step {step}, saved in {checkpoint} (exit status "
            f"{PREEMPTED_EXIT_CODE}). Resume it with the same command and {RESUME_FLAG} {checkpoint} (or true): "
            f"{resume_command(argv, checkpoint)}")  # fmt: skip


def exit_preempted(callback: SaveOnPreemption, output_dir: str, is_main_process: bool) -> None:
    """Ends a run that `callback` stopped: the main process prints `preempted_message`, every process leaves the
    process group, and the process exits with PREEMPTED_EXIT_CODE."""
    # A process that did not get the signal itself names the one the others did.
    if is_main_process:
        (Path(output_dir) / PREEMPTED_FILE).write_text(json.dumps({
            "signal": callback.requested_by, "step": callback.stopped_at,
            "checkpoint": str(Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{callback.stopped_at}")}) + "\n",
            encoding="utf-8")  # fmt: skip
        print(preempted_message(callback.requested_by or "a signal to another process", callback.stopped_at,
                                output_dir, sys.argv), flush=True)  # fmt: skip
    finish_processes()
    sys.exit(PREEMPTED_EXIT_CODE)
