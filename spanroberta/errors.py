"""Errors caused by what the user gave (files, flags, tokenizers), as opposed to bugs.

run_pretraining.py prints a `UserInputError`'s message as one paragraph and exits with status 1, without a
traceback; any other exception is a bug and keeps its traceback. Both classes subclass the builtin error that
code outside spanroberta would expect (`ValueError`, `FileNotFoundError`), so catching those still works.
"""

from __future__ import annotations


class UserInputError(ValueError):
    """Bad input: the message says what is wrong, where (file and line, flag, record) and how to fix it."""


class InputFileNotFoundError(UserInputError, FileNotFoundError):
    """A file the user named does not exist."""
