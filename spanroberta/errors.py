"""Errors caused by what the user gave (files, flags, tokenizers), as opposed to bugs.

The four scripts print a `UserInputError`'s message as one paragraph and exit with status 1, without a
traceback (`spanroberta.training.validation.user_errors`); any other exception is a bug and keeps its traceback. Both classes subclass the builtin error that
code outside spanroberta would expect (`ValueError`, `FileNotFoundError`), so catching those still works.
"""

from __future__ import annotations

import contextlib
import gzip
import os
from collections.abc import Iterator


class UserInputError(ValueError):
    """Bad input: the message says what is wrong, where (file and line, flag, record) and how to fix it."""


class InputFileNotFoundError(UserInputError, FileNotFoundError):
    """A file the user named does not exist."""


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
