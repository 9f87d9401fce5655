"""The task benchmark: one checkpoint fine-tuned on every task (scores.py), the tasks themselves in catalog.py,
their data, splits and floors in preparation.py."""
