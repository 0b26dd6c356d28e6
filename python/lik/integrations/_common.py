"""Checks shared by the PyLate and colpali-engine wrappers: when lik can take a
call, and the dtype the package's own code would have returned."""

from __future__ import annotations

import torch

#: dtypes lik's kernels take (Q and D of one dtype).
LIK_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
#: devices lik runs on (the CUDA forward; the CUDA backward where built).
LIK_DEVICES = ("cpu", "cuda")


def fits(Q, D, q_dim: int, d_dim: int) -> bool:
    """True when lik computes this call: torch tensors of the given ranks, one
    float dtype lik takes, one device lik runs on, the same embedding size,
    and no empty dimension (those keep the package's own code and its
    behaviour, errors included)."""
    if not (isinstance(Q, torch.Tensor) and isinstance(D, torch.Tensor)):
        return False
    if Q.dim() != q_dim or D.dim() != d_dim:
        return False
    if Q.dtype != D.dtype or Q.dtype not in LIK_DTYPES:
        return False
    if Q.device != D.device or Q.device.type not in LIK_DEVICES:
        return False
    if Q.shape[-1] != D.shape[-1]:
        return False
    return Q.numel() > 0 and D.numel() > 0


def mask_fits(mask, shape, device) -> bool:
    """None, or a tensor of exactly ``shape`` on ``device`` (anything else is
    left to the package's own code)."""
    if mask is None:
        return True
    return isinstance(mask, torch.Tensor) and tuple(mask.shape) == tuple(shape) and mask.device == device


def result_dtype(Q: torch.Tensor, *masks) -> torch.dtype:
    """The dtype of ``einsum(Q, D) * mask ...`` in torch: the embeddings'
    dtype, promoted by floating-point masks (bool / integer masks keep it)."""
    dt = Q.dtype
    for m in masks:
        if m is not None and m.is_floating_point():
            dt = torch.promote_types(dt, m.dtype)
    return dt


def as_dtype(scores: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """lik returns float32 scores (float64 for float64 inputs); the packages'
    torch code returns the input dtype.  Cast to it (differentiable)."""
    return scores if scores.dtype == dtype else scores.to(dtype)


# ---- NaN: the packages' rule on lik's scores -----------------------------------------------
#
# lik's MaxSim skips a NaN similarity (it never wins a max: include/lik.h), so
# NaN embeddings give finite scores.  The packages' torch code (einsum, a
# multiply by the masks, max / amax, sum) propagates it: a NaN anywhere in
# query i's or document j's embeddings -- masked tokens included, as
# 0 * NaN is NaN -- makes score [i, j] NaN, so a diverging training run shows
# a NaN loss.  The wrappers put that back: lik's scores, then NaN where either
# side holds a NaN (one pass over the inputs; the gradient of the other
# scores is unchanged).  A NaN similarity made of infinite inputs (inf * 0 in
# a dot product) still follows lik's rule.


def nan_seqs(x: torch.Tensor, batch_dims: int) -> torch.Tensor:
    """Bool ``x.shape[:batch_dims]``: which sequences hold a NaN."""
    return torch.isnan(x).flatten(batch_dims).any(-1)


def nan_packed(x: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
    """Bool ``[n]``: which packed sequences ``x[cu[i]:cu[i+1]]`` hold a NaN."""
    tok = torch.isnan(x).any(-1).to(torch.int64).cumsum(0)
    tok = torch.cat([tok.new_zeros(1), tok])
    return tok[cu_seqlens[1:]] > tok[cu_seqlens[:-1]]


def with_nan(scores: torch.Tensor, bad: torch.Tensor) -> torch.Tensor:
    """``scores`` with NaN where ``bad`` (broadcast to the scores' shape)."""
    return scores.masked_fill(bad, float("nan"))
