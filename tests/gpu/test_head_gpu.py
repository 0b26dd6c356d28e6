"""GPU suite of the fused D-side head (lik.maxsim_from_hidden): the CUDA
kernels against the CPU backend in float64 on the same (bf16 / fp16 / fp32
rounded) values; the CPU backend is itself tested against the float64
F.linear -> normalize -> MaxSim reference in tests/python/test_head.py.
Gradients are compared with the CPU backend's float64 gradients at the CUDA
forward's own argmax (test_gpu_train.py's reference), once that argmax is
checked to be a maximum of the float64 similarities within
test_gpu_parity.py's tie tolerance: a near tie may go either way in fp32, and
the other token moves a whole token vector of gradient (issue 30).

The CUDA projection multiplies half / bf16 operands exactly, fp32 ones as
3xTF32 (fp32 accuracy; one TF32 product under torch's "high" fp32 matmul
precision), and accumulates in fp32, the MaxSim runs in fp32, gradients are
written in the input dtype: scores are compared at fp32 tolerance, gradients
at the input dtype's.  Marked ``gpu``; skipped without torch + CUDA.
"""

from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
F = torch.nn.functional

import lik  # noqa: E402
from test_gpu_parity import check_argmax, ref_scores, ref_sim  # noqa: E402  (pytest puts tests/gpu on sys.path)


def inputs(rng, nq, lq, nd, ld, d_model, d_out, dtype, kd=0, masks=True):
    t = lambda *s: torch.from_numpy(rng.standard_normal(s)).float()  # noqa: E731
    Q = F.normalize(t(nq, lq, d_out), dim=-1)
    H = t(nq, kd, ld, d_model) if kd else t(nd, ld, d_model)
    W = t(d_out, d_model) / np.sqrt(d_model)
    b = t(d_out)
    qm = dm = None
    if masks:
        qm = torch.from_numpy(rng.random((nq, lq)) < 0.8)
        dm = torch.from_numpy(rng.random(H.shape[:-1]) < 0.7)
        Q[~qm] = torch.nan
        H[~dm] = torch.inf
    return [x.to(dtype) for x in (Q, H, W, b)], qm, dm


def run(xs, qm, dm, normalize, device, g):
    ins = [x.to(device).requires_grad_(True) for x in xs]
    masks = [None if m is None else m.to(device) for m in (qm, dm)]
    s = lik.maxsim_from_hidden(*ins, d_mask=masks[1], normalize=normalize, q_mask=masks[0])
    am = s.grad_fn.saved_tensors[-1]  # the forward's argmax, which the backward reads (lik/head.py)
    (s.double() * g.to(device)).sum().backward()
    return s.detach().cpu().double(), [x.grad.cpu().double() for x in ins], am.cpu()


def argmax_grads(xs, qm, dm, normalize, am, g):
    """The CPU backend's float64 gradients at the argmax ``am`` a forward wrote (the
    backward lik_experimental.h defines: only the winning tokens carry gradient), once
    each entry of ``am`` is checked to be a maximum of the float64 similarities within
    test_gpu_parity.py's tolerance, 2e-5 * (|max| + 4): 8e-5 to 1e-4 for these unit
    Q and normalised tokens (|max| <= 1), against errors per similarity of 2^-16
    (the sm_90a hi / lo pair) and fp32 sums (< 1e-5).  A token outside that band
    fails (a wrong token, tile or document is off by the typical top-2 gap, 1e-2 to
    3e-2 here), as does any winner other than the float64 argmax where the top-2
    gap exceeds the band."""
    ins = [x.double() for x in xs]
    kd = xs[1].ndim == 4
    D = F.linear(torch.where(dm[..., None], ins[1], 0.0), ins[2], ins[3])
    D = F.normalize(D, dim=-1, eps=1e-12) if normalize else D
    _, mx, live, S = ref_scores(ref_sim(torch.where(qm[..., None], ins[0], 0.0), D, False, kd=kd),
                                qm[:, None, :], dm[:, :, None, :] if kd else dm[None, :, None, :])
    check_argmax(am, S, mx, live)
    grads = [torch.empty_like(x) for x in ins]
    lik._lib.call_maxsim_from_hidden_backward(*ins, qm, dm, am, g, *grads, normalize=normalize)
    return grads


