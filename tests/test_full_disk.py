"""A checkpoint save that fails for want of space stops the run with one paragraph naming the folder, the space
free and needed and the last complete checkpoint, and leaves no half-written checkpoint behind."""

import errno
import os

import pytest
import transformers
from test_run_safety import corpus, error_of, glue_args, pretraining_args  # noqa: F401

from spanroberta.runs import full_disk
from spanroberta.runs.checkpoints import checkpoint_problem
from spanroberta.runs.full_disk import is_full_disk

TORCH_WRITE_FAILURE = "[enforce fail at inline_container.cc:672] . unexpected pos 242816 vs 242708"


def test_what_counts_as_a_full_disk():
    assert is_full_disk(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), free=10**9, needed=None)
    assert is_full_disk(OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)), free=10**9, needed=None)
    # safetensors' writer (Rust) keeps only the OS's message
    assert is_full_disk(Exception("Error while serializing: No space left on device (os error 28)"), 10**9, None)
    # torch's archive writer drops the errno: a full disk only where less is free than a checkpoint takes
    assert is_full_disk(RuntimeError(TORCH_WRITE_FAILURE), free=1000, needed=5000)
    assert not is_full_disk(RuntimeError(TORCH_WRITE_FAILURE), free=10**9, needed=5000)
    assert not is_full_disk(RuntimeError(TORCH_WRITE_FAILURE), free=1000, needed=None)
    try:
        try:
            raise OSError(errno.ENOSPC, "write")
        except OSError as cause:
            raise RuntimeError("saving failed") from cause
    except RuntimeError as error:
        assert is_full_disk(error, free=10**9, needed=None)
    assert not is_full_disk(OSError(errno.EACCES, "denied"), free=0, needed=1)
    assert not is_full_disk(ValueError("bad"), free=0, needed=1)


FAILURES = {
    "ENOSPC": lambda: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    "a torch archive write": lambda: RuntimeError(TORCH_WRITE_FAILURE),
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
    assert f"Saving {out / 'checkpoint-4'} failed: the disk holding {out} is full" in message
    assert "2.0 KiB is free there and a checkpoint of this run takes" in message and "(checkpoint-2)" in message
    assert f"The last complete checkpoint is {out / 'checkpoint-2'}" in message
    assert not (out / "checkpoint-4").exists() and checkpoint_problem(out / "checkpoint-2") is None


def test_fine_tuning_names_a_full_disk_in_one_paragraph_too(glue_args, tmp_path, monkeypatch):
    def no_space(trainer, output_dir):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(transformers.Trainer, "_save_optimizer_and_scheduler", no_space)
    out = tmp_path / "out"
    message = error_of("run_glue.py", [*glue_args, "--output_dir", str(out), "--max_steps", "2", "--save_steps", "1"])
    assert f"Saving {out / 'checkpoint-1'} failed: the disk holding {out} is full" in message
    assert "There is no complete checkpoint yet" in message and not (out / "checkpoint-1").exists()
