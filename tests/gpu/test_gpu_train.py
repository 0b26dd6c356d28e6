"""GPU training suite: lik's CUDA backward vs float64 reference gradients.

Every test is marked ``gpu`` and skipped without torch + CUDA (CI has no GPU).

The reference gradient is the float64 gradient of the forward's own argmax
(what lik.h defines the backward as: the gradient flows through the winning
token only): the scores are re-summed in float64 from the argmax the CUDA
forward wrote (tests/train/train_ref.py ``rescore_*``) and differentiated by torch
autograd, on inputs whose masked tokens are zeroed (the kernels see NaN/Inf
garbage there).  A second check against the plain torch formula (max over
masked similarities, tests/train/train_ref.py) runs where the data has no
near ties.  Fresh random data per test (seed printed).

Run on the GPU machine:
    LIK_LIBRARY=build/liblik.so python3 -m pytest tests/gpu/test_gpu_train.py -q
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
import train_ref  # noqa: E402  (tests/train, on the path above)

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64}
# max |err| / max(|ref|, 1) of a gradient in its dtype (fp32 accumulation, one rounding)
TOL = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3, torch.float32: 2e-5, torch.float64: 1e-12}


@pytest.fixture
def g():
    seed = int(os.environ.get("LIK_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
    print(f"seed={seed}")
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    return gen


def _lik():
    import lik
    from lik import _autograd

    return lik, _autograd


def rand(shape, dtype, gen):
    return torch.randn(shape, device="cuda", generator=gen, dtype=torch.float32).to(dtype)


def rmask(shape, gen, p=0.8):
    return torch.rand(shape, device="cuda", generator=gen) < p


def garbage(x, mask):
    """x with NaN / Inf / huge values written into masked tokens (mask False)."""
    if mask is None:
        return x
    x = x.clone()
    bad = ~mask
    vals = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e30], device=x.device)
    fill = vals[torch.arange(x.shape[-1], device=x.device) % 4].to(x.dtype)
    x[bad] = fill
    return x


def clean(x, mask):
    return x if mask is None else torch.where(mask[..., None], x, torch.zeros_like(x))


def compare(got, want, dtype, what):
    assert got.dtype == dtype or dtype == torch.bfloat16, f"{what}: dtype {got.dtype}"
    assert torch.isfinite(got).all(), f"{what}: non-finite gradient (garbage leaked or unwritten)"
    scale = max(float(want.abs().max()) if want.numel() else 0.0, 1.0)
    err = float((got.double() - want.double()).abs().max()) if got.numel() else 0.0
    assert err <= TOL[dtype] * scale, f"{what}: max err {err:.3g} (scale {scale:.3g}, tol {TOL[dtype]})"


def padded_case(lik_ag, layout, Q, D, qm, dm, normalize, gen, strategy="auto"):
    """Forward + backward through the custom ops; returns (argmax, gQ, gD, g)."""
    scores, am = torch.ops.lik.maxsim_fwd(Q, D, qm, dm, normalize, layout, strategy, True)
    gs = torch.randn(scores.shape, device="cuda", generator=gen, dtype=torch.float64).to(scores.dtype)
    gQ, gD = torch.ops.lik.maxsim_bwd(gs, Q, D, qm, dm, am, normalize, layout, strategy, True, True)
    # the C call into NaN-poisoned outputs: every element written, same bits
    pQ = torch.full_like(Q, float("nan"), memory_format=torch.contiguous_format)
    pD = torch.full_like(D, float("nan"), memory_format=torch.contiguous_format)
    fn = lik_ag._L.lik_maxsim_pairs_backward if layout == 1 else lik_ag._L.lik_maxsim_backward
    opts = lik_ag._lib.call_options(Q, normalize=normalize, backward=strategy)
    lik_ag._call(fn, (Q, D, qm, dm, am, gs), opts, (pQ, pD))
    assert torch.equal(pQ, gQ) and torch.equal(pD, gD), "poisoned outputs: unwritten elements or a race"
    return scores, am, gQ, gD, gs


def padded_reference(lik_ag, layout, Q, D, qm, dm, am, gs, normalize):
    Qr = clean(Q, qm).double().requires_grad_(True)
    Dr = clean(D, dm).double().requires_grad_(True)
    r = train_ref.rescore_padded(Qr, Dr, am, layout, normalize)
    r.backward(gs.double())
    return r.detach(), Qr.grad, Dr.grad


def check_padded(layout, dtype, Nq, Nd, Lq, Ld, d, normalize, gen, masks=True, K=None, strategy="auto",
                 ties=False, zero_tok=False, q2d=False, d2d=False, strided=False, one_tok=False):
    lik, ag = _lik()
    if layout == 1:
        Q, D = rand((Nq, Lq, d), dtype, gen), rand((Nq, Ld, d), dtype, gen)
        qm = rmask((Nq, Lq), gen) if masks else None
        dm = rmask((Nq, Ld), gen) if masks else None
    elif K is not None:
        Q, D = rand((Nq, Lq, d), dtype, gen), rand((Nq, K, Ld, d), dtype, gen)
        qm = rmask((Nq, Lq), gen) if masks else None
        dm = rmask((Nq, K, Ld), gen) if masks else None
    else:
        Q = rand((Lq, d) if q2d else (Nq, Lq, d), dtype, gen)
        D = rand((Ld, d) if d2d else (Nd, Ld, d), dtype, gen)
        qm = rmask(Q.shape[:-1], gen) if masks else None
        dm = rmask(D.shape[:-1], gen) if masks else None
        if masks and not d2d and Nd > 1:
            dm[1] = False  # an empty document
    if ties and Ld >= 4:
        D[..., 3, :] = D[..., 1, :]  # duplicate tokens: the lower index wins
        D[..., 2, :] = D[..., 1, :]
    if one_tok:  # every document token the same: each query token's argmax is its first valid one
        D[...] = D[..., :1, :].clone()
    if zero_tok:
        D[..., 0, :] = 0  # a zero-norm valid token: normalize's eps branch
        Q[..., 0, :] = 0
    Qg, Dg = garbage(Q, qm), garbage(D, dm)
    if strided:  # non-contiguous views: feature stride 2 and a token stride gap
        Qb = torch.empty(Qg.shape[:-1] + (2 * d,), dtype=dtype, device="cuda")
        Qb[..., ::2] = Qg
        Qg = Qb[..., ::2]
        Db = torch.empty(Dg.shape[:-2] + (Dg.shape[-2] + 3, d), dtype=dtype, device="cuda")
        Db[..., : Dg.shape[-2], :] = Dg
        Dg = Db[..., : Dg.shape[-2], :]
    scores, am, gQ, gD, gs = padded_case(ag, layout, Qg, Dg, qm, dm, normalize, gen, strategy)
    ref, rQ, rD = padded_reference(ag, layout, Q, D, qm, dm, am, gs, normalize)
    what = f"layout={layout} {dtype} Nq={Nq} Nd={Nd} K={K} Lq={Lq} Ld={Ld} d={d} norm={normalize}"
    compare(gQ, rQ, dtype, "grad_Q " + what)
    compare(gD, rD, dtype, "grad_D " + what)
    if qm is not None:
        assert (gQ[~qm] == 0).all(), "masked query tokens must get exactly zero"
    if dm is not None:
        assert (gD[~dm] == 0).all(), "masked document tokens must get exactly zero"
    return Qg, Dg, qm, dm, am, gs, gQ, gD


CROSS = [
    # dtype, Nq, Nd, Lq, Ld, d
    ("bf16", 4, 6, 32, 300, 128),
    ("f16", 3, 5, 32, 129, 48),
    ("f32", 2, 5, 32, 70, 128),
    ("f64", 2, 3, 20, 40, 24),
    ("bf16", 2, 3, 45, 77, 100),     # d % 4 != 0: scalar loads
    ("bf16", 1, 2, 20, 50, 1000),    # d = 1000: 8 column chunks
    ("f32", 2, 3, 37, 65, 33),
    ("bf16", 3, 2, 257, 129, 1),     # d = 1
    ("bf16", 1, 3, 1, 1, 16),        # Lq = Ld = 1
    ("bf16", 2, 6, 300, 130, 128),   # long query
    ("f16", 1, 3, 1030, 200, 64),    # Lq = 1030
    ("bf16", 9, 5, 32, 150, 128),    # stacked queries in the forward
    ("bf16", 9, 4, 128, 300, 128),   # two queries of Lq 128 per forward CTA; grad_D by buckets, 8 rows a warp
    ("f64", 2, 3, 17, 33, 130),      # fp64, 3 column chunks
]


@pytest.mark.parametrize("case", CROSS, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("normalize", [False, True])
def test_cross_vs_reference(case, normalize, g):
    dt, Nq, Nd, Lq, Ld, d = case
    # a valid zero-norm token under normalize: dx = dy / 1e-12, which overflows
    # float16 to +-inf (as the CPU backward does): checked for the other dtypes
    check_padded(0, DT[dt], Nq, Nd, Lq, Ld, d, normalize, g, ties=True, zero_tok=normalize and dt != "f16")


@pytest.mark.parametrize("dt", ["bf16", "f32", "f64"])
@pytest.mark.parametrize("normalize", [False, True])
def test_kd_and_pairs_vs_reference(dt, normalize, g):
    check_padded(0, DT[dt], 5, 0, 32, 300, 128, normalize, g, K=4)
    check_padded(0, DT[dt], 3, 0, 20, 1030, 64, normalize, g, K=2)
    check_padded(1, DT[dt], 6, 6, 32, 90, 128, normalize, g)
    check_padded(1, DT[dt], 2, 2, 600, 40, 96, normalize, g)


@pytest.mark.parametrize("normalize", [False, True])
def test_2d_shapes_strided_and_no_masks(normalize, g):
    check_padded(0, torch.bfloat16, 1, 5, 24, 70, 128, normalize, g, q2d=True)
    check_padded(0, torch.float32, 3, 1, 24, 70, 64, normalize, g, d2d=True)
    check_padded(0, torch.bfloat16, 3, 4, 33, 70, 128, normalize, g, strided=True)
    check_padded(0, torch.float64, 3, 4, 9, 11, 20, normalize, g, strided=True)
    check_padded(0, torch.float16, 3, 4, 33, 70, 128, normalize, g, masks=False)
    check_padded(0, torch.bfloat16, 3, 0, 33, 70, 128, normalize, g, K=3, strided=True)


@pytest.mark.parametrize("normalize", [False, True])
def test_grad_d_paths_bitwise_equal(normalize, g):
    """grad_D has four kernels: a CTA per document when its candidates fit
    one chunk (KD, pairs, few queries), else row ranges (padded cross / KD
    with rows of few terms, d one column chunk: a CTA per range of document
    rows), else the buckets (the argmax transposed, a warp per row), else
    tiles of document rows.  Turning the first off (cuda_off=["bw_sparse"]),
    then the second, then the third must give the same bits, and each path
    must match the reference (the cases with Lq*Nq > 1024 reach the ranges or
    buckets without the flags)."""
    lik, _ = _lik()
    no_sparse = lik.Context(cuda_off=["bw_sparse"])
    buckets = lik.Context(cuda_off=["bw_sparse", "bw_ranges"])
    tiles = lik.Context(cuda_off=["bw_sparse", "bw_buckets"])
    cases = [(0, torch.bfloat16, 3, 4, 30, 300, 128, None), (0, torch.float32, 4, 0, 32, 200, 64, 3),
             (1, torch.float16, 5, 5, 20, 150, 96, None), (0, torch.float64, 2, 3, 9, 20, 1000, None),
             (0, torch.bfloat16, 37, 5, 33, 70, 128, None), (0, torch.float32, 70, 3, 19, 45, 200, None),
             (0, torch.float16, 2, 3, 1030, 17, 48, 2),
             # rows of at most 8 terms: 8 rows a warp (the last group of 3), fp16 / fp64
             (0, torch.float16, 40, 3, 100, 603, 64, None), (0, torch.float64, 30, 3, 40, 211, 64, None),
             # row ranges (Nq*Lq <= 2 Ld): 9 ranges of 240 rows, the last 180; 3 of 240 (220) and 224 (202)
             (0, torch.bfloat16, 40, 3, 30, 2100, 128, None), (0, torch.float32, 33, 2, 40, 700, 100, None),
             (0, torch.float64, 30, 2, 40, 650, 64, None),
             # grad_Q's buffer (the buckets' workspace) holds 2 documents: 4 groups; then none: scratch
             (0, torch.bfloat16, 40, 7, 30, 50, 3, None), (0, torch.bfloat16, 5, 3, 300, 20, 1, None)]
    # every candidate of a document on one row: one range's list holds them all
    cases += [(0, torch.bfloat16, 12, 2, 100, 700, 128, None, {"one_tok": True})]
    for layout, dt, Nq, Nd, Lq, Ld, d, K, *kw in cases:
        kw = kw[0] if kw else {}
        seed = int(torch.randint(0, 2**31, (1,), generator=g, device="cuda"))
        gen = torch.Generator(device="cuda")
        out = []
        for ctx in (None, no_sparse, buckets, tiles):
            gen.manual_seed(seed)
            with ctx or contextlib.nullcontext():
                out.append(check_padded(layout, dt, Nq, Nd, Lq, Ld, d, normalize, gen, K=K, **kw))
        for o in out[1:]:
            assert torch.equal(out[0][6], o[6]) and torch.equal(out[0][7], o[7]), (layout, dt, Nq, Lq)


@pytest.mark.parametrize("strategy", ["auto", "unified", "lowmem"])
def test_strategies_bitwise_equal(strategy, g):
    torch.manual_seed(0)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    base = check_padded(0, torch.bfloat16, 8, 16, 32, 100, 128, True, gen, strategy="auto")
    gen.manual_seed(11)
    other = check_padded(0, torch.bfloat16, 8, 16, 32, 100, 128, True, gen, strategy=strategy)
    assert torch.equal(base[6], other[6]) and torch.equal(base[7], other[7])


def test_vs_plain_torch_formula(g):
    """End to end through lik.maxsim's autograd vs the plain float64 torch
    formula (no tie within 1e-3 on this data, so the argmax agrees)."""
    lik, _ = _lik()
    from train_ref import ref_cross, ref_kd

    for dtype in (torch.float32, torch.float64):
        for normalize in (False, True):
            Q = rand((3, 16, 64), dtype, g).requires_grad_(True)
            D = rand((5, 40, 64), dtype, g).requires_grad_(True)
            qm, dm = rmask((3, 16), g), rmask((5, 40), g)
            s = lik.maxsim(Q, D, qm, dm, normalize=normalize)
            gs = torch.randn(s.shape, device="cuda", generator=g, dtype=torch.float64)
            s.backward(gs.to(s.dtype))
            Qr = Q.detach().double().cpu().requires_grad_(True)
            Dr = D.detach().double().cpu().requires_grad_(True)
            r = ref_cross(Qr, Dr, qm.cpu(), dm.cpu(), normalize)
            r.backward(gs.cpu())
            compare(Q.grad.cpu(), Qr.grad, dtype, "grad_Q")
            compare(D.grad.cpu(), Dr.grad, dtype, "grad_D")
            Q2 = rand((3, 16, 64), dtype, g).requires_grad_(True)
            D2 = rand((3, 4, 40, 64), dtype, g).requires_grad_(True)
            s = lik.maxsim(Q2, D2, normalize=normalize)
            gs = torch.randn(s.shape, device="cuda", generator=g, dtype=torch.float64)
            s.backward(gs.to(s.dtype))
            Qr = Q2.detach().double().cpu().requires_grad_(True)
            Dr = D2.detach().double().cpu().requires_grad_(True)
            ref_kd(Qr, Dr, None, None, normalize).backward(gs.cpu())
            compare(Q2.grad.cpu(), Qr.grad, dtype, "KD grad_Q")
            compare(D2.grad.cpu(), Dr.grad, dtype, "KD grad_D")


# ---- packed layouts --------------------------------------------------------------


def packed_inputs(dtype, lq, ld, d, gen, masks=True):
    cu_q = torch.tensor([0] + torch.tensor(lq).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
    cu_d = torch.tensor([0] + torch.tensor(ld).cumsum(0).tolist(), dtype=torch.int64, device="cuda")
    Q, D = rand((sum(lq), d), dtype, gen), rand((sum(ld), d), dtype, gen)
    qm = rmask((sum(lq),), gen) if masks else None
    dm = rmask((sum(ld),), gen) if masks else None
    return Q, D, cu_q, cu_d, qm, dm


def check_packed(dtype, lq, ld, d, normalize, gen, pairs=None, masks=True):
    lik, ag = _lik()
    Q, D, cu_q, cu_d, qm, dm = packed_inputs(dtype, lq, ld, d, gen, masks)
    pq = pd = None
    if pairs is not None:
        pq = torch.tensor(pairs[0], dtype=torch.int64, device="cuda")
        pd = torch.tensor(pairs[1], dtype=torch.int32, device="cuda")
    Qg, Dg = garbage(Q, qm), garbage(D, dm)
    lmax = max(lq) if lq else 0
    scores, am = torch.ops.lik.packed_fwd(Qg, Dg, cu_q, cu_d, pq, pd, qm, dm, lmax, normalize, "auto", True)
    gs = torch.randn(scores.shape, device="cuda", generator=gen, dtype=torch.float64).to(scores.dtype)
    gQ, gD = torch.ops.lik.packed_bwd(gs, Qg, Dg, cu_q, cu_d, pq, pd, qm, dm, am, normalize, "auto", True, True)
    Qr = clean(Q, qm).double().requires_grad_(True)
    Dr = clean(D, dm).double().requires_grad_(True)
    r = train_ref.rescore_packed(Qr, Dr, cu_q, cu_d, pq, pd, am, normalize)
    r.backward(gs.double())
    what = f"packed {dtype} lq={lq} ld={ld} d={d} norm={normalize} pairs={pairs is not None}"
    compare(gQ, Qr.grad, dtype, "grad_Q " + what)
    compare(gD, Dr.grad, dtype, "grad_D " + what)
    if qm is not None:
        assert (gQ[~qm] == 0).all()
    if dm is not None:
        assert (gD[~dm] == 0).all()
    return gQ, gD


@pytest.mark.parametrize("dt", ["bf16", "f16", "f32", "f64"])
@pytest.mark.parametrize("normalize", [False, True])
def test_varlen_and_pairs_packed_vs_reference(dt, normalize, g):
    lq, ld = [4, 1, 0, 37, 70, 2], [5, 0, 80, 2, 300, 33, 1]
    check_packed(DT[dt], lq, ld, 64, normalize, g)
    pairs = ([3, 0, 0, 2, 1, 5, 4, 3, 3], [2, 0, 0, 4, 1, 6, 4, 4, 0])
    check_packed(DT[dt], lq, ld, 64, normalize, g, pairs=pairs)
    # many short sequences crossing tiles; a long one spanning several tiles
    lq2 = [int(x) for x in torch.randint(0, 40, (50,), generator=torch.Generator().manual_seed(1))]
    ld2 = [int(x) for x in torch.randint(0, 200, (30,), generator=torch.Generator().manual_seed(2))] + [1030]
    check_packed(DT[dt], lq2, ld2, 128, normalize, g)
    P = 200
    gp = torch.Generator().manual_seed(3)
    pairs2 = (torch.randint(0, 50, (P,), generator=gp).tolist(), torch.randint(0, 31, (P,), generator=gp).tolist())
    check_packed(DT[dt], lq2, ld2, 128, normalize, g, pairs=pairs2)


def test_packed_equals_padded(g):
    """varlen on packed rows == padded cross product + length masks (grads)."""
    lik, _ = _lik()
    from train_ref import packed_from_padded

    Nq, Nd, Lq, Ld, d = 5, 7, 40, 90, 128
    lq = torch.tensor([40, 1, 17, 0, 33])
    ld = torch.tensor([90, 2, 55, 70, 1, 0, 89])
    Qp, Dp = rand((Nq, Lq, d), torch.bfloat16, g), rand((Nd, Ld, d), torch.bfloat16, g)
    qm = (torch.arange(Lq)[None] < lq[:, None]).cuda()
    dm = (torch.arange(Ld)[None] < ld[:, None]).cuda()
    for normalize in (False, True):
        Qa, Da = Qp.clone().requires_grad_(True), Dp.clone().requires_grad_(True)
        s_pad = lik.maxsim(Qa, Da, qm, dm, normalize=normalize)
        gs = torch.randn(s_pad.shape, device="cuda", generator=g)
        s_pad.backward(gs)
        Qk, cu_q = packed_from_padded(Qp, lq)
        Dk, cu_d = packed_from_padded(Dp, ld)
        Qk.requires_grad_(True)
        Dk.requires_grad_(True)
        s_pk = lik.maxsim_varlen(Qk, Dk, cu_q.cuda(), cu_d.cuda(), normalize=normalize)
        s_pk.backward(gs)
        assert torch.equal(Qa.grad[qm], Qk.grad)
        assert torch.equal(Da.grad[dm], Dk.grad)


# ---- determinism ------------------------------------------------------------------


def test_determinism_10_runs(g):
    """10 runs bitwise equal: cross (many terms per grad_D row), KD, pairs
    lists, varlen; bf16 with normalize (the most rounding-sensitive)."""
    lik, ag = _lik()
    Q, D = rand((64, 32, 128), torch.bfloat16, g), rand((64, 120, 128), torch.bfloat16, g)
    D[:, 5:60] = D[:, 4:5]  # many equal tokens: ties, long hit lists
    qm, dm = rmask((64, 32), g), rmask((64, 120), g)
    Dk = rand((16, 8, 300, 128), torch.bfloat16, g)
    Qv, Dv, cu_q, cu_d, qmv, dmv = packed_inputs(torch.bfloat16, [30, 1, 64, 0, 100] * 8, [77, 300, 0, 5] * 10, 128, g)
    pq = torch.randint(0, 40, (500,), device="cuda", generator=g)
    pd = torch.randint(0, 40, (500,), device="cuda", generator=g)
    runs = []
    for _ in range(10):
        out = []
        for layout, QQ, DD, mq, md in ((0, Q, D, qm, dm), (0, Q[:16], Dk, None, None), (1, Q, D[:64], qm, dm)):
            s, am = torch.ops.lik.maxsim_fwd(QQ, DD, mq, md, True, layout, "auto", True)
            gs = torch.linspace(-1, 1, s.numel(), device="cuda").reshape(s.shape)
            out += list(torch.ops.lik.maxsim_bwd(gs, QQ, DD, mq, md, am, True, layout, "auto", True, True))
        for a, b in ((None, None), (pq, pd)):
            s, am = torch.ops.lik.packed_fwd(Qv, Dv, cu_q, cu_d, a, b, qmv, dmv, 100, True, "auto", True)
            gs = torch.linspace(-1, 1, s.numel(), device="cuda").reshape(s.shape)
            out += list(torch.ops.lik.packed_bwd(gs, Qv, Dv, cu_q, cu_d, a, b, qmv, dmv, am, True, "auto", True, True))
        runs.append(out)
    for r in runs[1:]:
        for a, b in zip(runs[0], r):
            assert torch.equal(a, b), "gradients differ between runs"


# ---- torch integration ---------------------------------------------------------------


def test_gradcheck_float64_cuda():
    lik, _ = _lik()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(5)
    for normalize in (False, True):
        Q = torch.randn(3, 5, 6, dtype=torch.float64, device="cuda", generator=gen, requires_grad=True)
        D = torch.randn(4, 7, 6, dtype=torch.float64, device="cuda", generator=gen, requires_grad=True)
        qm, dm = rmask((3, 5), gen), rmask((4, 7), gen)
        assert torch.autograd.gradcheck(lambda q, d: lik.maxsim(q, d, qm, dm, normalize=normalize), (Q, D))
        Dk = torch.randn(3, 2, 7, 6, dtype=torch.float64, device="cuda", generator=gen, requires_grad=True)
        assert torch.autograd.gradcheck(lambda q, d: lik.maxsim(q, d, normalize=normalize), (Q, Dk))
        cu_q = torch.tensor([0, 3, 3, 8], device="cuda")
        cu_d = torch.tensor([0, 4, 10, 10, 11], device="cuda")
        Qp = torch.randn(8, 6, dtype=torch.float64, device="cuda", generator=gen, requires_grad=True)
        Dp = torch.randn(11, 6, dtype=torch.float64, device="cuda", generator=gen, requires_grad=True)
        assert torch.autograd.gradcheck(
            lambda q, d: lik.maxsim_varlen(q, d, cu_q, cu_d, normalize=normalize), (Qp, Dp))
        pq, pd = torch.tensor([0, 2, 2, 1], device="cuda"), torch.tensor([1, 0, 0, 3], device="cuda")
        assert torch.autograd.gradcheck(
            lambda q, d: lik.score_pairs_packed(q, d, cu_q, cu_d, pq, pd, normalize=normalize), (Qp, Dp))


def test_cuda_graph_fwd_bwd(g):
    """Forward + backward captured in one CUDA graph, replayed on new data."""
    lik, _ = _lik()
    Q = rand((8, 32, 128), torch.bfloat16, g).requires_grad_(True)
    D = rand((16, 100, 128), torch.bfloat16, g).requires_grad_(True)
    dm = rmask((16, 100), g)
    gs = torch.randn(8, 16, device="cuda", generator=g)

    def step():
        Q.grad = None
        D.grad = None
        s = lik.maxsim(Q, D, None, dm, normalize=True)
        s.backward(gs)
        return s

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    Q.grad = None
    D.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        s_static = lik.maxsim(Q, D, None, dm, normalize=True)
        s_static.backward(gs)
    gq_static, gd_static = Q.grad, D.grad
    for _ in range(2):
        with torch.no_grad():
            Q.copy_(rand(Q.shape, Q.dtype, g))
            D.copy_(rand(D.shape, D.dtype, g))
        graph.replay()
        torch.cuda.synchronize()
        Qe, De = Q.detach().clone().requires_grad_(True), D.detach().clone().requires_grad_(True)
        se = lik.maxsim(Qe, De, None, dm, normalize=True)
        se.backward(gs)
        assert torch.equal(se, s_static)
        assert torch.equal(Qe.grad, gq_static) and torch.equal(De.grad, gd_static)


def test_torch_compile_fullgraph_cuda(g):
    lik, _ = _lik()
    Q = rand((4, 32, 64), torch.bfloat16, g).requires_grad_(True)
    D = rand((6, 50, 64), torch.bfloat16, g).requires_grad_(True)
    dm = rmask((6, 50), g)
    labels = torch.arange(4, device="cuda")

    def loss_fn(q, d):
        s = lik.maxsim(q, d, None, dm, normalize=True)
        return torch.nn.functional.cross_entropy(s / 0.05, labels)

    ref = loss_fn(Q, D)
    ref.backward()
    gq, gd = Q.grad.clone(), D.grad.clone()
    for backend in ("aot_eager", "inductor"):
        Q.grad = None
        D.grad = None
        torch._dynamo.reset()
        out = torch.compile(loss_fn, fullgraph=True, backend=backend)(Q, D)
        out.backward()
        assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5)
        if backend == "aot_eager":  # the same ops as eager: the same bits
            assert torch.equal(Q.grad, gq) and torch.equal(D.grad, gd), backend
        else:  # inductor fuses the cross-entropy backward: grad_scores round differently
            compare(Q.grad.float(), gq.float(), torch.bfloat16, "inductor grad_Q")
            compare(D.grad.float(), gd.float(), torch.bfloat16, "inductor grad_D")


def test_opcheck_cuda(g):
    lik, _ = _lik()
    Q = rand((3, 8, 16), torch.float32, g).requires_grad_(True)
    D = rand((4, 9, 16), torch.float32, g).requires_grad_(True)
    dm = rmask((4, 9), g)
    torch.library.opcheck(torch.ops.lik.maxsim_fwd.default, (Q, D, None, dm, True, 0, "auto", True))
    s, am = torch.ops.lik.maxsim_fwd(Q, D, None, dm, True, 0, "auto", True)
    gs = torch.randn(s.shape, device="cuda", generator=g)
    torch.library.opcheck(torch.ops.lik.maxsim_bwd.default,
                          (gs, Q.detach(), D.detach(), None, dm, am, True, 0, "auto", True, True))


def test_strided_outputs_through_c(g):
    """grad_Q / grad_D written into strided views (every element written once,
    nothing around them touched); grad_scores with a zero stride."""
    from lik import _lib

    lik, ag = _lik()
    Q, D = rand((3, 10, 32), torch.bfloat16, g), rand((4, 20, 32), torch.bfloat16, g)
    s, am = torch.ops.lik.maxsim_fwd(Q, D, None, None, False, 0, "auto", True)
    gs = torch.ones(1, 1, device="cuda").expand(3, 4)
    bq = torch.full((3, 10, 64), 7.0, dtype=torch.bfloat16, device="cuda")
    bd = torch.full((4, 20, 2, 32), 7.0, dtype=torch.bfloat16, device="cuda")
    gQ, gD = bq[..., 1::2], bd[:, :, 1, :]
    keep = [_lib.view(x) for x in (Q, D, am, gs, gQ, gD)]
    p = [ctypes.byref(t) for _, t in keep]
    o = _lib.make_options(stream=torch.cuda.current_stream().cuda_stream)
    st = _lib.lib.lik_maxsim_backward(p[0], p[1], None, None, p[2], p[3], ctypes.byref(o), p[4], p[5])
    assert st == 0, _lib.lib.lik_last_error()
    torch.cuda.synchronize()
    rQ, rD = torch.ops.lik.maxsim_bwd(gs.contiguous(), Q, D, None, None, am, False, 0, "auto", True, True)
    assert torch.equal(gQ, rQ) and torch.equal(gD, rD)
    assert (bq[..., 0::2] == 7).all() and (bd[:, :, 0, :] == 7).all()


def test_step_holds_argmax_and_gradients_only(g):
    """A padded forward + backward step allocates the argmax and the two
    gradients and nothing else of their size (64 KB of slack): no zero
    gradient materialised for the argmax output (a [Nq, Nd, Lq] int32), and
    grad_D's buckets (Nq * Lq > 1024) kept in grad_Q's buffer."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from cuda_pool import pool_high, pool_reset
    lik, _ = _lik()
    Nq, Nd, Lq, Ld, d = 16, 24, 300, 200, 128
    Q = torch.randn(Nq, Lq, d, device="cuda", generator=g).bfloat16().requires_grad_(True)
    D = torch.randn(Nd, Ld, d, device="cuda", generator=g).bfloat16().requires_grad_(True)
    G = torch.randn(Nq, Nd, device="cuda", generator=g)
    with lik.Context(cuda_off=("pool",)):  # lik's scratch from the pool cuda_pool reads
        lik.maxsim(Q, D).backward(G)  # warm-up: cached device state, allocator segments
        Q.grad = D.grad = None
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        pool_reset()
        lik.maxsim(Q, D).backward(G)
        torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    need = Nq * Nd * Lq * 4 + Q.numel() * 2 + D.numel() * 2 + Nq * Nd * 4
    assert peak <= need + (64 << 10), (peak, need)
    assert pool_high() < (64 << 10), pool_high()  # lik's own scratch (cudaMallocAsync)
