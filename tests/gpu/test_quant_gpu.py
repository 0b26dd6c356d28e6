"""GPU suite of the low-bit MaxSim (lik.quant): the CUDA tensor-core kernels
against the CPU backend (itself tested against the float64 reference in
tests/python/test_quant.py) on the same inputs.  int8, int8 x bits and
bits x bits compute the same integers and fp32 operations on both, so they
must agree bitwise; fp8 sums in the tensor core's order (a tolerance).
Marked ``gpu``; skipped without torch + CUDA."""

from __future__ import annotations


import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

import lik  # noqa: E402


SHAPES = [(3, 5, 7, 33, 1), (2, 4, 33, 17, 3), (1, 4, 5, 33, 32), (2, 5, 9, 40, 64), (1, 6, 40, 300, 17), (2, 3, 32, 65, 48),
          (2, 9, 32, 300, 128), (1, 3, 5, 20, 200), (1, 2, 3, 9, 1000)]


def _case(rng, nq, nd, lq, ld, d):
    Q = rng.standard_normal((nq, lq, d)).astype(np.float32)
    D = rng.standard_normal((nd, ld, d)).astype(np.float32)
    qm = rng.random((nq, lq)) < 0.8
    dm = rng.random((nd, ld)) < 0.7
    return Q, D, qm, dm


def _signed(rng, s, special=False):
    """Scales s with random signs (a negative query scale negates the query's
    values in every kernel: the query scale leaves the max), and with
    special: about one in five query scales inf, -inf, NaN, +-0 or +-3e38."""
    flip = rng.choice(np.array([1.0, -1.0], np.float32), tuple(s.shape))
    s = s * (torch.from_numpy(flip) if torch.is_tensor(s) else flip)
    if special:
        pick = rng.random(s.shape) < 0.2
        s[pick] = rng.choice(np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 3e38, -3e38], np.float32), pick.sum())
    return s


def cuda(*xs):
    return [torch.from_numpy(np.ascontiguousarray(x)).cuda() if x is not None else None for x in xs]


@pytest.mark.parametrize("shape", SHAPES)
def test_int8_and_binary_bitwise_vs_cpu(rng, shape):
    Q, D, qm, dm = _case(rng, *shape)
    qi, sq = lik.quantize_int8(Q)
    di, sd = lik.quantize_int8(D)
    sq, sd = _signed(rng, sq, special=True), _signed(rng, sd)
    di[~dm] = rng.integers(-128, 128, di[~dm].shape)  # garbage in masked tokens
    sd[~dm] = np.nan
    bits, qb = lik.quantize_binary(D), lik.quantize_binary(Q)
    cpu = lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd, q_mask=qm, d_mask=dm)
    g = lik.maxsim_inference_int8(*cuda(qi, di), scale_Q=cuda(sq)[0], scale_D=cuda(sd)[0],
                                  q_mask=cuda(qm)[0], d_mask=cuda(dm)[0])
    np.testing.assert_array_equal(g.cpu().numpy(), cpu)
    # strided documents (every other one): the byte-wise load path
    gd = cuda(di)[0][::2]
    g2 = lik.maxsim_inference_int8(cuda(qi)[0], gd, scale_Q=cuda(sq)[0], scale_D=cuda(sd)[0][::2],
                                   q_mask=cuda(qm)[0], d_mask=cuda(dm)[0][::2])
    np.testing.assert_array_equal(g2.cpu().numpy(), cpu[:, ::2])
    cpu_b = lik.maxsim_inference_binary(qi, bits, scale_Q=sq, q_mask=qm, d_mask=dm)
    g_b = lik.maxsim_inference_binary(*cuda(qi, bits), scale_Q=cuda(sq)[0], q_mask=cuda(qm)[0],
                                      d_mask=cuda(dm)[0])
    np.testing.assert_array_equal(g_b.cpu().numpy(), cpu_b)
    cpu_bb = lik.maxsim_inference_binary(qb, bits, d=shape[-1], q_mask=qm, d_mask=dm)
    g_bb = lik.maxsim_inference_binary(*cuda(qb, bits), d=shape[-1], q_mask=cuda(qm)[0],
                                       d_mask=cuda(dm)[0])
    np.testing.assert_array_equal(g_bb.cpu().numpy(), cpu_bb)


