"""benchmarks/gpu/check.py rehearsed on a CPU at toy size (--toy), so that the prepared GPU check cannot rot: every
stage runs or says why it is skipped, a failing or hanging stage is reported without stopping the rest, the records
go to the folder asked for, never to the project's benchmarks/results/, and one archive holds what a call wrote. The
GPU plan (plan.py) is checked as written: its order, its runs' length, what a stage already recorded at this code
and the fp8 stage's guard skip."""

import os
import shlex
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from benchmarks.gpu import check, plan
from benchmarks.gpu.archive import main as archive_main
from benchmarks.speed.trainer import DEFAULTS, SPANBERT, TUNED
from conftest import shared_data
from spanroberta.records import RESULTS_DIR, read_records, start_run, write_record


@pytest.mark.slow
def test_the_toy_check_runs_every_stage_and_prints_the_table_last(tmp_path, capsys):
    committed = {name: len(read_records(name)) for name in ("trainer", "pretraining_step", "gpu-check", "tasks")}
    archive = tmp_path / "out" / "gpu-check.tar.gz"
    archive.parent.mkdir()
    assert check.main(["--toy", "--records_dir", str(tmp_path), "--archive", str(archive)]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    stages = [line.split(" | ")[0].removeprefix("| ") for line in table if line.startswith("| ") and "---" not in line]
    assert stages == ["stage", *plan.STAGE_NAMES]
    assert table[-1].startswith("| tasks |")  # the table comes last, after what was left for the next call
    assert "Nothing was left for the next call." in table

    record = read_records("gpu-check", tmp_path)[-1]
    outcomes = record["results"]["stages"]
    for name in ("prepare", "cuda-tests", "trainer-eager", "step-profile", "step", "sweep-base"):
        assert outcomes[name]["status"].startswith("passed"), outcomes[name]
    for name in ("trainer-compiled", "large-compiled", "large-eager", "sweep-large", "sweep-large-64", "fp8"):
        assert outcomes[name]["status"].startswith("skipped")
    assert outcomes["squad-smoke"]["status"].startswith(("passed", "skipped: absent"))
    assert outcomes["tasks"]["status"].startswith(("passed", "skipped: absent"))
    if outcomes["tasks"]["status"] == "passed":  # RTE's one toy unit, recorded where the check's records go
        assert outcomes["tasks"]["figures"] == "1 unit recorded: rte seed 0" and read_records("tasks", tmp_path)
    assert outcomes["qa-demo"]["status"].startswith("skipped: the rehearsal has no SQuAD model")
    assert "vs run_mlm defaults" in outcomes["trainer-eager"]["figures"] and "vs baseline" in outcomes["step"]["figures"]
    assert "packed-varlen_fa2 step" in outcomes["step"]["figures"]
    assert "packed-varlen_fa2 host" in outcomes["step-profile"]["figures"]
    assert outcomes["sweep-base"]["figures"].startswith("batch 2: ")
    trainer = read_records("trainer", tmp_path)
    assert [r["settings"]["batch_size"] for r in trainer] == [4, 2] and read_records("pretraining_step", tmp_path)
    runs = trainer[-1]["results"]["runs"]  # each side's attention, as its run named it, and the sides' set-ups
    assert list(runs) == [DEFAULTS, TUNED, SPANBERT] and {run["attn_implementation"] for run in runs.values()} == {"sdpa"}
    assert runs[TUNED]["setup"]["vocab_size"] % 64 == 0 and runs[DEFAULTS]["setup"]["vocab_size"] % 64
    assert all(r["settings"]["rehearsal"] for r in trainer)  # too short for a target to read
    profile = read_records("pretraining_step_profile", tmp_path)[-1]["results"]["sides"]
    assert set(profile["baseline"]["category_seconds"]) == {"attention", "gemm", "optimizer"}
    assert record["load_average"]["at_end"] is not None and record["settings"]["toy"] is True
    assert record["results"]["left_for_next_call"] == []
    assert {name: len(read_records(name, RESULTS_DIR)) for name in committed} == committed

    # One archive holds every record the check wrote, under its path in the checkout, and every stage's log.
    with tarfile.open(archive) as packed:
        names = packed.getnames()
    assert f"benchmarks/results/gpu-check/{Path(record['path']).name}" in names
    assert {f"benchmarks/results/trainer/{Path(r['path']).name}" for r in trainer} <= set(names)
    assert "gpu-check-logs/trainer-eager.log" in names and list(archive.parent.iterdir()) == [archive]


@pytest.mark.slow
def test_stages_runs_a_part_of_the_check(tmp_path, capsys):
    assert check.main(["--toy", "--stages", "step", "--records_dir", str(tmp_path)]) == 0
    outcomes = read_records("gpu-check", tmp_path)[-1]["results"]["stages"]
    assert {name for name, outcome in outcomes.items() if outcome["status"] == "passed"} == {"prepare", "step"}
    assert outcomes["trainer-eager"]["status"] == "skipped: not asked for (--stages)"


@pytest.mark.slow
def test_the_tasks_stage_needs_none_of_the_speed_stages_data(tmp_path):
    """A call that carries only the task benchmark's inputs runs no prepare, which reads the speed stages' corpus;
    with no inputs carried, the stage says what to carry."""
    assert check.main(["--toy", "--stages", "tasks", "--records_dir", str(tmp_path)]) == 0
    outcomes = read_records("gpu-check", tmp_path)[-1]["results"]["stages"]
    assert outcomes["prepare"]["status"] == "skipped: not asked for (--stages)"
    (stage,) = [s for s in plan.stages(toy=False, work=tmp_path, task_inputs=tmp_path / "none") if s.name == "tasks"]
    assert stage.skip == f"no task inputs in {tmp_path / 'none'} (carry .gpu/tasks or .gpu/race)"
    (tmp_path / "carried" / "rte").mkdir(parents=True)
    (tmp_path / "carried" / "rte" / "inputs.json").write_text("{}")
    carried = plan.stages(toy=False, work=tmp_path, task_inputs=tmp_path / "carried")
    (stage,) = [s for s in carried if s.name == "tasks"]
    assert stage.command[-6:] == ["--inputs", str(tmp_path / "carried"), "--tasks", "rte", "--jobs", "5"]


def test_the_qa_demo_keeps_a_gpu_size_squad_model_and_runs_the_pipeline_check_on_it(tmp_path):
    (demo,) = [s for s in plan.stages(toy=False, work=tmp_path, task_inputs=tmp_path) if s.name == "qa-demo"]
    assert demo.skip.startswith("absent: ") and str(tmp_path / "squad" / "inputs.json") in demo.skip
    shared_data("squad", "dev-v1.1.json")
    (tmp_path / "squad").mkdir()
    (tmp_path / "squad" / "inputs.json").write_text("{}")
    (demo,) = [s for s in plan.stages(toy=False, work=tmp_path, task_inputs=tmp_path) if s.name == "qa-demo"]
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
     pytest.param("print('what went wrong'); import time; time.sleep(60)", 5, "timed out after 5 s",
                  marks=pytest.mark.slow)],
)
def test_a_failing_or_hanging_stage_is_reported_not_fatal(tmp_path, code, limit, status):
    stage = plan.Stage("broken", [sys.executable, "-c", code], timeout=limit)
    check.run_stage(stage, seconds_left=60, env=check.stage_environment(tmp_path, toy=True), logs=tmp_path)
    assert stage.outcome["status"] == status
    assert check.figures(stage, {}, tmp_path) == ""
    assert stage.outcome["log_tail"] == ["what went wrong"]  # the end of its log outlives the log's folder


