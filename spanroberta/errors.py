"""Errors caused by what the user gave (files, flags, tokenizers), as opposed to bugs.

The run_*.py scripts print a `UserInputError`'s message as one paragraph and exit with status 1, without a
traceback (`spanroberta.runs.validation.user_errors`); any other exception is a bug and keeps its traceback.
Each class also subclasses the builtin error that code outside spanroberta would expect (`ValueError`,
`FileNotFoundError`, `ImportError`), so catching those still works.
"""

from __future__ import annotations

import contextlib
import gzip
import importlib.util
import os
import sys
from collections.abc import Iterator


class UserInputError(ValueError):
    """Bad input: the message says what is wrong, where (file and line, flag, record) and how to fix it."""


class InputFileNotFoundError(UserInputError, FileNotFoundError):
    """A file the user named does not exist."""


class MissingPackageError(UserInputError, ImportError):
    """An optional package that a setting the user chose needs is not installed."""


def require_package(module: str, purpose: str, *, install: str | None = None, otherwise: str = "") -> None:
    """Raises a `MissingPackageError` unless `module` can be imported, saying what needs it and how to install it.

    Called where a setting asks for an optional package (DeepSpeed, spaCy, flash-attn, ...) before any work
    starts, so that a missing one costs seconds rather than a traceback deep in a run. `purpose` names what
    needs it ("--deepspeed", "masking by spaCy words"); `install` says how to install it (default:
    `pip install <module>`); `otherwise` says how to do without it.
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None in sys.modules
        found = False
    if found:
        return
    raise MissingPackageError(
        f"{purpose} needs the {module} package, which is not installed in this Python ({sys.executable}). Install "
        f"it with {install or f'`pip install {module}`'}{f', or {otherwise}' if otherwise else ''}."
    )


def require_file(path: str | os.PathLike, missing: str) -> None:
    """Refuses a `path` that is not a file: a folder (a common slip: the folder given instead of a file in it),
    or nothing there, with the message `missing`."""
    if os.path.isdir(path):
        raise UserInputError(f"{path} is a folder, not a file. Give the file itself (the folder's files are not read "
                             "one by one here).")  # fmt: skip
    if not os.path.isfile(path):
        raise InputFileNotFoundError(missing)


@contextlib.contextmanager
def utf8_errors(path: str | os.PathLike) -> Iterator[None]:
    """Reports a UnicodeDecodeError raised while reading `path` inside the block as a `UserInputError` that
    names the file, the line and the byte."""
    try:
        yield
    except UnicodeDecodeError:
        raise not_utf8_error(path) from None


def not_utf8_error(path: str | os.PathLike) -> UserInputError:
    """Names the first line of `path` (gzipped when it ends in .gz) that is not UTF-8. Called once reading
    failed, so the scan costs nothing on good input; a newline byte never occurs inside a UTF-8 character."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                return UserInputError(
                    f"{path}, line {number}: byte 0x{line[error.start]:02x} at column {error.start + 1} is not valid "
                    "UTF-8. spanroberta reads UTF-8 text only: convert the file (for example `iconv -f latin1 -t "
                    "utf-8`) or fix the line (`grep -naxv '.*' FILE` lists such lines)."
                )
    return UserInputError(f"{path}: the text is not valid UTF-8. Convert the file to UTF-8.")
