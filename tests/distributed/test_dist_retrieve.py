"""lik.distributed.retrieve on 2 and 3 gloo ranks (CPU processes) against
single-process lik.retrieve on the concatenated corpus: bitwise equal scores
and ids on every rank; uneven and empty shards, k > a shard, k = N, k > N
(error named), ties across shards (duplicate documents on different ranks:
the lower global id first), masks and per-rank token lengths, numpy / 2-D Q /
bfloat16 / list inputs, errors of one rank raised on every rank.

One process group per world size runs every case (a module fixture), so the
whole file costs two launches.  (The file is not named test_retrieve.py:
tests/python has one, and pytest's default import mode needs unique names.)
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from _launch import run_ranks  # noqa: E402

# name -> spec; sizes per world size
CASES = {
    "uneven": dict(sizes={2: [5, 17], 3: [5, 0, 12]}, top_k=7, masks=True),
    "k_above_shard": dict(sizes={2: [3, 10], 3: [3, 1, 10]}, top_k=8),
    "k_is_n": dict(sizes={2: [4, 2], 3: [2, 2, 2]}, top_k=6, masks=True),
    "k_above_n": dict(sizes={2: [4, 2], 3: [2, 0, 4]}, top_k=9,
                      error=("ValueError", "top_k=9 exceeds the corpus size N=6")),
    "ties": dict(sizes={2: [9, 9], 3: [6, 6, 6]}, top_k=18, ties=True, normalize=False),
    "ties_k3": dict(sizes={2: [7, 11], 3: [1, 8, 9]}, top_k=3, ties=True, normalize=False),
    "numpy_q2": dict(sizes={2: [6, 3], 3: [3, 3, 3]}, top_k=4, numpy=True, q2=True),
    "bf16": dict(sizes={2: [10, 5], 3: [5, 5, 5]}, top_k=5, dtype="bfloat16"),
    "doc_list": dict(sizes={2: [4, 6], 3: [0, 6, 4]}, top_k=5, as_list=True),
    "one_shard": dict(sizes={2: [0, 12], 3: [0, 0, 12]}, top_k=12),
    "random": dict(sizes={2: [140, 61], 3: [77, 0, 124]}, top_k=25, masks=True, Nq=6),
    "bad_d_on_last_rank": dict(sizes={2: [3, 3], 3: [2, 2, 2]}, top_k=2, bad_d=True,
                               error_last=("ValueError", "does not match Q's d"),
                               error=("RuntimeError", "failed")),
    "ranks_disagree_on_k": dict(sizes={2: [3, 3], 3: [2, 2, 2]}, top_k=2, k_per_rank=True,
                                error=("ValueError", "ranks disagree on top_k")),
}


def make_case(name: str, world: int):
    """The full corpus (numpy) and each rank's shard, from a fixed seed."""
    spec = CASES[name]
    rng = np.random.default_rng(sum(map(ord, name)) * 7 + world)
    sizes = spec["sizes"][world]
    N, Nq, Lq, Ld, d = sum(sizes), spec.get("Nq", 3), 5, 7, 16
    if spec.get("ties"):
        Q = rng.integers(-2, 3, size=(Nq, Lq, d)).astype(np.float32)
        base = rng.integers(-2, 3, size=(4, Ld, d)).astype(np.float32)
        D = base[rng.integers(0, 4, size=N)]  # 4 distinct documents: ties everywhere, across shards
    else:
        Q = rng.standard_normal((Nq, Lq, d)).astype(np.float32)
        D = rng.standard_normal((N, Ld, d)).astype(np.float32)
    q_mask = d_mask = None
    if spec.get("masks"):
        q_mask = rng.random((Nq, Lq)) < 0.8
        lens = rng.integers(1, Ld + 1, size=N)
        d_mask = np.arange(Ld)[None, :] < lens[:, None]
        d_mask &= rng.random((N, Ld)) < 0.9
    return spec, sizes, Q, q_mask, D, d_mask


def shard_args(spec, sizes, rank, Q, q_mask, D, d_mask):
    """(Q, D_local, q_mask, d_mask) as rank passes them."""
    off = sum(sizes[:rank])
    n = sizes[rank]
    Dl = D[off:off + n]
    ml = d_mask[off:off + n] if d_mask is not None else None
    if ml is not None and n:  # this rank's own token length: trim columns masked everywhere
        L = int(np.nonzero(ml.any(axis=0))[0].max(initial=0)) + 1
        Dl, ml = Dl[:, :L], ml[:, :L]
    if spec.get("q2"):
        Q, q_mask = Q[0], (q_mask[0] if q_mask is not None else None)
    if spec.get("as_list"):
        Dl = [torch.from_numpy(np.ascontiguousarray(x[: 3 + j % 4])) for j, x in enumerate(Dl)]
        ml = None
        return torch.from_numpy(Q), Dl, q_mask, ml
    if spec.get("numpy"):
        return Q, Dl, q_mask, ml
    tQ, tD = torch.from_numpy(Q), torch.from_numpy(np.ascontiguousarray(Dl))
    if spec.get("dtype") == "bfloat16":
        tQ, tD = tQ.to(torch.bfloat16), tD.to(torch.bfloat16)
    tqm = torch.from_numpy(q_mask) if q_mask is not None else None
    tdm = torch.from_numpy(np.ascontiguousarray(ml)) if ml is not None else None
    return tQ, tD, tqm, tdm


