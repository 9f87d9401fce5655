"""The prepared check of a single-GPU machine (check.py) and the bundle that takes it offline (offline/)."""
