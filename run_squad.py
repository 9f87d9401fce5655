#!/usr/bin/env python
"""Fine-tune and evaluate an extractive QA model on SQuAD v1.1 or v2.0, or on MRQA 2019's datasets, with the
Trainer.

Works from any checkpoint with a question-answering head: spanroberta's own pretraining checkpoints,
stock RoBERTa, BERT. The flags follow transformers' examples/pytorch/question-answering/run_qa.py.

    python run_squad.py --model_name_or_path <checkpoint> --output_dir out \\
        --train_file train-v1.1.json --validation_file dev-v1.1.json --do_train --do_eval

MRQA 2019's files (JSON lines, gzipped or not, told from SQuAD's by their content) go to the same flags, several
comma-separated: training reads their union, and each evaluation file is scored on its own with MRQA's metric
(eval_results.json: eval_{dataset}_em and eval_{dataset}_f1 per file, eval_macro_em and eval_macro_f1 their
averages); see docs/mrqa.md.

Writes, into --output_dir: the fine-tuned checkpoint (with the question-answering pipeline's code, which
transformers 5 no longer ships, so that `pipeline("question-answering", model=out, trust_remote_code=True)` works
without spanroberta; a stock BERT or RoBERTa model itself loads without remote code),
predictions.json, nbest_predictions.json, null_odds.json (v2.0) and eval_results.json with the official
evaluation scripts' keys after `eval_` (eval_exact_match, eval_f1: percentages, as those scripts and transformers'
run_qa.py give them); for v2.0 also null_score_threshold.json, the no-answer threshold that maximised F1, which
later eval-only runs of that checkpoint use unless --null_score_diff_threshold is given.

spanroberta/tasks/squad/task.py declares the task.
"""

from spanroberta.tasks.squad.task import SQUAD

# The dataclasses behind the flags; main(args) runs the flags given and returns the evaluation metrics.
ARGUMENT_CLASSES = SQUAD.argument_classes
main = SQUAD.main

if __name__ == "__main__":
    main()
