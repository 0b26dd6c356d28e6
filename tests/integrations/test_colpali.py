"""lik.integrations.patch_colpali_engine: colpali-engine's own losses and
processors give the same values and gradients with lik patched in as
without, and unpatch_colpali_engine restores colpali-engine exactly.

Needs colpali-engine (tests/requirements-integrations.txt); skipped without it.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("colpali_engine")

import torch.nn.functional as F  # noqa: E402, N812

import lik.integrations as li  # noqa: E402
import colpali_engine.loss.late_interaction_losses as L  # noqa: E402
import colpali_engine.utils.maxsim as maxsim_mod  # noqa: E402
import colpali_engine.utils.processing_utils as proc_mod  # noqa: E402
from colpali_engine.models import ColPaliProcessor, ColQwen2Processor  # noqa: E402
from lik.integrations import colpali as lik_colpali  # noqa: E402

BINDINGS = [
    (maxsim_mod, "maxsim_inbatch"),
    (maxsim_mod, "maxsim_kd"),
    (L, "maxsim_inbatch"),
    (L, "maxsim_kd"),
    (proc_mod, "maxsim_inbatch"),
]
FORWARDS = [L.ColbertNegativeCELoss, L.ColbertPairwiseNegativeCELoss]
ORIG = {(m.__name__, a): getattr(m, a) for m, a in BINDINGS}
ORIG_FWD = {c: c.forward for c in FORWARDS}
F32 = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    monkeypatch.delenv("COLPALI_SCORES_BACKEND", raising=False)
    yield
    li.unpatch_colpali_engine()


@pytest.fixture
def patched():
    li.patch_colpali_engine()
    yield


@pytest.fixture
def lik_calls(monkeypatch):
    """Counts the lik calls the patched functions make."""
    calls = []
    for name in ("maxsim", "maxsim_pairs"):
        real = getattr(lik_colpali._ops, name)
        monkeypatch.setattr(lik_colpali._ops, name,
                            lambda *a, _real=real, _n=name, **k: calls.append(_n) or _real(*a, **k))
    return calls


def test_patch_points_and_unpatch():
    locs = li.patch_colpali_engine()
    assert li.patch_colpali_engine() == locs
    for m, a in BINDINGS:
        assert getattr(m, a) is getattr(lik_colpali, a), f"{m.__name__}.{a}"
        assert f"{m.__name__}.{a}" in locs
    for c in FORWARDS:
        assert c.forward is not ORIG_FWD[c]
    li.unpatch_colpali_engine()
    li.unpatch_colpali_engine()
    for m, a in BINDINGS:
        assert getattr(m, a) is ORIG[(m.__name__, a)]
    for c in FORWARDS:
        assert c.forward is ORIG_FWD[c]
        assert "forward" in vars(c)


# ---- colpali-engine's own small cases (its tests/loss/test_li_losses.py) ------------------------


def test_their_zero_embedding_cases(patched, lik_calls):
    B, Nq, D = 3, 1, 4
    loss = L.ColbertLoss(temperature=1.0, normalize_scores=False)(torch.zeros(B, Nq, D), torch.zeros(B, Nq, D))
    torch.testing.assert_close(loss, torch.log(torch.tensor(float(B))))
    B, D = 2, 3
    q, d, neg = torch.zeros(B, 1, D), torch.zeros(B, 1, D), torch.zeros(B, 1, 1, D)
    for cls, kw in ((L.ColbertNegativeCELoss, dict(in_batch_term_weight=0)),
                    (L.ColbertNegativeCELoss, dict(in_batch_term_weight=0.5)),
                    (L.ColbertPairwiseNegativeCELoss, dict(in_batch_term_weight=0)),
                    (L.ColbertPairwiseNegativeCELoss, dict(in_batch_term_weight=0.5))):
        loss = cls(temperature=1.0, normalize_scores=False, **kw)(q, d, neg)
        torch.testing.assert_close(loss, F.softplus(torch.tensor(0.0)))
    loss = L.ColbertPairwiseCELoss(temperature=1.0, normalize_scores=False)(q, d)
    torch.testing.assert_close(loss, F.softplus(torch.tensor(0.0)))
    assert "maxsim" in lik_calls and "maxsim_pairs" in lik_calls


# ---- random zero-padded batches: values and gradients ----------------------------------------------


def _batch(seed, B=6, Lq=7, Ld=11, d=16, n_neg=3, dtype=torch.float32):
    """Unit-norm tokens zeroed past each sequence's length (ColPali's models
    multiply by the attention mask), as leaves + masks."""
    g = torch.Generator().manual_seed(seed)

    def tokens(*shape):
        x = F.normalize(torch.randn(*shape, generator=g, dtype=torch.float64), dim=-1).to(dtype)
        L_ = shape[-2]
        lengths = torch.randint(max(1, L_ // 3), L_ + 1, shape[:-2], generator=g)
        mask = (torch.arange(L_) < lengths[..., None]).to(dtype)
        return x, mask

    return tokens(B, Lq, d), tokens(B, Ld, d), tokens(B, n_neg, Ld, d)


def _run(loss_fn, batch, with_neg):
    leaves = [x.clone().requires_grad_() for (x, _) in batch]
    embs = [x * m.unsqueeze(-1) for x, (_, m) in zip(leaves, batch)]
    args = embs if with_neg else embs[:2]
    value = loss_fn(*args)
    value.backward()
    return value.detach(), [x.grad for x in leaves[: len(args)]]


LOSSES = [
    (L.ColbertLoss, {}, False),
    (L.ColbertLoss, dict(normalize_scores=False), False),
    (L.ColbertLoss, dict(pos_aware_negative_filtering=True), False),
    (L.ColbertPairwiseCELoss, {}, False),
    (L.ColbertPairwiseCELoss, dict(normalize_scores=False, pos_aware_negative_filtering=True), False),
    (L.ColbertSigmoidLoss, {}, False),
    (L.ColbertNegativeCELoss, {}, True),
    (L.ColbertNegativeCELoss, dict(in_batch_term_weight=0.0, normalize_scores=False), True),
    (L.ColbertPairwiseNegativeCELoss, {}, True),
    (L.ColbertPairwiseNegativeCELoss, dict(pos_aware_negative_filtering=True), True),
]


@pytest.mark.parametrize("cls,kw,with_neg", LOSSES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_losses_values_and_grads(cls, kw, with_neg, lik_calls):
    batch = _batch(7)
    v_van, g_van = _run(cls(**kw), batch, with_neg)
    assert not lik_calls
    li.patch_colpali_engine()
    v_lik, g_lik = _run(cls(**kw), batch, with_neg)
    assert lik_calls
    torch.testing.assert_close(v_lik, v_van, **F32)
    for a, b in zip(g_lik, g_van):
        torch.testing.assert_close(a, b, **F32)


@pytest.mark.parametrize("cls,with_neg", [(L.ColbertLoss, False), (L.ColbertNegativeCELoss, True)])
def test_smooth_max_stays_theirs(cls, with_neg, lik_calls):
    batch = _batch(8)
    v_van, g_van = _run(cls(use_smooth_max=True), batch, with_neg)
    li.patch_colpali_engine()
    v_lik, g_lik = _run(cls(use_smooth_max=True), batch, with_neg)
    assert not lik_calls  # lik has the hard max only
    assert torch.equal(v_lik, v_van)


def test_offset_positives(patched):
    # multi-GPU layout: the positives of this rank's queries start at `offset`
    batch = _batch(9, B=4)
    (q, qm), (d, dm), (n, nm) = batch
    q, n = q * qm.unsqueeze(-1), n * nm.unsqueeze(-1)
    d_all = torch.cat([torch.zeros_like(d), d * dm.unsqueeze(-1)])  # 8 docs, ours at offset 4
    for cls in FORWARDS:
        got = cls()(q, d_all, n, offset=4)
        want = ORIG_FWD[cls](cls(), q, d_all, n, offset=4)
        torch.testing.assert_close(got, want, **F32)


def test_bf16_keeps_dtype(patched, lik_calls):
    (q, _), (d, _), (n, _) = _batch(10, dtype=torch.bfloat16)
    got = maxsim_mod.maxsim_inbatch(q, d)
    assert got.dtype == torch.bfloat16 and lik_calls
    want = lik_colpali._torch_inbatch(q, d)
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=5e-2)
    assert lik_colpali.maxsim_kd(q, n).dtype == torch.bfloat16


# ---- processors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("processor", [ColPaliProcessor, ColQwen2Processor])
def test_score_multi_vector(processor, lik_calls):
    g = torch.Generator().manual_seed(11)
    qs = [torch.randn(int(n), 32, generator=g) for n in (5, 9, 3)]
    ps = [torch.randn(int(n), 32, generator=g) for n in (40, 17, 60, 8, 25)]
    want = processor.score_multi_vector(qs, ps, batch_size=2, device="cpu")
    li.patch_colpali_engine()
    got = processor.score_multi_vector(qs, ps, batch_size=2, device="cpu")
    assert lik_calls and got.shape == (3, 5) and got.dtype == torch.float32
    torch.testing.assert_close(got, want, **F32)


# ---- backend switch ----------------------------------------------------------------------------------


def test_backend_env(patched, lik_calls, monkeypatch):
    q, d = torch.randn(2, 3, 8), torch.randn(4, 5, 8)
    monkeypatch.setenv("COLPALI_SCORES_BACKEND", "torch")
    maxsim_mod.maxsim_inbatch(q, d)
    assert not lik_calls
    monkeypatch.setenv("COLPALI_SCORES_BACKEND", "lik")  # the seed raises on CPU; lik runs
    maxsim_mod.maxsim_inbatch(q, d)
    monkeypatch.setenv("COLPALI_SCORES_BACKEND", "auto")
    maxsim_mod.maxsim_kd(q, d.reshape(2, 2, 5, 8))
    assert lik_calls == ["maxsim", "maxsim"]
    monkeypatch.setenv("COLPALI_SCORES_BACKEND", "nope")
    with pytest.raises(ValueError, match="COLPALI_SCORES_BACKEND"):
        maxsim_mod.maxsim_inbatch(q, d)


def test_nan_embeddings_give_nan_scores_as_unpatched():
    # torch's amax propagates NaN; lik's own rule would skip it: patched
    # colpali-engine keeps the NaN (issue 27 B, item 2)
    gen = torch.Generator().manual_seed(7)
    Q = torch.randn(3, 4, 8, generator=gen)
    D = torch.randn(3, 6, 8, generator=gen)
    D4 = torch.randn(3, 2, 6, 8, generator=gen)
    Q[1, 2, 3] = D[2, 5, 0] = D4[0, 1, 4, 2] = float("nan")
    van = (maxsim_mod.maxsim_inbatch(Q, D), maxsim_mod.maxsim_kd(Q, D4))
    li.patch_colpali_engine()
    got = (maxsim_mod.maxsim_inbatch(Q, D), maxsim_mod.maxsim_kd(Q, D4), lik_colpali._pairs(Q, D))
    for g, v in zip(got, van + (torch.diagonal(van[0]),)):
        assert torch.isnan(v).any() and not torch.isnan(v).all()
        torch.testing.assert_close(g, v, equal_nan=True, rtol=1e-5, atol=1e-5)
