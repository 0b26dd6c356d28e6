"""The seed's ``late_interaction_kernels.padded``: :class:`PackedBatch`,
:func:`pack_padded`, :func:`maxsim_padded` (over :mod:`lik.padded`)."""

from __future__ import annotations

import dataclasses

import torch

from .. import padded as _padded

__all__ = ["PackedBatch", "pack_padded", "maxsim_padded"]

PackedBatch = _padded.PackedBatch


def _check_positive(query_lengths, doc_lengths) -> None:
    """The seed's ``validate=True`` also rejects empty sequences (lik
    scores them 0): one more host read, in validate mode only."""
    for name, x in (("query_lengths", query_lengths), ("doc_lengths", doc_lengths)):
        if isinstance(x, torch.Tensor) and x.numel() and bool((x <= 0).any()):
            raise ValueError(f"{name} must all be > 0 (validate=True)")


def pack_padded(queries, documents, query_lengths, doc_lengths, *, validate: bool = False):
    """The seed's ``pack_padded``: :func:`lik.pack_padded` with the seed's
    default ``validate=False`` and int32 offsets / pair indices.

    Args:
        queries: ``[B, Lq, d]``.
        documents: ``[B, C, Ld, d]``, same dtype.
        query_lengths: ``[B]`` int32 / int64, entries in ``[0, Lq]``.
        doc_lengths: ``[B, C]`` int32 / int64, entries in ``[0, Ld]``.
        validate: check on the host that every length is in ``[1, L]``
            (ValueError); False asserts ``length <= L`` on the lengths'
            device without a host read, as the seed does
            (``torch._assert_async``: a RuntimeError, on CUDA at the next
            synchronisation, and the CUDA context is then unusable), and
            clamps negative lengths to 0.

    Returns:
        :class:`PackedBatch` with int32 ``cu_seqlens_q``, ``cu_seqlens_d``,
        ``pair_q_idx``, ``pair_d_idx``.

    Raises:
        TypeError, ValueError: as :func:`lik.pack_padded`.
        RuntimeError: ``validate=False`` and a length past the padded extent.
    """
    if validate:
        _check_positive(query_lengths, doc_lengths)
    else:
        for x, ext in ((query_lengths, queries.shape[-2:-1]), (doc_lengths, documents.shape[-2:-1])):
            if isinstance(x, torch.Tensor) and ext:
                torch._assert_async(x.le(ext[0]).all())
    b = _padded.pack_padded(queries, documents, query_lengths, doc_lengths, validate=validate)
    return dataclasses.replace(
        b,
        cu_seqlens_q=b.cu_seqlens_q.to(torch.int32),
        cu_seqlens_d=b.cu_seqlens_d.to(torch.int32),
        pair_q_idx=b.pair_q_idx.to(torch.int32),
        pair_d_idx=b.pair_d_idx.to(torch.int32),
    )


def maxsim_padded(queries, documents, query_lengths, doc_lengths, *, validate: bool = False):
    """The seed's ``maxsim_padded``: :func:`lik.maxsim_padded` with the seed's
    default ``validate=False`` (no host check; lengths clamped to ``[0, L]``).

    Args:
        queries: ``[B, Lq, d]``.
        documents: ``[B, C, Ld, d]``.
        query_lengths: ``[B]`` integer tensor.
        doc_lengths: ``[B, C]`` integer tensor.
        validate: check on the host that every length is in ``[1, L]``
            (ValueError); False clamps them to ``[0, L]``.

    Returns:
        ``[B, C]`` float32 scores on ``queries``' device, differentiable.

    Raises:
        TypeError, ValueError: as :func:`lik.maxsim_padded`.
    """
    if validate:
        _check_positive(query_lengths, doc_lengths)
    return _padded.maxsim_padded(queries, documents, query_lengths, doc_lengths, validate=validate)
