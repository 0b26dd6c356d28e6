"""GPU parity suite: lik's CUDA backend vs an independent float64 reference.

Every test is marked ``gpu`` and skipped without torch + CUDA (CI has no GPU).
The reference is computed here in float64 with torch.einsum from the same
(already rounded) inputs, so bf16/fp16 results differ from it only by fp32
accumulation order.  Fresh random data per test (seed printed); outputs are
poisoned before each call so unwritten elements fail.

Run on the GPU machine (tests/conftest.py finds the package):
    LIK_LIBRARY=build/liblik.so python3 -m pytest tests/gpu -q
LIK_GPU_BIG=1 adds the >2^31-element corpus (needs ~16 GB of GPU memory).
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64}


@pytest.fixture
def gen():
    seed = int(os.environ.get("LIK_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
    print(f"seed={seed}")
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return g


def _lik():
    from lik import _api

    return _api


def rand(shape, dtype, g):
    return torch.randn(shape, device="cuda", generator=g, dtype=torch.float32).to(dtype)


def rmask(shape, g, p=0.8):
    return torch.rand(shape, device="cuda", generator=g) < p


def ref_sim(Q, D, normalize, kd=False):
    Qd, Dd = Q.double(), D.double()
    if normalize:
        Qd = Qd / Qd.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        Dd = Dd / Dd.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    if kd:
        return torch.einsum("isd,iktd->ikst", Qd, Dd)
    return torch.einsum("isd,jtd->ijst", Qd, Dd)


def ref_scores(S, qm, dm_b):
    """S [A, B, Lq, Ld]; qm broadcastable to [A, B, Lq]; dm_b to [A, B, 1, Ld]."""
    S = torch.where(dm_b, S, torch.full_like(S, -float("inf")))
    mx, _ = S.max(-1) if S.shape[-1] > 0 else (torch.full(S.shape[:-1], -float("inf"), device=S.device, dtype=S.dtype), None)
    live = torch.isfinite(mx) & qm
    return torch.where(live, mx, torch.zeros_like(mx)).sum(-1), mx, live, S


def check_scores(out, ref, lq, in_dtype=torch.float32):
    # float64 inputs give float64 scores (include/lik.h); every other dtype float32
    assert out.dtype == (torch.float64 if in_dtype == torch.float64 else torch.float32)
    assert torch.isfinite(out).all(), "non-finite score (unwritten or NaN leaked)"
    err = (out.double() - ref).abs()
    tol = 2e-5 * (ref.abs() + lq * 4.0) + 1e-6
    bad = err > tol
    assert not bad.any(), f"max err {err.max().item():.3g}, {bad.sum().item()} bad of {bad.numel()}"


def check_argmax(am, S, mx, live):
    """am [A,B,Lq]; S masked sims [A,B,Lq,Ld]; ties within tolerance accepted."""
    am = am.long()
    assert ((am == -1) == ~live).all(), "argmax -1 pattern differs"
    idx = am.clamp_min(0)
    picked = torch.gather(S, -1, idx.unsqueeze(-1)).squeeze(-1)
    tol = 2e-5 * (mx.abs() + 4.0)
    ok = ~live | (picked >= mx - tol)
    assert ok.all(), f"{(~ok).sum().item()} argmax entries are not a maximum"


CASES = [
    # dtype, Nq, Nd, Lq, Ld, d
    ("bf16", 2, 7, 32, 300, 128),
    ("bf16", 1, 9, 17, 45, 128),
    ("f16", 3, 5, 32, 129, 48),  # one query, rows of exactly 96 bytes: bulk-copy tiles on sm_90+
    ("bf16", 2, 4, 64, 70, 64),
    ("f16", 2, 3, 130, 200, 96),
    ("bf16", 2, 3, 45, 77, 100),   # d % 8 != 0: scalar loader
    ("bf16", 2, 3, 33, 100, 512),  # K-streamed
    ("f16", 1, 2, 40, 65, 1000),   # K-streamed, d tail
    ("bf16", 1, 2, 20, 50, 2100),  # K-streamed, 4 warps (8 would not fit)
    ("bf16", 1, 2, 20, 50, 2600),  # CUDA-core fallback: the query block does not fit
    ("f32", 2, 5, 32, 70, 128),
    ("f32", 2, 3, 37, 65, 33),
    ("f64", 2, 3, 20, 40, 24),
    ("bf16", 1, 3, 1, 1, 16),
    ("bf16", 2, 6, 300, 130, 128),  # long query: a 256-row block, the last 44 rows a launch of their own
    ("bf16", 1, 400, 600, 70, 128),  # two blocks + 88 rows, documents per CTA: the next block loads under the tiles
    ("f16", 2, 300, 520, 33, 64),  # the same (two blocks + 8 rows), d = 64
    ("bf16", 9, 5, 32, 150, 128),  # 8 queries stacked per CTA, last group partial
    ("f16", 13, 4, 20, 70, 64),  # stacked queries, d <= 64
    ("bf16", 1, 4, 100, 260, 128),  # 128 x 128 tiles (4 x 2 warps of 32 x 64)
    ("bf16", 1, 2, 24, 70, 2000),  # K-streamed, shallow pipeline (large query block)
    ("bf16", 1, 3, 65, 131, 17),  # one 128-row block, d tail < 64 (scalar loader)
    ("f16", 5, 3, 64, 257, 80),  # 4 queries of 64 rows stacked, d tail in the second atom
    ("bf16", 3, 2, 257, 129, 1),  # a 256-row block + 1 row, d = 1
    ("f16", 2, 3, 32, 200, 41),  # 96-byte rows (one query, d <= 48), scalar loader
    ("f32", 2, 4, 16, 90, 20),  # 96-byte rows of fp32 (d <= 24), d tail in the last chunk
    ("bf16", 2, 3, 33, 300, 520),  # K-streamed, 4 warps of 40 tokens (2 tiles of 160, not 3 of 128)
    ("f16", 1, 3, 20, 290, 777),  # K-streamed, 8 warps of 40 tokens (1 tile of 320), scalar loader
    ("f32", 1, 2, 20, 150, 250),  # K-streamed fp32, 4 warps of 40 tokens, scalar loader
    ("bf16", 2, 3, 100, 5, 128),  # wgmma, Ld shorter than a tile (on sm_90a a TMA box past D's end)
    ("bf16", 5, 7, 128, 300, 128),  # two queries of Lq 128 per CTA (a 128-row slot per warpgroup), the last alone
    ("f16", 3, 4, 97, 150, 64),  # the same, Lq 97, d = 64
    ("bf16", 6, 5, 1030, 77, 128),  # 4 blocks of 256 rows, then the last 6 rows as a launch of their own (stacked)
]

# On a Hopper GPU the d <= 128 configurations run the wgmma kernel; the
# mma.sync family they replace there is checked too (a context with
# cuda_off=["wgmma"]).  On sm_90+ the scores-only calls of the few-document,
# one-query cases split each document's tiles over a cluster of CTAs; the
# unsplit kernels are checked too ("split").  On sm_90+ the half-type tiles of
# d <= 128 load by bulk copies (one query, 96-byte rows) or TMA (the wgmma
# kernels); the cp.async loaders they replace are checked too ("bulk").
FAMILY_OFF = {"default": (), "mma.sync": ("wgmma",), "no-split": ("split",), "no-bulk": ("bulk",)}
FAMILY_CASES = [(f, c) for f in FAMILY_OFF for c in CASES
                if f != "no-bulk" or (c[0] in ("bf16", "f16") and c[5] <= 128)]


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("masks", [False, True])
@pytest.mark.parametrize("family,case", FAMILY_CASES,
                         ids=[f + "-" + "-".join(map(str, c)) for f, c in FAMILY_CASES])
def test_cross(case, masks, normalize, family, gen):
    import lik

    with lik.Context(cuda_off=FAMILY_OFF[family]):
        _check_cross(case, masks, normalize, gen)


def _check_cross(case, masks, normalize, gen):
    api = _lik()
    dt, Nq, Nd, Lq, Ld, d = case
    Q = rand((Nq, Lq, d), DT[dt], gen)
    D = rand((Nd, Ld, d), DT[dt], gen)
    qm = rmask((Nq, Lq), gen) if masks else None
    dm = rmask((Nd, Ld), gen, 0.7) if masks else None
    if masks:
        dm[0] = False  # a document with no valid token
        D[~dm] = float("nan")  # masked tokens are never read
    scores, am = api._forward(Q, D, qm, dm, normalize=normalize, with_argmax=True)
    torch.cuda.synchronize()
    S = ref_sim(Q, D, normalize)
    qmb = (qm if qm is not None else torch.ones(Nq, Lq, dtype=torch.bool, device="cuda"))[:, None, :]
    dmb = (dm if dm is not None else torch.ones(Nd, Ld, dtype=torch.bool, device="cuda"))[None, :, None, :]
    ref, mx, live, Sm = ref_scores(S, qmb, dmb)
    check_scores(scores, ref, Lq, Q.dtype)
    check_argmax(am, Sm, mx, live)
    # the score-only kernel (no argmax) agrees too
    s2 = api.maxsim(Q, D, qm, dm, normalize=normalize)
    check_scores(s2, ref, Lq, Q.dtype)


def test_strides_2d_and_broadcast(gen):
    api = _lik()
    Nq, Nd, Lq, Ld, d = 2, 5, 32, 90, 128
    base = rand((Nd, Ld, 2 * d), torch.bfloat16, gen)
    D = base[:, :, ::2]  # sk = 2
    Qt = rand((Nq, d, Lq), torch.bfloat16, gen)
    Q = Qt.transpose(1, 2)  # sk = Lq, sl = 1
    D2 = base[:, :, d:]  # sl = 2d, offset
    for DD in (D, D2):
        s = api.maxsim(Q, DD)
        ref, *_ = ref_scores(ref_sim(Q, DD, False), torch.ones(1, 1, Lq, dtype=torch.bool, device="cuda"),
                             torch.ones(1, 1, 1, Ld, dtype=torch.bool, device="cuda"))
        check_scores(s, ref, Lq)
    # a long query on the wgmma kernel (on sm_90a: TMA tiles through a tensor
    # map with D2's row stride and offset), and one document
    Ql = rand((1, 150, d), torch.bfloat16, gen)
    for DD in (D2, D2[3:4]):
        s = api.maxsim(Ql, DD)
        ref = ref_sim(Ql, DD, False).max(-1).values.sum(-1)
        check_scores(s, ref, 150)
    # 2-D Q and D (dims dropped), broadcast Q batch (stride 0)
    q1 = rand((Lq, d), torch.float16, gen)
    d1 = rand((Ld, d), torch.float16, gen)
    s = api.maxsim(q1, d1)
    ref = ref_sim(q1[None], d1[None], False).max(-1).values.sum(-1)
    assert s.dim() == 0
    check_scores(s.reshape(1, 1), ref, Lq)
    Qb = q1[None].expand(3, Lq, d)
    Db = rand((4, Ld, d), torch.float16, gen)
    s = api.maxsim(Qb, Db)
    ref = ref_sim(Qb, Db, False).max(-1).values.sum(-1)
    check_scores(s, ref, Lq)


@pytest.mark.parametrize("Lq", [32, 100])  # 100: the wgmma kernel (TMA tiles on sm_90a)
@pytest.mark.parametrize("dt", ["bf16", "f16", "f32"])
def test_kd_layout(dt, Lq, gen):
    api = _lik()
    Nq, K, Ld, d = 3, 4, 77, 128
    Q = rand((Nq, Lq, d), DT[dt], gen)
    D = rand((Nq, K, Ld, d), DT[dt], gen)
    qm = rmask((Nq, Lq), gen)
    dm = rmask((Nq, K, Ld), gen)
    scores, am = api._forward(Q, D, qm, dm, normalize=True, with_argmax=True)
    S = ref_sim(Q, D, True, kd=True)
    ref, mx, live, Sm = ref_scores(S, qm[:, None, :], dm[:, :, None, :])
    check_scores(scores, ref, Lq)
    check_argmax(am, Sm, mx, live)


@pytest.mark.parametrize("Lq", [32, 100])
@pytest.mark.parametrize("dt", ["bf16", "f32"])
def test_pairs(dt, Lq, gen):
    api = _lik()
    B, Ld, d = 6, 100, 128
    Q = rand((B, Lq, d), DT[dt], gen)
    D = rand((B, Ld, d), DT[dt], gen)
    qm = rmask((B, Lq), gen)
    dm = rmask((B, Ld), gen)
    scores, am = api._forward(Q, D, qm, dm, pairs=True, with_argmax=True)
    S = torch.einsum("bsd,btd->bst", Q.double(), D.double())[:, None]
    ref, mx, live, Sm = ref_scores(S, qm[:, None, :], dm[:, None, None, :])
    check_scores(scores, ref[:, 0], Lq)
    check_argmax(am[:, None], Sm, mx, live)


def test_deterministic_and_stream(gen):
    api = _lik()
    Q = rand((4, 200, 128), torch.bfloat16, gen)
    D = rand((64, 300, 128), torch.bfloat16, gen)
    a = api.maxsim(Q, D)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        b = api.maxsim(Q, D)
    s.synchronize()
    assert torch.equal(a, b), "results differ between runs (race?)"


def _captured(fn):
    """fn() warmed up on a side stream, then captured: (graph, fn's output)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def test_graph_capture(gen):
    api = _lik()
    Q = rand((2, 32, 128), torch.bfloat16, gen)
    D = rand((50, 300, 128), torch.bfloat16, gen)
    ref = api.maxsim(Q, D)
    g, out = _captured(lambda: api.maxsim(Q, D))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ref)