# Several queries (src/cuda/quant.cu).  Where wgmma and TMA run, 64 < d <=
# 128 in 16-byte aligned rows: tile_ws_kernel, CTAs of 128 query rows (one
# m-tile a warpgroup) where Nq * Lq <= 128, else 256 (two; Lq up to 256),
# documents in 128-token tiles through 4 stages.  Elsewhere the shared-tile
# kernel, whose query groups hold ROWS // Lq whole queries (ROWS = 256 / 256
# / 128 / 64 query tokens for d <= 32 / 64 / 128 / 256) and whose documents
# stream in tiles of 64 tokens (32 for d > 128).  Groups split across
# queries, Lq at and past the rows of a group (past 256: the one-warp
# kernel), tails of every tile, d with and without whole 16-byte chunks
# (zero-filled past d), CTAs that walk several documents of several tiles
# (the stages' phases wrap: 700 and 1000 documents of 300 and 200 tokens),
# per-tensor scales, strided views, rows padded to 16 bytes (d = 100 of 112).
TILE_SHAPES = [(5, 7, 32, 65, 128), (17, 3, 20, 300, 128), (3, 4, 128, 70, 128), (2, 3, 129, 40, 128),
               (9, 5, 64, 33, 256), (4, 6, 7, 129, 160), (6, 5, 3, 64, 200), (33, 4, 8, 1, 32),
               (40, 3, 13, 200, 64), (3, 2, 256, 17, 17), (2, 3, 65, 31, 256), (6, 4, 16, 70, 96),
               (3, 5, 30, 65, 100), (5, 3000, 32, 20, 128), (40, 2500, 8, 9, 32),
               (9, 700, 16, 300, 128), (4, 1000, 32, 200, 96), (2, 3, 257, 20, 128), (70, 5, 32, 40, 128)]
# One query (Nq * Lq <= 32 stacked rows) where wgmma and TMA run, 64 < d <=
# 128 in 16-byte aligned rows: doc_ws_kernel, the documents as wgmma's M
# rows in 64-token m-tiles of 128-token TMA tiles through 8 stages.  Lq 1,
# 7, 32 and several queries of 32 rows (2 x 16, 4 x 8); Ld 1, 63, 64, 65
# (a tile's second m-tile with one token), 128, 129, 300 (the last tile's
# second m-tile skipped), 1030; CTAs walking several documents (300 and
# 2000 documents: the stages' phases wrap); d 96 and 128 (d = 100: rows
# padded to 112 bytes, below; unpadded, the one-warp kernel).
DOC_SHAPES = [(1, 5, 32, 300, 128), (1, 3, 7, 63, 128), (1, 4, 1, 64, 96), (1, 6, 32, 65, 128),
              (2, 4, 16, 128, 128), (4, 3, 8, 129, 96), (1, 300, 32, 300, 128), (1, 2000, 32, 20, 128),
              (1, 3, 30, 1030, 100), (1, 7, 32, 1, 128)]


