"""Graceful preemption: a SIGTERM (or SIGUSR1) ends the optimizer step in progress, saves a complete checkpoint,
prints the command that resumes it and exits with PREEMPTED_EXIT_CODE; the resumed run ends with the weights of an
uninterrupted one."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch
from conftest import PROJECT_ROOT, run_two_ranks
from test_resume import MAX_STEPS, SAVE_STEPS, final_weights, resume, run_args, uninterrupted  # noqa: F401
from transformers import TrainerControl

from spanroberta.runs.checkpoint_files import CHECKSUMS_FILE, SAVING_MARK
from spanroberta.runs.checkpoints import checkpoint_problem, find_checkpoints
from spanroberta.runs.folder_lock import LOCK_FILE
from spanroberta.runs.preemption import (
    PREEMPTED_EXIT_CODE,
    PREEMPTED_FILE,
    SaveOnPreemption,
    catch_preemption_signals,
    preempted_message,
    resume_command,
    signal_noted,
    signals_noted,
    stop_if_signalled,
)

CPU = SimpleNamespace(device=torch.device("cpu"))


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGUSR1])
def test_a_signal_stops_training_after_the_step_in_progress_with_a_save(signal_number):
    callback, control = SaveOnPreemption(), TrainerControl()
    before = signal.getsignal(signal_number)
    with catch_preemption_signals(callback):
        callback.on_step_end(CPU, SimpleNamespace(global_step=6), control)
        assert not control.should_save and not control.should_training_stop and callback.stopped_at is None
        os.kill(os.getpid(), signal_number)  # handled here, between two bytecodes: the flag only
        assert callback.requested_by == signal.Signals(signal_number).name and not control.should_save
        callback.on_step_end(CPU, SimpleNamespace(global_step=7), control)
    assert control.should_save and control.should_training_stop and callback.stopped_at == 7
    assert signal.getsignal(signal_number) is before


def test_every_process_stops_after_the_same_step(tmp_path):
    """Where torch.distributed is initialised the flag is all-reduced (here a group of one, over gloo)."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                                         world_size=1)  # fmt: skip
    try:
        callback, control = SaveOnPreemption(), TrainerControl()
        callback.on_step_end(CPU, SimpleNamespace(global_step=3), control)
        assert callback.stopped_at is None
        callback.requested_by = "SIGTERM"
        callback.on_step_end(CPU, SimpleNamespace(global_step=4), control)
        assert callback.stopped_at == 4 and control.should_save
    finally:
        torch.distributed.destroy_process_group()


def stop_step_of_rank(rank, results):
    """One of two gloo processes: only rank 1 is told to stop, during step 2."""
    callback, control = SaveOnPreemption(), TrainerControl()
    for step in range(1, 5):
        if rank == 1 and step == 2:
            callback.requested_by = "SIGTERM"
        callback.on_step_end(CPU, SimpleNamespace(global_step=step), control)
        if control.should_training_stop:
            break
    results.put((rank, callback.stopped_at, control.should_save))


def test_a_signal_to_one_process_stops_every_process_after_the_same_step(tmp_path):
    exit_codes, results = run_two_ranks(stop_step_of_rank, tmp_path / "rendezvous")
    assert exit_codes == [0, 0]
    assert sorted(results) == [(0, 2, True), (1, 2, True)]


def test_the_resume_command_replaces_any_resume_flag():
    assert resume_command(["run_pretraining.py", "--output_dir", "out"], "out/checkpoint-7") == (
        "python run_pretraining.py --output_dir out --resume_from_checkpoint out/checkpoint-7")
    for given in (["--resume_from_checkpoint", "true"], ["--resume_from_checkpoint=true"]):
        command = resume_command(["run_squad.py", "config.yaml", *given, "--seed", "3"], "o/checkpoint-2")
        assert command == "python run_squad.py config.yaml --seed 3 --resume_from_checkpoint o/checkpoint-2"
    line = preempted_message("SIGTERM", 7, "my out", ["run_glue.py", "--output_dir", "my out"])
    assert "\n" not in line and "stopped by SIGTERM after step 7" in line
    assert f"exit status {PREEMPTED_EXIT_CODE}" in line
    assert line.endswith("--output_dir 'my out' --resume_from_checkpoint 'my out/checkpoint-7'")


