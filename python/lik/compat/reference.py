"""The seed's ``late_interaction_kernels.reference``: MaxSim written in plain
torch, the dense ``[.., Lq, Ld]`` similarity tensor materialised — slow and
memory-hungry on purpose, an oracle independent of lik's kernels.

Every function is differentiable (autograd through ordinary torch ops, so a
test can backpropagate through it and compare gradients with lik's).  Sums
and maxima are computed in float64 from the inputs' exact values; the
result is float64 where an input (``Q`` or ``D``, the query for the residual
and PLAID scores) is float64 — as the seed's — and float32 otherwise.

The semantics are lik's (``include/lik.h``), which agree with the seed's on
finite inputs: a masked document token loses every max (it is never read:
NaN / Inf in masked tokens change nothing); a query token with no valid
document token — none unmasked, or all of their similarities NaN (a NaN
never wins a max) — adds 0; a masked query token adds 0; ties give the
gradient to the first (lowest-index) document token, as lik's argmax.  An
infinite similarity of a valid token is a maximum like any number (the
seed's reference turns a non-finite maximum into 0).  Normalisation is
``x / max(||x||, 1e-12)`` (``torch.nn.functional.normalize``).
"""

from __future__ import annotations

import torch

__all__ = ["NEG_INF", "maxsim_reference", "maxsim_reference_varlen", "maxsim_reference_scatter",
           "maxsim_padded_reference", "maxsim_from_hidden_reference", "plaid_approx_score_reference",
           "unpack_residuals_reference", "maxsim_residual_reference"]

#: The value a masked similarity takes before the max: it loses to every number.
NEG_INF = float("-inf")


def _out_dtype(*xs) -> torch.dtype:
    return torch.float64 if any(x.dtype == torch.float64 for x in xs) else torch.float32


def _keep(mask, shape, name: str):
    """A bool mask of ``shape`` (True = valid) from a bool / integer mask of
    that shape or of its last dimension (one mask for every sequence), or None."""
    if mask is None:
        return None
    if tuple(mask.shape) not in (tuple(shape), tuple(shape[-1:])):
        raise ValueError(f"{name} must be {list(shape)} or {list(shape[-1:])} (one entry per token), got "
                         f"{list(mask.shape)}")
    return (mask != 0).expand(shape)


def _lengths_mask(lengths, L: int, device):
    """``[.., L]`` bool: position < length (the prefix a length names)."""
    return torch.arange(L, device=device) < lengths.to(device=device, dtype=torch.int64)[..., None]


def _normalize(x):
    return torch.nn.functional.normalize(x, p=2, dim=-1, eps=1e-12)


def _reduce(S, d_keep=None, q_keep=None):
    """The one MaxSim reduction: ``S [.., Lq, Ld]`` similarities (float64),
    ``d_keep`` / ``q_keep`` bool masks broadcastable to ``[.., 1, Ld]`` /
    ``[.., Lq]`` -> ``[..]``: sum over valid query tokens of the max over
    valid, non-NaN document tokens (0 where there is none)."""
    valid = ~torch.isnan(S)
    if d_keep is not None:
        valid = valid & d_keep
    best = S.masked_fill(~valid, NEG_INF).max(dim=-1).values  # max(dim): the gradient goes to the first maximum
    best = torch.where(valid.any(dim=-1), best, torch.zeros_like(best))
    if q_keep is not None:
        best = torch.where(q_keep, best, torch.zeros_like(best))
    return best.sum(dim=-1)


def _zero_masked(X, keep):
    """``X`` with its masked tokens replaced by 0, so garbage there (NaN /
    Inf) reaches neither the similarities nor the gradient."""
    return X if keep is None else torch.where(keep[..., None], X, torch.zeros((), dtype=X.dtype, device=X.device))


