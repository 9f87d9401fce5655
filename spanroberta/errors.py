"""Errors caused by what the user gave (files, flags, tokenizers), as opposed to bugs.

The run_*.py scripts print a `UserInputError`'s message as one paragraph and exit with status 1, without a
traceback (`spanroberta.runs.validation.user_errors`); any other exception is a bug and keeps its traceback.
Each class also subclasses the builtin error that code outside spanroberta would expect (`ValueError`,
`FileNotFoundError`, `ImportError`), so catching those still works.
"""

from __future__ import annotations

import codecs
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


# Byte-order marks: (mark, Python codec that reads the text and drops the mark, the encoding's name). UTF-32's
# little-endian mark begins with UTF-16's, so it comes first.
BYTE_ORDER_MARKS = (
    (codecs.BOM_UTF32_LE, "utf-32", "UTF-32LE"),
    (codecs.BOM_UTF32_BE, "utf-32", "UTF-32BE"),
    (codecs.BOM_UTF8, "utf-8-sig", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16", "UTF-16LE"),
    (codecs.BOM_UTF16_BE, "utf-16", "UTF-16BE"),
)


def byte_order_mark(path: str | os.PathLike) -> tuple[str, str] | None:
    """(codec, encoding name) of the byte-order mark `path` starts with (gzipped when it ends in .gz), or None."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        start = handle.read(4)
    return next(((codec, name) for mark, codec, name in BYTE_ORDER_MARKS if start.startswith(mark)), None)


def text_encoding(path: str | os.PathLike) -> str:
    """The codec to read the text file `path` with: the one its byte-order mark names (UTF-16 or UTF-32, or UTF-8
    with its mark, which is dropped rather than read as a character of the first line), else UTF-8."""
    found = byte_order_mark(path)
    return found[0] if found else "utf-8"


def not_utf8_error(path: str | os.PathLike) -> UserInputError:
    """Names the encoding of `path` (gzipped when it ends in .gz) where its byte-order mark says it, else the first
    line that is not UTF-8, with a conversion that fits what was found. Called once reading failed, so the scan costs
    nothing on good input; a newline byte never occurs inside a UTF-8 character."""
    found = byte_order_mark(path)
    if found is not None and found[1] != "UTF-8":
        # iconv's UTF-16 and UTF-32 (no byte order named) read the order from the mark, and drop it.
        return UserInputError(
            f"{path} is {found[1]} text (its byte-order mark says so), and this file is read as UTF-8 only. Convert "
            f"it: `iconv -f {found[1][:6]} -t UTF-8 {os.path.basename(path)} > converted`."
        )
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                # Zero bytes between the characters: UTF-16 without a byte-order mark, not a single-byte code page.
                source = "UTF-16LE" if line.count(0) * 3 > len(line) else "latin1"
                return UserInputError(
                    f"{path}, line {number}: byte 0x{line[error.start]:02x} at column {error.start + 1} is not valid "
                    f"UTF-8{' (the zero bytes look like UTF-16)' if source != 'latin1' else ''}. spanroberta reads "
                    f"UTF-8 text only: convert the file (for example `iconv -f {source} -t utf-8`) or fix the line "
                    "(`grep -naxv '.*' FILE` lists such lines)."
                )
    return UserInputError(f"{path}: the text is not valid UTF-8. Convert the file to UTF-8.")
