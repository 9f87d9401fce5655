"""The faults benchmarks/reliability/faults.py injects into a running tiny pretraining run: each starts the run,
waits for its moment (watching the output folder and the run's output), strikes, and reports what it did."""

from __future__ import annotations

import random
import resource
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.reliability import tiny_runs
from benchmarks.reliability.marked_run import EVALUATION_STARTS
from spanroberta.runs.checkpoints import checkpoint_problem, staged_checkpoint

MOMENTS = ("random", "during-save", "during-evaluation", "disk-full", "corrupt-newest")
CORRUPTIONS = ("truncated", "emptied", "garbled")
# run_pretraining.py with a line printed as each evaluation starts: every launch of the faults benchmark runs it.
MARKED_RUN = "benchmarks/reliability/marked_run.py"
FULL_DISK_BYTES = 1024
TRACEBACK = "Traceback (most recent call last)"
WAIT_SECONDS = 900


def complete_checkpoints(output_dir: Path) -> list[str]:
    """The names of the complete checkpoints in `output_dir` (spanroberta.runs.checkpoints' test), oldest first."""
    folders = [path for path in Path(output_dir).glob("checkpoint-*") if path.name.split("-")[-1].isdigit()]
    folders.sort(key=lambda path: int(path.name.split("-")[-1]))
    return [path.name for path in folders if checkpoint_problem(path) is None]