@pytest.mark.slow
def test_a_sigterm_saves_exits_and_resumes_to_the_weights_of_an_uninterrupted_run(run_args, uninterrupted, tmp_path):
    output_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    process = subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "run_pretraining.py"), *run_args, "--output_dir", str(output_dir)],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    # The first checkpoint whole: the run is training, between two saves.
    first = output_dir / f"checkpoint-{SAVE_STEPS}"
    deadline = time.monotonic() + 600
    while (not (first / CHECKSUMS_FILE).is_file() or checkpoint_problem(first) is not None) \
            and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == PREEMPTED_EXIT_CODE, stderr.decode()[-3000:]

    step, checkpoint = find_checkpoints(output_dir)[0]
    assert SAVE_STEPS <= step < MAX_STEPS
    assert checkpoint_problem(checkpoint) is None and (checkpoint / CHECKSUMS_FILE).is_file()
    assert not (checkpoint / SAVING_MARK).exists() and not (output_dir / "model.safetensors").exists()
    assert not (output_dir / LOCK_FILE).exists()  # released at exit
    last_line = stdout.decode().strip().splitlines()[-1]
    assert f"stopped by SIGTERM after step {step}" in last_line
    assert last_line.endswith(f"--resume_from_checkpoint {checkpoint}"), last_line

    resume(run_args, output_dir, str(checkpoint))
    expected, resumed = final_weights(uninterrupted), final_weights(output_dir)
    assert expected.keys() == resumed.keys()
    for name in expected:
        torch.testing.assert_close(resumed[name], expected[name], rtol=0, atol=1e-6, msg=name)


