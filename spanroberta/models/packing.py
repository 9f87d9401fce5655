"""Packed rows and the attention implementations they meet, for every encoder (RoBERTa's, ALBERT's, ELECTRA's).

Several sequences may share a row when `position_ids` restart at each of them (transformers' padding-free
convention, as `DataCollatorWithFlattening` emits it). Every sequence then attends only to itself, through the
inputs `packed_attention_inputs` gives the encoder in its configured attention implementation's own form: the
offsets of the sequences for varlen_fa2 where its kernel runs (`varlen_attention.py`, torch's flash kernel with
no mask), else a mask (block-diagonal for sdpa, eager and varlen_fa2 elsewhere, a block mask for
flex_attention). Flash attention takes no mask:
`SpanRobertaModel` flattens the batch instead, which the other encoders do not.

Which implementations run packed rows on which device, and which cannot apply attention dropout, is said here
once (`packed_rows_refusal`, `refuses_dropout`); training decides a run's packing from them
(pretraining/attention.py).

This file ships with every checkpoint beside the model files that import it; it imports nothing from spanroberta.
"""

from __future__ import annotations

import torch
from transformers import PretrainedConfig, PreTrainedModel
from transformers.utils import logging
from transformers.masking_utils import create_bidirectional_mask, create_bidirectional_sliding_window_mask

from .varlen_attention import (
    VARLEN_FA2,
    attention_compute_dtype,
    packed_sequence_offsets,
    varlen_fa2_refusal,
)

logger = logging.get_logger(__name__)

# Attention implementations whose functions take a dense [batch, 1, queries, keys] mask (varlen_fa2 takes one
# where rows are not packed, or its kernel cannot run).
_DENSE_MASK_ATTENTION = ("sdpa", "eager", VARLEN_FA2)
# The attention implementations pretraining accepts (--attn_implementation); flash attention needs the flash-attn
# package and a GPU.
ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager", VARLEN_FA2, "flex_attention", "flash_attention_2", "flash_attention_3")
# Config fields that hold attention dropout (ModernBERT's is attention_dropout).
_ATTENTION_DROPOUT_FIELDS = ("attention_probs_dropout_prob", "attention_dropout")
# Attention implementations that apply no attention dropout: transformers' flex_attention refuses dropout > 0.
_DROPOUT_FREE_ATTENTION = ("flex_attention",)
# flex_attention works in blocks of this many queries and keys (torch's _DEFAULT_SPARSE_BLOCK_SIZE, the block size of
# the BlockMask transformers builds): a kernel may call a mask function at any index of a row's last block.
_FLEX_BLOCK_SIZE = 128

NO_SEQUENCE_OFFSETS = (
    f"Packed rows under {VARLEN_FA2} came without their sequences' offsets (`sequence_offsets`, which "
    "DataCollatorForSpanMasking(return_sequence_offsets=True) computes on the host): the forward derives them from "
    "the positions, which waits for the device at every step. Said once."
)
FLEX_ATTENTION_ON_CPU = (
    "Packed rows (position_ids that restart at each sequence) under flex_attention on CPU: torch's CPU kernel for "
    "flex attention gives some rows wrong attention, or NaN, for some batch shapes (rows of 24 tokens, for one, "
    "on some CPUs), even under a mask that reads no tensor, so a packed sequence would not get the hidden states "
    "it has alone. On CPU use sdpa or eager (--attn_implementation sdpa, or attn_implementation=\"sdpa\" when "
    "loading the model); flex_attention packs rows on CUDA."
)


def is_flash_attention(config) -> bool:
    """Whether the config runs a flash attention kernel (transformers names them flash_attention_2, _3, ...,
    and kernels from the Hub "kernels-community/flash-attn..."): they take no mask, only `cu_seqlens`."""
    return _is_flash(config._attn_implementation)


def _is_flash(attn_implementation: str | None) -> bool:
    return "flash" in (attn_implementation or "")


