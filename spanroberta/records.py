"""Raw result records: every figure the project reports is a value in one of these JSON files.

A record says what was run and where: the command line, the git commit (and whether the tree had uncommitted
changes; a copy exported without its history names its commit in $SPANROBERTA_SOURCE_COMMIT, and the record
carries a digest of the copy's code, which `verify_measured_from` compares with that commit's), the date, the machine
(CPU model, logical CPUs, GPU), the package versions, the load average when the run started and when it ended, the
settings, and every measured value. All of it but the closing load average is read when the run starts
(`start_run()`), so a record names the code that ran, even if the tree changed while it ran.
Benchmarks and ablations write one per run under `benchmarks/results/<benchmark>/`, its words joined by hyphens
(`results_folder`); the tables of benchmarks/RESULTS.md and benchmarks/ABLATIONS.md are generated from them
(`python -m benchmarks.tables.generate`), so a table never holds a number that no record holds.
"""

from __future__ import annotations

import datetime
import fnmatch
import functools
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Version 2: provenance read when the run starts, and `load_average` {"at_start", "at_end"} beside it.
RECORD_VERSION = 2
PROVENANCE_KEYS = ("command", "git_commit", "git_dirty", "date", "machine", "packages")
# $SPANROBERTA_RECORDS_DIR sends the records elsewhere (a rehearsal's records are not the project's figures).
RESULTS_DIR = Path(
    os.environ.get("SPANROBERTA_RECORDS_DIR") or Path(__file__).resolve().parent.parent / "benchmarks" / "results"
)
_PACKAGES = ("torch", "transformers", "datasets", "tokenizers", "accelerate", "deepspeed", "torchao", "numpy")
ROOT = Path(__file__).resolve().parent.parent
# The files whose contents make the code a record measured (what an exported copy must share with its commit).
CODE_FILES = ("run_*.py", "Makefile", "pyproject.toml", "requirements.txt", "spanroberta/*", "benchmarks/*.py",
              "configs/*", "tests/*")  # fmt: skip


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              cwd=Path(__file__).resolve().parent)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


@functools.cache
def _cpu_info() -> dict[str, str]:
    """The first processor's fields in /proc/cpuinfo (empty where there is none), read once a process: a record names
    four of them."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    first = text.split("\n\n", 1)[0]
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in first.splitlines())}


def _cpu_model() -> str:
    return _cpu_info().get("model name") or platform.processor() or platform.machine()


def _cpu_family_model() -> str | None:
    """"family/model" of the CPU: a virtual machine's model name can be as vague as "AMD EPYC", which covers
    generations whose vector units (and so their BLAS kernels and rounding) differ."""
    info = _cpu_info()
    return f"{info['cpu family']}/{info['model']}" if "cpu family" in info and "model" in info else None


def _vector_instructions() -> str:
    """The widest vector instruction set the CPU has, which decides the kernels BLAS and oneDNN run ("" without
    AVX2)."""
    flags = _cpu_info().get("flags", "").split()
    return next((name for name in ("avx512f", "avx2") if name in flags), "")


def _bf16_instructions() -> list[str]:
    """The CPU's bf16 instruction sets (AMX or AVX-512 BF16): whether bf16 autocast on CPU has hardware behind it."""
    flags = _cpu_info().get("flags", "").split()
    return [flag for flag in ("amx_bf16", "avx512_bf16") if flag in flags]


def _gpu() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    return None


def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages: how busy the machine was around a measurement. On a machine shared
    with other jobs wall times are upper bounds; records keep the load so that a reader can judge them."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:  # no load average on this system
        return []


