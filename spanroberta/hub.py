"""Where a script's model, config and tokenizer come from (`ModelSource`, the flags every script takes), and the
Hub settings passed to every `from_pretrained` (`hub_kwargs`): pretraining and fine-tuning alike. The layers
below the scripts read these flags through this dataclass, which the scripts' model arguments extend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ModelSource:
    """The model, config and tokenizer a script loads, and from where (declared once: `runs.arguments.ModelArguments`
    extends it)."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "A folder written by save_pretrained or a Hub model id (spanroberta, RoBERTa, BERT, ...): the "
            "checkpoint to fine-tune (required by the fine-tuning scripts), or to continue pretraining from (its "
            "encoder and MLM head are loaded; an SBO head it lacks starts fresh). Pretraining default: from scratch."
        },
    )
    config_name: str | None = field(
        default=None,
        metadata={"help": "Config name or path, if not the model's; pretraining without --model_name_or_path trains a "
                  "model of this shape from scratch (instead of --model_size)."},
    )
    tokenizer_name: str | None = field(
        default=None,
        metadata={"help": "Tokenizer name or path, if not the model's (pretraining from scratch: default a byte-level "
                  "BPE trained on the data)."},
    )
    cache_dir: str | None = field(default=None, metadata={"help": "Where downloads from the Hub are cached."})
    model_revision: str = field(default="main", metadata={"help": "Branch, tag or commit of the Hub model."})
    token: str | None = field(default=None, metadata={"help": "Hub token for private models."})
    trust_remote_code: bool = field(
        default=False,
        metadata={"help": "Allow code shipped with the checkpoint (needed without spanroberta installed)."},
    )


def hub_kwargs(source: ModelSource) -> dict[str, Any]:
    """`cache_dir`, `revision` and `token` for `from_pretrained`."""
    return {"cache_dir": source.cache_dir, "revision": source.model_revision, "token": source.token}