@pytest.mark.parametrize("k", [1, 10, 100])
def test_retrieve(k, gen):
    api = _lik()
    Nq, Nd, Lq, Ld, d = 3, 3000, 32, 40, 64
    Q = rand((Nq, Lq, d), torch.bfloat16, gen)
    D = rand((Nd, Ld, d), torch.bfloat16, gen)
    dm = rmask((Nd, Ld), gen)
    sc, ix = api.retrieve(Q, D, k, None, dm, normalize=True)
    full = api.maxsim(Q, D, None, dm, normalize=True).double()
    S = ref_sim(Q, D, True)
    ref, *_ = ref_scores(S, torch.ones(1, 1, Lq, dtype=torch.bool, device="cuda"), dm[None, :, None, :])
    assert ix.shape == (Nq, k) and sc.shape == (Nq, k)
    # descending, no duplicates, and each returned score is the doc's score
    assert (sc[:, :-1] >= sc[:, 1:]).all()
    for i in range(Nq):
        assert len(set(ix[i].tolist())) == k
        assert torch.allclose(sc[i].double(), full[i, ix[i]], rtol=0, atol=0)
        kth = torch.topk(ref[i], k).values[-1]
        assert (ref[i, ix[i]] >= kth - 1e-3).all()


@pytest.mark.parametrize("d", [1, 40, 200])
def test_fp32_extreme_magnitudes(d):
    """fp32 on the tensor cores (3xTF32): values near FLT_MAX split without
    overflow (big = truncation), tiny values keep their relative accuracy."""
    api = _lik()
    Q = torch.zeros(2, 1, d, device="cuda")
    D = torch.zeros(2, 3, d, device="cuda")
    Q[0, 0, 0], Q[1, 0, -1] = 3.4e38, -1.5e-30
    D[0, :, 0] = torch.tensor([1e-3, 2e-3, -4e-3])
    D[1, :, -1] = torch.tensor([-2e-3, 3e-3, 1e-8])
    S = torch.einsum("ild,jtd->ijlt", Q.double(), D.double()).amax(-1).sum(-1)
    got = api.maxsim(Q, D).double()
    assert torch.isfinite(got).all()
    assert torch.allclose(got, S.float().double(), rtol=1e-6, atol=0)


