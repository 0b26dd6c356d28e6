"""The seed's ``late_interaction_kernels.forward``: :func:`maxsim_forward`."""

from __future__ import annotations

from .. import _api

__all__ = ["maxsim_forward"]


def maxsim_forward(Q, D, q_mask=None, d_mask=None, *, save_argmax: bool = False, normalize: bool = False):
    """The seed's ``maxsim_forward``: lik's forward C call (no autograd),
    optionally with the argmax.

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``.
        D: ``[Nd, Ld, d]`` or ``[Ld, d]``.
        q_mask, d_mask: optional bool masks.
        save_argmax: also return the winning document token per query token.
        normalize: L2-normalise tokens inside the kernel.

    Returns:
        ``(scores, argmax)``: float32 scores ``[Nq, Nd]`` (2-D inputs squeeze
        their dimension); argmax int32 ``[Nq * Nd, Lq]`` (-1 where a query
        token is masked or has no valid document token; the seed leaves those
        unspecified) or None.

    Raises:
        TypeError, ValueError: as :func:`lik.maxsim`.
    """
    scores, argmax = _api._forward(Q, D, q_mask, d_mask, normalize=normalize, with_argmax=save_argmax)
    if argmax is not None:
        argmax = argmax.reshape(-1, argmax.shape[-1])
    return scores, argmax