def provenance() -> dict[str, Any]:
    """Where and with what a measurement ran: command, commit, date, machine and package versions."""
    packages = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    status = _git("status", "--porcelain", "--untracked-files=no")
    found = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpu": _cpu_model(), "cpu_family_model": _cpu_family_model(), "logical_cpus": os.cpu_count(),
                    "vector_instructions": _vector_instructions(), "bf16_instructions": _bf16_instructions(),
                    "gpu": _gpu(), "system": platform.system()},
        "packages": packages,
    }
    # A copy exported without its history cannot read its commit: whoever exported it names it, and the digest of
    # the copy's code lets anyone with the repository check that name (`verify_measured_from`).
    if os.environ.get("SPANROBERTA_SOURCE_COMMIT"):
        digest, count = code_digest(_working_blob_ids(ROOT))
        found["measured_from"] = {"commit": os.environ["SPANROBERTA_SOURCE_COMMIT"],
                                  "named_by": "$SPANROBERTA_SOURCE_COMMIT (an exported copy of the repository)",
                                  "code_sha256": digest, "code_files": count}  # fmt: skip
    return found


def _is_code(path: str) -> bool:
    """Whether a repository path is one of CODE_FILES (compiled Python never is)."""
    return not path.endswith(".pyc") and "__pycache__/" not in path and any(
        fnmatch.fnmatchcase(path, pattern) for pattern in CODE_FILES
    )


def _working_blob_ids(root: Path) -> dict[str, str]:
    """{path: git blob id} of the code files under `root`, read from the files themselves (no git needed)."""
    folders = {pattern.split("/")[0] for pattern in CODE_FILES if "/" in pattern}
    candidates = [path for path in root.iterdir() if path.is_file()]
    candidates += [path for folder in folders if (root / folder).is_dir() for path in (root / folder).rglob("*")]
    found = {}
    for path in candidates:
        relative = path.relative_to(root).as_posix()
        if path.is_file() and _is_code(relative):
            content = path.read_bytes()
            found[relative] = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
    return found


def code_digest(blob_ids: dict[str, str]) -> tuple[str, int]:
    """sha256 over the sorted (path, git blob id) pairs of the code files, and how many there are."""
    text = "".join(f"{path} {blob}\n" for path, blob in sorted(blob_ids.items()))
    return hashlib.sha256(text.encode()).hexdigest(), len(blob_ids)


@functools.cache
def _commit_code_digest(commit: str, root: Path) -> tuple[str, int] | None:
    """The code digest of `commit` in the repository at `root`, from its tree (None: no such commit there)."""
    try:
        listing = subprocess.run(["git", "ls-tree", "-r", "--full-tree", commit], capture_output=True, text=True,
                                 check=True, cwd=root).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    blob_ids = {}
    for line in listing.splitlines():
        meta, path = line.split("\t", 1)
        _, kind, blob = meta.split()
        if kind == "blob" and _is_code(path):
            blob_ids[path] = blob
    return code_digest(blob_ids)


def verify_measured_from(record: dict[str, Any], root: Path = ROOT) -> str | None:
    """Why the commit a record from an exported copy names is not verified (None: the copy's code digest equals that
    commit's, read from the repository at `root`)."""
    named = record["measured_from"]
    if "code_sha256" not in named:
        return "the record carries no digest of the copy's code"
    expected = _commit_code_digest(named["commit"], root)
    if expected is None:
        return f"commit {named['commit'][:7]} is not in this repository"
    if expected[0] != named["code_sha256"]:
        return f"the copy's code is not commit {named['commit'][:7]}'s"
    return None


@dataclass(frozen=True)
class RunStart:
    """What `start_run()` read before a measurement began: its provenance and the load average then."""

    provenance: dict[str, Any]
    load_average: list[float]


def start_run(process: RunStart | None = None) -> RunStart:
    """Call first thing in a run and hand the result to `write_record` at its end.

    A process that runs several measurements one after another passes the RunStart it read when it began as
    `process`: each run then names the code the process loaded (its commit, dirty flag, command, packages), with
    its own start date and load average."""
    if process is None:
        return RunStart(provenance(), load_average())
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return RunStart({**process.provenance, "date": now}, load_average())


def record_load_average(record: dict[str, Any]) -> tuple[list[float] | None, list[float] | None]:
    """(at start, at end) of a record, None where the record says it was not recorded.

    Records before version 2 kept it in their results as {"before", "after"}; records whose script did not read it
    say so in `load_average.not_recorded`, with null figures."""
    load = record.get("load_average")
    if load is not None:
        return load.get("at_start"), load.get("at_end")
    results = record.get("results", {})
    legacy = results.get("load_average") or {}
    return legacy.get("before"), legacy.get("after")