class RunningRun:
    """A started run whose output is read as it comes (so that the pipe never fills) and kept."""

    def __init__(self, engine: str, flags: list[str]) -> None:
        self.engine = engine
        self.process = tiny_runs.start(engine, flags, MARKED_RUN)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line)

    def wait_for(self, moment: Callable[[], bool]) -> bool:
        """Whether `moment()` came true while the run was still running (polled every 5 ms)."""
        deadline = time.monotonic() + WAIT_SECONDS
        while self.process.poll() is None and time.monotonic() < deadline:
            if moment():
                return True
            time.sleep(0.005)
        return False

    def kill(self) -> None:
        tiny_runs.kill_session(self.process)
        self.finish()

    def pause(self, paused: bool = True) -> None:
        """SIGSTOP (or, with `paused` False, SIGCONT) to the launch and every process it started."""
        for member in tiny_runs.process_family(self.process):
            member.suspend() if paused else member.resume()

    def finish(self, timeout: float | None = None) -> None:
        """Waits for the run to end (SIGKILL to all its processes after `timeout` seconds) and its output."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            tiny_runs.kill_session(self.process)
            self.process.wait()
        self._reader.join()

    def evaluations_started(self) -> int:
        return sum(EVALUATION_STARTS in line for line in list(self.lines))


def checkpoint_is_complete(folder: Path, name: str) -> Callable[[], bool]:
    return lambda: checkpoint_problem(folder / name) is None


def _being_written(folder: Path, name: str) -> Callable[[], bool]:
    """Whether the save of checkpoint `name` is under way: written under its temporary name, not yet renamed (or,
    by a version that saved in place, under its own name and not yet complete)."""
    checkpoint = folder / name
    return lambda: staged_checkpoint(checkpoint).is_dir() or (
        checkpoint.is_dir() and checkpoint_problem(checkpoint) is not None)


def traceback_counts(output: str) -> dict[str, int]:
    """The tracebacks in `output`: `tracebacks`, those of the run's own processes, and `launcher_tracebacks`, those
    of `accelerate launch` (torch's launcher), which prints one whenever a process of the run exits other than 0 or
    the launcher takes a signal, whatever the run printed."""
    blocks = output.split(TRACEBACK)[1:]
    launcher = sum("accelerate/commands/launch.py" in "\n".join(block.splitlines()[:6]) for block in blocks)
    return {"tracebacks": len(blocks) - launcher, "launcher_tracebacks": launcher}


def half_written(folder: Path) -> list[str]:
    """The checkpoints in `folder` that are not complete, under their own names or a temporary one (a name
    holding "checkpoint-" that is not complete)."""
    return sorted(path.name for path in Path(folder).iterdir()
                  if "checkpoint-" in path.name and checkpoint_problem(path) is not None)  # fmt: skip


def full_disk_counts(output: str, folder: Path) -> dict[str, Any]:
    """What a run stopped by a full disk left and printed: the half-written checkpoints left in `folder`, the line
    of its message that names the full disk, or the file size limit (`ulimit -f`, EFBIG) where that is what stopped
    it, and the counts the record sums (`full_disk_named`: that line printed). Records before 2026-12-08 looked for
    "disk" and "full" alone, which the file size limit's message does not say."""
    left = half_written(folder)
    message = next((line.strip() for line in output.splitlines()
                    if ("disk" in line.lower() and "full" in line.lower()) or "file size limit" in line), None)
    return {"half_written_left": left, "message": message,
            "counts": {"full_disk_named": int(message is not None), "half_written_checkpoints_left": len(left),
                       **traceback_counts(output)}}  # fmt: skip


def _limit_file_size(process: subprocess.Popen, limit: int) -> int:
    """Lowers RLIMIT_FSIZE to `limit` bytes on `process` and every process it started; returns how many."""
    processes = tiny_runs.process_family(process)
    for each in processes:
        each.rlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return len(processes)


def corrupt(checkpoint: Path, rng: random.Random) -> dict[str, Any]:
    """Truncates to half, empties or garbles (a run of random bytes in the middle) one weight or state file of
    `checkpoint` (a .safetensors, .pt or .pth file, DeepSpeed's global_step*/ included); says which and how."""
    files = sorted(path for path in checkpoint.rglob("*") if path.suffix in (".safetensors", ".pt", ".pth"))
    target, how = rng.choice(files), rng.choice(CORRUPTIONS)
    data = target.read_bytes()
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "emptied":
        data = b""
    else:
        middle = len(data) // 2
        data = data[:middle] + rng.randbytes(min(64, len(data) - middle)) + data[middle + 64 :]
    target.write_bytes(data)
    return {"corrupted_checkpoint": checkpoint.name, "corrupted_file": str(target.relative_to(checkpoint)),
            "corruption": how}  # fmt: skip


def inject(moment: str, engine: str, flags: list[str], folder: Path, run: tiny_runs.TinyRun,
           rng: random.Random) -> dict[str, Any]:  # fmt: skip
    """Starts `engine`'s run with `flags` (its output folder `folder`) and hits it with `moment`'s fault. Returns
    `hit` (whether the fault struck while the run ran), where, and the complete checkpoints it left."""
    saves = list(range(run.save_steps, run.max_steps, run.save_steps))  # the checkpoints before the last
    started = RunningRun(engine, flags)
    report: dict[str, Any] = {"moment": moment}
    if moment == "random":
        name = f"checkpoint-{rng.choice(saves)}"
        delay = rng.uniform(0, 2)
        report.update(after=name, delay_seconds=round(delay, 3))
        report["hit"] = started.wait_for(checkpoint_is_complete(folder, name))
        time.sleep(delay)
        report["hit"] = report["hit"] and started.process.poll() is None
    elif moment == "during-save":
        name = f"checkpoint-{rng.choice(saves[1:])}"
        report["hit"] = started.wait_for(_being_written(folder, name))
        started.kill()
        report.update(during=name, left_incomplete=checkpoint_problem(folder / name) is not None)
    elif moment == "during-evaluation":
        number = rng.randint(2, len(saves))
        report.update(evaluation=number, at_step=number * run.eval_steps)
        report["hit"] = started.wait_for(lambda: started.evaluations_started() >= number)
    elif moment == "disk-full":
        name = f"checkpoint-{rng.choice(saves[:-1])}"
        report.update(after=name, file_size_limit=FULL_DISK_BYTES)
        if started.wait_for(checkpoint_is_complete(folder, name)):
            report["processes_limited"] = _limit_file_size(started.process, FULL_DISK_BYTES)
        started.finish(timeout=WAIT_SECONDS)
        report["hit"] = "processes_limited" in report and started.process.returncode != 0
        report["run_exit"] = started.process.returncode
        report.update(full_disk_counts("".join(started.lines), folder))
    elif moment == "corrupt-newest":
        name = f"checkpoint-{rng.choice(saves[1:])}"
        report["hit"] = started.wait_for(checkpoint_is_complete(folder, name))
        started.kill()
        newest = complete_checkpoints(folder)[-1:] if report["hit"] else []
        report.update(after=name, **(corrupt(folder / newest[0], rng) if newest else {}))
    else:
        raise ValueError(f"unknown moment {moment!r}; the moments are {', '.join(MOMENTS)}")
    started.kill()
    report["complete_after_fault"] = complete_checkpoints(folder)
    return report
