"""Packed rows and the attention that keeps their sequences apart, for every encoder (RoBERTa's, ALBERT's,
ELECTRA's, and continued stock encoders).

Several sequences may share a row when `position_ids` restart at each of them (transformers' padding-free
convention, as `DataCollatorWithFlattening` emits it). Every sequence then attends only to itself, computed exactly
as it would be alone, through the inputs `packed_attention_inputs` gives the encoder in its configured attention
implementation's own form: for varlen_fa2 where its kernel runs, no mask but the sequences' offsets in the
flattened batch; else a mask (block-diagonal for sdpa, eager and varlen_fa2 elsewhere, a block mask for
flex_attention). Flash attention takes no mask: `SpanRobertaModel` flattens the batch instead, which the other
encoders do not. `PackedRowsEncoderMixin` is the encoder forward that takes packed rows (RoBERTa's and ALBERT's).

varlen_fa2 (`varlen_fa2_attention_forward`) calls torch's flash attention 2 kernel, `aten::_flash_attention_forward`,
directly: it takes the batch flattened to [batch * length, heads, head_dim] (a view, no unpadding) and int32
offsets of the sequences, and applies attention dropout, replayed in the backward from the forward's `rng_state`;
it has meta kernels, so it compiles with no custom op. torch's public `varlen_attn` wraps the same kernel without
dropout, so it could not train the recipes (BERT's attention dropout of 0.1). The name holds no "flash", since
transformers takes any implementation so named for a flash-attn package kernel. The offsets come from the collator
(`sequence_offsets`, computed on the host, so the forward never synchronises), else from the positions. Where the
kernel cannot run (`varlen_fa2_refusal`), packed rows take sdpa's block-diagonal mask, and so do rows that are not
packed: the function is then transformers' sdpa, exactly.

Which implementations run packed rows on which device, and which cannot apply attention dropout, is said here
once (`packed_rows_refusal`, `refuses_dropout`); training decides a run's packing from them
(pretraining/attention.py).

This file ships with every checkpoint beside the model files that import it; it imports nothing from spanroberta.
"""

from __future__ import annotations

import torch
import torch.nn.attention
from transformers import AttentionInterface, PretrainedConfig, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import (
    AttentionMaskInterface,
    create_bidirectional_mask,
    create_bidirectional_sliding_window_mask,
    sdpa_mask,
)
from transformers.modeling_outputs import ModelOutput
from transformers.utils import logging

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


class PackedRowsEncoderMixin:
    """The forward of spanroberta's encoders (RoBERTa's and ALBERT's), which also takes packed rows; mixed in before
    transformers' encoder class, whose forward it calls.

    With `position_ids`, each run of consecutive positions is one sequence and attends only to
    itself, through the inputs `packed_attention_inputs` gives the configured attention implementation (a
    block-diagonal mask for sdpa and eager, the sequences' offsets for varlen_fa2, a block mask for
    flex_attention), or, where `flattens_packed_rows` says so, by flattening the batch into one row. Without
    `position_ids`, or as a decoder (`config.is_decoder`, which packing does not serve), it is exactly the
    encoder's own forward.
    """

    def forward(
        self,
        # Named here, not shared: the Trainer's column filter (like a reader) learns a model's inputs from this list.
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        sequence_offsets: torch.Tensor | None = None,
        **kwargs,
    ) -> ModelOutput | tuple:
        r"""
        sequence_offsets (`[sequences + 1]`, int32): for packed rows, where each sequence starts in the flattened
            batch, then its end, as `DataCollatorForSpanMasking(return_sequence_offsets=True)` gives them; read by
            varlen_fa2 only, which otherwise derives them from `position_ids` (a device synchronisation).
        """
        inputs = {"input_ids": input_ids, "token_type_ids": token_type_ids, "inputs_embeds": inputs_embeds}
        # ALBERT's config has no `is_decoder`: its encoder is never one.
        if position_ids is None or getattr(self.config, "is_decoder", False):
            return self._encoder_forward(attention_mask=attention_mask, position_ids=position_ids, **inputs, **kwargs)
        if self.flattens_packed_rows():
            return self._flattened_forward(attention_mask, position_ids, inputs, kwargs)
        packed = packed_attention_inputs(self, attention_mask, position_ids, inputs_embeds,
                                         sequence_offsets=sequence_offsets)  # fmt: skip
        return self._encoder_forward(position_ids=position_ids, **packed, **inputs, **kwargs)

    def flattens_packed_rows(self) -> bool:
        """Whether packed rows are isolated by flattening the batch (then `_flattened_forward` runs them) rather
        than by the inputs of `packed_attention_inputs`."""
        return False

    def _encoder_forward(self, **inputs) -> ModelOutput | tuple:
        """transformers' encoder forward (of the class this mixin comes before), which reads packed rows only
        through the inputs given."""
        return super().forward(**inputs)


__all__ = [
    "ATTENTION_IMPLEMENTATIONS",
    "FLEX_ATTENTION_ON_CPU",
    "NO_SEQUENCE_OFFSETS",
    "VARLEN_FA2",
    "PackedRowsEncoderMixin",
    "attention_compute_dtype",
    "head_size",
    "is_flash_attention",
    "packed_attention_inputs",
    "packed_rows_path",
    "packed_rows_refusal",
    "packed_sequence_ids",
    "packed_sequence_mask_function",
    "packed_sequence_offsets",
    "refuses_dropout",
    "takes_dense_mask",
    "varlen_fa2_attention_forward",
    "varlen_fa2_refusal",
]
