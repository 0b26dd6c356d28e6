"""GPU suite of compressed late interaction (lik.plaid, lik.maxsim_residual*):
the CUDA kernels against the CPU backend (itself tested against float64
references in tests/python and tests/c) on the same compressed data.

The CUDA residual MaxSim computes its dots on the tensor cores: an fp32
query in fp32 (3xTF32, the CPU's accuracy), a half-type query on fp16
operands under normalize, bf16 otherwise (fp32 accumulation), so scores are
compared with a tolerance of the operands' precision, and an argmax is
accepted when its token scores within that tolerance of the CPU's best
(float64 decode).  Marked ``gpu``;
skipped without torch + CUDA.  LIK_GPU_BIG=1 adds the > 2^31-byte residual
array (~3 GB of GPU memory).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

import lik  # noqa: E402
from lik import plaid  # noqa: E402


def _index(rng, nbits, d, C, lengths, cent_dtype=np.float16):
    cent = rng.standard_normal((C, d)).astype(np.float32)
    cent = (cent / np.linalg.norm(cent, axis=1, keepdims=True)).astype(cent_dtype)
    T = int(sum(lengths))
    codes = rng.integers(0, C, T).astype(np.int32)
    res = rng.integers(0, 256, (T, d * nbits // 8)).astype(np.uint8)
    w = np.sort(rng.standard_normal(1 << nbits) * 0.1).astype(np.float32)
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return [torch.from_numpy(a) for a in (codes, res, cu, cent, w)]


def _cuda(*xs):
    return [x.cuda() for x in xs]


def _check(Q, codes, res, lens, cent, w, nbits, layout, normalize, packed, xmax):
    """GPU vs CPU scores within the error of the GPU's operands: a dot of
    bf16 / fp16 operands is off by at most ~2^-8 ||q|| ||x||, of fp32 ones
    (3xTF32) by ~d 2^-24 ||q|| ||x||, so a score by that factor of its terms'
    scale sum_s ||q_s|| * max_t ||x_t|| (xmax: the largest decoded token norm;
    1 under normalize) — relative to the terms, not to the score, which can
    cancel to ~0."""
    fn = lik.maxsim_residual_varlen if packed else lik.maxsim_residual
    cpu = fn(Q, codes, res, lens, cent, w, nbits, normalize=normalize, layout=layout)
    gpu = fn(*_cuda(Q, codes, res, lens, cent, w), nbits, normalize=normalize, layout=layout)
    assert gpu.device.type == "cuda"
    qn = torch.ones(Q.shape[:-1]) if normalize else Q.double().norm(dim=-1)
    scale = qn.sum(-1, keepdim=True) * (1.0 if normalize else xmax)
    half = Q.dtype != torch.float32 or Q.shape[-1] > 1088  # fp32 tiles fit d <= 1088 (lik_experimental.h)
    tol = (2.0**-8 if half else 2.0**-16) * scale + 1e-6
    err = (gpu.cpu().double() - cpu.double()).abs()
    assert torch.all(err <= tol), (err.max(), (err / tol).max())
    return cpu, gpu


CASES = [  # nbits, d, Lq, lengths
    (2, 128, 32, [300, 0, 1, 77, 129]),
    (4, 128, 32, [512, 5, 64]),
    (1, 96, 17, [31, 0, 200]),
    (8, 17, 5, [3, 9]),
    (8, 3, 40, [70, 1]),
    (2, 48, 100, [65, 64, 63]),
    (2, 1000, 33, [40, 7]),
    (8, 1200, 20, [33, 2]),
]


@pytest.mark.parametrize("nbits,d,lq,lengths", CASES)
@pytest.mark.parametrize("layout", ("colbert", "lik"))
@pytest.mark.parametrize("normalize", (True, False))
@pytest.mark.parametrize("qdtype", (torch.float32, torch.bfloat16))
def test_scores_match_cpu(rng, nbits, d, lq, lengths, layout, normalize, qdtype):
    codes, res, cu, cent, w = _index(rng, nbits, d, int(rng.integers(1, 300)), lengths)
    Q = torch.from_numpy(rng.standard_normal((2, lq, d)).astype(np.float32)).to(qdtype)
    x = plaid.decompress(codes, res, cent, w, nbits, layout=layout, normalize=False)
    xmax = float(x.double().norm(dim=-1).max()) if len(x) else 0.0
    _check(Q, codes, res, cu, cent, w, nbits, layout, normalize, True, xmax)
    lens = cu[1:] - cu[:-1]
    ld = int(lens.max()) + 3
    pc = torch.full((len(lens), ld), -9, dtype=torch.int64)  # padding: never read
    pr = torch.zeros((len(lens), ld, res.shape[1]), dtype=torch.uint8)
    for j in range(len(lens)):
        pc[j, :lens[j]] = codes[cu[j]:cu[j + 1]]
        pr[j, :lens[j]] = res[cu[j]:cu[j + 1]]
    _check(Q[0], pc, pr, lens, cent, w, nbits, layout, normalize, False, xmax)


@pytest.mark.parametrize("nq,lq", [(9, 5), (5, 16), (7, 32), (33, 20)])
@pytest.mark.parametrize("qdtype", (torch.float32, torch.bfloat16))
@pytest.mark.parametrize("normalize", (True, False))
def test_stacked_queries_match_cpu(rng, nq, lq, qdtype, normalize):
    """The full scan stacks up to 128 rows of short queries in a CTA (each
    decoded tile serves them all), the last group partial: scores and argmax
    as the CPU's, per query."""
    nbits, d = 2, 128
    codes, res, cu, cent, w = _index(rng, nbits, d, 97, [70, 0, 1, 129, 64, 33])
    Q = torch.from_numpy(rng.standard_normal((nq, lq, d)).astype(np.float32)).to(qdtype)
    x = plaid.decompress(codes, res, cent, w, nbits, normalize=False)
    xmax = float(x.double().norm(dim=-1).max())
    _check(Q, codes, res, cu, cent, w, nbits, "colbert", normalize, True, xmax)
    args = (codes, res, cu, cent, w, nbits, "colbert", normalize, True, True)
    cpu_s, cpu_a = plaid._residual_forward(Q, *args)
    gpu_s, gpu_a = plaid._residual_forward(*_cuda(Q, codes, res, cu, cent, w), nbits, "colbert", normalize, True,
                                           True)
    xd = plaid.decompress(codes, res, cent, w, nbits, normalize=normalize).double()
    qd = Q.double()
    if normalize:
        qd = qd / qd.norm(dim=-1, keepdim=True)
    tol = 2.0**-7 * (torch.ones(nq, lq, dtype=torch.float64) if normalize else qd.norm(dim=-1) * xmax)
    assert gpu_s.shape == cpu_s.shape
    for j in range(len(cu) - 1):
        a = gpu_a[:, j].cpu().long()
        assert torch.equal(a == -1, cpu_a[:, j].long() == -1)
        if cu[j + 1] == cu[j]:
            continue
        sims = torch.einsum("isd,td->ist", qd, xd[cu[j]:cu[j + 1]])
        chosen = sims.gather(-1, a.clamp_min(0)[..., None])[..., 0]
        assert torch.all(a >= 0) and torch.all(chosen >= sims.max(-1).values - tol)


