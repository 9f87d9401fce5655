"""Packed rows through torch's flash attention kernel: each sequence of a packed row attends alone, with no
[batch, 1, length, length] mask, in one direct call of `aten::_flash_attention_forward` per layer.

The kernel takes the batch flattened to [batch * length, heads, head_dim] (a view of the rows, no unpadding) and
int32 cumulative offsets of the sequences in it, and applies attention dropout. It is differentiable through its
own autograd node, which saves the forward's `rng_state` and replays the same dropout mask in
`aten::_flash_attention_backward`; it has meta kernels, so it compiles with no custom op. torch's public
`torch.nn.attention.varlen.varlen_attn` wraps the same kernel but applies no dropout, so it could not train the
recipes, which keep BERT's attention dropout of 0.1.

It is registered with transformers as the attention implementation "varlen_fa2" (torch vendors flash attention 2;
the name holds no "flash", since transformers takes any implementation so named for a flash-attn package kernel), so
every encoder that dispatches through `ALL_ATTENTION_FUNCTIONS` takes it (`attn_implementation="varlen_fa2"`).
Packed rows reach it as the offsets transformers' flash attention reads (`cu_seq_lens_q`, `max_length_q`), which
`packing.packed_attention_inputs` passes on: from the collator (`sequence_offsets`, computed on the host with the
batch, so the forward never synchronises), else derived from the positions. Where the kernel cannot run
(`varlen_fa2_refusal`: no kernel on the device, as on CPU; a dtype or head size it refuses; an unexpected schema of
the private op), packed rows take sdpa's block-diagonal mask instead, and so do rows that are not packed: this
function is then transformers' sdpa, exactly.

This file ships with every checkpoint beside the model files that import it; it imports nothing from spanroberta.
"""

from __future__ import annotations

import torch
import torch.nn.attention
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

VARLEN_FA2 = "varlen_fa2"

_FORWARD = "aten::_flash_attention_forward"
_BACKWARD = "aten::_flash_attention_backward"
# The leading arguments this file passes, by position, as torch 2.13 (and 2.11) declare them; `scale` by name.
_FORWARD_ARGUMENTS = ("query", "key", "value", "cum_seq_q", "cum_seq_k", "max_q", "max_k", "dropout_p", "is_causal",
                      "return_debug_mask")  # fmt: skip
# The CUDA kernel's own limits (flash attention 2, as torch vendors it).
_FLASH_DTYPES = (torch.float16, torch.bfloat16)
_MAX_HEAD_DIM = 256
_HEAD_DIM_MULTIPLE = 8
_MIN_CAPABILITY = (8, 0)


def _schema_problem() -> str | None:
    """Why the private op cannot be called as this file calls it (None: it can), read once at import."""
    try:
        schema = torch.ops.aten._flash_attention_forward.default._schema
    except (AttributeError, RuntimeError):
        return f"this torch ({torch.__version__}) has no {_FORWARD}"
    names = tuple(argument.name for argument in schema.arguments)
    if names[: len(_FORWARD_ARGUMENTS)] != _FORWARD_ARGUMENTS or "scale" not in names or len(schema.returns) != 5:
        return f"{_FORWARD} in this torch ({torch.__version__}) has an unexpected schema: {schema}"
    return None


_SCHEMA_PROBLEM = _schema_problem()


# Compute capabilities on which the flash backward refuses some head sizes when training (torch's sdp_utils.cpp,
# check_requires_grad_and_head_dim_gt192_constraints_on_sm86_89_or_120): heads of 193 to 224, and above 224 with
# dropout, on sm86-sm89 (consumer Ampere, Ada) and sm120-sm121 (consumer Blackwell).
_SMALL_SHARED_MEMORY_CAPABILITIES = ((8, 6), (8, 7), (8, 8), (8, 9), (12, 0), (12, 1))
_BACKWARD_HEAD_DIM_LIMIT = 192
_BACKWARD_HEAD_DIM_WITH_DROPOUT_FROM = 224


