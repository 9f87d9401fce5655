"""The reliability tables of benchmarks/RESULTS.md, declared, from the records under benchmarks/results/reliability/:
the load held (benchmarks/reliability/stress.py), the faults survived and what they lost
(benchmarks/reliability/faults.py) and each moment's own checks (a SIGTERM saved, a second run or a changed batch
refused, a full disk named), the memory a very long line takes (benchmarks/reliability/long_line.py) and the
bad inputs tried (any other kind of record there, read by the counts it holds)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.tables.render import Column, Context, fmt_number, records_table

BENCHMARK = "reliability"
OWN_TABLES = {"stress", "faults", "long-line"}  # the kinds with a table of their own; others go under bad inputs
C = Column.of  # a column whose cell reads the row, a (record, part) pair


def record_kind(record: dict[str, Any]) -> str:
    """What a reliability record measured: its `kind` (in its settings, its results or at its top), else the name
    of the benchmark script that wrote it (records written before they carried a kind)."""
    for where in (record.get("settings") or {}, record.get("results") or {}, record):
        if where.get("kind"):
            return str(where["kind"])
    scripts = [Path(word).stem for word in record.get("command", "").split() if word.endswith(".py")]
    return scripts[0].replace("_", "-") if scripts else "unnamed"


def of_kind(kinds: set[str], exclude: bool = False):
    """The reliability records of `kinds` (or of every other kind), for a table's rows."""
    return lambda context: [r for r in context.records(BENCHMARK) if (record_kind(r) in kinds) != exclude]


def _busy(record: dict[str, Any]) -> str:
    busy = str(record["settings"]["busy_processes"])
    concurrent = record["settings"].get("engines_concurrent") and len(record["results"]["engines"]) > 1
    return busy + (", and the other engines' runs beside" if concurrent else "")


STRESS = records_table(of_kind({"stress"}), "python -m benchmarks.reliability.stress --launches 20 --busy 6", [
    C("engine", lambda row: row[1][0]), C("launches", lambda row: str(row[1][1]["launches"])),
    C("busy processes", lambda row: _busy(row[0])), C("aborts", lambda row: f"**{row[1][1]['aborts']}**"),
    C("weight mismatches", lambda row: str(row[1][1]["weight_mismatches"])),
    C("uninterrupted run clean", lambda row: "yes" if row[1][1]["reference_clean"] else "**no**"),
], lambda record: list(record["results"]["engines"].items()))  # fmt: skip


def lost(record: dict[str, Any], engine: str) -> str:
    """What the faults hitting `engine`'s runs lost: nothing, or each run (no final model after the resume) and the
    checkpoints no longer complete, with the moment of the fault."""
    found = [f"{entry['moment']}: " + ("the run" if not entry["finished"] else ", ".join(entry["checkpoints_lost"]))
             for entry in record["results"].get("trials", []) if entry["engine"] == engine and entry["fault"]["hit"]
             and (not entry["finished"] or entry["checkpoints_lost"])]  # fmt: skip
    return "; ".join(found) or "nothing"


FAULTS = records_table(of_kind({"faults"}),
                       "python -m benchmarks.reliability.faults --engines plain ddp zero2 zero3 --trials 10", [
    C("engine", lambda row: row[1][0]), C("faults", lambda row: str(row[1][1]["faults"])),
    C("survived", lambda row: f"**{row[1][1]['survived']}**"), C("resumed identically", lambda row: str(row[1][1]["identical"])),
    C("runs lost", lambda row: str(row[1][1]["runs_lost"])), C("checkpoints lost", lambda row: str(row[1][1]["checkpoints_lost"])),
    C("not hit", lambda row: str(row[1][1]["not_hit"])), C("lost", lambda row: lost(row[0], row[1][0])),
], lambda record: list(record["results"]["counts"]["by_engine"].items()))  # fmt: skip


