"""The seed's ``late_interaction_kernels.plaid`` over :mod:`lik.plaid`.

The seed packs residual fields least significant first within a byte
(lik's ``layout="lik"``); these wrappers keep that order.  lik's native
functions default to ``layout="colbert"`` (ColBERTv2 / fast-plaid / PyLate
bytes).  ``plaid_approx_score_reference`` and ``maxsim_residual_reference``
are :mod:`.reference`'s, re-exported here as the seed does.
"""

from __future__ import annotations

import torch

from .. import plaid as _plaid
from .reference import maxsim_residual_reference, plaid_approx_score_reference

__all__ = ["plaid_approx_score", "plaid_approx_score_reference", "maxsim_residual", "maxsim_residual_reference",
           "maxsim_residual_varlen"]


def plaid_approx_score(query_centroid_scores, codes, doc_lengths):
    """The seed's ``plaid_approx_score``: one query, padded codes ->
    ``[B]`` (over :func:`lik.plaid.plaid_approx_score`, batched and packed).

    Args:
        query_centroid_scores: ``[n_centroids, Lq]`` float (``centroids @ Q.T``).
        codes: ``[B, max_Ld]`` integer centroid ids, each in
            ``[0, n_centroids)`` (lik raises ValueError on others; the seed
            clamps them to 0).
        doc_lengths: ``[B]`` integer lengths (clamped to ``[0, max_Ld]``).

    Returns:
        ``[B]`` float32: ``sum_s max_{t < doc_lengths[b]} qcs[codes[b, t], s]``;
        an empty document scores 0.

    Raises:
        ValueError: ``query_centroid_scores`` not 2-D, ``codes`` not 2-D,
            ``doc_lengths`` not ``[B]``, a code out of range.
    """
    if query_centroid_scores.dim() != 2:
        raise ValueError("query_centroid_scores must be [n_centroids, Lq]")
    if codes.dim() != 2:
        raise ValueError("codes must be [B, max_Ld]")
    if doc_lengths.dim() != 1 or doc_lengths.shape[0] != codes.shape[0]:
        raise ValueError("doc_lengths must be [B] with B matching codes")
    mask = torch.arange(codes.shape[1], device=codes.device)[None, :] < doc_lengths.to(codes.device)[:, None]
    cu = torch.cat([torch.zeros(1, dtype=torch.int64, device=codes.device), mask.sum(-1).cumsum(0)])
    return _plaid.plaid_approx_score(query_centroid_scores.t(), codes[mask], cu)


def maxsim_residual(Q, codes, residuals, doc_lengths, centroids, bucket_weights, nbits: int, *,
                    normalize: bool = True):
    """The seed's ``maxsim_residual``: :func:`lik.plaid.maxsim_residual` with
    the seed's bit order (``layout="lik"``).

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``.
        codes: ``[Nd, max_Ld]`` integer centroid ids.
        residuals: ``[Nd, max_Ld, d * nbits / 8]`` uint8.
        doc_lengths: ``[Nd]`` integer lengths.
        centroids: ``[n_centroids, d]``; bucket_weights: ``[2**nbits]``.
        nbits: 1, 2, 4 or 8 (the seed: 2, 4, 8).
        normalize: L2-normalise Q and the decoded tokens.

    Returns:
        ``[Nq, Nd]`` float32 (``[Nd]`` for 2-D ``Q``), differentiable in ``Q``.

    Raises:
        TypeError, ValueError: as :func:`lik.plaid.maxsim_residual`.
    """
    return _plaid.maxsim_residual(Q, codes, residuals, doc_lengths, centroids, bucket_weights, nbits,
                                  normalize=normalize, layout="lik")


def maxsim_residual_varlen(Q, codes_flat, residuals_flat, cu_seqlens_d, centroids, bucket_weights, nbits: int, *,
                           max_seqlen_d: int | None = None, normalize: bool = True):
    """The seed's ``maxsim_residual_varlen``:
    :func:`lik.plaid.maxsim_residual_varlen` with ``layout="lik"``.

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``.
        codes_flat: ``[T]`` integer centroid ids.
        residuals_flat: ``[T, d * nbits / 8]`` uint8.
        cu_seqlens_d: ``[Nd + 1]`` offsets.
        centroids, bucket_weights, nbits: as :func:`maxsim_residual`.
        max_seqlen_d: optional bound (checked).
        normalize: L2-normalise Q and the decoded tokens.

    Returns:
        ``[Nq, Nd]`` float32 (``[Nd]`` for 2-D ``Q``).

    Raises:
        TypeError, ValueError: as :func:`lik.plaid.maxsim_residual_varlen`.
    """
    return _plaid.maxsim_residual_varlen(Q, codes_flat, residuals_flat, cu_seqlens_d, centroids, bucket_weights,
                                         nbits, max_seqlen_d=max_seqlen_d, normalize=normalize, layout="lik")