def test_a_stage_cut_off_at_its_limit_is_killed_with_the_processes_it_started(tmp_path):
    child = tmp_path / "child.pid"
    code = ("import subprocess, sys, time; "
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(child)!r}, 'w').write(str(p.pid)); time.sleep(60)")  # fmt: skip
    stage = plan.Stage("spawns", [sys.executable, "-c", code], timeout=3)
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
    stage = plan.Stage("slow", [sys.executable, "-c", "import time; time.sleep(30)"], timeout=100)
    check.run_stage(stage, seconds_left=1.5, env={}, logs=tmp_path)
    assert stage.outcome["status"] == "timed out after 1 s" and stage.outcome["limit_seconds"] == 1


def test_a_stage_whose_records_exist_for_this_code_is_skipped_naming_them(tmp_path, monkeypatch):
    """As on the GPU machine, an exported copy: its records carry the digest of its code, and a record of the same
    stage from the same code means the stage is done; one from other code does not."""
    monkeypatch.setenv("SPANROBERTA_SOURCE_COMMIT", "0" * 40)
    (eager,) = [s for s in plan.stages(toy=True, work=tmp_path) if s.name == "trainer-eager"]
    ((benchmark, settings),) = eager.records
    started = start_run()
    other = start_run()
    other.provenance["measured_from"] = {**other.provenance["measured_from"], "code_sha256": "other code"}
    write_record(benchmark, settings, {"runs": {}}, started=other, results_dir=tmp_path)
    unmarked = plan.stages(toy=True, work=tmp_path)
    check.mark_skipped(unmarked, set(plan.STAGE_NAMES), tmp_path)
    assert not [s for s in unmarked if s.name == "trainer-eager"][0].skip
    written = write_record(benchmark, settings, {"runs": {}}, started=started, results_dir=tmp_path)
    checked = plan.stages(toy=True, work=tmp_path)
    check.mark_skipped(checked, set(plan.STAGE_NAMES), tmp_path)
    skipped = {s.name: s.skip for s in checked}
    assert skipped["trainer-eager"] == f"{check.RECORDED_HERE}: {written.name}"
    assert skipped["sweep-base"] is None  # its batch has no record yet
    checked = plan.stages(toy=True, work=tmp_path)
    check.mark_skipped(checked, {"trainer-eager"}, tmp_path)  # nothing left to run reads the blocks
    assert {s.name: s.skip for s in checked}["prepare"] == check.NOT_ASKED
    monkeypatch.delenv("SPANROBERTA_SOURCE_COMMIT")  # this worktree's commit, dirty or not: never the copy's digest
    checked = plan.stages(toy=True, work=tmp_path)
    check.mark_skipped(checked, {"trainer-eager"}, tmp_path)
    assert {s.name: s.skip for s in checked}["trainer-eager"] is None


