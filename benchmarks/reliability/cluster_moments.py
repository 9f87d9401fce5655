"""The moments of benchmarks/reliability/faults.py that a shared cluster brings (spanroberta/runs/preemption.py,
folder_lock.py and resume_settings.py): each starts a tiny pretraining run, strikes, and reports what it did and the
counts the record sums (`counts`: whole numbers, a check that held counting 1).

- sigterm: SIGTERM to the launch (the run's process, or the launcher of a distributed run, which passes it on to
  every process, as docs/distributed.md's "Preemptible clusters" says) a random delay (up to `STEP_SECONDS`) after
  a random step's log line;
  the run should save a complete checkpoint of the first step to end after the signal and exit with status 75;
- second-run: a second run started into the same output folder (another learning rate), either as the first run
  builds its model (it holds the folder's lock, and has saved nothing) or once one of its checkpoints is complete;
  it should be refused in one line (the folder in use, or holding another run) before any of its processes builds
  its model, and the first run end as if alone.
  The first run is paused (SIGSTOP, then SIGCONT) while the second runs: a tiny run trains for under a second, less
  than the second takes to start, so that it would otherwise end before the second reaches its folder;
- changed-batch: SIGKILL once a checkpoint is complete, then a resume with another --per_device_train_batch_size;
  it should be refused with the difference listed, before training.
- full-filesystem: the output folder on a file system of its own (a tmpfs of `FILESYSTEM_BYTES`, mounted there: it
  needs the right to mount, root's), filled up once a checkpoint is complete, so that the next save fails with
  ENOSPC as on a full disk (disk-full's file size limit fails with EFBIG instead); the run should end with its
  one-paragraph message, no traceback and no half-written checkpoint; the file filling it is then removed.
After sigterm, changed-batch and full-filesystem, faults.py resumes the run with its own flags and compares it with an
uninterrupted run; after second-run, the first run's own end is compared.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from benchmarks.reliability import tiny_runs
from benchmarks.reliability.injection import (
    MARKED_RUN,
    WAIT_SECONDS,
    RunningRun,
    checkpoint_is_complete,
    complete_checkpoints,
    full_disk_counts,
    traceback_counts,
)
from benchmarks.reliability.marked_run import MODEL_LOADS
from benchmarks.reliability.outcomes import exit_outcome, output_tail
from spanroberta.runs.checkpoints import checkpoint_problem
from spanroberta.runs.preemption import PREEMPTED_EXIT_CODE, PREEMPTED_FILE

CLUSTER_MOMENTS = ("sigterm", "second-run", "changed-batch", "full-filesystem")
FILESYSTEM_BYTES = 64 * 2**20
FILLER = "filler"
# What the runs print: each optimizer step's log line (logging_steps 1: one per step, the training loss first), the
# line of a process that took the signal, the preempted run's last line, the two refusals.
STEP_LOGGED = re.compile(r"^\{'loss': ", re.MULTILINE)
SIGNAL_TAKEN = "SIGTERM received: the run saves a checkpoint"
PREEMPTED = re.compile(r"stopped by SIGTERM after step (\d+), saved in")
FOLDER_IN_USE = "is in use by another run"
HOLDS_ANOTHER_RUN = "already holds another run"
OTHER_SETTINGS = "was trained under other settings"
OTHER_LEARNING_RATE = "2e-3"
OTHER_BATCH = "4"
# The delay after a step's log line is drawn up to about one tiny step on 2 CPU cores (6 ms for one process,
# more for two), so that the signal falls within training, which lasts a fraction of a second.
STEP_SECONDS = 0.01


def steps_logged(output: str) -> int:
    """How many optimizer steps a fresh run's `output` has logged (logging_steps 1)."""
    return len(STEP_LOGGED.findall(output))


