"""The seed's ``late_interaction_kernels.autograd`` (where PyLate's and
colpali-engine's native backends import ``maxsim`` / ``maxsim_pairs`` from):
defined here, re-exported by :mod:`lik.compat` (the package's own
``maxsim`` / ``maxsim_pairs``)."""

from __future__ import annotations

import lik as _lik

__all__ = ["maxsim", "maxsim_pairs"]


def maxsim(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False, backward: str | None = None):
    """The seed's ``maxsim``: :func:`lik.maxsim` with the seed's default
    ``backward=None`` (= ``"auto"``).

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``; float32 / float16 / bfloat16 / float64.
        D: ``[Nd, Ld, d]``, ``[Ld, d]`` or ``[Nq, K, Ld, d]`` (KD layout).
        q_mask, d_mask: optional bool masks (True = valid token).
        normalize: L2-normalise tokens inside the kernel.
        backward: ``None | "auto" | "unified" | "lowmem"``.

    Returns:
        float32 scores ``[Nq, Nd]`` / ``[Nq, K]`` (2-D inputs squeeze their
        dimension), differentiable in ``Q`` and ``D``.

    Raises:
        TypeError, ValueError, lik.LikError: as :func:`lik.maxsim`.
    """
    return _lik.maxsim(Q, D, q_mask, d_mask, normalize=normalize, backward=backward)


def maxsim_pairs(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False, backward: str | None = None):
    """The seed's ``maxsim_pairs``: :func:`lik.maxsim_pairs` with
    ``backward=None`` (= ``"auto"``).

    Args:
        Q: ``[B, Lq, d]``.
        D: ``[B, Ld, d]`` with ``Q.shape[0] == D.shape[0]``.
        q_mask, d_mask: optional ``[B, Lq]`` / ``[B, Ld]`` bool masks.
        normalize: L2-normalise tokens inside the kernel.
        backward: ``None | "auto" | "unified" | "lowmem"``.

    Returns:
        ``[B]`` float32 scores, differentiable.

    Raises:
        TypeError, ValueError, lik.LikError: as :func:`lik.maxsim_pairs`.
    """
    return _lik.maxsim_pairs(Q, D, q_mask, d_mask, normalize=normalize, backward=backward)
