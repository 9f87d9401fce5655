"""The range check of a numeric flag, which the argument classes run as they are parsed and the scripts' own checks
run later: below everything else in runs/, so that the argument classes and the validation that reads them can
both use it."""

from __future__ import annotations

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