def test_the_fp8_stage_says_why_it_cannot_run(monkeypatch, tmp_path):
    monkeypatch.setattr(plan.importlib.util, "find_spec", lambda name: None)
    monkeypatch.delenv("SPANROBERTA_FP8_SITE", raising=False)
    assert plan.fp8_unavailable() == "torchao is not installed"
    (tmp_path / "torchao").mkdir()  # where setup.sh installs it apart, for the stages that train in fp8 only
    monkeypatch.setenv("SPANROBERTA_FP8_SITE", str(tmp_path))
    shown = {"help": "usage: trainer.py [--config ...] [--torch-compile]"}
    monkeypatch.setattr(plan.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, shown["help"], ""))
    assert plan.fp8_unavailable() == "speed/trainer.py has no --fp8 flag yet"
    shown["help"] += " [--fp8]"
    assert plan.fp8_unavailable() is None
    (fp8,) = [s for s in plan.stages(toy=False, work=tmp_path) if s.name == "fp8"]
    assert fp8.guard is plan.fp8_unavailable and fp8.command[-2:] == ["--fp8", "--no-baseline"]
    assert fp8.import_path == str(tmp_path)


def test_the_gpu_plan_puts_the_valuable_stages_first_and_runs_long_enough_windows(tmp_path):
    assert plan.STAGE_NAMES[:4] == ("prepare", "cuda-tests", "trainer-compiled", "large-compiled")
    assert plan.STAGE_NAMES.index("sweep-base") < plan.STAGE_NAMES.index("fp8") < plan.STAGE_NAMES.index("tasks")
    stages = {stage.name: stage for stage in plan.stages(toy=False, work=tmp_path)}
    for name in ("trainer-compiled", "large-compiled", "trainer-eager", "large-eager", "sweep-base", "sweep-large"):
        flags = stages[name].command
        assert int(flags[flags.index("--steps") + 1]) >= 150 and int(flags[flags.index("--logging-steps") + 1]) == 10
        assert not any(settings["rehearsal"] for _, settings in stages[name].records)
    assert [settings["batch_size"] for name in ("sweep-large", "sweep-large-64")
            for _, settings in stages[name].records] == [32, 64]  # fmt: skip
    assert [settings["config"] for _, settings in stages["step-profile"].records] == ["base-gpu", "large-gpu"]
    # No stage asks for more time than the whole check has.
    assert all(stage.timeout <= check.BUDGET_SECONDS for stage in stages.values())


