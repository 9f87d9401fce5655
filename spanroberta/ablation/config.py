"""An ablation config: the pretraining flags every arm shares, each arm's differing flags, the fine-tuning tasks
and the seeds. YAML or JSON:

    pretraining: {train_file: corpus.txt, model_size: small, max_seq_length: 128, max_steps: 5000, ...}
    arms:
      span-sbo: {masking: span, sbo: true}
      token: {masking: token, sbo: false}
    tasks:
      squad: {script: run_squad.py, train_file: train.json, validation_file: dev.json, num_train_epochs: 2}
      rte: {script: run_glue.py, task_name: rte, data_dir: glue_data}
    seeds: [1, 2, 3]                  # fine-tuning seeds; or {finetuning: [1, 2, 3], pretraining: [42, 43]}
    token_budget: 100_000_000         # optional, instead of max_steps: tokens (blocks x length) each arm sees
    keep_finetuned_models: false      # optional: a scored fine-tuning's weights are deleted unless true
    finetune_starting_checkpoint: false   # optional, with continued pretraining: see below

Continued pretraining: `pretraining: {model_name_or_path: CHECKPOINT, train_file: corpus.txt, max_steps: N}` makes
every arm continue the same saved model (its weights and its tokenizer) on the same text for the same budget, as
SpanBERT's and RoBERTa's ablations compare arms trained alike; only the pretraining section may set it (an arm
that could start elsewhere would not be comparable). A path that holds no saved model (or a Hub id that cannot be
reached) is refused before the first unit runs. `finetune_starting_checkpoint: true` also fine-tunes that model
as it is, on every task with every seed, as the table's first row (`starting-checkpoint`): whether continuing helps
or harms each arm shows beside it. `eval_masking` in the pretraining section (a flag of run_pretraining.py) masks
every arm's held-out blocks with one scheme: with the shared seed and data, every arm then predicts the same masked
tokens, and their eval MLM accuracies compare them whatever masking each trained with.

A task's `script` is one of the fine-tuning scripts of spanroberta.tasks (run_squad.py, run_glue.py,
run_race.py, run_relation.py, run_coref.py): it names the fine-tuning task the package declares for that script
(spanroberta.tasks.registry), which the ablation runs itself, so that an installed package runs ablations without
the scripts. Besides its script's flags, a task may give `metric` (the score its column shows) and, for run_squad.py,
`split_by_article: {file: SQUAD_JSON, train_articles: N}` (train on the first N articles, evaluate on the rest).
Every flag is checked against the argument classes of the script that reads it, so a config cannot set a flag that no
script has. Each problem is one paragraph (`AblationConfigError`, a UserInputError).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import HfArgumentParser

from ..config_files import read_config_file
from ..errors import UserInputError
from ..tasks.registry import TASKS_BY_SCRIPT, task_of_script
from ..pretraining.command import ARGUMENT_CLASSES as PRETRAINING_ARGUMENTS
from ..pretraining.command import pretrain
from ..runs.cli import typed_flag_values
from ..runs.validation import check_model_sources
from .reports import TaskSpec, known_metric, metric_names

PRETRAINING_SCRIPT = "run_pretraining.py"
TOP_LEVEL_KEYS = ("pretraining", "arms", "tasks", "seeds", "token_budget", "keep_finetuned_models",
                  "finetune_starting_checkpoint")
# The table's row of the starting checkpoint fine-tuned as it is (finetune_starting_checkpoint), and its folder.
STARTING_CHECKPOINT = "starting-checkpoint"
# Each unit's folder and how it starts (afresh, resumed, overwritten) come from the runner.
RUNNER_FLAGS = ("output_dir", "overwrite_output_dir", "resume_from_checkpoint")
# Each fine-tuning starts from its arm's model with one of the `seeds`, and trains and evaluates.
FINETUNING_RUNNER_FLAGS = ("model_name_or_path", "seed", "do_train", "do_eval")
# What makes the arms comparable: the same data (read with the same tokenizer), the same budget of steps x batch x
# length, and, for continued pretraining, the same starting model (SpanBERT section 5 and RoBERTa section 4 compare
# arms trained alike on the same corpus). Only `pretraining` sets these.
SHARED_PRETRAINING_FLAGS = (
    "train_file", "validation_file", "dataset_name", "dataset_config_name", "text_column_name",
    "validation_split_percentage", "prepared_data_dir", "streaming", "max_train_samples", "max_eval_samples",
    "max_seq_length", "max_steps", "num_train_epochs", "per_device_train_batch_size", "gradient_accumulation_steps",
    "seed", "model_name_or_path", "tokenizer_name", "eval_masking",
)  # fmt: skip
# Arm and task names become folder names.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class AblationConfigError(UserInputError):
    """A bad ablation config; the message names the file, the section and the key."""


@dataclass(frozen=True)
class AblationConfig:
    path: str
    pretraining: dict[str, Any]
    arms: dict[str, dict[str, Any]]
    tasks: dict[str, TaskSpec]
    seeds: tuple[int, ...]
    # None: each arm is pretrained once, with the pretraining section's seed.
    pretraining_seeds: tuple[int, ...] | None = None
    token_budget: int | None = None
    # Fine-tuned weights take the most disk and are not needed for the table: deleted unless this is true.
    keep_finetuned_models: bool = False
    # Fine-tune pretraining.model_name_or_path itself beside the arms, as the row STARTING_CHECKPOINT.
    finetune_starting_checkpoint: bool = False

    @property
    def table_arms(self) -> list[str]:
        """The table's rows: the starting checkpoint (when fine-tuned as it is) first, then the arms."""
        return [STARTING_CHECKPOINT] * self.finetune_starting_checkpoint + list(self.arms)


