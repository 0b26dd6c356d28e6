"""lik.compat's wrappers behave as late-interaction-kernels documents them,
checked against the float64 references of tests/python (CPU torch)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lik  # noqa: E402
import lik.compat as lk  # noqa: E402
from _colbert_codec import decompress as codec_decompress  # noqa: E402
from _colbert_codec import pack as codec_pack  # noqa: E402
from _reference import assert_scores, maxsim_ref  # noqa: E402
from lik import _api  # noqa: E402

DIMS = (1, 3, 17, 48, 96)


def rand(rng, shape, dtype=torch.float32):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)


def garbage_masked(rng, X, mask):
    """X with NaN / Inf written into the masked-out tokens."""
    X = X.clone()
    bad = ~mask
    X[bad] = torch.from_numpy(rng.choice([np.nan, np.inf, -np.inf, 1e30], size=(int(bad.sum()), X.shape[-1])).astype(
        np.float32)).to(X.dtype)
    return X


def mask(rng, shape, p=0.7):
    return torch.from_numpy(rng.random(shape) < p)


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("LIK_SUPPRESS_NORM_WARN", "1")


@pytest.mark.parametrize("d", DIMS)
def test_maxsim_and_pairs(rng, d):
    Nq, Lq, Nd, Ld = 3, 5, 4, 37
    qm, dm = mask(rng, (Nq, Lq)), mask(rng, (Nd, Ld))
    Q = garbage_masked(rng, rand(rng, (Nq, Lq, d)), qm)
    D = garbage_masked(rng, rand(rng, (Nd, Ld, d)), dm)
    for normalize in (False, True):
        ref, sc = maxsim_ref(Q, D, qm, dm, normalize=normalize)
        assert_scores(lk.maxsim(Q, D, qm, dm, normalize=normalize), ref, sc, normalize=normalize)
    P = garbage_masked(rng, rand(rng, (Nq, Ld, d)), dm[:Nq])
    ref = np.array([maxsim_ref(Q[b], P[b], qm[b], dm[b])[0] for b in range(Nq)])
    sc = np.array([maxsim_ref(Q[b], P[b], qm[b], dm[b])[1] for b in range(Nq)])
    assert_scores(lk.maxsim_pairs(Q, P, qm, dm[:Nq]), ref, sc)
    # KD layout and strided views
    K = rand(rng, (Nq, 2, 2 * Ld, d))[:, :, ::2]
    ref, sc = maxsim_ref(Q, K, qm)
    assert_scores(lk.maxsim(Q, K, qm), ref, sc)


def test_maxsim_empty_batch_and_grad(rng):
    Q = rand(rng, (0, 4, 17))
    assert lk.maxsim(Q, rand(rng, (3, 5, 17))).shape == (0, 3)
    Q = rand(rng, (2, 3, 17)).requires_grad_()
    lk.maxsim(Q, rand(rng, (4, 9, 17)), backward=None).sum().backward()
    assert Q.grad.shape == Q.shape


def _packed(rng, lengths, d):
    xs = [rand(rng, (n, d)) for n in lengths]
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]), dtype=torch.int32)
    return xs, torch.cat(xs) if xs else torch.zeros(0, d), cu


def test_varlen_and_score_pairs(rng):
    d = 17
    qs, Qp, cq = _packed(rng, [3, 1, 7], d)
    ds, Dp, cd = _packed(rng, [5, 0, 33, 2], d)
    out = lk.maxsim_varlen(Qp, Dp, cq, cd)
    for i, q in enumerate(qs):
        for j, x in enumerate(ds):
            ref, sc = maxsim_ref(q, x) if len(x) else (np.float64(0), np.float64(0))
            assert_scores(out[i, j], np.asarray(ref), np.asarray(sc))
    pq, pd = torch.tensor([2, 0, 2]), torch.tensor([2, 3, 1])
    got = lk.score_pairs.score_pairs_packed(Qp, Dp, cq, cd, pq, pd, max_seqlen_q=7)
    ref = np.array([maxsim_ref(qs[i], ds[j])[0] if len(ds[j]) else 0.0 for i, j in zip(pq.tolist(), pd.tolist())])
    sc = np.array([maxsim_ref(qs[i], ds[j])[1] if len(ds[j]) else 0.0 for i, j in zip(pq.tolist(), pd.tolist())])
    assert_scores(got, ref, sc)


def _padded_batch(rng, d=17):
    B, C, Lq, Ld = 3, 4, 6, 11
    queries, documents = rand(rng, (B, Lq, d)), rand(rng, (B, C, Ld, d))
    ql = torch.tensor([6, 1, 3])
    dl = torch.from_numpy(rng.integers(0, Ld + 1, size=(B, C)))
    dl[0, 0] = Ld
    return queries, documents, ql, dl


def _padded_ref(queries, documents, ql, dl):
    B, C = dl.shape
    ref, sc = np.zeros((B, C)), np.zeros((B, C))
    for b in range(B):
        for c in range(C):
            q, x = queries[b, : ql[b]], documents[b, c, : dl[b, c]]
            if len(q) and len(x):
                ref[b, c], sc[b, c] = maxsim_ref(q, x)
    return ref, sc


def test_pack_padded_and_maxsim_padded(rng):
    queries, documents, ql, dl = _padded_batch(rng)
    ref, sc = _padded_ref(queries, documents, ql, dl)
    assert_scores(lk.maxsim_padded(queries, documents, ql, dl), ref, sc)
    b = lk.padded.pack_padded(queries, documents, ql, dl)
    assert isinstance(b, lk.padded.PackedBatch)
    Qp, cq, Dp, cd, pq, pd, mq, md = b
    assert cq.dtype == cd.dtype == pq.dtype == pd.dtype == torch.int32
    assert (mq, md) == (int(ql.max()), int(dl.max()))
    assert Qp.shape == (int(ql.sum()), 17) and Dp.shape == (int(dl.sum()), 17)
    flat = lk.score_pairs.score_pairs_packed(Qp, Dp, cq, cd, pq, pd, max_seqlen_q=mq, max_seqlen_d=md)
    assert_scores(flat.view(ref.shape), ref, sc)
    native = lik.pack_padded(queries, documents, ql, dl)
    assert native.cu_seqlens_q.dtype == torch.int64 and torch.equal(native.cu_seqlens_d, cd.long())


def test_padded_validate(rng):
    queries, documents, ql, dl = _padded_batch(rng)
    bad = ql.clone()
    bad[1] = 7
    dl1 = dl.clamp_min(1)  # the seed's validate=True also rejects empty sequences
    with pytest.raises(ValueError, match=r"query_lengths: every entry must be in \[0, Lq=6\]"):
        lk.maxsim_padded(queries, documents, bad, dl1, validate=True)
    with pytest.raises(ValueError, match="query_lengths"):
        lik.maxsim_padded(queries, documents, bad, dl)  # lik's default validates
    clamped = ql.clone()
    clamped[1] = 6
    assert torch.equal(lk.maxsim_padded(queries, documents, bad, dl), lk.maxsim_padded(queries, documents, clamped, dl))
    with pytest.raises(ValueError, match="a length exceeds the padded extent"):
        lk.padded.pack_padded(queries, documents, bad, dl1, validate=True)
    for q_len, d_len in ((bad, dl), (ql, dl + documents.shape[2])):  # the seed's always-on assert
        with pytest.raises(RuntimeError):
            lk.padded.pack_padded(queries, documents, q_len, d_len)
    zero = ql.clone()
    zero[0] = 0
    with pytest.raises(ValueError, match="query_lengths must all be > 0"):
        lk.padded.pack_padded(queries, documents, zero, dl1, validate=True)
    ref, sc = _padded_ref(queries, documents, zero, dl)
    assert_scores(lik.maxsim_padded(queries, documents, zero, dl), ref, sc)  # lik: an empty query scores 0
    with pytest.raises(ValueError, match="batch size mismatch"):
        lk.padded.pack_padded(queries[:2], documents, ql[:2], dl)


def test_pack_padded_empty_batch(rng):
    b = lk.padded.pack_padded(rand(rng, (0, 4, 3)), rand(rng, (0, 2, 5, 3)), torch.zeros(0, dtype=torch.int64),
                              torch.zeros(0, 2, dtype=torch.int64))
    assert b.Q_packed.shape == (0, 3) and b.cu_seqlens_d.tolist() == [0] and (b.max_seqlen_q, b.max_seqlen_d) == (0, 0)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_and_retrieve(rng, largest):
    Q, D = rand(rng, (3, 5, 17)), rand(rng, (29, 7, 17))
    D[4] = D[2]  # a tie: the lower index first
    ref = maxsim_ref(Q, D, normalize=False)[0]
    order = np.argsort(-ref if largest else ref, axis=-1, kind="stable")[:, :6]
    s, i = lk.topk.maxsim_topk(Q, D, 6, largest=largest, sorted=False)
    assert i.tolist() == order.tolist()
    np.testing.assert_allclose(s.numpy(), np.take_along_axis(ref, order, -1), rtol=1e-5, atol=1e-5)
    s2, i2 = lk.retrieve(Q, D, 100, normalize=False, chunk=4, largest=largest)
    assert i2.shape == (3, 29) and i2[:, :6].tolist() == order.tolist()
    s1, i1 = lk.retrieve(Q[0], D, 6, normalize=False, largest=largest)
    assert i1.tolist() == order[0].tolist()
    sn, i_n = lik.retrieve(Q.numpy(), D.numpy(), 6, normalize=False, largest=largest)
    assert i_n.tolist() == order.tolist() and sn.dtype == np.float32


def test_forward_argmax_and_backward(rng):
    Nq, Lq, Nd, Ld, d = 2, 5, 3, 9, 17
    qm = mask(rng, (Nq, Lq))
    Q, D = rand(rng, (Nq, Lq, d)), rand(rng, (Nd, Ld, d))
    scores, argmax = lk.forward.maxsim_forward(Q, D, qm, save_argmax=True)
    assert argmax.shape == (Nq * Nd, Lq) and argmax.dtype == torch.int32
    sims = torch.einsum("isk,jtk->ijst", Q.double(), D.double())
    am = argmax.view(Nq, Nd, Lq).long()
    want = sims.argmax(-1)
    assert torch.equal(torch.where(qm[:, None, :], want, -1), am)
    assert lk.forward.maxsim_forward(Q, D)[1] is None
    # backward vs float64 autograd of the reference
    Qd, Dd = Q.double().requires_grad_(), D.double().requires_grad_()
    g = rand(rng, (Nq, Nd)).double()
    ((torch.einsum("isk,jtk->ijst", Qd, Dd).max(-1).values * qm[:, None, :]).sum(-1) * g).sum().backward()
    for fn in (lk.backward.maxsim_backward_unified, lk.backward.maxsim_backward_lowmem):
        gQ, gD = fn(g.float(), Q, D, argmax, qm.to(torch.int8))
        np.testing.assert_allclose(gQ.numpy(), Qd.grad.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(gD.numpy(), Dd.grad.numpy(), rtol=1e-5, atol=1e-5)
    gQ, gD = lk.backward.maxsim_backward_unified_reference(g.float(), Q, D, argmax, qm)
    np.testing.assert_allclose(gD.numpy(), Dd.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_backward_kd_layout(rng):
    Nq, K, Lq, Ld, d = 2, 3, 4, 6, 17
    Q, D = rand(rng, (Nq, Lq, d)), rand(rng, (Nq * K, Ld, d))
    _, argmax = lk.forward.maxsim_forward(Q, D.view(Nq, K, Ld, d), save_argmax=True)
    Qd, Dd = Q.double().requires_grad_(), D.double().requires_grad_()
    torch.einsum("isk,ijtk->ijst", Qd, Dd.view(Nq, K, Ld, d)).max(-1).values.sum().backward()
    gQ, gD = lk.backward.maxsim_backward_lowmem(torch.ones(Nq, K), Q, D, argmax, kd_layout=True)
    assert gD.shape == D.shape
    np.testing.assert_allclose(gD.numpy(), Dd.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gQ.numpy(), Qd.grad.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="multiple of Nq"):
        lk.backward.maxsim_backward_lowmem(torch.ones(Nq, K), Q, D[:5], argmax, kd_layout=True)
    # wrong grad_scores / argmax sizes: ValueError, not torch's reshape RuntimeError
    with pytest.raises(ValueError, match=r"grad_scores: shape \(1, 1\) has 1 elements, expected 6 \(\[2, 3\]"):
        lk.backward.maxsim_backward_lowmem(torch.ones(1, 1), Q, D, argmax, kd_layout=True)
    with pytest.raises(ValueError, match=r"argmax: shape \(6, 3\) has 18 elements, expected 24"):
        lk.backward.maxsim_backward_unified(torch.ones(Nq, K), Q, D, argmax[:, :3], kd_layout=True)
    # a non-contiguous D (a transposed copy) in the KD layout
    Dt = D.transpose(0, 1).contiguous().transpose(0, 1)
    gQt, gDt = lk.backward.maxsim_backward_lowmem(torch.ones(Nq, K), Q, Dt, argmax, kd_layout=True)
    np.testing.assert_array_equal(gDt.numpy(), gD.numpy())


@pytest.mark.parametrize("nbits", [2, 4])
def test_plaid(rng, nbits):
    d, n_c, Nd, Ld = 16, 7, 4, 9
    centroids = rng.standard_normal((n_c, d)).astype(np.float32)
    weights = np.sort(rng.standard_normal(1 << nbits)).astype(np.float32) * 0.1
    codes = rng.integers(0, n_c, size=(Nd, Ld)).astype(np.int64)
    buckets = rng.integers(0, 1 << nbits, size=(Nd * Ld, d))
    res = codec_pack(buckets, nbits, "lik").reshape(Nd, Ld, -1)  # the seed's bit order
    lengths = np.array([9, 0, 3, 5])
    Q = rand(rng, (2, 5, d))
    got = lk.plaid.maxsim_residual(Q, torch.from_numpy(codes), torch.from_numpy(res), torch.from_numpy(lengths),
                                   torch.from_numpy(centroids), torch.from_numpy(weights), nbits)
    X = codec_decompress(codes.reshape(-1), res.reshape(Nd * Ld, -1), centroids, weights, nbits, "lik",
                         normalize=True).reshape(Nd, Ld, d)
    dm = np.arange(Ld)[None, :] < lengths[:, None]
    ref, sc = maxsim_ref(Q, X, None, dm, normalize=True)
    assert_scores(got, ref, sc, normalize=True)
    flat = torch.from_numpy(dm)
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lengths)]))
    got_v = lk.plaid.maxsim_residual_varlen(Q, torch.from_numpy(codes)[flat], torch.from_numpy(res)[flat], cu,
                                            torch.from_numpy(centroids), torch.from_numpy(weights), nbits)
    assert_scores(got_v, ref, sc, normalize=True)
    qcs = rng.standard_normal((n_c, 5)).astype(np.float32)
    approx = lk.plaid.plaid_approx_score(torch.from_numpy(qcs), torch.from_numpy(codes), torch.from_numpy(lengths))
    want = [qcs[codes[b, : lengths[b]]].max(0).sum() if lengths[b] else 0.0 for b in range(Nd)]
    np.testing.assert_allclose(approx.numpy(), want, rtol=1e-6)


@pytest.mark.skipif(not hasattr(lik, "maxsim_from_hidden"), reason="no lik.maxsim_from_hidden in this lik")
def test_fused_head(rng):
    Q = torch.nn.functional.normalize(rand(rng, (2, 5, 16)), dim=-1)
    H, W, b = rand(rng, (3, 7, 24)), rand(rng, (16, 24)), rand(rng, (16,))
    dm = mask(rng, (3, 7))
    D = torch.nn.functional.normalize(torch.nn.functional.linear(H.double(), W.double(), b.double()), dim=-1)
    ref, sc = maxsim_ref(Q, D, None, dm)
    assert_scores(lk.fused_head.maxsim_from_hidden(Q, H, W, b, dm), ref, sc, normalize=True)
    assert_scores(lk.reference.maxsim_from_hidden_reference(Q, H, W, b, dm), ref, sc, normalize=True)


def test_not_in_lik_raise_naming_the_alternative(rng):
    Q = rand(rng, (1, 2, 3))
    with pytest.raises(NotImplementedError, match="lik.maxsim"):
        lk.mps.maxsim_mps(Q, Q)
    with pytest.raises(NotImplementedError, match="lik.maxsim"):
        lk.mps.maxsim_inference_mps(Q, Q)
    with pytest.raises(NotImplementedError, match="soft / smooth"):
        lk.experimental.soft_maxsim  # noqa: B018
    if not hasattr(lik, "maxsim_from_hidden"):
        with pytest.raises(NotImplementedError, match="use lik.maxsim"):
            lk.fused_head.maxsim_from_hidden(Q, Q, torch.eye(3))
    if not hasattr(lik, "quantize_fp8_per_tensor"):
        with pytest.raises(NotImplementedError, match="bfloat16"):
            lk.fp8.quantize_fp8_per_tensor(Q)


def test_error_messages_carry_the_seed_phrases(rng):
    Q = rand(rng, (2, 3, 8))
    with pytest.raises(ValueError, match=r"Q\.shape\[0\] == D\.shape\[0\]"):
        lk.maxsim_pairs(Q, rand(rng, (3, 3, 8)))
    with pytest.raises(ValueError, match="must share the embedding dim"):
        lk.maxsim(Q, rand(rng, (3, 3, 9)))
    with pytest.raises(ValueError, match=r"KD layout needs D\.shape\[0\] == Q\.shape\[0\]"):
        lk.maxsim(Q, rand(rng, (3, 1, 3, 8)))
    with pytest.raises(ValueError, match="top_k must be positive"):
        lk.retrieve(Q, Q, 0)
    with pytest.raises(ValueError, match="k must be positive"):
        lk.topk.maxsim_topk(Q, Q, 0)
    with pytest.raises(ValueError, match="backward= must be one of"):
        lk.maxsim(Q, Q, backward="bogus")
    with pytest.raises(ValueError, match=r"\[B, L, d\]"):
        lk.maxsim_pairs(Q, rand(rng, (2, 8)))
    with pytest.raises(ValueError, match="needs Q to be"):
        lk.maxsim(Q[0], rand(rng, (2, 1, 3, 8)))
    with pytest.raises(ValueError, match="q_mask must be"):
        lk.maxsim(Q, rand(rng, (2, 1, 3, 8)), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="same device"):
        lk.retrieve(Q, Q.to("meta"), 1)
    if hasattr(lik, "maxsim_from_hidden"):
        with pytest.raises(ValueError, match="W must be"):
            lk.fused_head.maxsim_from_hidden(Q, rand(rng, (3, 4, 6)), rand(rng, (7, 6)))


def test_unnormalized_warning_once(rng, monkeypatch):
    monkeypatch.delenv("LIK_SUPPRESS_NORM_WARN")
    monkeypatch.setattr(_api, "_norms_checked", False)
    Q, D = rand(rng, (2, 3, 16)) * 3, rand(rng, (2, 4, 16))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lk.maxsim(Q, D, normalize=True)  # normalize=True: never checked
        assert not w and not _api._norms_checked
        lk.maxsim(Q, D)
        lk.maxsim(Q, D)
    assert len(w) == 1 and "LIK_SUPPRESS_NORM_WARN" in str(w[0].message)
    assert w[0].filename == __file__  # points at the caller's line
    monkeypatch.setattr(_api, "_norms_checked", False)
    Qn = torch.nn.functional.normalize(Q, dim=-1)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lik.maxsim_pairs(Qn.numpy(), D.numpy())
    assert not w and _api._norms_checked  # checked once, unit norms: silent
    monkeypatch.setattr(_api, "_norms_checked", False)
    monkeypatch.setenv("LIK_SUPPRESS_NORM_WARN", "1")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        lik.maxsim(Q, D)
    assert not w


def test_reference_is_differentiable_plain_torch(rng):
    """lk.reference backpropagates (float64 inside, the seed's result dtypes)
    and its gradients are lik's float64 autograd's (lik's argmax: the first
    of tied tokens)."""
    qm, dm = mask(rng, (3, 5)), mask(rng, (4, 7))
    dm[1, :2] = True  # two valid tokens, made equal below: exact ties
    D = rand(rng, (4, 7, 8))
    D[1, 1] = D[1, 0]
    Q, D = garbage_masked(rng, rand(rng, (3, 5, 8)), qm), garbage_masked(rng, D, dm)
    g = rand(rng, (3, 4), torch.float64)
    for dtype, out in ((torch.float32, torch.float32), (torch.bfloat16, torch.float32), (torch.float64, torch.float64)):
        Qr, Dr = Q.to(dtype).detach().requires_grad_(), D.to(dtype).detach().requires_grad_()
        s = lk.reference.maxsim_reference(Qr, Dr, qm, dm, normalize=True)
        assert s.dtype == out and s.requires_grad
        s.backward(g.to(out))
        Ql, Dl = Q.to(dtype).double().detach().requires_grad_(), D.to(dtype).double().detach().requires_grad_()
        lik.maxsim(Ql, Dl, qm, dm, normalize=True).backward(g)
        assert torch.isfinite(Qr.grad).all() and torch.isfinite(Dr.grad).all()
        torch.testing.assert_close(Qr.grad.double(), Ql.grad, rtol=1e-2, atol=1e-2)
        torch.testing.assert_close(Dr.grad.double(), Dl.grad, rtol=1e-2, atol=1e-2)
    Qr = Q.double().requires_grad_()
    torch.autograd.gradcheck(lambda q: lk.reference.maxsim_reference(q, D.double(), qm, dm), (Qr,))
    assert lk.reference.NEG_INF == float("-inf")


def test_reference_layouts_and_masks(rng):
    """Every reference against lik's float64 path: 1-D masks for every
    sequence, KD, varlen, pairs, padded, and a NaN similarity never winning."""
    ref = lk.reference
    Q, D = rand(rng, (3, 5, 8), torch.float64), rand(rng, (4, 7, 8), torch.float64)
    qm1, dm1 = mask(rng, (5,)), mask(rng, (7,))
    want = lik.maxsim(Q, D, qm1.expand(3, 5), dm1.expand(4, 7))
    torch.testing.assert_close(ref.maxsim_reference(Q, D, qm1, dm1), want)
    torch.testing.assert_close(ref.maxsim_reference(Q[0], D[1], qm1, dm1), want[0, 1])
    K = rand(rng, (3, 2, 7, 8), torch.float64)
    torch.testing.assert_close(ref.maxsim_reference(Q, K), lik.maxsim(Q, K))
    Dn = D.clone()
    Dn[0, 2, 0] = float("nan")  # one NaN similarity per query token: skipped, not propagated
    torch.testing.assert_close(ref.maxsim_reference(Q, Dn), lik.maxsim(Q, Dn))
    _, Qp, cq = _packed(rng, [3, 0, 2], 8)
    _, Dp, cd = _packed(rng, [4, 1, 0, 6], 8)
    Qp, Dp = Qp.double(), Dp.double()
    torch.testing.assert_close(ref.maxsim_reference_varlen(Qp, Dp, cq, cd), lik.maxsim_varlen(Qp, Dp, cq, cd))
    pq, pd = torch.tensor([2, 0, 1]), torch.tensor([3, 0, 2])
    torch.testing.assert_close(ref.maxsim_reference_scatter(Qp, Dp, cq, cd, pq, pd),
                               lik.score_pairs_packed(Qp, Dp, cq, cd, pq, pd))
    queries, documents, ql, dl = _padded_batch(rng)
    r, sc = _padded_ref(queries, documents, ql, dl)
    assert_scores(ref.maxsim_padded_reference(queries, documents, ql, dl), r, sc)
    with pytest.raises(ValueError, match="q_mask must be"):
        ref.maxsim_reference(Q, D, qm1[:4])


@pytest.mark.parametrize("nbits", [1, 2, 4, 8])
def test_reference_plaid(rng, nbits):
    """unpack_residuals_reference inverts the seed's bit order (lik's
    layout="lik"); maxsim_residual_reference and plaid_approx_score_reference
    match lik's kernels (re-exported by lk.plaid, as the seed does)."""
    d, n_c, Nd, Ld = 16, 7, 4, 9
    buckets = rng.integers(0, 1 << nbits, size=(Nd, Ld, d))
    res = torch.from_numpy(codec_pack(buckets.reshape(-1, d), nbits, "lik").reshape(Nd, Ld, -1))
    got = lk.reference.unpack_residuals_reference(res, nbits, d)
    assert got.dtype == torch.int32 and np.array_equal(got.numpy(), buckets)
    centroids, weights = rand(rng, (n_c, d)), torch.sort(rand(rng, (1 << nbits,))).values * 0.1
    codes, lengths = torch.from_numpy(rng.integers(0, n_c, size=(Nd, Ld))), torch.tensor([9, 0, 3, 5])
    codes[2, 3:] = 10**6  # padding is never read
    Q = rand(rng, (2, 5, d)).requires_grad_()
    for normalize in (False, True):
        want = lk.plaid.maxsim_residual(Q, codes.clamp(max=n_c - 1), res, lengths, centroids, weights, nbits,
                                        normalize=normalize)
        got = lk.plaid.maxsim_residual_reference(Q, codes, res, lengths, centroids, weights, nbits,
                                                 normalize=normalize)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    got.sum().backward()
    assert Q.grad is not None and torch.isfinite(Q.grad).all()
    qcs = rand(rng, (n_c, 5))
    want = lk.plaid.plaid_approx_score(qcs, codes.clamp(max=n_c - 1), lengths)
    torch.testing.assert_close(lk.plaid.plaid_approx_score_reference(qcs, codes, lengths), want)
    assert lk.plaid.plaid_approx_score_reference(qcs, codes, lengths)[1] == 0


