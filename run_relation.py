#!/usr/bin/env python
"""Fine-tune and evaluate relation classification on TACRED-style JSON (TACRED, SemEval-2010 Task 8, ...).

    python run_relation.py --model_name_or_path CKPT --train_file train.json --validation_file dev.json \\
        --do_train --do_eval --output_dir out                          # SpanBERT's [SUBJ-PERSON] markers
    python run_relation.py ... --entity_markers typed_entity_markers  # Zhou and Chen's @ * person * ... @
    python run_relation.py ... --scorer semeval                       # the official scorer (default: from the labels)
    python run_relation.py ... --test_file test.json --do_predict     # predict_predictions.jsonl
    accelerate launch run_relation.py ...                             # several GPUs

The official scores (TACRED's micro P/R/F1 without no_relation, or SemEval-2010 Task 8's macro F1 over its 9
relations, direction counted) go to OUTPUT_DIR/eval_results.json as eval_precision, eval_recall, eval_f1 and
eval_accuracy; each example's gold and predicted label to OUTPUT_DIR/eval_predictions.jsonl.
`python run_relation.py --help` lists every flag; docs/relation-extraction.md explains the encodings.
spanroberta/tasks/relation/task.py declares the task.
"""

from spanroberta.tasks.relation.task import RELATION

# The dataclasses behind the flags; main(args) runs the flags given and returns the evaluation metrics.
ARGUMENT_CLASSES = RELATION.argument_classes
main = RELATION.main

if __name__ == "__main__":
    main()
