"""Packed rows and the attention implementations they meet, for every encoder (RoBERTa's, ALBERT's, ELECTRA's).

Several sequences may share a row when `position_ids` restart at each of them (transformers' padding-free
convention, as `DataCollatorWithFlattening` emits it). Every sequence then attends only to itself, through the mask
of `packed_attention_mask` in the configured attention implementation's own form (a block-diagonal mask for sdpa
and eager, a block mask for flex_attention). Flash attention takes no mask: `SpanRobertaModel` flattens the batch
instead, which the other encoders do not. flex_attention packs rows on CUDA only (FLEX_ATTENTION_ON_CPU says why).

This file ships with every checkpoint beside the model files that import it; it imports nothing from spanroberta.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel
from transformers.masking_utils import create_bidirectional_mask, create_bidirectional_sliding_window_mask

# Attention implementations whose functions take a dense [batch, 1, queries, keys] mask.
_DENSE_MASK_ATTENTION = ("sdpa", "eager")
# flex_attention works in blocks of this many queries and keys (torch's _DEFAULT_SPARSE_BLOCK_SIZE, the block size of
# the BlockMask transformers builds): a kernel may call a mask function at any index of a row's last block.
_FLEX_BLOCK_SIZE = 128

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
    return "flash" in (config._attn_implementation or "")


def takes_dense_mask(config) -> bool:
    """Whether the configured attention takes a dense [batch, 1, queries, keys] mask (sdpa, eager)."""
    return config._attn_implementation in _DENSE_MASK_ATTENTION


def packed_sequence_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """Long [batch, length]: which sequence of its row each token belongs to. A sequence starts wherever the
    position does not follow the one before (transformers' `find_packed_sequence_indices`, without its check for
    unpacked rows, which would read the values on the host)."""
    first = position_ids[:, :1] - 1
    return (torch.diff(position_ids, prepend=first, dim=-1) != 1).cumsum(-1)


def refuses_packed_rows(attn_implementation: str | None, device: torch.device) -> bool:
    """Whether packed rows are refused under this attention implementation on `device` (FLEX_ATTENTION_ON_CPU)."""
    return attn_implementation == "flex_attention" and torch.device(device).type == "cpu"


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


def packed_attention_mask(
    encoder: PreTrainedModel,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor,
    inputs_embeds: torch.Tensor | None = None,
    per_attention_type: bool = False,
):
    """The mask of packed rows [batch, length] for `encoder` (RoBERTa's, ALBERT's, ELECTRA's, or a continued stock
    encoder's), in its configured attention implementation's own form (see `packed_sequence_mask_function`);
    `attention_mask` (2D, 1 for real tokens) marks the padding. The mask takes the dtype of `inputs_embeds`, else of
    the word embeddings. `per_attention_type`: one mask per layer type, as encoders that alternate full and
    sliding-window attention (ModernBERT) take them."""
    config = encoder.config
    if is_flash_attention(config):
        raise ValueError(
            f"Packed rows (position_ids that restart at each sequence) need an attention mask, which "
            f"{config._attn_implementation} does not take: use sdpa, eager or flex_attention, or train without "
            "packing (--pack_documents false, or a pair input format)."
        )
    device = position_ids.device if inputs_embeds is None else inputs_embeds.device
    if refuses_packed_rows(config._attn_implementation, device):
        raise ValueError(FLEX_ATTENTION_ON_CPU)
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
        return {
            "full_attention": create_bidirectional_mask(**mask_inputs),
            "sliding_attention": create_bidirectional_sliding_window_mask(**mask_inputs),
        }
    return create_bidirectional_mask(**mask_inputs)


__all__ = [
    "FLEX_ATTENTION_ON_CPU",
    "is_flash_attention",
    "refuses_packed_rows",
    "takes_dense_mask",
    "packed_sequence_ids",
    "packed_sequence_mask_function",
    "packed_attention_mask",
]