def load_config(path: str | Path) -> AblationConfig:
    """Reads and checks an ablation config (flag names against the scripts' argument classes)."""
    raw = _read_mapping(Path(path))
    where = str(path)
    _refuse_unknown(where, "the top level", raw, TOP_LEVEL_KEYS)
    for key in ("pretraining", "arms", "tasks", "seeds"):
        if key not in raw:
            raise AblationConfigError(f"{where} has no `{key}` section; an ablation config needs "
                                      f"{', '.join(TOP_LEVEL_KEYS[:4])} (see configs/ablations/).")
    seeds, pretraining_seeds = _seeds(where, raw["seeds"])
    config = AblationConfig(
        path=where,
        pretraining=_flags(where, "pretraining", raw["pretraining"]),
        arms=_arms(where, raw["arms"]),
        tasks=_tasks(where, raw["tasks"]),
        seeds=seeds,
        pretraining_seeds=pretraining_seeds,
        token_budget=_positive_int(where, "token_budget", raw.get("token_budget")),
        keep_finetuned_models=raw.get("keep_finetuned_models", False),
        finetune_starting_checkpoint=raw.get("finetune_starting_checkpoint", False),
    )
    for key in ("keep_finetuned_models", "finetune_starting_checkpoint"):
        if not isinstance(getattr(config, key), bool):
            raise AblationConfigError(f"{where}: `{key}` must be true or false.")
    if config.finetune_starting_checkpoint:
        _check_starting_checkpoint(config)
    _check_pretraining_flags(config)
    for task in config.tasks.values():
        _check_task_flags(where, task)
    return config


def script_arguments(script: str) -> tuple[type, ...]:
    """The argument dataclasses of `script`: run_pretraining.py's, or those of the fine-tuning task it runs."""
    return PRETRAINING_ARGUMENTS if script == PRETRAINING_SCRIPT else task_of_script(script).argument_classes


def script_command(script: str) -> Callable[[list[str]], Any]:
    """What `python script ARGS` runs, as a function of ARGS: pretraining, or the fine-tuning task's life cycle."""
    if script == PRETRAINING_SCRIPT:
        return pretrain
    return task_of_script(script).main


def script_flags(script: str) -> set[str]:
    return {spec.name for cls in script_arguments(script) for spec in dataclasses.fields(cls) if spec.init}


