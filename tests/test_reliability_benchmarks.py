"""benchmarks/reliability/: what the stress and fault benchmarks read from a launch, count and record, and the
reliability section of benchmarks/RESULTS.md generated from their records, on fake runs (the launches themselves are
the benchmarks' to run)."""

import json
import random
import signal
import time

import psutil
import pytest
import torch
from safetensors.torch import save_file

from benchmarks.reliability import cluster_moments, faults, long_line, stress, tiny_runs
from benchmarks.common import machine_class, machine_kind, same_kind_of_machine
from benchmarks.reliability.injection import complete_checkpoints, corrupt, full_disk_counts
from benchmarks.reliability.marked_run import MODEL_LOADS
from benchmarks.reliability.load import busy_processes
from benchmarks.reliability.outcomes import OUTLIVED, completed_outcome, exit_outcome
from benchmarks.tables import generate
from benchmarks.tables.reliability import lost, record_kind
from spanroberta.records import RunStart, provenance, read_records, write_record
from spanroberta.runs.preemption import PREEMPTED_FILE


def test_a_launch_is_clean_only_when_it_exits_0_and_prints_no_abort():
    assert exit_outcome(0, "The pretrained model ... is in out/.\n")["clean"]
    # rank 0 aborting after its last save: the launcher may still exit 0 once every rank has ended
    aborted = exit_outcome(0, "saved\nterminate called without an active exception\n")
    assert not aborted["clean"] and aborted["markers"] == ["terminate called"]
    assert exit_outcome(-6, "")["signal"] == "SIGABRT"
    elastic = exit_outcome(1, "  exitcode  : -6 (pid: 123)\nTraceback (most recent call last):\n")
    assert elastic["signal"] == "SIGABRT" and not elastic["clean"]
    assert "Traceback (most recent call last)" in elastic["markers"]


def _launch(clean=True, same=True):
    return {"clean": clean, "returncode": 0 if clean else -signal.SIGABRT, "finished": clean, "same_weights": same,
            "same_losses": True}  # fmt: skip


# A script that starts a process of its own, writes its pid and ends, the process holding the launch's output (so
# that the launch's output ends only with it) or not; or that waits beside it.
LEAVES_A_PROCESS = """import subprocess, sys, time
output = subprocess.DEVNULL if sys.argv[1] == "detached" else None
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=output, stderr=output,
                         start_new_session=True)
open(sys.argv[2], "w").write(str(child.pid))
if sys.argv[1] == "waits":
    time.sleep(60)
"""


def _launch_leaving_a_process(folder, how: str, timeout: float) -> tuple[dict, int]:
    script, pid_file = folder / "leaves.py", folder / "pid"
    script.write_text(LEAVES_A_PROCESS)
    outcome = completed_outcome(tiny_runs.launch("plain", [how, str(pid_file)], str(script), timeout=timeout))
    return outcome, int(pid_file.read_text())


