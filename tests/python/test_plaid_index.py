"""lik.plaid.Index: build / save / load / add / search against the residual
scorer (the degenerate parameters make PLAID search exact), subsets, query
layouts, torch in / out, thread invariance, errors.  Fresh random sizes
(the seed is printed by pytest's -rA output through the test ids)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import lik
from lik import plaid

SEED = int(os.environ.get("LIK_TEST_SEED", int.from_bytes(os.urandom(4), "little")))  # printed on failure: -l


def corpus(rng, n, d, lmax=20, clusters=6):
    dirs = rng.standard_normal((clusters, d))
    docs = []
    for _ in range(n):
        L = int(rng.integers(0, lmax + 1)) if rng.random() < 0.05 else int(rng.integers(1, lmax + 1))
        x = dirs[rng.integers(0, clusters, L)] + 0.4 * rng.standard_normal((L, d))
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        docs.append(x.astype(np.float32))
    return docs


def queries(rng, docs, nq, lq, d):
    toks = np.concatenate([x for x in docs if len(x)])
    q = toks[rng.integers(0, len(toks), (nq, lq))] + 0.3 * rng.standard_normal((nq, lq, d))
    return q.astype(np.float32)


def exact_topk(full, k, allowed=None, empty=None):
    """(ids, scores) by score desc then id asc; documents without tokens and
    those not allowed are left out (never PLAID candidates)."""
    ok = np.ones(full.shape[-1], bool) if allowed is None else allowed.copy()
    if empty is not None:
        ok &= ~empty
    ids = np.nonzero(ok)[0]
    order = ids[np.lexsort((ids, -full[ids]))][:k]
    return order, full[order]


def files_of(path, T):
    codes = np.load(os.path.join(path, "merged_codes.npy"))[:T]
    res = np.load(os.path.join(path, "merged_residuals.npy"))[:T]
    cent = np.load(os.path.join(path, "centroids.npy"))
    w = np.load(os.path.join(path, "bucket_weights.npy"))
    return codes, res, cent, w


@pytest.mark.parametrize("d,nbits", [(16, 2), (24, 4), (32, 1), (8, 8), (64, 2)])
def test_degenerate_search_is_exact(tmp_path, d, nbits):
    rng = np.random.default_rng(SEED + d + nbits)
    docs = corpus(rng, int(rng.integers(20, 120)), d)
    ix = plaid.Index.build(docs, tmp_path / "ix", nbits=nbits, seed=int(rng.integers(1 << 30)),
                           chunk_docs=int(rng.integers(5, 200)))
    lens = np.array([len(x) for x in docs])
    cu = np.concatenate([[0], np.cumsum(lens)])
    codes, res, cent, w = files_of(tmp_path / "ix", cu[-1])
    Q = queries(rng, docs, int(rng.integers(1, 7)), int(rng.integers(1, 33)), d)
    k = int(rng.integers(1, 15))
    s, i = ix.search(Q, top_k=k, n_ivf_probe=ix.num_centroids, n_full_scores=4 * len(docs))
    full = lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits=nbits)
    for q in range(len(Q)):
        ids, sc = exact_topk(full[q], k, empty=lens == 0)
        m = len(ids)
        np.testing.assert_array_equal(i[q, :m], ids)
        np.testing.assert_array_equal(s[q, :m], sc)  # bitwise: the same scorer
        assert (i[q, m:] == -1).all() and np.isneginf(s[q, m:]).all()
    # subsets: one for all queries, one per query
    sub = rng.integers(0, len(docs), int(rng.integers(0, len(docs))))
    s2, i2 = ix.search(Q, top_k=k, n_ivf_probe=ix.num_centroids, n_full_scores=4 * len(docs),
                       subset=list(sub))
    per = [list(rng.integers(0, len(docs), int(rng.integers(0, 10)))) for _ in range(len(Q))]
    s3, i3 = ix.search(Q, top_k=k, n_ivf_probe=ix.num_centroids, n_full_scores=4 * len(docs), subset=per)
    for q in range(len(Q)):
        for got, allow in ((i2[q], sub), (i3[q], per[q])):
            a = np.zeros(len(docs), bool)
            a[np.asarray(allow, dtype=np.int64)] = True
            ids, _ = exact_topk(full[q], k, allowed=a, empty=lens == 0)
            np.testing.assert_array_equal(got[: len(ids)], ids)
            assert (got[len(ids):] == -1).all()


def test_subset_forms_and_errors(tmp_path):
    # every accepted form of subset= gives the result of its plain list form;
    # floats, bools and strings are refused (they would be truncated or parsed)
    rng = np.random.default_rng(SEED + 7)
    docs = corpus(rng, 40, 16)
    ix = plaid.Index.build(docs, nbits=2)
    Q = queries(rng, docs, 2, 5, 16)
    exhaustive = dict(top_k=6, n_ivf_probe=ix.num_centroids, n_full_scores=4 * len(docs))
    ok = [j for j in range(len(docs)) if len(docs[j])]  # (a document without tokens is never returned)
    flat, per = [ok[3], ok[17], ok[5], ok[-1], ok[0]], [ok[1:4], ok[30:33]]
    want_flat = ix.search(Q, subset=flat, **exhaustive)
    want_per = ix.search(Q, subset=per, **exhaustive)
    for q in range(2):  # exhaustive: every id of the list comes back, nothing else
        assert sorted(want_flat[1][q][:5]) == sorted(flat) and (want_flat[1][q][5:] == -1).all()
        assert sorted(want_per[1][q][:3]) == per[q] and (want_per[1][q][3:] == -1).all()
    torch = pytest.importorskip("torch")
    forms = [(np.array(flat, np.uint16), want_flat), (torch.tensor(flat), want_flat), (tuple(flat), want_flat),
             ([np.int64(x) for x in flat], want_flat), ([torch.tensor(x) for x in flat], want_flat),
             (np.array(per), want_per), (torch.tensor(per), want_per), ([torch.tensor(x) for x in per], want_per),
             ([np.array(x, np.int32) for x in per], want_per), (tuple(map(tuple, per)), want_per)]
    for sub, (ws, wi) in forms:
        s, i = ix.search(Q, subset=sub, **exhaustive)
        np.testing.assert_array_equal(i, wi, err_msg=repr(sub))
        np.testing.assert_array_equal(s, ws, err_msg=repr(sub))
    # empty lists: nothing is searched
    for sub in ([], np.zeros(0, np.int64), [[], []], torch.zeros((2, 0), dtype=torch.int64)):
        assert (ix.search(Q, subset=sub, **exhaustive)[1] == -1).all()
    for sub in ([1.7, 2.2], [[1.5], [2.5]], np.array([1.0, 2.0]), torch.tensor([1.0]), [True, False],
                [[1, 2], ["3"]]):
        with pytest.raises(TypeError, match=r"subset(\[\d\])?: dtype \S+ is not an integer dtype"):
            ix.search(Q, subset=sub)
    for sub, msg in ((3, "subset: expected None, one list of document ids or one list per query, got int"),
                     ("12", "subset: expected None, one list of document ids or one list per query, got str"),
                     (np.array(3), r"subset: expected one list of ids \[n\] or one per query \[Nq, n\], got shape"),
                     ([[1, 2], 3], r"subset\[1\]: expected a list of document ids, got shape \(\)"),
                     ([[[1]], [[2]]], r"subset\[0\]: expected a list of document ids, got shape \(1, 1\)")):
        with pytest.raises((TypeError, ValueError), match=msg):
            ix.search(Q, subset=sub)
    with pytest.raises(ValueError, match=r"subset: 3 lists \(one per query\) for 2 queries"):
        ix.search(Q, subset=[[1], [2], [3]])
    with pytest.raises(ValueError, match=r"subset: 2 lists \(one per query\) for 1 queries"):
        ix.search(Q[0], subset=[[1], [2]])
    with pytest.raises(ValueError, match="subset"):  # beyond int64: out of range, not an OverflowError
        ix.search(Q, subset=np.array([2, 2**64 - 1], np.uint64))
    with pytest.raises((TypeError, ValueError), match="subset"):  # numpy reads these ints as float64
        ix.search(Q, subset=[2, 2**63])
    with pytest.raises(TypeError, match="q_lengths: dtype float64 is not an integer dtype"):
        ix.search(Q, q_lengths=[1.5, 2])


def test_roundtrip_threads_and_layouts(tmp_path):
    rng = np.random.default_rng(SEED)
    d = 32
    docs = corpus(rng, 150, d)
    ix = plaid.Index.build(docs, nbits=2, chunk_docs=40)
    assert ix.num_docs == 150 and ix.dim == d and ix.nbits == 2 and ix.num_chunks == 4
    assert ix.num_tokens == sum(len(x) for x in docs)
    Q = queries(rng, docs, 6, 12, d)
    ref = ix.search(Q, top_k=7, n_ivf_probe=2, n_full_scores=40)
    ix.save(tmp_path / "a")
    lx = plaid.Index.load(tmp_path / "a", verify=True)
    meta = json.loads((tmp_path / "a" / "metadata.json").read_text())
    assert meta["num_documents"] == 150 and meta["nbits"] == 2 and meta["num_chunks"] == 4
    try:
        for n in (1, 2, 3, 8):
            lik.set_num_threads(n)
            got = lx.search(Q, top_k=7, n_ivf_probe=2, n_full_scores=40)
            np.testing.assert_array_equal(got[0], ref[0])
            np.testing.assert_array_equal(got[1], ref[1])
            for q in range(len(Q)):  # one query alone: its stages over the threads
                one = lx.search(Q[q:q + 1], top_k=7, n_ivf_probe=2, n_full_scores=40)
                np.testing.assert_array_equal(one[0][0], ref[0][q])
                np.testing.assert_array_equal(one[1][0], ref[1][q])
    finally:
        lik.set_num_threads(0)
    # one query 2-D, a list of ragged queries, torch in -> torch out
    s1, i1 = lx.search(Q[2], top_k=7, n_ivf_probe=2, n_full_scores=40)
    np.testing.assert_array_equal(i1, ref[1][2])
    lens = rng.integers(1, 13, len(Q))
    ragged = [Q[q, : lens[q]] for q in range(len(Q))]
    s2, i2 = lx.search(ragged, top_k=7, n_ivf_probe=2, n_full_scores=40)
    s3, i3 = lx.search(Q, top_k=7, n_ivf_probe=2, n_full_scores=40, q_lengths=lens)
    np.testing.assert_array_equal(i2, i3)
    np.testing.assert_array_equal(s2, s3)
    torch = pytest.importorskip("torch")
    st, it = lx.search(torch.from_numpy(Q), top_k=7, n_ivf_probe=2, n_full_scores=40)
    assert isinstance(st, torch.Tensor) and it.dtype == torch.int64
    np.testing.assert_array_equal(it.numpy(), ref[1])
    # float16 queries: the documents both searches return score alike within fp16's
    # rounding (the approximate stages may swap a document at the margin: seed 75)
    s16, i16 = lx.search(Q.astype(np.float16), top_k=7, n_ivf_probe=2, n_full_scores=40)
    for q in range(len(Q)):
        both = np.intersect1d(i16[q], ref[1][q])
        assert len(both) >= 5, (q, i16[q], ref[1][q])
        for doc in both:
            a, b = s16[q][i16[q] == doc][0], ref[0][q][ref[1][q] == doc][0]
            assert abs(a - b) <= 5e-2, (q, doc, a, b)
    lx.close()
    with pytest.raises(ValueError, match="closed"):
        lx.search(Q)


def test_add_in_parts_equals_add_at_once(tmp_path):
    rng = np.random.default_rng(SEED + 1)
    d = 16
    docs = corpus(rng, 120, d)
    sample = np.concatenate(docs[:30])
    a = plaid.Index.train(sample, nbits=4, total_tokens=sum(len(x) for x in docs))
    b = plaid.Index.train(sample, nbits=4, total_tokens=sum(len(x) for x in docs))
    assert a.num_docs == 0
    assert list(a.add(docs)) == list(range(120))
    c1, c2 = sorted(rng.integers(0, 121, 2))
    b.add(docs[:c1])
    b.save(tmp_path / "b")
    b = plaid.Index.load(tmp_path / "b")
    assert list(b.add(docs[c1:c2])) == list(range(c1, c2))
    b.add(docs[c2:])
    Q = queries(rng, docs, 5, 9, d)
    ra = a.search(Q, top_k=10, n_ivf_probe=3, n_full_scores=60)
    rb = b.search(Q, top_k=10, n_ivf_probe=3, n_full_scores=60)
    np.testing.assert_array_equal(ra[0], rb[0])
    np.testing.assert_array_equal(ra[1], rb[1])
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")  # over its own (mapped) folder
    for f in ("ivf.npy", "ivf_lengths.npy", "merged_residuals.npy", "merged_codes.npy"):
        np.testing.assert_array_equal(np.load(tmp_path / "a" / f), np.load(tmp_path / "b" / f))
    # the padded layout with doc_lengths, and tokens + cu_seqlens, index the same documents
    L = max(len(x) for x in docs)
    pad = np.zeros((len(docs), L, d), np.float32)
    for j, x in enumerate(docs):
        pad[j, : len(x)] = x
    lens = np.array([len(x) for x in docs])
    p1 = plaid.Index.build(pad, doc_lengths=lens, num_centroids=32)
    p2 = plaid.Index.build(np.concatenate(docs), cu_seqlens=np.concatenate([[0], np.cumsum(lens)]),
                           num_centroids=32)
    np.testing.assert_array_equal(p1.search(Q)[1], p2.search(Q)[1])


def test_pruning_and_parameters():
    rng = np.random.default_rng(SEED + 2)
    d = 32
    docs = corpus(rng, 200, d)
    ix = plaid.Index.build(docs, num_centroids=64)
    Q = queries(rng, docs, 4, 10, d)
    s0, i0 = ix.search(Q, top_k=5, n_ivf_probe=64, n_full_scores=800)
    # a threshold below every centroid score prunes nothing
    s1, i1 = ix.search(Q, top_k=5, n_ivf_probe=64, n_full_scores=800, centroid_score_threshold=-10.0)
    np.testing.assert_array_equal(i0, i1)
    # a high threshold keeps results valid (descending, unique, in range)
    s2, i2 = ix.search(Q, top_k=5, n_ivf_probe=4, n_full_scores=16, centroid_score_threshold=0.5)
    for q in range(len(Q)):
        ok = i2[q] >= 0
        assert len(set(i2[q][ok])) == ok.sum() and (i2[q][ok] < 200).all()
        assert (np.diff(s2[q][ok]) <= 0).all()
    # more results than candidates: -1 / -inf tails
    s3, i3 = ix.search(Q, top_k=300, n_ivf_probe=64, n_full_scores=4096)
    assert (i3[:, 200:] == -1).all()


def test_errors(tmp_path):
    rng = np.random.default_rng(SEED + 3)
    docs = corpus(rng, 30, 16)
    ix = plaid.Index.build(docs, tmp_path / "ok")
    Q = queries(rng, docs, 2, 4, 16)
    with pytest.raises(ValueError, match="nbits"):
        plaid.Index.build(docs, nbits=3)
    # options that ctypes would wrap or the C default would hide: errors, not a silent nbits=2
    with pytest.raises(ValueError, match="nbits: 0, must be 1, 2, 4 or 8"):
        plaid.Index.build(docs, nbits=0)
    with pytest.raises(ValueError, match=r"nbits: 4294967298 is outside \[-2147483648, 2147483647\]"):
        plaid.Index.build(docs, nbits=2**32 + 2)
    with pytest.raises(ValueError, match="kmeans_niters: 4294967296 is outside"):
        plaid.Index.train(np.concatenate(docs), kmeans_niters=2**32)
    with pytest.raises(TypeError, match="nbits: expected an int, got bool"):
        plaid.Index.build(docs, nbits=True)
    padded = np.zeros((2, 5, 16), np.float32) + 1
    with pytest.raises(TypeError, match="doc_ids: dtype float64 is not an integer dtype"):
        ix.save(tmp_path / "float-ids", doc_ids=np.arange(30.0))
    with pytest.raises(TypeError, match="doc_lengths: dtype float64 is not an integer dtype"):
        plaid.Index.build(padded, doc_lengths=np.array([2.7, 5.0]))
    with pytest.raises(ValueError, match="d=8"):
        ix.search(Q[..., :8])
    with pytest.raises(ValueError, match="top_k"):
        ix.search(Q, top_k=0)
    with pytest.raises(ValueError, match="subset"):
        ix.search(Q, subset=[0, 30])
    with pytest.raises(ValueError, match="q_lengths"):
        ix.search(Q, q_lengths=[1, 5])
    with pytest.raises(ValueError, match="d=8"):
        ix.add([np.zeros((3, 8), np.float32)])
    with pytest.raises(ValueError, match="NaN"):
        ix.add([np.full((3, 16), np.nan, np.float32)])
    assert ix.num_docs == 30
    with pytest.raises(ValueError, match="not a folder"):
        plaid.Index.load(tmp_path / "nothing-here")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="metadata.json: cannot open"):
        plaid.Index.load(tmp_path / "empty")
    (tmp_path / "ok" / "ivf_lengths.npy").unlink()
    with pytest.raises(ValueError, match="ivf_lengths.npy"):
        plaid.Index.load(tmp_path / "ok")
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():  # an index without a device copy
        with pytest.raises(lik.LikError, match="no CUDA copy"):
            ix.search(torch.from_numpy(Q).cuda())


def test_misaligned_npy_data_is_refused(tmp_path):
    # the arrays are read in place: data that does not start at a multiple of
    # its element size is refused, never misread (fuzz_plaid_index found it)
    rng = np.random.default_rng(SEED + 4)
    plaid.Index.build(corpus(rng, 20, 16), tmp_path / "ix")
    path = tmp_path / "ix" / "merged_codes.npy"
    codes = np.load(path)
    h = f"{{'descr': '{codes.dtype.str}', 'fortran_order': False, 'shape': {codes.shape}, }}".encode()
    h += b" " * ((-(10 + len(h) + 1)) % 64 + 3) + b"\n"  # 3 bytes past numpy's alignment
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + codes.tobytes())
    with pytest.raises(ValueError, match=r"merged_codes.npy.*data starts at byte 131, not a multiple"):
        plaid.Index.load(tmp_path / "ix")


def test_device_on_the_host(tmp_path):
    # an index lives on the host until to(): device "cpu", no device bytes
    # (lik_plaid_index_info's device / device_bytes, -1 / 0); to("cpu") does
    # nothing; device= is checked before anything is built; without a CUDA
    # device a move there is refused (a library built without CUDA:
    # LIK_ERR_UNSUPPORTED as LikError; a CUDA build without a device:
    # LIK_ERR_DEVICE as ValueError) and the index stays usable on the host
    from lik import _lib

    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(SEED + 9)
    docs = corpus(rng, 30, 16)
    ix = plaid.Index.build(docs, tmp_path / "ix")
    info = _lib.plaid_info(ix._handle())
    assert (info.device, info.device_bytes, info.next_id, info.num_docs) == (-1, 0, 30, 30)
    assert ix.device == "cpu" and ix.device_bytes == 0 and "device=" not in repr(ix)
    Q = queries(rng, docs, 3, 4, 16)
    want = ix.search(Q, top_k=5)
    for dev in ("cpu", "cpu:0", torch.device("cpu")):
        assert ix.to(dev) is ix and ix.device == "cpu"
    for dev, exc, msg in (("gpu", ValueError, "device: 'gpu', expected 'cpu', 'cuda', 'cuda:N'"),
                          ("cuda:", ValueError, "device: 'cuda:', expected"), ("cuda:-1", ValueError, "expected"),
                          (-1, ValueError, r"device: -1 is outside \[0, 2147483647\]"),
                          (True, TypeError, "got bool"), (1.0, TypeError, "got float")):
        with pytest.raises(exc, match=msg):
            ix.to(dev)
        with pytest.raises(exc, match=msg):  # before the build
            plaid.Index.build(docs, tmp_path / "never", device=dev)
        assert not (tmp_path / "never").exists()
    with pytest.raises(TypeError, match="got NoneType"):
        ix.to(None)
    if torch.cuda.is_available():
        return
    for move in (lambda: ix.to("cuda"), lambda: ix.to(0), lambda: ix.to(torch.device("cuda", 0)),
                 lambda: plaid.Index.load(tmp_path / "ix", device="cuda"),
                 lambda: plaid.Index.build(docs, device="cuda:0"),
                 lambda: plaid.Index.train(np.concatenate(docs), device=0)):
        with pytest.raises((lik.LikError, ValueError)) as e:
            move()
        if isinstance(e.value, lik.LikError):
            assert e.value.status == _lib.LIK_ERR_UNSUPPORTED and "cuda" in str(e.value).lower()
        assert ix.device == "cpu" and ix.device_bytes == 0
    s, i = ix.search(Q, top_k=5)
    np.testing.assert_array_equal(i, want[1])
    np.testing.assert_array_equal(s, want[0])
