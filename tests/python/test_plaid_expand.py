"""lik.plaid.Index.add(expand_centroids=True): fast-plaid's centroid
expansion, checked from outside against numpy -- the outlier rule and the
number of new centroids, the threshold update, recall of documents unlike the
indexed ones against exact MaxSim, no centroid for documents on the
centroids, failures that leave the index unchanged, save / load and mapped
indexes.  Fresh random seeds."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from lik import plaid

SEED = int.from_bytes(os.urandom(4), "little")


def topics(rng, n, d):
    dirs = rng.standard_normal((n, d))
    return dirs / np.linalg.norm(dirs, axis=1, keepdims=True)


def corpus(rng, dirs, n, lmax=24, noise=0.75):
    """n documents of 1..lmax unit tokens, each around 3 of the directions."""
    d = dirs.shape[1]
    docs = []
    for _ in range(n):
        L = int(rng.integers(1, lmax + 1))
        t = rng.integers(0, len(dirs), 3)
        x = dirs[t[rng.integers(0, 3, L)]] + noise * rng.standard_normal((L, d)) / np.sqrt(d)
        docs.append((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32))
    return docs


def nearest(x, cent):
    """Code (highest inner product) and residual norm of tokens x against fp16 centroids."""
    c = cent.astype(np.float64)
    codes = np.argmax(x.astype(np.float64) @ c.T, axis=1)
    return codes, np.linalg.norm(x - c[codes], axis=1)


def new_centroids(n_outliers, max_ppc=256):
    """fast-plaid's count: 4 per max_ppc outliers, at most its k-means sample."""
    if n_outliers == 0:
        return 0
    sample = min(n_outliers, 1 + math.floor(16 * math.sqrt(120 * n_outliers)))
    return min(4 * math.ceil(n_outliers / max_ppc), sample)


def load(path, name):
    return np.load(os.path.join(path, name))


@pytest.mark.parametrize("d,nbits", [(16, 2), (48, 2), (96, 4), (17, 8)])
def test_outliers_get_centroids_and_the_threshold_moves(tmp_path, d, nbits):
    rng = np.random.default_rng(SEED + d)
    dirs = topics(rng, 12, d)
    A = corpus(rng, dirs[:6], int(rng.integers(80, 200)))
    B = corpus(rng, dirs[6:], int(rng.integers(30, 150)))
    ix = plaid.Index.build(A, tmp_path / "a", nbits=nbits, seed=SEED)
    thr0 = float(load(tmp_path / "a", "cluster_threshold.npy")[0])
    cent0 = load(tmp_path / "a", "centroids.npy")
    XB = np.concatenate(B)
    TA, TB = ix.num_tokens, len(XB)
    _, dist = nearest(XB, cent0)
    k = new_centroids(int((dist > thr0).sum()))
    assert k > 0, "tokens of other directions must include outliers"

    assert list(ix.add(B, expand_centroids=True)) == list(range(len(A), len(A) + len(B)))
    assert ix.num_centroids == len(cent0) + k
    ix.save(tmp_path / "b")
    cent = load(tmp_path / "b", "centroids.npy")
    assert cent.dtype == np.float16 and cent.shape == (len(cent0) + k, d)
    np.testing.assert_array_equal(cent[: len(cent0)], cent0)  # old centroids untouched
    np.testing.assert_allclose(np.linalg.norm(cent[len(cent0):].astype(np.float64), axis=1), 1, atol=2e-3)
    meta = json.loads((tmp_path / "b" / "metadata.json").read_text())
    assert meta["num_partitions"] == len(cent) and meta["num_embeddings"] == TA + TB
    lens = load(tmp_path / "b", "ivf_lengths.npy")
    assert len(lens) == len(cent) and lens[len(cent0):].sum() > 0  # B documents sit in new cells
    # B is coded against old + new centroids: the nearest one (up to fp32 rounding)
    codes = load(tmp_path / "b", "merged_codes.npy")[TA: TA + TB]
    sc = XB.astype(np.float64) @ cent.astype(np.float64).T
    assert (sc[np.arange(TB), codes] >= sc.max(1) - 1e-5).all()
    # threshold: token-weighted mean of the old one and the 0.75-quantile of B's residual norms
    q = np.quantile(np.linalg.norm(XB - cent.astype(np.float64)[codes], axis=1), 0.75)
    thr = float(load(tmp_path / "b", "cluster_threshold.npy")[0])
    assert thr == pytest.approx((thr0 * TA + q * TB) / (TA + TB), rel=1e-5)


def test_expansion_restores_recall_of_documents_unlike_the_index():
    rng = np.random.default_rng(SEED + 1)
    d = 32
    gains = []
    for _ in range(2):
        dirs = topics(rng, 80, d)
        A, B = corpus(rng, dirs[:40], 300), corpus(rng, dirs[40:], 150)
        docs = A + B
        Q = np.stack([x[rng.integers(0, len(x), 8)] for x in (docs[j] for j in rng.integers(300, 450, 30))])
        Q = Q + 0.5 * rng.standard_normal(Q.shape) / np.sqrt(d)
        Qn = Q / np.linalg.norm(Q, axis=-1, keepdims=True)
        full = np.array([[(q @ x.T).max(1).sum() for x in docs] for q in Qn])  # exact MaxSim
        want = np.argsort(-full, axis=1, kind="stable")[:, :10]
        recall = []
        for expand in (False, True):
            ix = plaid.Index.build(A, nbits=2, seed=SEED)
            ix.add(B, expand_centroids=expand)
            ids = ix.search(Q.astype(np.float32), top_k=10)[1]
            recall.append(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids, want)]))
        gains.append(recall[1] - recall[0])
    assert np.mean(gains) > 0.02, f"recall@10 gains {gains}"


