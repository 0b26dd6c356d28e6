"""A living lik.plaid.Index: delete, update, compact, metadata, filtered
search -- against exact MaxSim over the surviving (and filtered) documents:
the residual scorer on the folder's own compressed tokens (bitwise: the
degenerate parameters make PLAID search exact) and the numpy reference
(_reference.maxsim_ref on the decoded tokens)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import lik
from _reference import maxsim_ref
from lik import plaid

from test_plaid_index import corpus, queries


def stored(path):
    """(codes, residuals, cu, ids, dead positions, centroids, weights, nbits) of a folder."""
    import json

    meta = json.load(open(os.path.join(path, "metadata.json")))
    lens = []
    for c in range(meta["num_chunks"]):
        lens += json.load(open(os.path.join(path, f"doclens.{c}.json")))
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    T = int(cu[-1])
    codes = np.load(os.path.join(path, "merged_codes.npy"))[:T]
    res = np.load(os.path.join(path, "merged_residuals.npy"))[:T]
    p = os.path.join(path, "doc_ids.npy")
    ids = np.load(p) if os.path.exists(p) else np.arange(len(lens))
    p = os.path.join(path, "deleted.npy")
    dead = np.load(p) if os.path.exists(p) else np.zeros(0, np.int64)
    return (codes, res, cu, ids, dead, np.load(os.path.join(path, "centroids.npy")),
            np.load(os.path.join(path, "bucket_weights.npy")), meta["nbits"])


def exact(path, Q, k, allowed_ids=None):
    """Exact top-k over the folder's live (allowed) documents: (ids, scores)
    per query by the residual scorer, plus the numpy reference's scores."""
    codes, res, cu, ids, dead, cent, w, nbits = stored(path)
    full = lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits=nbits)
    ok = np.ones(len(ids), bool)
    ok[dead] = False
    ok &= np.diff(cu) > 0
    if allowed_ids is not None:
        ok &= np.isin(ids, allowed_ids)
    pos = np.nonzero(ok)[0]
    dec = plaid.decompress(codes, res, cent, w, nbits=nbits)
    out = []
    for q in range(len(Q)):
        order = pos[np.lexsort((pos, -full[q, pos]))][:k]
        ref = np.array([maxsim_ref(Q[q], dec[cu[j]:cu[j + 1]], normalize=True)[0] for j in order])
        out.append((ids[order], full[q, order], ref))
    return out


def check_exact(ix, path, Q, k, allowed_ids=None, **kw):
    s, i = ix.search(Q, top_k=k, n_ivf_probe=ix.num_centroids, n_full_scores=1 << 20, **kw)
    for q, (ids, sc, ref) in enumerate(exact(path, Q, k, allowed_ids)):
        m = len(ids)
        np.testing.assert_array_equal(i[q, :m], ids)
        np.testing.assert_array_equal(s[q, :m], sc)
        np.testing.assert_allclose(s[q, :m], ref, rtol=1e-5, atol=1e-5)
        assert (i[q, m:] == -1).all()
    return s, i


@pytest.fixture
def built(tmp_path, rng):
    d = 16
    docs = corpus(rng, int(rng.integers(60, 140)), d)
    meta = [{"year": int(2000 + j % 30), "lang": ["en", "de", "fr"][j % 3], "n": j} for j in range(len(docs))]
    path = tmp_path / "ix"
    ix = plaid.Index.build(docs, path, nbits=2, chunk_docs=int(rng.integers(7, 50)), metadata=meta)
    return ix, docs, path, queries(rng, docs, 5, 12, d), rng


