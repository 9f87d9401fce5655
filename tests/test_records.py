"""Raw result records: what a record holds, and that records are never overwritten."""

import json

from spanroberta.records import read_records, write_record


def test_a_record_holds_its_provenance_settings_and_results(tmp_path):
    path = write_record("speed", {"size": "small"}, {"tokens_per_second": 1234.5}, results_dir=tmp_path)
    record = json.loads(path.read_text())
    assert path.parent == tmp_path / "speed"
    assert record["benchmark"] == "speed"
    assert record["settings"] == {"size": "small"}
    assert record["results"] == {"tokens_per_second": 1234.5}
    for key in ("command", "git_commit", "git_dirty", "date", "machine", "packages"):
        assert key in record
    assert record["machine"]["cpu"] and record["machine"]["logical_cpus"] >= 1
    assert "torch" in record["packages"] and "transformers" in record["packages"]


def test_records_in_the_same_second_do_not_overwrite_each_other(tmp_path):
    first = write_record("speed", {}, {"value": 1}, name="same", results_dir=tmp_path)
    second = write_record("speed", {}, {"value": 2}, name="same", results_dir=tmp_path)
    assert first != second
    assert [record["results"]["value"] for record in read_records("speed", tmp_path)] == [1, 2]
