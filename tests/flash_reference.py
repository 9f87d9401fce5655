"""Reference CPU kernels for torch's private flash attention ops, so that the very code path CUDA runs
(`varlen_fa2`: one call of `aten::_flash_attention_forward` on the flattened batch, its autograd node, its meta
functions under torch.compile) runs in CPU tests.

The kernels follow the ops' schemas and meta functions in torch 2.13: the forward takes query, key, value
[total, heads, head_dim], int32 cumulative offsets of the sequences, and returns (output [total, heads, head_dim]
with the query's strides, logsumexp float [heads, total], rng_state uint64 [2], unused uint64 [], an empty debug
mask). Dropout keeps each attention weight with probability 1 - p and scales it by 1 / (1 - p); its mask is drawn
from a seed that the forward takes from torch's generator and returns in `rng_state`, and the backward draws the
same mask again from that seed, as CUDA's kernel replays its philox state. `keep_masks(seed)` gives a test the
masks the forward used.
"""

from __future__ import annotations

import torch


class ReferenceFlashKernels:
    """Registers the kernels for the CPU dispatch key while open; `close` removes them."""

    def __init__(self) -> None:
        self.last_seed: int | None = None
        self.calls = {"forward": 0, "backward": 0}
        self._library = torch.library.Library("aten", "IMPL")
        self._library.impl("_flash_attention_forward", self._forward, "CPU")
        self._library.impl("_flash_attention_backward", self._backward, "CPU")

    def close(self) -> None:
        self._library._destroy()

    def keep_masks(self, seed: int, offsets: torch.Tensor, heads: int, dropout_p: float) -> list[torch.Tensor]:
        """Float [heads, n, n] a sequence: 0 where dropout drops a weight, 1 / (1 - p) where it keeps it."""
        masks = []
        for index, (start, end) in enumerate(_spans(offsets)):
            generator = torch.Generator().manual_seed(seed + index)
            keep = torch.rand(heads, end - start, end - start, generator=generator) >= dropout_p
            masks.append(keep.float() / (1 - dropout_p))
        return masks

    def _forward(self, query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                 return_debug_mask, scale=None, **_):  # fmt: skip
        assert not is_causal and torch.equal(cum_seq_q, cum_seq_k) and cum_seq_q.dtype == torch.int32
        self.calls["forward"] += 1
        heads = query.shape[1]
        scale = query.shape[-1] ** -0.5 if scale is None else scale
        seed = int(torch.randint(0, 2**62, ())) if dropout_p > 0 else 0
        self.last_seed = seed
        masks = self.keep_masks(seed, cum_seq_q, heads, dropout_p) if dropout_p > 0 else None
        output = torch.empty_like(query)
        logsumexp = torch.empty(heads, query.shape[0], dtype=torch.float32)
        for index, (start, end) in enumerate(_spans(cum_seq_q)):
            q, k, v = (_heads_first(states[start:end]) for states in (query, key, value))
            scores = q @ k.transpose(-1, -2) * scale  # [heads, n, n]
            probabilities = scores.softmax(-1)
            if masks is not None:
                probabilities = probabilities * masks[index]
            output[start:end] = (probabilities @ v).transpose(0, 1).to(query.dtype)
            logsumexp[:, start:end] = scores.logsumexp(-1)
        rng_state = torch.tensor([seed, 0], dtype=torch.uint64)
        return output, logsumexp, rng_state, torch.zeros((), dtype=torch.uint64), torch.empty(0, dtype=query.dtype)

    def _backward(self, grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
                  is_causal, rng_state, unused, scale=None, **_):  # fmt: skip
        self.calls["backward"] += 1
        heads = query.shape[1]
        scale = query.shape[-1] ** -0.5 if scale is None else scale
        masks = self.keep_masks(int(rng_state[0]), cum_seq_q, heads, dropout_p) if dropout_p > 0 else None
        grads = [torch.empty_like(states) for states in (query, key, value)]
        for index, (start, end) in enumerate(_spans(cum_seq_q)):
            q, k, v, d_out = (_heads_first(states[start:end]) for states in (query, key, value, grad_out))
            probabilities = (q @ k.transpose(-1, -2) * scale).softmax(-1)
            keep = masks[index] if masks is not None else torch.ones_like(probabilities)
            d_v = (probabilities * keep).transpose(-1, -2) @ d_out
            d_probabilities = (d_out @ v.transpose(-1, -2)) * keep
            d_scores = probabilities * (d_probabilities - (d_probabilities * probabilities).sum(-1, keepdim=True))
            d_q, d_k = d_scores @ k * scale, d_scores.transpose(-1, -2) @ q * scale
            for grad, part in zip(grads, (d_q, d_k, d_v)):
                grad[start:end] = part.transpose(0, 1).to(grad.dtype)
        return tuple(grads)


def _spans(offsets: torch.Tensor) -> list[tuple[int, int]]:
    bounds = offsets.tolist()
    return list(zip(bounds[:-1], bounds[1:]))


def _heads_first(states: torch.Tensor) -> torch.Tensor:
    """[n, heads, head_dim] -> float [heads, n, head_dim]."""
    return states.transpose(0, 1).float()
