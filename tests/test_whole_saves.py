"""A checkpoint is written under a temporary name and renamed to `checkpoint-N` once whole: a save cut off half-way
leaves no `checkpoint-N`, only a temporary folder that the next run removes and never resumes from; the rotation
(--save_total_limit) and a resume see the final names; a save that fails on one process stops every process."""

import errno
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import transformers
from conftest import run_two_ranks
from test_run_safety import SCRIPTS, corpus, pretraining_args  # noqa: F401
from transformers.trainer_utils import get_last_checkpoint

from spanroberta.runs.checkpoint_files import CHECKSUMS_FILE, SAVING_MARK
from spanroberta.runs.checkpoints import checkpoint_problem, find_checkpoints, staged_checkpoint
from spanroberta.runs.full_disk import DiskFullError, SaveFailedElsewhere
from spanroberta.runs.trainer import RunTrainer


def pretrain(pretraining_args, out, *flags):
    SCRIPTS["run_pretraining.py"].main([*pretraining_args, "--output_dir", str(out), *flags])


def test_a_save_cut_off_half_way_leaves_only_a_temporary_folder_that_the_next_run_removes(
    pretraining_args, tmp_path, monkeypatch, caplog
):
    out = tmp_path / "out"
    save_rng_state = transformers.Trainer._save_rng_state

    def killed_at_step_4(trainer, output_dir):
        if trainer.state.global_step == 4:
            raise KeyboardInterrupt  # as a kill would: nothing after it runs
        save_rng_state(trainer, output_dir)

    monkeypatch.setattr(transformers.Trainer, "_save_rng_state", killed_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        pretrain(pretraining_args, out, "--max_steps", "6", "--save_steps", "2")
    staged = staged_checkpoint(out / "checkpoint-4")
    assert (staged / "model.safetensors").is_file() and (staged / "optimizer.pt").is_file()
    assert not (out / "checkpoint-4").exists() and [step for step, _ in find_checkpoints(out)] == [2]
    assert get_last_checkpoint(str(out)) == str(out / "checkpoint-2")  # transformers' own choice agrees

    monkeypatch.setattr(transformers.Trainer, "_save_rng_state", save_rng_state)
    with caplog.at_level(logging.WARNING):
        pretrain(pretraining_args, out, "--max_steps", "6", "--save_steps", "2", "--resume_from_checkpoint", "true")
    assert f"Removed {staged.parent}: a save of step 4 cut off before it was complete" in caplog.text
    assert f"Resuming from {out / 'checkpoint-2'} (step 2)" in caplog.text
    assert not staged.parent.exists() and [step for step, _ in find_checkpoints(out)] == [6, 4, 2]
    for _, folder in find_checkpoints(out):
        assert checkpoint_problem(folder) is None and (folder / CHECKSUMS_FILE).is_file()
        assert not (folder / SAVING_MARK).exists()


def test_the_rotation_sees_the_final_names(pretraining_args, tmp_path):
    out = tmp_path / "out"
    pretrain(pretraining_args, out, "--max_steps", "6", "--save_steps", "2", "--save_total_limit", "1")
    assert [folder.name for folder in out.iterdir() if "checkpoint" in folder.name] == ["checkpoint-6"]

    staged = staged_checkpoint(out / "checkpoint-8")
    assert staged == out / "tmp-checkpoint-8" / "checkpoint-8"
    # what the rotation globs, transformers' regex and find_checkpoints never take a staging folder for a checkpoint
    staged.mkdir(parents=True)
    assert get_last_checkpoint(str(out)) == str(out / "checkpoint-6")
    assert [path.name for path in out.glob("checkpoint-*")] == ["checkpoint-6"]
    assert [step for step, _ in find_checkpoints(out)] == [6]


def test_a_best_checkpoint_is_named_by_its_final_name(tmp_path, monkeypatch):
    """transformers looks for the best checkpoint where it saved it: under the staging name, renamed after."""
    out = tmp_path / "out"
    seen = {}
    save_checkpoint = transformers.Trainer._save_checkpoint

    def save_as_best(trainer, model, trial):
        trainer.state.best_global_step = trainer.state.global_step
        save_checkpoint(trainer, model, trial)
        seen[trainer.state.global_step] = trainer.state.best_model_checkpoint

    monkeypatch.setattr(transformers.Trainer, "_save_checkpoint", save_as_best)
    trainer = _tiny_trainer(out)
    trainer.train()
    assert seen == {step: str(out / f"tmp-checkpoint-{step}" / f"checkpoint-{step}") for step in (2, 4)}
    assert trainer.state.best_model_checkpoint == str(out / "checkpoint-4")
    saved = transformers.TrainerState.load_from_json(str(out / "checkpoint-4" / "trainer_state.json"))
    assert saved.best_model_checkpoint == str(out / "checkpoint-4") and checkpoint_problem(out / "checkpoint-4") is None


def _tiny_trainer(out: Path) -> RunTrainer:
    config = transformers.BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                                     intermediate_size=8, max_position_embeddings=8, num_labels=2)  # fmt: skip
    examples = [{"input_ids": [1, 2, 3], "labels": index % 2} for index in range(8)]
    args = transformers.TrainingArguments(str(out), max_steps=4, save_steps=2, per_device_train_batch_size=2,
                                          report_to=[], save_strategy="steps", use_cpu=True, disable_tqdm=True,
                                          logging_strategy="no")  # fmt: skip
    return RunTrainer(model=transformers.BertForSequenceClassification(config), args=args, train_dataset=examples)


def failure_seen_by_rank(rank, staging, failing_rank, failure, results):
    """One of two gloo processes saving together: only `failing_rank`'s share fails, with `failure`."""
    trainer = SimpleNamespace(args=SimpleNamespace(device=torch.device("cpu"), output_dir=str(staging.parent)),
                              is_world_process_zero=lambda: rank == 0)  # fmt: skip
    try:
        with RunTrainer._stop_every_process_on_failure(trainer, staging.parent / "checkpoint-4", staging):
            if rank == failing_rank:
                raise failure
        results.put((rank, None, ""))
    except Exception as error:
        results.put((rank, type(error).__name__, str(error)))


@pytest.mark.parametrize("failing_rank", [0, 1])
@pytest.mark.parametrize("failure", ["ENOSPC", "a bug"])
def test_a_save_that_fails_on_one_process_stops_every_process(failing_rank, failure, tmp_path):
    staging = tmp_path / "tmp-checkpoint-4"
    (staging / "checkpoint-4").mkdir(parents=True)
    error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) if failure == "ENOSPC" else ValueError("a bug")
    exit_codes, results = run_two_ranks(failure_seen_by_rank, tmp_path / "rendezvous", staging, failing_rank, error)
    assert exit_codes == [0, 0]  # neither waited forever
    seen = dict((rank, (kind, message)) for rank, kind, message in results)
    expected = DiskFullError.__name__ if failure == "ENOSPC" else ValueError.__name__
    assert seen[failing_rank][0] == expected
    assert seen[1 - failing_rank] == (
        SaveFailedElsewhere.__name__, f"Saving {tmp_path / 'checkpoint-4'} failed on another process of this run (its "
        "message says why); this process stops too.")  # fmt: skip
    if failure == "ENOSPC":
        assert "Nothing of checkpoint-4 is left: it was written under tmp-checkpoint-4" in seen[failing_rank][1]
    assert not staging.exists()  # removed by the main process, once every process had stopped writing
