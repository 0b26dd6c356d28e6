"""lik.compat on CUDA tensors: each wrapper against the same call on CPU
copies (the CPU path is checked against float64 references in
tests/python/test_compat.py), the seed's device phrase, and the norm warning
without a sync per call.  Marked ``gpu``: skipped without torch + CUDA."""

from __future__ import annotations

import os
import warnings

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

import lik.compat as lk  # noqa: E402
from lik import _api  # noqa: E402


@pytest.fixture
def g(request):
    seed = int(os.environ.get("LIK_TEST_SEED") or torch.seed() % 2**31)
    print(f"{request.node.nodeid}: LIK_TEST_SEED={seed}")
    return torch.Generator().manual_seed(seed)


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("LIK_SUPPRESS_NORM_WARN", "1")


def rand(shape, g, dtype=torch.float32):
    return torch.randn(shape, generator=g).to(dtype)


def close(a, b, tol=2e-3):
    torch.testing.assert_close(a.cpu().float(), b.cpu().float(), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dense_wrappers_match_cpu(g, dtype):
    Q, D = rand((3, 7, 96), g, dtype), rand((5, 33, 96), g, dtype)
    qm = torch.rand(3, 7, generator=g) < 0.8
    Qc, Dc, qmc = Q.cuda(), D.cuda(), qm.cuda()
    close(lk.maxsim(Qc, Dc, qmc, normalize=True), lk.maxsim(Q, D, qm, normalize=True))
    close(lk.maxsim_pairs(Qc, Dc[:3]), lk.maxsim_pairs(Q, D[:3]))
    s, i = lk.retrieve(Qc, Dc, 3, largest=False)
    s0, i0 = lk.retrieve(Q, D, 3, largest=False)
    close(s, s0)
    s, i = lk.topk.maxsim_topk(Qc, Dc, 4)
    assert i.device.type == "cuda" and i.shape == (3, 4)
    sc, am = lk.forward.maxsim_forward(Qc, Dc, save_argmax=True)
    assert am.shape == (15, 7) and am.is_cuda


def test_padded_and_packed_match_cpu(g):
    B, C, Lq, Ld, d = 2, 3, 5, 9, 48
    queries, documents = rand((B, Lq, d), g), rand((B, C, Ld, d), g)
    ql, dl = torch.tensor([5, 2]), torch.tensor([[9, 1, 4], [1, 9, 9]])  # validate=True: lengths >= 1
    want = lk.maxsim_padded(queries, documents, ql, dl)
    got = lk.maxsim_padded(queries.cuda(), documents.cuda(), ql.cuda(), dl.cuda())
    close(got, want)
    b = lk.padded.pack_padded(queries.cuda(), documents.cuda(), ql.cuda(), dl.cuda(), validate=True)
    flat = lk.score_pairs.score_pairs_packed(b.Q_packed, b.D_packed, b.cu_seqlens_q, b.cu_seqlens_d, b.pair_q_idx,
                                             b.pair_d_idx, max_seqlen_q=b.max_seqlen_q, max_seqlen_d=b.max_seqlen_d)
    close(flat.view(B, C), want)
    close(lk.maxsim_varlen(b.Q_packed, b.D_packed, b.cu_seqlens_q, b.cu_seqlens_d)[[0, 0, 0, 1, 1, 1],
                                                                                  [0, 1, 2, 3, 4, 5]], want.view(-1))


def test_backward_matches_cpu(g):
    Q, D = rand((2, 6, 64), g), rand((4, 11, 64), g)
    _, am = lk.forward.maxsim_forward(Q, D, save_argmax=True)
    grad = rand((2, 4), g)
    want = lk.backward.maxsim_backward_unified(grad, Q, D, am)
    got = lk.backward.maxsim_backward_lowmem(grad.cuda(), Q.cuda(), D.cuda(), am.cuda())
    for a, b in zip(got, want):
        close(a, b, 1e-4)


def test_device_phrase(g):
    with pytest.raises(ValueError, match="must be on the same device"):
        lk.maxsim(rand((2, 3, 8), g).cuda(), rand((2, 3, 8), g))


def test_norm_warning_once_then_no_sync(g, monkeypatch):
    monkeypatch.delenv("LIK_SUPPRESS_NORM_WARN")
    monkeypatch.setattr(_api, "_norms_checked", False)
    Q, D = (rand((2, 3, 16), g) * 3).cuda(), rand((2, 4, 16), g).cuda()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lk.maxsim(Q, D)
    assert len(w) == 1
    torch.cuda.set_sync_debug_mode("error")  # any later device -> host sync raises
    try:
        lk.maxsim(Q, D)
    finally:
        torch.cuda.set_sync_debug_mode(0)
