"""What every table of benchmarks/tables/generate.py shares: the context a renderer gets, and the formatting helpers
every number in a table goes through."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spanroberta.records import read_records, record_commit, record_load_average


@dataclass
class Context:
    """What a renderer needs: the records folder, the markdown file it writes into (for relative links) and the
    checkout's root (for the ablation configs)."""

    records_dir: Path
    markdown: Path
    root: Path

    def records(self, benchmark: str) -> list[dict[str, Any]]:
        return read_records(benchmark, self.records_dir)

    def link(self, record: dict[str, Any]) -> str:
        path = Path(record["path"])
        return f"[{path.name}]({Path(os.path.relpath(path, self.markdown.parent)).as_posix()})"

    def page(self, label: str, name: str, anchor: str) -> str:
        """A link to a section of benchmarks/RESULTS.md or benchmarks/ABLATIONS.md from the markdown file."""
        target = Path(os.path.relpath(self.root / "benchmarks" / name, self.markdown.parent)).as_posix()
        return f"[{label}]({target}#{anchor})"


# Formatting helpers: every number in a table goes through one of these.
def fmt_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def fmt_number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


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


def records_table(
    context: Context,
    benchmark: str,
    command: str,
    header: list[str],
    rows_of: Callable[[dict[str, Any]], list[list[str]]],
) -> str:
    """Every record of `benchmark`, newest first: each of its rows (`rows_of(record)`, cells under `header`) between
    the record's date and commit and its load average and link; or, with no record, the `command` that makes one."""
    records = context.records(benchmark)
    if not records:
        return none_yet(command)
    rows = [[fmt_date(record), *cells, fmt_load(record), context.link(record)]
            for record in reversed(records) for cells in rows_of(record)]  # fmt: skip
    return markdown_table(["date (UTC), commit", *header, "load average", "record"], rows)


def latest_record(records: list[dict[str, Any]], **settings: Any) -> dict[str, Any] | None:
    found = [r for r in records if all(r["settings"].get(key) == value for key, value in settings.items())]
    return found[-1] if found else None


def target_verdict(ratio: float, target: float) -> str:
    return f"**met** (target >= {target:.1f}x)" if ratio >= target else f"**not met** (target >= {target:.1f}x)"
