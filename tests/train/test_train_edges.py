"""Edge rules of the training path: masks, ties, empty / fully masked
sequences, NaN in masked tokens, requires_grad, no_grad, dtypes."""

from __future__ import annotations

import pytest
import torch

import lik
from lik import _lib
from train_ref import ref_cross


def test_ties_go_to_lowest_index_and_masked_tokens_get_zero():
    d = 8
    D = torch.randn(1, 6, d)
    D[0, 4] = D[0, 1]  # exact tie between doc tokens 1 and 4
    Q = D[:, [1, 1, 3]].clone()  # query tokens aligned with doc tokens 1, 1, 3
    Qa, Da = Q.clone().requires_grad_(True), D.clone().requires_grad_(True)
    lik.maxsim(Qa, Da).sum().backward()
    assert torch.equal(Da.grad[0, 1], Q[0, 0] + Q[0, 1])
    assert torch.all(Da.grad[0, 4] == 0)
    assert torch.all(Da.grad[0, [0, 2, 5]] == 0)


def test_fully_masked_document_contributes_nothing():
    torch.manual_seed(0)
    Q = torch.randn(2, 4, 8)
    D = torch.randn(3, 5, 8)
    dm = torch.ones(3, 5, dtype=torch.bool)
    dm[1] = False
    Qa, Da = Q.clone().requires_grad_(True), D.clone().requires_grad_(True)
    s = lik.maxsim(Qa, Da, None, dm)
    assert torch.all(s[:, 1] == 0)
    s.backward(torch.ones_like(s))
    Qb = Q.clone().requires_grad_(True)
    lik.maxsim(Qb, D[[0, 2]]).sum().backward()
    assert torch.equal(Qa.grad, Qb.grad)  # doc 1 adds nothing (no stale index 0)
    assert torch.all(Da.grad[1] == 0)


def test_nan_and_inf_in_masked_tokens_never_leak():
    torch.manual_seed(1)
    Q = torch.randn(2, 4, 8)
    D = torch.randn(3, 5, 8)
    qm = torch.ones(2, 4, dtype=torch.bool)
    dm = torch.ones(3, 5, dtype=torch.bool)
    Q[0, 2] = float("nan")
    qm[0, 2] = False
    D[1, 3] = float("inf")
    dm[1, 3] = False
    for normalize in (False, True):
        Qa, Da = Q.clone().requires_grad_(True), D.clone().requires_grad_(True)
        s = lik.maxsim(Qa, Da, qm, dm, normalize=normalize)
        s.backward(torch.randn_like(s))
        assert torch.isfinite(s).all()
        assert torch.isfinite(Qa.grad).all() and torch.isfinite(Da.grad).all()
        assert torch.all(Qa.grad[0, 2] == 0) and torch.all(Da.grad[1, 3] == 0)


def test_zero_norm_token_uses_eps_branch():
    Q = torch.zeros(1, 2, 4, dtype=torch.float64, requires_grad=True)
    D = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    s = lik.maxsim(Q, D, normalize=True)
    s.sum().backward()
    # dx = dy / eps for ||x|| <= eps: dy = D_hat[argmax]; a finite, huge gradient.
    assert torch.isfinite(Q.grad).all()
    assert float(Q.grad.abs().max()) > 1e10


def test_empty_shapes():
    Q = torch.randn(3, 4, 8, requires_grad=True)
    D = torch.randn(0, 5, 8, requires_grad=True)
    s = lik.maxsim(Q, D)
    assert s.shape == (3, 0)
    s.sum().backward()
    assert torch.all(Q.grad == 0) and D.grad.shape == D.shape
    Q0 = torch.randn(3, 0, 8, requires_grad=True)
    D0 = torch.randn(2, 5, 8, requires_grad=True)
    s = lik.maxsim(Q0, D0)
    assert torch.all(s == 0)
    s.sum().backward()
    assert torch.all(D0.grad == 0)


