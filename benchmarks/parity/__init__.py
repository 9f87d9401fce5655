"""The fine-tuning parity benchmark (finetuning.py), the QA pipeline check (qa_pipeline.py) and the checkpoint they
start from (fetch_checkpoint.py); common.py holds what they share with the task benchmark and the GPU check."""
