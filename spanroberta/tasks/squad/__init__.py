"""SQuAD v1.1 and v2.0, and MRQA 2019's extractive QA files, for run_squad.py: `reading` (files and Hub datasets
into checked `datasets.Dataset`s), `features` (questions cut into overlapping windows), `span_decoding` (the windows
and the best spans from their logits, shared with the question-answering pipeline), `postprocessing` (the windows'
scores back into answers, the official prediction files and scores, the v2.0 threshold kept with a checkpoint),
`scoring` (the official evaluation scripts) and `task` (the `FineTuningTask`)."""