def _ended(pid: int) -> bool:
    """Whether the process is gone (or a zombie its new parent has not reaped), within a few seconds."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("how", ["detached", "holds-output"])
def test_a_process_that_outlives_its_launcher_is_an_abort_killed_and_told_where_it_stood(tmp_path, how):
    outcome, pid = _launch_leaving_a_process(tmp_path, how, timeout=5)
    assert outcome["returncode"] == 0 and not outcome["clean"] and outcome["markers"] == [OUTLIVED]
    assert outcome["ending"].startswith(f"1 of its processes {OUTLIVED}; killed. Where they stood:")
    assert f"process {pid}, " in outcome["ending"] and _ended(pid)


def test_a_launch_past_its_timeout_is_killed_with_every_process_and_told_where_they_stood(tmp_path):
    outcome, pid = _launch_leaving_a_process(tmp_path, "waits", timeout=3)
    assert not outcome["clean"] and outcome["signal"] == "SIGKILL"
    assert outcome["ending"].startswith("timed out after 3 s; killed. Where they stood:")
    assert f"process {pid}, " in outcome["ending"] and _ended(pid)


def test_the_stress_counts_aborts_and_mismatches_and_the_target_needs_its_full_size():
    summary = stress.engine_summary({"clean": True}, [_launch(), _launch(clean=False), _launch(same=False)])
    assert (summary["launches"], summary["aborts"], summary["weight_mismatches"]) == (3, 1, 1)
    full = {"launches_per_engine": 20, "busy_processes": 6}
    clean = stress.engine_summary({"clean": True}, [_launch()] * 20)
    assert stress.meets_target(full, {"zero3": clean, "ddp": clean})
    assert not stress.meets_target(full, {"zero3": clean, "ddp": summary})
    small = stress.engine_summary({"clean": True}, [_launch()] * 2)
    assert not stress.meets_target({"launches_per_engine": 2, "busy_processes": 2}, {"zero3": small})
    assert not stress.meets_target(full, {"zero3": stress.engine_summary({"clean": False}, [])})


def _trial(engine, moment, hit=True, resumed=True, identical=True, lost=()):
    return {"engine": engine, "moment": moment, "fault": {"hit": hit}, "resume": {"clean": resumed},
            "finished": resumed, "same_weights": identical, "same_losses": True,
            "checkpoints_lost": list(lost)}  # fmt: skip


def test_the_faults_tally_counts_survivals_identical_resumes_and_losses():
    trials = [
        _trial("plain", "random"),
        _trial("plain", "corrupt-newest", resumed=False),
        _trial("plain", "during-save", identical=False, lost=["checkpoint-3"]),
        _trial("ddp", "disk-full", hit=False),
    ]
    counts = faults.tallies(trials)
    assert counts["all"] == {"trials": 4, "faults": 3, "survived": 2, "identical": 1, "runs_lost": 1,
                             "checkpoints_lost": 1, "not_hit": 1}  # fmt: skip
    assert counts["by_engine"]["ddp"]["faults"] == 0
    assert counts["by_moment"]["corrupt-newest"]["runs_lost"] == 1
    record = {"results": {"trials": trials}}
    assert lost(record, "plain") == "corrupt-newest: the run; during-save: checkpoint-3"
    assert lost({"results": {"trials": trials[:1]}}, "plain") == lost(record, "ddp") == "nothing"


def _checkpoint(folder, step, complete=True):
    checkpoint = folder / f"checkpoint-{step}"
    checkpoint.mkdir(parents=True)
    save_file({"weight": torch.arange(64, dtype=torch.float32)}, checkpoint / "model.safetensors")
    torch.save({"state": torch.ones(32)}, checkpoint / "optimizer.pt")
    if complete:
        (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))
    return checkpoint


def test_complete_checkpoints_come_in_step_order_and_corruption_changes_one_state_file(tmp_path):
    for step in (10, 2):
        _checkpoint(tmp_path, step)
    newest = tmp_path / "checkpoint-10"
    _checkpoint(tmp_path, 12, complete=False)
    assert complete_checkpoints(tmp_path) == ["checkpoint-2", "checkpoint-10"]
    before = {path.name: path.read_bytes() for path in newest.iterdir()}
    done = corrupt(newest, random.Random(0))
    assert done["corrupted_checkpoint"] == "checkpoint-10" and done["corruption"] in ("truncated", "emptied", "garbled")
    changed = [path.name for path in newest.iterdir() if path.read_bytes() != before[path.name]]
    assert changed == [done["corrupted_file"]]


def _run_folder(folder, weights, losses):
    folder.mkdir()
    save_file(weights, folder / "model.safetensors")
    history = [{"step": step, "loss": loss} for step, loss in losses.items()] + [{"step": 2, "eval_loss": 1.0}]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))


def test_a_run_compares_with_the_uninterrupted_one_bit_for_bit(tmp_path):
    weights = {"a": torch.zeros(3), "b": torch.ones(2)}
    _run_folder(tmp_path / "reference", weights, {1: 2.0, 2: 1.5})
    _run_folder(tmp_path / "same", dict(weights), {1: 2.0, 2: 1.5})
    _run_folder(tmp_path / "other", {"a": torch.zeros(3), "b": torch.ones(2) + 1e-7}, {1: 2.0, 2: 1.25})
    assert tiny_runs.compare_with(tmp_path / "same", tmp_path / "reference") == {
        "finished": True, "same_weights": True, "same_losses": True, "max_weight_difference": 0.0}  # fmt: skip
    other = tiny_runs.compare_with(tmp_path / "other", tmp_path / "reference")
    assert not other["same_weights"] and not other["same_losses"] and other["max_weight_difference"] > 0
    assert not tiny_runs.compare_with(tmp_path / "missing", tmp_path / "reference")["finished"]


def test_the_busy_processes_spin_for_the_block_only():
    with busy_processes(2, seconds=60) as processes:
        assert len(processes) == 2 and all(process.poll() is None for process in processes)
    assert all(process.poll() is not None for process in processes)


def test_the_reliability_section_is_generated_from_every_kind_of_record(tmp_path, capsys):
    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    (root / "configs" / "ablations").mkdir(parents=True)
    page = root / "benchmarks" / "RESULTS.md"
    page.write_text("# Results\n\n" + "".join(f"<!-- generated:{name} -->\n<!-- /generated:{name} -->\n" for name in (
        "reliability-stress", "reliability-faults", "same-seed", "long-line", "bad-inputs")))
    records = root / "benchmarks" / "results"
    started = RunStart(provenance(), [0.5, 0.5, 0.5])
    engines = {"zero3": stress.engine_summary({"clean": True}, [_launch(), _launch(clean=False)])}
    settings = {"kind": "stress", "launches_per_engine": 2, "busy_processes": 2}
    write_record("reliability", settings, {"engines": engines}, started=started, results_dir=records)
    trials = [_trial("plain", "random"), _trial("plain", "corrupt-newest", resumed=False)]
    results = {"counts": faults.tallies(trials), "trials": trials}
    write_record("reliability", {"kind": "faults"}, results, started=started, results_dir=records)
    write_record("reliability", {"kind": "bad-inputs"}, {"cases": 47, "refused_cleanly": 47, "failures": 0},
                 started=started, results_dir=records)  # fmt: skip
    assert [record_kind(record) for record in read_records("reliability", records)] == ["stress", "faults",
                                                                                         "bad-inputs"]  # fmt: skip

    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text()
    assert "| zero3 | 2 | 2 | **1** | 0 | yes |" in text
    assert "| plain | 2 | **1** | 1 | 1 | 0 | 0 | corrupt-newest: the run |" in text
    assert "| bad-inputs | cases 47, refused cleanly 47, failures 0 |" in text
    assert generate.main(["--root", str(root), "--check"]) == 0


@pytest.mark.parametrize("engine", tiny_runs.ENGINES)
def test_every_engine_launches_the_script_with_its_flags(engine):
    command = tiny_runs.command(engine, ["--max_steps", "2"])
    assert command[-2:] == ["--max_steps", "2"] and command[-3].endswith("run_pretraining.py")
    flags = tiny_runs.TinyRun().flags({"corpus": "c.txt", "initial_checkpoint": "init"}, engine)
    # DeepSpeed on CPU processes comes from DS_ACCELERATOR=cpu: --use_cpu would turn it off
    assert ("--use_cpu" in flags) == (engine in ("plain", "ddp"))


ZEN3 = {"cpu": "AMD EPYC", "logical_cpus": 2, "bf16_instructions": []}
ZEN4 = {"cpu": "AMD EPYC", "logical_cpus": 2, "bf16_instructions": ["avx512_bf16"]}


def _unit_record(folder, name, commit, gap, litbank=42.0, machine=ZEN3):
    """A task-benchmark unit record of coref seed 1 (`cpu`), as the task benchmark writes it, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"git_commit": commit, "git_dirty": False, "date": "2026-11-28T10:00:00+00:00", "machine": machine,
              "settings": {"kind": "unit", "size": "cpu", "task": "coref", "seed": 1, "budget": {"epochs": 5}},
              "results": {"rows": {"LitBank": {"score": litbank}, "GAP": {"score": gap}}}}  # fmt: skip
    (folder / f"{name}.json").write_text(json.dumps(record))


