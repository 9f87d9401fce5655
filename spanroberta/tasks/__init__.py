"""The fine-tuning tasks, one folder each: a task's reading, features, decoding (answers and labels from logits),
scoring (equal to its official scorer) and, in its `task.py`, its `FineTuningTask` with the `Report` of what its
evaluation writes. `registry.py` names them all, for the scripts' ablation driver and the benchmarks.

The package and each task folder import nothing on import, so that the question-answering pipeline reads its span
decoding from the question-answering folder without loading the fine-tuning stack."""