# fp32 under torch's "high" precision (one TF32 product per term): on
# sm_90a stacked queries and Lq > 64 run the wgmma m64nNk8.tf32 kernels
# (rows of 256 bytes: the half types' tiles; 512: two warpgroups of one m64
# tile each), elsewhere / with wgmma off the mma.sync TF32 kernels.
TF32_CASES = [
    # Nq, Nd, Lq, Ld, d
    (9, 5, 32, 150, 128),  # 4 stacked queries per 128-row block, last group partial
    (13, 4, 20, 70, 64),  # stacked, 256-byte rows (8 per 256 rows)
    (40, 3, 32, 65, 64),  # stacked over two warpgroups (TMA tiles of 104 / 128 tokens)
    (5, 3, 64, 257, 80),  # 2 queries of 64 rows per block, d tail inside the third atom
    (11, 4, 20, 99, 96),  # d = 96: the last 128-byte atom wholly past d
    (2, 6, 300, 130, 128),  # three 128-row blocks
    (1, 400, 600, 70, 128),  # five blocks, many documents per CTA: the next block loads early
    (2, 3, 130, 200, 48),  # Lq > 128 on 256-byte rows
    (9, 3, 100, 5, 128),  # Ld shorter than a tile
    (5, 4, 128, 140, 64),  # two queries of Lq 128 per CTA, a 128-row slot per warpgroup
    (10, 3, 32, 40, 33),  # d % 4 != 0: scalar loader, no TMA
    (10, 3, 32, 40, 17),
    (12, 2, 16, 30, 1),
    (1, 30, 32, 300, 128),  # one query, 512-byte rows: wgmma too (96 of 128 rows empty)
    (3, 5, 17, 45, 100),  # three queries (not stacked), d tail
    (1, 3, 64, 20, 64),  # one query, 256-byte rows: mma.sync
    (0, 3, 32, 40, 128),  # empty batch
]


