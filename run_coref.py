#!/usr/bin/env python
"""Fine-tune and evaluate end-to-end coreference (Joshi et al. 2019's independent variant of Lee et al. 2018's
coarse-to-fine model, as SpanBERT section 4.2 runs it) on CoNLL-2012 files (OntoNotes, LitBank) or e2e-coref's JSON
lines, from any encoder checkpoint (spanroberta, RoBERTa, BERT, ...) or a saved coreference model.

    python run_coref.py --model_name_or_path CKPT --train_file train.english.v4_gold_conll \
        --validation_file dev.english.v4_gold_conll --do_train --do_eval --output_dir out
    python run_coref.py ... --train_file litbank/ --train_documents :80 --validation_file litbank/ \
        --eval_documents 80: --keep_singletons         # LitBank: one folder split by document, singletons scored
    python run_coref.py ... --max_train_samples 10 --max_eval_samples 5   # the first 10 and 5 documents
    python run_coref.py --model_name_or_path out --gap_file gap-development.tsv --output_dir gap_out
    accelerate launch run_coref.py ...                 # several GPUs

Each document is one batch, 20 epochs. --preset picks Joshi et al.'s released settings: spanbert_base (the default:
384-subword segments, 3 per training document, encoder lr 2e-5, task lr 1e-4) or bert_base (128 x 11, 1e-5 / 2e-4);
flags given override it; see docs/coreference.md. The CoNLL metrics go
to OUTPUT_DIR/eval_results.json (eval_muc_*, eval_b_cubed_*, eval_ceaf_phi4_*, eval_conll_f1), the predicted
clusters to OUTPUT_DIR/eval_predictions.conll (or .jsonlines, the input's layout), GAP's scores to
OUTPUT_DIR/gap_results.json and its decisions to OUTPUT_DIR/gap_predictions.tsv (the official scorer's input).
`python run_coref.py --help` lists every flag; spanroberta/tasks/coreference/task.py declares the task.
"""

from spanroberta.tasks.coreference.task import COREFERENCE

# The dataclasses behind the flags; main(args) runs the flags given and returns the evaluation metrics.
ARGUMENT_CLASSES = COREFERENCE.argument_classes
main = COREFERENCE.main

if __name__ == "__main__":
    main()