def close(got, ref, rel, what):
    assert bool(torch.isfinite(got).all()), f"{what}: non-finite values"
    err = (got - ref).norm() / ref.norm().clamp_min(1e-30)
    assert err <= rel, f"{what}: relative error {err.item():.3g} > {rel}"


# relative tolerances: scores (per element, against 1 + |score|), gradients (norm-wise)
SCORE_TOL = {torch.bfloat16: 1e-4, torch.float16: 1e-4, torch.float32: 2e-5}
GRAD_TOL = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1e-4}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("d_model,d_out,kd", [(1, 1, 0), (3, 17, 0), (17, 128, 2), (96, 17, 0),
                                              (96, 128, 0), (768, 128, 0), (384, 96, 3), (40, 256, 0)])
def test_cuda_matches_cpu(rng, dtype, normalize, d_model, d_out, kd):
    xs, qm, dm = inputs(rng, 3, 9, 5, 131, d_model, d_out, dtype, kd=kd)
    g = torch.from_numpy(rng.standard_normal((3, kd or 5)))
    s, grads, am = run(xs, qm, dm, normalize, "cuda", g)
    rs, _, _ = run([x.double() for x in xs], qm, dm, normalize, "cpu", g)
    err = (s - rs).abs()
    assert bool((err <= SCORE_TOL[dtype] * (1 + rs.abs())).all()), f"scores: max err {err.max().item()}"
    for name, a, e in zip("QHWb", grads, argmax_grads(xs, qm, dm, normalize, am, g)):
        close(a, e, GRAD_TOL[dtype], f"grad_{name}")
    assert bool((grads[0][~qm] == 0).all()) and bool((grads[1][~dm] == 0).all())