def _checks(record: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A faults record's tallies by engine and moment that hold moment-specific checks (records written before
    faults.py counted them have none)."""
    by_both = record["results"]["counts"].get("by_engine_moment", {})
    return [(name, counts) for name, counts in by_both.items() if counts.get("checks")]


def _checked(counts: dict[str, Any]) -> str:
    """Each check's count, out of the faults that hit ("exited 75 10 of 10"); tracebacks and what was left,
    which should be 0, as counts."""
    totals = ("tracebacks", "launcher_tracebacks", "half_written_checkpoints_left")
    return ", ".join(f"{name.replace('_', ' ')} {value}" + ("" if name in totals else f" of {counts['faults']}")
                     for name, value in counts["checks"].items())  # fmt: skip


FAULT_CHECKS = records_table(
    lambda context: [r for r in of_kind({"faults"})(context) if _checks(r)],
    "python -m benchmarks.reliability.faults --engines plain ddp zero2 zero3 --moments sigterm second-run "
    "changed-batch full-filesystem --trials 40", [
    C("engine", lambda row: row[1][0].split()[0]), C("moment", lambda row: row[1][0].split()[1]),
    C("trials", lambda row: str(row[1][1]["trials"])), C("faults", lambda row: str(row[1][1]["faults"])),
    C("survived", lambda row: f"**{row[1][1]['survived']}**"),
    C("resumed identically", lambda row: str(row[1][1]["identical"])),
    C("runs lost", lambda row: str(row[1][1]["runs_lost"])),
    C("checkpoints lost", lambda row: str(row[1][1]["checkpoints_lost"])),
    C("checks", lambda row: _checked(row[1][1])),
], _checks)  # fmt: skip


def _added(row: tuple) -> float:
    return row[1]["prepare"]["peak_anonymous_pss_mib"] - row[0]["results"]["baseline"]["prepare"]["peak_anonymous_pss_mib"]


def _bound(row: tuple) -> str:
    """The record's bound on the anonymous memory a line adds, and whether it holds (older records stated theirs on
    the resident set: "-")."""
    bound = row[0]["settings"].get("anonymous_bound_mib")
    return "-" if bound is None else f"{bound}, {'holds' if _added(row) <= bound else '**broken**'}"


def _baseline(row: tuple, key: str) -> float:
    return row[0]["results"]["baseline"]["prepare"][key]


LONG_LINE = records_table(of_kind({"long-line"}),
                          "python -m benchmarks.reliability.long_line --sizes_mb 10 50 100 --train_steps 3", [
    C("line (MB)", lambda row: f"{row[1]['line_mb']:g}"), C("tokens", lambda row: f"{row[1]['tokens']:,}"),
    C("blocks on disk (MiB)", lambda row: fmt_number(row[1]["prepared_bytes"] / 2**20, 1)),
    C("peak anonymous (MiB)", lambda row: fmt_number(row[1]["prepare"]["peak_anonymous_pss_mib"])),
    C("baseline's", lambda row: fmt_number(_baseline(row, "peak_anonymous_pss_mib"))),
    C("added (MiB)", lambda row: f"**{fmt_number(_added(row))}**"), C("bound (MiB)", _bound),
    C("added resident (MiB)", lambda row: fmt_number(row[1]["prepare"]["peak_rss_mib"] - _baseline(row, "peak_rss_mib"))),
    C("prepare (s)", lambda row: fmt_number(row[1]["prepare"]["seconds"])),
    C("training peak anonymous (MiB)", lambda row: fmt_number(row[1]["train"]["peak_anonymous_pss_mib"])
      if row[1].get("train") else "-"),
], lambda record: record["results"]["sizes"])  # fmt: skip


def counts_of(results: dict[str, Any]) -> str:
    """The whole-number figures at the top of a record's results (cases tried, refused, failures, ...)."""
    counts = [f"{name.replace('_', ' ')} {value}" for name, value in results.items()
              if isinstance(value, int) and not isinstance(value, bool)]  # fmt: skip
    return ", ".join(counts) or "-"


BAD_INPUTS = records_table(of_kind(OWN_TABLES, exclude=True), "python -m benchmarks.reliability.bad_inputs", [
    C("kind", lambda row: record_kind(row[0])), C("counts", lambda row: counts_of(row[0]["results"])),
], lambda record: [None])  # fmt: skip

REGIONS: dict[str, Callable[[Context], str]] = {
    "reliability-stress": STRESS.render,
    "reliability-faults": FAULTS.render,
    "reliability-checks": FAULT_CHECKS.render,
    "long-line": LONG_LINE.render,
    "bad-inputs": BAD_INPUTS.render,
}
