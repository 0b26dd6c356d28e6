"""torch.compile(fullgraph=True) with autograd, and torch.library.opcheck of
the lik:: custom ops."""

from __future__ import annotations

import pytest
import torch

import lik  # noqa: F401  (registers the ops)


def _loss_padded(Q, D, qm, dm):
    s = lik.maxsim(Q, D, qm, dm, normalize=True)
    return torch.nn.functional.cross_entropy(s / 0.05, torch.arange(s.shape[0]))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_with_autograd(backend):
    torch._dynamo.reset()
    torch.manual_seed(0)
    Q = torch.randn(4, 6, 16, requires_grad=True)
    D = torch.randn(8, 9, 16, requires_grad=True)
    qm, dm = torch.rand(4, 6) > 0.2, torch.rand(8, 9) > 0.2
    eager = _loss_padded(Q, D, qm, dm)
    gQ, gD = torch.autograd.grad(eager, (Q, D))
    compiled = torch.compile(_loss_padded, fullgraph=True, backend=backend)
    out = compiled(Q, D, qm, dm)
    cQ, cD = torch.autograd.grad(out, (Q, D))
    assert torch.allclose(out, eager, atol=1e-5)
    if backend == "aot_eager":  # same surrounding ops: bitwise
        assert torch.equal(cQ, gQ) and torch.equal(cD, gD)
    else:  # inductor fuses the loss differently: grad_scores differ in the last bits
        assert torch.allclose(cQ, gQ, atol=1e-5) and torch.allclose(cD, gD, atol=1e-5)


def test_compile_fullgraph_packed_and_kd():
    torch._dynamo.reset()
    torch.manual_seed(1)
    cu_q = torch.tensor([0, 3, 7], dtype=torch.int32)
    cu_d = torch.tensor([0, 5, 5, 11], dtype=torch.int32)
    Q = torch.randn(7, 8, requires_grad=True)
    D = torch.randn(11, 8, requires_grad=True)
    pq, pd = torch.tensor([0, 1, 1]), torch.tensor([2, 0, 1])

    def f(Q, D):
        a = lik.maxsim_varlen(Q, D, cu_q, cu_d, max_seqlen_q=4, normalize=True)
        b = lik.score_pairs_packed(Q, D, cu_q, cu_d, pq, pd, max_seqlen_q=4)
        return a.sum() + b.sum()

    def g(Q3, D4):
        return lik.maxsim(Q3, D4, backward="lowmem").square().sum()

    eager = torch.autograd.grad(f(Q, D), (Q, D))
    comp = torch.autograd.grad(torch.compile(f, fullgraph=True, backend="aot_eager")(Q, D), (Q, D))
    assert all(torch.equal(a, b) for a, b in zip(eager, comp))
    Q3 = torch.randn(3, 4, 8, requires_grad=True)
    D4 = torch.randn(3, 2, 5, 8, requires_grad=True)
    eager = torch.autograd.grad(g(Q3, D4), (Q3, D4))
    comp = torch.autograd.grad(torch.compile(g, fullgraph=True, backend="aot_eager")(Q3, D4), (Q3, D4))
    assert all(torch.equal(a, b) for a, b in zip(eager, comp))


def test_compile_fullgraph_packed_without_max_seqlen_q():
    """Without max_seqlen_q a traced packed call cannot read cu_seqlens_q:
    Q's rows bound it (the argmax saved is [.., total_q]); scores and
    gradients are the eager call's."""
    torch._dynamo.reset()
    torch.manual_seed(4)
    cu_q = torch.tensor([0, 3, 7], dtype=torch.int32)
    cu_d = torch.tensor([0, 5, 5, 11])
    Q = torch.randn(7, 8, requires_grad=True)
    D = torch.randn(11, 8, requires_grad=True)
    pq, pd = torch.tensor([1, 0]), torch.tensor([2, 2])

    def f(Q, D):
        a = lik.maxsim_varlen(Q, D, cu_q, cu_d, normalize=True)
        return a.sum() + lik.score_pairs_packed(Q, D, cu_q, cu_d, pq, pd).square().sum()

    eager = torch.autograd.grad(f(Q, D), (Q, D))
    comp = torch.autograd.grad(torch.compile(f, fullgraph=True, backend="aot_eager")(Q, D), (Q, D))
    assert all(torch.equal(a, b) for a, b in zip(eager, comp))


def _padded_samples():
    torch.manual_seed(2)
    out = []
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        Q = torch.randn(3, 4, 8, dtype=dtype, requires_grad=True)
        D = torch.randn(5, 6, 8, dtype=dtype, requires_grad=True)
        qm, dm = torch.rand(3, 4) > 0.2, torch.rand(5, 6) > 0.2
        out.append((Q, D, qm, dm, False, 0, "auto", True))
        out.append((Q, D, None, None, True, 0, "lowmem", True))
        out.append((Q, D[:3].detach().requires_grad_(True), qm, dm[:3], True, 1, "unified", True))
        out.append((Q, torch.randn(3, 2, 6, 8, dtype=dtype, requires_grad=True), None, None, True, 0, "auto", True))
        out.append((Q.detach(), D.detach(), qm, None, False, 0, "auto", False))
    return out


@pytest.mark.parametrize("args", _padded_samples())
def test_opcheck_maxsim_fwd(args):
    torch.library.opcheck(torch.ops.lik.maxsim_fwd.default, args)


def test_opcheck_packed_fwd_and_bwd_ops():
    torch.manual_seed(3)
    cu_q = torch.tensor([0, 3, 7], dtype=torch.int64)
    cu_d = torch.tensor([0, 5, 5, 11], dtype=torch.int32)
    for dtype in (torch.float32, torch.float64):
        Q = torch.randn(7, 8, dtype=dtype, requires_grad=True)
        D = torch.randn(11, 8, dtype=dtype, requires_grad=True)
        qm = torch.rand(7) > 0.2
        torch.library.opcheck(
            torch.ops.lik.packed_fwd.default, (Q, D, cu_q, cu_d, None, None, qm, None, 4, True, "auto", True)
        )
        pq, pd = torch.tensor([0, 1, 1]), torch.tensor([2, 0, 1])
        torch.library.opcheck(
            torch.ops.lik.packed_fwd.default, (Q, D, cu_q, cu_d, pq, pd, None, None, 4, False, "lowmem", True)
        )
        _, am = torch.ops.lik.packed_fwd(Q, D, cu_q, cu_d, None, None, qm, None, 4, True, "auto", True)
        g = torch.randn(2, 3, dtype=torch.float64 if dtype == torch.float64 else torch.float32)
        torch.library.opcheck(
            torch.ops.lik.packed_bwd.default,
            (g, Q.detach(), D.detach(), cu_q, cu_d, None, None, qm, None, am, True, "auto", True, True),
        )
        Qp, Dp = torch.randn(3, 4, 8, dtype=dtype), torch.randn(5, 6, 8, dtype=dtype)
        _, am = torch.ops.lik.maxsim_fwd(Qp, Dp, None, None, False, 0, "auto", True)
        torch.library.opcheck(
            torch.ops.lik.maxsim_bwd.default,
            (g.new_ones(3, 5), Qp, Dp, None, None, am, False, 0, "auto", True, False),
        )