def _same_seed_page(tmp_path):
    from benchmarks.tables.render import Context
    from benchmarks.tables.task_benchmark import SAME_SEED_TABLE

    page = SAME_SEED_TABLE.render(Context(tmp_path, tmp_path / "RESULTS.md", tmp_path))
    return [line.strip("| ").split(" | ") for line in page.splitlines()[2:]]  # row, seed, ..., same machine, same score


def test_reruns_that_match_their_commits_records_put_a_shift_on_the_code(tmp_path):
    _unit_record(tmp_path / "tasks", "a", "a" * 40, gap=53.7)
    _unit_record(tmp_path / "tasks", "b", "b" * 40, gap=51.3)
    _unit_record(tmp_path / "same-seed", "1", "a" * 40, gap=53.7)
    _unit_record(tmp_path / "same-seed", "2", "b" * 40, gap=51.3)
    assert [row[-3:-1] for row in _same_seed_page(tmp_path)] == [["yes", "**yes**"]] * 4


def test_a_rerun_that_differs_from_its_commits_record_says_the_unit_is_not_deterministic(tmp_path):
    _unit_record(tmp_path / "tasks", "a", "a" * 40, gap=53.7)
    _unit_record(tmp_path / "same-seed", "1", "a" * 40, gap=52.9)
    rows = {row[0]: row for row in _same_seed_page(tmp_path)}
    assert rows["GAP"][-3:-1] == ["yes", "**no**"] and rows["LitBank"][-3:-1] == ["yes", "**yes**"]