def sigterm_counts(output: str, exit_status: int, folder: Path) -> dict[str, Any]:
    """What a run sent SIGTERM printed and left: `logged_before_signal` (steps logged before the first process said
    it took the signal), `saved_step` (from the run's last line), and the counts: `exited_75`, `job_sees_preemption`
    (exit status 75, or, where a launcher exits 1 instead, the mark file naming the step saved: what the job script
    of docs/distributed.md tests), `checkpoint_complete` (the checkpoint it names), `saved_at_step_in_progress`
    (complete, and of the first step to end after the signal: the next step logged, or the one after when the
    signal came between a step's end and its log line), `tracebacks` and `launcher_tracebacks`
    (`traceback_counts`)."""
    before = output.split(SIGNAL_TAKEN, 1)[0] if SIGNAL_TAKEN in output else output
    logged = steps_logged(before)
    found = PREEMPTED.search(output)
    saved = int(found.group(1)) if found else None
    complete = saved is not None and checkpoint_problem(folder / f"checkpoint-{saved}") is None
    in_progress = complete and saved - logged in (1, 2)
    try:
        marked_step = json.loads((folder / PREEMPTED_FILE).read_text(encoding="utf-8")).get("step")
    except (OSError, ValueError):
        marked_step = None
    seen = exit_status == PREEMPTED_EXIT_CODE or (saved is not None and marked_step == saved)
    counts = {"exited_75": int(exit_status == PREEMPTED_EXIT_CODE), "job_sees_preemption": int(seen),
              "checkpoint_complete": int(complete),
              "saved_at_step_in_progress": int(in_progress), **traceback_counts(output)}  # fmt: skip
    return {"logged_before_signal": logged, "saved_step": saved, "exit_status": exit_status, "counts": counts}


def refusal_counts(output: str, exit_status: int, expected: tuple[str, ...],
                   listed: str | None = None) -> dict[str, Any]:  # fmt: skip
    """What a launch that should be refused (its output holding one of `expected`) printed: its exit status and the
    line that says why, and the counts: `refused` (exit status other than 0, `expected` said), then either
    `differences_listed` (`listed` said too) or, without `listed`, `before_model_loads` (no process built its
    model), and the tracebacks (`traceback_counts`)."""
    lines = [line for line in output.splitlines() if any(reason in line for reason in expected)]
    refused = exit_status != 0 and bool(lines)
    counts = {"refused": int(refused)}
    if listed is not None:
        counts["differences_listed"] = int(refused and listed in output)
    else:
        counts["before_model_loads"] = int(refused and MODEL_LOADS not in output)
    counts.update(traceback_counts(output))
    found = {"exit_status": exit_status, "message": lines[0].strip() if lines else None, "counts": counts}
    return found if refused and not counts["tracebacks"] else {**found, "output_tail": output_tail(output, lines=40)}


def with_flag(flags: list[str], name: str, value: str) -> list[str]:
    """`flags` with `name`'s value replaced by `value`."""
    changed = list(flags)
    changed[changed.index(name) + 1] = value
    return changed


def _sigterm(started: RunningRun, folder: Path, run: tiny_runs.TinyRun, rng: random.Random) -> dict[str, Any]:
    step, delay = rng.randint(1, run.max_steps - 2), rng.uniform(0, STEP_SECONDS)
    report: dict[str, Any] = {"after_step_logged": step, "delay_seconds": round(delay, 3)}
    logged = started.wait_for(lambda: steps_logged("".join(started.lines)) >= step)
    time.sleep(delay)
    # Hit only when training was still under way: a signal after the last step meets the final save instead.
    report["hit"] = logged and started.process.poll() is None and steps_logged("".join(started.lines)) < run.max_steps
    if not report["hit"]:
        return report
    signalled = time.monotonic()
    os.kill(started.process.pid, signal.SIGTERM)
    started.finish(timeout=WAIT_SECONDS)
    report["seconds_to_exit"] = round(time.monotonic() - signalled, 2)
    output = "".join(started.lines)
    found = sigterm_counts(output, started.process.returncode, folder)
    if found["exit_status"] != PREEMPTED_EXIT_CODE or found["counts"]["tracebacks"]:
        found["output_tail"] = output_tail(output, lines=40)
    return {**report, **found, "run_ending": exit_outcome(started.process.returncode, output)}


def _second_run(started: RunningRun, folder: Path, run: tiny_runs.TinyRun, rng: random.Random,
                flags: list[str]) -> dict[str, Any]:  # fmt: skip
    saves = list(range(run.save_steps, run.max_steps, run.save_steps))
    # Half the trials strike as the model loads (the lock's refusal), half after a checkpoint (the folder's own).
    name = "model-loads" if rng.random() < 0.5 else f"checkpoint-{rng.choice(saves)}"
    report: dict[str, Any] = {"after": name, "learning_rate": OTHER_LEARNING_RATE}
    def building() -> bool:
        return any(MODEL_LOADS in line for line in list(started.lines))

    if not started.wait_for(building if name == "model-loads" else checkpoint_is_complete(folder, name)):
        return {**report, "hit": False}
    started.pause()
    second = tiny_runs.launch(started.engine, with_flag(flags, "--learning_rate", OTHER_LEARNING_RATE), MARKED_RUN)
    report["hit"] = started.process.poll() is None  # the first run still held the folder when the second ended
    started.pause(False)
    started.finish(timeout=WAIT_SECONDS)
    output = "".join(started.lines)
    report["first_run_ending"] = exit_outcome(started.process.returncode, output)
    return {**report, **refusal_counts(second.stdout, second.returncode, (FOLDER_IN_USE, HOLDS_ANOTHER_RUN))}


