"""The prepared check of a single-GPU machine (check.py, running plan.py's stages), the one archive a call of it
hands back (archive.py) and the bundle that takes it offline (offline/)."""
