"""Kill and resume: a run SIGKILLed after a checkpoint and restarted with --resume_from_checkpoint ends with the
weights of an uninterrupted run; a checkpoint half-written by a kill during saving is skipped."""

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import run_pretraining
import torch
from conftest import PROJECT_ROOT, TINY_TEXT
from safetensors.torch import load_file

from spanroberta.errors import UserInputError
from spanroberta.runs.checkpoint_files import CHECKSUMS_FILE, SAVING_MARK
from spanroberta.runs.checkpoints import checkpoint_problem, resolve_resume_checkpoint

MAX_STEPS, SAVE_STEPS, KILL_AFTER = 30, 4, 12


@pytest.fixture(scope="module")
def run_args(tmp_path_factory, tiny_tokenizer_dir):
    """Flags of a tiny run: 40 blocks of 32 tokens, batch 4, so 10 steps an epoch and a resume mid-epoch."""
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text("\n\n".join("\n".join(TINY_TEXT[i : i + 3]) for i in range(0, 120, 3)) + "\n")
    return [
        "--train_file", str(corpus),
        "--tokenizer_name", str(tiny_tokenizer_dir),
        "--config_overrides", "num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64",
        "--model_size", "tiny",
        "--max_seq_length", "32",
        "--input_format", "full-sentences",
        "--per_device_train_batch_size", "4",
        "--max_train_samples", "40",
        "--learning_rate", "1e-3",
        "--warmup_steps", "2",
        "--max_steps", str(MAX_STEPS),
        "--save_steps", str(SAVE_STEPS),
        "--logging_steps", "1",
        "--validation_split_percentage", "0",
        "--disable_tqdm", "true",
        "--report_to", "none",
        "--seed", "7",
    ]


def final_weights(output_dir):
    return load_file(output_dir / "model.safetensors")


def losses(output_dir):
    state = json.loads((output_dir / "trainer_state.json").read_text())
    return {entry["step"]: entry["loss"] for entry in state["log_history"] if "loss" in entry}


@pytest.fixture(scope="module")
def uninterrupted(run_args, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("uninterrupted")
    run_pretraining.main([*run_args, "--output_dir", str(output_dir)])
    return output_dir


@pytest.fixture(scope="module")
def killed(run_args, tmp_path_factory):
    """The output folder of a run killed with SIGKILL once checkpoint-KILL_AFTER was complete."""
    output_dir = tmp_path_factory.mktemp("killed")
    # The same thread count as this process, so that the killed run computes exactly what an in-process run would.
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    process = subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "run_pretraining.py"), *run_args, "--output_dir", str(output_dir)],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    # trainer_state.json is written last and not atomically: the checkpoint is complete once it parses, not
    # once it exists (on a loaded machine a kill at its first byte leaves it truncated).
    checkpoint = output_dir / f"checkpoint-{KILL_AFTER}"
    # A bound for a hung run only: on a loaded machine the checkpoint can take minutes to appear.
    deadline = time.monotonic() + 600
    # Its checksums are written after trainer_state.json: the damaged-file cases need them.
    while (checkpoint_problem(checkpoint) is not None or not (checkpoint / CHECKSUMS_FILE).is_file()) \
            and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    still_running = process.poll() is None
    os.kill(process.pid, signal.SIGKILL)
    _, stderr = process.communicate()
    assert checkpoint_problem(checkpoint) is None, stderr.decode()[-2000:]
    assert still_running, "the run ended before it could be killed"
    assert not (output_dir / "model.safetensors").exists()
    return output_dir


