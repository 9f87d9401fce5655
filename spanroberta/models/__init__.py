"""Everything that ships with a checkpoint: the configurations, one modelling file a model (its encoder, heads and
losses, the efficient paths beside the reference), and the two modules the pretraining models share, the span heads
(`modeling_span_heads.py`) and the packed attention (`packed_attention.py`). `save_pretrained` copies a model's file
next to its weights with every file it imports relatively, so the modules here import only each other (relatively)
and transformers, never the rest of spanroberta: a checkpoint then loads with `trust_remote_code=True` where
spanroberta is not installed."""