@pytest.mark.parametrize("shape", TILE_SHAPES + DOC_SHAPES)
def test_int8_tensor_core_kernels_bitwise_vs_cpu(rng, shape):
    Q, D, qm, dm = _case(rng, *shape)
    qi, sq = lik.quantize_int8(Q)
    di, sd = lik.quantize_int8(D)
    qi[0, 0, 0] = -128  # read as -127 on both
    sq, sd = _signed(rng, sq, special=True), _signed(rng, sd)
    di[~dm] = rng.integers(-128, 128, di[~dm].shape)
    sd[~dm] = np.nan
    sq[-1, 0] = np.nan  # a query token whose every value is NaN: never wins
    bits = lik.quantize_binary(D)
    for kw_cpu, kw_gpu in [
        (dict(scale_Q=sq, scale_D=sd, q_mask=qm, d_mask=dm),
         dict(scale_Q=cuda(sq)[0], scale_D=cuda(sd)[0], q_mask=cuda(qm)[0], d_mask=cuda(dm)[0])),
        (dict(scale_Q=0.5, scale_D=0.25, d_mask=dm),
         dict(scale_Q=torch.tensor(0.5, device="cuda"), scale_D=torch.tensor(0.25, device="cuda"),
              d_mask=cuda(dm)[0])),
    ]:
        cpu = lik.maxsim_inference_int8(qi, di, **kw_cpu)
        g = lik.maxsim_inference_int8(*cuda(qi, di), **kw_gpu)
        np.testing.assert_array_equal(g.cpu().numpy(), cpu)
    # strided queries and documents (every other one)
    qs, ds = cuda(qi)[0][::2], cuda(di)[0][::2]
    g2 = lik.maxsim_inference_int8(qs, ds, scale_Q=cuda(sq)[0][::2], scale_D=cuda(sd)[0][::2],
                                   q_mask=cuda(qm)[0][::2], d_mask=cuda(dm)[0][::2])
    cpu2 = lik.maxsim_inference_int8(qi[::2], di[::2], scale_Q=sq[::2], scale_D=sd[::2], q_mask=qm[::2],
                                     d_mask=dm[::2])
    np.testing.assert_array_equal(g2.cpu().numpy(), cpu2)
    # token rows padded to a multiple of 16 bytes (d = 100: rows of 112)
    d = shape[-1]
    wide = torch.zeros(*di.shape[:-1], (d + 15) // 16 * 16, dtype=torch.int8, device="cuda")
    wide[..., :d] = cuda(di)[0]
    g3 = lik.maxsim_inference_int8(cuda(qi)[0], wide[..., :d], scale_Q=cuda(sq)[0], scale_D=cuda(sd)[0],
                                   q_mask=cuda(qm)[0], d_mask=cuda(dm)[0])
    cpu3 = lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd, q_mask=qm, d_mask=dm)
    np.testing.assert_array_equal(g3.cpu().numpy(), cpu3)
    cpu_b = lik.maxsim_inference_binary(qi, bits, d=shape[-1], scale_Q=sq, q_mask=qm, d_mask=dm)
    g_b = lik.maxsim_inference_binary(*cuda(qi, bits), d=shape[-1], scale_Q=cuda(sq)[0], q_mask=cuda(qm)[0],
                                      d_mask=cuda(dm)[0])
    np.testing.assert_array_equal(g_b.cpu().numpy(), cpu_b)


