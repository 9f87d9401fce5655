"""The efficient paths of `SpanRobertaForPreTraining`, beside the reference in `modeling_spanroberta.py`.

Each path computes what the reference computes, faster, and is used only where it applies; the tests hold each
one equal to the reference (tests/test_pretraining_speedups.py). `config.efficient_pretraining = False` turns them
all off.

- `encode_at_positions`: the encoder's last layer only where the heads read it. The heads read about a quarter
  of a row (the predicted slots, their span boundaries, the first token), so the last layer computes its keys and
  values everywhere but its queries, attention output and feed-forward network only there: about two thirds of
  that layer's FLOPs saved. Every other layer is RoBERTa's, called as RobertaModel calls it, and the attention
  goes through the configured implementation (sdpa, eager or varlen_fa2; others take the reference path). The
  last layer's few queries take a dense mask under each of them (varlen_fa2 is sdpa there).
- `fused_decoder_cross_entropy`: each head's decoder and cross-entropy in one pass, on CPU under autocast, where
  it was measured to pay (benchmarks/RESULTS.md).

This file ships with every checkpoint, next to the model file that imports it; it imports only its sibling files.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.masking_utils import create_bidirectional_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.roberta.modeling_roberta import RobertaLayer, RobertaModel, eager_attention_forward

from .conventions import IGNORE_INDEX
from .packing import packed_attention_inputs, packed_sequence_ids, takes_dense_mask


def reads_last_layer_at_positions(encoder: RobertaModel, kwargs: dict) -> bool:
    """Whether `encode_at_positions` applies: turned on, a dense-mask attention (the sparse last layer builds its
    mask itself), and nothing but the heads reads the encoder's output (no hidden states or attentions asked for,
    no extra encoder arguments)."""
    config = encoder.config
    return (
        getattr(config, "efficient_pretraining", True)
        and takes_dense_mask(config)
        and not kwargs
        and not (config.output_hidden_states or config.output_attentions or config.is_decoder)
    )


def encode_at_positions(encoder: RobertaModel, inputs: dict, positions: torch.Tensor) -> torch.Tensor:
    """The encoder's last hidden state at `positions` ([batch, n], any order, repeats allowed): [batch, n, H].

    `encoder` is a `SpanRobertaModel`; `inputs` are its forward arguments (input_ids, attention_mask,
    token_type_ids, position_ids, inputs_embeds, and sequence_offsets where the collator gave them).
    """
    attention_mask, position_ids = inputs["attention_mask"], inputs["position_ids"]
    hidden = encoder.embeddings(
        input_ids=inputs["input_ids"],
        token_type_ids=inputs["token_type_ids"],
        position_ids=position_ids,
        inputs_embeds=inputs["inputs_embeds"],
    )
    if position_ids is None:
        mask = create_bidirectional_mask(config=encoder.config, inputs_embeds=hidden, attention_mask=attention_mask)
        packed = {"attention_mask": mask}
    else:
        packed = packed_attention_inputs(encoder, attention_mask, position_ids, hidden,
                                         sequence_offsets=inputs.get("sequence_offsets"))  # fmt: skip
    *layers, last_layer = encoder.encoder.layer
    for layer in layers:
        hidden = layer(hidden, **packed)
    sequence_ids = None if position_ids is None else packed_sequence_ids(position_ids)
    return _layer_at_positions(last_layer, hidden, _query_mask(attention_mask, sequence_ids, positions), positions)


def _query_mask(
    attention_mask: torch.Tensor | None, sequence_ids: torch.Tensor | None, positions: torch.Tensor
) -> torch.Tensor | None:
    """Bool [batch, 1, n, length]: which keys each query at `positions` attends to (the reference's mask, read at
    those rows; see packing.packed_sequence_mask_function), or None when every query attends to
    every key."""
    mask = None
    if attention_mask is not None:
        mask = attention_mask.bool()[:, None, None, :]
    if sequence_ids is not None:
        same = sequence_ids.gather(1, positions)[:, None, :, None] == sequence_ids[:, None, None, :]
        if mask is not None:
            query_is_padding = ~attention_mask.bool().gather(1, positions)[:, None, :, None]
            same = same & (mask | query_is_padding)
        mask = same
    return mask


def _layer_at_positions(
    layer: RobertaLayer, hidden: torch.Tensor, mask: torch.Tensor | None, positions: torch.Tensor
) -> torch.Tensor:
    """`layer(hidden)` read at `positions` [batch, n], computing queries only there: [batch, n, H]."""
    batch_size, num_queries = positions.shape
    queries_in = hidden.gather(1, positions[..., None].expand(-1, -1, hidden.shape[-1]))
    attention = layer.attention.self

    def split_heads(x: torch.Tensor) -> torch.Tensor:
        return x.view(batch_size, -1, attention.num_attention_heads, attention.attention_head_size).transpose(1, 2)

    if mask is not None and attention.config._attn_implementation == "eager":
        mask = torch.zeros(mask.shape, dtype=hidden.dtype, device=hidden.device).masked_fill(
            ~mask, torch.finfo(hidden.dtype).min
        )
    attention_function = ALL_ATTENTION_FUNCTIONS.get_interface(
        attention.config._attn_implementation, eager_attention_forward
    )
    context, _ = attention_function(
        attention,
        split_heads(attention.query(queries_in)),
        split_heads(attention.key(hidden)),
        split_heads(attention.value(hidden)),
        mask,
        dropout=attention.dropout.p if attention.training else 0.0,
        scaling=attention.scaling,
    )
    context = context.reshape(batch_size, num_queries, -1)
    return layer.feed_forward_chunk(layer.attention.output(context, queries_in))


def fuses_decoder_cross_entropy(config, x: torch.Tensor, decoder: nn.Linear) -> bool:
    """Whether `fused_decoder_cross_entropy` applies: turned on, and training on CPU under autocast, where it was
    measured to pay (with bf16: benchmarks/speed/heads.py, its records in benchmarks/RESULTS.md).
    In float32 it was not measured to pay at the step level, and on GPUs it has not been measured."""
    training = torch.is_grad_enabled() and (x.requires_grad or decoder.weight.requires_grad)
    return (
        getattr(config, "efficient_pretraining", True)
        and training
        and x.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
    )


def fused_decoder_cross_entropy(
    x: torch.Tensor, decoder: nn.Linear, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(decoder(x), its cross-entropy against `targets` summed over the targets that are not -100), for x of shape
    [..., H] and targets [...]: the numbers of the reference, through `_DecoderCrossEntropy`."""
    logits, total = _DecoderCrossEntropy.apply(x.flatten(0, -2), decoder.weight, decoder.bias, targets.flatten())
    return logits.view(*x.shape[:-1], -1), total


