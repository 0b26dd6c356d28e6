"""float64 references for the training tests (plain torch autograd)."""

from __future__ import annotations

import torch


def normalized(x, normalize):
    if not normalize:
        return x
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(1e-12)


def _reduce(S, qm, dm):
    # S [..., Lq, Ld]; qm [..., Lq]; dm [..., Ld]
    S = S.masked_fill(~dm.unsqueeze(-2), float("-inf"))
    m = S.max(-1).values if S.shape[-1] else torch.full(S.shape[:-1], float("-inf"), dtype=S.dtype)
    m = torch.where(torch.isfinite(m) & qm, m, torch.zeros_like(m))
    return m.sum(-1)


def ref_cross(Q, D, qm=None, dm=None, normalize=False):
    """Q [Nq, Lq, d], D [Nd, Ld, d] -> [Nq, Nd] in float64."""
    Q, D = normalized(Q.double(), normalize), normalized(D.double(), normalize)
    Nq, Lq, _ = Q.shape
    Nd, Ld, _ = D.shape
    qm = torch.ones(Nq, Lq, dtype=torch.bool) if qm is None else qm.bool()
    dm = torch.ones(Nd, Ld, dtype=torch.bool) if dm is None else dm.bool()
    S = torch.einsum("isk,jtk->ijst", Q, D)
    return _reduce(S, qm[:, None, :].expand(Nq, Nd, Lq), dm[None, :, :].expand(Nq, Nd, Ld))


def ref_kd(Q, D, qm=None, dm=None, normalize=False):
    """Q [Nq, Lq, d], D [Nq, K, Ld, d] -> [Nq, K]."""
    Q, D = normalized(Q.double(), normalize), normalized(D.double(), normalize)
    Nq, Lq, _ = Q.shape
    _, K, Ld, _ = D.shape
    qm = torch.ones(Nq, Lq, dtype=torch.bool) if qm is None else qm.bool()
    dm = torch.ones(Nq, K, Ld, dtype=torch.bool) if dm is None else dm.bool()
    S = torch.einsum("isk,ijtk->ijst", Q, D)
    return _reduce(S, qm[:, None, :].expand(Nq, K, Lq), dm)


def ref_pairs(Q, D, qm=None, dm=None, normalize=False):
    """Q [B, Lq, d], D [B, Ld, d] -> [B]."""
    return ref_kd(Q, D[:, None], qm, None if dm is None else dm[:, None], normalize)[:, 0]


def ref_varlen(Q, D, cu_q, cu_d, qm=None, dm=None, normalize=False, pairs=None):
    """Packed references, one pair at a time -> [Nq, Nd] or [P]."""
    Qn, Dn = normalized(Q.double(), normalize), normalized(D.double(), normalize)
    cu_q, cu_d = [int(x) for x in cu_q], [int(x) for x in cu_d]
    qm = torch.ones(Q.shape[0], dtype=torch.bool) if qm is None else qm.bool()
    dm = torch.ones(D.shape[0], dtype=torch.bool) if dm is None else dm.bool()

    def one(i, j):
        q = Qn[cu_q[i]:cu_q[i + 1]]
        d = Dn[cu_d[j]:cu_d[j + 1]]
        S = q @ d.T
        return _reduce(S, qm[cu_q[i]:cu_q[i + 1]], dm[cu_d[j]:cu_d[j + 1]])

    if pairs is not None:
        out = [one(int(i), int(j)) for i, j in zip(*pairs)]
        return torch.stack(out) if out else torch.zeros(0, dtype=torch.float64)
    Nq, Nd = len(cu_q) - 1, len(cu_d) - 1
    rows = [torch.stack([one(i, j) for j in range(Nd)]) if Nd else torch.zeros(0, dtype=torch.float64)
            for i in range(Nq)]
    return torch.stack(rows) if Nq else torch.zeros(0, Nd, dtype=torch.float64)


def packed_from_padded(X, lengths):
    """[N, L, d] + [N] lengths -> packed [sum, d], cu_seqlens int32."""
    parts = [X[n, : int(lengths[n])] for n in range(X.shape[0])]
    cu = torch.zeros(X.shape[0] + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(torch.as_tensor(lengths, dtype=torch.int32), 0)
    return torch.cat(parts, 0) if parts else X.new_zeros(0, X.shape[-1]), cu