# Sign-bit documents where wgmma runs (sm_90a), 64 < d <= 128, Lq <= 128
# (src/cuda/quant.cu), for int8 and sign-bit queries: up to 32 query rows
# (one ColBERT query, 7 queries of Lq = 1, 4 of 8) on signs_doc_kernel
# (documents as the M rows), more on signs_tile_kernel with one m-tile of 64
# rows or two of 128 (groups split across queries, Lq 65 .. 128); documents
# as one stream of 64-token tiles (tails, Ld <= 64: a document per tile;
# blocks that walk several documents: Nd = 2000, 3000); 16-byte bit rows
# (4- / 8-byte loads) and others (byte loads: d < 121, a strided last
# dimension); d outside (64, 128] and Lq > 128 on the one-warp kernels (bits
# x bits: the popcount kernel).  The production shapes (a persistent block
# walks several documents of several tiles): (16, 1500, 32, 300, 128) on
# signs_tile_kernel (two m-tiles, 4 queries a block, 5 tiles a document),
# (3, 3000, 20, 130, 100) on it with one m-tile and byte loads (3 tiles),
# (1, 4000, 32, 130, 128) on signs_doc_kernel (3 tiles), (2, 3000, 32, 128,
# 128) with one m-tile, 8-byte words and full tiles.  Without a d_mask the
# 16-byte rows go through the kernels' cp.async ring.  Document 0 fully
# masked, 1 valid only in its last tile, 2 only in tile 0.  Scales of every
# sign, -0, +-inf, NaN (the rows' integer max with negated rows), garbage in
# masked tokens.  Each case also with cuda_off=["wgmma"] (the one-warp
# mma_kernel / popcount bits_kernel on sm_90a too).  Bitwise equal to the
# CPU on any device.
SIGN_SHAPES = [(1, 7, 32, 300, 128), (1, 9, 20, 70, 100), (4, 30, 8, 64, 72), (3, 2000, 5, 100, 128),
               (1, 5, 64, 65, 128), (2, 9, 32, 300, 128), (3, 4, 20, 64, 100),
               (1, 3000, 32, 20, 128), (16, 40, 32, 300, 128), (5, 3000, 13, 9, 72), (4, 6, 65, 70, 128),
               (2, 3, 128, 33, 97), (7, 50, 1, 130, 121), (1, 3, 129, 40, 128), (3, 5, 30, 65, 64),
               (2, 4, 7, 17, 1), (2, 3, 5, 20, 3), (1, 4, 9, 31, 17), (2, 3, 11, 40, 48), (2, 4, 32, 33, 96),
               (1, 2, 3, 9, 1000), (2, 5, 6, 129, 160),
               (16, 1500, 32, 300, 128), (3, 3000, 20, 130, 100), (1, 4000, 32, 130, 128),
               (2, 3000, 32, 128, 128)]


def _bitwise(g, cpu):
    np.testing.assert_array_equal(g.cpu().numpy().view(np.int32), np.asarray(cpu).view(np.int32))


def _strided_last(x, step=2):
    """x on the GPU as a view whose last dimension has stride `step` (elements)."""
    wide = np.zeros(x.shape[:-1] + (x.shape[-1] * step,), x.dtype)
    wide[..., ::step] = x
    return cuda(wide)[0][..., ::step]


