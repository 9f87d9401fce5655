"""RACE for run_race.py: `data` (readers and checks, the four options' features, RoBERTa's recipe, predictions and
accuracy by level) and `task` (the `FineTuningTask`)."""
