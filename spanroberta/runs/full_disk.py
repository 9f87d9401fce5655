"""A save that fails for want of room (a full disk, the quota on it, or the process's file size limit): told as such,
in one paragraph (what was saved, the folder, the space free and needed, the last complete checkpoint), by the
process that met it, instead of a traceback; every other process of the run stops with one line pointing to it.

The errnos: ENOSPC (the disk is full), EDQUOT (the user's quota on it is reached) and EFBIG (a file reached the
process's file size limit, `ulimit -f`; the kernel then sends SIGXFSZ, which the Python interpreter ignores from
its start, so the write fails with EFBIG instead of the process being killed). The writers do not all keep them:
Python's own writes raise OSError with the errno; safetensors (written in Rust) raises an error whose text holds
the OS's message ("No space left on device", "File too large"); torch's archive writer drops the errno and raises
`RuntimeError: [enforce fail at inline_container.cc] . unexpected pos ...` or "file write failed". That last one
is taken for the file size limit when a file written has reached it, and for a full disk only when the disk holding
the folder has less room left than the newest checkpoint took, the best measure there is of what a save needs.

The cheap checks come first: the error is classified (its errno, its text, the sizes of the files written and of
the newest checkpoint) before the last complete checkpoint is looked for, which reads every file of a checkpoint
to check its checksums.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
from pathlib import Path

from ..errors import UserInputError
from .checkpoints import checkpoint_problem, find_checkpoints

FULL_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
FILE_SIZE_ERRNO = errno.EFBIG
_FULL_DISK_MESSAGES = tuple(os.strerror(number) for number in FULL_DISK_ERRNOS)
_FILE_SIZE_MESSAGE = os.strerror(FILE_SIZE_ERRNO)
_TORCH_WRITE_FAILURE = "inline_container"
FULL_DISK = "full disk"
FILE_SIZE_LIMIT = "file size limit"


class DiskFullError(UserInputError, OSError):
    """A save failed because the disk (or the user's quota on it) is full, or a file reached the file size limit."""


class SaveFailedElsewhere(UserInputError, OSError):
    """A save failed on another process of the run: this one stops too, without a message of its own."""


def last_complete_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete `checkpoint-N` in `run_dir` (every file of each checked, newest first)."""
    return next((folder for _, folder in find_checkpoints(run_dir) if checkpoint_problem(folder) is None), None)


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def file_size_limit() -> int | None:
    """The largest file this process may write, in bytes (`ulimit -f`), or None when unlimited."""
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if limit == resource.RLIM_INFINITY else limit


def _errors(error: BaseException | None):
    while error is not None:
        yield error
        error = error.__cause__ or error.__context__


def save_failure_kind(error: BaseException, written: list[Path], run_dir: Path) -> str | None:
    """FULL_DISK, FILE_SIZE_LIMIT, or None (another failure) for the `error` a save into `run_dir` raised;
    `written`: the files it wrote (where torch's archive writer, which drops the errno, may have stopped)."""
    chain = list(_errors(error))
    for link in chain:
        text = str(link)
        if (isinstance(link, OSError) and link.errno == FILE_SIZE_ERRNO) or _FILE_SIZE_MESSAGE in text:
            return FILE_SIZE_LIMIT
        if (isinstance(link, OSError) and link.errno in FULL_DISK_ERRNOS) or any(
            message in text for message in _FULL_DISK_MESSAGES
        ):
            return FULL_DISK
    if not any(isinstance(link, RuntimeError) and _TORCH_WRITE_FAILURE in str(link) for link in chain):
        return None
    limit = file_size_limit()
    if limit is not None and any(path.is_file() and path.stat().st_size >= limit for path in written):
        return FILE_SIZE_LIMIT
    newest = _newest_checkpoint(run_dir)
    return FULL_DISK if newest is not None and shutil.disk_usage(run_dir).free < folder_bytes(newest) else None


def _newest_checkpoint(run_dir: Path) -> Path | None:
    return next((folder for _, folder in find_checkpoints(run_dir)), None)


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def full_disk_error(error: BaseException, saving: Path, run_dir: Path, written: Path,
                    left: str) -> DiskFullError | None:
    """The error to stop the run with when saving `saving` (a checkpoint of `run_dir`, or the model into it) failed
    with `error` for want of room (None when `error` is another failure); `written`: the folder its files went to,
    `left`: a sentence on what is left of them."""
    files = [path for path in written.rglob("*") if path.is_file()] if written.is_dir() else []
    kind = save_failure_kind(error, files, run_dir)
    if kind is None:
        return None
    previous = last_complete_checkpoint(run_dir)
    resume = (f"The last complete checkpoint is {previous}: once there is room, the same command with "
              "--resume_from_checkpoint true resumes from it." if previous is not None
              else "There is no complete checkpoint yet: the run starts afresh once there is room.")  # fmt: skip
    cause = f"({type(error).__name__}: {' '.join(str(error).split())[:200]})"
    if kind == FILE_SIZE_LIMIT:
        limit = file_size_limit()
        return DiskFullError(
            f"Saving {saving} failed: a file reached this process's file size limit "
            f"({_size(limit) if limit is not None else 'set by the system'}, `ulimit -f`) {cause}. {left} {resume} "
            "Raise the limit (`ulimit -f unlimited` in the job script, or the scheduler's file size limit) and run "
            "again."
        )
    newest = _newest_checkpoint(run_dir)
    need = (f"a checkpoint of this run takes {_size(folder_bytes(newest))} ({newest.name})" if newest is not None
            else "this run has no checkpoint yet to tell the size of one")  # fmt: skip
    return DiskFullError(
        f"Saving {saving} failed: the disk holding {run_dir} is full, or the quota on it reached {cause}. "
        f"{_size(shutil.disk_usage(run_dir).free)} is free there and {need}. {left} {resume} Free some space, give "
        "--output_dir on a larger disk, or keep fewer checkpoints with --save_total_limit."
    )
