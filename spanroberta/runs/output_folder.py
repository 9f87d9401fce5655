"""Whose an output folder is. Each script writes `RUN_MARKER`, naming itself, into its output folder before it
writes anything else there, so that a later run of the same script recognises the folder as its own (to resume,
evaluate or overwrite that run), and a folder of the user's own files is never written into unless
`--overwrite_output_dir` says so (the convention of transformers' example scripts: a non-empty folder is refused).
A folder that a run wrote before the marker existed is recognised by what the run left (`known_run`). While a run
writes there, it holds the folder's lock (`folder_lock`), so that two runs never write into one folder at once. In a
run of several processes, every process waits for the lock's verdict (`claim_output_folder`) before it builds its
model: a refused run stops in all of its processes at that point, none of them left loading a model or waiting for
a peer that has exited."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from ..errors import UserInputError
from .distributed import every_process_says
from .folder_lock import LOCK_FILE, hold_output_folder

RUN_MARKER = "spanroberta_run.json"


def marker_script(output_dir: str | os.PathLike) -> str | None:
    """The script whose run `output_dir` holds, as its marker names it; None without a readable marker."""
    try:
        content = json.loads((Path(output_dir) / RUN_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return content.get("script") if isinstance(content, dict) else None


def check_output_folder_owner(
    output_dir: str | os.PathLike,
    script: str,
    overwrite_output_dir: bool,
    known_run: Callable[[Path], object] = lambda folder: False,
) -> None:
    """Refuses an `output_dir` that exists, is not empty and holds no run of `script` (its marker, or, without a
    marker, what `known_run(folder)` finds that an earlier run of it left), unless `overwrite_output_dir`."""
    folder = Path(output_dir)
    if overwrite_output_dir or not folder.is_dir():
        return
    # A lock left by a killed run says nothing of whose the folder is.
    entries = sorted(entry.name for entry in folder.iterdir() if entry.name != LOCK_FILE)
    if not entries:
        return
    owner = marker_script(folder)
    if owner == script or (owner is None and known_run(folder)):
        return
    listed = f"{', '.join(entries[:4])}{', ...' if len(entries) > 4 else ''}"
    what = (f"holds a run of {owner} ({listed}), whose files" if owner is not None
            else f"is not empty ({listed}) and holds no run of {script}: its files")  # fmt: skip
    raise UserInputError(
        f"--output_dir {folder} {what} this run of {script} could overwrite. Give a new or empty folder, or add "
        "--overwrite_output_dir to write into this one anyway."
    )


def mark_output_folder(output_dir: str | os.PathLike, script: str) -> None:
    """Creates `output_dir` if needed, takes its lock (refused while another run holds it) and writes the marker
    naming `script` (a run that --overwrite_output_dir let into another script's folder takes it over). Called by the
    main process once the run's settings and data are checked, before a model loads or anything else is written
    there."""
    hold_output_folder(output_dir, script)
    if marker_script(output_dir) == script:
        return
    marker = Path(output_dir) / RUN_MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"script": script}) + "\n", encoding="utf-8")


def claim_output_folder(output_dir: str | os.PathLike, script: str, takes_lock: bool) -> None:
    """`mark_output_folder` by the processes that `takes_lock` (those that save: the main process, or each node's
    under --save_on_each_node), then the verdict shared: when any was refused, every process raises its
    `UserInputError`. Every process of the run calls it, before it builds a model."""
    refusal = None
    if takes_lock:
        try:
            mark_output_folder(output_dir, script)
        except UserInputError as error:
            refusal = str(error)
    refusals = [said for said in every_process_says(refusal) if said is not None]
    if refusals:
        raise UserInputError(refusals[0])
