"""What the reliability benchmarks read from a finished launch: whether it ended cleanly, and the counts their
records hold. Pure functions of a launch's exit status and output, so that they can be tested without launching."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

# What the benchmark itself notes (tiny_runs.launch) when a process of a launch outlives its launcher.
OUTLIVED = "still running after the launcher ended"
# What a process prints when it ends in an abort rather than an exit: a C++ std::terminate (a std::thread destroyed
# while joinable, an exception thrown through a destructor), a Python traceback, a fatal signal's dump; and OUTLIVED.
ABORT_MARKERS = ("terminate called", "Traceback (most recent call last)", "Fatal Python error", "core dumped",
                 OUTLIVED)  # fmt: skip


def exit_outcome(returncode: int, output: str) -> dict[str, Any]:
    """A launch's ending: `clean` when it exited 0 and printed none of ABORT_MARKERS; `returncode`, the `signal`
    that ended it (a negative return code, or the launcher's "exitcode: -6" for a rank it lost) and the markers
    found."""
    markers = [marker for marker in ABORT_MARKERS if marker in output]
    ended_by = None
    if returncode < 0:
        ended_by = signal.Signals(-returncode).name
    elif "exitcode  : -" in output:  # torch.distributed.elastic's report of a rank ended by a signal
        number = output.split("exitcode  : -", 1)[1].split()[0].strip("()")
        ended_by = signal.Signals(int(number)).name if number.isdigit() else None
    return {"clean": returncode == 0 and not markers, "returncode": returncode, "signal": ended_by,
            "markers": markers}  # fmt: skip


def completed_outcome(result: subprocess.CompletedProcess) -> dict[str, Any]:
    """`exit_outcome` of a finished launch whose output was captured as text; with what the benchmark noted of its
    end (`stderr` of tiny_runs.launch: a timeout, processes left running, and where they stood) as `ending`."""
    outcome = exit_outcome(result.returncode, (result.stdout or "") + (result.stderr or ""))
    return {**outcome, "ending": result.stderr} if result.stderr else outcome


def output_tail(output: str, lines: int = 12) -> str:
    """The last lines of a launch's output, kept in a record beside an unclean ending (what it printed last)."""
    return "\n".join(output.strip().splitlines()[-lines:])
