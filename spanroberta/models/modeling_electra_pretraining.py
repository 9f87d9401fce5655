"""ELECTRA's replaced token detection (Clark et al. 2020, arXiv:2003.10555), trained jointly on transformers' own
ELECTRA classes.

`ElectraForReplacedTokenDetection` is transformers' `ElectraForPreTraining` (the discriminator, the model that is
kept) holding a smaller `ElectraForMaskedLM` (the generator) as `self.generator`:

- the generator shares the discriminator's embeddings module (token, position and type embeddings and their
  LayerNorm: one module object, so one set of tensors); it is smaller in hidden size, heads and FFN, not in layers,
  and its `embeddings_project` maps the shared embedding size to its hidden size (ELECTRA section 3.2);
- the generator predicts the masked tokens at the collator's prediction slots only (`mlm_positions`/`labels`, as
  `SpanRobertaForPreTraining` does, with the same `gather` and `decoder_cross_entropy`);
- a replacement is sampled from the generator's softmax (Gumbel-max, temperature 1) without gradient, and written
  into the input at the slots; a sampled token equal to the original counts as original;
- the discriminator classifies every real (non-padding) token as original or replaced, D(x, t) = sigmoid(w^T h_t):
  binary cross-entropy averaged over the real tokens;
- loss = generator MLM + lambda * discriminator loss (`config.rtd_loss_weight`, lambda = 50 in the paper).

With span, word or n-gram masking (`DataCollatorForSpanMasking`) the generator fills whole masked spans and the
discriminator has to detect replaced spans: replaced span detection, our variant, unpublished.

Saving writes two ordinary transformers checkpoints: the discriminator at the folder's root (what
`ElectraForPreTraining`, `ElectraModel`, `ElectraForSequenceClassification`, `ElectraForQuestionAnswering`, ...
load) and the generator in `generator/` (`ElectraForMaskedLM`, for `pipeline("fill-mask")`), both holding the
same shared embeddings. `from_pretrained_parts` joins two such checkpoints again (ours, or Google's released
`google/electra-*-discriminator` and `-generator`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining
from transformers.modeling_outputs import ModelOutput

from .configuration_spanroberta import IGNORE_INDEX, MODEL_SIZES, normalises_loss_by_item_counts
from .modeling_span_heads import SpanPreTrainingMixin, decoder_cross_entropy, gather, normalised_loss, write_at_slots
from .packed_attention import packed_attention_inputs

GENERATOR_FOLDER = "generator"
GENERATOR_PREFIX = "generator."
RTD_LOSS_WEIGHT = 50.0  # ELECTRA section 3.1 and Table 6: lambda = 50
NO_MASKED_INPUT = (
    "ElectraForReplacedTokenDetection trains on masked input: give labels and mlm_positions [batch, slots] as "
    "DataCollatorForSpanMasking makes them. For inference use the saved discriminator (ElectraForPreTraining) or "
    "generator (ElectraForMaskedLM)."
)


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


def generator_config(discriminator_config: ElectraConfig, generator_size: float) -> ElectraConfig:
    """The generator's config: the discriminator's with hidden size multiplied by `generator_size`, and heads and
    FFN following as in ELECTRA's code (`get_generator_config`: heads = hidden / 64, at least 1; FFN = 4 x
    hidden); same layers, embedding size, vocabulary and positions."""
    config = ElectraConfig.from_dict(discriminator_config.to_dict())
    config.hidden_size = max(1, int(round(discriminator_config.hidden_size * generator_size)))
    config.num_attention_heads = max(1, config.hidden_size // 64)
    config.intermediate_size = 4 * config.hidden_size
    config.architectures = None
    if hasattr(config, "rtd_loss_weight"):
        del config.rtd_loss_weight
    return config


@dataclass
class ElectraForReplacedTokenDetectionOutput(ModelOutput):
    """
    loss: generator_loss + rtd_loss_weight * discriminator_loss. Under gradient accumulation each is this
        micro-batch's share of the mean over the whole accumulated batch.
    generator_loss: the generator's MLM cross-entropy, mean over the predicted tokens.
    discriminator_loss: the replaced-token-detection binary cross-entropy, mean over the real tokens.
    mlm_logits (`[batch, slots, vocab]`): the generator's logits at the prediction slots, aligned with `labels`.
    discriminator_logits (`[batch, length]`): the discriminator's logit that each token was replaced.
    replaced (`[batch, length]`, bool): which tokens the generator replaced (the discriminator's targets); false at
        padding.
    generated_input_ids (`[batch, length]`): the discriminator's input, the masked slots filled with samples.
    """

    loss: torch.Tensor | None = None
    generator_loss: torch.Tensor | None = None
    discriminator_loss: torch.Tensor | None = None
    mlm_logits: torch.Tensor | None = None
    discriminator_logits: torch.Tensor | None = None
    replaced: torch.Tensor | None = None
    generated_input_ids: torch.Tensor | None = None


def sample_replacements(logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per slot from softmax(logits), by the Gumbel-max trick; [..., vocab] -> [...]. No gradient."""
    with torch.no_grad():
        uniform = torch.rand(logits.shape, device=logits.device, generator=generator).clamp_(1e-9, 1.0 - 1e-9)
        return (logits.float() - torch.log(-torch.log(uniform))).argmax(-1)


@normalises_loss_by_item_counts  # by the counts of `loss_normalisers`, summed over the accumulated batch
class ElectraForReplacedTokenDetection(ElectraForPreTraining):
    """ElectraForPreTraining (the discriminator) + `self.generator`, an ElectraForMaskedLM sharing its embeddings;
    see the module's docstring. `config` is the discriminator's, with `rtd_loss_weight`."""

    def __init__(self, config: ElectraConfig, generator_config: ElectraConfig):
        super().__init__(config)
        if generator_config.embedding_size != config.embedding_size or generator_config.vocab_size != config.vocab_size:
            raise ValueError("The generator's embedding size and vocabulary must be the discriminator's (shared).")
        # Packed rows reach both encoders in the form of the discriminator's attention (see `forward`).
        generator_config._attn_implementation = self.config._attn_implementation
        self.generator = ElectraForMaskedLM(generator_config)
        self.share_embeddings()

    def share_embeddings(self) -> None:
        """The generator reads the discriminator's embeddings module, and its output layer the shared word
        embeddings (ELECTRA section 3.2)."""
        self.generator.electra.embeddings = self.electra.embeddings
        self.generator.generator_lm_head.weight = self.electra.embeddings.word_embeddings.weight

    @property
    def rtd_loss_weight(self) -> float:
        return getattr(self.config, "rtd_loss_weight", RTD_LOSS_WEIGHT)

    def forward(
        self,
        # Named here, not shared: the Trainer's column filter (like a reader) learns a model's inputs from this list.
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        position_ids: torch.LongTensor | None = None,
        sequence_offsets: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        mlm_positions: torch.LongTensor | None = None,
        num_items_in_batch: torch.Tensor | int | None = None,
        num_rtd_items_in_batch: torch.Tensor | int | None = None,
        **kwargs,
    ) -> ElectraForReplacedTokenDetectionOutput:
        r"""
        input_ids (`[batch, length]`): the masked input, as `DataCollatorForSpanMasking` makes it.
        position_ids (`[batch, length]`): for packed rows, positions that restart at 0 at each sequence; each
            sequence then attends only to itself.
        sequence_offsets (`[sequences + 1]`, int32): for packed rows under varlen_fa2, the sequences' offsets in
            the flattened batch (`SpanRobertaModel` says more).
        mlm_positions, labels (`[batch, slots]`): the positions predicted and their original ids, -100 in unused
            slots.
        num_items_in_batch, num_rtd_items_in_batch: the number of MLM targets and of real tokens in the whole
            accumulated (and global) batch (`loss_normalisers`); without them each loss is this batch's mean.
        """
        if labels is None or mlm_positions is None:
            raise ValueError(NO_MASKED_INPUT)
        kwargs = {name: value for name, value in kwargs.items() if name not in ("return_dict", "return_loss")}
        real = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
        packed = {"attention_mask": attention_mask}
        if position_ids is not None:  # packed rows; both encoders share the discriminator's attention settings
            packed = packed_attention_inputs(self.electra, attention_mask, position_ids,
                                             sequence_offsets=sequence_offsets)  # fmt: skip
        encoder_inputs = dict(**packed, token_type_ids=token_type_ids, position_ids=position_ids, return_dict=True)
        result = ElectraForReplacedTokenDetectionOutput()
        positions, predicted = mlm_positions.clamp(min=0), labels != IGNORE_INDEX  # [batch, slots]
        # The generator: MLM at the prediction slots only.
        generator = self.generator
        hidden = generator.electra(input_ids, **encoder_inputs, **kwargs).last_hidden_state  # [batch, length, H_g]
        features = generator.generator_predictions(gather(hidden, positions))  # [batch, slots, E]
        decoder = generator.generator_lm_head
        result.mlm_logits, total = decoder_cross_entropy(generator.config, features, decoder, labels)  # [b, slots, V]
        result.generator_loss = normalised_loss(total, predicted.sum(), num_items_in_batch)

        # Sampled replacements, without gradient; a sample equal to the original counts as original.
        sampled = sample_replacements(result.mlm_logits.detach())
        original_ids = write_at_slots(input_ids, positions, labels.clamp(min=0), predicted)
        result.generated_input_ids = write_at_slots(input_ids, positions, sampled, predicted)  # [batch, length]
        result.replaced = (result.generated_input_ids != original_ids) & real

        # The discriminator: every real token, original or replaced, classified.
        hidden = self.electra(result.generated_input_ids, **encoder_inputs, **kwargs).last_hidden_state
        result.discriminator_logits = self.discriminator_predictions(hidden)  # [batch, length]
        per_token = F.binary_cross_entropy_with_logits(
            result.discriminator_logits.float(), result.replaced.float(), reduction="none"
        )
        total = per_token.masked_fill(~real, 0.0).sum()
        result.discriminator_loss = normalised_loss(total, real.sum(), num_rtd_items_in_batch)
        result.loss = result.generator_loss + self.rtd_loss_weight * result.discriminator_loss
        return result

    @staticmethod
    def loss_normalisers(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The generator's MLM targets (as SpanRobertaForPreTraining counts them) and the discriminator's: every
        real token."""
        counts = {"num_items_in_batch": SpanPreTrainingMixin.loss_normalisers(batch)["num_items_in_batch"]}
        mask = batch.get("attention_mask")
        counts["num_rtd_items_in_batch"] = mask.sum() if mask is not None else torch.tensor(batch["input_ids"].numel())
        return counts

    # Saving and loading: two ordinary transformers checkpoints.

    def save_pretrained(self, save_directory, state_dict: dict | None = None, **kwargs) -> None:
        """The discriminator to `save_directory` (ElectraForPreTraining's layout) and the generator to
        `save_directory/generator` (ElectraForMaskedLM's), each with its config."""
        state_dict = self.state_dict() if state_dict is None else state_dict
        discriminator = {k: v for k, v in state_dict.items() if not k.startswith(GENERATOR_PREFIX)}
        generator = {k[len(GENERATOR_PREFIX):]: v for k, v in state_dict.items() if k.startswith(GENERATOR_PREFIX)}
        super().save_pretrained(save_directory, state_dict=discriminator, **kwargs)
        if kwargs.get("is_main_process", True):
            # Loaded by transformers' own class: name it in the config.
            self.config.architectures = [ElectraForPreTraining.__name__]
            self.config.save_pretrained(save_directory)
        self.generator.save_pretrained(Path(save_directory) / GENERATOR_FOLDER, state_dict=generator, **kwargs)

    @classmethod
    def from_pretrained_parts(
        cls,
        discriminator_path: str,
        generator_path: str | None = None,
        rtd_loss_weight: float | None = None,
        config: ElectraConfig | None = None,
        check_loading: Callable[[str, dict], None] | None = None,
        **kwargs,
    ) -> ElectraForReplacedTokenDetection:
        """Joins a discriminator checkpoint and a generator checkpoint (default: its `generator/` folder), e.g. a
        saved run or Google's `google/electra-base-discriminator` with `google/electra-base-generator`. The
        discriminator's embeddings are kept (the generator's copy of the shared ones is not read). `config`: the
        discriminator's config to use instead of the checkpoint's. `check_loading(path, loading_info)` is called
        with each part's loading report (`output_loading_info`), to refuse weights that did not load."""
        config = config or ElectraConfig.from_pretrained(discriminator_path, **kwargs)
        if rtd_loss_weight is not None:
            config.rtd_loss_weight = rtd_loss_weight
        generator_path = generator_path or str(Path(discriminator_path) / GENERATOR_FOLDER)
        model = cls(config, ElectraConfig.from_pretrained(generator_path, **kwargs))
        parts = []
        for part_class, path in ((ElectraForPreTraining, discriminator_path), (ElectraForMaskedLM, generator_path)):
            part, loading_info = part_class.from_pretrained(path, output_loading_info=True, **kwargs)
            if check_loading is not None:
                check_loading(path, loading_info)
            parts.append(part.state_dict())
        model.load_parts(*parts)
        return model

    def load_saved(self, folder: str) -> None:
        """Loads in place what `save_pretrained` wrote to `folder` (used to resume training from a checkpoint)."""
        from safetensors.torch import load_file

        self.load_parts(
            load_file(str(Path(folder) / "model.safetensors")),
            load_file(str(Path(folder) / GENERATOR_FOLDER / "model.safetensors")),
        )

    def load_parts(self, discriminator: dict[str, torch.Tensor], generator: dict[str, torch.Tensor]) -> None:
        """Loads the discriminator's and the generator's state dicts; the shared embeddings come from the
        discriminator's. Anything else missing is an error."""
        shared = {f"electra.embeddings.{name}" for name in self.electra.embeddings.state_dict()}
        generator = {k: v for k, v in generator.items() if k not in shared and k != "generator_lm_head.weight"}
        missing = self.generator.load_state_dict(generator, strict=False).missing_keys
        missing = [k for k in missing if k not in shared and k != "generator_lm_head.weight"]
        missing += ElectraForPreTraining.load_state_dict(self, discriminator, strict=False).missing_keys
        missing = [k for k in missing if not k.startswith(GENERATOR_PREFIX)]
        if missing:
            raise ValueError(f"The checkpoints lack weights the ELECTRA pair needs: {', '.join(missing)}.")
        self.share_embeddings()


__all__ = [
    "ElectraForReplacedTokenDetection",
    "ElectraForReplacedTokenDetectionOutput",
    "generator_config",
    "sample_replacements",
    "GENERATOR_FOLDER",
    "ELECTRA_SIZES",
    "ElectraSize",
]
