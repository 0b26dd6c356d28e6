"""lik.retrieve against the float64 reference: top-k order, ties, k clamping."""

from __future__ import annotations

import numpy as np
import pytest

import lik
from _reference import assert_scores, f64, maxsim_ref, maxsim_ref_einsum

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


def rand(rng, shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def check_topk(scores, idx, ref, sc, k, what=""):
    """scores/idx [Nq, k] from lik vs reference scores ref [Nq, Nd]."""
    s, ix = f64(scores), np.asarray(f64(idx)).astype(np.int64)
    Nq, Nd = ref.shape
    assert s.shape == (Nq, k) and ix.shape == (Nq, k), what
    for i in range(Nq):
        assert len(set(ix[i].tolist())) == k, f"{what}: duplicate indices {ix[i]}"
        assert np.all((ix[i] >= 0) & (ix[i] < Nd))
        # returned scores are the reference scores of the returned documents
        assert_scores(s[i], ref[i, ix[i]], sc[i, ix[i]], what=what)
        # descending
        assert np.all(np.diff(s[i]) <= 0), f"{what}: not descending {s[i]}"
        # nothing left out beats the k-th returned one (beyond rounding)
        rest = np.setdiff1d(np.arange(Nd), ix[i])
        if rest.size:
            tol = 1e-5 * sc[i].max() + 1e-30
            assert ref[i, rest].max() <= ref[i, ix[i]].min() + 2 * tol, what
        # where the reference order is unambiguous, it is exactly the order
        order = np.lexsort((np.arange(Nd), -ref[i]))[:k]
        gaps = -np.diff(ref[i][np.lexsort((np.arange(Nd), -ref[i]))])
        if gaps.size == 0 or gaps[: k].min() > 1e-4 * sc[i].max():
            np.testing.assert_array_equal(ix[i], order, err_msg=what)


@pytest.mark.parametrize("d", [1, 17, 128, 1000])
@pytest.mark.parametrize("top_k", [1, 3, 10, 50])
def test_retrieve_vs_reference(rng, d, top_k):
    Nq, Nd = 3, 23
    Q = rand(rng, (Nq, 7, d))
    D = rand(rng, (Nd, 33, d))
    qm = rng.random((Nq, 7)) < 0.8
    dm = rng.random((Nd, 33)) < 0.8
    scores, idx = lik.retrieve(Q, D, top_k, qm, dm)
    k = min(top_k, Nd)
    assert scores.dtype == np.float32 and idx.dtype == np.int64
    ref, sc = maxsim_ref_einsum(Q, D, qm, dm, normalize=True)  # retrieve defaults to normalize=True
    check_topk(scores, idx, ref, sc, k, what=f"d={d} top_k={top_k}")
    s2, i2 = lik.retrieve(Q, D, top_k, qm, dm, normalize=False)
    ref, sc = maxsim_ref_einsum(Q, D, qm, dm)
    check_topk(s2, i2, ref, sc, k, what=f"raw d={d} top_k={top_k}")


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_retrieve_dtypes(rng, dtype):
    Q = rand(rng, (2, 9, 48), dtype)
    D = rand(rng, (40, 17, 48), dtype)
    s, i = lik.retrieve(Q, D, 7)
    ref, sc = maxsim_ref_einsum(Q, D, normalize=True)
    check_topk(s, i, ref, sc, 7)


def test_retrieve_many_docs(rng):
    # more documents than any plausible streaming block
    Q = rand(rng, (2, 5, 8))
    D = rand(rng, (3000, 3, 8))
    s, i = lik.retrieve(Q, D, 20, normalize=False)
    ref, sc = maxsim_ref_einsum(Q, D)
    check_topk(s, i, ref, sc, 20)


def test_ties_lower_index_first(rng):
    base = rand(rng, (4, 9, 17))
    # documents 0..11: four distinct documents, each repeated three times
    D = base[[2, 0, 1, 3, 0, 2, 1, 3, 3, 0, 1, 2]]
    Q = rand(rng, (3, 5, 17))
    s, i = lik.retrieve(Q, D, 12, normalize=False)
    ref, _ = maxsim_ref(Q, D)
    for q in range(3):
        expect = np.lexsort((np.arange(12), -ref[q]))
        np.testing.assert_array_equal(i[q], expect)
        # copies of one document score bitwise equal
        for g in range(4):
            copies = np.nonzero((D == base[g]).all(axis=(1, 2)))[0]
            got = s[q][np.isin(i[q], copies)]
            assert got.size == 3 and np.all(got == got[0])
    # all-equal scores: indices in order
    Z = np.zeros((5, 3, 17), np.float32)
    s, i = lik.retrieve(Q, Z, 4)
    np.testing.assert_array_equal(i, np.tile(np.arange(4), (3, 1)))
    assert np.all(s == 0)


def test_ties_equal_scores_bitwise(rng):
    d = rand(rng, (1, 9, 17))
    D = np.repeat(d, 6, axis=0)
    Q = rand(rng, (2, 5, 17))
    s, i = lik.retrieve(Q, D, 6)
    np.testing.assert_array_equal(i, np.tile(np.arange(6), (2, 1)))
    assert np.all(s == s[:, :1])


def test_top_k_clamped_and_2d(rng):
    Q = rand(rng, (3, 7, 17))
    D = rand(rng, (4, 33, 17))
    s, i = lik.retrieve(Q, D, 100)
    assert s.shape == (3, 4) and i.shape == (3, 4)
    s1, i1 = lik.retrieve(Q[1], D, 2)
    assert s1.shape == (2,) and i1.shape == (2,)
    np.testing.assert_array_equal(i1, i[1, :2])
    s2, i2 = lik.retrieve(Q, D[3], 5)  # one document
    assert s2.shape == (3, 1) and np.all(i2 == 0)
    ref, sc = maxsim_ref(Q, D[3], normalize=True)
    assert_scores(s2[:, 0], ref, sc)


def test_retrieve_empty(rng):
    s, i = lik.retrieve(rand(rng, (0, 7, 17)), rand(rng, (4, 3, 17)), 2)
    assert s.shape == (0, 2) and i.shape == (0, 2)
    s, i = lik.retrieve(rand(rng, (3, 7, 17)), rand(rng, (0, 3, 17)), 2)
    assert s.shape == (3, 0) and i.shape == (3, 0)
    s, i = lik.retrieve(rand(rng, (2, 0, 17)), rand(rng, (4, 3, 17)), 3)
    assert s.shape == (2, 3) and np.all(s == 0)
    np.testing.assert_array_equal(i, np.tile(np.arange(3), (2, 1)))


@pytest.mark.parametrize("bad", [0, -1, -100])
def test_top_k_not_positive(rng, bad):
    with pytest.raises(ValueError, match="top_k"):
        lik.retrieve(rand(rng, (2, 7, 17)), rand(rng, (4, 3, 17)), bad)


def test_top_k_not_int(rng):
    with pytest.raises(TypeError, match="top_k"):
        lik.retrieve(rand(rng, (2, 7, 17)), rand(rng, (4, 3, 17)), 2.0)


def test_retrieve_rejects_kd(rng):
    with pytest.raises(ValueError, match="D"):
        lik.retrieve(rand(rng, (2, 7, 17)), rand(rng, (2, 3, 4, 17)), 2)


def test_retrieve_list_of_documents(rng):
    lens = [3, 33, 1, 12, 7]
    docs = [rand(rng, (n, 17)) for n in lens]
    Q = rand(rng, (2, 7, 17))
    s, i = lik.retrieve(Q, docs, 3)
    Lmax = max(lens)
    Dp = np.zeros((5, Lmax, 17), np.float32)
    dm = np.zeros((5, Lmax), bool)
    for j, x in enumerate(docs):
        Dp[j, : len(x)] = x
        dm[j, : len(x)] = True
    ref, sc = maxsim_ref_einsum(Q, Dp, None, dm, normalize=True)
    check_topk(s, i, ref, sc, 3)
    # with per-document masks
    masks = [rng.random(n) < 0.6 for n in lens]
    for m in masks:
        m[0] = True
    s, i = lik.retrieve(Q, docs, 5, d_mask=masks, normalize=False)
    for j, m in enumerate(masks):
        dm[j, : lens[j]] = m
    ref, sc = maxsim_ref_einsum(Q, Dp, None, dm)
    check_topk(s, i, ref, sc, 5)
    # empty list
    s, i = lik.retrieve(Q, [], 3)
    assert s.shape == (2, 0)
    with pytest.raises(ValueError, match="d"):
        lik.retrieve(Q, [rand(rng, (3, 17)), rand(rng, (3, 16))], 2)
    with pytest.raises(ValueError, match=r"D\[1\]"):
        lik.retrieve(Q, [rand(rng, (3, 17)), rand(rng, (1, 3, 17))], 2)


def test_retrieve_chunk_keyword_accepted(rng):
    Q = rand(rng, (2, 7, 17))
    D = rand(rng, (9, 3, 17))
    a = lik.retrieve(Q, D, 4)
    b = lik.retrieve(Q, D, 4, chunk=2)
    np.testing.assert_array_equal(a[1], b[1])


@needs_torch
def test_retrieve_torch(rng):
    Q = torch.from_numpy(rand(rng, (2, 7, 17))).to(torch.bfloat16)
    D = torch.from_numpy(rand(rng, (30, 5, 17))).to(torch.bfloat16)
    s, i = lik.retrieve(Q, D, 5)
    assert isinstance(s, torch.Tensor) and s.dtype == torch.float32 and i.dtype == torch.int64
    ref, sc = maxsim_ref_einsum(Q, D, normalize=True)
    check_topk(s, i, ref, sc, 5)
    s, i = lik.retrieve(Q, [D[j, : 1 + j % 5] for j in range(30)], 5)
    assert isinstance(i, torch.Tensor)
