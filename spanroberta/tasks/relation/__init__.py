"""Relation extraction (TACRED, SemEval-2010 Task 8) for run_relation.py: `data` (readers and checks, entity-marker
features, predictions from logits), `scoring` (the official scorers) and `task` (the `FineTuningTask`)."""
