"""The seed's ``late_interaction_kernels.reference`` names that score dense
tokens, run by lik in float64 (lik's float64 path is its reference
semantics, ``src/ref``) and returned as float32."""

from __future__ import annotations

import torch

import lik as _lik

from . import padded as _padded
from ._native import native

__all__ = ["maxsim_reference", "maxsim_reference_varlen", "maxsim_reference_scatter", "maxsim_padded_reference",
           "maxsim_from_hidden_reference"]


def _f64(x):
    return x.detach().to(torch.float64)


def maxsim_reference(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False):
    """MaxSim in float64 (:func:`lik.maxsim` on float64 copies).

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``; D: ``[Nd, Ld, d]``, ``[Ld, d]`` or
            ``[Nq, K, Ld, d]``.
        q_mask, d_mask: optional bool masks.
        normalize: L2-normalise tokens.

    Returns:
        float32 scores, shaped as :func:`lik.maxsim`'s (no autograd).

    Raises:
        TypeError, ValueError: as :func:`lik.maxsim`.
    """
    return _lik.maxsim(_f64(Q), _f64(D), q_mask, d_mask, normalize=normalize).float()


def maxsim_reference_varlen(Q, D, cu_seqlens_q, cu_seqlens_d):
    """:func:`lik.maxsim_varlen` in float64.

    Args:
        Q: ``[total_q, d]``; D: ``[total_d, d]``.
        cu_seqlens_q, cu_seqlens_d: ``[Nq + 1]`` / ``[Nd + 1]`` offsets.

    Returns:
        ``[Nq, Nd]`` float32.

    Raises:
        TypeError, ValueError: as :func:`lik.maxsim_varlen`.
    """
    return _lik.maxsim_varlen(_f64(Q), _f64(D), cu_seqlens_q, cu_seqlens_d).float()


def maxsim_reference_scatter(Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, pair_q_idx, pair_d_idx):
    """:func:`lik.score_pairs_packed` in float64.

    Args:
        Q_packed: ``[total_q, d]``; D_packed: ``[total_d, d]``.
        cu_seqlens_q, cu_seqlens_d: offsets.
        pair_q_idx, pair_d_idx: ``[P]`` pair indices.

    Returns:
        ``[P]`` float32.

    Raises:
        TypeError, ValueError: as :func:`lik.score_pairs_packed`.
    """
    return _lik.score_pairs_packed(_f64(Q_packed), _f64(D_packed), cu_seqlens_q, cu_seqlens_d, pair_q_idx,
                                   pair_d_idx).float()


def maxsim_padded_reference(queries, documents, query_lengths, doc_lengths):
    """:func:`lik.compat.padded.maxsim_padded` in float64.

    Args:
        queries: ``[B, Lq, d]``; documents: ``[B, C, Ld, d]``.
        query_lengths: ``[B]``; doc_lengths: ``[B, C]``.

    Returns:
        ``[B, C]`` float32.

    Raises:
        TypeError, ValueError: as :func:`lik.maxsim_padded`.
    """
    return _padded.maxsim_padded(_f64(queries), _f64(documents), query_lengths, doc_lengths).float()


def maxsim_from_hidden_reference(Q, H_d, W, b=None, d_mask=None, *, normalize: bool = True):
    """``lik.maxsim_from_hidden`` (the fused head) in float64.

    Args:
        Q: ``[Nq, Lq, d_out]``; H_d: ``[Nd, Ld, d_model]``; W: ``[d_out, d_model]``;
            b: optional ``[d_out]``.
        d_mask: optional ``[Nd, Ld]`` bool mask.
        normalize: L2-normalise the projected tokens.

    Returns:
        ``[Nq, Nd]`` float32.

    Raises:
        NotImplementedError: this build of lik has no fused head.
        TypeError, ValueError: as ``lik.maxsim_from_hidden``.
    """
    fn = native("maxsim_from_hidden", "maxsim_reference(Q, F.normalize(F.linear(H_d, W, b), dim=-1), d_mask=d_mask)")
    return fn(_f64(Q), _f64(H_d), _f64(W), None if b is None else _f64(b), d_mask, normalize=normalize).float()