def check_values(config: AblationConfig, extra: dict[str, Any] | None = None) -> None:
    """Parses every arm's and every task's flags as their script will (types, choices, ranges, and the
    objective an arm resolves to), so that a bad value fails before the first unit runs. `extra` flags are added
    to every unit (e.g. use_cpu, to check a GPU config on a CPU machine)."""
    from ..pretraining.specification import resolve_recipe

    extra = extra or {}
    placeholder = {"output_dir": str(Path(config.path).parent / "ablation-check")}
    for arm, flags in config.arms.items():
        with _blamed(config.path, f"arm {arm!r}"):
            model_args, data_args, _ = parse_pretraining({**config.pretraining, **flags, **placeholder, **extra})
            # The model every arm continues (and its tokenizer) must be there before the first unit runs.
            check_model_sources(model_args)
            resolve_recipe(model_args, data_args)
    for task in config.tasks.values():
        values = {**task.flags, **placeholder, "model_name_or_path": "arm", "do_train": True, "do_eval": True, **extra}
        with _blamed(config.path, f"task {task.name!r}"):
            parser = HfArgumentParser(script_arguments(task.script))
            parser.parse_dict(typed_flag_values(parser, values))


def parse_pretraining(values: dict[str, Any]) -> tuple[Any, Any, Any]:
    """run_pretraining.py's arguments for these flags, with the recipe's (and the demo's) defaults filled in as the
    script fills them: the block length, batch and steps a unit will really use."""
    from ..pretraining.specification import fill_defaults

    parser = HfArgumentParser(script_arguments(PRETRAINING_SCRIPT))
    arguments = parser.parse_dict(typed_flag_values(parser, values))
    return fill_defaults(arguments, set(values))[0]


@contextlib.contextmanager
def _blamed(path: str, what: str) -> Iterator[None]:
    """Re-raises a script's ValueError (UserInputError included) as an AblationConfigError naming the arm or task."""
    try:
        yield
    except AblationConfigError:
        raise
    except ValueError as error:
        raise AblationConfigError(f"{path}, {what}: {' '.join(str(error).split())}") from None


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        return read_config_file(path, kind="Ablation config")
    except UserInputError as error:
        raise AblationConfigError(str(error)) from None


def _refuse_unknown(where: str, section: str, values: dict, known) -> None:
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise AblationConfigError(f"{where}: {section} has unknown keys: {', '.join(unknown)}. Known keys: "
                                  f"{', '.join(sorted(known))}.")


def _flags(where: str, section: str, values: Any) -> dict[str, Any]:
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise AblationConfigError(f"{where}: {section} must be a mapping of flag names (without dashes) to values.")
    return dict(values)


def _arms(where: str, values: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(values, dict) or not values:
        raise AblationConfigError(f"{where}: `arms` must map each arm's name to the flags that make it differ "
                                  "(an empty mapping for an arm that keeps the pretraining section's settings).")
    for name in values:
        _check_name(where, "arm", name)
    return {name: _flags(where, f"arm {name!r}", flags) for name, flags in values.items()}


def _tasks(where: str, values: Any) -> dict[str, TaskSpec]:
    if not isinstance(values, dict) or not values:
        raise AblationConfigError(f"{where}: `tasks` must map each task's name to its script and flags.")
    tasks = {}
    for name, entry in values.items():
        _check_name(where, "task", name)
        entry = _flags(where, f"task {name!r}", entry)
        script = entry.pop("script", None)
        if script not in TASKS_BY_SCRIPT:
            raise AblationConfigError(f"{where}: task {name!r} has script {script!r}; each task needs `script`, one "
                                      f"of {', '.join(TASKS_BY_SCRIPT)}.")
        tasks[name] = TaskSpec(name, script, entry, metric=entry.pop("metric", None),
                               split_by_article=entry.pop("split_by_article", None))  # fmt: skip
    return tasks


def _check_name(where: str, kind: str, name: Any) -> None:
    if not isinstance(name, str) or not NAME.match(name):
        raise AblationConfigError(f"{where}: {kind} name {name!r} is not a usable folder name: use letters, "
                                  "digits, '.', '_' and '-', starting with a letter or digit.")


def _seeds(where: str, values: Any) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    if isinstance(values, dict):
        _refuse_unknown(where, "`seeds`", values, ("finetuning", "pretraining"))
        pretraining = values.get("pretraining")
        return _seed_list(where, "seeds.finetuning", values.get("finetuning")), (
            None if pretraining is None else _seed_list(where, "seeds.pretraining", pretraining))
    return _seed_list(where, "seeds", values), None


def _seed_list(where: str, key: str, values: Any) -> tuple[int, ...]:
    if (not isinstance(values, list) or not values or len(set(values)) != len(values)
            or not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in values)):  # fmt: skip
        raise AblationConfigError(f"{where}: `{key}` must be a list of distinct integer seeds, e.g. [1, 2, 3].")
    return tuple(values)