def _long_line_run(line_mb, peak_anonymous_mib, prepared_mib):
    prepare = {"seconds": 9.0, "cpu_seconds": 8.0, "peak_rss_mib": peak_anonymous_mib + 150, "peak_pss_mib": 1.0,
               "peak_anonymous_pss_mib": peak_anonymous_mib}  # fmt: skip
    return {"line_mb": line_mb, "line_bytes": int(line_mb * 1e6), "blocks": 10, "tokens": 1280,
            "prepared_bytes": int(prepared_mib * 2**20), "prepare": prepare, "train": None}  # fmt: skip


def test_a_long_line_is_held_to_its_bound_and_tabled(tmp_path):
    baseline = _long_line_run(0.1, 350.0, 0.1)
    within = long_line.against_bound(_long_line_run(10, 350.0 + 100, 9), baseline)
    assert within["extra_anonymous_mib"] == 100 and within["within_bound"]
    too_much = long_line.against_bound(_long_line_run(100, 350.0 + long_line.BOUND_MIB + 1, 90), baseline)
    assert not too_much["within_bound"]

    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    (root / "configs" / "ablations").mkdir(parents=True)
    page = root / "benchmarks" / "RESULTS.md"
    page.write_text("# Results\n\n" + "".join(f"<!-- generated:{name} -->\n<!-- /generated:{name} -->\n" for name in (
        "reliability-stress", "reliability-faults", "same-seed", "long-line", "bad-inputs")))
    settings = {"kind": "long-line", "baseline_mb": 0.1, "max_seq_length": 128,
                "anonymous_bound_mib": long_line.BOUND_MIB}  # fmt: skip
    results = {"baseline": baseline, "sizes": [within, too_much], "bound_holds": False}
    write_record("reliability", settings, results, started=RunStart(provenance(), [0.5, 0.5, 0.5]),
                 results_dir=root / "benchmarks" / "results")  # fmt: skip
    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text()
    assert f"| 10 | 1,280 | 9.0 | 450 | 350 | **100** | {long_line.BOUND_MIB}, holds | 100 | 9 | - |" in text
    assert f"{long_line.BOUND_MIB}, **broken**" in text
    assert "reliability.long_line" not in text  # no "run it to measure it"