def _tf32_scale(Q, D, dm, normalize):
    """Per (i, j, s): |Q_s| max over valid t of |D_t| (1 normalised): what
    one TF32 term can be off by, in units of 2^-10 (A rounded, B truncated)."""
    if normalize:
        return torch.ones(Q.shape[0], D.shape[0], Q.shape[1], dtype=torch.float64, device="cuda")
    qn = Q.double().norm(dim=-1)
    dn = D.double().norm(dim=-1)
    if dm is not None:
        dn = torch.where(dm, dn, torch.zeros_like(dn))
    dn = dn.amax(-1) if D.shape[1] else torch.zeros(D.shape[0], dtype=torch.float64, device="cuda")
    return qn[:, None, :] * dn[None, :, None]


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("masks", [False, True])
@pytest.mark.parametrize("family", ["default", "mma.sync", "no-bulk"])
@pytest.mark.parametrize("case", TF32_CASES, ids=["-".join(map(str, c)) for c in TF32_CASES])
def test_fp32_tf32(case, family, masks, normalize, gen):
    import lik

    api = _lik()
    Nq, Nd, Lq, Ld, d = case
    Q = rand((Nq, Lq, d), torch.float32, gen)
    D = rand((Nd, Ld, d), torch.float32, gen)
    qm = rmask((Nq, Lq), gen) if masks else None
    dm = rmask((Nd, Ld), gen, 0.7) if masks else None
    if masks:
        dm[0] = False  # a document with no valid token
        D[~dm] = float("nan")  # masked tokens are never read
    old = torch.get_float32_matmul_precision()
    try:
        with lik.Context(cuda_off=FAMILY_OFF[family]):
            torch.set_float32_matmul_precision("high")
            scores, am = api._forward(Q, D, qm, dm, normalize=normalize, with_argmax=True)
            s2 = api.maxsim(Q, D, qm, dm, normalize=normalize)
            torch.set_float32_matmul_precision("highest")
            exact = api.maxsim(Q, D, qm, dm, normalize=normalize)
    finally:
        torch.set_float32_matmul_precision(old)
    torch.cuda.synchronize()
    qmb = (qm if qm is not None else torch.ones(Nq, Lq, dtype=torch.bool, device="cuda"))[:, None, :]
    dmb = (dm if dm is not None else torch.ones(Nd, Ld, dtype=torch.bool, device="cuda"))[None, :, None, :]
    ref, mx, live, Sm = ref_scores(ref_sim(Q, D, normalize), qmb, dmb)
    tol_s = 2.0 ** -8 * _tf32_scale(Q, D, dm, normalize)  # 2.7x the worst case of one TF32 term
    tol = (tol_s * live).sum(-1) + 1e-5
    for out in (scores, s2):
        assert out.dtype == torch.float32 and torch.isfinite(out).all()
        err = (out.double() - ref).abs()
        assert (err <= tol).all(), f"max err {err.max().item():.3g} (tol {tol.max().item():.3g})"
    check_scores(exact, ref, Lq)
    am = am.long()
    assert ((am == -1) == ~live).all(), "argmax -1 pattern differs"
    picked = torch.gather(Sm, -1, am.clamp_min(0).unsqueeze(-1)).squeeze(-1)
    assert (~live | (picked >= mx - 2 * tol_s)).all(), "an argmax entry is not a maximum within TF32"
    if Nq and Nd and d >= 17 and live.any():
        assert not torch.equal(scores, exact), "TF32 and 3xTF32 gave the same scores"


@pytest.mark.parametrize(
    "cu_q, pq, msg",
    [
        ([1, 2, 5], None, "cu_seqlens_q: must start at 0"),
        ([0, 4, 3, 5], None, "cu_seqlens_q: must be non-decreasing"),
        ([0, 2, 4], None, "cu_seqlens_q: last entry 4 does not equal Q rows=5"),
        ([0, 2, 5], [0, 2], r"pair_q_idx: entry 1 = 2 is outside \[0, Nq=2\)"),
        ([0, 2, 5], [-1], "pair_q_idx: entry 0 = -1"),
    ],
)
def test_packed_index_values_checked_on_cuda(cu_q, pq, msg):
    """On CUDA the C library does not read cu_seqlens / pair indices (that
    would need a sync); the Python front checks a host copy and raises."""
    import lik

    Q = torch.randn(5, 8, device="cuda")
    D = torch.randn(7, 8, device="cuda")
    cq = torch.tensor(cu_q, device="cuda", dtype=torch.int32)
    cd = torch.tensor([0, 3, 7], device="cuda", dtype=torch.int32)
    with pytest.raises(ValueError, match=msg):
        if pq is None:
            lik.maxsim_varlen(Q, D, cq, cd)
        else:
            pq_t = torch.tensor(pq, device="cuda")
            lik.score_pairs_packed(Q, D, cq, cd, pq_t, torch.zeros_like(pq_t))


def test_packed_max_seqlen_q_checked_on_cuda():
    """A given max_seqlen_q sizes the CUDA kernel's query tiles: one shorter
    than the longest query is caught by the same host check."""
    import lik

    Q, D = torch.randn(5, 8, device="cuda"), torch.randn(7, 8, device="cuda")
    cq = torch.tensor([0, 2, 5], device="cuda", dtype=torch.int32)
    cd = torch.tensor([0, 3, 7], device="cuda", dtype=torch.int32)
    with pytest.raises(ValueError, match=r"max_seqlen_q: 2 is shorter than the longest query \(3 tokens"):
        lik.maxsim_varlen(Q, D, cq, cd, max_seqlen_q=2)


@pytest.mark.parametrize("Nq,k", [(1, 1), (1, 100), (1, 1000), (1, 6000), (5, 37)])
def test_retrieve_split_with_ties(Nq, k, gen):
    """Few queries against a large corpus: the block is selected in slices.
    Many documents are exact copies, so many scores tie: the result must be
    the top-k under (score desc, index asc), exactly."""
    api = _lik()
    Nd, Lq, Ld, d = 70000, 8, 6, 16
    Q = rand((Nq, Lq, d), torch.bfloat16, gen)
    base = rand((300, Ld, d), torch.bfloat16, gen)
    D = base[torch.randint(0, 300, (Nd,), device="cuda", generator=gen)]
    sc, ix = api.retrieve(Q, D, k, normalize=False)
    full = api.maxsim(Q, D)
    srt, order = torch.sort(-full, dim=1, stable=True)
    assert torch.equal(ix.cpu(), order[:, :k].cpu())
    assert torch.equal(sc, -srt[:, :k])


@pytest.mark.parametrize("Nq,n_num,k", [(1, 5, 10), (1, 3000, 2990), (1, 20000, 7), (3, 40, 100), (3, 900, 1000)])
def test_retrieve_nan_last(Nq, n_num, k, gen):
    """lik.h's top-k order on CUDA: NaN scores after every number, -inf
    included, NaN ties by the lower index (the CPU's lik_topk_better).  Query
    tokens +big e0 and -big e1: a document whose rows are all -big (e0 + e1)
    meets -inf and +inf (score NaN); a +big e0 row scores +inf, rows of -big
    e0 only -inf; the others (tiny e0, e1) are finite.  n_num documents are
    not NaN, at random positions among 20 000 (one query: the sliced path)."""
    api = _lik()
    Nd, Ld, d, big = 20000, 3, 16, 1e20
    Q = torch.zeros((Nq, 2, d), device="cuda")
    Q[:, 0, 0], Q[:, 1, 1] = big, -big
    D = torch.rand((Nd, Ld, d), device="cuda", generator=gen) * 2 - 1
    D[..., :2] *= 1e-20
    num = torch.randperm(Nd, device="cuda", generator=gen)[:n_num]
    nan_doc = torch.ones(Nd, dtype=torch.bool, device="cuda")
    nan_doc[num] = False
    D[nan_doc, :, :2] = -big
    D[num[:2], 0, 0] = big  # two +inf scores
    D[num[2:4], :, 0] = -big  # two -inf scores
    Q, D = Q.to(torch.bfloat16), D.to(torch.bfloat16)
    full = api.maxsim(Q, D).float().cpu()
    assert torch.isnan(full).sum().item() == Nq * (Nd - n_num)
    sc, ix = api.retrieve(Q, D, k, normalize=False)
    import numpy as np

    for i in range(Nq):
        f = full[i].numpy()
        nan = np.isnan(f)
        order = np.lexsort((np.arange(Nd), -np.where(nan, 0, f), nan))[:k]  # last key first
        assert ix[i].tolist() == order.tolist(), f"query {i}"
        np.testing.assert_array_equal(sc[i].cpu().numpy(), f[order])  # NaN where NaN


