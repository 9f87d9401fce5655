"""run_pretraining.py as the faults benchmark runs it: the same `main()`, with one line printed to stderr by the main
process as each evaluation starts (`EVALUATION_STARTS`), so that a kill can be aimed inside an evaluation, and one
by each process as it builds the model (`MODEL_LOADS`), so that a refusal can be seen to come before it. It imports
run_pretraining.py from the checkout, which tiny_runs.environment puts on PYTHONPATH.

    python benchmarks/reliability/marked_run.py <run_pretraining.py's flags>
"""

import os
import sys

EVALUATION_STARTS = "benchmarks.reliability: an evaluation starts"
MODEL_LOADS = "benchmarks.reliability: the model loads"


def main() -> None:
    import run_pretraining
    from spanroberta.pretraining import run
    from spanroberta.pretraining.trainer import PretrainingTrainer

    evaluate, build_trainer = PretrainingTrainer.evaluate, run._build_trainer

    def marked_evaluate(self, *args, **kwargs):
        if os.environ.get("RANK", "0") == "0":  # one line per evaluation, however many processes evaluate
            print(EVALUATION_STARTS, file=sys.stderr, flush=True)
        return evaluate(self, *args, **kwargs)

    def marked_build_trainer(*args, **kwargs):  # every process says so: each loads its own copy
        print(f"{MODEL_LOADS} in process {os.environ.get('RANK', '0')}", file=sys.stderr, flush=True)
        return build_trainer(*args, **kwargs)

    PretrainingTrainer.evaluate = marked_evaluate
    run._build_trainer = marked_build_trainer
    run_pretraining.main(sys.argv[1:])


if __name__ == "__main__":
    main()
