"""benchmarks/gpu/check.py rehearsed on a CPU at toy size (--toy), so that the prepared GPU check cannot rot: every
stage runs or says why it is skipped, a failing or hanging stage is reported without stopping the rest, and the
records go to the folder asked for, never to the project's benchmarks/results/."""

import shlex
import sys
import time
from pathlib import Path

import pytest

from benchmarks.gpu import check
from conftest import shared_data
from spanroberta.records import RESULTS_DIR, read_records


def test_the_toy_check_runs_every_stage_and_prints_the_table_last(tmp_path, capsys):
    committed = {name: len(read_records(name)) for name in ("trainer", "pretraining_step", "gpu-check", "tasks")}
    assert check.main(["--toy", "--records_dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    stages = [line.split(" | ")[0].removeprefix("| ") for line in table if line.startswith("| ") and "---" not in line]
    assert stages == ["stage", *check.STAGE_NAMES]
    assert table[-1].startswith("| tasks |")  # the table comes last

    record = read_records("gpu-check", tmp_path)[-1]
    outcomes = record["results"]["stages"]
    for name in ("prepare", "cuda-tests", "trainer-eager", "step", "step-profile"):
        assert outcomes[name]["status"].startswith("passed"), outcomes[name]
    for name in ("trainer-compiled", "large-eager", "large-compiled"):
        assert outcomes[name]["status"].startswith("skipped")
    assert outcomes["squad-smoke"]["status"].startswith(("passed", "skipped: absent"))
    assert outcomes["tasks"]["status"].startswith(("passed", "skipped: absent"))
    if outcomes["tasks"]["status"] == "passed":  # RTE's one toy unit, recorded where the check's records go
        assert outcomes["tasks"]["figures"] == "1 unit recorded: rte seed 0" and read_records("tasks", tmp_path)
    assert outcomes["qa-demo"]["status"].startswith("skipped: the rehearsal has no SQuAD model")
    assert "vs baseline" in outcomes["trainer-eager"]["figures"] and "vs baseline" in outcomes["step"]["figures"]
    assert "packed-varlen_fa2 step" in outcomes["step"]["figures"]
    assert "packed-varlen_fa2 host" in outcomes["step-profile"]["figures"]
    assert read_records("trainer", tmp_path) and read_records("pretraining_step", tmp_path)
    runs = read_records("trainer", tmp_path)[-1]["results"]["runs"]  # each side's attention, as its run named it
    assert {run["attn_implementation"] for run in runs.values()} == {"sdpa"}
    assert record["load_average"]["at_end"] is not None and record["settings"]["toy"] is True
    assert {name: len(read_records(name, RESULTS_DIR)) for name in committed} == committed


def test_stages_runs_a_part_of_the_check(tmp_path, capsys):
    assert check.main(["--toy", "--stages", "step", "--records_dir", str(tmp_path)]) == 0
    outcomes = read_records("gpu-check", tmp_path)[-1]["results"]["stages"]
    assert {name for name, outcome in outcomes.items() if outcome["status"] == "passed"} == {"prepare", "step"}
    assert outcomes["trainer-eager"]["status"] == "skipped: not asked for (--stages)"


def test_the_tasks_stage_needs_none_of_the_speed_stages_data(tmp_path):
    """A call that carries only the task benchmark's inputs runs no prepare, which reads the speed stages' corpus;
    with no inputs carried, the stage says what to carry."""
    assert check.main(["--toy", "--stages", "tasks", "--records_dir", str(tmp_path)]) == 0
    outcomes = read_records("gpu-check", tmp_path)[-1]["results"]["stages"]
    assert outcomes["prepare"]["status"] == "skipped: not asked for (--stages)"
    (stage,) = [s for s in check.stages(toy=False, work=tmp_path, task_inputs=tmp_path / "none") if s.name == "tasks"]
    assert stage.skip == f"no task inputs in {tmp_path / 'none'} (carry .gpu/tasks or .gpu/race)"
    (tmp_path / "carried" / "rte").mkdir(parents=True)
    (tmp_path / "carried" / "rte" / "inputs.json").write_text("{}")
    carried = check.stages(toy=False, work=tmp_path, task_inputs=tmp_path / "carried")
    (stage,) = [s for s in carried if s.name == "tasks"]
    assert stage.command[-6:] == ["--inputs", str(tmp_path / "carried"), "--tasks", "rte", "--jobs", "5"]


def test_the_qa_demo_keeps_a_gpu_size_squad_model_and_runs_the_pipeline_check_on_it(tmp_path):
    (demo,) = [s for s in check.stages(toy=False, work=tmp_path, task_inputs=tmp_path) if s.name == "qa-demo"]
    assert demo.skip.startswith("absent: ") and str(tmp_path / "squad" / "inputs.json") in demo.skip
    shared_data("squad", "dev-v1.1.json")
    (tmp_path / "squad").mkdir()
    (tmp_path / "squad" / "inputs.json").write_text("{}")
    (demo,) = [s for s in check.stages(toy=False, work=tmp_path, task_inputs=tmp_path) if s.name == "qa-demo"]
    unit, pipeline = demo.command[2].split(" && ")
    assert demo.command[:2] == ["bash", "-c"] and demo.benchmark == "qa-pipeline"
    assert shlex.split(unit)[1:] == [
        "-m", "benchmarks.tasks.scores", "--size", "gpu", "--inputs", str(tmp_path), "--tasks", "squad", "--seeds", "0",
        "--records_dir", str(tmp_path / "qa-unit-records"), "--keep_outputs", str(tmp_path / "qa-model")]  # fmt: skip
    assert shlex.split(pipeline)[1:] == ["-m", "benchmarks.parity.qa_pipeline", "--model",
                                         str(tmp_path / "qa-model" / "gpu" / "squad-seed0")]  # fmt: skip


@pytest.mark.parametrize(
    "code, limit, status",
    [("print('what went wrong'); raise SystemExit(3)", 30, "failed (exit 3)"),
     ("print('what went wrong'); import time; time.sleep(60)", 5, "timed out after 5 s")],
)
def test_a_failing_or_hanging_stage_is_reported_not_fatal(tmp_path, code, limit, status):
    stage = check.Stage("broken", [sys.executable, "-c", code], timeout=limit)
    check.run_stage(stage, seconds_left=60, env=check.stage_environment(tmp_path, toy=True), logs=tmp_path)
    assert stage.outcome["status"] == status
    assert check.figures(stage, {}, tmp_path) == ""
    assert stage.outcome["log_tail"] == ["what went wrong"]  # the end of its log outlives the log's folder


def test_a_stage_cut_off_at_its_limit_is_killed_with_the_processes_it_started(tmp_path):
    child = tmp_path / "child.pid"
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(60)")  # fmt: skip
    stage = check.Stage("spawns", [sys.executable, "-c", code], timeout=3)
    check.run_stage(stage, seconds_left=60, env={}, logs=tmp_path)
    assert stage.outcome["status"] == "timed out after 3 s"
    status = Path(f"/proc/{int(child.read_text())}/status")
    for _ in range(50):
        if not _alive(status):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the stage's child ({status.parent}) outlived the stage")


def _alive(status: Path) -> bool:
    """Whether the process of a /proc/PID/status is running (a killed child that nobody reaped stays a zombie)."""
    try:
        return "State:\tZ" not in status.read_text()
    except FileNotFoundError:
        return False


def test_a_stage_never_runs_past_what_is_left_of_the_budget(tmp_path):
    stage = check.Stage("slow", [sys.executable, "-c", "import time; time.sleep(30)"], timeout=100)
    check.run_stage(stage, seconds_left=1.5, env={}, logs=tmp_path)
    assert stage.outcome["status"] == "timed out after 1 s" and stage.outcome["limit_seconds"] == 1
