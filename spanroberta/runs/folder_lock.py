"""One run per output folder: the main process of a run holds `LOCK_FILE` in its output folder from before its
model loads until the process exits, naming its host and process; a second run into the folder is refused in one
line naming the holder, where two runs would otherwise overwrite each other's checkpoints without a word.

A lock whose holder is gone is taken over, with a note: one on this host whose process no longer runs (killed, or
crashed), or one left by an earlier run of the same SLURM job (a requeued job has the same SLURM_JOB_ID and a higher
SLURM_RESTART_COUNT, on whichever node it lands). A lock of another host cannot be checked from here: the refusal
says to delete it when that run is over. The lock is written whole under a temporary name, then linked into place,
which fails when the name is taken: two runs starting at once cannot both hold it, nor read half of one.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from ..errors import UserInputError

logger = logging.getLogger(__name__)

LOCK_FILE = "spanroberta_run.lock"
_held: set[Path] = set()


def this_holder(script: str) -> dict[str, Any]:
    """What a lock taken by this process says of it."""
    return {
        "script": script,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "slurm_job": os.environ.get("SLURM_JOB_ID"),
        "slurm_restart": int(os.environ.get("SLURM_RESTART_COUNT", "0")),
    }


def hold_output_folder(output_dir: str | os.PathLike, script: str) -> None:
    """Takes the lock of `output_dir` (created if needed) for this process until it exits, taking over a stale one;
    raises a `UserInputError` naming the holder when another run holds it. Called by the main process only."""
    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_FILE
    me = this_holder(script)
    while not _link_lock(lock, me):
        holder = read_lock(lock)
        if holder is None:
            continue  # released in between
        if (holder.get("host"), holder.get("pid")) == (me["host"], me["pid"]):
            break  # this process's own lock: an earlier run in it (the ablation driver's units, tests)
        gone = why_gone(holder, me)
        if gone is None:
            raise UserInputError(f"--output_dir {folder} is in use by another run: {describe(holder)} holds {lock}. "
                                 "Wait for it to end or give another --output_dir; if that run is over, delete "
                                 f"{lock}.")  # fmt: skip
        logger.warning("Taking over %s from %s: %s.", lock, describe(holder), gone)
        # Renamed aside rather than deleted: of two runs that both found it stale, only one renames it, so the
        # other cannot delete the lock the first has just taken.
        aside = lock.with_name(f".{LOCK_FILE}.stale.{me['host']}.{me['pid']}")
        with contextlib.suppress(FileNotFoundError):
            os.replace(lock, aside)
            if read_lock(aside) != holder:  # another run took it over in between: its lock goes back
                with contextlib.suppress(FileExistsError):
                    os.link(aside, lock)
            aside.unlink()
    if not _held:
        atexit.register(release_held_locks)
    _held.add(lock)


def _link_lock(lock: Path, holder: dict[str, Any]) -> bool:
    """Writes `holder` to `lock` whole, unless the name is taken; whether it did."""
    partial = lock.with_name(f".{LOCK_FILE}.{holder['host']}.{holder['pid']}")
    partial.write_text(json.dumps(holder) + "\n", encoding="utf-8")
    try:
        os.link(partial, lock)
        return True
    except FileExistsError:
        return False
    except OSError:
        # A filesystem without hard links (FUSE mounts of object stores, some network shares): an exclusive
        # create instead, whose contents a reader could find half-written for an instant (read as unreadable).
        try:
            descriptor = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return False
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(json.dumps(holder) + "\n")
        return True
    finally:
        partial.unlink(missing_ok=True)


def read_lock(lock: Path) -> dict[str, Any] | None:
    """What `lock` says of its holder (an empty mapping when it is unreadable); None when there is no lock."""
    try:
        content = json.loads(lock.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


def describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "an unreadable lock"
    job = f", SLURM job {holder['slurm_job']}" if holder.get("slurm_job") else ""
    return (f"{holder.get('script', 'a run')} (process {holder.get('pid')} on {holder.get('host')}{job}, since "
            f"{holder.get('started')})")  # fmt: skip


def why_gone(holder: dict[str, Any], me: dict[str, Any]) -> str | None:
    """Why the run that took `holder`'s lock is over, or None when it may still run."""
    if me["slurm_job"] is not None and holder.get("slurm_job") == me["slurm_job"] \
            and int(holder.get("slurm_restart") or 0) < me["slurm_restart"]:  # fmt: skip
        return f"this is a requeued run of SLURM job {me['slurm_job']}, whose earlier run held it"
    if holder.get("host") != me["host"] or not isinstance(holder.get("pid"), int):
        return None
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return "that process no longer runs (it was killed or crashed before it could release the lock)"
    except PermissionError:
        pass  # another user's process: it runs
    return None


def release_held_locks() -> None:
    """Removes the locks this process holds (at its exit), each only where it still names this process."""
    for lock in list(_held):
        holder = read_lock(lock)
        if holder and (holder.get("host"), holder.get("pid")) == (socket.gethostname(), os.getpid()):
            lock.unlink(missing_ok=True)
        _held.discard(lock)
