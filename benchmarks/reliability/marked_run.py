"""run_pretraining.py as the faults benchmark runs it: the same `main()`, with one line printed to stderr by the main
process as each evaluation starts (`EVALUATION_STARTS`), so that a kill can be aimed inside an evaluation. It imports
run_pretraining.py from the checkout, which tiny_runs.environment puts on PYTHONPATH.

    python benchmarks/reliability/marked_run.py <run_pretraining.py's flags>
"""

import os
import sys

EVALUATION_STARTS = "benchmarks.reliability: an evaluation starts"


def main() -> None:
    import run_pretraining
    from spanroberta.pretraining.trainer import PretrainingTrainer

    evaluate = PretrainingTrainer.evaluate

    def marked_evaluate(self, *args, **kwargs):
        if os.environ.get("RANK", "0") == "0":  # one line per evaluation, however many processes evaluate
            print(EVALUATION_STARTS, file=sys.stderr, flush=True)
        return evaluate(self, *args, **kwargs)

    PretrainingTrainer.evaluate = marked_evaluate
    run_pretraining.main(sys.argv[1:])


if __name__ == "__main__":
    main()
