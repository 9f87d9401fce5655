#!/usr/bin/env python
"""Pretrain an encoder with the SpanBERT objectives on the RoBERTa recipe.

    python run_pretraining.py                                   # the demo: a tiny model on the bundled corpus
    python run_pretraining.py --train_file corpus.txt --output_dir out --model_size base --recipe spanbert
    python run_pretraining.py config.yaml                       # the same flags from a JSON or YAML file
    accelerate launch run_pretraining.py --train_file ... ...   # several GPUs or nodes

`python run_pretraining.py --help` lists every flag.
"""

import sys

from spanroberta.training.arguments import PretrainingArguments, PretrainingDataArguments, PretrainingModelArguments
from spanroberta.training.cli import parse_arguments
from spanroberta.training.pretraining import apply_demo_settings, run_pretraining


def main(args: list[str] | None = None) -> None:
    try:
        (model_args, data_args, training_args), given = parse_arguments(
            (PretrainingModelArguments, PretrainingDataArguments, PretrainingArguments), args
        )
        model_args, data_args, training_args = apply_demo_settings(model_args, data_args, training_args, given)
    except (ValueError, FileNotFoundError) as error:
        sys.exit(f"run_pretraining.py: error: {error}")
    trainer = run_pretraining(model_args, data_args, training_args)
    if trainer.is_world_process_zero():
        output_dir = training_args.output_dir
        print(
            f"\nThe pretrained model, its tokenizer and a model card are in {output_dir}/. Use it with:\n"
            f"    import spanroberta\n"
            f"    from transformers import AutoModelForMaskedLM, AutoModelForQuestionAnswering, pipeline\n"
            f"    fill = pipeline('fill-mask', model='{output_dir}')\n"
            f"    qa_model = AutoModelForQuestionAnswering.from_pretrained('{output_dir}')  # then fine-tune\n"
            f"Fine-tune it: python run_squad.py --model_name_or_path {output_dir} ...; "
            f"python run_glue.py --model_name_or_path {output_dir} ..."
        )


if __name__ == "__main__":
    main()
