"""GPU suite of the PLAID index (lik.plaid.Index on CUDA, issue 29): the GPU
search of an index against the CPU search of the same index (its device copy
freed for the CPU call, made again after), on small clustered corpora built
on the host.

How results are compared (check_like_cpu).  The GPU's exact stage scores on
fp16 tensor cores (the CPU in fp32) and sums centroid scores in another
order, so with tol(s) = 2e-3 |s| + 2e-3 Lq (Lq: the query's valid tokens):

* strict, every query: ids then -1 / scores -inf (past the results), on both
  sides; the GPU's ids distinct, live (never a deleted or empty document),
  ordered by score descending then lower id; (a) a document both return has
  scores within tol; with ``full`` (the CPU's exact score of every document)
  every GPU score is within tol of its document's exact score;
* (b) per query, the GPU's list is the CPU's up to near-ties: as many
  results; two documents both return are in the same order unless their CPU
  scores are within 2 tol (each side errs by tol); a document only the CPU
  returns scores within 2 tol (3 tol when its GPU-only rival's CPU score is
  not known) of every document only the GPU returns.  A query failing (b) is
  reported; ``budget`` of them are allowed per call where the candidate
  stages may differ (a centroid score at a probe / pruning / n_full_scores
  boundary, within rounding: the candidate sets then differ by more than a
  near-tie), none in the exact setting (every cell probed, every document
  scored exactly) or where the lists must agree.

Marked ``gpu``; skipped without torch + CUDA.  Small sizes: well under 30 s
on an H200.  LIK_TEST_SEED replays a run (the seed is in every message).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

import lik  # noqa: E402
from lik import plaid  # noqa: E402

SEED = int(os.environ.get("LIK_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
RTOL, ATOL_PER_TOKEN = 2e-3, 2e-3
NQ, LQ = 16, 32

# name: (d, nbits, documents, K); d * nbits % 8 == 0
CORPORA = {
    "d128-nb2": (128, 2, 2000, 256),
    "d96-nb4": (96, 4, 600, 128),
    "d48-nb1": (48, 1, 300, 64),
    "d8-nb8": (8, 8, 500, 32),
    "d128-nb8": (128, 8, 300, 64),
    "d20-nb2": (20, 2, 400, 64),  # d not a multiple of 8: the kernels' scalar paths
    "d17-nb8": (17, 8, 300, 64),
}

GRID = [dict(top_k=k, n_ivf_probe=p, n_full_scores=f, centroid_score_threshold=t)
        for t in (None, 0.4) for p in (1, 4, 8, 32) for f in (16, 64, 4096) for k in (1, 10, 100)]


# ---- data -----------------------------------------------------------------------------------


def corpus(rng, n, d, lmax=150, clusters=24):
    """n documents of 1..lmax tokens (about 3 % of them empty), each drawn
    around 3 of ``clusters`` random directions, unit-norm float32."""
    dirs = rng.standard_normal((clusters, d))
    lens = rng.integers(1, lmax + 1, n)
    lens[rng.random(n) < 0.03] = 0
    topics = rng.integers(0, clusters, (n, 3))
    docs = []
    for j, L in enumerate(lens):
        x = dirs[topics[j, rng.integers(0, 3, L)]] + 0.6 * rng.standard_normal((L, d))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        docs.append(x.astype(np.float32))
    return docs


def queries(rng, docs, nq, lq):
    """float32 CPU tensor [nq, lq, d]: each query lq tokens of a random
    non-empty document plus noise of norm ~0.5."""
    full = [x for x in docs if len(x)]
    d = full[0].shape[1]
    Q = np.empty((nq, lq, d), np.float32)
    for i in range(nq):
        src = full[rng.integers(0, len(full))]
        Q[i] = src[rng.integers(0, len(src), lq)] + 0.5 * rng.standard_normal((lq, d)) / np.sqrt(d)
    return torch.from_numpy(Q)


@dataclass
class Built:
    ix: plaid.Index
    docs: list
    path: str
    nbits: int
    seed: int

    @property
    def live(self) -> set:
        """ids of the live documents with tokens (what search may return)."""
        return {int(j) for j in self.ix.ids if len(self.docs[j])}

    def full(self, Q, q_lengths=None):
        """float32 [Nq, N]: the CPU's exact residual MaxSim of each query
        against every document of the saved folder (what the CPU search
        writes for a document it returns, bitwise)."""
        T = sum(len(x) for x in self.docs)
        codes = np.load(os.path.join(self.path, "merged_codes.npy"))[:T]
        res = np.load(os.path.join(self.path, "merged_residuals.npy"))[:T]
        cent = np.load(os.path.join(self.path, "centroids.npy"))
        w = np.load(os.path.join(self.path, "bucket_weights.npy"))
        cu = np.concatenate([[0], np.cumsum([len(x) for x in self.docs])]).astype(np.int64)
        Qn = Q.cpu().float().numpy()
        lens = [Qn.shape[1]] * len(Qn) if q_lengths is None else [int(v) for v in q_lengths]
        out = np.zeros((len(Qn), len(self.docs)), np.float32)
        for q, L in enumerate(lens):
            if L:
                out[q] = lik.maxsim_residual_varlen(Qn[q:q + 1, :L], codes, res, cu, cent, w, nbits=self.nbits)[0]
        return out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name -> Built: each corpus built once on the host (device="cuda")."""
    cache = {}

    def get(name):
        if name not in cache:
            d, nbits, n, K = CORPORA[name]
            rng = np.random.default_rng([SEED, d, nbits, n])
            docs = corpus(rng, n, d)
            path = str(tmp_path_factory.mktemp(name))
            ix = plaid.Index.build(docs, path, nbits=nbits, num_centroids=K, seed=int(rng.integers(1 << 30)),
                                   device="cuda")
            cache[name] = Built(ix, docs, path, nbits, SEED)
        return cache[name]

    yield get
    for b in cache.values():
        b.ix.close()


