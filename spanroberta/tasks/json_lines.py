"""Reading JSON-lines files (one JSON object a line, gzipped or not), as the task readers take them, with errors
that name the file and the line."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from spanroberta.errors import utf8_errors


GZIP_MAGIC = b"\x1f\x8b"


def open_text(path: Path) -> IO[str]:
    """`path` opened as UTF-8 text, decompressed when it is gzipped: known by its first bytes, not by its name (some
    tasks' files come as .jsonl.gz, and renamed copies lose the suffix)."""
    with open(path, "rb") as file:
        gzipped = file.read(2) == GZIP_MAGIC
    return gzip.open(path, "rt", encoding="utf-8") if gzipped else open(path, encoding="utf-8")


def read_json_lines(path: Path, error: type[Exception] = ValueError) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yields (line number, record) for every non-blank line; a line that is not a JSON object raises `error`."""
    with utf8_errors(path), open_text(path) as file:
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
