"""Packed rows through a variable-length attention kernel: each sequence of a packed row attends alone, with no
[batch, 1, length, length] mask, through `F.scaled_dot_product_attention` over nested (jagged) tensors, which torch
itself ships. On CUDA torch runs them through its flash or memory-efficient kernels (both apply dropout); on CPU
through its math kernel, one sequence at a time (exact, not fast). Packed rows keep sdpa's block-diagonal mask on
every device unless this path is asked for.

It is registered with transformers as the attention implementation "varlen_sdpa", so every encoder that dispatches
through `ALL_ATTENTION_FUNCTIONS` takes it (`attn_implementation="varlen_sdpa"`). Packed rows reach it as the
cumulative sequence lengths transformers' flash attention reads (`cu_seq_lens_q`, `max_length_q`), which
`packing.packed_attention_inputs` derives once per batch from the positions; without them (rows not packed, or a
ready mask) it is transformers' sdpa, exactly.

torch's own `torch.nn.attention.varlen.varlen_attn` (CUDA) is not used: in torch 2.13 it applies no dropout, so it
could not train the recipes, which keep BERT's attention dropout of 0.1.

This file ships with every checkpoint beside the model files that import it; it imports nothing from spanroberta.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

VARLEN_SDPA = "varlen_sdpa"


def packed_sequence_offsets(position_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Long [sequences + 1]: where each sequence of the flattened batch [batch * length] starts, then its end.

    A sequence starts at each row's first token, wherever the position does not follow the one before, and
    wherever padding (attention_mask 0) starts or stops, so that a padding tail is a sequence of its own that no
    real token attends to. Reading the starts synchronises with the device once per batch."""
    follows = torch.diff(position_ids, dim=-1) == 1
    if attention_mask is not None:
        real = attention_mask.bool()
        follows = follows & (real[:, 1:] == real[:, :-1])
    row_start = torch.ones_like(position_ids[:, :1], dtype=torch.bool)
    starts = torch.cat([row_start, ~follows], dim=-1).flatten().nonzero().flatten()
    return torch.cat([starts, starts.new_tensor([position_ids.numel()])])


def varlen_sdpa_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    cu_seq_lens_q: torch.Tensor | None = None,
    max_length_q: int | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention function: query, key, value [batch, heads, length, head_dim] -> [batch, length,
    heads, head_dim]. With `cu_seq_lens_q` (offsets of the sequences in the flattened batch, as
    `packed_sequence_offsets` gives them), each sequence attends to itself alone; without, it is sdpa."""
    if cu_seq_lens_q is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)  # fmt: skip
    batch_size, num_heads, length, _ = query.shape

    def jagged(states: torch.Tensor) -> torch.Tensor:
        tokens = states.transpose(1, 2).contiguous().view(batch_size * length, num_heads, -1)
        # max_seqlen, an upper bound, spares the kernels a device synchronisation to find the longest sequence.
        nested = torch.nested.nested_tensor_from_jagged(tokens, cu_seq_lens_q, min_seqlen=1, max_seqlen=max_length_q)
        return nested.transpose(1, 2)  # [sequences, heads, ragged length, head_dim]

    output = F.scaled_dot_product_attention(
        jagged(query), jagged(key), jagged(value), dropout_p=dropout, scale=scaling
    )
    return output.transpose(1, 2).values().view(batch_size, length, num_heads, -1), None


# Rows that are not packed get sdpa's mask and attention.
AttentionInterface.register(VARLEN_SDPA, varlen_sdpa_attention_forward)
AttentionMaskInterface.register(VARLEN_SDPA, sdpa_mask)

__all__ = ["VARLEN_SDPA", "packed_sequence_offsets", "varlen_sdpa_attention_forward"]
