"""A stated background load: `busy` processes that each spin one CPU, started and stopped by the benchmark itself and
bounded in time (each ends by itself after `seconds`, should the benchmark die without stopping it)."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator

# One spinning process; the deadline is its own, so that none outlives a killed benchmark for long.
_SPIN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def busy_processes(busy: int, seconds: float) -> Iterator[list[subprocess.Popen]]:
    """`busy` processes spinning a CPU each for at most `seconds`, for the duration of the block; stopped at its
    end (SIGTERM, then waited for)."""
    processes = [subprocess.Popen([sys.executable, "-c", _SPIN.format(seconds=float(seconds))]) for _ in range(busy)]
    try:
        yield processes
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait()