@pytest.mark.parametrize("Nq,Nd,k,p_nan", [(1, 20000, 60, 0), (1, 20000, 2000, 0.95), (1, 20000, 20000, 0),
                                           (3, 3000, 3000, 0), (300, 2000, 2000, 0), (5, 40, 100, 0)])
def test_retrieve_nan_inf_matches_cpu(Nq, Nd, k, p_nan, gen):
    """CUDA retrieve and CPU retrieve on the same inputs: the same ids in the
    same order, the same scores (NaN where NaN): score descending, ties by
    the lower index, NaN after every number, -inf included (lik.h).  bf16
    inputs whose finite scores are exact integers on both devices (many
    ties), and documents of five kinds: NaN (rows of -big e0 - big e1 meet
    query tokens +big e0 and -big e1: -inf + inf), +inf (a +big e0 row), -inf
    (rows of -big e0), a NaN token (its similarities never win: the other
    rows score), all tokens NaN (every similarity NaN: each query token adds
    0); p_nan more NaN documents, so that a top-k of the sliced path (one
    query, k <= Nd / 8) reaches them.  One query: the sliced path (k = Nd:
    one pass); 300 queries: one pass."""
    import lik

    cpu = torch.Generator()
    cpu.manual_seed(gen.initial_seed())
    d, big = 16, 1e20
    Q = torch.zeros((Nq, 3, d))
    Q[:, 0, 0], Q[:, 1, 1] = big, -big
    Q[:, 2, 2:] = torch.randint(-3, 4, (Nq, d - 2), generator=cpu).float()
    D = torch.zeros((Nd, 3, d))
    D[:, :, 2:] = torch.randint(-3, 4, (Nd, 3, d - 2), generator=cpu).float()
    kind = torch.randint(0, 10, (Nd,), generator=cpu)
    kind[torch.rand(Nd, generator=cpu) < p_nan] = 0
    D[kind == 0, :, :2] = -big  # NaN
    D[kind == 1, 0, 0] = big  # +inf
    D[kind == 2, :, 0] = -big  # -inf
    D[kind == 3, 1, 5] = float("nan")  # one NaN token
    D[kind == 4, :, 5] = float("nan")  # every token NaN: score 0
    Q, D = Q.to(torch.bfloat16), D.to(torch.bfloat16)
    full = lik.maxsim(Q, D).float()
    assert torch.isnan(full[:, kind == 0]).all() and not torch.isnan(full[:, kind != 0]).any()
    assert (full[:, kind == 1] == float("inf")).all() and (full[:, kind == 2] == -float("inf")).all()
    assert (full[:, kind == 4] == 0).all()
    sc_cpu, ix_cpu = lik.retrieve(Q, D, k, normalize=False)
    sc, ix = lik.retrieve(Q.cuda(), D.cuda(), k, normalize=False)
    assert ix.shape == ix_cpu.shape == (Nq, min(k, Nd))
    for i in range(Nq):
        assert ix[i].tolist() == ix_cpu[i].tolist(), f"query {i}"
    torch.testing.assert_close(sc.cpu(), sc_cpu, rtol=0, atol=0, equal_nan=True)
    # and the CPU's order is lik.h's (full[i] sorted: NaN last, ties by index)
    for i in range(Nq):
        f = full[i].tolist()
        order = sorted(range(Nd), key=lambda j: (f[j] != f[j], -f[j] if f[j] == f[j] else 0.0, j))[:k]
        assert ix_cpu[i].tolist() == order, f"query {i}"


@pytest.mark.skipif(not os.environ.get("LIK_GPU_BIG"), reason="set LIK_GPU_BIG=1 (needs ~16 GB)")
def test_big_corpus_over_2_31(gen):
    """1 x 100 000 x 32 x 300 x 128: 3.84e9 elements > 2^31, last docs checked."""
    api = _lik()
    Nd, Lq, Ld, d = 100_000, 32, 300, 128
    Q = rand((1, Lq, d), torch.bfloat16, gen)
    D = torch.empty((Nd, Ld, d), dtype=torch.bfloat16, device="cuda")
    for c in range(0, Nd, 10_000):
        D[c : c + 10_000] = rand((min(10_000, Nd - c), Ld, d), torch.bfloat16, gen)
    assert D.numel() > 2**31
    dm = torch.ones((Nd, Ld), dtype=torch.bool, device="cuda")
    dm[-1, 100:] = False
    scores, am = api._forward(Q, D, None, dm, with_argmax=True)
    for c in list(range(0, Nd, 25_000)) + [Nd - 5000]:
        sl = slice(c, c + 5000)
        S = ref_sim(Q, D[sl], False)
        ref, mx, live, Sm = ref_scores(S, torch.ones(1, 1, Lq, dtype=torch.bool, device="cuda"),
                                       dm[None, sl, None, :])
        check_scores(scores[:, sl], ref, Lq)
        check_argmax(am[:, sl], Sm, mx, live)
    sc, ix = api.retrieve(Q, D, 10, None, dm, normalize=False)
    top = torch.topk(scores[0].double(), 10)
    assert torch.equal(ix[0].cpu(), top.indices.cpu())