def test_a_record_from_another_kind_of_machine_is_not_taken_for_nondeterminism(tmp_path):
    _unit_record(tmp_path / "tasks", "a", "a" * 40, gap=53.7)
    _unit_record(tmp_path / "tasks", "b", "b" * 40, gap=51.3, machine=ZEN4)
    _unit_record(tmp_path / "same-seed", "1", "a" * 40, gap=54.1)
    _unit_record(tmp_path / "same-seed", "2", "b" * 40, gap=54.1)
    gap = [row for row in _same_seed_page(tmp_path) if row[0] == "GAP"]
    assert [row[7:10] for row in gap] == [["AMD EPYC, no AVX-512 BF16", "yes", "**no**"],
                                          ["AMD EPYC, AVX-512 BF16", "no", "**no**"]]
    assert gap[1][5] == "54.10" and gap[1][6].startswith("51.30 (")


def test_two_reruns_of_one_commit_that_differ_show_nondeterminism(tmp_path):
    _unit_record(tmp_path / "tasks", "b", "b" * 40, gap=51.3, machine=ZEN4)
    _unit_record(tmp_path / "same-seed", "1", "b" * 40, gap=54.1)
    _unit_record(tmp_path / "same-seed", "2", "b" * 40, gap=54.1)
    gap = [row for row in _same_seed_page(tmp_path) if row[0] == "GAP"]
    assert [row[5] for row in gap] == ["54.10", "54.10"]
    _unit_record(tmp_path / "same-seed", "2", "b" * 40, gap=53.9)
    assert [row[5] for row in _same_seed_page(tmp_path) if row[0] == "GAP"] == ["54.10", "53.90"]


def test_machines_are_compared_on_the_traits_both_records_name():
    newer = {"machine": {**ZEN3, "cpu_family_model": "25/1", "vector_instructions": "avx2"}}
    assert same_kind_of_machine(newer, {"machine": ZEN3})
    assert not same_kind_of_machine(newer, {"machine": {**ZEN3, "cpu_family_model": "25/17"}})
    assert machine_kind(newer) == "AMD EPYC (family/model 25/1), avx2"
    assert machine_class(newer) == machine_class({"machine": ZEN3}) == "AMD EPYC, no AVX-512 BF16"
    on_a_gpu = {"machine": {**newer["machine"], "gpu": "1 x NVIDIA H200"}}
    assert machine_kind(on_a_gpu) == machine_class(on_a_gpu) == "1 x NVIDIA H200"
    assert machine_class({"machine": {**ZEN3, "bf16_instructions": ["amx_bf16"]}}) == "AMD EPYC, no AVX-512 BF16"
    assert machine_kind({}) == machine_class({}) == "not recorded"


def test_a_unit_scores_the_same_only_when_every_row_does(tmp_path):
    _unit_record(tmp_path / "tasks", "a", "a" * 40, gap=53.7, litbank=42.0)
    _unit_record(tmp_path / "same-seed", "1", "a" * 40, gap=53.7, litbank=41.5)
    rows = {row[0]: row for row in _same_seed_page(tmp_path)}
    assert rows["GAP"][-2] == "**yes**" and rows["LitBank"][-2] == "**no**"


def _logged(steps):
    return "".join(f"{{'loss': '11.9', 'epoch': '{step / 16}'}}\n" for step in range(steps))