def _changed_batch(started: RunningRun, folder: Path, run: tiny_runs.TinyRun, rng: random.Random,
                   flags: list[str]) -> dict[str, Any]:  # fmt: skip
    saves = list(range(run.save_steps, run.max_steps, run.save_steps))
    name = f"checkpoint-{rng.choice(saves)}"
    report: dict[str, Any] = {"after": name, "per_device_train_batch_size": OTHER_BATCH}
    report["hit"] = started.wait_for(checkpoint_is_complete(folder, name))
    started.kill()
    if not report["hit"]:
        return report
    changed = [*with_flag(flags, "--per_device_train_batch_size", OTHER_BATCH), "--resume_from_checkpoint", "true"]
    result = tiny_runs.launch(started.engine, changed, MARKED_RUN)
    listed = f"per_device_train_batch_size 2 there, {OTHER_BATCH} now"
    return {**report, **refusal_counts(result.stdout, result.returncode, (OTHER_SETTINGS,), listed)}


def mount_filesystem(folder: Path) -> str | None:
    """Mounts a tmpfs of FILESYSTEM_BYTES on `folder` (created); None when done, else why it could not."""
    folder.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FILESYSTEM_BYTES}", "tmpfs", str(folder)],
                            capture_output=True, text=True)  # fmt: skip
    return None if result.returncode == 0 else (result.stderr.strip() or f"mount exited {result.returncode}")


def unmount_filesystem(folder: Path) -> None:
    """Unmounts what `mount_filesystem` mounted on `folder`, if it is mounted (its files go with it)."""
    if os.path.ismount(folder):
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Path) -> int:
    """Writes FILLER in `folder` until its file system has no byte left; returns the bytes written."""
    written, chunk = 0, 1 << 20
    with open(folder / FILLER, "wb", buffering=0) as filler:
        while chunk >= 512:
            try:
                written += filler.write(b"\0" * chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                chunk //= 2
    return written


def _full_filesystem(started: RunningRun, folder: Path, run: tiny_runs.TinyRun, rng: random.Random) -> dict[str, Any]:
    saves = list(range(run.save_steps, run.max_steps, run.save_steps))
    name = f"checkpoint-{rng.choice(saves[:-1])}"
    report: dict[str, Any] = {"after": name, "filesystem_bytes": FILESYSTEM_BYTES}
    if started.wait_for(checkpoint_is_complete(folder, name)):
        report["filler_bytes"] = fill(folder)
    started.finish(timeout=WAIT_SECONDS)
    report["hit"] = "filler_bytes" in report and started.process.returncode != 0
    report["run_exit"] = started.process.returncode
    report.update(full_disk_counts("".join(started.lines), folder))
    (folder / FILLER).unlink(missing_ok=True)  # room again, for the resume
    return report


def inject_cluster(moment: str, engine: str, flags: list[str], folder: Path, run: tiny_runs.TinyRun,
                   rng: random.Random) -> dict[str, Any]:  # fmt: skip
    """Starts `engine`'s run with `flags` (its output folder `folder`) and strikes at `moment`. Returns `hit`, what
    was done and found, `needs_resume` (whether faults.py should resume the run: not after second-run, whose first run
    goes on) and the complete checkpoints left."""
    if moment == "full-filesystem" and (why := mount_filesystem(folder)) is not None:
        return {"moment": moment, "hit": False, "not_mounted": why, "needs_resume": False, "complete_after_fault": []}
    started = RunningRun(engine, flags)
    if moment == "sigterm":
        report = _sigterm(started, folder, run, rng)
    elif moment == "second-run":
        report = _second_run(started, folder, run, rng, flags)
    elif moment == "changed-batch":
        report = _changed_batch(started, folder, run, rng, flags)
    elif moment == "full-filesystem":
        report = _full_filesystem(started, folder, run, rng)
    else:
        raise ValueError(f"unknown moment {moment!r}; these moments are {', '.join(CLUSTER_MOMENTS)}")
    started.kill()
    return {"moment": moment, **report, "needs_resume": moment != "second-run",
            "complete_after_fault": complete_checkpoints(folder)}  # fmt: skip
