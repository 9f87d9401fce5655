"""A save that fails for want of room (a full disk, a quota, the file size limit) stops the run with one paragraph
naming the folder, the space free and needed and the last complete checkpoint, and leaves no half-written checkpoint
behind."""

import errno
import os

import pytest
import transformers
from test_run_safety import corpus, error_of, glue_args, pretraining_args  # noqa: F401

from spanroberta.runs import full_disk
from spanroberta.runs.checkpoints import checkpoint_problem
from spanroberta.runs.full_disk import FILE_SIZE_LIMIT, FULL_DISK, full_disk_error, save_failure_kind

TORCH_WRITE_FAILURE = "[enforce fail at inline_container.cc:672] . unexpected pos 242816 vs 242708"


def set_free_bytes(monkeypatch, free):
    real_usage = full_disk.shutil.disk_usage
    monkeypatch.setattr(full_disk.shutil, "disk_usage", lambda path: real_usage(path)._replace(free=free))


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    """A run folder whose newest checkpoint takes 5000 bytes, on a disk with 2048 bytes free."""
    checkpoint = tmp_path / "checkpoint-2"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(bytes(5000))
    set_free_bytes(monkeypatch, 2048)
    return tmp_path


def test_what_counts_as_a_full_disk_or_the_file_size_limit(run_dir, monkeypatch):
    def kind(error, written=()):
        return save_failure_kind(error, list(written), run_dir)

    assert kind(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))) == FULL_DISK
    assert kind(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))) == FULL_DISK
    assert kind(OSError(errno.EFBIG, os.strerror(errno.EFBIG))) == FILE_SIZE_LIMIT
    # safetensors' writer (Rust) keeps only the OS's message
    assert kind(Exception("Error while serializing: No space left on device (os error 28)")) == FULL_DISK
    assert kind(Exception("Error while serializing: I/O error: File too large (os error 27)")) == FILE_SIZE_LIMIT
    try:
        try:
            raise OSError(errno.ENOSPC, "write")
        except OSError as cause:
            raise RuntimeError("saving failed") from cause
    except RuntimeError as error:
        assert kind(error) == FULL_DISK
    assert kind(OSError(errno.EACCES, "denied")) is None and kind(ValueError("bad")) is None

    # torch's archive writer drops the errno: the file size limit where a file written has reached it, a full disk
    # only where less is free than the newest checkpoint takes
    cut = run_dir / "optimizer.pt"
    cut.write_bytes(bytes(1024))
    monkeypatch.setattr(full_disk, "file_size_limit", lambda: 1024)
    assert kind(RuntimeError(TORCH_WRITE_FAILURE), [cut]) == FILE_SIZE_LIMIT
    monkeypatch.setattr(full_disk, "file_size_limit", lambda: None)
    assert kind(RuntimeError(TORCH_WRITE_FAILURE), [cut]) == FULL_DISK
    set_free_bytes(monkeypatch, 10**9)
    assert kind(RuntimeError(TORCH_WRITE_FAILURE), [cut]) is None
    (run_dir / "checkpoint-2" / "model.safetensors").unlink()
    (run_dir / "checkpoint-2").rmdir()
    assert kind(RuntimeError(TORCH_WRITE_FAILURE), [cut]) is None  # no checkpoint to tell what a save needs


def test_the_error_is_classified_before_any_checkpoint_is_checksummed(run_dir, monkeypatch):
    checked = []
    monkeypatch.setattr(full_disk, "checkpoint_problem", lambda folder: checked.append(folder))
    staged = run_dir / "tmp-checkpoint-4" / "checkpoint-4"
    staged.mkdir(parents=True)
    set_free_bytes(monkeypatch, 10**9)  # room for a checkpoint: torch's errno-less failure is not a full disk
    for other in (ValueError("a bug"), OSError(errno.EACCES, "denied"), RuntimeError(TORCH_WRITE_FAILURE)):
        assert full_disk_error(other, run_dir / "checkpoint-4", run_dir, staged, "") is None
    assert checked == []
    assert full_disk_error(OSError(errno.ENOSPC, "full"), run_dir / "checkpoint-4", run_dir, staged, "") is not None
    assert checked == [run_dir / "checkpoint-2"]