def test_a_sigterm_counts_the_exit_75_and_the_complete_checkpoint_of_the_step_in_progress(tmp_path):
    _checkpoint(tmp_path, 4)
    _checkpoint(tmp_path, 6, complete=False)
    taken = f"\n{cluster_moments.SIGNAL_TAKEN} after the step in progress, then stops.\n"
    output = _logged(3) + taken + taken + _logged(1) + (
        f"run_pretraining.py: stopped by SIGTERM after step 4, saved in {tmp_path}/checkpoint-4 (exit status 75).\n")
    found = cluster_moments.sigterm_counts(output, 75, tmp_path)
    assert (found["logged_before_signal"], found["saved_step"]) == (3, 4)
    assert found["counts"] == {"exited_75": 1, "job_sees_preemption": 1, "checkpoint_complete": 1,
                               "saved_at_step_in_progress": 1, "tracebacks": 0, "launcher_tracebacks": 0}  # fmt: skip
    # a checkpoint left half-written, or of a step long after the signal, is not the step in progress
    half = cluster_moments.sigterm_counts(output.replace("step 4, saved in", "step 6, saved in"), 75, tmp_path)
    assert half["counts"]["checkpoint_complete"] == half["counts"]["saved_at_step_in_progress"] == 0
    late = cluster_moments.sigterm_counts(_logged(1) + taken + output.split(taken)[-1], 75, tmp_path)
    assert late["counts"]["checkpoint_complete"] == 1 and late["counts"]["saved_at_step_in_progress"] == 0
    killed = cluster_moments.sigterm_counts(_logged(3) + "Traceback (most recent call last):\n", -15, tmp_path)
    assert killed["saved_step"] is None
    assert killed["counts"] == {"exited_75": 0, "job_sees_preemption": 0, "checkpoint_complete": 0,
                                "saved_at_step_in_progress": 0, "tracebacks": 1, "launcher_tracebacks": 0}  # fmt: skip
    launcher = ('Traceback (most recent call last):\n  File "<frozen runpy>", line 198, in _run_module_as_main\n'
                '  File "<frozen runpy>", line 88, in _run_code\n  File ".venv/accelerate/commands/launch.py"\n')
    launched = cluster_moments.sigterm_counts(output + launcher, 1, tmp_path)["counts"]
    assert (launched["exited_75"], launched["tracebacks"], launched["launcher_tracebacks"]) == (0, 0, 1)
    # under a launcher, the mark file naming the step saved is what the job sees
    assert launched["job_sees_preemption"] == 0
    (tmp_path / PREEMPTED_FILE).write_text(json.dumps({"signal": "SIGTERM", "step": 4}))
    assert cluster_moments.sigterm_counts(output + launcher, 1, tmp_path)["counts"]["job_sees_preemption"] == 1


def test_a_refusal_counts_its_line_and_whether_a_model_loaded_or_the_differences_were_listed():
    in_use = "run_pretraining.py: error: --output_dir out is in use by another run: ... holds out/spanroberta_run.lock."
    reasons = (cluster_moments.FOLDER_IN_USE, cluster_moments.HOLDS_ANOTHER_RUN)
    refused = cluster_moments.refusal_counts(f"reading\n{in_use}\n", 1, reasons)
    assert refused["message"] == in_use
    assert refused["counts"] == {"refused": 1, "before_model_loads": 1, "tracebacks": 0, "launcher_tracebacks": 0}
    late = cluster_moments.refusal_counts(f"{MODEL_LOADS} in process 1\n{in_use}\n", 1, reasons)
    assert late["counts"]["before_model_loads"] == 0
    ran = cluster_moments.refusal_counts(_logged(12), 0, reasons)
    assert ran["message"] is None and ran["counts"]["refused"] == 0
    changed = ("error: --resume_from_checkpoint: out/checkpoint-3 was trained under other settings "
               "(per_device_train_batch_size 2 there, 4 now). Resume with ...")  # fmt: skip
    listed = "per_device_train_batch_size 2 there, 4 now"
    found = cluster_moments.refusal_counts(changed, 1, (cluster_moments.OTHER_SETTINGS,), listed)
    assert found["counts"] == {"refused": 1, "differences_listed": 1, "tracebacks": 0, "launcher_tracebacks": 0}
    other = (cluster_moments.OTHER_SETTINGS,)
    unlisted = cluster_moments.refusal_counts(changed.replace("4 now", "8 now"), 1, other, listed)
    assert unlisted["counts"]["differences_listed"] == 0


