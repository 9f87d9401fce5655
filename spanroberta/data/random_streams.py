"""Counter-based random numbers for masking: every random number is a hash of (row key, stream, position), so it
depends on nothing else (not on the batch, its order or padding, nor on what other code drew before). The hash is
exact 32-bit integer arithmetic on int64 tensors, the same on every device."""

from __future__ import annotations

from enum import IntEnum

import torch

MASK32 = 0xFFFFFFFF
_GOLDEN = 0x9E3779B9  # 2**32 / golden ratio: consecutive positions land far apart before hashing


class Stream(IntEnum):
    """Independent random streams: the same (row key, position) gives unrelated numbers in each."""

    SPAN_START = 1
    SPAN_LENGTH = 2
    REPLACEMENT = 3
    RANDOM_TOKEN = 4
    BUDGET = 5
    TOKEN_SELECTION = 6
    UNIT_ORDER = 7
    WORD_FILL_ORDER = 8


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2**32 for x in [0, 2**32). `c` is split into 16-bit halves so no int64 product overflows
    (an overflowing int64 multiply is undefined behaviour in the C++ kernels, even if it usually wraps)."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & MASK32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """The "lowbias32" avalanche hash (Chris Wellons' hash prospector), a bijection on 32-bit values.

    Takes and returns int64 tensors holding values in [0, 2**32); every step is exact integer arithmetic.
    """
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def mix32_int(value: int) -> int:
    """`mix32` of one Python int (taken modulo 2**32)."""
    return int(mix32(torch.tensor(value & MASK32, dtype=torch.long)))


_STREAM_SALTS = {stream: mix32_int(int(stream) * _GOLDEN) for stream in Stream}


def random_bits(keys: torch.Tensor, stream: Stream, positions: torch.Tensor) -> torch.Tensor:
    """32 random bits (int64 in [0, 2**32)) for each row key [B] and position ([N] or [B, N]): shape [B, N]."""
    stream_keys = mix32(keys ^ _STREAM_SALTS[stream])
    return mix32((stream_keys[:, None] + positions * _GOLDEN) & MASK32)


def uniform(bits: torch.Tensor) -> torch.Tensor:
    """Uniform floats in [0, 1) from random bits: the top 24 bits, which a float32 holds exactly."""
    return (bits >> 8).to(torch.float32) * 2.0**-24


def randint(bits: torch.Tensor, high: torch.Tensor | int) -> torch.Tensor:
    """Uniform integers in [0, high) from random bits (multiply-shift; exact in int64 for high < 2**31)."""
    return (bits * high) >> 32