def test_a_file_size_limit_is_told_as_such_not_as_a_full_disk(run_dir, monkeypatch):
    monkeypatch.setattr(full_disk, "file_size_limit", lambda: 1 << 20)
    message = str(full_disk_error(OSError(errno.EFBIG, os.strerror(errno.EFBIG)), run_dir / "checkpoint-4", run_dir,
                                  run_dir, "Nothing is left."))  # fmt: skip
    assert f"Saving {run_dir / 'checkpoint-4'} failed: a file reached this process's file size limit (1.0 MiB, " \
           "`ulimit -f`)" in message
    assert "ulimit -f unlimited" in message and "disk" not in message and "Nothing is left." in message


FAILURES = {
    "ENOSPC": lambda: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    "a torch archive write": lambda: RuntimeError(TORCH_WRITE_FAILURE),
    "EFBIG": lambda: OSError(errno.EFBIG, os.strerror(errno.EFBIG)),
}


@pytest.mark.parametrize("failure", FAILURES)
def test_a_full_disk_at_a_save_is_named_and_leaves_no_half_checkpoint(failure, pretraining_args, tmp_path,
                                                                      monkeypatch):  # fmt: skip
    out = tmp_path / "out"
    save = transformers.Trainer._save_optimizer_and_scheduler

    def save_until_the_disk_fills(trainer, output_dir):
        if trainer.state.global_step < 4:
            return save(trainer, output_dir)
        with open(os.path.join(output_dir, "optimizer.pt"), "wb") as half:
            half.write(b"PK\x03\x04 half an archive")
        raise FAILURES[failure]()

    monkeypatch.setattr(transformers.Trainer, "_save_optimizer_and_scheduler", save_until_the_disk_fills)
    real_usage = full_disk.shutil.disk_usage
    monkeypatch.setattr(full_disk.shutil, "disk_usage", lambda path: real_usage(path)._replace(free=2048))

    message = error_of("run_pretraining.py", [*pretraining_args, "--output_dir", str(out), "--max_steps", "6",
                                              "--save_steps", "2"])  # fmt: skip
    if failure == "EFBIG":
        assert f"Saving {out / 'checkpoint-4'} failed: a file reached this process's file size limit" in message
    else:
        assert f"Saving {out / 'checkpoint-4'} failed: the disk holding {out} is full" in message
        assert "2.0 KiB is free there and a checkpoint of this run takes" in message and "(checkpoint-2)" in message
    assert "Nothing of checkpoint-4 is left: it was written under tmp-checkpoint-4, which is removed." in message
    assert f"The last complete checkpoint is {out / 'checkpoint-2'}" in message
    assert not (out / "checkpoint-4").exists() and not (out / "tmp-checkpoint-4").exists()
    assert checkpoint_problem(out / "checkpoint-2") is None


def test_fine_tuning_names_a_full_disk_in_one_paragraph_too(glue_args, tmp_path, monkeypatch):
    def no_space(trainer, output_dir):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(transformers.Trainer, "_save_optimizer_and_scheduler", no_space)
    out = tmp_path / "out"
    message = error_of("run_glue.py", [*glue_args, "--output_dir", str(out), "--max_steps", "2", "--save_steps", "1"])
    assert f"Saving {out / 'checkpoint-1'} failed: the disk holding {out} is full" in message
    assert "There is no complete checkpoint yet" in message and not (out / "checkpoint-1").exists()
    assert not (out / "tmp-checkpoint-1").exists()


def test_a_full_disk_at_the_final_save_of_the_model_is_named_too(pretraining_args, tmp_path, monkeypatch):
    def no_space(trainer, output_dir=None, state_dict=None):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out = tmp_path / "out"
    monkeypatch.setattr(transformers.Trainer, "_save", no_space)
    message = error_of("run_pretraining.py", [*pretraining_args, "--output_dir", str(out), "--max_steps", "2",
                                              "--save_strategy", "no"])  # fmt: skip
    assert f"Saving {out} failed: the disk holding {out} is full" in message
    assert "may be incomplete; once there is room, the same command with --resume_from_checkpoint true" in message
