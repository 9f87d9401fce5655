#!/usr/bin/env python
"""Fine-tune and evaluate on a GLUE task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI).

    python run_glue.py --model_name_or_path CKPT --task_name rte --do_train --do_eval --output_dir out
    python run_glue.py ... --task_preset roberta                # RoBERTa's per-task recipe; your flags win
    python run_glue.py ... --data_dir glue_data                 # the original GLUE files instead of the Hub
    python run_glue.py ... --train_file train.csv --validation_file dev.jsonl
    python run_glue.py ... --do_predict                         # writes the leaderboard's TASK.tsv
    accelerate launch run_glue.py ...                           # several GPUs

The metrics (GLUE's official ones, computed offline; fractions) go to OUTPUT_DIR/eval_results.json as eval_accuracy,
eval_f1, ... (MNLI's mismatched dev set with the _mm suffix), each dev example's gold label and prediction to
OUTPUT_DIR/eval_predictions.jsonl (eval_predictions_mm.jsonl).
`python run_glue.py --help` lists every flag; spanroberta/tasks/glue/task.py declares the task.
"""

from spanroberta.tasks.glue.task import GLUE

# The dataclasses behind the flags; main(args) runs the flags given and returns the evaluation metrics.
ARGUMENT_CLASSES = GLUE.argument_classes
main = GLUE.main

if __name__ == "__main__":
    main()
