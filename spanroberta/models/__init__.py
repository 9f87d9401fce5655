"""Everything that ships with a checkpoint: configurations, the reference modelling files, the shared pretraining
heads and losses, and the efficient paths. `save_pretrained` copies a model's file next to its weights with every
file it imports relatively, so the modules here import only each other (relatively) and transformers, never the
rest of spanroberta: a checkpoint then loads with `trust_remote_code=True` where spanroberta is not installed."""
