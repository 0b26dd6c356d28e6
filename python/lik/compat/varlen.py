"""The seed's ``late_interaction_kernels.varlen``: :func:`maxsim_varlen`."""

from __future__ import annotations

import lik as _lik

__all__ = ["maxsim_varlen"]


class SeqlenBoundError(ValueError, RuntimeError):
    """A ``max_seqlen_q`` / ``max_seqlen_d`` shorter than a sequence of its
    ``cu_seqlens``: lik's ValueError, and the RuntimeError the seed's device
    assert raises there."""


def seqlen_bounds(call, *args):
    """call(*args), lik's ValueError for a too-short ``max_seqlen_*`` raised
    as :class:`SeqlenBoundError` (the seed's packed calls)."""
    try:
        return call(*args)
    except ValueError as e:
        if str(e).startswith(("max_seqlen_q:", "max_seqlen_d:")):
            raise SeqlenBoundError(str(e)) from None
        raise


def maxsim_varlen(Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, max_seqlen_q: int | None = None,
                  max_seqlen_d: int | None = None):
    """The seed's ``maxsim_varlen``: :func:`lik.maxsim_varlen` (no masks,
    ``normalize=False``).

    Args:
        Q_packed: ``[total_q, d]``.
        D_packed: ``[total_d, d]``, same dtype and ``d``.
        cu_seqlens_q: ``[Nq + 1]`` int32 / int64 offsets.
        cu_seqlens_d: ``[Nd + 1]`` int32 / int64 offsets.
        max_seqlen_q, max_seqlen_d: optional bounds (see :func:`lik.maxsim_varlen`).

    Returns:
        ``[Nq, Nd]`` float32, differentiable in ``Q_packed`` and ``D_packed``.

    Raises:
        TypeError, ValueError: as :func:`lik.maxsim_varlen`; a too-short
            ``max_seqlen_*`` as :class:`SeqlenBoundError` (also a
            RuntimeError, as the seed's).
    """
    return seqlen_bounds(_lik.maxsim_varlen, Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, max_seqlen_q,
                         max_seqlen_d)