def on_cpu(ix, fn):
    """fn() run with the index's device copy freed (the CPU search), the
    copy made again after."""
    dev = ix.device
    ix.to("cpu")
    try:
        return fn()
    finally:
        ix.to(dev)


# ---- the comparison ---------------------------------------------------------------------------


def _np(x):
    return x.cpu().numpy() if torch.is_tensor(x) else np.asarray(x)


def check_like_cpu(what, gpu, cpu, lq, *, full=None, live=None, budget=0):
    """Asserts the GPU results agree with the CPU's (the module docstring's
    rules); ``gpu`` / ``cpu`` are (scores, ids) of [Nq, k] or [k]; ``lq``
    the valid tokens of each query (an int or [Nq])."""
    gs, gi, cs, ci = (np.atleast_2d(_np(x)) for x in (*gpu, *cpu))
    assert gs.shape == cs.shape == gi.shape == ci.shape, f"{what}: shapes {gs.shape} / {cs.shape}"
    lq = np.broadcast_to(np.asarray(lq), (len(gs),))
    strict, loose = [], []
    for q in range(len(gs)):
        atol = ATOL_PER_TOKEN * max(int(lq[q]), 1)

        def tol(s):
            return RTOL * np.abs(s) + atol

        ng, nc = int((gi[q] >= 0).sum()), int((ci[q] >= 0).sum())
        for side, s, i, n in (("GPU", gs[q], gi[q], ng), ("CPU", cs[q], ci[q], nc)):
            if not ((i[:n] >= 0).all() and (i[n:] == -1).all() and np.isneginf(s[n:]).all()
                    and np.isfinite(s[:n]).all()):
                strict.append(f"query {q}: {side} results are not {n} ids with finite scores, then ids -1 / "
                              f"scores -inf: ids {i.tolist()}, scores {s.tolist()}")
        g_ids, c_ids = gi[q, :ng], ci[q, :nc]
        g_sc, c_sc = gs[q, :ng], cs[q, :nc]
        if len(set(g_ids.tolist())) != ng:
            strict.append(f"query {q}: GPU ids repeat: {g_ids.tolist()}")
        if live is not None and not set(g_ids.tolist()) <= live:
            strict.append(f"query {q}: GPU returns ids that are deleted or empty: "
                          f"{sorted(set(g_ids.tolist()) - live)}")
        bad = np.flatnonzero((g_sc[:-1] < g_sc[1:]) | ((g_sc[:-1] == g_sc[1:]) & (g_ids[:-1] > g_ids[1:])))
        if bad.size:
            strict.append(f"query {q}: GPU ranking not by score descending then lower id at ranks "
                          f"{bad.tolist()}: ids {g_ids.tolist()}, scores {g_sc.tolist()}")
        # (a) the scores of the documents both return; with full, of every GPU document
        _, rg, rc = np.intersect1d(g_ids, c_ids, return_indices=True)
        order = np.argsort(rg)
        rg, rc = rg[order], rc[order]  # common documents in the GPU's order
        off = np.flatnonzero(np.abs(g_sc[rg] - c_sc[rc]) > tol(c_sc[rc]))
        for k in off[:3]:
            strict.append(f"query {q}: document {g_ids[rg[k]]}: GPU score {g_sc[rg[k]]:.7g} (rank {rg[k]}), CPU "
                          f"{c_sc[rc[k]]:.7g} (rank {rc[k]}), more than {tol(c_sc[rc[k]]):.3g} apart")
        if full is not None and ng:
            ex = full[q, g_ids]
            for r in np.flatnonzero(np.abs(g_sc - ex) > tol(ex))[:3]:
                strict.append(f"query {q}: document {g_ids[r]}: GPU score {g_sc[r]:.7g}, its exact score "
                              f"{ex[r]:.7g} (CPU), more than {tol(ex[r]):.3g} apart")
        # (b) the lists, up to near-ties
        why = []
        if ng != nc:
            why.append(f"{ng} results on the GPU, {nc} on the CPU")
        if len(rc) > 1:  # common documents in the GPU's order: a CPU score above an earlier one's is a swap
            seq = c_sc[rc]
            low = np.minimum.accumulate(seq)
            for b in np.flatnonzero(seq[1:] - low[:-1] > 2 * tol(seq[1:]))[:2] + 1:
                a = int(np.argmin(seq[:b]))
                why.append(f"documents {g_ids[rg[b]]} (CPU score {seq[b]:.7g}) and {g_ids[rg[a]]} ({seq[a]:.7g}) "
                           "are swapped")
        gpu_only = np.setdiff1d(np.arange(ng), rg)
        cpu_only = np.setdiff1d(np.arange(nc), rc)
        if gpu_only.size and cpu_only.size:
            # the CPU's best dropped document against the GPU's lowest added one
            x = cpu_only[0]
            rivals, slack = (full[q, g_ids[gpu_only]], 2) if full is not None else (g_sc[gpu_only], 3)
            y, rival = gpu_only[np.argmin(rivals)], rivals.min()
            if c_sc[x] - rival > slack * tol(c_sc[x]):
                why.append(f"document {c_ids[x]} (CPU rank {x}, score {c_sc[x]:.7g}) is replaced by {g_ids[y]} "
                           f"(GPU rank {y}, score {g_sc[y]:.7g}, exact {rival:.7g})")
        if why:
            loose.append(f"query {q}: " + "; ".join(why) + f"\n    GPU ids {gi[q].tolist()}\n    CPU ids "
                         f"{ci[q].tolist()}\n    GPU scores {gs[q].tolist()}\n    CPU scores {cs[q].tolist()}")
    msg = f"{what} (LIK_TEST_SEED={SEED})"
    assert not strict, f"{msg}:\n" + "\n".join(strict[:8])
    assert len(loose) <= budget, (f"{msg}: {len(loose)} queries differ beyond near-ties ({budget} allowed):\n"
                                  + "\n".join(loose[:6]))