class _Line(torch.nn.Module):
    """The smallest model a Trainer trains: a loss of one weight."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))

    def forward(self, x, labels=None):
        return {"loss": ((self.weight * x - labels) ** 2).mean()}


def test_a_preempted_step_saves_once_without_evaluating_under_any_save_strategy(tmp_path, monkeypatch):
    from transformers import TrainerCallback, TrainingArguments

    from spanroberta.runs.trainer import RunTrainer

    class SignalAtStep2(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == 1:
                os.kill(os.getpid(), signal.SIGTERM)

    rows = [{"x": torch.tensor([1.0]), "labels": torch.tensor([2.0])}] * 16
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=2, max_steps=8,
                             eval_strategy="steps", eval_steps=1, save_strategy="best", metric_for_best_model="loss",
                             report_to="none", use_cpu=True, logging_steps=1)  # fmt: skip
    trainer = RunTrainer(model=_Line(), args=args, train_dataset=rows, eval_dataset=rows[:2],
                         callbacks=[SignalAtStep2()])  # fmt: skip
    evaluations = []
    # Every evaluation scores the same: only the first is a new best, which --save_strategy best saves.
    monkeypatch.setattr(trainer, "_evaluate",
                        lambda *a, **k: evaluations.append(trainer.state.global_step) or {"eval_loss": 1.0})
    with pytest.raises(SystemExit) as ended:
        trainer.train()
    assert ended.value.code == PREEMPTED_EXIT_CODE
    assert evaluations == [1]  # the preempted step 2 was not evaluated first
    assert [step for step, _ in find_checkpoints(tmp_path)] == [2, 1]
    # What a job script reads where a launcher hides the exit status, until a run trains in the folder again.
    assert json.loads((tmp_path / PREEMPTED_FILE).read_text())["step"] == 2
    assert checkpoint_problem(tmp_path / "checkpoint-2") is None


def line_trainer(output_dir, max_steps=4):
    from transformers import TrainingArguments

    from spanroberta.runs.trainer import RunTrainer

    rows = [{"x": torch.tensor([1.0]), "labels": torch.tensor([2.0])}] * 8
    args = TrainingArguments(output_dir=str(output_dir), per_device_train_batch_size=2, max_steps=max_steps,
                             save_strategy="no", report_to="none", use_cpu=True)  # fmt: skip
    return RunTrainer(model=_Line(), args=args, train_dataset=rows)


def test_a_signal_before_training_stops_the_run_with_nothing_to_save(tmp_path, capsys, monkeypatch):
    """A SIGTERM while the data is read or the model loads is noted, not fatal; training then does not begin."""
    monkeypatch.setattr(sys, "argv", ["run_glue.py", "--output_dir", str(tmp_path)])
    (tmp_path / PREEMPTED_FILE).write_text("{}")  # an earlier run's: removed as this one starts training
    with signals_noted("run_glue.py"):
        os.kill(os.getpid(), signal.SIGTERM)  # the process goes on
        assert signal_noted() == "SIGTERM"
        trainer = line_trainer(tmp_path)
        with pytest.raises(SystemExit) as ended:
            trainer.train()
    assert ended.value.code == PREEMPTED_EXIT_CODE and trainer.state.global_step == 0
    assert trainer.model.weight.item() == 1.0 and find_checkpoints(tmp_path) == []
    assert json.loads((tmp_path / PREEMPTED_FILE).read_text()) == {"signal": "SIGTERM", "step": None,
                                                                   "checkpoint": None}  # fmt: skip
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert "stopped by SIGTERM before training began, with nothing to save (exit status 75)" in line
    assert line.endswith(f"python run_glue.py --output_dir {tmp_path}")
    assert signal_noted() is None  # the block's note ends with it


def test_a_signal_noted_after_the_check_is_saved_at_the_first_step():
    callback = SaveOnPreemption()
    with signals_noted("run_glue.py"):
        os.kill(os.getpid(), signal.SIGUSR1)
        with catch_preemption_signals(callback):
            assert callback.requested_by == "SIGUSR1"


def test_a_signal_after_the_last_step_lets_the_run_finish_and_complete(tmp_path, capsys):
    """The final save and evaluation are not cut short: the run ends as complete (no mark), saying so."""
    (tmp_path / PREEMPTED_FILE).write_text("{}")  # an earlier run's: removed as this one starts training
    with signals_noted("run_glue.py"):
        trainer = line_trainer(tmp_path)
        trainer.train()
        os.kill(os.getpid(), signal.SIGTERM)  # during the final save
        trainer.save_model()
    assert (tmp_path / "model.safetensors").is_file()
    assert trainer.state.global_step == 4 and not (tmp_path / PREEMPTED_FILE).exists()
    assert "SIGTERM came once training was over; the run finished what was left" in capsys.readouterr().out
    assert signal_noted() is None


def stop_before_training_in_rank(rank, output_dir, results):
    """One of two gloo processes, of which only rank 1 took a SIGTERM before training (neither puts a result: both
    end with the preemption's exit code)."""
    with signals_noted("run_pretraining.py"):
        if rank == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        stop_if_signalled(str(output_dir), is_main_process=rank == 0)


def test_a_signal_before_training_to_one_process_stops_every_process(tmp_path):
    exit_codes, _ = run_two_ranks(stop_before_training_in_rank, tmp_path / "rendezvous", tmp_path)
    assert exit_codes == [PREEMPTED_EXIT_CODE] * 2
    # Written by the main process, which did not take the signal itself.
    assert json.loads((tmp_path / PREEMPTED_FILE).read_text())["signal"] == "SIGTERM"


def test_a_signal_after_the_last_steps_check_is_noted_for_what_follows():
    """It stopped no step (training was over): the driver of several runs still learns of it."""
    callback = SaveOnPreemption()
    with signals_noted("run_ablation.py"):
        with catch_preemption_signals(callback):
            os.kill(os.getpid(), signal.SIGTERM)  # after the last on_step_end
        assert callback.stopped_at is None and signal_noted() == "SIGTERM"