def maxsim_reference(Q, D, q_mask=None, d_mask=None, *, normalize: bool = False):
    """MaxSim by a dense float64 einsum.

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]`` (one query); any float dtype.
        D: ``[Nd, Ld, d]``, ``[Ld, d]`` (one document) or ``[Nq, K, Ld, d]``
            (KD layout: query ``i`` against its own ``K`` documents).
        q_mask: optional ``[Nq, Lq]`` bool or integer mask, nonzero = valid
            (masked tokens add 0); ``[Lq]``: the same mask for every query.
        d_mask: optional ``[Nd, Ld]`` / ``[Nq, K, Ld]`` mask (masked tokens
            lose every max); ``[Ld]``: the same mask for every document.
        normalize: L2-normalise every token first.

    Returns:
        ``[Nq, Nd]`` (``[Nq, K]`` for KD; a 2-D ``Q`` / ``D`` drops its
        dimension) float32, float64 for a float64 input; differentiable in
        ``Q`` and ``D``.

    Raises:
        ValueError: ``Q`` not 2-D / 3-D, ``D`` not 2-D / 3-D / 4-D, different
            ``d``, a KD ``D`` whose first dimension is not ``Nq``, a mask not
            shaped as its token grid.
    """
    if Q.dim() not in (2, 3) or D.dim() not in (2, 3, 4):
        raise ValueError(f"Q must be [B, L, d] or [L, d] and D [B, L, d], [L, d] or [Nq, K, L, d]; got Q "
                         f"{list(Q.shape)}, D {list(D.shape)}")
    out = _out_dtype(Q, D)
    q1, d1 = Q.dim() == 2, D.dim() == 2
    Q, D = (Q[None] if q1 else Q), (D[None] if d1 else D)
    kd = D.dim() == 4
    if Q.shape[-1] != D.shape[-1] or (kd and D.shape[0] != Q.shape[0]):
        raise ValueError(f"Q {list(Q.shape)} and D {list(D.shape)} do not match (d, or KD's Nq)")
    qk = _keep(q_mask, Q.shape[:2], "q_mask")
    dk = _keep(d_mask, D.shape[:-1], "d_mask")
    Qf, Df = _zero_masked(Q.to(torch.float64), qk), _zero_masked(D.to(torch.float64), dk)
    if normalize:
        Qf, Df = _normalize(Qf), _normalize(Df)
    if kd:  # [Nq, K, Lq, Ld]
        S = torch.einsum("isc,iktc->ikst", Qf, Df)
        scores = _reduce(S, None if dk is None else dk[:, :, None, :], None if qk is None else qk[:, None, :])
    else:  # [Nq, Nd, Lq, Ld]
        S = torch.einsum("isc,jtc->ijst", Qf, Df)
        scores = _reduce(S, None if dk is None else dk[None, :, None, :], None if qk is None else qk[:, None, :])
    if d1:
        scores = scores[:, 0]
    if q1:
        scores = scores[0]
    return scores.to(out)


def _unpack(X, cu):
    """Packed ``X [T, d]`` + offsets ``cu [N + 1]`` -> padded ``[N, L, d]`` and
    its ``[N, L]`` validity (differentiable in ``X``)."""
    cu = cu.to(device=X.device, dtype=torch.int64)
    if cu.dim() != 1 or cu.numel() < 1 or bool((cu[1:] < cu[:-1]).any()) or int(cu[-1]) > X.shape[0]:
        raise ValueError(f"cu_seqlens must be [N + 1] non-decreasing offsets into {X.shape[0]} tokens")
    lengths = cu[1:] - cu[:-1]
    L = int(lengths.max()) if lengths.numel() else 0
    keep = _lengths_mask(lengths, L, X.device)
    idx = torch.where(keep, cu[:-1, None] + torch.arange(L, device=X.device), 0)
    return X[idx.clamp(max=max(X.shape[0] - 1, 0))] if X.shape[0] else X.new_zeros(idx.shape + X.shape[1:]), keep


def maxsim_reference_varlen(Q, D, cu_seqlens_q, cu_seqlens_d):
    """MaxSim of packed sequences, every query against every document.

    Args:
        Q: ``[total_q, d]``; D: ``[total_d, d]``.
        cu_seqlens_q, cu_seqlens_d: ``[Nq + 1]`` / ``[Nd + 1]`` integer offsets
            (sequence ``i`` is rows ``cu[i] .. cu[i+1]-1``).

    Returns:
        ``[Nq, Nd]`` float32 (float64 for a float64 input), differentiable;
        an empty sequence scores 0.

    Raises:
        ValueError: offsets that are not non-decreasing or run past the tokens.
    """
    Qp, qk = _unpack(Q, cu_seqlens_q)
    Dp, dk = _unpack(D, cu_seqlens_d)
    return maxsim_reference(Qp, Dp, qk, dk)