@pytest.mark.parametrize("off", [(), ("wgmma",)], ids=["default", "no-wgmma"])
@pytest.mark.parametrize("shape", SIGN_SHAPES)
def test_sign_bit_documents_bitwise_vs_cpu(rng, shape, off):
    nq, nd, lq, ld, d = shape
    Q, D, qm, dm = _case(rng, *shape)
    # whole 64-token tiles masked: document 0 everywhere, 1 but in its last
    # tile, 2 but in tile 0 (a document's -inf rows, a max found only late / early)
    last = (ld - 1) // 64 * 64
    dm[0] = False
    if nd > 1:
        dm[1, :last] = False
        dm[1, last] = True
    if nd > 2:
        dm[2, 64:] = False
        dm[2, 0] = True
    qi, sq = lik.quantize_int8(Q)
    qi[0, 0, 0] = -128  # read as -127 on both
    sq *= rng.choice(np.array([1.0, -1.0], np.float32), sq.shape)
    special = rng.random(sq.shape) < 0.2
    sq[special] = rng.choice(np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 3e38, -3e38], np.float32),
                             special.sum())
    bits, qb = lik.quantize_binary(D), lik.quantize_binary(Q)
    bits[~dm] = rng.integers(0, 256, bits[~dm].shape)  # garbage in masked tokens
    nb = bits.shape[-1]
    wide = np.zeros((nd, ld, nb + 3), np.uint8)  # rows of nb + 3 bytes: the byte-load path
    wide[..., :nb] = bits
    gq, gqb, gbits, gsq, gqm, gdm = cuda(qi, qb, bits, sq, qm, dm)
    gwide = cuda(wide)[0][..., :nb]
    # last dimensions of stride 2: feature bytes of the documents, query values / bytes
    gbits_s, gq_s, gqb_s = _strided_last(bits), _strided_last(qi), _strided_last(qb)
    assert gbits_s.stride(-1) == 2 and gq_s.stride(-1) == 2 and gqb_s.stride(-1) == 2
    with np.errstate(invalid="ignore", over="ignore"):
        cpu = lik.maxsim_inference_binary(qi, bits, scale_Q=sq, q_mask=qm, d_mask=dm)
        cpu2 = lik.maxsim_inference_binary(qi[::2], bits[::2], scale_Q=-0.5)
        cpu_nodm = lik.maxsim_inference_binary(qi, bits, scale_Q=sq, q_mask=qm)  # the shared-ring path
        cpu_bb_nodm = lik.maxsim_inference_binary(qb, bits, d=d, q_mask=qm)
        cpu_bb = lik.maxsim_inference_binary(qb, bits, d=d, q_mask=qm, d_mask=dm)
        cpu_bb2 = lik.maxsim_inference_binary(qb[::2], bits[::2], d=d)
        with lik.Context(cuda_off=off):
            for gd in (gbits, gwide, gbits_s):
                _bitwise(lik.maxsim_inference_binary(gq, gd, d=d, scale_Q=gsq, q_mask=gqm, d_mask=gdm), cpu)
                _bitwise(lik.maxsim_inference_binary(gqb, gd, d=d, q_mask=gqm, d_mask=gdm), cpu_bb)
            _bitwise(lik.maxsim_inference_binary(gq_s, gbits, d=d, scale_Q=gsq, q_mask=gqm, d_mask=gdm), cpu)
            _bitwise(lik.maxsim_inference_binary(gqb_s, gbits_s, d=d, q_mask=gqm, d_mask=gdm), cpu_bb)
            # no d_mask, rows of 4- / 8-byte words: the kernels' cp.async ring (every token counts)
            _bitwise(lik.maxsim_inference_binary(gq, gbits, d=d, scale_Q=gsq, q_mask=gqm), cpu_nodm)
            _bitwise(lik.maxsim_inference_binary(gqb, gbits, d=d, q_mask=gqm), cpu_bb_nodm)
            # strided queries and documents (every other one), a negative per-tensor scale, no masks
            _bitwise(lik.maxsim_inference_binary(gq[::2], gbits[::2], d=d,
                                                 scale_Q=torch.tensor(-0.5, device="cuda")), cpu2)
            _bitwise(lik.maxsim_inference_binary(gqb[::2], gbits[::2], d=d), cpu_bb2)
            # empty batches
            assert lik.maxsim_inference_binary(gq[:0], gbits, d=d, scale_Q=gsq[:0]).shape == (0, nd)
            assert lik.maxsim_inference_binary(gq, gbits[:0], d=d, scale_Q=gsq).shape == (nq, 0)
            assert lik.maxsim_inference_binary(gqb, gbits[:0], d=d).shape == (nq, 0)


