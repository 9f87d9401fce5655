"""The range check of a numeric flag and the choice check of a flag with `choices`, which the argument classes run
as they are parsed and the scripts' own checks run later: below everything else in runs/, so that the argument
classes and the validation that reads them can both use them."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..errors import UserInputError


def check_range(
    flag: str, value: float | None, minimum: float | None = None, maximum: float | None = None,
    *, above: float | None = None, hint: str = "",
) -> None:  # fmt: skip
    """Refuses `value` (unless None) below `minimum`, not above `above`, or above `maximum`."""
    if value is None:
        return
    bounds = []
    if minimum is not None:
        bounds.append(f"at least {minimum}")
    if above is not None:
        bounds.append(f"above {above}")
    if maximum is not None:
        bounds.append(f"at most {maximum}")
    if (
        (minimum is not None and value < minimum)
        or (above is not None and value <= above)
        or (maximum is not None and value > maximum)
    ):
        raise UserInputError(f"--{flag} must be {' and '.join(bounds)}, not {value}.{' ' + hint if hint else ''}")


def check_choices(arguments: Any) -> None:
    """Refuses a value (unless None) of an argument dataclass's field that is not one of the `choices` its metadata
    declares. argparse refuses such a value on the command line; this refuses it from a config file too."""
    for spec in dataclasses.fields(arguments):
        value, valid = getattr(arguments, spec.name), spec.metadata.get("choices")
        if valid is not None and value is not None and value not in valid:
            raise UserInputError(f"--{spec.name} {value!r} does not exist; valid values: {', '.join(valid)}.")
