"""The pretraining recipes: each fixes the objective, the data format, the encoder and the tokenizer of one of the
papers (the model sizes they build are `models.configuration_spanroberta.MODEL_SIZES` and
`models.modeling_electra_pretraining.ELECTRA_SIZES`). Each field can be overridden from the command line
(`--masking word`, `--input_format full-sentences`, `--sbo false`, `--cross_layer_sharing none`,
`--tokenizer_name ...`, ...).

Recipes are registered by the module of the objective that trains them (`base.register_objective`), so that a new
objective and its recipes are one new module of this package; `RECIPES` lists them all once the package is
imported.
"""

from __future__ import annotations

from dataclasses import dataclass

# The encoders built from scratch: "roberta" (SpanRobertaForPreTraining) or "albert" (SpanAlbertForPreTraining,
# factorised embeddings and cross-layer sharing; --embedding_size or --cross_layer_sharing also choose it).
ENCODERS = ("roberta", "albert")
# Tokenizers trained on the corpus when none is given, with the vocabulary size --tokenizer_vocab_size defaults to
# (recipes set it through flag_defaults): RoBERTa's byte-level BPE (50,265), ALBERT's SentencePiece unigram (30,000).
TOKENIZERS = ("byte-level-bpe", "unigram")
# The input formats of RoBERTa section 4.2 (`data/formats.py` builds each), and those that build pairs for a
# sentence-level objective (NSP or SOP).
INPUT_FORMATS: tuple[str, ...] = ("full-sentences", "doc-sentences", "segment-pair", "sentence-pair")
PAIR_FORMATS: tuple[str, ...] = ("segment-pair", "sentence-pair")


@dataclass(frozen=True)
class Recipe:
    """A recipe states what it changes from RoBERTa's (section 4: dynamic token masking, full-sentences, no NSP,
    no SBO, RoBERTa's encoder and byte-level BPE, masked tokens 80% mask / 10% random / 10% unchanged)."""

    description: str
    masking: str = "token"
    sbo: bool = False
    sentence_objective: str = "none"
    input_format: str = "full-sentences"
    static_masking: bool = False
    encoder: str = "roberta"  # one of ENCODERS
    tokenizer: str = "byte-level-bpe"  # one of TOKENIZERS
    # Other flags the recipe sets unless given, as (flag name, value) pairs.
    flag_defaults: tuple[tuple[str, object], ...] = ()
    # The objective that trains the encoder (its name in `base.OBJECTIVES`), set when the objective registers it.
    objective: str = ""


# Recipe name -> recipe, in the order the objectives' modules registered them.
RECIPES: dict[str, Recipe] = {}


def add_recipe(name: str, recipe: Recipe) -> None:
    """Registers `recipe` as --recipe `name`; two recipes of one name are a bug, refused at import."""
    if name in RECIPES:
        raise ValueError(f"Two recipes are named {name!r}: {RECIPES[name].description!r} and {recipe.description!r}.")
    RECIPES[name] = recipe


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ValueError(f"Unknown recipe {name!r}; valid recipes: {', '.join(RECIPES)}.")
    return RECIPES[name]
