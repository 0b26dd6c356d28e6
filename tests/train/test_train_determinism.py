"""Bitwise determinism of the CPU backward: repeated runs, thread counts,
strategies — including sums that cancel in fp32 (order-sensitive)."""

from __future__ import annotations

import pytest
import torch

import lik


@pytest.fixture(autouse=True)
def _restore_threads():
    yield
    lik.set_num_threads(0)


def _run(fn, Q, D, g, threads, backward):
    lik.set_num_threads(threads)
    Qa, Da = Q.clone().requires_grad_(True), D.clone().requires_grad_(True)
    s = fn(Qa, Da, backward)
    s.backward(g)
    return s.detach(), Qa.grad, Da.grad


def _cancelling(Nq, Lq, d):
    """Query tokens of huge alternating magnitude: every doc-token gradient is a
    sum whose fp32 value depends on the order of its terms."""
    Q = torch.randn(Nq, Lq, d)
    Q[:, 0::3] *= 1e7
    Q[:, 1::3] *= -1e7
    return Q


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("layout", ["cross", "kd", "varlen", "pairs_packed"])
def test_bitwise_over_threads_repeats_and_strategies(dtype, normalize, layout):
    torch.manual_seed(5)
    Nq, Nd, Lq, Ld, d = 9, 11, 12, 4, 24  # short docs: many (i, s) hit each doc token
    Q = _cancelling(Nq, Lq, d).to(dtype)
    if layout == "cross":
        D = torch.randn(Nd, Ld, d).to(dtype)
        dm = torch.rand(Nd, Ld) > 0.2
        qm = torch.rand(Nq, Lq) > 0.1
        fn = lambda q, dd, b: lik.maxsim(q, dd, qm, dm, normalize=normalize, backward=b)  # noqa: E731
        g = torch.randn(Nq, Nd) * 1e3
    elif layout == "kd":
        D = torch.randn(Nq, 3, Ld, d).to(dtype)
        qm = torch.rand(Nq, Lq) > 0.1
        fn = lambda q, dd, b: lik.maxsim(q, dd, qm, None, normalize=normalize, backward=b)  # noqa: E731
        g = torch.randn(Nq, 3) * 1e3
    else:
        Q = Q.reshape(Nq * Lq, d)
        D = torch.randn(Nd * Ld, d).to(dtype)
        cu_q = torch.arange(0, Nq * Lq + 1, Lq)
        cu_d = torch.tensor([0, 1, 5, 5, 9, 20, 30, 31, 40, 44])
        cu_d[-1] = Nd * Ld
        if layout == "varlen":
            fn = lambda q, dd, b: lik.maxsim_varlen(q, dd, cu_q, cu_d, normalize=normalize, backward=b)  # noqa: E731
            g = torch.randn(Nq, len(cu_d) - 1) * 1e3
        else:
            pq = torch.randint(0, Nq, (40,))
            pd = torch.randint(0, len(cu_d) - 1, (40,))
            fn = lambda q, dd, b: lik.score_pairs_packed(  # noqa: E731
                q, dd, cu_q, cu_d, pq, pd, normalize=normalize, backward=b
            )
            g = torch.randn(40) * 1e3
    base = _run(fn, Q, D, g, 1, "lowmem")
    assert torch.isfinite(base[1].float()).all() and torch.isfinite(base[2].float()).all()
    for threads in (1, 2, 3, 7):
        for backward in ("auto", "unified", "lowmem"):
            for _ in range(2):
                got = _run(fn, Q, D, g, threads, backward)
                for a, b, what in zip(got, base, ("scores", "grad_Q", "grad_D")):
                    assert torch.equal(a, b), f"{what} differs: threads={threads} backward={backward}"


def test_cancellation_really_is_order_sensitive():
    """Sanity check of the test data: summing the same fp32 terms in another
    order changes the result, so bitwise equality above is meaningful."""
    torch.manual_seed(5)
    x = _cancelling(1, 300, 1).reshape(-1)
    fwd = torch.zeros((), dtype=torch.float32)
    for v in x:
        fwd = fwd + v
    bwd = torch.zeros((), dtype=torch.float32)
    for v in x.flip(0):
        bwd = bwd + v
    assert not torch.equal(fwd, bwd)
