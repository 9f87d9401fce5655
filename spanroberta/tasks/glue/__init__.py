"""GLUE for run_glue.py: `data` (readers and checks, features, presets, predictions from logits), `scoring` (GLUE's
official metrics) and `task` (the `FineTuningTask`)."""