def record_commit(record: dict[str, Any]) -> str:
    """The commit of this repository a record was measured from, shortened, "(dirty)" when the tree had changes.

    A record run on an exported copy of the repository (no git history) names the folder it ran from in
    `git_commit`; its `measured_from.commit`, added with it, names the repository's commit instead, followed by
    "(unverified)" unless the copy's code digest is that commit's (`verify_measured_from`)."""
    if record.get("measured_from"):
        return record["measured_from"]["commit"][:7] + (" (unverified)" if verify_measured_from(record) else "")
    return (record.get("git_commit") or "?")[:7] + (" (dirty)" if record.get("git_dirty") else "")


def check_record(record: dict[str, Any]) -> None:
    """Refuses (ValueError) a record that does not say how it was made: its provenance, and its load average at
    the start and the end of the run or an explicit `load_average.not_recorded`."""
    missing = [key for key in PROVENANCE_KEYS if key not in record]
    start, end = record_load_average(record)
    if (start is None or end is None) and not (record.get("load_average") or {}).get("not_recorded"):
        missing.append("load_average (at_start and at_end, or not_recorded)")
    if missing:
        raise ValueError(
            f"The record of {record.get('benchmark', 'a benchmark')} lacks {', '.join(missing)}: a record must say "
            "how it was made. Call spanroberta.records.start_run() when the run starts and pass its result to "
            "write_record(..., started=...) at the end."
        )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "run"


def results_folder(benchmark: str, results_dir: str | Path | None = None) -> Path:
    """The folder of `benchmark`'s records under `results_dir` (default: RESULTS_DIR), named in the one scheme of
    result folders, words joined by hyphens: a benchmark whose name has underscores (`pretraining_step`, as its
    records say in their `benchmark` field, which stays as it was written) keeps its records in `pretraining-step/`.
    Every path to a benchmark's records is made here."""
    folder = Path(results_dir) if results_dir is not None else RESULTS_DIR
    return folder / _slug(benchmark).replace("_", "-")


def write_record(
    benchmark: str,
    settings: dict[str, Any],
    results: dict[str, Any],
    *,
    started: RunStart,
    name: str | None = None,
    results_dir: str | Path | None = None,
) -> Path:
    """Writes one raw record to `<results_dir>/<benchmark>/<UTC time>-<name>.json` (the folder: `results_folder`)
    and returns its path; the time has microseconds, so names sort in the order written.

    The default `results_dir` is benchmarks/results/ of the checkout spanroberta is imported from, or
    $SPANROBERTA_RECORDS_DIR.

    `started` is what `start_run()` read when the run began: the record's provenance and opening load average;
    the closing load average is read here. `settings` are the inputs that define the measurement (model size,
    steps, data split, seeds, ...); `results` every measured value, unrounded. Values must be JSON-serialisable.
    """
    if not isinstance(started, RunStart):
        raise TypeError("write_record(..., started=...) takes the RunStart that start_run() returned when the run "
                        f"began, not {type(started).__name__}.")  # fmt: skip
    record = {"record_version": RECORD_VERSION, "benchmark": benchmark, **started.provenance,
              "load_average": {"at_start": started.load_average, "at_end": load_average()},
              "settings": settings, "results": results}  # fmt: skip
    check_record(record)
    folder = results_folder(benchmark, results_dir)
    folder.mkdir(parents=True, exist_ok=True)
    # Microseconds in the name: records sort by time, and two records of one second never overwrite each other.
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    path = folder / f"{stamp}-{_slug(name or benchmark)}.json"
    if path.exists():  # a second record in the same microsecond
        raise FileExistsError(f"{path} exists already; records are never overwritten.")
    path.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def read_records(benchmark: str, results_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """Every record of `benchmark`, oldest first (file names start with the UTC time), each with its `path`."""
    found = []
    for path in sorted(results_folder(benchmark, results_dir).glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        record["path"] = path
        found.append(record)
    return found