def test_the_archive_holds_the_records_written_since_the_call_began_and_the_logs(tmp_path):
    records, logs = tmp_path / "results", tmp_path / "logs"
    (records / "trainer").mkdir(parents=True)
    logs.mkdir()
    (records / "trainer" / "old.json").write_text("{}")  # carried from an earlier call
    os.utime(records / "trainer" / "old.json", (time.time() - 60, time.time() - 60))
    stamp = tmp_path / "started"
    stamp.write_text("")
    (records / "trainer" / "new.json").write_text("{}")
    (logs / "setup.log").write_text("set up\n")
    archive = tmp_path / "out" / "gpu-check.tar.gz"
    archive.parent.mkdir()
    for _ in range(2):  # rewritten in place, never a second file beside it
        archive_main([str(archive), "--since", str(stamp), "--records_dir", str(records), "--logs",
                      str(logs / "setup.log"), str(logs / "absent.log")])  # fmt: skip
    with tarfile.open(archive) as packed:
        assert packed.getnames() == ["benchmarks/results/trainer/new.json", "gpu-check-logs/setup.log"]
    assert list(archive.parent.iterdir()) == [archive]


def test_every_planned_call_fits_its_window_the_first_with_the_cuda_tests_and_the_compiled_base_pair(tmp_path):
    """The plan rehearsed against the cap: each call of plan.CALLS, its setup and `prepare` (where a stage of it
    reads the blocks) included, plans at most CALL_SECONDS (8 minutes); every stage is in a call, plans no more than
    its own limit, and the check's budget is the call's less its setup."""
    (tmp_path / "carried" / "squad").mkdir(parents=True)
    (tmp_path / "carried" / "squad" / "inputs.json").write_text("{}")
    planned = {stage.name: stage for stage in plan.stages(toy=False, work=tmp_path, task_inputs=tmp_path / "carried")}
    assert plan.CALLS[0] == ("cuda-tests", "trainer-compiled")
    assert {name for call in plan.CALLS for name in call} == set(plan.STAGE_NAMES) - {"prepare"}
    for call in plan.CALLS:
        prepare = planned["prepare"].planned if set(call) & set(plan.READ_BLOCKS) else 0
        seconds = plan.SETUP_SECONDS + prepare + sum(planned[name].planned for name in call)
        assert seconds <= plan.CALL_SECONDS, (call, seconds)
    assert check.BUDGET_SECONDS == plan.CALL_SECONDS - plan.SETUP_SECONDS
    for stage in planned.values():
        assert stage.skip or 0 < stage.planned <= stage.timeout <= check.BUDGET_SECONDS, stage.name


def test_a_stage_whose_plan_does_not_fit_is_left_for_the_next_call_and_said_so(tmp_path, capsys):
    stage = plan.Stage("long", [sys.executable, "-c", "raise SystemExit(1)"], timeout=100, planned=90)
    assert check.not_in_time(stage, seconds_left=120) is None
    stage.skip = check.not_in_time(stage, seconds_left=60)
    assert stage.skip == "left for the next call: planned 90 s, 60 s of the call left"
    check.run_stage(stage, seconds_left=60, env={}, logs=tmp_path)  # not started: it would have failed
    cut = plan.Stage("cut", [sys.executable, "-c", "import time; time.sleep(30)"], timeout=1)
    check.run_stage(cut, seconds_left=60, env={}, logs=tmp_path)
    assert check.left_over([stage, cut]) == ["long", "cut"]
    check.print_next_call(["long", "cut"], 2)
    printed = capsys.readouterr().out
    assert "Left for the next call: long, cut (`--stages long cut`)." in printed
    assert f"Then the plan's next call: `--call 2` ({', '.join(plan.CALLS[1])})." in printed
