#!/usr/bin/env python
"""Fine-tune and evaluate on RACE, the 4-option reading-comprehension exams (middle and high school).

    python run_race.py --model_name_or_path CKPT --do_train --do_eval --output_dir out   # from the Hub (ehovy/race)
    python run_race.py ... --data_dir RACE        # the original layout: RACE/{train,dev,test}/{high,middle}/*.txt
    python run_race.py ... --validation_file dev.high.jsonl dev.middle.jsonl            # JSON lines, .gz too
    accelerate launch run_race.py ...                                                    # several GPUs

Defaults follow RoBERTa's RACE recipe (lr 1e-5, batch 16, 5 epochs; see spanroberta/tasks/race/data.py); the flags
you pass win. Accuracy (overall, middle, high; fractions: eval_accuracy, eval_accuracy_middle, eval_accuracy_high)
goes to OUTPUT_DIR/eval_results.json and each question's prediction to OUTPUT_DIR/eval_predictions.jsonl (predict_*
for --do_predict).
`python run_race.py --help` lists every flag; spanroberta/tasks/race/task.py declares the task.
"""

from spanroberta.tasks.race.task import RACE

# The dataclasses behind the flags; main(args) runs the flags given and returns the evaluation metrics.
ARGUMENT_CLASSES = RACE.argument_classes
main = RACE.main

if __name__ == "__main__":
    main()
