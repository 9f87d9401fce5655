"""Masked spans and prediction slots: the layout of the pretraining targets, defined once for the collator
(`data/collator.py`) and for the pretraining models' dense-label path (`pretraining_heads.py`).

- A span is a run of masked tokens (a maximal stretch of them: adjacent sampled spans merge), and the span boundary
  objective's targets follow from the runs (`sbo_targets`, SpanBERT section 3.2).
- Prediction slots: a row's predicted positions in increasing order, then unused slots (-100), so that the heads
  read a fixed number of positions per row whatever the row masks (`prediction_slots`, `in_slots`).

This file ships with every checkpoint beside the model files that import it; it imports nothing from spanroberta.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .conventions import IGNORE_INDEX


def run_starts(masked: torch.Tensor) -> torch.Tensor:
    """Long [B, L]: for each masked token, the position of the first token of its run (a maximal stretch of
    masked tokens, i.e. a merged span); meaningless at unmasked positions."""
    positions = torch.arange(masked.shape[1], device=masked.device).expand_as(masked)
    is_start = masked & ~F.pad(masked[:, :-1], (1, 0), value=False)
    return torch.where(is_start, positions, 0).cummax(1).values


def sbo_targets(
    masked: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    max_span_targets: int = 15,
    document_ids: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The span boundary objective's targets (SpanBERT section 3.2), one run of masked tokens at a time.

    For each token i of a run s..e: `sbo_left_positions` = s-1, `sbo_right_positions` = e+1 and
    `sbo_relative_positions` = i-s (0-based; the paper's p_{i-s+1}). All three are -100 where a token is not
    an SBO target: unmasked tokens, tokens with i-s >= max_span_targets (they stay MLM targets; SpanBERT's code
    truncates pair targets the same way), and whole runs whose s-1 or e+1 is not a real token of the row
    (before its start, past its end, or padding) or, in packed rows (`document_ids`: which sequence of its row
    each token belongs to), not a token of the run's own sequence.
    """
    length = masked.shape[1]
    positions = torch.arange(length, device=masked.device).expand_as(masked)
    inside_row = torch.ones_like(masked) if attention_mask is None else attention_mask.bool()
    start = run_starts(masked)
    is_end = masked & ~F.pad(masked[:, 1:], (0, 1), value=False)
    end = torch.where(is_end, positions, length).flip(1).cummin(1).values.flip(1)

    left, right, relative = start - 1, end + 1, positions - start
    left_ok = (left >= 0) & inside_row.gather(1, left.clamp(min=0))
    right_ok = (right < length) & inside_row.gather(1, right.clamp(max=max(length - 1, 0)))
    if document_ids is not None:
        left_ok &= document_ids.gather(1, left.clamp(min=0)) == document_ids
        right_ok &= document_ids.gather(1, right.clamp(max=max(length - 1, 0))) == document_ids
    is_target = masked & left_ok & right_ok & (relative < max_span_targets)
    return {
        "sbo_left_positions": left.masked_fill(~is_target, IGNORE_INDEX),
        "sbo_right_positions": right.masked_fill(~is_target, IGNORE_INDEX),
        "sbo_relative_positions": relative.masked_fill(~is_target, IGNORE_INDEX),
    }


def prediction_slots(masked: torch.Tensor, num_slots: int) -> torch.Tensor:
    """Long [batch, num_slots]: the masked positions of each row in increasing order, then -1 (unused slots). A row
    with more masked positions than slots keeps its first `num_slots`."""
    order = torch.argsort((~masked).to(torch.uint8), dim=1, stable=True)[:, :num_slots]
    order = F.pad(order, (0, num_slots - order.shape[1]), value=-1)
    slot = torch.arange(num_slots, device=masked.device)
    return order.masked_fill(slot >= masked.sum(1, keepdim=True), -1)


def in_slots(dense: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
    """The values of `dense` [batch, length] at the prediction slots [batch, slots], -100 in unused slots."""
    if dense.shape[1] == 0:  # rows of no tokens: every slot is unused
        return torch.full_like(slots, IGNORE_INDEX, dtype=dense.dtype)
    return dense.gather(1, slots.clamp(min=0)).masked_fill(slots < 0, IGNORE_INDEX)


def write_at_slots(
    dense: torch.Tensor, positions: torch.Tensor, values: torch.Tensor, valid: torch.Tensor
) -> torch.Tensor:
    """`dense` [batch, length] with `values` [batch, slots] written at `positions` where `valid` (the inverse of
    `in_slots`); unused slots are written to a scratch column that is then dropped."""
    length = dense.shape[1]
    target = torch.where(valid, positions, length)
    widened = F.pad(dense, (0, 1))
    return widened.scatter(1, target, values.to(dense.dtype))[:, :length].contiguous()


__all__ = ["run_starts", "sbo_targets", "prediction_slots", "in_slots", "write_at_slots"]
