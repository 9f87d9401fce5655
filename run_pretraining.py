#!/usr/bin/env python
"""Pretrain an encoder with the SpanBERT objectives on the RoBERTa recipe.

    python run_pretraining.py                                   # the demo: a tiny model on the bundled corpus
    python run_pretraining.py --train_file corpus.txt --output_dir out --model_size base --recipe spanbert
    python run_pretraining.py config.yaml                       # the same flags from a JSON or YAML file
    accelerate launch --config_file configs/accelerate/multi_gpu.yaml run_pretraining.py ...   # 8 GPUs
    python run_pretraining.py ... --resume_from_checkpoint true # continue a run that was killed

`python run_pretraining.py --help` lists every flag; docs/distributed.md has the multi-GPU, multi-node, DeepSpeed,
streaming and prepared-data commands.

Bad input (a missing, empty or non-UTF-8 file, an unknown setting, a tokenizer without a mask token, blocks longer
than the model's positions, ...) and a diverging loss end the run with a one-paragraph message and exit status 1;
any other error is a bug and keeps its traceback.
"""

import datasets

from spanroberta.training.arguments import PretrainingArguments, PretrainingDataArguments, PretrainingModelArguments
from spanroberta.training.cli import parse_arguments
from spanroberta.training.distributed import finish_processes
from spanroberta.training.pretraining import apply_demo_settings, run_pretraining
from spanroberta.training.trainer import TrainingDivergedError
from spanroberta.training.validation import check_run, user_errors


# The dataclasses behind the flags (run_ablation.py checks its configs against them).
ARGUMENT_CLASSES = (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments)


def main(args: list[str] | None = None) -> None:
    # Flags and config files: cli.py and TrainingArguments report their problems as ValueError/FileNotFoundError.
    with user_errors("run_pretraining.py", also=(ValueError, FileNotFoundError)):
        (model_args, data_args, training_args), given = parse_arguments(ARGUMENT_CLASSES, args)
        # The recipe's (and the demo's) defaults for the flags not given; `chosen` records which they set.
        chosen: dict[str, str] = {}
        model_args, data_args, training_args = apply_demo_settings(model_args, data_args, training_args, given, chosen)
        # Every path and setting that can be checked without the data is checked before it is read.
        check_run(model_args, training_args, trains=not data_args.prepare_only)
    if data_args.overwrite_cache:
        # Not reusing cache files is what makes `datasets` recompute the tokenizing and packing.
        datasets.disable_caching()
    with user_errors("run_pretraining.py", also=(TrainingDivergedError,)):
        trainer = run_pretraining(model_args, data_args, training_args, given, chosen)
    finish_processes()
    if trainer is None:
        print(f"\nThe prepared data is in {data_args.prepared_data_dir}/. Train on it with the same command "
              "without --prepare_only.")
        return
    if trainer.is_world_process_zero():
        output_dir = training_args.output_dir
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


if __name__ == "__main__":
    main()
