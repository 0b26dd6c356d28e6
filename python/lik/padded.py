"""Padded reranking batches: ``[B, Lq, d]`` queries, ``[B, C, Ld, d]``
candidates with per-sequence lengths (the seed's ``padded`` module; torch).

* :func:`pack_padded` -> :class:`PackedBatch`: the packed (``cu_seqlens``)
  layout of :func:`lik.score_pairs_packed` / :func:`lik.maxsim_varlen`.
* :func:`maxsim_padded`: ``[B, C]`` scores straight from the padded tensors
  (the KD layout with length masks: no packing copy).

Lengths are checked on the host with ``validate=True`` (lik's default: one
device -> host copy on CUDA); with ``validate=False`` nothing is read back
and a length outside ``[0, L]`` is clamped to it.  :func:`maxsim_padded`
skips the check under torch.compile and CUDA graph capture, where nothing
can be read back (:func:`pack_padded` returns host ints: it cannot be
captured).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from . import _api, _lib

__all__ = ["PackedBatch", "pack_padded", "maxsim_padded"]

_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


@dataclass(frozen=True)
class PackedBatch:
    """The packed form of a padded reranking batch (:func:`pack_padded`).

    Every tensor is on the inputs' device.  Iterating yields the fields in
    this order, so ``Q, cu_q, D, cu_d, pq, pd, max_lq, max_ld =
    pack_padded(...)`` unpacks it.

    Attributes:
        Q_packed: ``[sum of query_lengths, d]``, queries' dtype.
        cu_seqlens_q: ``[B + 1]`` int64 query offsets.
        D_packed: ``[sum of doc_lengths, d]``, the candidates row-major over
            ``(b, c)``.
        cu_seqlens_d: ``[B * C + 1]`` int64 candidate offsets.
        pair_q_idx: ``[B * C]`` int64, ``pair_q_idx[b * C + c] = b``.
        pair_d_idx: ``[B * C]`` int64, ``pair_d_idx[b * C + c] = b * C + c``.
        max_seqlen_q: longest query (Python int).
        max_seqlen_d: longest candidate (Python int).
    """

    Q_packed: torch.Tensor
    cu_seqlens_q: torch.Tensor
    D_packed: torch.Tensor
    cu_seqlens_d: torch.Tensor
    pair_q_idx: torch.Tensor
    pair_d_idx: torch.Tensor
    max_seqlen_q: int
    max_seqlen_d: int

    def __iter__(self):
        yield from (self.Q_packed, self.cu_seqlens_q, self.D_packed, self.cu_seqlens_d, self.pair_q_idx,
                    self.pair_d_idx, self.max_seqlen_q, self.max_seqlen_d)


def _check_padded(queries, documents, query_lengths, doc_lengths):
    """Types and shapes of a padded batch.  Returns (B, C, Lq, Ld)."""
    for name, x in (("queries", queries), ("documents", documents), ("query_lengths", query_lengths),
                    ("doc_lengths", doc_lengths)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: expected a torch tensor, got {type(x).__name__}")
    for name, x in (("query_lengths", query_lengths), ("doc_lengths", doc_lengths)):
        if x.dtype not in _INT_DTYPES:
            raise TypeError(f"{name}: dtype {x.dtype} is not an integer dtype")
    if queries.dim() != 3:
        raise ValueError(f"queries: must be [B, Lq, d], got shape {tuple(queries.shape)}")
    if documents.dim() != 4:
        raise ValueError(f"documents: must be [B, C, Ld, d], got shape {tuple(documents.shape)}")
    B, Lq, d = queries.shape
    Bd, C, Ld, dd = documents.shape
    if Bd != B:
        raise ValueError(f"documents: batch B={Bd} does not match queries' B={B} (batch size mismatch)")
    if dd != d:
        raise ValueError(f"documents: d={dd} does not match queries' d={d} (embedding dim mismatch)")
    if tuple(query_lengths.shape) != (B,):
        raise ValueError(f"query_lengths: must be [B={B}], got shape {tuple(query_lengths.shape)}")
    if tuple(doc_lengths.shape) != (B, C):
        raise ValueError(f"doc_lengths: must be [B={B}, C={C}], got shape {tuple(doc_lengths.shape)}")
    return B, C, Lq, Ld


def _length_range(query_lengths, doc_lengths) -> list:
    """[min, max] of query_lengths then of doc_lengths (0 for none), in one
    device -> host copy."""
    zero = torch.zeros(1, dtype=torch.int64, device=query_lengths.device)
    q = torch.cat([query_lengths.long().reshape(-1), zero])
    d = torch.cat([doc_lengths.long().reshape(-1).to(q.device), zero])
    return torch.stack([q.min(), q.max(), d.min(), d.max()]).tolist()


def _check_range(rng: list, Lq: int, Ld: int) -> None:
    for name, lo, hi, dim, L in (("query_lengths", rng[0], rng[1], "Lq", Lq), ("doc_lengths", rng[2], rng[3], "Ld", Ld)):
        if lo < 0 or hi > L:
            why = "a length exceeds the padded extent" if lo >= 0 else "a length is negative"
            raise ValueError(f"{name}: every entry must be in [0, {dim}={L}], got values in [{lo}, {hi}] ({why})")


def _length_masks(queries, query_lengths, doc_lengths, Lq: int, Ld: int):
    """Token masks ``[B, Lq]`` / ``[B, C, Ld]`` of the lengths (clamped to [0, L])."""
    dev = queries.device
    q_mask = torch.arange(Lq, device=dev)[None, :] < query_lengths.to(dev)[:, None]
    d_mask = torch.arange(Ld, device=dev)[None, None, :] < doc_lengths.to(dev)[:, :, None]
    return q_mask, d_mask


def pack_padded(queries, documents, query_lengths, doc_lengths, *, validate: bool = True) -> PackedBatch:
    """Convert a padded reranking batch to the packed layout (the seed's
    ``pack_padded``).

    Args:
        queries: ``[B, Lq, d]`` torch tensor (float32 / float16 / bfloat16 /
            float64); query ``b`` is its first ``query_lengths[b]`` tokens.
        documents: ``[B, C, Ld, d]``, same dtype and ``d``; candidate
            ``(b, c)`` is its first ``doc_lengths[b, c]`` tokens.
        query_lengths: ``[B]`` integer tensor, entries in ``[0, Lq]``.
        doc_lengths: ``[B, C]`` integer tensor, entries in ``[0, Ld]``.
        validate: check the lengths' range on the host (one device -> host
            copy).  False skips the check (lengths are then clamped to
            ``[0, L]``).

    Returns:
        :class:`PackedBatch`.  Zero lengths are allowed (an empty sequence
        scores 0 in the packed calls).  Reading ``max_seqlen_q`` /
        ``max_seqlen_d`` is one more device -> host copy.

    Raises:
        TypeError: an argument is not a torch tensor, lengths not integers.
        ValueError: wrong ndim, batch size or embedding dim mismatch, length
            shapes, lengths out of range (with ``validate``).
    """
    B, C, Lq, Ld = _check_padded(queries, documents, query_lengths, doc_lengths)
    if validate:
        _check_range(_length_range(query_lengths, doc_lengths), Lq, Ld)
    dev = queries.device
    q_mask, d_mask = _length_masks(queries, query_lengths, doc_lengths, Lq, Ld)
    q_len, d_len = q_mask.sum(-1), d_mask.sum(-1).reshape(-1)
    zero = torch.zeros(1, dtype=torch.int64, device=dev)
    flat = torch.arange(B * C, dtype=torch.int64, device=dev)
    _, max_q, _, max_d = _length_range(q_len, d_len)
    return PackedBatch(
        Q_packed=queries[q_mask],
        cu_seqlens_q=torch.cat([zero, q_len.cumsum(0)]),
        D_packed=documents[d_mask],
        cu_seqlens_d=torch.cat([zero, d_len.cumsum(0)]),
        pair_q_idx=flat // max(C, 1),
        pair_d_idx=flat,
        max_seqlen_q=int(max_q),
        max_seqlen_d=int(max_d),
    )


def maxsim_padded(queries, documents, query_lengths, doc_lengths, *, validate: bool = True,
                  normalize: bool = False, backward: str | None = "auto"):
    """Reranking scores from padded inputs -> ``[B, C]`` (the seed's ``maxsim_padded``).

    ``score[b, c] = MaxSim(queries[b, :query_lengths[b]],
    documents[b, c, :doc_lengths[b, c]])``, run as :func:`lik.maxsim`'s KD
    layout on the padded tensors with the lengths (lik_options' q_lengths /
    d_lengths: no mask, no packing copy).

    Args:
        queries: ``[B, Lq, d]`` torch tensor.
        documents: ``[B, C, Ld, d]``, same dtype and ``d``.
        query_lengths: ``[B]`` integer tensor, entries in ``[0, Lq]``.
        doc_lengths: ``[B, C]`` integer tensor, entries in ``[0, Ld]``.
        validate: check the lengths' range on the host (lik's default; one
            device -> host copy on CUDA; skipped under torch.compile and
            while a CUDA graph is captured).  False: no check, no sync;
            lengths outside ``[0, L]`` are clamped to it.
        normalize: per-token L2 normalisation in the kernel.
        backward: ``"auto" | "unified" | "lowmem"`` or None (see :func:`lik.maxsim`).

    Returns:
        ``[B, C]`` float32 (float64 for float64 inputs); an empty sequence
        scores 0.  Differentiable in ``queries`` and ``documents``.

    Raises:
        TypeError: an argument is not a torch tensor, lengths not integers.
        ValueError: wrong ndim / batch sizes / d, lengths out of range (with
            ``validate``).
    """
    _, _, Lq, Ld = _check_padded(queries, documents, query_lengths, doc_lengths)
    if validate and _lib.can_read_back(queries):
        _check_range(_length_range(query_lengths, doc_lengths), Lq, Ld)
    dev = queries.device
    return _api.maxsim(queries, documents, normalize=normalize, backward=backward,
                       q_lengths=query_lengths.to(dev).clamp(0, Lq), d_lengths=doc_lengths.to(dev).clamp(0, Ld))