def exact_kw(ix, n):
    """Parameters under which PLAID search is exact: every cell probed,
    every document scored."""
    return dict(n_ivf_probe=ix.num_centroids, n_full_scores=4 * n)


# ---- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CORPORA))
def test_search_matches_cpu(built, name):
    b = built(name)
    ix = b.ix
    assert ix.device == f"cuda:{torch.cuda.current_device()}"
    d, nbits = ix.dim, ix.nbits
    assert ix.device_bytes >= ix.num_tokens * (4 + d * nbits // 8) > 0
    rng = np.random.default_rng([SEED, 1, d, nbits])
    Q = queries(rng, b.docs, NQ, LQ)
    Qc = Q.cuda()
    # (parameters, queries allowed to differ beyond near-ties): none where the search is exact
    kws = [(kw, NQ // 8) for kw in GRID] + [(dict(top_k=k, **exact_kw(ix, len(b.docs))), 0) for k in (1, 10, 100)]
    gpu = [ix.search(Qc, **kw) for kw, _ in kws]
    cpu = on_cpu(ix, lambda: [ix.search(Q, **kw) for kw, _ in kws])
    full, live = b.full(Q), b.live
    for (kw, budget), g, c in zip(kws, gpu, cpu):
        for x, dt in zip(g, (torch.float32, torch.int64)):
            assert x.is_cuda and x.dtype == dt and x.shape == (NQ, kw["top_k"]), (kw, x.device, x.dtype, x.shape)
        check_like_cpu(f"{name} {kw}", g, c, LQ, full=full, live=live, budget=budget)


def test_query_forms(built):
    """2-D Q, Q dtypes, a strided Q, numpy / CPU torch / list Q on the CUDA
    index (the GPU search, results where Q was), Nq = 0."""
    b = built("d96-nb4")
    ix = b.ix
    rng = np.random.default_rng([SEED, 2])
    Q = queries(rng, b.docs, 8, 24)
    Qc = Q.cuda()
    ref = ix.search(Qc, top_k=10)
    cases = {
        "2-D": (Qc[3], Q[3]),
        "strided": (Qc.transpose(1, 2).contiguous().transpose(1, 2), Q),
        **{str(dt): (Qc.to(dt), Q.to(dt)) for dt in (torch.float16, torch.bfloat16, torch.float64)},
    }
    assert not cases["strided"][0].is_contiguous()
    gpu = {k: ix.search(g, top_k=10) for k, (g, _) in cases.items()}
    cpu = on_cpu(ix, lambda: {k: ix.search(c, top_k=10) for k, (_, c) in cases.items()})
    for k in cases:
        shape = (10,) if k == "2-D" else (8, 10)
        assert gpu[k][0].shape == gpu[k][1].shape == shape and gpu[k][0].is_cuda, k
        check_like_cpu(f"Q {k}", gpu[k], cpu[k], 24, budget=1)
    # Q on the host: the GPU search all the same (bitwise the CUDA Q's), results on the host
    s, i = ix.search(Q, top_k=10)
    assert s.device.type == "cpu" and i.device.type == "cpu"
    assert torch.equal(s, ref[0].cpu()) and torch.equal(i, ref[1].cpu())
    s, i = ix.search(Q.numpy(), top_k=10)
    assert isinstance(s, np.ndarray) and isinstance(i, np.ndarray)
    np.testing.assert_array_equal(s, ref[0].cpu().numpy())
    np.testing.assert_array_equal(i, ref[1].cpu().numpy())
    lens = [24, 5, 1, 17]
    s, i = ix.search([Q[j, :L].numpy() for j, L in enumerate(lens)], top_k=10)
    s2, i2 = ix.search(Qc[:4], top_k=10, q_lengths=torch.tensor(lens, device="cuda"))
    assert isinstance(s, np.ndarray)
    np.testing.assert_array_equal(s, s2.cpu().numpy())
    np.testing.assert_array_equal(i, i2.cpu().numpy())
    # Nq = 0
    s, i = ix.search(Qc[:0], top_k=7)
    assert s.shape == i.shape == (0, 7) and s.is_cuda and i.is_cuda


def test_q_lengths_zero_and_nan_tokens(built):
    b = built("d128-nb2")
    ix = b.ix
    rng = np.random.default_rng([SEED, 3])
    Q = queries(rng, b.docs, 12, LQ)
    Q[1] = 0  # an all-zero query: probes nothing
    Q[2, 5] = 0  # one zero token
    Q[3, 7] = float("nan")  # a NaN token
    Q[4, 2, 9] = float("nan")  # one NaN value
    Q[5] = float("nan")  # a query of NaN tokens
    lens = torch.tensor([LQ, LQ, LQ, LQ, LQ, LQ, 0, 1, 17, 3, 0, 31])
    Qc = Q.cuda()
    kw = dict(top_k=10, n_ivf_probe=8, n_full_scores=256)
    gpu = {dt: ix.search(Qc, q_lengths=lens.to(dt).cuda(), **kw) for dt in (torch.int32, torch.int64)}
    gpu["host lengths"] = ix.search(Qc, q_lengths=lens.tolist(), **kw)
    cpu = on_cpu(ix, lambda: ix.search(Q, q_lengths=lens, **kw))
    for k, g in gpu.items():
        check_like_cpu(f"q_lengths {k}", g, cpu, lens.numpy(), live=b.live, budget=1)
    for q in (1, 5, 6, 10):  # nothing to search with
        assert (gpu[torch.int32][1][q] == -1).all() and torch.isneginf(gpu[torch.int32][0][q]).all(), q
    # the same GPU search whatever the lengths' dtype or device
    for k in (torch.int64, "host lengths"):
        assert torch.equal(gpu[k][0], gpu[torch.int32][0]) and torch.equal(gpu[k][1], gpu[torch.int32][1]), k
    # CUDA lengths outside [0, Lq] are clamped (not read on the host); host ones are refused
    over = ix.search(Qc[:2], q_lengths=torch.tensor([LQ + 9, -3], device="cuda"), **kw)
    clamped = ix.search(Qc[:2], q_lengths=torch.tensor([LQ, 0], device="cuda"), **kw)
    assert torch.equal(over[0], clamped[0]) and torch.equal(over[1], clamped[1])
    with pytest.raises(ValueError, match=r"q_lengths\[0\]=40 is outside \[0, 32\]"):
        ix.search(Qc[:2], q_lengths=[LQ + 8, 0], **kw)


def test_subset_and_filter_fall_back_to_the_cpu(tmp_path):
    rng = np.random.default_rng([SEED, 4])
    docs = corpus(rng, 300, 48)
    ix = plaid.Index.build(docs, tmp_path / "ix", nbits=2, num_centroids=64,
                           metadata=[{"bucket": j % 5} for j in range(len(docs))], device="cuda:0")
    Q = queries(rng, docs, 6, 20)
    Qc = Q.cuda()
    sub = [int(j) for j in rng.integers(0, len(docs), 120)]
    per = [[int(j) for j in rng.integers(0, len(docs), 30)] for _ in range(6)]
    got = {"subset": ix.search(Qc, top_k=10, subset=sub),
           "subset cuda": ix.search(Qc, top_k=10, subset=torch.tensor(sub, device="cuda")),
           "per query": ix.search(Qc, top_k=10, subset=per),
           "filter": ix.search(Qc, top_k=10, filter=("bucket = ?", [2]))}
    want = on_cpu(ix, lambda: {"subset": ix.search(Q, top_k=10, subset=sub),
                               "subset cuda": ix.search(Q, top_k=10, subset=sub),
                               "per query": ix.search(Q, top_k=10, subset=per),
                               "filter": ix.search(Q, top_k=10, subset=ix.where("bucket = ?", [2]))})
    for k in got:  # the CPU search: bitwise the CPU's, on Q's device
        assert got[k][0].is_cuda and got[k][1].is_cuda, k
        assert torch.equal(got[k][0].cpu(), want[k][0]) and torch.equal(got[k][1].cpu(), want[k][1]), k
    assert ix.device == "cuda:0"
    ix.close()


def test_delete_add_update_compact_refresh_the_device_copy(built):
    b = built("d96-nb4")
    ix = plaid.Index.load(b.path, device="cuda")
    assert ix.device == b.ix.device and ix.device_bytes == b.ix.device_bytes
    rng = np.random.default_rng([SEED, 5])
    docs = list(b.docs)
    Q = queries(rng, docs, NQ, LQ)
    Qc = Q.cuda()
    kw = dict(top_k=20, n_ivf_probe=8, n_full_scores=512)

    def compare(what, live):
        g = ix.search(Qc, **kw)
        assert ix.device.startswith("cuda") and ix.device_bytes > 0, what
        c = on_cpu(ix, lambda: ix.search(Q, **kw))
        check_like_cpu(what, g, c, LQ, live=live, budget=NQ // 8)
        return g

    top = compare("before delete", b.live)[1]
    gone = set(top[:, :5].flatten().tolist()) | {int(j) for j in rng.choice(len(docs), 100, replace=False)}
    gone -= {-1}
    ix.delete(sorted(gone))
    live = b.live - gone
    assert not set(compare("after delete", live)[1].flatten().tolist()) & gone
    # near-copies of deleted documents: queries drawn from them find them first
    new = [(x + 0.02 * rng.standard_normal(x.shape) / np.sqrt(x.shape[1])).astype(np.float32)
           for x in (docs[j] for j in sorted(gone)) if len(x)][:40]
    added = ix.add(new)
    live |= set(added)
    Q = queries(rng, new, NQ, LQ)
    Qc = Q.cuda()
    g = compare("after add", live)
    assert sum(int(j) in added for j in g[1][:, 0].tolist()) >= NQ // 2, g[1][:, 0]
    upd = sorted(live)[:10]
    ix.update(upd, [docs[1] if len(docs[1]) else docs[2]] * len(upd))
    compare("after update", live)
    before = ix.device_bytes
    ix.compact()
    assert ix.num_deleted == 0 and 0 < ix.device_bytes < before
    assert not set(compare("after compact", live)[1].flatten().tolist()) & gone
    ix.close()


def test_to_cpu_and_back(built):
    b = built("d48-nb1")
    ix = plaid.Index.load(b.path)
    assert ix.device == "cpu" and ix.device_bytes == 0
    assert ix.to("cuda") is ix and ix.device == f"cuda:{torch.cuda.current_device()}"
    nbytes = ix.device_bytes
    assert nbytes >= ix.num_tokens * (4 + ix.dim * ix.nbits // 8)
    for dev in (torch.device("cuda", 0), 0, "cuda:0"):
        assert ix.to(dev).device == "cuda:0" and ix.device_bytes == nbytes
    Q = queries(np.random.default_rng([SEED, 6]), b.docs, 4, 16)
    g = ix.search(Q.cuda(), top_k=5)
    assert ix.to("cpu") is ix and ix.device == "cpu" and ix.device_bytes == 0
    with pytest.raises(lik.LikError, match="no CUDA copy"):
        ix.search(Q.cuda(), top_k=5)
    c = ix.search(Q, top_k=5)  # the CPU search
    assert c[0].device.type == "cpu"
    check_like_cpu("to cpu", g, c, 16, live=b.live, budget=1)
    ix.to("cuda:0")
    assert torch.equal(ix.search(Q.cuda(), top_k=5)[1], g[1])
    with pytest.raises((ValueError, lik.LikError)):
        ix.to(f"cuda:{torch.cuda.device_count()}")  # no such device: the index keeps its copy
    assert ix.device == "cuda:0" and ix.device_bytes == nbytes
    ix.close()


def test_empty_index_then_add():
    """Index.train(..., device=) copies an index of 0 documents; add
    refreshes it."""
    rng = np.random.default_rng([SEED, 7])
    docs = corpus(rng, 400, 128)
    ix = plaid.Index.train(np.concatenate(docs[:100]), nbits=2, num_centroids=64, device="cuda")
    assert ix.num_docs == 0 and ix.device.startswith("cuda")
    Q = queries(rng, docs, 5, LQ)
    Qc = Q.cuda()
    s, i = ix.search(Qc, top_k=10)
    assert s.is_cuda and (i == -1).all() and torch.isneginf(s).all()
    ix.add(docs)
    live = {j for j, x in enumerate(docs) if len(x)}
    g = ix.search(Qc, top_k=10)
    c = on_cpu(ix, lambda: ix.search(Q, top_k=10))
    check_like_cpu("train + add", g, c, LQ, live=live, budget=1)
    assert (g[1] >= 0).all()
    ix.close()


def test_top_k_above_the_candidates(built):
    b = built("d48-nb1")
    ix = b.ix
    Q = queries(np.random.default_rng([SEED, 8]), b.docs, 6, 1)
    kw = dict(top_k=250, n_ivf_probe=1, n_full_scores=16)
    g = ix.search(Q.cuda(), **kw)
    c = on_cpu(ix, lambda: ix.search(Q, **kw))
    check_like_cpu("top_k above the candidates", g, c, 1, live=b.live, budget=1)
    assert (c[1] == -1).any(), "the case has fewer candidates than top_k"


def test_cuda_graph_replay(built):
    b = built("d128-nb2")
    ix = b.ix
    rng = np.random.default_rng([SEED, 9])
    Q1, Q2 = queries(rng, b.docs, 8, LQ).cuda(), queries(rng, b.docs, 8, LQ).cuda()
    l1 = torch.tensor([LQ, 3, 0, 17, LQ, 1, 9, LQ], dtype=torch.int32, device="cuda")
    l2 = torch.tensor([5, LQ, LQ, 0, 2, LQ, 31, 8], dtype=torch.int32, device="cuda")
    Qc, lc = Q1.clone(), l1.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up off the capturing stream (torch's advice)
        ix.search(Qc, top_k=10)
        ix.search(Qc, top_k=10, q_lengths=lc)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ix.search(Qc, top_k=10)
        out_l = ix.search(Qc, top_k=10, q_lengths=lc)
    for Qn, ln in ((Q2, l2), (Q1, l1)):
        Qc.copy_(Qn)
        lc.copy_(ln)
        g.replay()
        torch.cuda.synchronize()
        ref, ref_l = ix.search(Qn, top_k=10), ix.search(Qn, top_k=10, q_lengths=ln)
        for a, r in ((out, ref), (out_l, ref_l)):
            assert torch.equal(a[0], r[0]) and torch.equal(a[1], r[1]), "graph replay differs from an eager search"
    assert not torch.equal(ref[1], ix.search(Q2, top_k=10)[1]), "the two query sets give the same results"


def test_stream(built):
    """The search runs on torch's current stream: queued behind a slow
    kernel and a write of Q on a side stream, it reads the new Q."""
    b = built("d8-nb8")
    ix = b.ix
    rng = np.random.default_rng([SEED, 10])
    Q1, Q2 = queries(rng, b.docs, 8, LQ).cuda(), queries(rng, b.docs, 8, LQ).cuda()
    ref = ix.search(Q2, top_k=10)  # the default stream
    other = ix.search(Q1, top_k=10)
    assert not torch.equal(ref[1], other[1]), "the two query sets give the same results"
    Qc = Q1.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)  # ~0.1 s: a search on another stream would read Q1
        Qc.copy_(Q2)
        got = ix.search(Qc, top_k=10)
    s.synchronize()
    assert torch.equal(got[0], ref[0]) and torch.equal(got[1], ref[1])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
def test_other_device(built):
    """An index on cuda:1 searched with Q on cuda:0: Q moved there, results back on cuda:0."""
    b = built("d48-nb1")
    ix = plaid.Index.load(b.path, device="cuda:1")
    Q = queries(np.random.default_rng([SEED, 11]), b.docs, 4, 16)
    s, i = ix.search(Q.to("cuda:0"), top_k=5)
    s1, i1 = ix.search(Q.to("cuda:1"), top_k=5)
    assert s.device == i.device == torch.device("cuda", 0) and s1.device == torch.device("cuda", 1)
    assert torch.equal(s.cpu(), s1.cpu()) and torch.equal(i.cpu(), i1.cpu())
    ix.close()
