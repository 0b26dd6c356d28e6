"""lik.distributed.ShardedIndex on 2 and 3 gloo ranks (CPU processes) against
one lik.plaid.Index over all documents in one process, trained on the same
sample: bitwise equal scores and ids on every rank when the candidate cuts
do not bind (probing that leaves documents out included), ties across shards to the lower global id, uneven
and empty shards, top_k above N (ids -1), nbits 2 and 4, odd d and lengths;
with binding cuts every returned score is the document's exact score and the
list is at least as good as the single index's; the drawn sample; save /
load; errors raised on every rank (search and build arguments, ranks
disagreeing on d, no documents anywhere, rank 0's training failing, a
world-size mismatch, shards with different codecs).

One process group per world size runs every case (a module fixture).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from _launch import raised, run_ranks  # noqa: E402

K = 16
EXHAUSTIVE = dict(n_ivf_probe=K, n_full_scores=1 << 20)
CASES = {
    "exhaustive": dict(sizes={2: [23, 40], 3: [23, 0, 40]}, top_k=10, search=EXHAUSTIVE),
    "probe1": dict(sizes={2: [31, 17], 3: [11, 20, 17]}, top_k=40, Lq=2,
                   search=dict(n_ivf_probe=1, n_full_scores=1 << 20)),
    "k_above_n": dict(sizes={2: [4, 3], 3: [4, 0, 3]}, top_k=12, search=EXHAUSTIVE),
    "ties": dict(sizes={2: [9, 9], 3: [6, 6, 6]}, top_k=18, ties=True, search=EXHAUSTIVE),
    "nbits4_d48": dict(sizes={2: [30, 19], 3: [5, 30, 14]}, top_k=30, nbits=4, d=48,
                       Lq=3, search=dict(n_ivf_probe=2, n_full_scores=1 << 20)),
    "torch_q2": dict(sizes={2: [12, 12], 3: [8, 8, 8]}, top_k=4, torch=True, q2=True, search=EXHAUSTIVE),
    "drawn_sample": dict(sizes={2: [50, 26], 3: [26, 25, 25]}, top_k=6, drawn=True, sample_docs=20,
                         search=EXHAUSTIVE),
    "subset_flat": dict(sizes={2: [23, 40], 3: [23, 0, 40]}, top_k=6,  # ids on both sides of each shard edge
                        search=dict(EXHAUSTIVE, subset=[0, 5, 22, 23, 24, 40, 61, 62])),
    "subset_per_query": dict(sizes={2: [23, 40], 3: [11, 12, 40]}, top_k=4,
                             search=dict(EXHAUSTIVE, subset=[[1, 30], [], [10, 11, 12, 22, 23], [62], list(range(63))])),
    "subset_tensor": dict(sizes={2: [23, 40], 3: [11, 12, 40]}, top_k=3,  # one row of global ids per query
                          search=dict(EXHAUSTIVE, subset=torch.tensor([[0, 22, 23, 62], [1, 2, 3, 4], [60, 61, 62, 0],
                                                                       [10, 11, 12, 13], [5, 30, 45, 50]]))),
    "cuts_bind": dict(sizes={2: [60, 45], 3: [40, 35, 30]}, top_k=8, cuts=True,
                      search=dict(n_ivf_probe=4, n_full_scores=16)),
}


def make_case(name: str, world: int):
    """(spec, sizes, docs [list of [L, d] float32], Q [Nq, Lq, d], sample [Ts, d])."""
    spec = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)) * 11 + world)
    sizes = spec["sizes"][world]
    N, d = sum(sizes), spec.get("d", 36)
    centers = rng.standard_normal((12, d))
    lens = rng.integers(1, 14, size=N)
    docs = [(centers[rng.integers(0, 12, size=L)] + 0.4 * rng.standard_normal((L, d))).astype(np.float32)
            for L in lens]
    if spec.get("ties"):  # 3 distinct documents, repeated across the shards
        base = docs[:3]
        docs = [base[j] for j in rng.integers(0, 3, size=N)]
    Lq = spec.get("Lq", 9)
    Q = (centers[rng.integers(0, 12, size=(5, Lq))] + 0.5 * rng.standard_normal((5, Lq, d))).astype(np.float32)
    sample = np.concatenate(docs[::2])
    return spec, sizes, docs, Q, sample


def _search_args(spec, Q):
    q = Q[0] if spec.get("q2") else Q
    return torch.from_numpy(q) if spec.get("torch") else q


def single(name: str, world: int):
    """One index over all documents, one process: trained as the sharded build trains."""
    from lik import plaid

    spec, sizes, docs, Q, sample = make_case(name, world)
    if spec.get("drawn"):
        N = len(docs)
        picks = np.sort(np.random.default_rng(42).choice(N, spec["sample_docs"], replace=False))
        sample = np.concatenate([docs[j] for j in picks])
    ix = plaid.Index.train(sample, nbits=spec.get("nbits", 2), num_centroids=K,
                           total_tokens=sum(len(x) for x in docs))
    ix.add(docs)
    return ix, spec, Q


def _worker(rank: int, world: int, names, tmp):
    import lik.distributed as ld
    from lik import plaid

    out = {}
    for name in names:
        spec, sizes, docs, Q, sample = make_case(name, world)
        off = sum(sizes[:rank])
        mine = docs[off:off + sizes[rank]]
        kw = dict(nbits=spec.get("nbits", 2), num_centroids=K)
        if spec.get("drawn"):
            ix = ld.ShardedIndex.build(mine, sample_docs=spec["sample_docs"], **kw)
        else:
            ix = ld.ShardedIndex.build(mine, sample=sample if rank == 0 else None, **kw)
        s, i = ix.search(_search_args(spec, Q), spec["top_k"], **spec["search"])
        out[name] = (type(s).__name__, np.asarray(s), np.asarray(i))
    # save / load: a round trip, then a world-size mismatch and shards with different codecs
    spec, sizes, docs, Q, sample = make_case("exhaustive", world)
    off = sum(sizes[:rank])
    ix = ld.ShardedIndex.build(docs[off:off + sizes[rank]], os.path.join(tmp, "ix"), sample=sample, num_centroids=K)
    back = ld.ShardedIndex.load(os.path.join(tmp, "ix"))
    out["save_load"] = (ix.search(Q, 10, **EXHAUSTIVE), back.search(Q, 10, **EXHAUSTIVE))

    if rank == 0:
        with open(os.path.join(tmp, "ix", "shards.json")) as f:
            meta = json.load(f)
        out["shards_json"] = meta
    torch.distributed.barrier()
    if rank == 0:
        with open(os.path.join(tmp, "ix", "shards.json"), "w") as f:
            json.dump({"world_size": world + 1}, f)
    torch.distributed.barrier()
    out["err_world"] = raised(lambda: ld.ShardedIndex.load(os.path.join(tmp, "ix")))
    own = os.path.join(tmp, "own")  # every rank trains its own codec: not one index
    os.makedirs(own, exist_ok=True)
    plaid.Index.build(docs[:20], num_centroids=8, seed=rank).save(os.path.join(own, f"shard-{rank}"))
    out["err_codec"] = raised(lambda: ld.ShardedIndex.load(own))
    out["err_k"] = raised(lambda: ix.search(Q, 3 + rank))
    out["err_subset"] = raised(lambda: ix.search(Q, 3, subset=[0, sum(sizes)]))
    out["err_subset_neg"] = raised(lambda: ix.search(Q, 3, subset=np.array([3, -1])))
    out["err_subset_float"] = raised(lambda: ix.search(Q, 3, subset=[[0.0, 1.5]] * Q.shape[0]))
    out["err_d"] = raised(lambda: ix.search(Q[..., :-1] if rank == world - 1 else Q, 3))
    mine = docs[off:off + sizes[rank]] or docs[:1]
    out["err_build_d"] = raised(lambda: ld.ShardedIndex.build([x[:, :-4] for x in mine] if rank == world - 1 else mine,
                                                              sample=sample if rank == 0 else None, num_centroids=K))
    out["err_no_docs"] = raised(lambda: ld.ShardedIndex.build([], num_centroids=K))
    out["err_nbits"] = raised(lambda: ld.ShardedIndex.build(mine, nbits=3, num_centroids=K))
    out["ok_after_errors"] = ix.search(Q, 3)
    out["no_queries"] = ix.search(Q[:0], 3)
    return out


@pytest.fixture(scope="module", params=[2, 3], ids=["world2", "world3"])
def ranks(request, tmp_path_factory):
    world = request.param
    return world, run_ranks(_worker, world, list(CASES), str(tmp_path_factory.mktemp(f"w{world}")), timeout=240)


@pytest.mark.parametrize("name", list(CASES))
def test_sharded_search(ranks, name):
    world, results = ranks
    ix, spec, Q = single(name, world)
    want_s, want_i = ix.search(_search_args(spec, Q), spec["top_k"], **spec["search"])
    want_s, want_i = np.asarray(want_s), np.asarray(want_i)
    for rank, res in enumerate(results):
        kind, s, i = res[name]
        assert kind == ("Tensor" if spec.get("torch") else "ndarray"), rank
        assert s.dtype == np.float32 and i.dtype == np.int64 and s.shape == want_s.shape == i.shape
        if not spec.get("cuts"):
            np.testing.assert_array_equal(i, want_i, err_msg=f"rank {rank}: ids")
            assert s.tobytes() == want_s.tobytes(), f"rank {rank}: scores differ bitwise"
            continue
        # binding cuts: each returned score is the document's exact score, the list is at least as good
        all_s, all_i = ix.search(Q, len(ix), **EXHAUSTIVE)
        for q in range(Q.shape[0]):
            exact = dict(zip(all_i[q].tolist(), all_s[q].tolist()))
            assert all(exact[int(j)] == float(v) for j, v in zip(i[q], s[q]))
            assert (s[q] >= want_s[q]).all(), (s[q], want_s[q])
        assert (results[0][name][2] == i).all()
    if spec.get("ties"):
        owner = np.searchsorted(np.cumsum(spec["sizes"][world]), want_i, side="right")
        crossing = sum(int(want_s[q, c] == want_s[q, c - 1] and owner[q, c] != owner[q, c - 1])
                       for q in range(want_s.shape[0]) for c in range(1, want_s.shape[1]))
        assert crossing > 0, "the case should have ties between documents of different ranks"
    sub = spec["search"].get("subset")
    if sub is not None:  # only ids of the subset come back, as many as it holds
        sub = sub.tolist() if torch.is_tensor(sub) else sub
        per_query = sub if isinstance(sub[0], list) else [sub] * want_i.shape[0]
        for q, ids in enumerate(per_query):
            got = [int(j) for j in want_i[q] if j >= 0]
            assert set(got) <= set(ids) and len(got) == min(len(ids), spec["top_k"]), (q, got, ids)
    if name == "probe1":  # the probing leaves documents out: fewer results than top_k
        assert (want_i == -1).any(axis=1).all()
    if name == "k_above_n":
        n = sum(spec["sizes"][world])
        assert (want_i[:, n:] == -1).all() and (want_i[:, :n] >= 0).all()


def test_save_load_and_errors(ranks):
    world, results = ranks
    ix, spec, Q = single("exhaustive", world)
    want_s, want_i = ix.search(Q, 10, **EXHAUSTIVE)
    for rank, res in enumerate(results):
        (s1, i1), (s2, i2) = res["save_load"]
        np.testing.assert_array_equal(i1, want_i)
        np.testing.assert_array_equal(i2, want_i)
        assert s2.tobytes() == want_s.tobytes()
        kind, msg = res["err_world"]
        assert kind == "ValueError" and f"has {world + 1} shards, the group has {world} ranks" in msg
        kind, msg = res["err_codec"]
        assert kind == "ValueError" and "do not share one codec" in msg
        kind, msg = res["err_subset"]  # every rank checks the global ids itself
        assert kind == "ValueError" and f"subset: ids must be integers in [0, {sum(spec['sizes'][world])})" in msg
        assert res["err_subset_neg"] == res["err_subset"]
        kind, msg = res["err_subset_float"]  # ids are integers: 1.5 is not read as 1
        assert kind == "TypeError" and "subset[0]: dtype float64 is not an integer dtype" in msg, msg
        kind, msg = res["err_k"]
        assert kind == "ValueError" and "ranks disagree on top_k" in msg
        kind, msg = res["err_d"]
        if rank == world - 1:
            assert kind == "ValueError", msg
        else:
            assert kind == "RuntimeError" and f"rank(s) [{world - 1}]" in msg
        kind, msg = res["err_build_d"]
        assert kind == "ValueError" and "ranks disagree on d" in msg
        kind, msg = res["err_no_docs"]
        assert kind == "ValueError" and "no documents on any rank and no sample" in msg
        kind, msg = res["err_nbits"]  # rank 0's training fails: its error there, named on the others
        if rank == 0:
            assert kind == "ValueError" and "nbits" in msg, msg
        else:
            assert kind == "RuntimeError" and "rank 0 failed to train the codec" in msg
        np.testing.assert_array_equal(res["ok_after_errors"][1], want_i[:, :3])
        s0, i0 = res["no_queries"]  # Nq = 0: empty results, not a RuntimeError in the exchange
        assert s0.shape == (0, 3) and s0.dtype == np.float32 and i0.shape == (0, 3) and i0.dtype == np.int64
    assert results[0]["shards_json"] == {"world_size": world, "num_docs": spec["sizes"][world]}
