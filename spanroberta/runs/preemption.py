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
every step wait on the host. On several machines gloo connects through the interface that the host name resolves
to: where a host has several (Ethernet beside InfiniBand, a container's bridge), set `GLOO_SOCKET_IFNAME` to the
one the machines reach each other on, or the group's creation waits until it times out.

The exit code is 75 (EX_TEMPFAIL in sysexits.h: a temporary failure, to be tried again), not 143 (128 + SIGTERM,
what a shell reports for a process the signal killed): a job script can tell a run that saved and stopped from one
that was killed without saving, and requeue it. Under a launcher (`accelerate launch`, `torchrun`, `deepspeed`)
the job sees the launcher's status instead: torch's elastic agent (behind torchrun and accelerate launch) raises
`ChildFailedError` for any worker status other than 0, or re-raises the SIGTERM it took itself, and exits 1;
DeepSpeed's launcher passes on the status of the first worker to fail, but exits 1 after a SIGTERM it took itself.
So the main process also leaves `PREEMPTED_FILE` in the output folder, which the next run there removes as it
starts training.

A signal outside the step loop is not lost either. `signals_noted` (around the whole of every script, and of the
ablation driver) only notes a signal that comes while no Trainer's handler is installed:
- before training (the data read or prepared, the model loaded): every process stops at the next point where all
  agree on it (`stop_if_signalled`: once the output folder is claimed, before the model loads, and again as
  training begins), with nothing to save, exit status 75, the mark file and the command to run again. A signal
  that comes once that check has passed is handed to the Trainer's handler and saves at the end of the first step.
- after the last step (the final save, evaluation, model card): the run goes on to its end, so that no final model
  is left half-written, and exits 0: nothing of the run remains to be done, and it says so in one line. Where work
  remains after it (the ablation driver's next units), the driver stops there with 75 (`spanroberta.ablation`).
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
from typing import Any, NoReturn

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .checkpoints import find_checkpoints
from .distributed import every_process_says, finish_processes, in_process_group

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
        if in_process_group() and self._flag_group is None:
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
        if not in_process_group():
            return self.requested_by is not None
        flag = torch.tensor([self.requested_by is not None], dtype=torch.int32)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX, group=self._flag_group)
        return bool(flag.item())


# The signal a process took where only `signals_noted` listened (before or after training); None: none.
_noted: dict[str, str | None] = {"signal": None}


def signal_noted() -> str | None:
    """The name of the preemption signal this process took outside the step loop, if any."""
    return _noted["signal"]


def _note(signal_number: int, frame: FrameType | None = None) -> None:
    _noted["signal"] = signal.Signals(signal_number).name
    os.write(2, f"\n{_noted['signal']} received outside the step loop: the run stops where every process can agree "
                "on it, without leaving anything half-written.\n".encode())  # fmt: skip


@contextlib.contextmanager
def _handlers(handler: Any) -> Iterator[None]:
    """PREEMPTION_SIGNALS go to `handler` inside the block, to their previous handlers after it. Outside the main
    thread, where Python cannot install handlers, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.signal(number, handler) for number in PREEMPTION_SIGNALS}
    try:
        yield
    finally:
        for number, before in previous.items():
            signal.signal(number, before)


@contextlib.contextmanager
def signals_noted(script: str) -> Iterator[None]:
    """Around a whole script: a preemption signal is noted (`signal_noted`) instead of ending the process at once,
    wherever the Trainer's own handler (`catch_preemption_signals`) is not installed. A block that ends normally
    with a signal noted had finished its work when it came: its main process says so. Nested blocks (a unit of
    the ablation driver) share the note; the outermost one starts and ends without one."""
    outermost = signal.getsignal(signal.SIGTERM) is not _note
    if outermost:
        _noted["signal"] = None
    with _handlers(_note):
        yield
    if _noted["signal"] is not None and os.environ.get("RANK", "0") == "0":
        print(f"{script}: {_noted['signal']} came once training was over; the run finished what was left (the "
              "final save, evaluation) and is complete.", flush=True)  # fmt: skip
    if outermost:
        _noted["signal"] = None


@contextlib.contextmanager
def catch_preemption_signals(callback: SaveOnPreemption) -> Iterator[None]:
    """Inside the block, PREEMPTION_SIGNALS set `callback`'s flag instead of what they did before (SIGTERM's default:
    end the process at once; `signals_noted`: note it); the previous handlers are back afterwards. A signal noted
    before the block is handed to `callback`, so that the first step to end saves; one that came after the last
    step's check, and so stopped nothing, is noted again after it (for the ablation driver's next unit). Outside the
    main thread, where Python cannot install handlers, nothing changes."""
    with _handlers(callback.request):
        callback.requested_by = callback.requested_by or signal_noted()
        try:
            yield
        finally:
            if callback.stopped_at is None and callback.requested_by is not None:
                _noted["signal"] = callback.requested_by


def signal_noted_by_any_process() -> str | None:
    """The preemption signal that a process of the run noted outside the step loop (the first in rank order), or
    None. Every process must call it."""
    return next((name for name in every_process_says(signal_noted()) if name is not None), None)


def stop_if_signalled(output_dir: str, is_main_process: bool) -> None:
    """Before training: when any process has noted a preemption signal, every process ends the run here, with
    nothing to save (`exit_preempted`). Every process must call it."""
    signalled = signal_noted_by_any_process()
    if signalled is not None:
        exit_preempted(signalled, None, output_dir, is_main_process)


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


def preempted_message(signal_name: str, step: int | None, output_dir: str, argv: Sequence[str]) -> str:
    """The line a preempted run ends with: the signal, the checkpoint saved (`step`; None: stopped before training)
    and the command that resumes it."""
    if step is None:
        # Nothing new to save: an earlier run's newest checkpoint, if there is one, is where this one would have begun.
        again = resume_command(argv, "true") if find_checkpoints(output_dir) else shlex.join(["python", *argv])
        return (f"{Path(argv[0]).name}: stopped by {signal_name} before training began, with nothing to save (exit "
                f"status {PREEMPTED_EXIT_CODE}). Run it again with the same command: {again}")  # fmt: skip
    checkpoint = str(Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{step}")
    return (f"{Path(argv[0]).name}: stopped by {signal_name} after step {step}, saved in {checkpoint} (exit status "
            f"{PREEMPTED_EXIT_CODE}). Resume it with the same command and {RESUME_FLAG} {checkpoint} (or true): "
            f"{resume_command(argv, checkpoint)}")  # fmt: skip


def write_preempted_mark(output_dir: str | os.PathLike, content: dict[str, Any]) -> None:
    """`PREEMPTED_FILE` in `output_dir`, holding `content` (the signal, and where the work stopped)."""
    (Path(output_dir) / PREEMPTED_FILE).write_text(json.dumps(content) + "\n", encoding="utf-8")


def exit_preempted(signal_name: str | None, step: int | None, output_dir: str, is_main_process: bool) -> NoReturn:
    """Ends a run stopped by a preemption signal after `step` (saved there; None: before training, nothing saved):
    the main process writes `PREEMPTED_FILE` and prints `preempted_message`, every process leaves the process
    group, and the process exits with PREEMPTED_EXIT_CODE."""
    if is_main_process:
        checkpoint = None if step is None else str(Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{step}")
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        write_preempted_mark(output_dir, {"signal": signal_name, "step": step, "checkpoint": checkpoint})
        # A process that did not get the signal itself names the one the others did.
        print(preempted_message(signal_name or "a signal to another process", step, output_dir, sys.argv),
              flush=True)  # fmt: skip
    finish_processes()
    _noted["signal"] = None  # answered: the block around the script does not report it as come too late
    sys.exit(PREEMPTED_EXIT_CODE)
