"""Raw result records: what a record holds, that one without its provenance or load average is refused, that records
are never overwritten, where they are kept, and that every committed record says how it was made and sits where
its benchmark's records are read."""

import json
from pathlib import Path

import pytest

from benchmarks.tables.task_benchmark import SAME_SEED

from spanroberta.records import (
    PROVENANCE_KEYS,
    RESULTS_DIR,
    check_record,
    provenance,
    read_records,
    record_commit,
    record_load_average,
    results_folder,
    start_run,
    write_record,
)


def test_a_record_holds_its_provenance_load_average_settings_and_results(tmp_path):
    started = start_run()
    path = write_record("speed", {"size": "small"}, {"tokens_per_second": 1234.5}, started=started,
                        results_dir=tmp_path)  # fmt: skip
    record = json.loads(path.read_text())
    assert path.parent == tmp_path / "speed"
    assert record["benchmark"] == "speed"
    assert record["settings"] == {"size": "small"}
    assert record["results"] == {"tokens_per_second": 1234.5}
    for key in PROVENANCE_KEYS:
        assert record[key] == started.provenance[key]
    assert record["machine"]["cpu"] and record["machine"]["logical_cpus"] >= 1
    assert "torch" in record["packages"] and "transformers" in record["packages"]
    assert record["load_average"]["at_start"] == started.load_average
    assert len(record["load_average"]["at_end"]) == 3


def test_the_provenance_is_the_one_read_when_the_run_started(tmp_path):
    started = start_run()
    started.provenance["git_commit"] = "the commit at the start"  # the tree moved on while the run ran
    path = write_record("speed", {}, {}, started=started, results_dir=tmp_path)
    assert json.loads(path.read_text())["git_commit"] == "the commit at the start"
    later = start_run(started)  # a later run of the same process names the same code, with its own date
    assert later.provenance["git_commit"] == "the commit at the start" and later.load_average


def test_a_record_without_its_start_is_refused(tmp_path):
    with pytest.raises(TypeError):
        write_record("speed", {}, {}, results_dir=tmp_path)
    with pytest.raises(TypeError, match="start_run"):
        write_record("speed", {}, {}, started={"git_commit": "abc"}, results_dir=tmp_path)
    assert not (tmp_path / "speed").exists()


def test_check_record_names_what_is_missing():
    record = {"benchmark": "speed", **start_run().provenance, "results": {}}
    with pytest.raises(ValueError, match="lacks load_average"):
        check_record(record)
    del record["git_commit"]
    with pytest.raises(ValueError, match="lacks git_commit, load_average"):
        check_record(record)
    record["git_commit"] = None
    check_record({**record, "load_average": {"at_start": None, "at_end": None, "not_recorded": "why"}})


def test_records_in_the_same_second_do_not_overwrite_each_other(tmp_path):
    started = start_run()
    first = write_record("speed", {}, {"value": 1}, started=started, name="same", results_dir=tmp_path)
    second = write_record("speed", {}, {"value": 2}, started=started, name="same", results_dir=tmp_path)
    assert first != second
    assert [record["results"]["value"] for record in read_records("speed", tmp_path)] == [1, 2]


@pytest.mark.parametrize("path", sorted(RESULTS_DIR.glob("*/*.json")), ids=lambda path: path.name)
def test_every_committed_record_says_how_it_was_made(path: Path):
    record = json.loads(path.read_text(encoding="utf-8"))
    check_record(record)
    start, end = record_load_average(record)
    assert (start is None) == (end is None)  # both read, or the record says neither was
    # Where read_records looks for it: its benchmark's folder, or for a task unit run again from an older commit, the
    # same-seed folder (benchmarks/tables/task_benchmark.py), kept out of the task tables.
    folders = {results_folder(record["benchmark"])}
    if record["benchmark"] == "tasks":
        folders.add(RESULTS_DIR / SAME_SEED)
    assert path.parent in folders


def test_a_benchmark_named_with_underscores_keeps_its_records_in_a_hyphenated_folder(tmp_path):
    path = write_record("pretraining_step", {}, {}, started=start_run(), results_dir=tmp_path)
    assert path.parent == tmp_path / "pretraining-step"
    assert [record["benchmark"] for record in read_records("pretraining_step", tmp_path)] == ["pretraining_step"]


def test_a_record_from_an_exported_copy_names_the_repository_commit_it_was_measured_from():
    record = {"git_commit": "c29d2b8796f9", "git_dirty": True, "measured_from": {"commit": "5103811f11f9"}}
    assert record_commit(record) == "5103811 (unverified)"  # it carries no digest of the copy's code
    assert record_commit({"git_commit": "abcdef123456", "git_dirty": True}) == "abcdef1 (dirty)"


def test_an_exported_copy_is_named_by_the_commit_its_exporter_gives(monkeypatch):
    monkeypatch.setenv("SPANROBERTA_SOURCE_COMMIT", "5103811f11f9")
    assert record_commit(provenance()) == "5103811 (unverified)"  # this tree is not 5103811's code
    monkeypatch.delenv("SPANROBERTA_SOURCE_COMMIT")
    assert "measured_from" not in provenance()


def test_the_commit_an_exported_copy_names_is_verified_against_its_code(tmp_path):
    """A copy's code digest (paths and git blob ids of CODE_FILES, read from the files) equals its commit's, read
    from the repository's tree; a changed code file, an unknown commit or a record without a digest is unverified,
    and a changed file outside the code (docs) is not looked at."""
    import subprocess

    from spanroberta.records import _working_blob_ids, code_digest, verify_measured_from

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    files = {"run_demo.py": "print('run')\n", "spanroberta/models/a.py": "A = 1\n", "tests/test_a.py": "def test(): pass\n",
             "docs/page.md": "words\n"}  # fmt: skip
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "code")
    commit = git("rev-parse", "HEAD")

    def record():
        digest, count = code_digest(_working_blob_ids(tmp_path))
        return {"measured_from": {"commit": commit, "code_sha256": digest, "code_files": count}}

    assert record()["measured_from"]["code_files"] == 3  # docs/ is not code
    assert verify_measured_from(record(), tmp_path) is None
    (tmp_path / "docs" / "page.md").write_text("other words\n")
    assert verify_measured_from(record(), tmp_path) is None
    (tmp_path / "spanroberta" / "models" / "a.py").write_text("A = 2\n")
    assert verify_measured_from(record(), tmp_path) == f"the copy's code is not commit {commit[:7]}'s"
    unknown = {"measured_from": {**record()["measured_from"], "commit": "0" * 40}}
    assert verify_measured_from(unknown, tmp_path) == "commit 0000000 is not in this repository"
    assert verify_measured_from({"measured_from": {"commit": commit}}, tmp_path) == (
        "the record carries no digest of the copy's code"
    )
