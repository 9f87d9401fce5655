"""Coreference (CoNLL-2012, LitBank, e2e-coref's JSON lines) with GAP for run_coref.py: `documents` (reading and
writing documents), `data` (features, the document collator, clusters from the model's output), `gap` (GAP's files),
`scoring` (the CoNLL scorer's metrics), `gap_scoring` (GAP's), `trainer` (the trainer, its presets and prediction)
and `task` (the `FineTuningTask`)."""
