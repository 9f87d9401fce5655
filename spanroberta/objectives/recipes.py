"""The pretraining recipes, as data (the model sizes they build are `models.sizes`').

A recipe fixes the objective, the data format, the encoder and the tokenizer of one of the papers; each of its
fields can be overridden from the command line (`--masking word`, `--input_format full-sentences`, `--sbo false`,
`--cross_layer_sharing none`, `--tokenizer_name ...`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Recipe:
    masking: str
    sbo: bool
    sentence_objective: str
    input_format: str
    static_masking: bool
    description: str
    # The encoder built from scratch: "roberta" (SpanRobertaForPreTraining) or "albert" (SpanAlbertForPreTraining,
    # factorised embeddings and cross-layer sharing; --embedding_size or --cross_layer_sharing also choose it).
    encoder: str = "roberta"
    # The tokenizer trained on the corpus when none is given: see TOKENIZERS.
    tokenizer: str = "byte-level-bpe"
    # Other flags the recipe sets unless given, as (flag name, value) pairs.
    flag_defaults: tuple[tuple[str, object], ...] = ()
    # The objective that trains the encoder, by its module in spanroberta/objectives/: "masked_lm" (the encoder
    # predicts the masked tokens) or "replaced_token_detection" (ELECTRA: a generator fills the masked slots, the
    # discriminator finds them).
    objective: str = "masked_lm"
    # Of the masked tokens: the share replaced by the mask token, and by a random token (the rest stay unchanged).
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1


RECIPES: dict[str, Recipe] = {
    # SpanBERT section 3: span masking + SBO, single-sequence training without NSP (section 3.3).
    "spanbert": Recipe(
        masking="span",
        sbo=True,
        sentence_objective="none",
        input_format="doc-sentences",
        static_masking=False,
        description="span masking + span boundary objective, no NSP, doc-sentences (SpanBERT)",
    ),
    # RoBERTa section 4: dynamic token masking (4.1), full-sentences without NSP (4.2).
    "roberta": Recipe(
        masking="token",
        sbo=False,
        sentence_objective="none",
        input_format="full-sentences",
        static_masking=False,
        description="dynamic token masking, full-sentences, no NSP, no SBO (RoBERTa)",
    ),
    # BERT as RoBERTa re-implements it (RoBERTa sections 4.1-4.2): static masking, segment pairs with NSP.
    "bert": Recipe(
        masking="token",
        sbo=False,
        sentence_objective="nsp",
        input_format="segment-pair",
        static_masking=True,
        description="static token masking (10 duplicates), segment-pair + NSP (BERT)",
    ),
    # ALBERT (Lan et al. 2019), base: factorised embeddings E = 128 and every layer shared (section 3.1, the
    # SpanAlbertConfig defaults), sentence-order prediction on segment pairs (3.1), n-gram masking (4.1), blocks of
    # 512 and a 30,000-id SentencePiece vocabulary (4.1). Optimiser: transformers offers no LAMB, so the
    # RoBERTa AdamW defaults stay (README).
    "albert": Recipe(
        masking="ngram",
        sbo=False,
        sentence_objective="sop",
        input_format="segment-pair",
        static_masking=False,
        description="n-gram masking, segment-pair + SOP, ALBERT encoder (E = 128, all layers shared) (ALBERT)",
        encoder="albert",
        tokenizer="unigram",
        flag_defaults=(("tokenizer_vocab_size", 30000), ("max_seq_length", 512)),
    ),
    # ELECTRA (Clark et al. 2020) sections 3.1-3.2 and appendix A: token masking at 15%, masked tokens 85% [MASK]
    # and 15% unchanged (no random tokens: the generator provides them), no NSP.
    "electra": Recipe(
        masking="token",
        sbo=False,
        sentence_objective="none",
        input_format="full-sentences",
        static_masking=False,
        description="replaced token detection: generator MLM + 50 x discriminator loss (ELECTRA)",
        objective="replaced_token_detection",
        mask_replace_prob=0.85,
        random_replace_prob=0.0,
        # ELECTRA's optimiser (appendix Table 6): Adam without bias correction (BERT's and ELECTRA's
        # AdamWeightDecayOptimizer), beta2 0.999, epsilon 1e-6, weight decay 0.01, 10,000 warm-up steps (1% of
        # its 1M), linear decay, gradient clipping at 1 (the Trainer's default). A run of under 10,000 steps warms
        # up over a tenth of them, and then corrects Adam's bias (run_length.fit_to_run_length: the uncorrected
        # first updates need 1,000 warm-up steps). The size-dependent settings: models.sizes.ELECTRA_SIZES.
        flag_defaults=(
            ("adam_bias_correction", False),
            ("adam_beta2", 0.999),
            ("adam_epsilon", 1e-6),
            ("weight_decay", 0.01),
            ("warmup_steps", 10_000),
        ),
    ),
}

ENCODERS = ("roberta", "albert")
# The input formats of RoBERTa section 4.2 (`data/formats.py` builds each), and those that build pairs for a
# sentence-level objective (NSP or SOP).
INPUT_FORMATS: tuple[str, ...] = ("full-sentences", "doc-sentences", "segment-pair", "sentence-pair")
PAIR_FORMATS: tuple[str, ...] = ("segment-pair", "sentence-pair")
# Tokenizers trained on the corpus when none is given, with the vocabulary size --tokenizer_vocab_size defaults to
# (recipes set it through flag_defaults): RoBERTa's byte-level BPE (50,265), ALBERT's SentencePiece unigram (30,000).
TOKENIZERS = ("byte-level-bpe", "unigram")

def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ValueError(f"Unknown recipe {name!r}; valid recipes: {', '.join(RECIPES)}.")
    return RECIPES[name]