def maxsim_reference_scatter(Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, pair_q_idx, pair_d_idx):
    """MaxSim of the listed (query, document) pairs of packed sequences.

    Args:
        Q_packed: ``[total_q, d]``; D_packed: ``[total_d, d]``.
        cu_seqlens_q, cu_seqlens_d: ``[Nq + 1]`` / ``[Nd + 1]`` offsets.
        pair_q_idx, pair_d_idx: ``[P]`` integer sequence indices.

    Returns:
        ``[P]`` float32 (float64 for a float64 input), differentiable.

    Raises:
        ValueError: bad offsets; IndexError: an index out of range.
    """
    Qp, qk = _unpack(Q_packed, cu_seqlens_q)
    Dp, dk = _unpack(D_packed, cu_seqlens_d)
    qi, dj = pair_q_idx.long().to(Qp.device), pair_d_idx.long().to(Qp.device)
    Qs, Ds = Qp[qi].to(torch.float64), Dp[dj].to(torch.float64)
    S = torch.einsum("psc,ptc->pst", _zero_masked(Qs, qk[qi]), _zero_masked(Ds, dk[dj]))
    return _reduce(S, dk[dj][:, None, :], qk[qi]).to(_out_dtype(Q_packed, D_packed))


def maxsim_padded_reference(queries, documents, query_lengths, doc_lengths):
    """MaxSim of padded queries against their own candidates, lengths as prefixes.

    Args:
        queries: ``[B, Lq, d]``; documents: ``[B, C, Ld, d]``.
        query_lengths: ``[B]``; doc_lengths: ``[B, C]`` integer (tokens at or
            past a length are padding).

    Returns:
        ``[B, C]`` float32 (float64 for a float64 input), differentiable.

    Raises:
        ValueError: shapes as :func:`maxsim_reference` (KD layout).
    """
    qk = _lengths_mask(query_lengths, queries.shape[1], queries.device)
    dk = _lengths_mask(doc_lengths, documents.shape[2], queries.device)
    return maxsim_reference(queries, documents, qk, dk)


def maxsim_from_hidden_reference(Q, H_d, W, b=None, d_mask=None, *, normalize: bool = True):
    """MaxSim of ``Q`` against documents projected from hidden states:
    ``D = H_d @ W.T + b`` (L2-normalised when ``normalize``), ``Q`` as given.

    Args:
        Q: ``[Nq, Lq, d_out]`` or ``[Lq, d_out]``.
        H_d: ``[Nd, Ld, d_model]``; W: ``[d_out, d_model]``; b: optional ``[d_out]``.
        d_mask: optional ``[Nd, Ld]`` mask.
        normalize: L2-normalise the projected document tokens.

    Returns:
        ``[Nq, Nd]`` (``[Nd]`` for 2-D ``Q``) float32 (float64 for a float64
        input), differentiable in ``Q``, ``H_d``, ``W`` and ``b``.

    Raises:
        ValueError: shapes as :func:`maxsim_reference`; RuntimeError: ``W`` /
            ``b`` not matching ``H_d`` (``torch.nn.functional.linear``).
    """
    f64 = torch.float64
    D = torch.nn.functional.linear(H_d.to(f64), W.to(f64), None if b is None else b.to(f64))
    if normalize:
        D = _normalize(D)
    return maxsim_reference(Q, D, d_mask=d_mask).to(_out_dtype(Q, H_d, W))


