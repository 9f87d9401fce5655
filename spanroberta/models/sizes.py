"""Model sizes, as data: the encoder shapes that `--model_size` names, and ELECTRA's per-size settings. They
describe configurations, so they live beside them; the recipes (`objectives.recipes`) and the objectives that
build a config read them."""

from __future__ import annotations

from dataclasses import dataclass

# Encoder shapes. base and large are BERT's / RoBERTa's (RoBERTa appendix, Table 9); tiny is for demos and tests.
MODEL_SIZES: dict[str, dict[str, int]] = {
    "tiny": {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 512},
    "small": {"num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
    "base": {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12, "intermediate_size": 3072},
    "large": {"num_hidden_layers": 24, "hidden_size": 1024, "num_attention_heads": 16, "intermediate_size": 4096},
}


@dataclass(frozen=True)
class ElectraSize:
    """An ELECTRA model size (ELECTRA appendix, Table 6): the discriminator's shape, the generator's size as a
    fraction of its hidden size (heads and FFN follow), and the pretraining learning rate and batch size (None:
    no paper value, the flags' defaults stay)."""

    shape: dict[str, int]
    generator_size: float
    learning_rate: float | None = None
    batch_size: int | None = None
    mask_rate: float = 0.15


# ELECTRA-Small is 12 layers of hidden 256 with embeddings of 128; base and large are BERT's with embeddings of the
# hidden size. Generators: 1/4 of the discriminator's hidden size (small, large), 1/3 (base), as in Table 6 and
# google-research/electra's configure_pretraining.py (whose released ELECTRA-Small used a full-size generator:
# --generator_size 1.0). Large masks 25% of the tokens (Table 6).
ELECTRA_SIZES: dict[str, ElectraSize] = {
    "tiny": ElectraSize({**MODEL_SIZES["tiny"], "embedding_size": 128}, generator_size=1 / 4),
    "small": ElectraSize(
        {"num_hidden_layers": 12, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024,
         "embedding_size": 128},
        generator_size=1 / 4, learning_rate=3e-4, batch_size=128,
    ),
    "base": ElectraSize({**MODEL_SIZES["base"], "embedding_size": 768}, generator_size=1 / 3,
                        learning_rate=2e-4, batch_size=256),
    "large": ElectraSize({**MODEL_SIZES["large"], "embedding_size": 1024}, generator_size=1 / 4,
                         learning_rate=2e-4, batch_size=2048, mask_rate=0.25),
}


def get_model_size(name: str) -> dict[str, int]:
    if name not in MODEL_SIZES:
        raise ValueError(f"Unknown model size {name!r}; valid sizes: {', '.join(MODEL_SIZES)}.")
    return dict(MODEL_SIZES[name])
