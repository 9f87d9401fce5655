"""A checkpoint save that fails for want of space: told as such, in one paragraph (the folder, the space free and
needed, the last complete checkpoint), with the half-written checkpoint removed, instead of a traceback.

The writers do not all say "full disk": Python's own writes raise OSError with ENOSPC or EDQUOT; safetensors
(written in Rust) raises an error whose text holds the OS's message ("No space left on device"); torch's archive
writer drops the errno and raises `RuntimeError: [enforce fail at inline_container.cc] . unexpected pos ...` or
"file write failed". That last one is taken for a full disk only when the disk holding the folder has less room
left than the previous checkpoint took, the best measure there is of what a save needs.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from ..errors import UserInputError
from .checkpoints import checkpoint_problem, find_checkpoints

FULL_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
_FULL_DISK_MESSAGES = tuple(os.strerror(number) for number in FULL_DISK_ERRNOS)
_TORCH_WRITE_FAILURE = "inline_container"


class DiskFullError(UserInputError, OSError):
    """A save failed because the disk (or the user's quota on it) is full."""


def last_complete_checkpoint(run_dir: Path, before: Path) -> Path | None:
    """The newest complete `checkpoint-N` in `run_dir` other than `before`."""
    return next((folder for _, folder in find_checkpoints(run_dir)
                 if folder != before and checkpoint_problem(folder) is None), None)  # fmt: skip


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def is_full_disk(error: BaseException, free: int, needed: int | None) -> bool:
    """Whether `error` (or one it was raised from) says the disk is full; `free`: bytes free on the disk written
    to, `needed`: bytes a checkpoint takes (None: unknown)."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in FULL_DISK_ERRNOS:
            return True
        text = str(error)
        if any(message in text for message in _FULL_DISK_MESSAGES):
            return True
        if isinstance(error, RuntimeError) and _TORCH_WRITE_FAILURE in text and needed is not None and free < needed:
            return True
        error = error.__cause__ or error.__context__
    return False


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def full_disk_error(error: BaseException, checkpoint: Path, remove: bool) -> DiskFullError | None:
    """The error to stop the run with when saving `checkpoint` failed with `error` for want of space (None when
    `error` is another failure). With `remove` (the main process), the half-written folder is deleted first."""
    run_dir = checkpoint.parent
    previous = last_complete_checkpoint(run_dir, checkpoint)
    needed = folder_bytes(previous) if previous is not None else None
    free = shutil.disk_usage(run_dir).free
    if not is_full_disk(error, free, needed):
        return None
    if remove:
        shutil.rmtree(checkpoint, ignore_errors=True)
    need = (f"a checkpoint of this run takes {_size(needed)} ({previous.name})" if needed is not None
            else "this run has no complete checkpoint to tell the size of one")  # fmt: skip
    resume = (f"The last complete checkpoint is {previous}: once there is room, the same command with "
              "--resume_from_checkpoint true resumes from it." if previous is not None
              else "There is no complete checkpoint yet: the run starts afresh once there is room.")  # fmt: skip
    return DiskFullError(
        f"Saving {checkpoint} failed: the disk holding {run_dir} is full, or the quota on it reached "
        f"({type(error).__name__}: {' '.join(str(error).split())[:200]}). {_size(free)} is free there and {need}. "
        f"The half-written {checkpoint.name} is removed. {resume} Free some space, give --output_dir on a larger "
        "disk, or keep fewer checkpoints with --save_total_limit."
    )
