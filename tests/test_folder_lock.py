"""One run per output folder: the main process holds the folder's lock before a model loads; a second run into a
held folder is refused in one line naming the holder; a stale lock is taken over with a note; the lock goes at
exit."""

import json
import logging
import os
import socket
import subprocess
import sys

import pytest
from conftest import run_two_ranks
from test_run_safety import corpus, error_of, glue_args, pretraining_args  # noqa: F401

from spanroberta.errors import UserInputError
from spanroberta.runs import folder_lock
from spanroberta.runs.folder_lock import LOCK_FILE, hold_output_folder, read_lock, release_held_locks
from spanroberta.runs.output_folder import RUN_MARKER, check_output_folder_owner, mark_output_folder


@pytest.fixture
def other_process():
    """A live process of this host that is not this one."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield process.pid
    process.kill()
    process.wait()


@pytest.fixture(autouse=True)
def no_slurm(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)


def write_lock(folder, **holder):
    folder.mkdir(parents=True, exist_ok=True)
    content = {"script": "run_pretraining.py", "host": socket.gethostname(), "started": "2026-01-01 00:00:00 UTC",
               "slurm_job": None, "slurm_restart": 0, **holder}  # fmt: skip
    (folder / LOCK_FILE).write_text(json.dumps(content))


def test_the_lock_names_this_process_is_kept_by_it_and_released_at_exit(tmp_path):
    folder = tmp_path / "out"
    hold_output_folder(folder, "run_glue.py")
    holder = read_lock(folder / LOCK_FILE)
    assert (holder["host"], holder["pid"], holder["script"]) == (socket.gethostname(), os.getpid(), "run_glue.py")
    hold_output_folder(folder, "run_glue.py")  # a later run in the same process
    assert [path.name for path in folder.iterdir()] == [LOCK_FILE]
    release_held_locks()
    assert not (folder / LOCK_FILE).exists()


def test_a_folder_held_by_a_live_run_is_refused_naming_it(tmp_path, other_process):
    write_lock(tmp_path, pid=other_process)
    with pytest.raises(UserInputError) as refused:
        hold_output_folder(tmp_path, "run_pretraining.py")
    message = str(refused.value)
    assert f"is in use by another run: run_pretraining.py (process {other_process} on {socket.gethostname()}" in message
    assert "\n" not in message and read_lock(tmp_path / LOCK_FILE)["pid"] == other_process


def test_a_lock_of_another_host_is_refused_with_how_to_clear_it(tmp_path):
    write_lock(tmp_path, host="node-17", pid=1, slurm_job="99")
    with pytest.raises(UserInputError, match=f"node-17, SLURM job 99.*if that run is over, delete {tmp_path}"):
        hold_output_folder(tmp_path, "run_pretraining.py")


def test_a_stale_lock_is_taken_over_with_a_note(tmp_path, caplog):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    write_lock(tmp_path, pid=int(finished.stdout))
    with caplog.at_level(logging.WARNING, logger=folder_lock.__name__):
        hold_output_folder(tmp_path, "run_pretraining.py")
    assert read_lock(tmp_path / LOCK_FILE)["pid"] == os.getpid()
    assert f"process {finished.stdout.strip()} on" in caplog.text and "no longer runs" in caplog.text
    release_held_locks()


def test_a_requeued_slurm_job_takes_over_its_earlier_runs_lock(tmp_path, monkeypatch):
    write_lock(tmp_path, host="node-3", pid=1234, slurm_job="77", slurm_restart=0)
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    hold_output_folder(tmp_path, "run_pretraining.py")
    assert read_lock(tmp_path / LOCK_FILE)["slurm_restart"] == 1
    release_held_locks()


def test_a_lock_left_alone_does_not_make_a_folder_anothers(tmp_path):
    write_lock(tmp_path, host="node-3", pid=1)
    check_output_folder_owner(tmp_path, "run_glue.py", overwrite_output_dir=False)


def test_a_second_run_into_a_held_folder_is_refused_before_a_model_loads(pretraining_args, glue_args, tmp_path,
                                                                         other_process):  # fmt: skip
    for script, args in (("run_pretraining.py", pretraining_args), ("run_glue.py", glue_args)):
        out = tmp_path / script
        write_lock(out, pid=other_process)
        message = error_of(script, [*args, "--output_dir", str(out), "--max_steps", "2"])
        assert f"in use by another run: run_pretraining.py (process {other_process}" in message
        assert sorted(path.name for path in out.iterdir()) == [LOCK_FILE], script
        assert not (out / RUN_MARKER).exists()


def test_marking_a_folder_takes_its_lock(tmp_path):
    mark_output_folder(tmp_path / "out", "run_squad.py")
    assert read_lock(tmp_path / "out" / LOCK_FILE)["pid"] == os.getpid()
    release_held_locks()


def test_a_filesystem_without_hard_links_takes_the_lock_by_exclusive_creation(tmp_path, monkeypatch, other_process):
    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(folder_lock.os, "link", no_links)
    folder = tmp_path / "out"
    hold_output_folder(folder, "run_pretraining.py")
    try:
        assert read_lock(folder / LOCK_FILE)["pid"] == os.getpid()
        assert sorted(path.name for path in folder.iterdir()) == [LOCK_FILE]  # no partial file left
    finally:
        release_held_locks()
    write_lock(folder, pid=other_process)
    with pytest.raises(UserInputError, match="is in use by another run"):
        hold_output_folder(folder, "run_pretraining.py")


def claim_in_rank(rank, folder, results):
    """One of two gloo processes claiming `folder`: only rank 0 takes the lock, as only the main process saves."""
    from spanroberta.runs.output_folder import claim_output_folder

    try:
        claim_output_folder(folder, "run_pretraining.py", takes_lock=rank == 0)
        results.put((rank, None))
    except UserInputError as error:
        results.put((rank, str(error)))


def test_every_process_learns_the_locks_refusal_before_it_builds_a_model(tmp_path, other_process):
    """The process that does not take the lock is refused with the main process's line, not left to build its
    model (and then to wait for a peer that has exited)."""
    write_lock(tmp_path / "out", pid=other_process)
    exit_codes, results = run_two_ranks(claim_in_rank, tmp_path / "rendezvous", tmp_path / "out")
    assert exit_codes == [0, 0]
    refusals = dict(results)
    assert refusals[0] == refusals[1] and f"in use by another run: run_pretraining.py (process {other_process}" in \
        refusals[0]  # fmt: skip
    assert not (tmp_path / "out" / RUN_MARKER).exists()