def test_a_full_disk_counts_the_half_written_checkpoints_left_and_tracebacks(tmp_path):
    _checkpoint(tmp_path, 3)
    named = "run_pretraining.py: error: Saving out/checkpoint-6 failed: the disk holding out is full, or the quota"
    clean = full_disk_counts(f"{_logged(5)}{named} ...\n", tmp_path)
    assert clean["message"] == f"{named} ..." and clean["half_written_left"] == []
    assert clean["counts"] == {"full_disk_named": 1, "half_written_checkpoints_left": 0, "tracebacks": 0,
                               "launcher_tracebacks": 0}  # fmt: skip
    _checkpoint(tmp_path, 6, complete=False)
    traceback = "Traceback (most recent call last):\nOSError: [Errno 27] File too large\n"
    left = full_disk_counts(traceback, tmp_path)
    assert left["half_written_left"] == ["checkpoint-6"]
    assert left["counts"] == {"full_disk_named": 0, "half_written_checkpoints_left": 1, "tracebacks": 1,
                              "launcher_tracebacks": 0}  # fmt: skip
    limit = ("run_pretraining.py: error: Saving out/checkpoint-6 failed: a file reached this process's file size "
             "limit (1.0 KiB, `ulimit -f`)")  # fmt: skip
    assert full_disk_counts(f"{limit} ...\n", tmp_path)["counts"]["full_disk_named"] == 1


def test_a_flag_is_changed_in_place():
    flags = ["--learning_rate", "1e-3", "--per_device_train_batch_size", "2"]
    assert cluster_moments.with_flag(flags, "--per_device_train_batch_size", "4")[-1] == "4"
    assert flags[-1] == "2"


def _checked_trial(engine, moment, hit=True, **counts):
    return {**_trial(engine, moment, hit=hit), "fault": {"hit": hit, "counts": counts}}


def test_the_moments_checks_are_summed_by_engine_and_moment_and_tabled(tmp_path):
    trials = [
        _checked_trial("ddp", "sigterm", exited_75=1, saved_at_step_in_progress=1, tracebacks=0),
        _checked_trial("ddp", "sigterm", exited_75=0, saved_at_step_in_progress=1, tracebacks=1),
        _checked_trial("ddp", "sigterm", hit=False, exited_75=0),
        _checked_trial("plain", "second-run", refused=1, before_model_loads=1, tracebacks=0),
        _trial("plain", "random"),
    ]
    counts = faults.tallies(trials)
    assert counts["by_engine_moment"]["ddp sigterm"]["checks"] == {"exited_75": 1, "saved_at_step_in_progress": 2,
                                                                   "tracebacks": 1}  # fmt: skip
    assert counts["by_engine_moment"]["ddp sigterm"]["not_hit"] == 1
    assert "checks" not in counts["by_engine_moment"]["plain random"]
    assert counts["all"]["checks"]["refused"] == 1

    root = tmp_path / "checkout"
    (root / "benchmarks").mkdir(parents=True)
    (root / "configs" / "ablations").mkdir(parents=True)
    page = root / "benchmarks" / "RESULTS.md"
    page.write_text("<!-- generated:reliability-checks -->\n<!-- /generated:reliability-checks -->\n")
    started = RunStart(provenance(), [0.5, 0.5, 0.5])
    write_record("reliability", {"kind": "faults"}, {"counts": counts, "trials": trials}, started=started,
                 results_dir=root / "benchmarks" / "results")  # fmt: skip
    assert generate.main(["--root", str(root)]) == 0
    text = page.read_text()
    checks = "exited 75 1 of 2, saved at step in progress 2 of 2, tracebacks 1"
    assert f"| ddp | sigterm | 3 | 2 | **2** | 2 | 0 | 0 | {checks} |" in text
    assert "| plain | second-run | 1 | 1 |" in text and "| plain | random |" not in text
