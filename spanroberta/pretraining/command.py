"""run_pretraining.py's command line: the flags (or one JSON/YAML file of them) checked, the pretraining run
(spanroberta.pretraining.run), and where the model went. The ablation driver runs its pretraining units
through it too."""

from __future__ import annotations

import datasets

from .arguments import PretrainingArguments, PretrainingDataArguments, PretrainingModelArguments
from ..runs.cli import parse_arguments
from ..runs.distributed import finish_processes
from ..runs.checkpoints import previous_run_files
from ..runs.output_folder import check_output_folder_owner
from ..runs.preemption import signals_noted
from .run import SCRIPT, run_pretraining
from .specification import specify_run
from .trainer import PretrainingTrainer, TrainingDivergedError
from ..runs.validation import user_errors

# The dataclasses behind run_pretraining.py's flags.
ARGUMENT_CLASSES = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)


def pretrain(args: list[str] | None = None) -> None:
    """Runs what the flags ask for, then says where the model is and how to use it. Bad input (a missing, empty or
    non-UTF-8 file, an unknown setting, ...) and a diverging loss end the run with a one-paragraph message and exit
    status 1."""
    # A preemption signal outside training is noted, not fatal (runs.preemption).
    with signals_noted(SCRIPT):
        # Flags and config files: cli.py and TrainingArguments report their problems as ValueError/FileNotFoundError.
        with user_errors(SCRIPT, also=(ValueError, FileNotFoundError)):
            flags, given = parse_arguments(ARGUMENT_CLASSES, args)
            # Every setting resolved, with where it came from; and checked, before any data is read.
            spec = specify_run(flags, given)
            training_args, data_args = spec.training, spec.data
            if not data_args.prepare_only:
                check_output_folder_owner(training_args.output_dir, SCRIPT, training_args.overwrite_output_dir,
                                          previous_run_files)  # fmt: skip
        if data_args.overwrite_cache:
            # Not reusing cache files is what makes `datasets` recompute the tokenizing and packing.
            datasets.disable_caching()
        with user_errors(SCRIPT, also=(TrainingDivergedError,)):
            trainer = run_pretraining(spec)
        finish_processes()
        if trainer is None:
            print(f"\nThe prepared data is in {data_args.prepared_data_dir}/. Train on it with the same command "
                  "without --prepare_only.")
        elif trainer.is_world_process_zero():
            _print_usage(trainer, training_args.output_dir)


def _print_usage(trainer: PretrainingTrainer, output_dir: str) -> None:
    # ELECTRA keeps the discriminator at the root and its generator, the masked LM, in a subfolder.
    masked_lm = trainer.objective.masked_lm_folder(output_dir)
    # A stock architecture (a continued BERT stays a BertForMaskedLM) loads with transformers alone.
    register = trainer.objective.needs_spanroberta(trainer.model.config)
    print(
        f"\nThe pretrained model, its tokenizer and a model card are in {output_dir}/. Use it with:\n"
        + ("    import spanroberta  # registers its model types with the Auto classes\n" if register else "")
        + "    from transformers import AutoModelForMaskedLM, AutoModelForQuestionAnswering, pipeline\n"
        f"    fill = pipeline('fill-mask', model='{masked_lm}')\n"
        f"    qa_model = AutoModelForQuestionAnswering.from_pretrained('{output_dir}')  # then fine-tune\n"
        f"Fine-tune it: python run_squad.py --model_name_or_path {output_dir} ...; "
        f"python run_glue.py --model_name_or_path {output_dir} ..."
    )
