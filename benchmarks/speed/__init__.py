"""Throughput benchmarks of pretraining and of data preparation; common.py holds what they share."""
