#!/usr/bin/env python
"""The one archive a call of the GPU check hands back: the GPU machine returns a few files at most, so everything
the call leaves goes into one gzipped tar, rewritten after every stage (check.py) and once more when the call ends
(offline/run.sh), so that a call cut off still returns what finished. It holds every record the call wrote, under
the path it has in the checkout (benchmarks/results/<folder>/<file>), and the logs, under gpu-check-logs/:

    tar -xzf gpu-check.tar.gz    # at the checkout's root: the records land where the tables read them
    python -m benchmarks.gpu.archive OUT/gpu-check.tar.gz --since STAMP --records_dir benchmarks/results --logs L...

Only the standard library, so that run.sh can still pack the setup's log when the setup failed.
"""

from __future__ import annotations

import argparse
import os
import tarfile
from pathlib import Path

LOGS = "gpu-check-logs"


def write_archive(archive: Path, records_dir: Path, since: float, logs: list[Path]) -> None:
    """Rewrites `archive` with every file under `records_dir` modified at or after `since` (seconds since the epoch)
    and the `logs` that exist. Written beside it and renamed into place, so that a call cut off mid-write leaves
    the previous archive whole."""
    partial = archive.with_name(f"{archive.name}.partial")
    with tarfile.open(partial, "w:gz") as tar:
        for path in sorted(records_dir.rglob("*")) if records_dir.is_dir() else []:
            if path.is_file() and path.stat().st_mtime >= since:
                tar.add(path, arcname=f"benchmarks/results/{path.relative_to(records_dir).as_posix()}")
        for log in logs:
            if log.is_file():
                tar.add(log, arcname=f"{LOGS}/{log.name}")
    os.replace(partial, archive)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("archive", type=Path)
    parser.add_argument("--since", type=Path, required=True, help="A file made when the call started.")
    parser.add_argument("--records_dir", type=Path, required=True)
    parser.add_argument("--logs", type=Path, nargs="*", default=[])
    options = parser.parse_args(argv)
    write_archive(options.archive, options.records_dir, options.since.stat().st_mtime, options.logs)


if __name__ == "__main__":
    main()