def test_pylate_and_colpali_compat_modules():
    """The seed's submodules are lik.integrations' functions."""
    import lik.integrations as li
    import lik.integrations.pylate as lp

    assert lk.pylate_compat.patch_pylate is li.patch_pylate
    assert lk.pylate_compat.unpatch_pylate is li.unpatch_pylate
    assert lk.pylate_compat.patched_colbert_scores is lp.colbert_scores
    assert lk.pylate_compat.patched_colbert_kd_scores is lp.colbert_kd_scores
    assert lk.pylate_compat.patched_colbert_scores_pairwise is lp.colbert_scores_pairwise
    assert lk.colpali_compat.patch_colpali_engine is li.patch_colpali_engine
    assert lk.colpali_compat.unpatch_colpali_engine is li.unpatch_colpali_engine


def test_packed_too_short_max_seqlen_is_value_and_runtime_error():
    """The seed's packed calls raise RuntimeError (its device assert) for a
    max_seqlen_* shorter than a sequence; lik raises ValueError: compat's is both."""
    from lik.compat.score_pairs import score_pairs_packed
    from lik.compat.varlen import maxsim_varlen

    Qp, Dp = torch.randn(8, 16), torch.randn(24, 16)
    cu_q, cu_d = torch.tensor([0, 4, 8], dtype=torch.int32), torch.tensor([0, 12, 24], dtype=torch.int32)
    pairs = (torch.tensor([0, 1]), torch.tensor([1, 0]))
    for call, extra in ((maxsim_varlen, ()), (score_pairs_packed, pairs)):
        for kw in ({"max_seqlen_d": 4}, {"max_seqlen_q": 3}):
            with pytest.raises(RuntimeError, match="max_seqlen_") as e:
                call(Qp, Dp, cu_q, cu_d, *extra, **kw)
            assert isinstance(e.value, ValueError)
    with pytest.raises(TypeError):  # other errors keep their types
        maxsim_varlen(Qp, Dp.double(), cu_q, cu_d)
