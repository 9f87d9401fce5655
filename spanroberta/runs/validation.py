"""Checks that every run_*.py script runs on its settings and paths before any model is loaded, so that a typo
costs seconds, not a run: each failure is a `UserInputError` whose one-paragraph message names the flag or
path and says what to do (the scripts print it and exit with status 1, without a traceback).

- numbers in range (`check_range`), called from the argument dataclasses' `__post_init__`;
- model, config and tokenizer paths that exist, or Hub ids that can be reached (`check_model_source`);
- the output folder: usable, and not holding another run unless the user says how to go on
  (`check_output_dir`, with `--overwrite_output_dir` or `--resume_from_checkpoint`);
- several processes that make one run, not several writing into one folder (`distributed.check_process_world`),
  and the settings the device decides (`device.fit_to_device`: pinned memory, DeepSpeed's accelerator);
- optional packages that a setting needs (`check_optional_packages`: DeepSpeed, flash-attn; `check_report_to`:
  tensorboard, wandb, ...), and a Hub that `--push_to_hub` can reach (`check_push_to_hub`);
- lengths that fit the model's positions and each other (`check_max_seq_length`, `fit_doc_stride`,
  `fit_max_qa_length`), once the config and tokenizer are loaded and before the model is.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import shutil
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from huggingface_hub import constants as hub_constants
from huggingface_hub import get_token, try_to_load_from_cache
from huggingface_hub.utils import get_session
from transformers import PretrainedConfig, PreTrainedTokenizerBase, TrainingArguments

from ..errors import UserInputError, require_package
from ..hub import ModelSource
from ..models.configuration_spanroberta import first_position_id
from .arguments import RunArguments
from .ranges import check_range
from .checkpoints import (INCOMPLETE_PREFIX, STAGING_PREFIX, find_checkpoints, previous_run_files,
                          resolve_resume_checkpoint)
from .device import fit_to_device
from .distributed import check_process_world

logger = logging.getLogger(__name__)

# A Hub id is "name" or "owner/name" of letters, digits, '-', '_' and '.'; anything else can only be a path.
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
# The attention implementations (transformers' names) that need a package of their own, and how to install it.
_FLASH_ATTENTION = {
    "flash_attention_2": ("flash_attn", "`pip install flash-attn --no-build-isolation` (NVIDIA GPUs)"),
    "flash_attention_3": ("flash_attn_interface", "the hopper/ folder of github.com/Dao-AILab/flash-attention "
                          "(Hopper GPUs)"),
}  # fmt: skip
# Seconds to wait for the Hub before --push_to_hub is refused: enough for a slow link, short enough to retry.
HUB_TIMEOUT_S = 10


@contextlib.contextmanager
def user_errors(script: str, also: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """Turns a `UserInputError` (and the exception types in `also`, e.g. a reader's ValueError) raised inside
    into `script: error: message` and exit status 1, without a traceback."""
    try:
        yield
    except (UserInputError, *also) as error:
        sys.exit(f"{script}: error: {' '.join(str(error).split())}")


CONFIG_FILES = ("config.json",)
TOKENIZER_FILES = ("tokenizer_config.json", "tokenizer.json", "vocab.json", "vocab.txt")


def check_run(model_args: ModelSource, training_args: RunArguments, *, trains: bool) -> None:
    """The checks every script makes once its flags are parsed: the model, config and tokenizer sources, the
    output folder and the reporting integrations. First, that the launcher's processes make one run
    (`distributed.check_process_world`), before any process writes; then the settings the device decides
    (`device.fit_to_device`)."""
    check_process_world(training_args)
    fit_to_device(training_args)
    check_model_sources(model_args)
    check_output_dir(training_args, training_args.overwrite_output_dir, trains=trains)
    check_report_to(training_args)
    check_push_to_hub(training_args)


def check_model_sources(model_args: ModelSource) -> None:
    """`check_model_source` for the model, config and tokenizer that `model_args` names."""
    sources = (
        ("model_name_or_path", model_args.model_name_or_path, CONFIG_FILES, "a saved model"),
        ("config_name", model_args.config_name, CONFIG_FILES, "a saved config"),
        ("tokenizer_name" if model_args.tokenizer_name else "model_name_or_path",
         model_args.tokenizer_name or model_args.model_name_or_path, TOKENIZER_FILES, "a saved tokenizer"),
    )  # fmt: skip
    for flag, name, needs, what in sources:
        check_model_source(flag, name, needs, what, cache_dir=model_args.cache_dir, revision=model_args.model_revision)


def require_output_dir(given: set[str]) -> None:
    # TrainingArguments turns a missing output_dir into "trainer_output": look at what the user gave.
    if "output_dir" not in given:
        raise UserInputError("--output_dir is required: the folder where the model, checkpoints and results go.")


def check_model_source(
    flag: str, name: str | None, needs: tuple[str, ...], what: str, *, cache_dir: str | None = None,
    revision: str | None = None,
) -> None:  # fmt: skip
    """Checks that `name` (the value of `--flag`) is a file, a folder holding one of `needs` (it is then `what`),
    or a Hub id that can be downloaded: offline (HF_HUB_OFFLINE=1), one already in the Hub cache."""
    if not name:
        return
    path = Path(name).expanduser()
    if path.is_file():
        return
    if path.is_dir():
        if not any((path / file).is_file() for file in needs):
            checkpoints = [folder.name for _, folder in find_checkpoints(path)]
            raise UserInputError(
                f"--{flag} {name} holds no {' or '.join(needs)}, so it is not {what}"
                + (f"; it holds {', '.join(checkpoints[:3])}: give one of those folders" if checkpoints else "")
                + ". Give the folder that save_pretrained (or a finished run) wrote, or a Hub id such as roberta-base."
            )
        return
    if name.startswith((".", "/", "~")) or name.endswith("/") or not _HUB_ID.match(name):
        raise UserInputError(
            f"--{flag} {name}: no such folder (and it is not a Hub id). Check the path, or give a Hub id such as "
            "roberta-base."
        )
    if hub_constants.HF_HUB_OFFLINE:
        cached = [try_to_load_from_cache(name, file, cache_dir=cache_dir, revision=revision) for file in needs]
        if not any(isinstance(found, str) for found in cached):
            raise UserInputError(
                f"--{flag} {name}: there is no folder of that name, and as a Hub id it is not in the Hub cache, "
                "which is all that can be read with HF_HUB_OFFLINE=1. Give a local folder, download it while online "
                f"(`hf download {name}`), or unset HF_HUB_OFFLINE."
            )


def check_output_dir(args: TrainingArguments, overwrite_output_dir: bool, *, trains: bool = True) -> None:
    """Checks that `--output_dir` can be written and, for a run that trains, that it does not hold another run's
    checkpoints or model: those are kept unless `--overwrite_output_dir` (which deletes the stale checkpoints,
    on the main process) or `--resume_from_checkpoint` says how to go on."""
    output_dir = Path(args.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise UserInputError(f"--output_dir {output_dir} is a file, not a folder. Give a folder (new or existing).")
    existing = next(parent for parent in (output_dir.absolute(), *output_dir.absolute().parents) if parent.exists())
    if not existing.is_dir():
        raise UserInputError(
            f"--output_dir {output_dir} cannot be created: {existing} is a file. Give a folder path."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserInputError(
            f"--output_dir {output_dir} cannot be written: {existing} is not writable by this user. Give another "
            "folder, or change its permissions."
        )
    resume = args.resume_from_checkpoint not in (None, False, "false", "False")
    if overwrite_output_dir and resume:
        raise UserInputError(
            "--overwrite_output_dir deletes the checkpoints that --resume_from_checkpoint would resume from: give one "
            "of the two."
        )
    if resume:
        # Raises now, before any model is loaded, when there is nothing to resume from.
        resolve_resume_checkpoint(args.resume_from_checkpoint, str(output_dir))
        return
    if not trains:
        return
    found = previous_run_files(output_dir)
    if not found:
        return
    if not overwrite_output_dir:
        raise UserInputError(
            f"--output_dir {output_dir} already holds another run ({', '.join(found[:4])}"
            f"{', ...' if len(found) > 4 else ''}), which this run would overwrite or mix with. Give a new folder, "
            "or add --overwrite_output_dir to delete its checkpoints and overwrite it, or --resume_from_checkpoint "
            "true to continue that run."
        )
    if args.should_save:
        for entry in sorted(output_dir.iterdir()):
            unprefixed = entry.name.removeprefix(INCOMPLETE_PREFIX).removeprefix(STAGING_PREFIX)
            if entry.is_dir() and unprefixed.startswith("checkpoint-"):
                shutil.rmtree(entry)
        logger.warning("--overwrite_output_dir: deleted the checkpoints in %s; its other files will be overwritten.",
                       output_dir)  # fmt: skip


def check_report_to(args: TrainingArguments) -> None:
    """Refuses a `--report_to` integration whose package is missing, naming what to install (the Trainer would
    fail on it after the model is loaded)."""
    from transformers.integrations import get_available_reporting_integrations

    available = set(get_available_reporting_integrations())
    missing = [name for name in args.report_to or [] if name not in available]
    if missing:
        raise UserInputError(
            f"--report_to {', '.join(missing)}: {'it is' if len(missing) == 1 else 'they are'} not installed. "
            f"Install {' and '.join(missing)} (`pip install {' '.join(missing)}`), or use --report_to none."
        )


def check_optional_packages(settings: Mapping[str, Any]) -> None:
    """Refuses a setting whose optional package is missing: --deepspeed (DeepSpeed) and --attn_implementation
    flash_attention_2/3 (flash-attn). `settings` maps flag names to the values parsed; it is checked before the
    argument dataclasses are built, since TrainingArguments imports DeepSpeed as soon as --deepspeed is set."""
    if settings.get("deepspeed"):
        require_package(
            "deepspeed", "--deepspeed", otherwise="leave out --deepspeed (one GPU, or several with DDP, need none)"
        )
    attention = settings.get("attn_implementation")
    if attention in _FLASH_ATTENTION:
        module, install = _FLASH_ATTENTION[attention]
        require_package(module, f"--attn_implementation {attention}", install=install,
                        otherwise="use --attn_implementation sdpa")  # fmt: skip


def check_push_to_hub(args: TrainingArguments) -> None:
    """With --push_to_hub, checks before training that the upload at its end can happen: the Hub is allowed
    (not HF_HUB_OFFLINE), answers within HUB_TIMEOUT_S, and a token is there to write with."""
    if not args.push_to_hub:
        return
    later = "or leave out --push_to_hub and upload the saved folder later (`hf upload REPO_ID OUTPUT_DIR`)"
    if hub_constants.HF_HUB_OFFLINE:
        raise UserInputError(
            "--push_to_hub uploads the model to the Hugging Face Hub, but HF_HUB_OFFLINE=1 forbids connecting to it. "
            f"Unset HF_HUB_OFFLINE, {later}."
        )
    try:
        get_session().head(hub_constants.ENDPOINT, timeout=HUB_TIMEOUT_S)
    except Exception as error:  # any failure to connect (DNS, refused, timeout, proxy, TLS) means unreachable
        raise UserInputError(
            f"--push_to_hub uploads the model to the Hugging Face Hub, but {hub_constants.ENDPOINT} cannot be "
            f"reached ({type(error).__name__}: {error}). Check the network (and HF_ENDPOINT), {later}."
        ) from None
    if not (args.hub_token or get_token()):
        raise UserInputError(
            "--push_to_hub uploads the model to the Hugging Face Hub, which needs a token with write access: log "
            f"in with `hf auth login`, set HF_TOKEN or give --hub_token, {later}."
        )


def model_positions(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase | None = None) -> int | None:
    """How many tokens one sequence of the model can hold: its position embeddings (RoBERTa's start after the
    padding id) and the tokenizer's own limit; None when the config has no such bound."""
    limits = []
    positions = getattr(config, "max_position_embeddings", None)
    if positions is not None:
        limits.append(positions - first_position_id(config))
    # Tokenizers without a known limit report a huge placeholder (int(1e30)).
    if tokenizer is not None and tokenizer.model_max_length < 1_000_000:
        limits.append(tokenizer.model_max_length)
    return min(limits) if limits else None


def check_max_seq_length(
    max_seq_length: int, config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase, model_name: str
) -> None:
    """Refuses a `--max_seq_length` longer than the model's positions (which would fail mid-run)."""
    limit = model_positions(config, tokenizer)
    if limit is not None and max_seq_length > limit:
        raise UserInputError(
            f"--max_seq_length {max_seq_length} is above the {limit} tokens that {model_name} can hold "
            f"(max_position_embeddings={getattr(config, 'max_position_embeddings', None)}, tokenizer limit "
            f"{tokenizer.model_max_length}). Use --max_seq_length {limit} or less."
        )


def fit_doc_stride(
    doc_stride: int, max_seq_length: int, max_query_length: int, tokenizer: PreTrainedTokenizerBase, given: set[str]
) -> int:
    """The overlap of extractive QA's windows to use: `doc_stride` when it is below the context room of a window; a
    default that is not is lowered to half the room (with a warning), and one the user gave is refused."""
    room = max_seq_length - max_query_length - tokenizer.num_special_tokens_to_add(pair=True)
    if room < 2:
        raise UserInputError(
            f"--max_seq_length {max_seq_length} leaves no room for the context after a question of up to "
            f"--max_query_length {max_query_length} tokens and the special tokens: raise --max_seq_length or lower "
            "--max_query_length."
        )
    if doc_stride < room:
        return doc_stride
    if "doc_stride" in given:
        raise UserInputError(
            f"--doc_stride {doc_stride} must be smaller than the context room of a window, {room} tokens "
            f"(--max_seq_length {max_seq_length} - --max_query_length {max_query_length} - special tokens): use "
            f"--doc_stride {room // 2} for example, or raise --max_seq_length."
        )
    logger.warning("--doc_stride %d does not fit windows of %d tokens (context room %d): using --doc_stride %d.",
                   doc_stride, max_seq_length, room, room // 2)  # fmt: skip
    return room // 2


def fit_max_qa_length(
    max_qa_length: int, max_seq_length: int, tokenizer: PreTrainedTokenizerBase, given: set[str]
) -> int:
    """The multiple-choice question+option budget to use: `max_qa_length` when it leaves room for the passage; a default
    that does not is lowered to half of `max_seq_length` (with a warning), and one the user gave is refused."""
    special = tokenizer.num_special_tokens_to_add(pair=True)
    if max_qa_length + special < max_seq_length:
        return max_qa_length
    fitted = (max_seq_length - special) // 2
    if "max_qa_length" in given or fitted < 1:
        raise UserInputError(
            f"--max_qa_length {max_qa_length} leaves no room for the passage in --max_seq_length {max_seq_length} "
            f"({special} special tokens): use --max_qa_length {max(fitted, 1)} or less, or raise --max_seq_length."
        )
    logger.warning("--max_qa_length %d does not fit --max_seq_length %d: using --max_qa_length %d.",
                   max_qa_length, max_seq_length, fitted)  # fmt: skip
    return fitted


def min_block_length_for_targets(mlm_probability: float, special_tokens: int = 2) -> int:
    """The shortest block whose tokens give one masked target on average (the masking budget is
    mlm_probability x the block's tokens, rounded at random), with `special_tokens` that are never masked."""
    return math.ceil(1 / mlm_probability) + special_tokens

