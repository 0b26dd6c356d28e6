"""The seed's ``late_interaction_kernels.score_pairs``: :func:`score_pairs_packed`."""

from __future__ import annotations

import lik as _lik

from .varlen import seqlen_bounds

__all__ = ["score_pairs_packed"]


def score_pairs_packed(Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, pair_q_idx, pair_d_idx, *,
                       max_seqlen_q: int | None = None, max_seqlen_d: int | None = None):
    """The seed's ``score_pairs_packed`` (``max_seqlen_*`` keyword-only, as
    the seed): :func:`lik.score_pairs_packed`.

    Args:
        Q_packed: ``[total_q, d]``; D_packed: ``[total_d, d]``.
        cu_seqlens_q, cu_seqlens_d: ``[Nq + 1]`` / ``[Nd + 1]`` offsets.
        pair_q_idx, pair_d_idx: ``[P]`` int32 / int64 in ``[0, Nq)`` / ``[0, Nd)``.
        max_seqlen_q, max_seqlen_d: optional bounds.

    Returns:
        ``[P]`` float32, differentiable in ``Q_packed`` and ``D_packed``.

    Raises:
        TypeError, ValueError: as :func:`lik.score_pairs_packed`; a too-short
            ``max_seqlen_*`` as :class:`lik.compat.varlen.SeqlenBoundError`
            (also a RuntimeError, as the seed's).
    """
    return seqlen_bounds(_lik.score_pairs_packed, Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, pair_q_idx,
                         pair_d_idx, max_seqlen_q, max_seqlen_d)
