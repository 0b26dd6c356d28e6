"""One call envelope: every C call of the package builds its ``lik_options``
from torch's state in one place (``_lib.call_options``), so every call form
follows ``torch.get_float32_matmul_precision()`` (``fp32_precision``) and
torch's current stream alike.

The CPU cannot show TF32, so these tests pretend every fp32 tensor is a CUDA
tensor under "high" (``_lib.tf32_of`` patched) and record the
``fp32_precision`` of every options struct built during a call.  The packed
forward (``lik.maxsim_varlen`` / ``lik.score_pairs_packed``) and
``lik.retrieve`` once built theirs without it: they ran at fp32 accuracy
whatever torch asked for, while the padded calls followed it.
tests/gpu/test_gpu_masks.py checks the scores themselves on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lik  # noqa: E402
from lik import _lib  # noqa: E402


def _record(monkeypatch) -> list:
    """The list that receives the fp32_precision of every lik_options struct built from now on."""
    seen = []
    build = _lib.make_options

    def recording(**kw):
        o = build(**kw)
        seen.append(o.fp32_precision)
        return o

    monkeypatch.setattr(_lib, "make_options", recording)
    return seen


@pytest.fixture
def recorded(monkeypatch):
    """fp32 torch tensors count as CUDA tensors under "high"; every built
    struct's fp32_precision is recorded."""
    monkeypatch.setattr(_lib, "tf32_of", lambda x: _lib.is_torch(x) and x.dtype == torch.float32)
    return _record(monkeypatch)


def _packed(X, n):
    keep = torch.arange(X.shape[1]) < n[:, None]
    cu = torch.zeros(len(n) + 1, dtype=torch.int32)
    cu[1:] = torch.cumsum(n, 0)
    return X[keep].contiguous(), cu


def _unit(rng, shape):
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    return x / x.norm(dim=-1, keepdim=True)


def _inputs(rng):
    Q, D = _unit(rng, (3, 5, 16)), _unit(rng, (4, 7, 16))
    nq = torch.tensor([5, 2, 4], dtype=torch.int32)
    nd = torch.tensor([7, 1, 3, 6], dtype=torch.int32)
    return Q, D, nq, nd


def _call_forms(rng):
    Q, D, nq, nd = _inputs(rng)
    Qp, cq = _packed(Q, nq)
    Dp, cd = _packed(D, nd)
    pq, pd = torch.tensor([0, 2, 1]), torch.tensor([3, 0, 1])
    H = torch.from_numpy(rng.standard_normal((4, 7, 24)).astype(np.float32))
    W = torch.from_numpy(rng.standard_normal((16, 24)).astype(np.float32))
    C = torch.from_numpy(rng.standard_normal((8, 16)).astype(np.float32))
    codes = torch.from_numpy(rng.integers(0, 8, (4, 7)).astype(np.int32))
    residuals = torch.from_numpy(rng.integers(0, 256, (4, 7, 4)).astype(np.uint8))  # nbits 2: d * 2 / 8 bytes
    weights = torch.tensor([-0.1, -0.03, 0.03, 0.1])
    dl = torch.tensor([7, 7, 7, 7])
    return {
        "maxsim": lambda: lik.maxsim(Q, D),
        "maxsim lengths": lambda: lik.maxsim(Q, D, q_lengths=nq, d_lengths=nd, normalize=True),
        "maxsim KD": lambda: lik.maxsim(Q, D[None].expand(3, 4, 7, 16)),
        "maxsim with grad": lambda: lik.maxsim(Q.clone().requires_grad_(), D),
        "maxsim_pairs": lambda: lik.maxsim_pairs(Q, D[:3]),
        "maxsim_varlen": lambda: lik.maxsim_varlen(Qp, Dp, cq, cd),
        "maxsim_varlen with grad": lambda: lik.maxsim_varlen(Qp.clone().requires_grad_(), Dp, cq, cd),
        "score_pairs_packed": lambda: lik.score_pairs_packed(Qp, Dp, cq, cd, pq, pd),
        "maxsim_padded": lambda: lik.maxsim_padded(Q, D[:3, None].expand(3, 2, 7, 16), nq,
                                                   torch.tensor([[7, 1], [3, 6], [2, 0]])),
        "retrieve": lambda: lik.retrieve(Q, D, 2),
        "MaxSimScorer": lambda: lik.MaxSimScorer()(Q, D),
        "maxsim_from_hidden": lambda: lik.maxsim_from_hidden(Q, H, W),
        "maxsim_residual": lambda: lik.maxsim_residual(Q, codes, residuals, dl, C, weights, 2),
    }


FORMS = sorted(_call_forms(np.random.default_rng(0)))


@pytest.mark.parametrize("form", FORMS)
def test_every_call_form_follows_the_fp32_precision(form, recorded, rng):
    call = _call_forms(rng)[form]
    recorded.clear()
    call()
    assert recorded, f"{form}: no lik_options built"
    assert all(p == 1 for p in recorded), f"{form}: fp32_precision {recorded} under TF32 (expected all 1)"


def test_the_highest_precision_and_other_dtypes_keep_fp32(monkeypatch, rng):
    """The switch is the torch state's: "highest" (here: tf32_of False) and
    non-fp32 inputs keep LIK_FP32_HIGHEST."""
    seen = _record(monkeypatch)
    Q, D, nq, nd = _inputs(rng)
    Qp, cq = _packed(Q, nq)
    Dp, cd = _packed(D, nd)
    lik.maxsim_varlen(Qp, Dp, cq, cd)
    lik.maxsim(Q.double(), D.double())
    lik.retrieve(Q, D, 2)
    assert seen and not any(seen), seen


def test_tf32_of_reads_torch_precision():
    """CPU tensors never ask for TF32 (the CPU keeps fp32 accuracy)."""
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        assert not _lib.tf32_of(torch.zeros(2)) and not _lib.tf32_of(np.zeros(2, np.float32))
    finally:
        torch.set_float32_matmul_precision(old)
