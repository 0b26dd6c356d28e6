"""Independent float64 MaxSim reference for the tests (never calls lik).

score[i, j] = sum_{s valid} max_{t valid} <Q[i,s], D[j,t]>, masked document
tokens lose as -inf, a query token with no valid document token adds 0.
Computed from the exact input values (fp16 / bf16 inputs are widened to
float64 first, so a comparison can use a tight tolerance).
"""

from __future__ import annotations

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def f64(x):
    """Exact float64 copy of a numpy array or torch tensor (any dtype)."""
    if x is None:
        return None
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bool:
            return x.numpy().copy()
        return x.to(torch.float64).numpy()
    x = np.asarray(x)
    if x.dtype == np.bool_:
        return x.copy()
    return x.astype(np.float64)


def as_bool(m):
    if m is None:
        return None
    if torch is not None and isinstance(m, torch.Tensor):
        m = m.detach().cpu().numpy()
    return np.asarray(m) != 0


def l2n(x):
    n = np.sqrt((x * x).sum(-1, keepdims=True))
    return x / np.maximum(n, 1e-12)


def _one(q, d, qm, dm):
    """q [Lq, k], d [Ld, k], qm [Lq] bool, dm [Ld] bool -> (score, abs_scale)."""
    Lq, Ld = q.shape[0], d.shape[0]
    total = 0.0
    scale = 0.0
    for s in range(Lq):
        if not qm[s]:
            continue
        valid = np.nonzero(dm)[0]
        if valid.size == 0:
            continue
        sims = d[valid] @ q[s]
        total += sims.max()
        scale += (np.abs(d[valid]) @ np.abs(q[s])).max()
    return total, scale


def maxsim_ref(Q, D, q_mask=None, d_mask=None, normalize=False):
    """Cross / KD / 2-D reference mirroring lik.maxsim's layouts.

    Returns (scores float64, abs_scale float64) with scores' shape; abs_scale
    is sum_s max_t sum_k |q_k d_k|, the size an fp32 rounding error scales
    with."""
    Q, D = f64(Q), f64(D)
    qm, dm = as_bool(q_mask), as_bool(d_mask)
    if normalize:
        Q, D = l2n(Q), l2n(D)
    q2 = Q.ndim == 2
    if q2:
        Q = Q[None]
        qm = None if qm is None else qm[None]
    if qm is None:
        qm = np.ones(Q.shape[:2], bool)
    Nq = Q.shape[0]
    if D.ndim == 4:
        K = D.shape[1]
        if dm is None:
            dm = np.ones(D.shape[:3], bool)
        out = np.zeros((Nq, K))
        sc = np.zeros((Nq, K))
        for i in range(Nq):
            for k in range(K):
                out[i, k], sc[i, k] = _one(Q[i], D[i, k], qm[i], dm[i, k])
        return out, sc
    d2 = D.ndim == 2
    if d2:
        D = D[None]
        dm = None if dm is None else dm[None]
    if dm is None:
        dm = np.ones(D.shape[:2], bool)
    Nd = D.shape[0]
    out = np.zeros((Nq, Nd))
    sc = np.zeros((Nq, Nd))
    for i in range(Nq):
        for j in range(Nd):
            out[i, j], sc[i, j] = _one(Q[i], D[j], qm[i], dm[j])
    if q2 and d2:
        return out.reshape(()), sc.reshape(())
    if q2:
        return out[0], sc[0]
    if d2:
        return out[:, 0], sc[:, 0]
    return out, sc


def maxsim_ref_einsum(Q, D, q_mask=None, d_mask=None, normalize=False):
    """Vectorised cross-product reference for 3-D Q and D (same semantics;
    used for the larger cases).  -inf masking, then 0 for empty rows."""
    Q, D = f64(Q), f64(D)
    qm, dm = as_bool(q_mask), as_bool(d_mask)
    if normalize:
        Q, D = l2n(Q), l2n(D)
    Nq, Lq, _ = Q.shape
    Nd, Ld, _ = D.shape
    if qm is None:
        qm = np.ones((Nq, Lq), bool)
    if dm is None:
        dm = np.ones((Nd, Ld), bool)
    # Masked tokens may hold NaN / Inf: zero them before the products so they
    # cannot leak through 0 * inf; the -inf mask then removes them.
    Qc = np.where(qm[..., None], Q, 0.0)
    Dc = np.where(dm[..., None], D, 0.0)
    if Lq == 0 or Ld == 0 or Nq == 0 or Nd == 0:
        return np.zeros((Nq, Nd)), np.zeros((Nq, Nd))
    S = np.einsum("isk,jtk->ijst", Qc, Dc)
    A = np.einsum("isk,jtk->ijst", np.abs(Qc), np.abs(Dc))
    neg = ~dm[None, :, None, :]
    S = np.where(neg, -np.inf, S)
    A = np.where(neg, -np.inf, A)
    m = S.max(-1)
    a = A.max(-1)
    ok = np.isfinite(m) & qm[:, None, :]
    return np.where(ok, m, 0.0).sum(-1), np.where(ok, a, 0.0).sum(-1)


RTOL = {"float32": 1e-5, "float16": 1e-5, "bfloat16": 1e-5, "float64": 1e-12}


def assert_scores(got, ref, scale, dtype="float32", normalize=False, what=""):
    """|got - ref| <= rtol * scale (+ tiny atol).  fp16/bf16 inputs are exact
    in fp32, so they share fp32's tolerance against a reference computed from
    the same rounded values.  A normalize=True fp64 run normalises in fp32
    (lik.h), hence the looser bound there."""
    g = f64(got)
    assert g.shape == ref.shape, f"{what}: shape {g.shape} != {ref.shape}"
    rtol = RTOL[dtype]
    if normalize and dtype == "float64":
        rtol = 1e-6
    tol = rtol * np.asarray(scale) + 1e-30
    err = np.abs(g - ref)
    bad = ~(err <= tol)
    if bad.any():
        idx = np.argwhere(bad)[:5]
        raise AssertionError(
            f"{what}: {bad.sum()} of {bad.size} scores off; first at {idx.tolist()}: "
            f"got {g[bad][:5]}, ref {ref[bad][:5]}, tol {np.broadcast_to(tol, bad.shape)[bad][:5]}"
        )