def _fp8_rtol(nq, lq, d):
    """fp8's tolerance relative to sum_s max_t sum_k |q_k d_k| s_q s_d: fp32
    rounding (1e-5) on mma.sync; on sm_90 several queries (Lq <= 256) and
    one query (Nq * Lq <= 32) of 64 < d <= 128 run on wgmma, whose fp8
    accumulation keeps fewer bits than fp32 (it truncates partial sums:
    measured up to 1.3e-4 of that sum, always low; lik_experimental.h), so
    2^-10 there."""
    wgmma = torch.cuda.get_device_capability() == (9, 0) and (nq >= 2 and lq <= 256 or nq * lq <= 32) \
        and 64 < d <= 128 and d % 16 == 0
    return 2.0 ** -10 if wgmma else 1e-5


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("shape", SHAPES)
def test_fp8_vs_cpu(rng, dtype, shape):
    Q, D, qm, dm = (torch.from_numpy(x) for x in _case(rng, *shape))
    fmax = torch.finfo(dtype).max
    sq, sd = _signed(rng, Q.abs().amax(-1) / fmax), _signed(rng, D.abs().amax(-1) / fmax)
    q8, d8 = (Q / sq[..., None]).to(dtype), (D / sd[..., None]).to(dtype)
    cpu = lik.maxsim_inference_fp8(q8, d8, scale_Q=sq, scale_D=sd, q_mask=qm, d_mask=dm)
    g = lik.maxsim_inference_fp8(q8.cuda(), d8.cuda(), scale_Q=sq.cuda(), scale_D=sd.cuda(),
                                 q_mask=qm.cuda(), d_mask=dm.cuda())
    # |error| <= fp32 rounding of the sums: relative to sum_s max_t sum_k |q_k d_k| s s
    absq = (q8.double().abs() * sq.double().abs()[..., None])
    absd = (d8.double().abs() * sd.double().abs()[..., None])
    scale = torch.einsum("isk,jtk->ijst", absq, absd).amax(-1).sum(-1)
    rtol = _fp8_rtol(shape[0], shape[2], shape[4])
    assert ((g.cpu().double() - cpu.double()).abs() <= rtol * scale + 1e-30).all()


FP8_TILE_SHAPES = [(5, 7, 32, 65, 128), (17, 3, 20, 300, 128), (3, 4, 128, 70, 128), (6, 4, 16, 70, 96),
                   (5, 3000, 32, 20, 128), (3, 5, 30, 65, 112), (9, 700, 16, 300, 128), (4, 1000, 32, 200, 96),
                   (2, 3, 200, 40, 128)]


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("shape", FP8_TILE_SHAPES + DOC_SHAPES)
def test_fp8_tensor_core_kernels_vs_cpu(rng, dtype, shape):
    """fp8, 64 < d <= 128 in 16-byte rows: several queries on tile_ws_kernel
    (sm_90a: one and two m-tiles a warpgroup, CTAs walking documents of
    several tiles, Lq past 128), one query on doc_ws_kernel, NaN in masked
    tokens and scales; and the one-warp kernel on other devices."""
    Q, D, qm, dm = (torch.from_numpy(x) for x in _case(rng, *shape))
    fmax = torch.finfo(dtype).max
    sq, sd = _signed(rng, Q.abs().amax(-1) / fmax), _signed(rng, D.abs().amax(-1) / fmax)
    q8, d8 = (Q / sq[..., None]).to(dtype), (D / sd[..., None]).to(dtype)
    d8.view(torch.uint8)[~dm] = 0x7F  # NaN (both formats) in masked tokens
    sd = sd.masked_fill(~dm, float("nan"))
    cpu = lik.maxsim_inference_fp8(q8, d8, scale_Q=sq, scale_D=sd, q_mask=qm, d_mask=dm)
    g = lik.maxsim_inference_fp8(q8.cuda(), d8.cuda(), scale_Q=sq.cuda(), scale_D=sd.cuda(),
                                 q_mask=qm.cuda(), d_mask=dm.cuda())
    absq = (q8.double().abs() * sq.double().abs()[..., None])
    absd = (d8.double().nan_to_num(0.0).abs() * sd.double().nan_to_num(0.0).abs()[..., None])
    scale = torch.einsum("isk,jtk->ijst", absq, absd).amax(-1).sum(-1)
    rtol = _fp8_rtol(shape[0], shape[2], shape[4])
    assert ((g.cpu().double() - cpu.double()).abs() <= rtol * scale + 1e-30).all()


