"""A pretraining run's settings, resolved once (`specify_run`) into a frozen `RunSpecification` that every later
stage reads: the flags as given, then the recipe's defaults, in demo mode the demo's, then the objective's (ELECTRA's
depend on the model size and the number of processes), the checks every script makes (with the settings the device
decides), the recipe with the flags that override it, the attention plan, and the data loader on CUDA. The
warm-up, Adam's bias correction and the logging interval are fitted to the run's length once the training set
is known (`fit_run_length`). Each setting that is not the dataclass default records where its value came from
(`RunSpecification.sources`), which the "Run settings" line prints.

A setting given by the user (on the command line or in a config file) is never changed, except where the run
cannot use it: rows that an encoder cannot pack (`AttentionPlan`), pinned memory on CPU (`runs.device`). --fp8
turns --torch_compile on where it was not given (`float8.compile_for_float8`); under ZeRO-3 a checkpoint's
vocabulary is kept unpadded where --pad_vocab_to_multiple_of was not given.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Mapping
from types import MappingProxyType

import datasets
import transformers
from torch.utils.data import Dataset
from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled

from ..data.demo_corpus import demo_corpus_path
from ..objectives import ResolvedRecipe, check_recipe, get_objective
from ..objectives.recipes import get_recipe
from ..runs.cli import apply_defaults
from ..runs.distributed import training_processes
from ..runs.run_length import fit_to_run_length
from ..runs.validation import check_run, require_output_dir
from .arguments import PretrainingArguments, PretrainingDataArguments, PretrainingModelArguments
from .attention import AttentionPlan, plan_run_attention
from .float8 import compile_for_float8

PretrainingFlags = tuple[PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments]

# Where a setting's value came from, as the Run settings line names it (a recipe's: "recipe <name>"; the attention
# plan's: its `chosen_by`; a setting with no source: the dataclass default).
GIVEN = "you"
DEMO = "demo"
FITTED = "fitted to the run"
ON_CUDA = "training on CUDA"
ON_CPU = "training on CPU"
ATTENTION_PLAN = "attention plan"
ZERO3_KEEPS_VOCABULARY = "ZeRO-3 keeps the checkpoint's vocabulary"
DEFAULT = "default"

# Settings of the demo (run_pretraining.py with no data argument): a tiny model, a small vocabulary and short
# blocks, so that it finishes in about a minute on 2 CPU cores. Flags given explicitly still win.
DEMO_SETTINGS = {
    "model_size": "tiny",
    "tokenizer_vocab_size": 2000,
    "max_seq_length": 128,
    "per_device_train_batch_size": 16,
    "max_steps": 300,
    "learning_rate": 1e-3,
    "warmup_steps": 30,
    "save_steps": 300,
    "eval_strategy": "no",
    "output_dir": "spanroberta-demo",
}

# The recipe's fields that a flag overrides (a flag left unset, None, takes the recipe's).
RECIPE_FLAGS = ("masking", "sbo", "sentence_objective", "input_format", "static_masking")

# DataLoader workers a run on a GPU gets unless --dataloader_num_workers is given: enough to collate ahead of a step
# (the span collator takes a few milliseconds a batch), few enough not to crowd a node's cores under DDP.
GPU_DATALOADER_WORKERS = 2


@dataclasses.dataclass(frozen=True)
class RunSpecification:
    """The pretraining run's settings, resolved: its flags' dataclasses (each part handed to the layer that reads
    it), the recipe with the user's overrides, the attention plan, and where each setting came from.

    given: the settings the user gave (None: code that built its own arguments, every setting chosen on purpose).
    sources: setting name -> where its value came from (`GIVEN`, "recipe <name>", `DEMO`, `FITTED`, `ON_CUDA`,
    `ON_CPU`, the attention plan's, `float8.FLOAT8_NEEDS_COMPILE`, `ZERO3_KEEPS_VOCABULARY`); a setting not in it
    has its dataclass default."""

    model: PretrainingModelArguments
    data: PretrainingDataArguments
    training: PretrainingArguments
    recipe: ResolvedRecipe
    attention: AttentionPlan
    given: frozenset[str] | None
    sources: Mapping[str, str]

    def source(self, name: str) -> str:
        """Where the setting `name` came from."""
        return self.sources.get(name, DEFAULT)


def specify_run(flags: PretrainingFlags, given: Collection[str] | None) -> RunSpecification:
    """The run's settings from its parsed flags and the names of those the user gave (`cli.parse_arguments`; None:
    the flags are taken as they are, no default filled in). Refuses (UserInputError) settings that cannot train."""
    if given is None:
        sources: dict[str, str] = {}
    else:
        flags, sources = fill_defaults(flags, given)
    model, data, training = flags
    training, compiled = compile_for_float8(training, given)
    sources.update(compiled)
    # Every path and setting that can be checked without the data is checked before it is read; on CPU, the data
    # loader pins no memory.
    pinned = training.dataloader_pin_memory
    check_run(model, training, trains=not data.prepare_only)
    if training.dataloader_pin_memory != pinned:
        sources["dataloader_pin_memory"] = ON_CPU
    model, kept = _keep_the_vocabulary_under_zero3(model, given)
    sources.update(kept)
    # From here on, logs come at the process's log level (--log_level), with their time.
    _setup_logging(training)
    recipe = resolve_recipe(model, data)
    unset = [name for name in RECIPE_FLAGS if getattr(model if hasattr(model, name) else data, name) is None]
    sources.update(dict.fromkeys(unset, f"recipe {data.recipe}"))
    # The attention plan: the implementation, whether rows are packed and take offsets; the attention asked for
    # refused here if it could not train the run.
    attention = plan_run_attention(model, data, training, recipe)
    if attention.chosen_by is not None:
        sources["attn_implementation"] = attention.chosen_by
    if data.pack_documents and not attention.packs_rows and recipe.input_format == "doc-sentences":
        data = dataclasses.replace(data, pack_documents=False)
        sources["pack_documents"] = ATTENTION_PLAN
    sources.update(_load_data_beside_the_gpu(training, data, given))
    sources.update(_copy_batches_without_waiting(training, given))
    given = None if given is None else frozenset(given)
    return RunSpecification(model, data, training, recipe, attention, given, MappingProxyType(sources))


def fill_defaults(flags: PretrainingFlags, given: Collection[str]) -> tuple[PretrainingFlags, dict[str, str]]:
    """`flags` with, for every setting the user did not give, the recipe's flag defaults, in demo mode
    DEMO_SETTINGS (which win over the recipe's), then the objective's own; and where each setting came from.
    Outside the demo, a run that trains needs --output_dir."""
    model, data, _ = flags
    recipe = get_recipe(data.recipe)
    sources = dict.fromkeys(given, GIVEN)
    kept = set(given)

    def fill(arguments: PretrainingFlags, values: Mapping[str, object], source: str) -> PretrainingFlags:
        sources.update({name: source for name in values if name not in kept})
        return apply_defaults(arguments, dict(values), kept)

    arguments = fill(flags, dict(recipe.flag_defaults), f"recipe {data.recipe}")
    if not data.is_demo:
        if not data.prepare_only:
            require_output_dir(set(given))
    else:
        demo = {**DEMO_SETTINGS, "train_file": str(demo_corpus_path())}
        arguments = fill(arguments, demo, DEMO)
        kept |= set(demo)  # the demo's settings win over the objective's too
    # The objective's defaults read the flags as the recipe and the demo left them.
    filled_model, _, filled_training = arguments
    batch_per_step = filled_training.per_device_train_batch_size * training_processes(filled_training)
    objective_defaults = get_objective(recipe.objective).flag_defaults(filled_model, batch_per_step)
    return fill(arguments, objective_defaults, f"recipe {data.recipe}"), sources


def resolve_recipe(model: PretrainingModelArguments, data: PretrainingDataArguments) -> ResolvedRecipe:
    """The recipe of --recipe with the flags that override it; checks that the combination can train."""
    recipe = get_recipe(data.recipe)
    resolved = ResolvedRecipe(
        masking=data.masking or recipe.masking,
        sbo=recipe.sbo if model.sbo is None else model.sbo,
        sentence_objective=model.sentence_objective or recipe.sentence_objective,
        input_format=data.input_format or recipe.input_format,
        static_masking=recipe.static_masking if data.static_masking is None else data.static_masking,
        # --embedding_size or --cross_layer_sharing ask for an ALBERT encoder under any recipe.
        encoder=(
            "albert"
            if model.embedding_size is not None or model.cross_layer_sharing is not None
            else recipe.encoder
        ),
        tokenizer=recipe.tokenizer,
        objective=recipe.objective,
    )
    check_recipe(resolved, model)
    return resolved


def fit_run_length(spec: RunSpecification, train_dataset: Dataset | None) -> RunSpecification:
    """`spec` with the warm-up, Adam's bias correction and the logging interval fitted to the run's length
    (`run_length.fit_to_run_length`, on the training arguments, before the Trainer builds its optimiser from them),
    and their sources. A setting the user gave is kept."""
    fitted = fit_to_run_length(spec.training, spec.given, train_dataset)
    fitted_sources = {name: FITTED for name in fitted if spec.source(name) != GIVEN}
    return dataclasses.replace(spec, sources=MappingProxyType({**spec.sources, **fitted_sources}))


def _keep_the_vocabulary_under_zero3(
    model: PretrainingModelArguments, given: Collection[str] | None
) -> tuple[PretrainingModelArguments, dict[str, str]]:
    """Under DeepSpeed ZeRO-3, a checkpoint's (or a config's) vocabulary is not padded: ZeRO-3 partitions the
    parameters as the model is built, and transformers' resize leaves a head's separate bias (RoBERTa's
    lm_head.bias) at its old size there (models/vocabulary.py). Only the padding's speed-up is given up: the losses
    are the same, and ids past the tokenizer's are still never predicted. Not where the user gave the flag, nor for
    arguments built in code (`given` None): the model then warns that it keeps the vocabulary. Returns the model
    arguments and the source of what it set."""
    from_config = model.model_name_or_path or model.config_name
    if not from_config or model.pad_vocab_to_multiple_of == 1 or given is None or "pad_vocab_to_multiple_of" in given:
        return model, {}
    if not is_deepspeed_zero3_enabled():
        return model, {}
    kept = {"pad_vocab_to_multiple_of": ZERO3_KEEPS_VOCABULARY}
    return dataclasses.replace(model, pad_vocab_to_multiple_of=1), kept


def _load_data_beside_the_gpu(
    training: PretrainingArguments, data: PretrainingDataArguments, given: Collection[str] | None
) -> dict[str, str]:
    """On CUDA, batches are loaded and collated in persistent DataLoader workers, so that collating overlaps the
    GPU's step instead of adding to it; the masks do not change (a pure function of seed, epoch and example
    index). Not in streaming mode, where the workers share out the stream: more of them would change which blocks
    each reader gets, and so the data of a run resumed under the old count. Returns the sources of what it set."""
    if training.device.type != "cuda" or data.streaming or "dataloader_num_workers" in (given or ()):
        return {}
    training.dataloader_num_workers = GPU_DATALOADER_WORKERS
    training.dataloader_persistent_workers = True
    return {"dataloader_num_workers": ON_CUDA}


def _copy_batches_without_waiting(training: PretrainingArguments, given: Collection[str] | None) -> dict[str, str]:
    """On CUDA, batches are collated into pinned host memory and accelerate copies them to the GPU with
    `non_blocking=True` (the Trainer's `accelerator_config`), so that a step's copies queue behind the previous
    step's kernels instead of waiting for them. The GPU reads a batch in stream order, after its copy, and each
    batch is a pinned buffer of its own that nothing writes again. Not where the user set either flag. Returns the
    sources of what it set."""
    if training.device.type != "cuda" or {"accelerator_config", "dataloader_pin_memory"} & set(given or ()):
        return {}
    training.dataloader_pin_memory = True
    training.accelerator_config.non_blocking = True
    return dict.fromkeys(("dataloader_pin_memory", "accelerator_config"), ON_CUDA)


def _setup_logging(training_args: PretrainingArguments) -> None:
    """Logs of every library at the process's log level (--log_level, --log_level_replica), with their time."""
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", datefmt="%H:%M:%S", level=logging.INFO
    )
    level = training_args.get_process_log_level()
    # The run's own log lines (pretraining/run.py's) at the process's level, as run_mlm sets its script's.
    logging.getLogger(f"{__package__}.run").setLevel(level)
    datasets.utils.logging.set_verbosity(level)
    transformers.utils.logging.set_verbosity(level)
