"""The Hub settings a script passes to every `from_pretrained`, read from its model arguments (`--cache_dir`,
`--model_revision`, `--token`): pretraining and fine-tuning alike."""

from __future__ import annotations

from typing import Any, Protocol


class HubArguments(Protocol):
    """The flags `hub_kwargs` reads: every script's model arguments (`runs.arguments.ModelArguments`) have them."""

    cache_dir: str | None
    model_revision: str
    token: str | None


def hub_kwargs(model_args: HubArguments) -> dict[str, Any]:
    """`cache_dir`, `revision` and `token` for `from_pretrained`."""
    return {"cache_dir": model_args.cache_dir, "revision": model_args.model_revision, "token": model_args.token}
