"""What every fine-tuning task shares: the life cycle (`task.py`: `FineTuningTask`, `Report`, `run_task`), its
arguments (`arguments.py`) and the model steps (`model_steps.py`). The tasks themselves are spanroberta.tasks'."""