def resume(run_args, output_dir, checkpoint="true"):
    run_pretraining.main([*run_args, "--output_dir", str(output_dir), "--resume_from_checkpoint", checkpoint])


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(run_args, killed, uninterrupted, tmp_path):
    output_dir = tmp_path / "run"
    shutil.copytree(killed, output_dir)
    resume(run_args, output_dir)

    expected, resumed = final_weights(uninterrupted), final_weights(output_dir)
    assert expected.keys() == resumed.keys()
    for name in expected:
        torch.testing.assert_close(resumed[name], expected[name], rtol=0, atol=1e-6, msg=name)
    # same data order and masks after the resume: the same loss at every step
    reference, after = losses(uninterrupted), losses(output_dir)
    assert sorted(after) == list(range(1, MAX_STEPS + 1))
    for step in range(KILL_AFTER + 1, MAX_STEPS + 1):
        assert after[step] == pytest.approx(reference[step], abs=1e-5), step


@pytest.mark.slow
def test_a_kill_during_saving_leaves_the_previous_checkpoint_usable(run_args, killed, uninterrupted, tmp_path):
    output_dir = tmp_path / "run"
    shutil.copytree(killed, output_dir)
    complete = KILL_AFTER
    for later in output_dir.glob("checkpoint-*"):  # a save the kill interrupted, on a slow machine
        if int(later.name.split("-")[1]) > complete:
            shutil.rmtree(later)
    # What transformers 5.23 leaves when killed during a save: the config and code files, nothing else.
    partial = output_dir / f"checkpoint-{complete + SAVE_STEPS}"
    partial.mkdir()
    for name in ("config.json", "configuration_spanroberta.py", "modeling_spanroberta.py"):
        shutil.copy(output_dir / f"checkpoint-{complete}" / name, partial / name)

    assert checkpoint_problem(partial) is not None and checkpoint_problem(output_dir / f"checkpoint-{complete}") is None
    with pytest.raises(UserInputError, match="not a complete checkpoint: trainer_state.json is missing"):
        resolve_resume_checkpoint(str(partial), str(output_dir))

    resume(run_args, output_dir)
    assert (output_dir / f"incomplete-checkpoint-{complete + SAVE_STEPS}").is_dir()
    expected, resumed = final_weights(uninterrupted), final_weights(output_dir)
    for name in expected:
        torch.testing.assert_close(resumed[name], expected[name], rtol=0, atol=1e-6, msg=name)


def test_a_truncated_trainer_state_or_missing_weights_make_a_checkpoint_incomplete(tmp_path):
    folder = tmp_path / "checkpoint-8"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "trainer_state.json").write_text('{"global_step": 8, "log_hist')
    assert "truncated" in checkpoint_problem(folder)
    (folder / "trainer_state.json").write_text('{"global_step": 8}')
    assert checkpoint_problem(folder) == "model.safetensors is empty"
    (folder / "model.safetensors").unlink()
    assert "no model weights" in checkpoint_problem(folder)
    with pytest.raises(UserInputError, match="no complete checkpoint"):
        resolve_resume_checkpoint(True, str(tmp_path))
    assert resolve_resume_checkpoint("false", str(tmp_path)) == (None, [])


