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

from spanroberta.pretraining.command import ARGUMENT_CLASSES, pretrain

__all__ = ["ARGUMENT_CLASSES", "main"]


def main(args: list[str] | None = None) -> None:
    """Runs what the flags (or one JSON/YAML file of them) ask for."""
    pretrain(args)


if __name__ == "__main__":
    main()
