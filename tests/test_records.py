"""Raw result records: what a record holds, that one without its provenance or load average is refused, that records
are never overwritten, and that every committed record says how it was made."""

import json
from pathlib import Path

import pytest

from spanroberta.records import (
    PROVENANCE_KEYS,
    RESULTS_DIR,
    check_record,
    provenance,
    read_records,
    record_commit,
    record_load_average,
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


def test_a_record_from_an_exported_copy_names_the_repository_commit_it_was_measured_from():
    record = {"git_commit": "c29d2b8796f9", "git_dirty": True, "measured_from": {"commit": "5103811f11f9"}}
    assert record_commit(record) == "5103811"
    assert record_commit({"git_commit": "abcdef123456", "git_dirty": True}) == "abcdef1 (dirty)"


def test_an_exported_copy_is_named_by_the_commit_its_exporter_gives(monkeypatch):
    monkeypatch.setenv("SPANROBERTA_SOURCE_COMMIT", "5103811f11f9")
    assert record_commit(provenance()) == "5103811"
    monkeypatch.delenv("SPANROBERTA_SOURCE_COMMIT")
    assert "measured_from" not in provenance()
