"""A resume under another batch (size per device, gradient accumulation, processes) or, in pretraining, another
sequence length or masking than the checkpoint's is refused with the differences listed, unless
--allow_changed_batch."""

import json
import logging

import pytest
import run_pretraining
from test_run_safety import corpus, error_of, pretraining_args  # noqa: F401

from spanroberta.errors import UserInputError
from spanroberta.runs.resume_settings import RESUME_SETTINGS_FILE, changed_settings, check_resume_settings

SAVED = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "processes": 2, "max_seq_length": 128}


def checkpoint(tmp_path, settings=SAVED, train_batch_size=8):
    folder = tmp_path / "checkpoint-30"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 30, "train_batch_size": train_batch_size}))
    if settings is not None:
        (folder / RESUME_SETTINGS_FILE).write_text(json.dumps(settings))
    return folder


def test_each_changed_setting_is_listed(tmp_path):
    folder = checkpoint(tmp_path)
    assert changed_settings(folder, SAVED) == []
    now = {**SAVED, "per_device_train_batch_size": 4, "processes": 1, "masking": "span"}
    assert changed_settings(folder, now) == ["per_device_train_batch_size 8 there, 4 now", "processes 2 there, 1 now"]
    with pytest.raises(UserInputError, match="other settings \\(per_device_train_batch_size 8 there, 4 now; process"):
        check_resume_settings(folder, now, allow_changed=False)


def test_allow_changed_batch_warns_and_goes_on(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        check_resume_settings(checkpoint(tmp_path), {**SAVED, "gradient_accumulation_steps": 2}, allow_changed=True)
    assert "gradient_accumulation_steps 1 there, 2 now" in caplog.text and "--allow_changed_batch" in caplog.text


def test_a_checkpoint_saved_before_the_settings_file_is_checked_on_its_batch_size(tmp_path):
    folder = checkpoint(tmp_path, settings=None, train_batch_size=8)
    assert changed_settings(folder, {**SAVED, "per_device_train_batch_size": 4}) == [
        "per_device_train_batch_size 8 there, 4 now"]


def test_a_pretraining_resume_with_another_batch_or_block_length_is_refused(pretraining_args, tmp_path):
    out = tmp_path / "out"
    run_pretraining.main([*pretraining_args, "--output_dir", str(out), "--max_steps", "2", "--save_steps", "2"])
    saved = json.loads((out / "checkpoint-2" / RESUME_SETTINGS_FILE).read_text())
    assert saved == {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 1, "processes": 1,
                     "max_seq_length": 32, "masking": saved["masking"], "mask_replace_prob": 0.8,
                     "random_replace_prob": 0.1}  # fmt: skip
    resume = [*pretraining_args, "--output_dir", str(out), "--max_steps", "3", "--resume_from_checkpoint", "true"]
    message = error_of("run_pretraining.py", [*resume, "--per_device_train_batch_size", "2",
                                              "--max_seq_length", "24"])  # fmt: skip
    assert "per_device_train_batch_size 4 there, 2 now; max_seq_length 32 there, 24 now" in message
    assert "--allow_changed_batch" in message and not (out / "checkpoint-3").exists()
    run_pretraining.main([*resume, "--per_device_train_batch_size", "2", "--allow_changed_batch", "true"])
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 3