# A fact of the machine and torch, not of the batch: torch.compile calls it while tracing, and keeps the answer.
@torch.compiler.assume_constant_result
def varlen_fa2_refusal(
    device: torch.device | str, dtype: torch.dtype, head_dim: int, dropout: float = 0.0, backward: bool = False
) -> str | None:
    """Why varlen_fa2 cannot run packed rows whose attention computes in `dtype` with heads of `head_dim` on
    `device` (None: it can); `backward`: gradients flow through it, with attention dropout `dropout`. The kernel runs
    where torch has one for the device's dispatch key (CUDA; a test may register reference kernels for CPU), and on
    CUDA only in a torch built with flash attention 2 for NVIDIA GPUs with no other flash implementation activated,
    in fp16 or bf16, with head sizes it compiles (and, training, differentiates) for, on compute capability 8.0 or
    newer."""
    if _SCHEMA_PROBLEM is not None:
        return _SCHEMA_PROBLEM
    device = torch.device(device)
    if device.type == "cuda" and (refusal := _cuda_build_refusal()) is not None:
        return refusal
    key = {"cuda": "CUDA", "cpu": "CPU"}.get(device.type)
    if key is None or not all(torch._C._dispatch_has_kernel_for_dispatch_key(op, key) for op in (_FORWARD, _BACKWARD)):
        return f"torch has no flash attention kernel on {device.type}"
    if device.type != "cuda":
        return None
    if dtype not in _FLASH_DTYPES:
        return f"the flash kernel computes in fp16 or bf16 only, and attention here computes in {dtype} (use --bf16)"
    if head_dim > _MAX_HEAD_DIM or head_dim % _HEAD_DIM_MULTIPLE:
        return (f"the flash kernel takes head sizes that are multiples of {_HEAD_DIM_MULTIPLE} up to {_MAX_HEAD_DIM}, "
                f"not {head_dim}")  # fmt: skip
    capability = torch.cuda.get_device_capability(device)
    found = ".".join(map(str, capability))
    if capability < _MIN_CAPABILITY:
        return f"the flash kernel needs compute capability 8.0 or newer, and this GPU has {found}"
    refused_backward = head_dim > _BACKWARD_HEAD_DIM_LIMIT and (
        head_dim <= _BACKWARD_HEAD_DIM_WITH_DROPOUT_FROM or dropout > 0
    )
    if backward and capability in _SMALL_SHARED_MEMORY_CAPABILITIES and refused_backward:
        return (f"the flash kernel's backward on compute capability {found} refuses heads of {head_dim} (above "
                f"{_BACKWARD_HEAD_DIM_LIMIT}: up to {_BACKWARD_HEAD_DIM_WITH_DROPOUT_FROM}, or beyond it with "
                "attention dropout)")  # fmt: skip
    return None


def _cuda_build_refusal() -> str | None:
    """Why this torch's CUDA build cannot run varlen_fa2's kernel (None: it can)."""
    if torch.version.hip is not None:
        # aten's flash op on ROCm is another kernel (AOTriton or CK) with its own limits, never tested here.
        return (f"this torch is built for ROCm (HIP {torch.version.hip}), and {VARLEN_FA2} is built on NVIDIA's "
                "flash kernel")  # fmt: skip
    if not torch.backends.cuda.is_flash_attention_available():
        return "this torch is built without flash attention (torch.backends.cuda.is_flash_attention_available())"
    # torch.nn.attention.activate_flash_attention_impl("FA3" or "FA4") replaces aten's flash ops process-wide with
    # kernels that apply no attention dropout and take other head sizes.
    current = torch.nn.attention.current_flash_attention_impl()
    if current is not None:
        return (f"flash attention {current} is activated in place of torch's flash attention 2 "
                "(torch.nn.attention.activate_flash_attention_impl), and applies no attention dropout")  # fmt: skip
    return None


def attention_compute_dtype(device: torch.device | str, states_dtype: torch.dtype) -> torch.dtype:
    """The dtype attention computes in: autocast's where it is on for `device`, else the hidden states'."""
    device_type = torch.device(device).type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return states_dtype


def packed_sequence_offsets(position_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """Int32 [sequences + 1]: where each sequence of the flattened batch [batch * length] starts, then its end.

    A sequence starts at each row's first token, wherever the position does not follow the one before, and
    wherever padding (attention_mask 0) starts or stops, so that a padding tail is a sequence of its own that no
    real token attends to. On a device, reading the starts synchronises with it: the collator computes them on the
    host instead (`DataCollatorForSpanMasking(return_sequence_offsets=True)`)."""
    follows = torch.diff(position_ids, dim=-1) == 1
    if attention_mask is not None:
        real = attention_mask.bool()
        follows = follows & (real[:, 1:] == real[:, :-1])
    row_start = torch.ones_like(position_ids[:, :1], dtype=torch.bool)
    starts = torch.cat([row_start, ~follows], dim=-1).flatten().nonzero().flatten()
    return torch.cat([starts, starts.new_tensor([position_ids.numel()])]).to(torch.int32)


def varlen_fa2_attention_forward(
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
    heads, head_dim]. With `cu_seq_lens_q` (int32 offsets of the sequences in the flattened batch) each sequence
    attends to itself alone, through the flash kernel; without, it is sdpa (under `attention_mask`)."""
    if cu_seq_lens_q is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)  # fmt: skip
    batch_size, num_heads, length, head_dim = query.shape

    def flattened(states: torch.Tensor) -> torch.Tensor:  # [batch, heads, length, D] -> [batch * length, heads, D]
        return states.transpose(1, 2).reshape(batch_size * length, num_heads, head_dim)

    output, *_ = torch.ops.aten._flash_attention_forward(
        flattened(query),
        flattened(key),
        flattened(value),
        cu_seq_lens_q,
        cu_seq_lens_q,
        max_length_q or length,  # an upper bound: the row length, static, never read from the device
        max_length_q or length,
        dropout,
        False,  # not causal
        False,  # no debug mask
        scale=scaling,
    )
    return output.view(batch_size, length, num_heads, head_dim), None


# Rows that are not packed (or packed rows the kernel cannot run) get sdpa's mask and attention.
AttentionInterface.register(VARLEN_FA2, varlen_fa2_attention_forward)
AttentionMaskInterface.register(VARLEN_FA2, sdpa_mask)

__all__ = [
    "VARLEN_FA2",
    "attention_compute_dtype",
    "packed_sequence_offsets",
    "varlen_fa2_attention_forward",
    "varlen_fa2_refusal",
]