def test_requires_grad_and_grad_dtypes():
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        Q = torch.randn(2, 3, 8).to(dtype).requires_grad_(True)
        D = torch.randn(4, 5, 8).to(dtype)
        s = lik.maxsim(Q, D)
        assert s.requires_grad
        assert s.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
        s.sum().backward()
        assert Q.grad.dtype == dtype and D.grad is None
        s = lik.maxsim(Q.detach(), D.requires_grad_(True))
        assert s.requires_grad
        s.sum().backward()
        assert D.grad.dtype == dtype


def test_expanded_grad_scores_and_strided_inputs():
    torch.manual_seed(3)
    base = torch.randn(4, 16, 10)
    Q = base[:, ::2, :8]  # non-contiguous view
    D = torch.randn(6, 8, 5).transpose(1, 2)  # [6, 5, 8] non-contiguous
    Qa, Da = Q.clone().requires_grad_(True), D.detach().clone().requires_grad_(True)
    s = lik.maxsim(Qa, Da)
    s.sum().backward()  # grad_scores is an expanded (stride 0) tensor
    Qr, Dr = Q.double().requires_grad_(True), D.double().requires_grad_(True)
    ref_cross(Qr, Dr).sum().backward()
    assert torch.allclose(Qa.grad.double(), Qr.grad, atol=1e-5)
    assert torch.allclose(Da.grad.double(), Dr.grad, atol=1e-5)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode", "no_requires_grad"])
def test_no_grad_skips_the_argmax(monkeypatch, mode):
    seen = []
    real = _lib.call_maxsim

    def spy(Q, D, qm, dm, scores, argmax=None, **kw):
        seen.append(argmax)
        return real(Q, D, qm, dm, scores, argmax, **kw)

    monkeypatch.setattr(_lib, "call_maxsim", spy)
    Q = torch.randn(2, 3, 8, requires_grad=mode != "no_requires_grad")
    D = torch.randn(4, 5, 8)
    ctx = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}.get(mode)
    if ctx is None:
        s = lik.maxsim(Q, D)
    else:
        with ctx():
            s = lik.maxsim(Q, D)
    assert not s.requires_grad
    assert seen and seen[-1] is None
    seen.clear()
    Q.requires_grad_(True)
    lik.maxsim(Q, D)
    assert seen[-1] is not None


def test_numpy_inputs_still_use_the_inference_path():
    import numpy as np

    Q = np.random.rand(2, 3, 8).astype(np.float32)
    D = np.random.rand(4, 5, 8).astype(np.float32)
    s = lik.maxsim(Q, D)
    assert isinstance(s, np.ndarray) and s.shape == (2, 4)


def test_varlen_empty_sequences_score_zero_and_take_no_gradient():
    cu_q = torch.tensor([0, 0, 3, 3], dtype=torch.int32)
    cu_d = torch.tensor([0, 2, 2, 6], dtype=torch.int32)
    Q = torch.randn(3, 8, requires_grad=True)
    D = torch.randn(6, 8, requires_grad=True)
    s = lik.maxsim_varlen(Q, D, cu_q, cu_d)
    assert s.shape == (3, 3)
    assert torch.all(s[0] == 0) and torch.all(s[2] == 0) and torch.all(s[:, 1] == 0)
    s.sum().backward()
    assert torch.isfinite(Q.grad).all() and torch.isfinite(D.grad).all()


def test_maxsim_padded_matches_kd_with_masks():
    torch.manual_seed(2)
    B, C, Lq, Ld, d = 3, 2, 5, 7, 8
    q = torch.randn(B, Lq, d, requires_grad=True)
    docs = torch.randn(B, C, Ld, d, requires_grad=True)
    ql = torch.tensor([5, 1, 0])
    dl = torch.tensor([[7, 3], [0, 2], [4, 7]])
    s = lik.maxsim_padded(q, docs, ql, dl)
    assert s.shape == (B, C) and torch.all(s[2] == 0) and s[1, 0] == 0
    s.sum().backward()
    assert torch.all(q.grad[1, 1:] == 0) and torch.all(docs.grad[0, 1, 3:] == 0)