def cut_in_half(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip_a_byte_in_the_middle(path):
    content = bytearray(path.read_bytes())
    content[len(content) // 2] ^= 0xFF
    path.write_bytes(bytes(content))


CORRUPTIONS = {
    "empty weights": ("model.safetensors", lambda path: path.write_bytes(b""), "model.safetensors is empty"),
    "half-written weights": ("model.safetensors", cut_in_half, "model.safetensors is cut short"),
    "a garbled weights header": ("model.safetensors", lambda path: path.write_bytes(
        path.read_bytes()[:8] + b"~" * 20 + path.read_bytes()[28:]), "model.safetensors has a damaged header"),
    "a truncated optimizer": ("optimizer.pt", cut_in_half, "optimizer.pt is cut short or damaged"),
    "a byte flipped in the optimizer": ("optimizer.pt", flip_a_byte_in_the_middle, "optimizer.pt is"),
    "a truncated RNG state": ("rng_state.pth", cut_in_half, "rng_state.pth is cut short or damaged"),
    "an empty scheduler": ("scheduler.pt", lambda path: path.write_bytes(b""), "scheduler.pt is empty"),
    "a truncated config": ("config.json", cut_in_half, "config.json is cut short or damaged"),
    # Whole in length and header: only the checksums written at the save tell it from the weights saved.
    "a byte flipped in the weights": ("model.safetensors", flip_a_byte_in_the_middle,
                                      "model.safetensors is damaged (its bytes are not those saved"),
    "a removed RNG state": ("rng_state.pth", lambda path: path.unlink(), "rng_state.pth is missing"),
    # A run stopped after trainer_state.json, before the checksums: every file whole, nothing to say so.
    "a save cut off before its checksums": (SAVING_MARK, lambda path: path.touch(), f"{SAVING_MARK} is still there"),
}  # fmt: skip


@pytest.mark.parametrize("corruption", CORRUPTIONS)
@pytest.mark.slow
def test_each_damaged_file_makes_a_checkpoint_incomplete(corruption, killed, tmp_path):
    name, damage, expected = CORRUPTIONS[corruption]
    folder = tmp_path / f"checkpoint-{KILL_AFTER}"
    shutil.copytree(killed / f"checkpoint-{KILL_AFTER}", folder)
    assert checkpoint_problem(folder) is None and not (folder / SAVING_MARK).exists()
    damage(folder / name)
    assert checkpoint_problem(folder).startswith(expected)


@pytest.mark.slow
def test_a_damaged_newest_checkpoint_is_set_aside_and_the_one_before_resumed(run_args, killed, uninterrupted,
                                                                            tmp_path, caplog):  # fmt: skip
    output_dir = tmp_path / "run"
    shutil.copytree(killed, output_dir)
    for later in output_dir.glob("checkpoint-*"):  # a save the kill interrupted, on a slow machine
        if int(later.name.split("-")[1]) > KILL_AFTER:
            shutil.rmtree(later)
    newest = output_dir / f"checkpoint-{KILL_AFTER}"
    cut_in_half(newest / "optimizer.pt")
    # an earlier run's damaged checkpoint of that step, already set aside, is kept as well
    (output_dir / f"incomplete-checkpoint-{KILL_AFTER}").mkdir()
    with caplog.at_level(logging.WARNING):
        resume(run_args, output_dir)
    aside = output_dir / f"incomplete-checkpoint-{KILL_AFTER}.2"
    assert (aside / "optimizer.pt").is_file() and (output_dir / f"incomplete-checkpoint-{KILL_AFTER}").is_dir()
    message = next(record.getMessage() for record in caplog.records if "Not resuming from" in record.getMessage())
    assert f"Not resuming from {newest}: optimizer.pt is cut short or damaged" in message and "\n" not in message
    assert f"moved aside, as it is, to {aside}; the run resumes from {output_dir / 'checkpoint-8'}" in message
    expected, resumed = final_weights(uninterrupted), final_weights(output_dir)
    for name in expected:
        torch.testing.assert_close(resumed[name], expected[name], rtol=0, atol=1e-6, msg=name)


def test_a_run_resumed_from_its_last_checkpoint_takes_no_further_step(run_args, tmp_path):
    """Resumed from the checkpoint of its last step (mid-epoch: 6 of 10 steps), a run ends as the uninterrupted run
    did, with no step beyond --max_steps: transformers' loop alone would take a seventh (runs/trainer.py)."""
    flags = list(run_args)
    for flag, value in (("--max_steps", "6"), ("--save_steps", "3")):
        flags[flags.index(flag) + 1] = value
    uninterrupted_dir, resumed_dir = tmp_path / "uninterrupted", tmp_path / "resumed"
    run_pretraining.main([*flags, "--output_dir", str(uninterrupted_dir)])
    shutil.copytree(uninterrupted_dir / "checkpoint-6", resumed_dir / "checkpoint-6")
    resume(flags, resumed_dir)

    assert sorted(losses(resumed_dir)) == list(range(1, 7))
    expected, resumed = final_weights(uninterrupted_dir), final_weights(resumed_dir)
    assert all(torch.equal(resumed[name], expected[name]) for name in expected)