def plaid_approx_score_reference(query_centroid_scores, codes, doc_lengths):
    """PLAID's centroid-interaction score of one query against padded documents:
    ``score[b] = sum_s max_{t < doc_lengths[b]} qcs[codes[b, t], s]``.

    Args:
        query_centroid_scores: ``[n_centroids, Lq]`` float (``centroids @ Q.T``).
        codes: ``[B, max_Ld]`` integer centroid ids (padding past a length is
            never read, whatever it holds).
        doc_lengths: ``[B]`` integer lengths.

    Returns:
        ``[B]`` float32 (float64 for float64 scores); an empty document scores 0.

    Raises:
        ValueError: ``codes`` not 2-D, ``doc_lengths`` not ``[B]``; IndexError:
            a valid code out of range.
    """
    if codes.dim() != 2 or doc_lengths.shape != codes.shape[:1]:
        raise ValueError(f"codes must be [B, max_Ld] and doc_lengths [B]; got {list(codes.shape)}, "
                         f"{list(doc_lengths.shape)}")
    keep = _lengths_mask(doc_lengths, codes.shape[1], codes.device)
    qcs = query_centroid_scores.to(torch.float64)
    S = qcs[torch.where(keep, codes.long(), 0)].transpose(1, 2)  # [B, Lq, max_Ld]
    return _reduce(S, keep[:, None, :]).to(_out_dtype(query_centroid_scores))


def unpack_residuals_reference(residuals, nbits: int, d: int):
    """The residual bucket codes of PLAID bytes in the seed's bit order: field
    ``k`` of a token is bits ``(k % (8 / nbits)) * nbits ..`` of byte
    ``k // (8 / nbits)``, least significant first (lik's ``layout="lik"``).

    Args:
        residuals: ``[.., d * nbits / 8]`` uint8.
        nbits: 1, 2, 4 or 8.
        d: the number of fields per token.

    Returns:
        ``[.., d]`` int32 bucket indices in ``[0, 2**nbits)``.

    Raises:
        ValueError: ``nbits`` not 1 / 2 / 4 / 8, or ``residuals`` not
            ``d * nbits / 8`` bytes wide.
    """
    if nbits not in (1, 2, 4, 8) or residuals.shape[-1] != d * nbits // 8 or d * nbits % 8:
        raise ValueError(f"residuals must be [.., d * nbits / 8] with nbits in (1, 2, 4, 8); got "
                         f"{list(residuals.shape)}, nbits={nbits}, d={d}")
    per_byte = 8 // nbits
    field = torch.arange(d, device=residuals.device)
    byte = residuals.to(torch.int32)[..., field // per_byte]
    return (byte >> ((field % per_byte) * nbits).to(torch.int32)) & ((1 << nbits) - 1)


def maxsim_residual_reference(Q, codes, residuals, doc_lengths, centroids, bucket_weights, nbits: int, *,
                              normalize: bool = True):
    """MaxSim of ``Q`` against PLAID-compressed documents, decoded densely:
    token ``t`` of document ``j`` is ``centroids[codes[j, t]] +
    bucket_weights[unpack_residuals_reference(residuals[j, t])]``.

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``.
        codes: ``[Nd, max_Ld]`` integer centroid ids.
        residuals: ``[Nd, max_Ld, d * nbits / 8]`` uint8 (the seed's bit order).
        doc_lengths: ``[Nd]`` integer lengths (padding is never read).
        centroids: ``[n_centroids, d]``; bucket_weights: ``[2**nbits]``.
        nbits: 1, 2, 4 or 8.
        normalize: L2-normalise ``Q`` and the decoded tokens.

    Returns:
        ``[Nq, Nd]`` (``[Nd]`` for 2-D ``Q``) float32 (float64 for a float64
        ``Q``), differentiable in ``Q``.

    Raises:
        ValueError: as :func:`unpack_residuals_reference` and :func:`maxsim_reference`.
    """
    keep = _lengths_mask(doc_lengths, codes.shape[1], codes.device)
    d = centroids.shape[-1]
    buckets = unpack_residuals_reference(residuals, nbits, d).long()
    emb = centroids.to(torch.float64)[torch.where(keep, codes.long(), 0)] + bucket_weights.to(torch.float64)[buckets]
    Qf = Q.to(torch.float64)
    if normalize:
        Qf, emb = _normalize(Qf), _normalize(emb)
    return maxsim_reference(Qf, emb, d_mask=keep).to(_out_dtype(Q))