def _positive_int(where: str, key: str, value: Any) -> int | None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise AblationConfigError(f"{where}: `{key}` must be a positive integer, not {value!r}.")
    return value


def _check_pretraining_flags(config: AblationConfig) -> None:
    known = script_flags(PRETRAINING_SCRIPT)
    _refuse(config.path, "pretraining", config.pretraining, known, PRETRAINING_SCRIPT, RUNNER_FLAGS)
    for arm, flags in config.arms.items():
        _refuse(config.path, f"arm {arm!r}", flags, known, PRETRAINING_SCRIPT, RUNNER_FLAGS + SHARED_PRETRAINING_FLAGS)
    if config.pretraining_seeds is not None and "seed" in config.pretraining:
        raise AblationConfigError(f"{config.path}: `seeds.pretraining` gives the pretraining seeds; remove `seed` "
                                  "from the pretraining section.")
    if config.token_budget is not None and {"max_steps", "num_train_epochs"} & set(config.pretraining):
        raise AblationConfigError(f"{config.path}: `token_budget` sets the pretraining steps; remove max_steps and "
                                  "num_train_epochs from the pretraining section, or the token budget.")


def _check_starting_checkpoint(config: AblationConfig) -> None:
    if "model_name_or_path" not in config.pretraining:
        raise AblationConfigError(
            f"{config.path}: `finetune_starting_checkpoint: true` fine-tunes the model every arm continues, and the "
            "pretraining section names none: give it `model_name_or_path` (a saved model), or remove the key."
        )
    if STARTING_CHECKPOINT in config.arms:
        raise AblationConfigError(
            f"{config.path}: an arm is named {STARTING_CHECKPOINT!r}, the row of the starting checkpoint fine-tuned "
            "as it is (finetune_starting_checkpoint): rename the arm."
        )


def _check_task_flags(where: str, task: TaskSpec) -> None:
    _refuse(where, f"task {task.name!r}", task.flags, script_flags(task.script), task.script,
            RUNNER_FLAGS + FINETUNING_RUNNER_FLAGS)  # fmt: skip
    if task.split_by_article is not None:
        split = task.split_by_article
        taken = {"train_file", "validation_file", "dataset_name"} & set(task.flags)
        if (task.script != "run_squad.py" or not isinstance(split, dict) or set(split) != {"file", "train_articles"}
                or not isinstance(split["train_articles"], int) or split["train_articles"] < 1 or taken):  # fmt: skip
            raise AblationConfigError(
                f"{where}: task {task.name!r}: `split_by_article` is for run_squad.py tasks without train_file, "
                "validation_file or dataset_name, and is {file: SQUAD_JSON, train_articles: N}: the first N articles "
                "of the file train, the rest evaluate."
            )
    if task.metric is not None and not known_metric(task, task.metric):
        names = metric_names(task)
        raise AblationConfigError(f"{where}: task {task.name!r} has metric {task.metric!r}; {task.script} reports "
                                  f"{', '.join(names)} for it.")


def _refuse(where: str, section: str, flags: dict, known: set[str], script: str, owned: tuple[str, ...]) -> None:
    unknown = sorted(set(flags) - known)
    if unknown:
        hints = [f"--{name}" + (f" (did you mean --{close[0]}?)" if (close := _close_to(name, known)) else "")
                 for name in unknown]  # fmt: skip
        raise AblationConfigError(f"{where}: {section} sets {', '.join(hints)}, which {script} does not have "
                                  f"(`python {script} --help` lists its flags).")
    taken = sorted(set(flags) & set(owned))
    if taken:
        raise AblationConfigError(
            f"{where}: {section} sets {', '.join(taken)}, which the ablation sets itself: each unit's output folder, "
            "start and model come from --output_dir, and every arm shares the pretraining section's data and budget "
            "(same corpus, steps, batch, length, seed) so that the arms are comparable. Remove it from that section."
        )


def _close_to(name: str, known: set[str]) -> list[str]:
    return difflib.get_close_matches(name, known, 1, cutoff=0.75)