def test_documents_on_the_centroids_add_no_centroid(tmp_path):
    rng = np.random.default_rng(SEED + 2)
    d = 24
    A = corpus(rng, topics(rng, 6, d), 120)
    ix = plaid.Index.build(A, tmp_path / "a", seed=SEED)
    thr0 = float(load(tmp_path / "a", "cluster_threshold.npy")[0])
    cent = load(tmp_path / "a", "centroids.npy").astype(np.float32)
    near = [cent[rng.integers(0, len(cent), int(rng.integers(1, 9)))] + 1e-4 * rng.standard_normal((1, d))
            for _ in range(20)]
    near = [x.astype(np.float32) for x in near]
    K, TA = ix.num_centroids, ix.num_tokens
    ix.add(near, expand_centroids=True)
    assert ix.num_centroids == K
    ix.save(tmp_path / "b")
    X = np.concatenate(near)
    q = np.quantile(nearest(X, load(tmp_path / "b", "centroids.npy"))[1], 0.75)
    thr = float(load(tmp_path / "b", "cluster_threshold.npy")[0])
    assert thr == pytest.approx((thr0 * TA + q * len(X)) / (TA + len(X)), rel=1e-5)
    # without expansion the threshold stays
    ix.add(near)
    ix.save(tmp_path / "c")
    assert float(load(tmp_path / "c", "cluster_threshold.npy")[0]) == np.float32(thr)


def test_failures_leave_the_index_unchanged(tmp_path):
    rng = np.random.default_rng(SEED + 3)
    d = 16
    dirs = topics(rng, 8, d)
    ix = plaid.Index.build(corpus(rng, dirs[:4], 60), tmp_path / "a", seed=SEED)
    B = corpus(rng, dirs[4:], 40)
    j = int(rng.integers(0, len(B)))
    B[j][int(rng.integers(0, len(B[j])))][int(rng.integers(0, d))] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ix.add(B, expand_centroids=True)
    with pytest.raises(TypeError, match="expand_centroids"):
        ix.add(B, expand_centroids=1)
    ix.save(tmp_path / "b")
    for f in sorted(os.listdir(tmp_path / "a")):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_mapped_index_expands_like_a_built_one_and_round_trips(tmp_path):
    rng = np.random.default_rng(SEED + 4)
    d = 32
    dirs = topics(rng, 10, d)
    A, B = corpus(rng, dirs[:5], 100), corpus(rng, dirs[5:], 60)
    built = plaid.Index.build(A, tmp_path / "a", seed=SEED)
    mapped = plaid.Index.load(tmp_path / "a")
    for ix in (built, mapped):
        ix.add(B, expand_centroids=True)
    assert built.num_centroids == mapped.num_centroids > plaid.Index.load(tmp_path / "a").num_centroids
    Q = np.stack([x[rng.integers(0, len(x), 6)] for x in (B + A)[:12]])
    r1, r2 = built.search(Q, top_k=10), mapped.search(Q, top_k=10)
    np.testing.assert_array_equal(r1[1], r2[1])
    np.testing.assert_array_equal(r1[0], r2[0])
    built.save(tmp_path / "b")
    mapped.save(tmp_path / "a")  # over the folder it maps
    # (the chunk files differ: a built index's last chunk is in memory and grows, a mapped one gets a new chunk)
    for f in ("centroids.npy", "cluster_threshold.npy", "ivf.npy", "ivf_lengths.npy", "merged_codes.npy",
              "merged_residuals.npy"):
        np.testing.assert_array_equal(load(tmp_path / "a", f), load(tmp_path / "b", f), err_msg=f)
    back = plaid.Index.load(tmp_path / "b", verify=True)
    r3 = back.search(Q, top_k=10)
    np.testing.assert_array_equal(r1[1], r3[1])
    np.testing.assert_array_equal(r1[0], r3[0])


def test_fast_plaids_float64_threshold_is_read(tmp_path):
    # fast-plaid's update rewrites cluster_threshold.npy as a 0-d float64
    rng = np.random.default_rng(SEED + 5)
    d = 16
    A = corpus(rng, topics(rng, 4, d), 50)
    plaid.Index.build(A, tmp_path / "a", seed=SEED)
    np.save(tmp_path / "a" / "cluster_threshold.npy", np.float64(0.25))
    ix = plaid.Index.load(tmp_path / "a")
    X = np.concatenate(A[:5])
    ix.add(A[:5], expand_centroids=True)
    ix.save(tmp_path / "b")
    q = np.quantile(nearest(X, load(tmp_path / "b", "centroids.npy"))[1], 0.75)
    T = ix.num_tokens
    assert float(load(tmp_path / "b", "cluster_threshold.npy")[0]) == pytest.approx(
        (0.25 * (T - len(X)) + q * len(X)) / T, rel=1e-5)
