"""The seed's ``late_interaction_kernels.backward``: the MaxSim backward
from a saved argmax, over lik's backward (``lik_maxsim_backward``).

The seed has two kernels (``unified``: fp32 atomics; ``lowmem``: input-dtype
grads) and a PyTorch reference; lik has one deterministic backward, so all
three names run it (``backward="unified"`` / ``"lowmem"`` select lik's
strategy of the same name, which gives bitwise the same gradients).
"""

from __future__ import annotations

import math

import torch

from .. import _autograd  # noqa: F401  (registers torch.ops.lik.maxsim_bwd)

__all__ = ["maxsim_backward_unified", "maxsim_backward_unified_reference", "maxsim_backward_lowmem"]


def _backward(grad_scores, Q, D, argmax, q_mask, kd_layout: bool, strategy: str):
    """(grad_Q, grad_D) of MaxSim for the seed's shapes: argmax
    ``[Nq * Nd, Lq]``; with ``kd_layout`` D is ``[Nq * K, Ld, d]``."""
    for name, x in (("grad_scores", grad_scores), ("Q", Q), ("D", D), ("argmax", argmax)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: expected a torch tensor, got {type(x).__name__}")
    if Q.dim() != 3 or D.dim() != 3:
        raise ValueError(f"Q and D must be [N, L, d]; got Q.shape={tuple(Q.shape)}, D.shape={tuple(D.shape)}")
    Nq, Lq = Q.shape[0], Q.shape[1]
    if kd_layout:
        if Nq == 0 or D.shape[0] % Nq:
            raise ValueError(f"kd_layout=True requires D.shape[0] (={D.shape[0]}) to be a multiple of Nq (={Nq})")
        D4 = D.reshape(Nq, D.shape[0] // Nq, D.shape[1], D.shape[2])
    else:
        D4 = D
    grid = (Nq, D4.shape[1] if kd_layout else D.shape[0])
    for name, x, want in (("grad_scores", grad_scores, grid), ("argmax", argmax, grid + (Lq,))):
        if x.numel() != math.prod(want):
            raise ValueError(f"{name}: shape {tuple(x.shape)} has {x.numel()} elements, expected "
                             f"{math.prod(want)} ({list(want)} for Q {tuple(Q.shape)}, D {tuple(D.shape)})")
    if q_mask is not None and q_mask.dtype not in (torch.bool, torch.uint8):
        q_mask = q_mask != 0
    gQ, gD = torch.ops.lik.maxsim_bwd(grad_scores.reshape(grid), Q, D4, q_mask, None,
                                      argmax.reshape(grid + (Lq,)), False, 0, strategy, True, True)
    return gQ, gD.reshape(D.shape)


def maxsim_backward_unified(grad_scores, Q, D, argmax, q_mask=None, *, kd_layout: bool = False):
    """The seed's ``maxsim_backward_unified``: lik's backward
    (``backward="unified"``).

    Args:
        grad_scores: ``[Nq, Nd]`` (``[Nq, K]`` with ``kd_layout``) upstream gradient.
        Q: ``[Nq, Lq, d]``.
        D: ``[Nd, Ld, d]``, or ``[Nq * K, Ld, d]`` with ``kd_layout``.
        argmax: ``[Nq * Nd, Lq]`` int32 from :func:`lik.compat.forward.maxsim_forward`.
        q_mask: optional ``[Nq, Lq]`` mask (bool / uint8 / int8).
        kd_layout: D holds K candidates per query.

    Returns:
        ``(grad_Q, grad_D)`` in the dtypes of ``Q`` and ``D`` (deterministic).

    Raises:
        TypeError, ValueError: non-tensors, shapes (lik's messages).
    """
    return _backward(grad_scores, Q, D, argmax, q_mask, kd_layout, "unified")


def maxsim_backward_lowmem(grad_scores, Q, D, argmax, q_mask=None, *, kd_layout: bool = False):
    """The seed's ``maxsim_backward_lowmem``: lik's backward
    (``backward="lowmem"``); arguments, result and errors as
    :func:`maxsim_backward_unified`.

    Args:
        grad_scores: ``[Nq, Nd]`` (``[Nq, K]``).
        Q: ``[Nq, Lq, d]``.
        D: ``[Nd, Ld, d]`` or ``[Nq * K, Ld, d]``.
        argmax: ``[Nq * Nd, Lq]`` int32.
        q_mask: optional ``[Nq, Lq]`` mask.
        kd_layout: D holds K candidates per query.

    Returns:
        ``(grad_Q, grad_D)`` in the input dtypes.

    Raises:
        TypeError, ValueError: as :func:`maxsim_backward_unified`.
    """
    return _backward(grad_scores, Q, D, argmax, q_mask, kd_layout, "lowmem")


def maxsim_backward_unified_reference(grad_scores, Q, D, argmax, q_mask=None):
    """The seed's ``maxsim_backward_unified_reference``: lik has one backward
    (its float64 reference is ``src/ref``, exercised by lik's tests), so this
    is :func:`maxsim_backward_unified`.

    Args:
        grad_scores: ``[Nq, Nd]``.
        Q: ``[Nq, Lq, d]``.
        D: ``[Nd, Ld, d]``.
        argmax: ``[Nq * Nd, Lq]`` int32.
        q_mask: optional ``[Nq, Lq]`` mask.

    Returns:
        ``(grad_Q, grad_D)`` in the input dtypes.

    Raises:
        TypeError, ValueError: as :func:`maxsim_backward_unified`.
    """
    return _backward(grad_scores, Q, D, argmax, q_mask, False, "unified")