def _packed_ref(Q, D, cq, cd, qm, dm):
    """[Nq, Nd] float64 MaxSim of packed, normalised sequences."""
    Qn = Q.double() / Q.double().norm(dim=-1, keepdim=True).clamp_min(1e-12)
    Dn = D.double() / D.double().norm(dim=-1, keepdim=True).clamp_min(1e-12)
    cq, cd = cq.tolist(), cd.tolist()
    ref = torch.zeros(len(cq) - 1, len(cd) - 1, dtype=torch.float64, device="cuda")
    for i in range(len(cq) - 1):
        q, m = Qn[cq[i]:cq[i + 1]], qm[cq[i]:cq[i + 1]]
        for j in range(len(cd) - 1):
            S = q @ Dn[cd[j]:cd[j + 1]].T
            S[:, ~dm[cd[j]:cd[j + 1]]] = -float("inf")
            if S.shape[1] == 0 or S.shape[0] == 0:
                continue
            mx = S.max(1).values
            ref[i, j] = torch.where(torch.isfinite(mx) & m, mx, torch.zeros_like(mx)).sum()
    return ref


@pytest.mark.parametrize("lq", [[5, 32, 0, 300, 17], [5, 32, 0, 1, 17], [3, 64, 0, 33, 7, 1, 60, 2, 9], [70, 128, 5, 100, 97]])
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("dt,d", [("bf16", 64), ("f16", 200), ("f32", 40), ("f16", 48)])
def test_packed_forwards(dt, d, grad, lq, gen):
    """maxsim_varlen / score_pairs_packed run on CUDA (lengths stay on the device:
    query blocks past a query's end are skipped; max_seqlen_q sizes the tiles of
    a scores-only call: short queries are stacked in 32- / 64-row slots, with
    a partial last group); with grad the backward runs on CUDA too (its values
    are checked against float64 in test_gpu_train.py): finite, zero on masked
    query tokens."""
    import itertools

    import lik

    ld = [10, 0, 70, 33, 300, 1]
    Q = rand((sum(lq), d), DT[dt], gen)
    D = rand((sum(ld), d), DT[dt], gen)
    cq = torch.tensor([0, *itertools.accumulate(lq)], device="cuda", dtype=torch.int32)
    cd = torch.tensor([0, *itertools.accumulate(ld)], device="cuda", dtype=torch.int64)
    qm, dm = rmask((sum(lq),), gen), rmask((sum(ld),), gen, 0.7)
    ref = _packed_ref(Q, D, cq, cd, qm, dm)
    if grad:
        Q.requires_grad_()  # the forward then also writes the argmax (extent max(lq))
    s = lik.maxsim_varlen(Q, D, cq, cd, q_mask=qm, d_mask=dm, normalize=True)
    torch.cuda.synchronize()
    check_scores(s.detach().float(), ref, max(lq))
    pq = torch.tensor([3, 0, 2, 3, 4, 1], device="cuda")
    pd = torch.tensor([4, 5, 0, 1, 2, 4], device="cuda", dtype=torch.int32)
    sp = lik.score_pairs_packed(Q, D, cq, cd, pq, pd, q_mask=qm, d_mask=dm, normalize=True)
    torch.cuda.synchronize()
    check_scores(sp.detach().float(), ref[pq, pd.long()], max(lq))
    if grad:
        (s.sum() + sp.sum()).backward()
        assert Q.grad.shape == Q.shape and torch.isfinite(Q.grad).all()
        assert (Q.grad[~qm] == 0).all()
        assert (Q.grad[qm] != 0).any()


def _kernel_events(fn):
    """Runs fn under the torch profiler; the CUDA kernels it launched (the
    profiler trace's events)."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        events = json.load(open(f.name))["traceEvents"]
    return [e for e in events if e.get("cat") == "kernel"]


def _kernel_grids(fn):
    """The grid sizes (x) of lik's MaxSim kernels fn launched."""
    return [e["args"]["grid"][0] for e in _kernel_events(fn) if "maxsim" in e.get("name", "")]


@pytest.mark.parametrize("dt,lq,d", [("bf16", 32, 128), ("f16", 20, 48), ("bf16", 64, 64),
                                     ("f32", 32, 40), ("f16", 32, 128), ("bf16", 1, 17)])
def test_ld_split(dt, lq, d, gen):
    """One query against a few long documents (Ld up to 1500), scores only: on
    sm_90+ each document's tiles are dealt to the CTAs of a cluster (ranks
    past a short document's last tile get none) and rank 0 merges the row
    maxima.  Against the float64 reference, and bitwise equal to the unsplit
    kernel (a context with cuda_off=["split"]: the same MMAs in the same order, max is exact),
    padded with masks and packed with lengths 1500, 3, 0, 1, 700, 65; the
    argmax call (never split) against the reference too."""
    import itertools

    import lik

    api = _lik()
    Q = rand((1, lq, d), DT[dt], gen)
    D = rand((3, 1500, d), DT[dt], gen)
    qm, dm = rmask((1, lq), gen), rmask((3, 1500), gen, 0.7)
    dm[1, 3:] = False  # a document of at most 3 valid tokens
    D[~dm] = float("nan")
    ref, mx, live, S = ref_scores(ref_sim(Q, D, True), qm[:, None, :], dm[None, :, None, :])
    runs, grids = {}, {}
    ctx = {"1": lik.Context(), "0": lik.Context(cuda_off=["split"])}
    for split in ["1", "0"]:
        with ctx[split]:
            grids[split] = _kernel_grids(lambda: runs.__setitem__(
                split, api.maxsim(Q, D, qm, dm, normalize=True)))
    if torch.cuda.get_device_capability()[0] >= 9:  # the split ran: more CTAs
        assert grids["1"][0] > grids["0"][0], grids
    check_scores(runs["1"], ref, lq)
    assert torch.equal(runs["1"], runs["0"])
    scores, am = api._forward(Q, D, qm, dm, normalize=True, with_argmax=True)
    check_scores(scores, ref, lq)
    check_argmax(am, S, mx, live)

    ld = [1500, 3, 0, 1, 700, 65]
    Qp = rand((lq, d), DT[dt], gen)
    Dp = rand((sum(ld), d), DT[dt], gen)
    cq = torch.tensor([0, lq], device="cuda", dtype=torch.int32)
    cd = torch.tensor([0, *itertools.accumulate(ld)], device="cuda", dtype=torch.int64)
    qmp, dmp = rmask((lq,), gen), rmask((sum(ld),), gen, 0.7)
    out = {}
    for split in ["1", "0"]:
        with ctx[split]:
            out[split] = lik.maxsim_varlen(Qp, Dp, cq, cd, q_mask=qmp, d_mask=dmp, normalize=True)
        torch.cuda.synchronize()
    check_scores(out["1"].float(), _packed_ref(Qp, Dp, cq, cd, qmp, dmp), lq)
    assert torch.equal(out["1"], out["0"])


