"""A vocabulary padded to a multiple of 64 ids, and padded ids that are never predicted.

A decoder of 50,265 rows (RoBERTa's vocabulary, not a multiple of 8) puts its matrix products on the slowest GEMM
kernels of a GPU's tensor cores; nanoGPT and MosaicBERT pad the vocabulary to a multiple of 64 for this reason, and
so does pretraining here by default (`--pad_vocab_to_multiple_of`). The ids past the tokenizer's own are padding:
no input holds them and no label names them, so the losses are those of the unpadded vocabulary. They must not be
predicted either (fill-mask, ELECTRA's generator sampling replacements): each decoder's bias holds
`PADDED_ID_LOGIT` there. A bias, not a mask in the forward: it is a weight, so the saved model keeps it wherever it
loads, plain transformers' classes included. Its softmax probability is 0 in fp32, bf16 and fp16 alike, so no
gradient moves it or the padded rows of the decoder, and transformers' Trainer decays no bias.

Under DeepSpeed ZeRO-3 the model is partitioned as it is built: each process holds a shard of every parameter and
the parameter itself an empty placeholder, so the bias is written gathered, where it lives (`mask_padded_ids`). A
checkpoint's vocabulary is not resized there (`pad_vocabulary`): it trains as it was saved, and the run's
specification pads it to a multiple of 1 and says why (pretraining/specification.py).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Sequence
from typing import ContextManager

import torch
from torch import nn
from transformers import PreTrainedModel

from .modeling_span_heads import SpanBoundaryHead

# A logit no real id's comes near (trained MLM logits stay within about +-50), representable in fp16 (max 65504),
# so that a padded id's probability underflows to exactly 0.
PADDED_ID_LOGIT = -1e4
logger = logging.getLogger(__name__)


def padded_vocab_size(size: int, multiple: int) -> int:
    """`size` rounded up to a multiple of `multiple` (1: unpadded)."""
    return math.ceil(size / multiple) * multiple


def pad_vocabulary(model: PreTrainedModel, tokenizer_size: int, multiple: int) -> None:
    """Resizes `model`'s embeddings and decoders to hold the tokenizer's `tokenizer_size` ids, padded to a multiple
    of `multiple` (a checkpoint's vocabulary that is already so is kept; transformers' `resize_token_embeddings`
    initialises new rows), then keeps the ids past the tokenizer's from being predicted (`mask_padded_ids`)."""
    size = model.config.vocab_size
    if size < tokenizer_size or size % multiple:
        if hasattr(model.get_input_embeddings().weight, "ds_shape"):
            # Partitioned by ZeRO-3: resize_token_embeddings resizes the tied decoder's weight but leaves a head's
            # separate bias (RoBERTa's lm_head.bias) at its old size, and the first step would fail on the shapes.
            # Its ids past the tokenizer's, if any, are still masked below.
            logger.warning(f"The checkpoint's {size} ids are kept: under ZeRO-3 the vocabulary is not resized (to "
                           f"the tokenizer's {tokenizer_size} ids padded to a multiple of {multiple}).")
        else:
            # transformers' mean resizing draws new rows from the old ones' distribution: right for ids the
            # tokenizer adds, needless (and warned about) where the new rows are only padding, never read nor
            # predicted.
            model.resize_token_embeddings(max(size, tokenizer_size), pad_to_multiple_of=multiple,
                                          mean_resizing=tokenizer_size > size)  # fmt: skip
    mask_padded_ids(model, tokenizer_size)


@torch.no_grad()
def mask_padded_ids(model: nn.Module, tokenizer_size: int) -> None:
    """Sets the bias of every decoder into the vocabulary (each model's output embeddings, the SBO head's) to
    `PADDED_ID_LOGIT` at the ids from `tokenizer_size` on, which the tokenizer cannot decode."""
    biases = {}
    for decoder in vocabulary_decoders(model):
        if decoder.bias is None:
            raise ValueError(f"{type(decoder).__name__} decodes into the vocabulary without a bias: the padded ids "
                             "cannot be kept from being predicted; use --pad_vocab_to_multiple_of 1.")  # fmt: skip
        biases[id(decoder.bias)] = decoder.bias  # a head's bias and its decoder's are one parameter
    with _whole(list(biases.values())):
        for bias in biases.values():
            bias[tokenizer_size:] = PADDED_ID_LOGIT


def _whole(parameters: Sequence[nn.Parameter]) -> ContextManager:
    """The parameters whole for the block. Partitioned by ZeRO-3 (`ds_shape`: the whole one's shape, beside an
    empty placeholder), they are gathered on every process, which all enter the block, and what the first process
    writes is partitioned back on leaving it; otherwise they are whole already."""
    if not any(hasattr(parameter, "ds_shape") for parameter in parameters):
        return contextlib.nullcontext()
    import deepspeed  # only a ZeRO-3 run partitions parameters, and it has DeepSpeed

    return deepspeed.zero.GatheredParameters(parameters, modifier_rank=0)


def vocabulary_decoders(model: nn.Module) -> list[nn.Linear]:
    """The linear layers of `model` that give logits over the vocabulary, each once."""
    decoders = {}
    for module in model.modules():
        if isinstance(module, PreTrainedModel) and isinstance(module.get_output_embeddings(), nn.Linear):
            decoders[id(module.get_output_embeddings())] = module.get_output_embeddings()
        elif isinstance(module, SpanBoundaryHead):
            decoders[id(module.decoder)] = module.decoder
    return list(decoders.values())


__all__ = ["PADDED_ID_LOGIT", "mask_padded_ids", "pad_vocabulary", "padded_vocab_size", "vocabulary_decoders"]
