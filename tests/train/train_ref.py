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


def _grid(Q, D, layout):
    if layout == 1:
        return [Q.shape[0]]
    if D.dim() == 4:
        return [D.shape[0], D.shape[1]]
    return ([Q.shape[0]] if Q.dim() == 3 else []) + ([D.shape[0]] if D.dim() == 3 else [])


def _packed_grid(cu_q, cu_d, pair_q):
    if pair_q is not None:
        return [pair_q.shape[0]]
    return [cu_q.shape[0] - 1, cu_d.shape[0] - 1]


def rescore_padded(Q, D, argmax, layout: int, normalize: bool) -> torch.Tensor:
    """Scores re-summed from a forward's argmax, sum_s <Qn[i,s], Dn[j, argmax]>, in
    Q's dtype and differentiable by torch (layout: 0 cross / KD, 1 pairs)."""
    if Q.numel() == 0 or D.numel() == 0:  # Nq, Lq, Nd, K or Ld = 0: zeros (or empty)
        return torch.zeros(_grid(Q, D, layout), dtype=Q.dtype, device=Q.device)
    Qn, Dn = normalized(Q, normalize), normalized(D, normalize)
    Q3 = Qn if Qn.dim() == 3 else Qn.unsqueeze(0)
    if layout == 1:  # pairs: D [B, Ld, d], argmax [B, Lq]
        am = argmax.long()
        rows = torch.gather(Dn, 1, am.clamp_min(0).unsqueeze(-1).expand(-1, -1, Dn.shape[-1]))
        dots = (rows * Q3).sum(-1)
        return torch.where(am >= 0, dots, torch.zeros_like(dots)).sum(-1)
    if Dn.dim() == 4:  # KD: [Nq, K, Ld, d], argmax [Nq, K, Lq]
        Nq, K, Ld, d = Dn.shape
        am = argmax.long()
        rows = torch.gather(
            Dn.reshape(Nq * K, Ld, d), 1, am.reshape(Nq * K, -1).clamp_min(0).unsqueeze(-1).expand(-1, -1, d)
        ).reshape(Nq, K, -1, d)
        dots = (rows * Q3[:, None]).sum(-1)
        return torch.where(am >= 0, dots, torch.zeros_like(dots)).sum(-1)
    D3 = Dn if Dn.dim() == 3 else Dn.unsqueeze(0)
    Nq, Nd, Lq = Q3.shape[0], D3.shape[0], Q3.shape[1]
    am = argmax.long().reshape(Nq, Nd, Lq)
    j = torch.arange(Nd, device=am.device)[None, :, None]
    rows = D3[j, am.clamp_min(0)]
    dots = (rows * Q3[:, None]).sum(-1)
    out = torch.where(am >= 0, dots, torch.zeros_like(dots)).sum(-1)
    return out.reshape(_grid(Q, D, layout))


def rescore_packed(Q, D, cu_q, cu_d, pair_q, pair_d, argmax, normalize) -> torch.Tensor:
    """rescore_padded for the packed calls (varlen; pair lists with pair_q / pair_d)."""
    Qn, Dn = normalized(Q, normalize), normalized(D, normalize)
    grid = _packed_grid(cu_q, cu_d, pair_q)
    Lmax = argmax.shape[-1]
    if Qn.shape[0] == 0 or Dn.shape[0] == 0 or Lmax == 0 or 0 in grid:
        return torch.zeros(grid, dtype=Q.dtype, device=Q.device)
    cq, cd = cu_q.long(), cu_d.long()
    if pair_q is not None:
        qi, dj = pair_q.long(), pair_d.long()
        am = argmax.long()  # [P, L]
        s = torch.arange(Lmax, device=Q.device)
        qrow = (cq[qi][:, None] + s[None, :]).clamp_max(Qn.shape[0] - 1)
        drow = (cd[dj][:, None] + am.clamp_min(0)).clamp_max(Dn.shape[0] - 1)
        dots = (Qn[qrow] * Dn[drow]).sum(-1)
    else:
        am = argmax.long()  # [Nq, Nd, L]
        s = torch.arange(Lmax, device=Q.device)
        qrow = (cq[:-1][:, None, None] + s[None, None, :]).clamp_max(Qn.shape[0] - 1)
        drow = (cd[:-1][None, :, None] + am.clamp_min(0)).clamp_max(Dn.shape[0] - 1)
        dots = (Qn[qrow.expand_as(am)] * Dn[drow]).sum(-1)
    return torch.where(am >= 0, dots, torch.zeros_like(dots)).sum(-1)