# The sm_90a forward (head_wg.cuh: half types, d_out <= 128, Lq <= 256, TMA-
# addressable H_d and W; fp16 when normalised) and the portable one (a context with
# cuda_off=["wgmma"]), each against the CPU in float64, on the shapes that pick its
# branches: CTAs that split a document's tiles (few documents) or not (>= one per SM),
# 1 to 4 tiles of 64 query rows, two query blocks, Lq > 256 (portable kernel only),
# d_out <= 64 / <= 128, d_model and Ld tails of the 64-feature chunks and 128-token
# tiles, strided tokens, KD; garbage (NaN / inf) under both masks.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("nq,lq,nd,ld,d_model,d_out,kd,strided", [
    (2, 32, 150, 200, 96, 128, 0, False),
    (8, 32, 40, 257, 200, 100, 0, True),
    (3, 9, 5, 131, 40, 64, 0, False),
    (1, 300, 3, 90, 64, 48, 0, False),
    (3, 20, 0, 129, 136, 128, 4, False),
    (11, 24, 7, 64, 72, 33, 0, True),
])
def test_cuda_wgmma_forward(rng, dtype, nq, lq, nd, ld, d_model, d_out, kd, strided):
    xs, qm, dm = inputs(rng, nq, lq, nd, ld, d_model, d_out, dtype, kd=kd)
    if strided:  # every other token of a twice as long buffer: rows 2 * d_model apart
        xs[1] = xs[1].repeat_interleave(2, dim=-2)[..., ::2, :]
    g = torch.from_numpy(rng.standard_normal((nq, kd or nd)))
    rs, _, _ = run([x.double() for x in xs], qm, dm, True, "cpu", g)
    s, grads, am = run(xs, qm, dm, True, "cuda", g)
    with lik.Context(cuda_off=["wgmma"]):
        s0, grads0, am0 = run(xs, qm, dm, True, "cuda", g)
    for what, got, gg, a_m in (("sm_90a", s, grads, am), ("portable", s0, grads0, am0)):
        err = (got - rs).abs()
        assert bool((err <= SCORE_TOL[dtype] * (1 + rs.abs())).all()), f"{what} scores: max err {err.max().item()}"
        for name, a, e in zip("QHWb", gg, argmax_grads(xs, qm, dm, True, a_m, g)):
            close(a, e, GRAD_TOL[dtype], f"{what} grad_{name}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("nq,lq,nd,ld,d_model,d_out", [(8, 32, 5, 2, 64, 64), (2, 16, 3, 1100, 48, 40)])
def test_cuda_backward_buckets(rng, dtype, nq, lq, nd, ld, d_model, d_out):
    """The backward's grad_H_d buckets: many slots winning one token (Ld = 2: ~128 slots a
    bucket, summed in slot order: bitwise equal run to run), documents longer than one
    1024-token range of h_kernel."""
    xs, qm, dm = inputs(rng, nq, lq, nd, ld, d_model, d_out, dtype)
    g = torch.from_numpy(rng.standard_normal((nq, nd)))
    a = run(xs, qm, dm, True, "cuda", g)
    b = run(xs, qm, dm, True, "cuda", g)
    assert torch.equal(a[0], b[0]) and all(torch.equal(x, y) for x, y in zip(a[1], b[1]))
    rs = run([x.double() for x in xs], qm, dm, True, "cpu", g)[0]
    err = (a[0] - rs).abs()
    assert bool((err <= SCORE_TOL[dtype] * (1 + rs.abs())).all()), f"scores: max err {err.max().item()}"
    for name, got, e in zip("QHWb", a[1], argmax_grads(xs, qm, dm, True, a[2], g)):
        close(got, e, GRAD_TOL[dtype], f"grad_{name}")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_cuda_deterministic_and_empty(rng, dtype):
    xs, qm, dm = inputs(rng, 2, 32, 7, 300, 768, 128, dtype)
    g = torch.from_numpy(rng.standard_normal((2, 7)))
    a = run(xs, qm, dm, True, "cuda", g)
    b = run(xs, qm, dm, True, "cuda", g)
    assert torch.equal(a[0], b[0]) and all(torch.equal(x, y) for x, y in zip(a[1], b[1]))
    for nq, nd, ld in ((0, 3, 5), (2, 0, 5), (2, 3, 0)):
        ys, _, _ = inputs(rng, nq, 4, nd, ld, 8, 16, dtype, masks=False)
        s, grads, _ = run(ys, None, None, True, "cuda", torch.ones(nq, nd, dtype=torch.float64))
        assert s.shape == (nq, nd) and bool((s == 0).all()) and all(bool((x == 0).all()) for x in grads)


@pytest.mark.parametrize("normalize", [True, False])
def test_cuda_fp32_tf32_option(rng, normalize):
    """torch's "high" fp32 matmul precision: one TF32 product per term (the
    option reaches the kernel: it differs from 3xTF32), within TF32's error."""
    xs, qm, dm = inputs(rng, 3, 9, 5, 131, 768, 128, torch.float32)
    rs = lik.maxsim_from_hidden(*[x.double() for x in xs], d_mask=dm, normalize=normalize, q_mask=qm)
    args = dict(d_mask=dm.cuda(), normalize=normalize, q_mask=qm.cuda())
    exact = lik.maxsim_from_hidden(*[x.cuda() for x in xs], **args).cpu().double()
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        tf32 = lik.maxsim_from_hidden(*[x.cuda() for x in xs], **args).cpu().double()
    finally:
        torch.set_float32_matmul_precision(before)
    scale = 1 + rs.abs()
    assert bool(((exact - rs).abs() <= 2e-5 * scale).all())
    err = ((tf32 - rs).abs() / scale).max().item()
    assert 2e-5 < err <= 1e-2, f"TF32 scores: relative error {err:.3g}"


def test_cuda_unsupported_dtype(rng):
    xs, _, _ = inputs(rng, 1, 2, 2, 3, 4, 5, torch.float64, masks=False)
    with pytest.raises(lik.LikError, match="float16, bfloat16 or float32 inputs, got float64"):
        lik.maxsim_from_hidden(*[x.cuda() for x in xs])