# Rows of logits whose float32 copy fits in 4 MiB: the fused cross-entropy works through the logits a few rows at a
# time so that its passes over them hit the CPU's cache rather than its memory.
_CROSS_ENTROPY_CHUNK_BYTES = 4 << 20


class _DecoderCrossEntropy(torch.autograd.Function):
    """(logits, loss): logits = x @ weight.T + bias, and the cross-entropy of the logits against `targets`,
    summed over the rows whose target is not -100. The numbers of F.linear then
    F.cross_entropy(logits.float(), ignore_index=-100, reduction="sum").

    As the loss is a plain sum, its gradient with respect to the logits, softmax - one-hot (zero in ignored rows),
    is known in the forward pass. Computing it there, a few rows at a time while they are in the CPU's cache,
    replaces the float32 passes over [rows, vocab] of log_softmax, its backward and the dtype casts, and the
    backward pass only multiplies. Under autocast the matmuls run in its dtype and the softmax in float32, as
    autocast and `logits.float()` have them.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, targets):
        device = x.device.type
        if torch.is_autocast_enabled(device):
            dtype = torch.get_autocast_dtype(device)
            x, weight, bias = x.to(dtype), weight.to(dtype), bias.to(dtype)
        with torch.autocast(device, enabled=False):
            logits = torch.addmm(bias, x, weight.t())
            grad = torch.empty_like(logits)
            loss = torch.zeros((), dtype=torch.float32, device=x.device)
            grad_bias = torch.zeros(logits.shape[1], dtype=torch.float32, device=x.device)
            chunk_rows = min(len(x), max(1, _CROSS_ENTROPY_CHUNK_BYTES // (4 * logits.shape[1])))
            # One float32 buffer serves every chunk: on CPU, first touching fresh memory (page faults) costs
            # more than the arithmetic done in it.
            buffer = logits.new_empty((chunk_rows, logits.shape[1]), dtype=torch.float32)
            for start in range(0, len(x), chunk_rows):
                rows = slice(start, start + chunk_rows)
                chunk_logits = logits[rows]
                chunk = buffer[: len(chunk_logits)].copy_(chunk_logits)
                valid = (targets[rows] != IGNORE_INDEX)[:, None]
                chunk_targets = targets[rows, None].clamp(min=0)
                log_normaliser = chunk.logsumexp(1, keepdim=True)
                loss += ((log_normaliser - chunk.gather(1, chunk_targets)) * valid).sum()
                softmax = chunk.sub_(log_normaliser).exp_()
                softmax.scatter_add_(1, chunk_targets, softmax.new_full(chunk_targets.shape, -1.0))
                softmax.mul_(valid)
                grad_bias += softmax.sum(0)
                grad[rows] = softmax
        ctx.save_for_backward(x, weight, grad, grad_bias)
        ctx.set_materialize_grads(False)
        return logits, loss

    @staticmethod
    def backward(ctx, grad_logits, grad_loss):
        x, weight, grad, grad_bias = ctx.saved_tensors
        # When only the loss is differentiated (training), its gradient is a scalar. It scales the operands and
        # products that are far smaller than [rows, vocab] and [vocab, hidden]: x, the bias gradient, x's gradient.
        scale = grad_loss if grad_logits is None else None
        if scale is None:
            grad = grad_logits if grad_loss is None else grad * grad_loss + grad_logits
            grad_bias = grad.sum(0, dtype=torch.float32)
        else:
            grad_bias = grad_bias * scale
        needs_x, needs_weight, needs_bias, _ = ctx.needs_input_grad
        grad_x = grad @ weight if needs_x else None
        if grad_x is not None and scale is not None:
            grad_x = grad_x * scale
        grad_weight = grad.t() @ (x if scale is None else x * scale) if needs_weight else None
        return grad_x, grad_weight, grad_bias if needs_bias else None, None