def reference(name: str, world: int):
    """lik.retrieve on the concatenated corpus, one process."""
    import lik

    spec, sizes, Q, q_mask, D, d_mask = make_case(name, world)
    if spec.get("as_list"):
        docs = [torch.from_numpy(np.ascontiguousarray(x[: 3 + j % 4]))
                for r in range(world) for j, x in enumerate(D[sum(sizes[:r]):sum(sizes[:r + 1])])]
        return lik.retrieve(torch.from_numpy(Q), docs, spec["top_k"], normalize=spec.get("normalize", True))
    if spec.get("q2"):
        Q, q_mask = Q[0], (q_mask[0] if q_mask is not None else None)
    if spec.get("dtype") == "bfloat16":
        Q, D = torch.from_numpy(Q).to(torch.bfloat16), torch.from_numpy(D).to(torch.bfloat16)
    return lik.retrieve(Q, D, spec["top_k"], q_mask, d_mask, normalize=spec.get("normalize", True))


def _worker(rank: int, world: int, names):
    import lik.distributed as ld

    out = {}
    for name in names:
        spec, sizes, Q, q_mask, D, d_mask = make_case(name, world)
        Qa, Dl, qm, dm = shard_args(spec, sizes, rank, Q, q_mask, D, d_mask)
        if spec.get("bad_d") and rank == world - 1:
            Dl = Dl[..., :-1]
        top_k = spec["top_k"] + (rank if spec.get("k_per_rank") else 0)
        try:
            s, i = ld.retrieve(Qa, Dl, top_k, q_mask=qm, d_mask=dm, normalize=spec.get("normalize", True))
            kind = "numpy" if isinstance(s, np.ndarray) else "torch"
            s, i = (s, i) if kind == "numpy" else (s.numpy(), i.numpy())
            out[name] = ("ok", kind, s, i)
        except Exception as exc:  # noqa: BLE001 - compared by the parent
            out[name] = ("err", type(exc).__name__, str(exc))
    return out


@pytest.fixture(scope="module", params=[2, 3], ids=["world2", "world3"])
def ranks(request):
    world = request.param
    return world, run_ranks(_worker, world, list(CASES), timeout=180)


@pytest.mark.parametrize("name", list(CASES))
def test_distributed_retrieve(ranks, name):
    world, results = ranks
    spec = CASES[name]
    if "error" in spec:
        for rank, res in enumerate(results):
            want = spec["error_last"] if rank == world - 1 and "error_last" in spec else spec["error"]
            assert res[name][0] == "err", f"rank {rank}: expected {want}, got a result"
            assert res[name][1] == want[0] and want[1] in res[name][2], f"rank {rank}: {res[name][1:]}"
        return
    ws, wi = reference(name, world)
    ws, wi = (ws, wi) if isinstance(ws, np.ndarray) else (ws.numpy(), wi.numpy())
    for rank, res in enumerate(results):
        status, kind, s, i = res[name]
        assert status == "ok"
        assert kind == ("numpy" if spec.get("numpy") else "torch")
        assert s.dtype == np.float32 and i.dtype == np.int64
        assert s.shape == ws.shape == i.shape
        np.testing.assert_array_equal(i, wi, err_msg=f"rank {rank}: ids")
        assert s.tobytes() == ws.tobytes(), f"rank {rank}: scores differ bitwise"
    if spec.get("ties"):  # the case has ties that cross shards: equal scores, ascending ids
        sizes = spec["sizes"][world]
        owner = np.searchsorted(np.cumsum(sizes), wi, side="right")
        row = ws.reshape(-1, ws.shape[-1])
        crossing = 0
        for q in range(row.shape[0]):
            ir, orow = wi.reshape(row.shape)[q], owner.reshape(row.shape)[q]
            for c in range(1, row.shape[1]):
                if row[q, c] == row[q, c - 1]:
                    assert ir[c] > ir[c - 1]
                    crossing += orow[c] != orow[c - 1]
        assert crossing > 0, "the case should have ties between documents of different ranks"
