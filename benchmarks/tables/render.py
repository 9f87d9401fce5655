"""The one renderer of the benchmark pages' tables: a table is a declaration (`Table`) of its rows (records, or the
parts of records a row shows), its columns (each a name and a function of a row) and, where it judges, the rule a
column applies (benchmarks/statistics.py's). generate.py writes each region from its declaration; what the tables
mean is written by hand beside them in the pages. Every number in a cell goes through one of the fmt_* helpers, and
every table that names a record's machine describes it with common.py's `machine_class` and `machine_kind`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spanroberta.records import read_records, record_commit, record_load_average


@dataclass
class Context:
    """What a table reads: the records folder, the markdown file it is written into (for relative links) and the
    checkout's root (for the ablation configs)."""

    records_dir: Path
    markdown: Path
    root: Path

    def records(self, benchmark: str) -> list[dict[str, Any]]:
        return read_records(benchmark, self.records_dir)

    def link(self, record: dict[str, Any]) -> str:
        path = Path(record["path"])
        return f"[{path.name}]({Path(os.path.relpath(path, self.markdown.parent)).as_posix()})"

    def links(self, records: Sequence[dict[str, Any]]) -> str:
        return ", ".join(self.link(record) for record in records)

    def page_path(self, name: str) -> str:
        """The path of one of the benchmark pages from the markdown file."""
        return Path(os.path.relpath(self.root / "benchmarks" / name, self.markdown.parent)).as_posix()

    def page(self, label: str, name: str, anchor: str) -> str:
        """A link to a section of one of the benchmark pages from the markdown file."""
        return f"[{label}]({self.page_path(name)}#{anchor})"


@dataclass(frozen=True)
class Column:
    """A column: its name and its cell, a function of the row (and of the context, for links)."""

    name: str
    cell: Callable[[Any, Context], str]

    @classmethod
    def of(cls, name: str, cell: Callable[[Any], str]) -> Column:
        """A column whose cell reads the row alone."""
        return cls(name, lambda row, _: cell(row))


@dataclass(frozen=True)
class Table:
    """A table: its rows from the records (`rows(context)`), its columns, and what it says without rows."""

    rows: Callable[[Context], Sequence[Any]]
    columns: Sequence[Column]
    empty: str = "No committed record yet."

    def render(self, context: Context) -> str:
        rows = self.rows(context)
        if not rows:
            return self.empty
        cells = [[column.cell(row, context) for column in self.columns] for row in rows]
        return markdown_table([column.name for column in self.columns], cells)


# The columns every table of whole records shows around its own: when and where from, the load, the record.
DATE = Column.of("date (UTC), commit", lambda row: fmt_date(row[0]))
LOAD = Column.of("load average", lambda row: fmt_load(row[0]))
RECORD = Column("record", lambda row, context: context.link(row[0]))


def records_table(benchmark: str | Callable[[Context], list[dict[str, Any]]], command: str,
                  columns: Sequence[Column], parts: Callable[[dict[str, Any]], Sequence[Any]]) -> Table:  # fmt: skip
    """Every record of `benchmark` (or of those a function picks), newest first, a row per part of it
    (`parts(record)`; a row is `(record, part)`), between its date and commit and its load average and link; with
    no row, the `command` that makes a record."""

    def rows(context: Context) -> list[tuple[dict[str, Any], Any]]:
        records = context.records(benchmark) if isinstance(benchmark, str) else benchmark(context)
        return [(record, part) for record in reversed(records) for part in parts(record)]

    return Table(rows, [DATE, *columns, LOAD, RECORD], none_yet(command))


def fmt_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def fmt_number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def fmt_percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def fmt_load(record: dict[str, Any]) -> str:
    """The 1-minute load average at the run's start and end, or that the record's script did not read it."""
    start, end = record_load_average(record)
    if start is None and end is None:
        return "not recorded"
    return f"{(start or ['?'])[0]} → {(end or ['?'])[0]}"


def fmt_date(record: dict[str, Any]) -> str:
    return f"{record['date'][:16].replace('T', ' ')}, `{record_commit(record)}`"


def fmt_cell(text: str) -> str:
    """Free text (a question, an answer) as a table cell: a pipe would end the cell."""
    return text.replace("|", "\\|")


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def none_yet(command: str) -> str:
    return f"No committed record yet; run `{command}` to measure it."


def not_on_gpu_yet(command: str) -> str:
    return f"Not measured on a GPU yet; run `{command}` to measure it"


def latest_record(records: list[dict[str, Any]], **settings: Any) -> dict[str, Any] | None:
    found = [r for r in records if all(r["settings"].get(key) == value for key, value in settings.items())]
    return found[-1] if found else None


def target_verdict(ratio: float, target: float) -> str:
    return f"**met** (target >= {target:.1f}x)" if ratio >= target else f"**not met** (target >= {target:.1f}x)"