def takes_dense_mask(config) -> bool:
    """Whether the configured attention takes a dense [batch, 1, queries, keys] mask (sdpa, eager)."""
    return config._attn_implementation in _DENSE_MASK_ATTENTION


def packed_sequence_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """Long [batch, length]: which sequence of its row each token belongs to. A sequence starts wherever the
    position does not follow the one before (transformers' `find_packed_sequence_indices`, without its check for
    unpacked rows, which would read the values on the host)."""
    first = position_ids[:, :1] - 1
    return (torch.diff(position_ids, prepend=first, dim=-1) != 1).cumsum(-1)


def packed_rows_refusal(
    attn_implementation: str | None, device: torch.device | str, flattens_rows: bool = False
) -> str | None:
    """Why packed rows cannot run under this attention implementation on `device` (None: they can; None as the
    implementation is transformers' default, sdpa). `flattens_rows`: the encoder runs flash attention on packed
    rows by flattening the batch (`SpanRobertaModel`)."""
    if _is_flash(attn_implementation) and not flattens_rows:
        return (
            f"Packed rows (position_ids that restart at each sequence) need an attention mask or sequence offsets, "
            f"which {attn_implementation} does not take in this encoder: use sdpa, eager, {VARLEN_FA2} or "
            "flex_attention, or train without packing (--pack_documents false, or a pair input format)."
        )
    if attn_implementation == "flex_attention" and torch.device(device).type == "cpu":
        return FLEX_ATTENTION_ON_CPU
    return None


def refuses_dropout(attn_implementation: str | None) -> bool:
    """Whether this attention implementation cannot apply attention dropout in training."""
    return attn_implementation in _DROPOUT_FREE_ATTENTION


def head_size(config: PretrainedConfig) -> int:
    """The size of one attention head of `config`'s encoder."""
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def _attention_dropout(config: PretrainedConfig) -> float:
    """The attention dropout `config` trains with (0 where it names none)."""
    dropouts = [getattr(config, name, None) or 0.0 for name in _ATTENTION_DROPOUT_FIELDS]
    return max(dropouts)


def packed_rows_path(
    config: PretrainedConfig, device: torch.device | str, dtype: torch.dtype, backward: bool = False
) -> tuple[str, str | None]:
    """How packed rows attend under `config`'s attention implementation on `device`, attention computing in `dtype`
    (`backward`: with gradients, under the config's attention dropout): ("varlen_fa2", None) through the flash
    kernel, else ("mask", why not the kernel: None where varlen_fa2 was not asked for)."""
    if config._attn_implementation != VARLEN_FA2:
        return "mask", None
    refusal = varlen_fa2_refusal(device, dtype, head_size(config), _attention_dropout(config), backward)
    return ("mask", refusal) if refusal else (VARLEN_FA2, None)


def packed_sequence_mask_function(sequence_ids: torch.Tensor, real: torch.Tensor):
    """transformers' mask function for packed rows: a query attends to the keys of its own sequence, and a real
    (unpadded) query to real keys only. A padding query attends to its sequence's keys, padding included, so that
    no query row is empty (an empty row gives NaN in SDPA).

    flex_attention works in blocks of _FLEX_BLOCK_SIZE, and a kernel that evaluates the function over a row's whole
    last block passes indices past the row's end; a compiled kernel does not check a read out of a tensor's bounds,
    it reads whatever memory follows (another row's ids, or garbage after the last row). torch 2.13's kernels bound
    the indices themselves (CUDA's wrap them round the length, the CPU one stops at it), older ones did not
    (transformers pads its own flex masks to whole blocks for torch 2.5), and nothing in flex_attention's contract
    says they must. So both tensors are padded to whole blocks, with a sequence id of -1 (no real token's) and "not
    real": an index past the end matches no real query or key, whatever the kernel."""
    padding = -sequence_ids.shape[-1] % _FLEX_BLOCK_SIZE
    sequence_ids = torch.nn.functional.pad(sequence_ids, (0, padding), value=-1)
    real = torch.nn.functional.pad(real, (0, padding), value=False)

    def inner_mask(batch_idx: int, head_idx: int, q_idx: int, kv_idx: int) -> bool:
        same_sequence = sequence_ids[batch_idx, q_idx] == sequence_ids[batch_idx, kv_idx]
        return same_sequence & (real[batch_idx, kv_idx] | ~real[batch_idx, q_idx])

    return inner_mask