def test_empty_and_errors(rng):
    qi = torch.zeros((2, 3, 16), dtype=torch.int8, device="cuda")
    sq = torch.ones((2, 3), device="cuda")
    assert lik.maxsim_inference_int8(qi[:0], qi, scale_Q=sq[:0], scale_D=sq).shape == (0, 2)
    with pytest.raises(ValueError, match="scale_D is on cpu"):
        lik.maxsim_inference_int8(qi, qi, scale_Q=sq, scale_D=sq.cpu())
    x = torch.zeros((0, 3, 4), device="cuda")  # no tokens
    assert lik.quantize_int8(x)[0].shape == (0, 3, 4) and lik.quantize_binary(x).shape == (0, 3, 1)
    with pytest.raises(ValueError, match="X_int8 is on cpu"):  # an output on another device
        lik._lib.call_quantize_int8(torch.zeros((3, 4), device="cuda"), torch.empty((3, 4), dtype=torch.int8),
                                    torch.empty(3, device="cuda"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("shape", [(5, 1), (3, 7, 3), (17,), (2, 3, 4, 48), (40, 96), (6, 1000)])
def test_quantize_cuda_bitwise_vs_cpu(rng, dtype, shape):
    """The CUDA quantisers against the CPU's on the same inputs, bitwise:
    int8 values and scales (normalize off and on), sign bits; every float
    dtype, d = 1 .. 1000, 1 to 4 dims, strided views (every other feature,
    transposed leading dims), an all-zero token, -0 and ties at .5 of a
    step; tokens holding NaN / +-inf: their bits compared, their int8 values
    and scales unspecified (lik_experimental.h) but computed without error."""
    X = torch.from_numpy(rng.standard_normal(shape).astype(np.float32) * 3).to(dtype)
    flat = X.view(-1, shape[-1])
    flat[0] = 0.0  # an all-zero token: scale 0, values 0
    if shape[-1] >= 3:
        flat[-1, :3] = torch.tensor([-0.0, 127.0, 63.5], dtype=dtype)  # -0; x / scale = 63.5: half to even
    bad = torch.zeros(flat.shape[0], dtype=torch.bool)  # the tokens holding NaN / inf
    if flat.shape[0] >= 4:
        flat[1, 0], flat[2, -1], flat[3, 0] = float("nan"), float("inf"), -float("inf")
        bad[1:4] = True
    ok = ~bad.view(shape[:-1])
    wide = torch.zeros(*shape[:-1], 2 * shape[-1], dtype=dtype)
    wide[..., ::2] = X
    wide_g = wide.cuda()  # the strided views are made on each device
    views = [(X, X.cuda(), ok), (wide[..., ::2], wide_g[..., ::2], ok)]
    if X.ndim >= 3:
        views.append((wide[..., ::2].transpose(0, 1), wide_g[..., ::2].transpose(0, 1), ok.transpose(0, 1)))
    for v, vg, okv in views:
        for normalize in (False, True):
            q, s = lik.quantize_int8(v, normalize=normalize)
            qg, sg = lik.quantize_int8(vg, normalize=normalize)
            np.testing.assert_array_equal(qg.cpu()[okv].numpy(), q[okv].numpy())
            np.testing.assert_array_equal(sg.cpu()[okv].numpy(), s[okv].numpy())
        np.testing.assert_array_equal(lik.quantize_binary(vg).cpu().numpy(), lik.quantize_binary(v).numpy())


def test_retrieve_binary_cuda_matches_cpu(rng):
    Q, D, qm, dm = _case(rng, 3, 200, 8, 30, 64)
    bits = lik.quantize_binary(D)
    s, i = lik.retrieve_binary(Q, D, bits, 5, candidates=4, q_mask=qm, d_mask=dm)
    sg, ig = lik.retrieve_binary(*cuda(Q, D, bits), 5, candidates=4, q_mask=cuda(qm)[0], d_mask=cuda(dm)[0])
    np.testing.assert_array_equal(ig.cpu().numpy(), i)
    np.testing.assert_allclose(sg.cpu().numpy(), s, rtol=2e-6)