# The similarities of -inf / NaN rows: every valid document token is a NaN row
# (similarity NaN) or a row [-big, 0, ...] that overflows to -sign(q0) * inf
# against a query token [q0 = +-big, ...] (-inf inputs for fp16, whose range
# cannot overflow fp32).  lik.h: the first valid -inf row wins a query token
# (its contribution -inf), +inf beats everything, NaN never wins, a token
# with no winner adds 0 (argmax -1).  Exact expectations, no reference.
INF_CASES = [("bf16", 2, 3, 37, 150, 128), ("f16", 2, 3, 20, 90, 64), ("f32", 2, 4, 33, 70, 40),
             ("bf16", 9, 5, 32, 150, 128), ("bf16", 1, 4, 100, 260, 128), ("bf16", 1, 2, 20, 50, 2100),
             ("bf16", 1, 40, 32, 32, 128), ("f16", 2, 33, 20, 16, 64)]  # the last two: short documents


@pytest.mark.parametrize("family", list(FAMILY_OFF))
@pytest.mark.parametrize("case", INF_CASES, ids=["-".join(map(str, c)) for c in INF_CASES])
def test_infinite_similarities(case, family, gen):
    import lik

    with lik.Context(cuda_off=FAMILY_OFF[family]):
        _check_infinite(case, gen)


def _check_infinite(case, gen):
    api = _lik()
    dt, Nq, Nd, Lq, Ld, d = case
    big = float("inf") if dt == "f16" else 1e20
    Q = torch.rand((Nq, Lq, d), device="cuda", generator=gen)
    sign = torch.where(torch.rand((Nq, Lq), device="cuda", generator=gen) < 0.5, -1.0, 1.0)
    Q[..., 0] = sign * (1.0 if dt == "f16" else big)
    kind = torch.randint(0, 3, (Nd, Ld), device="cuda", generator=gen)  # 0 masked, 1 NaN, 2 -inf
    kind[0] = 1  # a document of NaN rows only
    D = torch.zeros((Nd, Ld, d), device="cuda")
    D[kind == 1] = float("nan")
    D[..., 0][kind != 1] = -big
    dm = kind != 0
    Q, D = Q.to(DT[dt]), D.to(DT[dt])
    scores, am = api._forward(Q, D, None, dm, with_argmax=True)
    torch.cuda.synchronize()
    t = torch.arange(Ld, device="cuda")
    first = torch.where(kind == 2, t, Ld).min(dim=1).values  # [Nd]; Ld: none
    want_am = torch.where(first < Ld, first, -1)[None, :, None].expand(Nq, Nd, Lq)
    assert torch.equal(am.long(), want_am)
    contrib = torch.where(first[None, :, None] < Ld, -sign[:, None, :] * float("inf"), 0.0)
    want = contrib.sum(-1)  # NaN where +inf and -inf meet
    got = scores.float()
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    assert torch.equal(got[~torch.isnan(want)], want[~torch.isnan(want)].float())
    s2 = api.maxsim(Q, D, None, dm)  # the score-only kernels agree
    assert torch.equal(torch.isnan(s2), torch.isnan(want))
    assert torch.equal(s2[~torch.isnan(want)], want[~torch.isnan(want)].float())


# The argmax of unmasked, unscaled tiles (the max-chain epilogue: each
# thread's tile max first, the first column holding it only where it beats
# the running max).  Small-integer inputs make every similarity exact in
# float64 and fp32, so ties are frequent and exact: the argmax must be the
# lowest index of the maximum (within a tile, across tiles and across the
# threads and warps that merge), NaN rows (valid tokens) never win, a
# document of NaN rows only scores 0 with argmax -1; scores equal the
# score-only kernels' bitwise.  Tile-multiple and tail Ld, every family.
FAST_AM_CASES = [("bf16", 2, 3, 300, 700, 128), ("bf16", 9, 5, 32, 512, 128), ("f16", 1, 4, 32, 640, 64),
                 ("bf16", 1, 3, 100, 515, 128), ("f16", 3, 2, 140, 256, 96), ("bf16", 2, 3, 20, 333, 512),
                 ("f32", 2, 3, 40, 260, 32)]


