"""The seed's ``late_interaction_kernels.fp8`` over lik's low-precision
functions (``lik.maxsim_inference_fp8`` and the FP8 quantisers) where this
build of lik has them; otherwise each raises NotImplementedError naming the
alternative (bf16 / fp16 inputs to :func:`lik.maxsim`)."""

from __future__ import annotations

import torch

from ._native import native

__all__ = ["maxsim_inference_fp8", "quantize_fp8_per_tensor", "quantize_fp8_per_token",
           "dequantize_fp8_per_tensor", "dequantize_fp8_per_token"]

_INSTEAD = "lik.maxsim on bfloat16 / float16 tensors (lik's 2-byte inference path)"


def maxsim_inference_fp8(Q, D, *, scale_Q, scale_D, q_mask=None, d_mask=None):
    """The seed's ``maxsim_inference_fp8``: ``lik.maxsim_inference_fp8``.

    Args:
        Q: ``[Nq, Lq, d]`` float8 (e4m3 / e5m2).
        D: ``[Nd, Ld, d]`` float8.
        scale_Q, scale_D: per-tensor ``()`` or per-token float32 scales.
        q_mask, d_mask: optional bool masks.

    Returns:
        ``[Nq, Nd]`` float32 scores of the dequantised tokens (no autograd).

    Raises:
        NotImplementedError: no FP8 MaxSim in this build of lik.
        TypeError, ValueError: as ``lik.maxsim_inference_fp8``.
    """
    return native("maxsim_inference_fp8", _INSTEAD)(Q, D, scale_Q=scale_Q, scale_D=scale_D, q_mask=q_mask,
                                                     d_mask=d_mask)


def quantize_fp8_per_tensor(X, dtype=torch.float8_e4m3fn):
    """The seed's ``quantize_fp8_per_tensor``: ``lik.quantize_fp8_per_tensor``.

    Args:
        X: float tensor ``[..., d]``.
        dtype: ``torch.float8_e4m3fn`` or ``torch.float8_e5m2``.

    Returns:
        ``(X_fp8, scale)`` with a 0-d float32 scale.

    Raises:
        NotImplementedError: not in this build of lik.
    """
    return native("quantize_fp8_per_tensor", _INSTEAD)(X, dtype)


def quantize_fp8_per_token(X, dtype=torch.float8_e4m3fn):
    """The seed's ``quantize_fp8_per_token``: ``lik.quantize_fp8_per_token``.

    Args:
        X: float tensor ``[..., d]``.
        dtype: ``torch.float8_e4m3fn`` or ``torch.float8_e5m2``.

    Returns:
        ``(X_fp8, scale)`` with a float32 scale ``[...]`` per token.

    Raises:
        NotImplementedError: not in this build of lik.
    """
    return native("quantize_fp8_per_token", _INSTEAD)(X, dtype)


def dequantize_fp8_per_tensor(X_fp8, scale):
    """The seed's ``dequantize_fp8_per_tensor``: ``lik.dequantize_fp8_per_tensor``.

    Args:
        X_fp8: float8 tensor; scale: 0-d float32.

    Returns:
        float32 tensor ``X_fp8 * scale``.

    Raises:
        NotImplementedError: not in this build of lik.
    """
    return native("dequantize_fp8_per_tensor", _INSTEAD)(X_fp8, scale)


def dequantize_fp8_per_token(X_fp8, scale):
    """The seed's ``dequantize_fp8_per_token``: ``lik.dequantize_fp8_per_token``.

    Args:
        X_fp8: float8 tensor ``[..., d]``; scale: float32 ``[...]``.

    Returns:
        float32 tensor ``X_fp8 * scale[..., None]``.

    Raises:
        NotImplementedError: not in this build of lik.
    """
    return native("dequantize_fp8_per_token", _INSTEAD)(X_fp8, scale)
