"""Gradients of lik's training ops against float64 references and gradcheck."""

from __future__ import annotations

import pytest
import torch

import lik
from train_ref import packed_from_padded, ref_cross, ref_kd, ref_pairs, ref_varlen

torch.manual_seed(1234)

TOL = {torch.float32: 2e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2, torch.float16: 4e-3}


def _grads(fn, *xs):
    xs = [x.detach().clone().requires_grad_(True) for x in xs]
    out = fn(*xs)
    g = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    out.backward(g.to(out.dtype))
    return out.detach(), [x.grad for x in xs], g


def _compare(got, want, dtype, what):
    scale = max(float(want.abs().max()), 1.0)
    err = float((got.double() - want.double()).abs().max()) if got.numel() else 0.0
    assert err <= TOL[dtype] * scale, f"{what}: max err {err:.3g} (scale {scale:.3g})"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("backward", ["auto", "unified", "lowmem"])
@pytest.mark.parametrize("layout", ["cross", "kd", "pairs"])
def test_grad_vs_float64_reference(dtype, normalize, backward, layout):
    Nq, Nd, K, Lq, Ld, d = 3, 4, 2, 6, 9, 16
    Q = torch.randn(Nq, Lq, d).to(dtype)
    qm = torch.rand(Nq, Lq) > 0.25
    if layout == "cross":
        D = torch.randn(Nd, Ld, d).to(dtype)
        dm = torch.rand(Nd, Ld) > 0.25
        dm[1] = False  # a document with no valid token
        fn = lambda q, dd: lik.maxsim(q, dd, qm, dm, normalize=normalize, backward=backward)  # noqa: E731
        ref = lambda q, dd: ref_cross(q, dd, qm, dm, normalize)  # noqa: E731
    elif layout == "kd":
        D = torch.randn(Nq, K, Ld, d).to(dtype)
        dm = torch.rand(Nq, K, Ld) > 0.25
        fn = lambda q, dd: lik.maxsim(q, dd, qm, dm, normalize=normalize, backward=backward)  # noqa: E731
        ref = lambda q, dd: ref_kd(q, dd, qm, dm, normalize)  # noqa: E731
    else:
        D = torch.randn(Nq, Ld, d).to(dtype)
        dm = torch.rand(Nq, Ld) > 0.25
        fn = lambda q, dd: lik.maxsim_pairs(q, dd, qm, dm, normalize=normalize, backward=backward)  # noqa: E731
        ref = lambda q, dd: ref_pairs(q, dd, qm, dm, normalize)  # noqa: E731
    out, (gQ, gD), g = _grads(fn, Q, D)
    assert gQ.dtype == dtype and gD.dtype == dtype
    # Reference at the same (rounded) input values, in float64.
    Qr = Q.double().requires_grad_(True)
    Dr = D.double().requires_grad_(True)
    r = ref(Qr, Dr)
    r.backward(g)
    _compare(out, r.detach(), torch.float32 if dtype != torch.float64 else dtype, "scores")
    _compare(gQ, Qr.grad, dtype, "grad_Q")
    _compare(gD, Dr.grad, dtype, "grad_D")
    assert torch.all(gQ[~qm] == 0)
    assert torch.all(gD[~dm] == 0)


def _masks(*shape, p=0.3):
    return torch.rand(*shape) > p


@pytest.mark.parametrize("normalize", [False, True])
def test_gradcheck_cross(normalize):
    Q = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)
    D = torch.randn(4, 7, 6, dtype=torch.float64, requires_grad=True)
    qm, dm = _masks(3, 5), _masks(4, 7)
    assert torch.autograd.gradcheck(lambda q, d: lik.maxsim(q, d, qm, dm, normalize=normalize), (Q, D))


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("backward", ["unified", "lowmem"])
def test_gradcheck_kd_and_pairs(normalize, backward):
    Q = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)
    D = torch.randn(3, 2, 7, 6, dtype=torch.float64, requires_grad=True)
    qm, dm = _masks(3, 5), _masks(3, 2, 7)
    assert torch.autograd.gradcheck(
        lambda q, d: lik.maxsim(q, d, qm, dm, normalize=normalize, backward=backward), (Q, D)
    )
    D2 = torch.randn(3, 7, 6, dtype=torch.float64, requires_grad=True)
    dm2 = _masks(3, 7)
    assert torch.autograd.gradcheck(
        lambda q, d: lik.maxsim_pairs(q, d, qm, dm2, normalize=normalize, backward=backward), (Q, D2)
    )