def test_delete_save_load_compact_exact(built, tmp_path):
    ix, docs, path, Q, rng = built
    n = len(docs)
    gone = rng.choice(n, n // 3, replace=False)
    ix.delete(gone)
    assert ix.num_docs == n - len(gone) and ix.num_deleted == len(gone)
    assert set(ix.ids) == set(range(n)) - set(gone.tolist())
    ix.save(path)
    assert os.path.exists(path / "deleted.npy") and not os.path.exists(path / "doc_ids.npy")
    s0, i0 = check_exact(ix, path, Q, 10)
    assert not np.isin(i0, gone).any()
    ix2 = plaid.Index.load(path)
    s1, i1 = check_exact(ix2, path, Q, 10)
    np.testing.assert_array_equal(i0, i1)
    # compact: the same results, ids kept, the deleted documents gone from the files
    ix2.compact()
    s2, i2 = ix2.search(Q, top_k=10, n_ivf_probe=ix2.num_centroids, n_full_scores=1 << 20)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_array_equal(s1, s2)
    ix2.save(tmp_path / "c")
    assert not os.path.exists(tmp_path / "c" / "deleted.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "c" / "doc_ids.npy"), np.setdiff1d(np.arange(n), gone))
    ix3 = plaid.Index.load(tmp_path / "c", verify=True)
    assert ix3.num_docs == n - len(gone) and ix3.num_deleted == 0
    check_exact(ix3, tmp_path / "c", Q, 10)
    np.testing.assert_array_equal(ix3.search(Q, top_k=10, n_ivf_probe=ix3.num_centroids,
                                             n_full_scores=1 << 20)[1], i1)
    # new documents continue after every id ever given
    assert ix3.add(docs[:2]) == range(n, n + 2)


def test_default_search_never_returns_deleted_and_is_not_starved(built):
    ix, docs, path, Q, rng = built
    n = len(docs)
    keep = rng.choice(n, 12, replace=False)
    ix.delete(np.setdiff1d(np.arange(n), keep))
    s, i = ix.search(Q, top_k=10, n_ivf_probe=1)  # few probes: the probed cells hold few live ones
    live = {int(j) for j in keep if len(docs[j])}
    for row in i:
        got = [int(x) for x in row if x >= 0]
        assert set(got) <= live and len(got) == min(10, len(live))


def test_update_replaces_under_the_same_id(built, tmp_path):
    ix, docs, path, Q, rng = built
    n = len(docs)
    upd = rng.choice(n, 5, replace=False)
    new = corpus(rng, 5, docs[0].shape[1], lmax=12)
    new = [x if len(x) else docs[0][:1] for x in new]
    ix.update(upd, new, metadata=[{"year": 1999, "lang": "xx"}] * 5)
    assert ix.num_docs == n and ix.num_deleted == 5
    ix.save(path)
    ids = np.load(path / "doc_ids.npy")
    assert sorted(ids[ids >= 0].tolist()) == list(range(n))
    check_exact(ix, path, Q, 10)
    # each updated id names one live stored document, the new one (its length), and an
    # exhaustive search for its tokens ranks it as exact MaxSim over the folder does
    # (not necessarily first: compressed, another document may score as high)
    codes, res, cu, ids, dead, *_ = stored(path)
    live = np.ones(len(ids), bool)
    live[dead] = False
    for j, x in zip(upd, new):
        p = np.flatnonzero((ids == j) & live)
        assert len(p) == 1 and cu[p[0] + 1] - cu[p[0]] == len(x)
        _, i = check_exact(ix, path, x[None], n)
        assert j in i[0].tolist()
    np.testing.assert_array_equal(np.sort(ix.where("lang = ?", ["xx"])), np.sort(upd))
    ix2 = plaid.Index.load(path)
    check_exact(ix2, path, Q, 10)
    np.testing.assert_array_equal(np.sort(ix2.where("year = 1999")), np.sort(upd))
    ix2.compact()
    ix2.save(tmp_path / "c")
    check_exact(plaid.Index.load(tmp_path / "c"), tmp_path / "c", Q, 10)


@pytest.mark.parametrize("frac", [0.5, 0.05, 0.01])
def test_filtered_search_exact_and_not_starved(built, frac):
    ix, docs, path, Q, rng = built
    n = len(docs)
    ix.delete(rng.choice(n, n // 10, replace=False))
    cut = 2000 + max(1, int(round(30 * frac)))
    allowed = ix.where("year < ? AND n >= ?", [cut, 0])
    want = [int(j) for j in range(n) if 2000 + j % 30 < cut and j in set(ix.ids.tolist())]
    np.testing.assert_array_equal(allowed, want)
    ix.save(path)
    check_exact(ix, path, Q, 10, allowed_ids=allowed, filter=("year < ? AND n >= ?", [cut, 0]))
    s, i = ix.search(Q, top_k=10, filter=("year < ?", [cut]))  # default parameters
    nonempty = [j for j in allowed if len(docs[j])]
    for row in i:
        got = [int(x) for x in row if x >= 0]
        assert set(got) <= set(nonempty) and len(got) == min(10, len(nonempty))
    # a filter no larger than the exact stage's budget (n_full_scores / 4) is searched
    # exactly, whatever the probes find
    s, i = ix.search(Q, top_k=10, n_ivf_probe=1, filter=("year < ?", [cut]))
    for q, (ids, sc, ref) in enumerate(exact(path, Q, 10, allowed)):
        np.testing.assert_array_equal(i[q, :len(ids)], ids)
        np.testing.assert_array_equal(s[q, :len(ids)], sc)


def test_where_is_confined(built):
    ix, docs, path, Q, rng = built
    assert len(ix.where("lang = ?", ["en' OR 1=1 --"])) == 0  # bound, never formatted
    assert len(ix.where("_id < ?", [3])) == 3
    for bad in ["1; DROP TABLE metadata", "(SELECT count(*) FROM sqlite_master) > 0",
                "year > (SELECT 1 FROM pragma_table_info('metadata'))", "no_such_column = 1", ""]:
        with pytest.raises(ValueError):
            ix.where(bad)
    with pytest.raises(TypeError):
        ix.where("year > ?", "2000")
    assert len(ix.where("1")) == len(docs)  # the table is intact
    with pytest.raises(ValueError, match="subset or filter"):
        ix.search(Q, filter=("1", []), subset=[1])


def test_metadata_round_trip_and_add(built, tmp_path):
    ix, docs, path, Q, rng = built
    n = len(docs)
    r = ix.add(docs[:3], metadata=[{"year": 2077, "tag": "new"}, {"year": 2077}, {}])
    assert r == range(n, n + 3)
    ix.delete([0, n])
    ix.save(path)
    ix2 = plaid.Index.load(path)
    np.testing.assert_array_equal(ix2.where("year = 2077"), [n + 1])
    np.testing.assert_array_equal(ix2.where("tag = 'new'"), [])  # n was deleted
    assert ix2.metadata([0, n]) == [None, None]  # the deleted rows left the saved database
    assert ix2.metadata([1, n + 1]) == [{"year": 2001, "lang": "de", "n": 1}, {"year": 2077}]
    ix2.delete([1])  # a delete alone, saved to the folder it came from: a partial save
    ix2.save(path)
    assert plaid.Index.load(path).metadata([1, n + 1]) == [None, {"year": 2077}]
    with pytest.raises(ValueError, match="metadata: 2 entries for 3 documents"):
        ix2.add(docs[:3], metadata=[{}, {}])
    with pytest.raises(ValueError, match="reserved"):
        ix2.add(docs[:1], metadata=[{"_id": 5}])


def test_errors_leave_the_index_unchanged(built):
    ix, docs, path, Q, rng = built
    n = len(docs)
    ix.delete([1, 2])
    cases = [([n + 5], rf"ids\[0\]={n + 5} is out of range"), ([-1], "out of range"),
             ([3, 4, 3], r"ids\[2\]=3 is a duplicate of ids\[0\]"), ([5, 1], r"ids\[1\]=1 is a deleted document")]
    for ids, msg in cases:
        with pytest.raises(ValueError, match=msg):
            ix.delete(ids)
        assert ix.num_deleted == 2
    with pytest.raises(ValueError, match="is a deleted document"):
        ix.update([1], docs[:1])
    with pytest.raises(ValueError, match="has 2 entries, documents has 1"):
        ix.update([3, 4], docs[:1])
    with pytest.raises(TypeError):
        ix.delete([1.5])
    ix.compact()
    with pytest.raises(ValueError, match="unknown id"):
        ix.delete([1])
    with pytest.raises(ValueError, match=r"subset\[0\]=2 is not a document"):
        ix.search(Q, subset=[2])
    assert ix.num_docs == n - 2


def test_without_deletes_the_folder_is_fast_plaids(tmp_path, rng):
    docs = corpus(rng, 40, 16)
    ix = plaid.Index.build(docs, tmp_path / "a", nbits=2)
    ix.compact()  # nothing deleted: a no-op
    ix.save(tmp_path / "b")
    for p in ("a", "b"):
        names = set(os.listdir(tmp_path / p))
        assert not names & {"deleted.npy", "doc_ids.npy", "metadata.sqlite"}
    for f in os.listdir(tmp_path / "a"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_ids_never_given_twice_after_a_compact(tmp_path, rng):
    """A compact that drops the highest ids: next_id.npy keeps them given,
    through save / load / add / update; written only when not implied."""
    n = 30
    docs = corpus(rng, n, 16)
    path = tmp_path / "ix"
    ix = plaid.Index.build(docs, path, nbits=2, chunk_docs=8)
    ix.delete([n - 1, n - 2])
    ix.save(path)
    assert not os.path.exists(path / "next_id.npy")  # deleted.npy + the stored ids imply it
    ix.compact()
    ix.save(path)
    assert np.load(path / "next_id.npy") == n and np.load(path / "next_id.npy").dtype == np.int64
    ix2 = plaid.Index.load(path)
    with pytest.raises(ValueError, match="unknown id"):
        ix2.delete([n - 1])
    assert ix2.add(docs[:2]) == range(n, n + 2)
    ix2.save(path)  # ids 0 .. n-3, n, n+1: implied again, the file goes
    assert not os.path.exists(path / "next_id.npy")
    ix2.delete([n, n + 1])
    ix2.compact()
    ix2.update([0], docs[:1])
    ix2.save(path)
    assert np.load(path / "next_id.npy") == n + 2
    assert plaid.Index.load(path).add(docs[:1]) == range(n + 2, n + 3)


@pytest.mark.parametrize("value, msg", [
    (np.int64(5), r"next_id.npy: 5 is not above every stored id \(it must be at least 28\)"),
    (np.int64(2**62), r"next_id.npy: 4611686018427387904 is not below 2\^62"),
    (np.array([40, 41]), "next_id.npy: must be one int32 / int64 value"),
    (np.float64(40), "next_id.npy"),
])
def test_hostile_next_id_is_refused(tmp_path, rng, value, msg):
    docs = corpus(rng, 30, 16)
    path = tmp_path / "ix"
    ix = plaid.Index.build(docs, path, nbits=2)
    ix.delete([28, 29])
    ix.compact()
    ix.save(path)
    np.save(path / "next_id.npy", value)
    with pytest.raises(ValueError, match=msg):
        plaid.Index.load(path)
