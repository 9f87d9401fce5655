"""Reading JSON-lines files (one JSON object a line, gzipped when the name ends in .gz), as the task readers
take them, with errors that name the file and the line."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spanroberta.errors import utf8_errors


def read_json_lines(path: Path, error: type[Exception] = ValueError) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (line number, record) for every non-blank line; a line that is not a JSON object raises `error`."""
    opener = gzip.open if path.suffix == ".gz" else open
    with utf8_errors(path), opener(path, "rt", encoding="utf-8") as file:
        for line_number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as decode_error:
                raise error(
                    f"{path}, line {line_number}: not valid JSON ({decode_error.msg}); the file must hold one "
                    "JSON object a line (JSON lines)."
                ) from None
            if not isinstance(record, dict):
                raise error(f"{path}, line {line_number}: expected a JSON object, found {type(record).__name__}.")
            yield line_number, record