def test_gradcheck_2d_shapes():
    Q = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    D = torch.randn(4, 7, 6, dtype=torch.float64, requires_grad=True)
    D1 = torch.randn(7, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, d: lik.maxsim(q, d), (Q, D))
    assert torch.autograd.gradcheck(lambda q, d: lik.maxsim(q, d), (Q, D1))
    Q3 = torch.randn(2, 5, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda q, d: lik.maxsim(q, d, normalize=True), (Q3, D1))


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("cu_dtype", [torch.int32, torch.int64])
def test_gradcheck_varlen_and_pairs_packed(normalize, cu_dtype):
    lq, ld = [3, 0, 5, 2], [4, 6, 0, 1, 3]
    cu_q = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=cu_dtype)
    cu_d = torch.tensor([0] + list(torch.tensor(ld).cumsum(0)), dtype=cu_dtype)
    Q = torch.randn(sum(lq), 6, dtype=torch.float64, requires_grad=True)
    D = torch.randn(sum(ld), 6, dtype=torch.float64, requires_grad=True)
    qm, dm = _masks(sum(lq)), _masks(sum(ld))
    assert torch.autograd.gradcheck(
        lambda q, d: lik.maxsim_varlen(q, d, cu_q, cu_d, q_mask=qm, d_mask=dm, normalize=normalize), (Q, D)
    )
    pq = torch.tensor([0, 2, 2, 3, 1, 0], dtype=cu_dtype)
    pd = torch.tensor([1, 0, 0, 4, 3, 2], dtype=cu_dtype)
    assert torch.autograd.gradcheck(
        lambda q, d: lik.score_pairs_packed(q, d, cu_q, cu_d, pq, pd, q_mask=qm, d_mask=dm, normalize=normalize),
        (Q, D),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("normalize", [False, True])
def test_varlen_and_pairs_packed_vs_reference(dtype, normalize):
    lq, ld = [4, 1, 0, 7], [5, 0, 8, 2, 3]
    cu_q = torch.tensor([0] + torch.tensor(lq).cumsum(0).tolist(), dtype=torch.int64)
    cu_d = torch.tensor([0] + torch.tensor(ld).cumsum(0).tolist(), dtype=torch.int32)
    Q, D = torch.randn(sum(lq), 16).to(dtype), torch.randn(sum(ld), 16).to(dtype)
    qm, dm = _masks(sum(lq)), _masks(sum(ld))
    out, (gQ, gD), g = _grads(
        lambda q, d: lik.maxsim_varlen(q, d, cu_q, cu_d, q_mask=qm, d_mask=dm, normalize=normalize), Q, D
    )
    Qr, Dr = Q.double().requires_grad_(True), D.double().requires_grad_(True)
    r = ref_varlen(Qr, Dr, cu_q, cu_d, qm, dm, normalize)
    r.backward(g)
    _compare(out, r.detach(), torch.float32, "varlen scores")
    _compare(gQ, Qr.grad, dtype, "varlen grad_Q")
    _compare(gD, Dr.grad, dtype, "varlen grad_D")
    pq, pd = torch.tensor([3, 0, 0, 2, 1]), torch.tensor([2, 0, 0, 4, 1])
    out, (gQ, gD), g = _grads(
        lambda q, d: lik.score_pairs_packed(q, d, cu_q, cu_d, pq, pd, q_mask=qm, d_mask=dm, normalize=normalize),
        Q, D,
    )
    Qr, Dr = Q.double().requires_grad_(True), D.double().requires_grad_(True)
    r = ref_varlen(Qr, Dr, cu_q, cu_d, qm, dm, normalize, pairs=(pq, pd))
    r.backward(g)
    _compare(out, r.detach(), torch.float32, "pairs scores")
    _compare(gQ, Qr.grad, dtype, "pairs grad_Q")
    _compare(gD, Dr.grad, dtype, "pairs grad_D")


def test_packed_equals_padded_with_mask():
    """varlen on packed rows == cross-product maxsim on the padded batch +
    length masks, scores and gradients (bitwise for scores and grads)."""
    Nq, Nd, Lq, Ld, d = 4, 5, 6, 9, 16
    lq = torch.tensor([6, 1, 4, 3])
    ld = torch.tensor([9, 2, 5, 7, 1])
    Qp = torch.randn(Nq, Lq, d)
    Dp = torch.randn(Nd, Ld, d)
    qm = torch.arange(Lq)[None] < lq[:, None]
    dm = torch.arange(Ld)[None] < ld[:, None]
    for normalize in (False, True):
        Qa, Da = Qp.clone().requires_grad_(True), Dp.clone().requires_grad_(True)
        s_pad = lik.maxsim(Qa, Da, qm, dm, normalize=normalize)
        g = torch.randn_like(s_pad)
        s_pad.backward(g)
        Qk, cu_q = packed_from_padded(Qp, lq)
        Dk, cu_d = packed_from_padded(Dp, ld)
        Qk.requires_grad_(True)
        Dk.requires_grad_(True)
        s_pk = lik.maxsim_varlen(Qk, Dk, cu_q, cu_d, normalize=normalize)
        s_pk.backward(g)
        assert torch.equal(s_pad, s_pk)
        assert torch.equal(Qa.grad[qm], Qk.grad)
        assert torch.equal(Da.grad[dm], Dk.grad)
        # maxsim_padded (KD with length masks) == score_pairs_packed on the same pairs
        C = 2
        Dkd = torch.randn(Nq, C, Ld, d)
        dl = torch.randint(0, Ld + 1, (Nq, C))
        s1 = lik.maxsim_padded(Qp, Dkd, lq, dl, normalize=normalize)
        Dk2, cu_d2 = packed_from_padded(Dkd.reshape(Nq * C, Ld, d), dl.reshape(-1))
        pq = torch.arange(Nq).repeat_interleave(C)
        pd = torch.arange(Nq * C)
        s2 = lik.score_pairs_packed(Qk.detach(), Dk2, cu_q, cu_d2, pq, pd, normalize=normalize)
        assert torch.equal(s1.reshape(-1), s2)