@pytest.mark.parametrize("family", list(FAMILY_OFF))
@pytest.mark.parametrize("case", FAST_AM_CASES, ids=["-".join(map(str, c)) for c in FAST_AM_CASES])
def test_argmax_exact_ties_unmasked(case, family, gen):
    import lik

    api = _lik()
    dt, Nq, Nd, Lq, Ld, d = case
    Q = torch.randint(-2, 3, (Nq, Lq, d), device="cuda", generator=gen).to(DT[dt])
    D = torch.randint(-2, 3, (Nd, Ld, d), device="cuda", generator=gen).to(DT[dt])
    D[:, Ld // 2:] = D[:, :Ld - Ld // 2]  # every token again, later (ties across tiles)
    nan_rows = torch.rand((Nd, Ld), device="cuda", generator=gen) < 0.1
    nan_rows[0] = True  # a document of NaN rows only
    D[nan_rows] = float("nan")
    S = torch.einsum("isd,jtd->ijst", Q.double(), D.double())
    ok = ~torch.isnan(S)
    mx = torch.where(ok, S, -float("inf")).max(-1).values
    live = ok.any(-1)
    t = torch.arange(Ld, device="cuda")
    first = torch.where(ok & (S == mx[..., None]), t, Ld).min(-1).values
    want_am = torch.where(live, first, -1)
    want = torch.where(live, mx, 0.0).sum(-1)
    with lik.Context(cuda_off=FAMILY_OFF[family]):
        scores, am = api._forward(Q, D, with_argmax=True)
        s2 = api.maxsim(Q, D)
    torch.cuda.synchronize()
    bad = (am.long() != want_am).nonzero()
    if len(bad):
        i, j, s = bad[0].tolist()
        got = am[i, j, s].item()
        pytest.fail(f"{len(bad)} argmax entries differ; first [{i}, {j}, {s}]: got {got} "
                    f"(S {S[i, j, s, got].item() if got >= 0 else None}), want {want_am[i, j, s].item()} "
                    f"(S {mx[i, j, s].item()}); rows of the first: {sorted(set(bad[:, 2].tolist()))[:12]}")
    assert torch.equal(scores.double(), want), (scores.double() - want).abs().max()
    assert torch.equal(scores, s2)


# Short documents (forward/short_docs.cuh, sm_90a: floor(128 / Ld) whole
# documents to a 128-token tile when Ld is a multiple of 8 up to 64, one
# query or a few, scores only).  Against the float64 reference, and against
# the mma.sync kernels on the same inputs; masks with NaN in masked tokens,
# prefix masks, lengths, a query mask, strided document views, tiles cut by
# the documents' end, shapes just outside the path (which the other kernels
# serve).  On an sm_90 GPU the eligible cases must run the kernel.
SHORT_CASES = [
    # dtype, Nq, Nd, Lq, Ld, d, eligible
    ("bf16", 1, 1000, 32, 32, 128, True),
    ("f16", 1, 777, 17, 8, 64, True),  # 16 documents a tile, one atom
    ("bf16", 2, 301, 32, 24, 96, True),  # two queries in 64 rows, 5 documents a tile
    ("bf16", 3, 90, 20, 40, 48, True),  # two query groups, 3 documents a tile (15 of 16 blocks)
    ("f16", 1, 5, 64, 64, 128, True),  # Lq 64: two 32-row halves
    ("bf16", 1, 4099, 33, 56, 16, True),  # 2 documents a tile, d 16
    ("bf16", 1, 3, 1, 16, 128, True),
    ("f16", 3, 1, 9, 48, 72, True),  # one document
    ("bf16", 1, 20000, 32, 32, 128, True),  # ~38 tiles per CTA: the stage ring wraps
    ("f16", 3, 6000, 20, 24, 96, True),
    ("bf16", 1, 50, 32, 48, 17, False),  # d not a multiple of 8 (no tensor map)
    ("bf16", 1, 50, 32, 12, 128, False),  # Ld not a multiple of 8
    ("bf16", 1, 50, 32, 72, 128, False),  # Ld > 64
    ("bf16", 4, 300, 32, 32, 128, False),  # four queries: stacked
    ("f32", 1, 50, 32, 32, 64, False),
]


def _kernel_names(fn):
    """The names of the CUDA kernels fn launched."""
    return [e.get("name", "") for e in _kernel_events(fn)]


@pytest.mark.parametrize("masks", ["none", "random", "prefix", "lengths"])
@pytest.mark.parametrize("case", SHORT_CASES, ids=["-".join(map(str, c[:6])) for c in SHORT_CASES])
def test_short_documents(case, masks, gen):
    import lik

    api = _lik()
    dt, Nq, Nd, Lq, Ld, d, eligible = case
    # Q transposed (its elementwise loads) with a mask, contiguous without
    Q = rand((Nq, d, Lq), DT[dt], gen).transpose(1, 2) if masks == "random" else rand((Nq, Lq, d), DT[dt], gen)
    # documents strided (every other one of a larger tensor), or dense
    D = rand((Nd, 2, Ld, d), DT[dt], gen)[:, 0] if masks != "prefix" else rand((Nd, Ld, d), DT[dt], gen)
    qm = rmask((Nq, Lq), gen) if masks != "none" else None
    dm = lens = None
    if masks == "random":
        dm = rmask((Nd, Ld), gen, 0.7)
        dm[0] = False  # a document with no valid token
    elif masks in ("prefix", "lengths"):
        n = torch.randint(0, Ld + 1, (Nd,), device="cuda", generator=gen)
        n[0] = 0
        dm = torch.arange(Ld, device="cuda")[None, :] < n[:, None]
        if masks == "lengths":
            lens = n
    if dm is not None:
        D[~dm] = float("nan")  # never read
    kw = dict(d_lengths=lens) if lens is not None else dict(d_mask=dm)
    if masks == "lengths":  # the query side as lengths too
        nql = torch.randint(0, Lq + 1, (Nq,), device="cuda", generator=gen)
        qm = torch.arange(Lq, device="cuda")[None, :] < nql[:, None]
        kw["q_lengths"] = nql
    s = api.maxsim(Q, D, None if masks == "lengths" else qm, **kw)
    torch.cuda.synchronize()
    S = ref_sim(Q, D, False)
    qmb = (qm if qm is not None else torch.ones(Nq, Lq, dtype=torch.bool, device="cuda"))[:, None, :]
    dmb = (dm if dm is not None else torch.ones(Nd, Ld, dtype=torch.bool, device="cuda"))[None, :, None, :]
    ref = ref_scores(S, qmb, dmb)[0]
    check_scores(s, ref, Lq, Q.dtype)
    qa = None if masks == "lengths" else qm
    with lik.Context(cuda_off=("wgmma",)):
        s2 = api.maxsim(Q, D, qa, **kw)
    torch.cuda.synchronize()
    check_scores(s2, ref, Lq, Q.dtype)
    assert torch.equal(api.maxsim(Q, D, qa, **kw), s), "not deterministic"
    if torch.cuda.get_device_capability() == (9, 0) and not any(
            os.environ.get(v) for v in ("LIK_CUDA_WGMMA", "LIK_CUDA_BULK")):
        names = _kernel_names(lambda: api.maxsim(Q, D, qa, **kw))
        assert any("short_docs_kernel" in n for n in names) == eligible, names
    if masks != "lengths":  # retrieve scores its blocks of documents with the same kernels
        k = min(10, Nd)
        sc, ix = api.retrieve(Q, D, k, qm, dm, normalize=False)
        torch.cuda.synchronize()
        got = torch.gather(ref, 1, ix.long())
        check_scores(sc, got, Lq, Q.dtype)
        kth = torch.topk(ref, k, dim=1).values[:, -1:]
        assert (got >= kth - 2e-5 * (kth.abs() + Lq * 4.0) - 1e-6).all(), "not a top-k"


def test_short_documents_graph(gen):
    """The short-document kernel captured in a CUDA graph, replayed on new
    contents: equal to an eager call, bitwise."""
    api = _lik()
    Q = rand((1, 32, 128), torch.bfloat16, gen)
    D = rand((3000, 32, 128), torch.bfloat16, gen)
    g, out = _captured(lambda: api.maxsim(Q, D))
    D.copy_(rand((3000, 32, 128), torch.bfloat16, gen))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, api.maxsim(Q, D))
