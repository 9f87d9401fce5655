"""The pretraining recipes and model sizes, as data.

A recipe fixes the objective and the data format of one of the papers; each of its fields can be overridden
from the command line (`--masking word`, `--input_format full-sentences`, `--sbo false`, ...).
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
}

# Encoder shapes. base and large are BERT's / RoBERTa's (RoBERTa appendix, Table 9); tiny is for demos and tests.
MODEL_SIZES: dict[str, dict[str, int]] = {
    "tiny": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512},
    "small": {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
    "base": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
    "large": {"num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16, "intermediate_size": 4096},
}


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ValueError(f"Unknown recipe {name!r}; valid recipes: {', '.join(RECIPES)}.")
    return RECIPES[name]


def get_model_size(name: str) -> dict[str, int]:
    if name not in MODEL_SIZES:
        raise ValueError(f"Unknown model size {name!r}; valid sizes: {', '.join(MODEL_SIZES)}.")
    return dict(MODEL_SIZES[name])
