"""The seed's ``late_interaction_kernels.topk``: :func:`maxsim_topk`."""

from __future__ import annotations

import lik as _lik

__all__ = ["maxsim_topk"]


def maxsim_topk(Q, D, k: int, q_mask=None, d_mask=None, *, normalize: bool = False, chunk_size: int | None = None,
                largest: bool = True, sorted: bool = True):
    """The seed's ``maxsim_topk``: :func:`lik.retrieve` with ``top_k=k``,
    ``chunk=chunk_size`` and the seed's default ``normalize=False``.

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``.
        D: ``[Nd, Ld, d]`` or ``[Ld, d]``.
        k: results per query, clamped to ``Nd``.
        q_mask, d_mask: optional bool masks.
        normalize: L2-normalise tokens inside the kernel.
        chunk_size: accepted; lik streams with bounded scratch regardless.
        largest, sorted: as :func:`torch.topk` (results are always sorted).

    Returns:
        ``(scores, indices)`` float32 / int64 ``[Nq, min(k, Nd)]``.

    Raises:
        ValueError: ``k <= 0`` ("top_k must be positive"), shapes.
        TypeError: dtypes.
    """
    return _lik.retrieve(Q, D, k, q_mask, d_mask, normalize=normalize, chunk=chunk_size, largest=largest,
                         sorted=sorted)