def packed_attention_inputs(
    encoder: PreTrainedModel,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor,
    inputs_embeds: torch.Tensor | None = None,
    per_attention_type: bool = False,
    sequence_offsets: torch.Tensor | None = None,
) -> dict:
    """What `encoder` (RoBERTa's, ALBERT's, ELECTRA's, or a continued stock encoder's) takes, beside its
    `position_ids`, to keep the sequences of packed rows [batch, length] apart, in its configured attention
    implementation's form: {"attention_mask": the mask} (see `packed_sequence_mask_function`), or for varlen_fa2
    where its kernel runs (`packed_rows_path`) no mask and the sequences' offsets, as transformers' attention
    functions read them: `sequence_offsets` (int32, from the collator) if given, else derived from the positions,
    which synchronises with the device. `attention_mask` (2D, 1 for real tokens) marks the padding. The mask takes
    the dtype of `inputs_embeds`, else of the word embeddings. `per_attention_type`: one mask per layer type, as
    encoders that alternate full and sliding-window attention (ModernBERT) take them."""
    config = encoder.config
    device = position_ids.device if inputs_embeds is None else inputs_embeds.device
    refusal = packed_rows_refusal(config._attn_implementation, device)
    if refusal is not None:
        raise ValueError(refusal)
    if config._attn_implementation == VARLEN_FA2 and per_attention_type:
        raise ValueError(
            f"{VARLEN_FA2} runs every layer over whole sequences, and {config.model_type} has sliding-window "
            "layers: use sdpa (or eager) for its packed rows."
        )
    states_dtype = encoder.get_input_embeddings().weight.dtype if inputs_embeds is None else inputs_embeds.dtype
    backward = encoder.training and torch.is_grad_enabled()
    if packed_rows_path(config, device, attention_compute_dtype(device, states_dtype), backward)[0] == VARLEN_FA2:
        if sequence_offsets is None:
            logger.warning_once(NO_SEQUENCE_OFFSETS)
            sequence_offsets = packed_sequence_offsets(position_ids, attention_mask)
        length = position_ids.shape[-1]  # the longest a sequence can be
        return {"attention_mask": None, "cu_seq_lens_q": sequence_offsets, "cu_seq_lens_k": sequence_offsets,
                "max_length_q": length, "max_length_k": length}  # fmt: skip
    if inputs_embeds is None:
        # create_bidirectional_mask reads only the shape, dtype and device of the embeddings.
        inputs_embeds = encoder.get_input_embeddings().weight.new_empty((*position_ids.shape, 0))
    real = torch.ones_like(position_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    mask_inputs = {
        "config": config,
        "inputs_embeds": inputs_embeds,
        "attention_mask": None,
        "and_mask_function": packed_sequence_mask_function(packed_sequence_ids(position_ids), real),
    }
    if per_attention_type:
        return {"attention_mask": {
            "full_attention": create_bidirectional_mask(**mask_inputs),
            "sliding_attention": create_bidirectional_sliding_window_mask(**mask_inputs),
        }}  # fmt: skip
    return {"attention_mask": create_bidirectional_mask(**mask_inputs)}


__all__ = [
    "ATTENTION_IMPLEMENTATIONS",
    "FLEX_ATTENTION_ON_CPU",
    "NO_SEQUENCE_OFFSETS",
    "is_flash_attention",
    "packed_rows_refusal",
    "refuses_dropout",
    "takes_dense_mask",
    "head_size",
    "packed_rows_path",
    "packed_sequence_ids",
    "packed_sequence_mask_function",
    "packed_attention_inputs",
]
