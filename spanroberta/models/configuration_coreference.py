"""Configuration of the end-to-end coreference model (`modeling_coreference.py`): the settings of Lee et al. 2017/2018's
task layers as Joshi et al. 2019 ("BERT for Coreference Resolution: Baselines and Analysis") ran them over BERT,
plus the configuration of the wrapped encoder (any transformers encoder: spanroberta, RoBERTa, BERT, ...).

This file is copied next to every saved checkpoint (see `auto_map`), so it imports nothing from spanroberta.
"""

from transformers import AutoConfig, PretrainedConfig

AUTO_MAP = {
    "AutoConfig": "configuration_coreference.CorefConfig",
    "AutoModel": "modeling_coreference.CorefModel",
}


class CorefConfig(PretrainedConfig):
    r"""
    Args:
        encoder (`dict`):
            The wrapped encoder's configuration (`PretrainedConfig.to_dict()`, with its `model_type`).
        max_span_width (`int`, defaults to 30):
            Longest candidate mention, in subwords (Joshi et al.'s `max_span_width`).
        top_span_ratio (`float`, defaults to 0.4):
            Mentions kept after pruning per word of the document (Lee et al. 2017 section 5: lambda = 0.4).
        max_top_antecedents (`int`, defaults to 50):
            Antecedents kept per mention by the coarse scores (Lee et al. 2018 section 3: K = 50).
        ffnn_size, ffnn_depth (`int`, default 3000 and 1):
            Hidden size and number of hidden layers of each scorer (Joshi et al.'s BERT configurations).
        feature_size (`int`, defaults to 20):
            Size of the width, distance, speaker and segment-distance embeddings (Lee et al. 2017).
        dropout (`float`, defaults to 0.3):
            Dropout of the task layers where Joshi et al.'s code applies its `dropout_rate`: the width and pair-feature
            embeddings, each scorer's hidden layer, and both sides of the coarse bilinear score; not the encoder's
            output (the encoder keeps its own dropout).
        coref_depth (`int`, defaults to 2):
            Rounds of antecedent scoring; each round after the first refines the span representations with the
            previous round's antecedent distribution (higher-order inference, Lee et al. 2018 section 2).
        max_segment_distance (`int`, defaults to 11):
            Segment distances between a mention and its antecedent are clipped to this minus 1 (Joshi et al.'s
            `max_training_sentences`: 11 in their `bert_base` setting of 128-subword segments, 3 in `spanbert_base`
            of 384; run_coref.py sets it to --max_train_segments).
        use_speaker_features, use_segment_distance (`bool`, default True):
            Whether phi(i, j) holds the same-speaker and the segment-distance embeddings.
        mention_loss_weight (`float`, defaults to 0.0):
            Weight of an added binary cross-entropy on the candidates' mention scores (their mean, times the number
            of kept spans so that it weighs like the antecedent loss summed over them; 0: the paper's loss only).
            Data that annotates singletons (LitBank) needs it to predict mentions that corefer with nothing.
    """

    model_type = "spanroberta-coref"

    encoder: dict | None = None
    max_span_width: int = 30
    top_span_ratio: float = 0.4
    max_top_antecedents: int = 50
    ffnn_size: int = 3000
    ffnn_depth: int = 1
    feature_size: int = 20
    dropout: float = 0.3
    coref_depth: int = 2
    max_segment_distance: int = 11
    use_speaker_features: bool = True
    use_segment_distance: bool = True
    mention_loss_weight: float = 0.0
    initializer_range: float = 0.02

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        if isinstance(self.encoder, PretrainedConfig):
            self.encoder = self.encoder.to_dict()
        for name in ("max_span_width", "max_top_antecedents", "coref_depth", "max_segment_distance", "ffnn_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}.")
        if not 0 < self.top_span_ratio <= 1:
            raise ValueError(f"top_span_ratio must be in (0, 1], got {self.top_span_ratio}.")
        # Saved with every checkpoint so that AutoModel finds the model with trust_remote_code=True.
        self.auto_map = {**AUTO_MAP, **(getattr(self, "auto_map", None) or {})}

    def encoder_config(self) -> PretrainedConfig:
        """The wrapped encoder's configuration as its own config class."""
        if not self.encoder or "model_type" not in self.encoder:
            raise ValueError(
                "A CorefConfig needs `encoder`: the wrapped encoder's config as a dict with its model_type."
            )
        return AutoConfig.for_model(**self.encoder)


__all__ = ["CorefConfig"]