SCAN_LENGTHS = [300, 0, 1, 15, 16, 17, 63, 64, 65, 1000, 2, 129]


@pytest.mark.parametrize("nbits", (2, 4))
@pytest.mark.parametrize("layout", ("colbert", "lik"))
@pytest.mark.parametrize("qdtype", (torch.float16, torch.bfloat16))
@pytest.mark.parametrize("nq,lq", [(1, 1), (1, 32), (2, 7), (3, 32), (1, 40), (5, 64), (2, 100), (1, 129), (9, 20),
                                   (8, 9), (16, 32)])
def test_scan_matches_cpu(rng, nbits, layout, qdtype, nq, lq):
    """The full scan's register-decode kernel (d 128, nbits 2 / 4, a half
    query under normalize: residual_scan.cuh) against the CPU: every query
    block size (1, 2, 4, 8 m-tiles, queries stacked, a query past 128 rows;
    groups of 128 stacked rows on sm_90a: the warp-specialised wgmma
    kernel, one group at nbits 4 only),
    lengths around its 16-token tiles, int32 and int64 codes, padded
    documents with garbage past their lengths, a query row of NaN (never
    wins: its row scores 0)."""
    d = 128
    lens = [int(x) for x in rng.permutation(SCAN_LENGTHS)]
    codes, res, cu, cent, w = _index(rng, nbits, d, int(rng.integers(1, 3000)), lens)
    if rng.integers(2):
        codes = codes.long()
    Q = torch.from_numpy(rng.standard_normal((nq, lq, d)).astype(np.float32)).to(qdtype)
    Q[-1, lq // 2] = float("nan")
    _check(Q, codes, res, cu, cent, w, nbits, layout, True, True, 1.0)
    ld = max(lens) + 5
    pc = torch.from_numpy(rng.integers(-(1 << 30), 1 << 30, (len(lens), ld))).to(codes.dtype)  # never read
    pr = torch.from_numpy(rng.integers(0, 256, (len(lens), ld, res.shape[1])).astype(np.uint8))
    for j in range(len(lens)):
        pc[j, :lens[j]] = codes[cu[j]:cu[j + 1]]
        pr[j, :lens[j]] = res[cu[j]:cu[j + 1]]
    _check(Q[0] if nq == 1 else Q, pc, pr, cu[1:] - cu[:-1], cent, w, nbits, layout, True, False, 1.0)


@pytest.mark.parametrize("nbits", (2, 4))
@pytest.mark.parametrize("nq,lq,groups", [(1, 32, 0), (2, 32, 0), (4, 32, 1), (9, 12, 2), (6, 31, 2), (3, 50, 2),
                                          (12, 32, 3)])
def test_scan_streams_many_documents(rng, nbits, nq, lq, groups):
    """More documents than the scan has warps: each stream holds many, so
    document ends fall at every place of the warp-specialised kernel's ring
    (the streams' tiles alternating between its two decoder warpgroups),
    empty documents sit between full ones, and streams of unequal lengths
    end early; two and three groups of 128 rows (two blocks resident, the
    third pass with an empty second block).  The kernel the call runs is
    asserted from the profiler: on sm_90a, groups of 128 stacked rows take
    residual_scan_ws_kernel (one group: at nbits 4 only)."""
    from torch.profiler import ProfilerActivity, profile

    lens = [int(x) for x in rng.integers(0, 70, 3000)]
    lens[::7] = [0] * len(lens[::7])
    lens[5] = 900  # one long stream
    codes, res, cu, cent, w = _index(rng, nbits, 128, int(rng.integers(1, 5000)), lens)
    Q = torch.from_numpy(rng.standard_normal((nq, lq, 128)).astype(np.float32)).half()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        _check(Q, codes, res, cu, cent, w, nbits, "colbert", True, True, 1.0)
        torch.cuda.synchronize()
    names = [e.key for e in prof.key_averages()]
    ws = groups >= 2 or (groups == 1 and nbits == 4)
    kernel = "residual_scan_ws_kernel" if ws and torch.cuda.get_device_capability() == (9, 0) else "residual_scan_kernel"
    assert any(f"{kernel}<" in n for n in names), (kernel, names)


@pytest.mark.parametrize("nbits", (2, 4))
def test_scan_layouts_it_declines(rng, nbits):
    """Calls the scan kernel must leave to residual_maxsim_kernel (rows not
    aligned to a thread's load, fp32 centroids, a strided query is taken):
    the same scores as the CPU's."""
    codes, res, cu, cent, w = _index(rng, nbits, 128, 77, [40, 3, 0, 100])
    Q = torch.from_numpy(rng.standard_normal((3, 32, 128)).astype(np.float32)).half()
    wide = torch.zeros((res.shape[0], res.shape[1] + 1), dtype=torch.uint8)
    wide[:, :res.shape[1]] = res
    _check(Q, codes, wide[:, :res.shape[1]], cu, cent, w, nbits, "colbert", True, True, 1.0)
    _check(Q, codes, res, cu, cent.float(), w, nbits, "colbert", True, True, 1.0)
    _check(Q.transpose(1, 2).contiguous().transpose(1, 2), codes, res, cu, cent, w, nbits, "colbert", True, True,
           1.0)


def test_argmax_and_grad_match_cpu(rng):
    nbits, d = 2, 128
    codes, res, cu, cent, w = _index(rng, nbits, d, 64, [40, 0, 100, 3])
    Q = torch.from_numpy(rng.standard_normal((3, 32, d)).astype(np.float32))
    cpu_s, cpu_a = plaid._residual_forward(Q, codes, res, cu, cent, w, nbits, "colbert", True, True, True)
    gQ, gc, gr, gcu, gcent, gw = _cuda(Q, codes, res, cu, cent, w)
    gpu_s, gpu_a = plaid._residual_forward(gQ, gc, gr, gcu, gcent, gw, nbits, "colbert", True, True, True)
    x = plaid.decompress(codes, res, cent, w, nbits).double()
    qn = Q.double() / Q.double().norm(dim=-1, keepdim=True)
    for j in range(len(cu) - 1):
        a = gpu_a[:, j].cpu().long()
        if cu[j + 1] == cu[j]:
            assert torch.all(a == -1)
            continue
        sims = torch.einsum("isd,td->ist", qn, x[cu[j]:cu[j + 1]])
        chosen = sims.gather(-1, a.clamp_min(0)[..., None])[..., 0]
        assert torch.all(a >= 0) and torch.all(chosen >= sims.max(-1).values - 1e-5)
    Qc = Q.clone().requires_grad_(True)
    lik.maxsim_residual_varlen(Qc, codes, res, cu, cent, w, nbits).sum().backward()
    Qg = gQ.clone().requires_grad_(True)
    lik.maxsim_residual_varlen(Qg, gc, gr, gcu, gcent, gw, nbits).sum().backward()
    torch.testing.assert_close(Qg.grad.cpu(), Qc.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("normalize", (True, False))
@pytest.mark.parametrize("nbits", (2, 8))
def test_fp32_grad_matches_dense(rng, nbits, normalize):
    """An fp32 query's residual MaxSim and grad_Q on CUDA against lik.maxsim
    (fp32) of the decompressed tokens: the same argmax, so the same gradient
    (the half-operand kernel picked other tokens here: the seed's own
    test_residual_backward_grad_Q_matches_dense_autograd)."""
    codes, res, cu, cent, w = _cuda(*_index(rng, nbits, 128, 32, [24, 7, 19, 24]))
    Q = torch.randn(3, 32, 128, device="cuda") * 0.1
    x = plaid.decompress(codes, res, cent, w, nbits, normalize=normalize)
    lens = (cu[1:] - cu[:-1]).tolist()
    D = torch.nn.utils.rnn.pad_sequence(list(x.split(lens)), batch_first=True)
    mask = torch.arange(D.shape[1], device="cuda")[None, :] < torch.tensor(lens, device="cuda")[:, None]
    Qa = Q.clone().requires_grad_(True)
    sa = lik.maxsim_residual_varlen(Qa, codes, res, cu, cent, w, nbits, normalize=normalize)
    Qb = Q.clone().requires_grad_(True)
    qb = torch.nn.functional.normalize(Qb, dim=-1, eps=1e-12) if normalize else Qb
    sb = lik.maxsim(qb, D, d_mask=mask)
    torch.testing.assert_close(sa, sb, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(sa)
    sa.backward(g)
    sb.backward(g)
    torch.testing.assert_close(Qa.grad, Qb.grad, rtol=1e-4, atol=1e-5)


def test_fp32_follows_matmul_precision(rng):
    """torch "high" lets an fp32 query's tiles take one TF32 product (lik.h
    LIK_FP32_TF32): scores within TF32's error of the CPU's, and not those of
    "highest" (the option reaches the kernel)."""
    codes, res, cu, cent, w = _index(rng, 4, 96, 40, [70, 3, 33])
    Q = torch.from_numpy(rng.standard_normal((2, 20, 96)).astype(np.float32))
    cpu = lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, 4, normalize=False)
    args = _cuda(Q, codes, res, cu, cent, w)
    exact = lik.maxsim_residual_varlen(*args, 4, normalize=False)
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        tf32 = lik.maxsim_residual_varlen(*args, 4, normalize=False)
    finally:
        torch.set_float32_matmul_precision(old)
    x = plaid.decompress(codes, res, cent, w, 4, normalize=False)
    scale = Q.double().norm(dim=-1).sum(-1, keepdim=True) * float(x.double().norm(dim=-1).max())
    assert torch.all((exact.cpu().double() - cpu.double()).abs() <= 2.0**-16 * scale + 1e-6)
    assert torch.all((tf32.cpu().double() - cpu.double()).abs() <= 2.0**-9 * scale + 1e-6)
    assert not torch.equal(tf32, exact)


@pytest.mark.parametrize("nbits", (1, 2, 4, 8))
@pytest.mark.parametrize("layout", ("colbert", "lik"))
def test_decompress_matches_cpu(rng, nbits, layout):
    for d, cdt in ((128, np.float16), (24, np.float32), (1000 // nbits * nbits, np.float16)):
        if d * nbits % 8:
            continue
        codes, res, cu, cent, w = _index(rng, nbits, d, 50, [333], cent_dtype=cdt)
        for normalize in (True, False):
            cpu = plaid.decompress(codes, res, cent, w, nbits, layout=layout, normalize=normalize)
            gpu = plaid.decompress(*_cuda(codes, res, cent, w), nbits, layout=layout, normalize=normalize)
            torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-6, atol=1e-6)


def test_approx_matches_cpu(rng):
    C = 500
    lengths = [0, 1, 300, 17]
    codes = torch.from_numpy(rng.integers(0, C, sum(lengths)).astype(np.int64))
    cu = torch.from_numpy(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    cs = torch.from_numpy(rng.standard_normal((2, 33, C)).astype(np.float32))
    cpu = plaid.plaid_approx_score(cs, codes, cu)
    gpu = plaid.plaid_approx_score(*_cuda(cs, codes, cu))
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-6, atol=1e-6)


def test_device_checks(rng):
    codes, res, cu, cent, w = _cuda(*_index(rng, 2, 16, 5, [4, 2]))
    Q = torch.randn(3, 16, device="cuda")
    bad = codes.clone()
    bad[5] = 5
    with pytest.raises(ValueError, match="outside"):
        lik.maxsim_residual_varlen(Q, bad, res, cu, cent, w, 2)
    with pytest.raises(ValueError, match="cu_seqlens_d"):
        lik.maxsim_residual_varlen(Q, codes, res, torch.tensor([0, 5, 4, 6], device="cuda"), cent, w, 2)
    with pytest.raises(ValueError, match="is on"):
        lik.maxsim_residual_varlen(Q.cpu(), codes, res, cu, cent, w, 2)


@pytest.mark.skipif(not os.environ.get("LIK_GPU_BIG"), reason="set LIK_GPU_BIG=1 (~3 GB of GPU memory)")
def test_more_than_2_31_residual_bytes(rng):
    nbits, d, L = 2, 128, 300
    width = d * nbits // 8
    nd = (2**31 // width) // L + 200  # past 2^31 bytes
    T = nd * L
    g = torch.Generator(device="cuda")
    g.manual_seed(int(rng.integers(1 << 30)))
    res = torch.randint(0, 256, (T, width), dtype=torch.uint8, device="cuda", generator=g)
    codes = torch.randint(0, 1024, (T,), dtype=torch.int32, device="cuda", generator=g)
    cu = torch.arange(0, T + 1, L, dtype=torch.int64, device="cuda")
    cent = torch.nn.functional.normalize(torch.randn(1024, d, device="cuda", generator=g), dim=-1).half()
    w = torch.sort(torch.randn(4, device="cuda", generator=g) * 0.1).values
    Q = torch.randn(1, 32, d, device="cuda", generator=g)
    assert res.numel() > 2**31
    s = lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits)
    last = slice(T - 5 * L, T)  # the last five documents, past 2^31 bytes
    ref = lik.maxsim_residual_varlen(Q.cpu(), codes[last].cpu(), res[last].cpu(),
                                     torch.arange(0, 5 * L + 1, L), cent.cpu(), w.cpu(), nbits)
    torch.testing.assert_close(s[0, -5:].cpu(), ref[0], rtol=4e-3, atol=4e-3)
    x = plaid.decompress(codes[-3:], res[-3:], cent, w, nbits)
    torch.testing.assert_close(x.cpu(), plaid.decompress(codes[-3:].cpu(), res[-3:].cpu(), cent.cpu(), w.cpu(), nbits))
