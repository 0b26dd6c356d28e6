"""Low-bit MaxSim (lik.quant) against the float64 reference of the quantised
semantics: sim = scale_Q * scale_D * <q, d> with q, d the stored values
(int8, fp8, or +-1 for sign bits), i.e. tests/python/_reference.py's
maxsim_ref on the dequantised tensors; and bitwise against the fp32
operations lik_experimental.h specifies (test_scaled_fp32_operations)."""

import numpy as np
import pytest
import torch

import lik
from _reference import assert_scores, maxsim_ref

DIMS = [1, 3, 17, 48, 96, 1000]


def _rng(request):
    """A fresh seed per run, printed so that a failure can be replayed."""
    seed = np.random.SeedSequence().entropy % 2**32
    print(f"{request.node.name}: seed {seed}")
    return np.random.default_rng(seed)


def _signs(bits, d):
    """+-1 float64 of packed sign bits (MSB first)."""
    b = np.unpackbits(np.asarray(bits), axis=-1)[..., :d]
    return np.where(b == 1, 1.0, -1.0)


def _spoil(x, mask, value):
    """x with value written into the masked-out tokens (garbage never read)."""
    x = np.array(x, copy=True)
    x[~mask] = value
    return x


@pytest.mark.parametrize("d", DIMS)
def test_quantize_int8_matches_formula(request, d):
    rng = _rng(request)
    X = (rng.standard_normal((3, 5, 2 * d)) * 3).astype(np.float32)[:, ::2, ::2]  # strided view
    X[0, 0] = 0.0  # all-zero token: scale 0, q 0
    q, s = lik.quantize_int8(X)
    amax = np.abs(X).max(-1)
    want_s = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        want_q = np.clip(np.rint(X / want_s[..., None]), -127, 127)
    want_q[want_s == 0] = 0
    assert q.dtype == np.int8 and s.dtype == np.float32
    np.testing.assert_array_equal(q, want_q.astype(np.int8))
    np.testing.assert_array_equal(s, want_s)
    qn, sn = lik.quantize_int8(X, normalize=True)
    np.testing.assert_array_equal(qn, q)
    norm = np.sqrt((X.astype(np.float32) ** 2).sum(-1, dtype=np.float32))
    np.testing.assert_allclose(sn, want_s / np.maximum(norm, 1e-12), rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_quantize_int8_dtypes(request, dtype):
    rng = _rng(request)
    X = torch.from_numpy(rng.standard_normal((4, 33))).to(dtype)
    q, s = lik.quantize_int8(X)
    X32 = X.float().numpy()
    want_s = np.abs(X32).max(-1) / np.float32(127)
    np.testing.assert_array_equal(s.numpy(), want_s)
    np.testing.assert_array_equal(q.numpy(), np.clip(np.rint(X32 / want_s[:, None]), -127, 127))


@pytest.mark.parametrize("d", DIMS)
def test_quantize_binary_is_packbits(request, d):
    rng = _rng(request)
    X = rng.standard_normal((2, 3, d)).astype(np.float32)
    X[0, 0, 0] = 0.0  # 0 is not > 0
    bits = lik.quantize_binary(X.transpose(1, 0, 2))  # strided
    np.testing.assert_array_equal(bits, np.packbits(X.transpose(1, 0, 2) > 0, axis=-1))


def _case(rng, nq, nd, lq, ld, d):
    Q = rng.standard_normal((nq, lq, d)).astype(np.float32)
    D = rng.standard_normal((nd, ld, d)).astype(np.float32)
    qm = rng.random((nq, lq)) < 0.8
    dm = rng.random((nd, ld)) < 0.7
    return Q, D, qm, dm


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("per_token", [True, False])
def test_int8_vs_reference(request, d, per_token):
    rng = _rng(request)
    for nq, nd, lq, ld in [(3, 5, 7, 33), (1, 2, 1, 1), (2, 3, 4, 65)]:
        Q, D, qm, dm = _case(rng, nq, nd, lq, ld, d)
        qi, sq = lik.quantize_int8(Q)
        di, sd = lik.quantize_int8(D)
        if not per_token:
            sq, sd = np.float32(0.013), np.float32(0.021)
            sq_b, sd_b = np.full(qm.shape, sq), np.full(dm.shape, sd)
        else:
            sq_b, sd_b = sq, sd
            sq, sd = _spoil(sq, qm, np.nan), _spoil(sd, dm, np.nan)  # garbage scales
        qi = _spoil(qi, qm, -128)
        di = _spoil(di, dm, 127)
        got = lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd, q_mask=qm, d_mask=dm)
        ref, scale = maxsim_ref(np.clip(qi, -127, 127) * sq_b[..., None].astype(np.float64),
                                di * sd_b[..., None].astype(np.float64), qm, dm)
        assert_scores(got, ref, scale, what=f"int8 d={d} {nq}x{nd}x{lq}x{ld}")


def test_int8_layouts_and_empty(request):
    rng = _rng(request)
    Q, D, qm, dm = _case(rng, 2, 3, 5, 9, 17)
    qi, sq = lik.quantize_int8(Q)
    di, sd = lik.quantize_int8(D)
    full = lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd)
    one = lik.maxsim_inference_int8(qi[1], di[2], scale_Q=sq[1], scale_D=sd[2])
    assert one.shape == () and one == full[1, 2]
    # strided views: every other document, transposed-then-back query tokens
    s = lik.maxsim_inference_int8(qi, di[::2], scale_Q=sq, scale_D=sd[::2])
    np.testing.assert_array_equal(s, full[:, ::2])
    t = lik.maxsim_inference_int8(torch.from_numpy(qi), torch.from_numpy(di), scale_Q=torch.from_numpy(sq),
                                  scale_D=torch.from_numpy(sd))
    np.testing.assert_array_equal(t.numpy(), full)
    assert lik.maxsim_inference_int8(qi[:0], di, scale_Q=sq[:0], scale_D=sd).shape == (0, 3)
    assert lik.maxsim_inference_int8(qi, di[:0], scale_Q=sq, scale_D=sd[:0]).shape == (2, 0)
    z = lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd, d_mask=np.zeros((3, 9), bool))
    np.testing.assert_array_equal(z, 0)


def test_int8_large_d_int64_path(request):
    rng = _rng(request)
    d = 70001  # past the int32 tiles: exact int64 sums
    qi = rng.integers(-127, 128, (1, 2, d), dtype=np.int8)
    di = rng.integers(-127, 128, (2, 3, d), dtype=np.int8)
    got = lik.maxsim_inference_int8(qi, di, scale_Q=1.0, scale_D=1.0)
    sims = np.einsum("isk,jtk->ijst", qi.astype(np.int64), di.astype(np.int64))
    np.testing.assert_array_equal(got, sims.max(-1).astype(np.float32).sum(-1, dtype=np.float32))


def test_isas_and_threads_bitwise(request):
    rng = _rng(request)
    Q, D, qm, dm = _case(rng, 3, 40, 9, 70, 96)
    qi, sq = lik.quantize_int8(Q)
    di, sd = lik.quantize_int8(D)
    bits = lik.quantize_binary(D)
    outs = []
    for isa in ("portable", "avx2", "avx512"):
        for nt in (1, 3):
            with lik.Context(cpu_isa=isa, num_threads=nt):
                outs.append((lik.maxsim_inference_int8(qi, di, scale_Q=sq, scale_D=sd, q_mask=qm, d_mask=dm),
                             lik.maxsim_inference_binary(qi, bits, scale_Q=sq, q_mask=qm, d_mask=dm)))
    for a, b in outs[1:]:
        np.testing.assert_array_equal(a, outs[0][0])
        np.testing.assert_array_equal(b, outs[0][1])


@pytest.mark.parametrize("d", DIMS)
def test_binary_vs_reference(request, d):
    rng = _rng(request)
    Q, D, qm, dm = _case(rng, 3, 4, 6, 35, d)
    qi, sq = lik.quantize_int8(Q)
    bits = lik.quantize_binary(D)
    bits = _spoil(bits, dm, 0xAA)
    got = lik.maxsim_inference_binary(qi, bits, scale_Q=_spoil(sq, qm, np.inf), q_mask=qm, d_mask=dm)
    ref, scale = maxsim_ref(qi * sq[..., None].astype(np.float64), _signs(bits, d), qm, dm)
    assert_scores(got, ref, scale, what=f"int8 x bits d={d}")
    qb = lik.quantize_binary(Q)
    if d % 8:
        qb[..., -1] |= np.uint8(0xFF >> (d % 8))  # bits past d are ignored
    got = lik.maxsim_inference_binary(qb, bits, d=d, q_mask=qm, d_mask=dm)
    ref, _ = maxsim_ref(_signs(qb, d), _signs(bits, d), qm, dm)
    np.testing.assert_array_equal(got, ref.astype(np.float32))


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("d", [1, 17, 96])
def test_fp8_vs_reference(request, dtype, d):
    rng = _rng(request)
    Q, D, qm, dm = (torch.from_numpy(x) for x in _case(rng, 2, 3, 5, 37, d))
    fmax = torch.finfo(dtype).max
    sq = Q.abs().amax(-1) / fmax
    sd = D.abs().amax(-1) / fmax
    q8 = (Q / sq[..., None]).to(dtype)
    d8 = (D / sd[..., None]).to(dtype)
    for sQ, sD in ((sq, sd), (torch.tensor(0.5), torch.tensor(0.25))):
        got = lik.maxsim_inference_fp8(q8, d8, scale_Q=sQ, scale_D=sD, q_mask=qm, d_mask=dm)
        bq = sQ.double().expand(qm.shape)[..., None]
        bd = sD.double().expand(dm.shape)[..., None]
        ref, scale = maxsim_ref(q8.double() * bq, d8.double() * bd, qm, dm)
        assert_scores(got, ref, scale, what=f"fp8 {dtype} d={d}")


def _fp32_scores(qv, sq, dv, sd, qm, dm):
    """lik_experimental.h's fp32 operations, one at a time in numpy float32:
    dot (exact, or the fp32 sum in ascending k), y = dot * scale_D, the max
    of y over valid document tokens (NaN never wins), r = |scale_Q| * max
    with the query's values negated for a negative scale_Q, and the sum of
    the r > -inf over valid query tokens in ascending order."""
    f = np.float32
    out = np.zeros((qv.shape[0], dv.shape[0]), f)
    for i in range(qv.shape[0]):
        for j in range(dv.shape[0]):
            total = f(0)
            for s in np.flatnonzero(qm[i]):
                q = -qv[i, s] if np.signbit(sq[i, s]) else qv[i, s]
                m = f(-np.inf)
                for t in np.flatnonzero(dm[j]):
                    dot = f(0)
                    for k in range(q.shape[0]):
                        dot = f(dot + f(q[k] * dv[j, t, k]))
                    y = f(dot * sd[j, t])
                    m = y if y > m else m
                r = f(abs(sq[i, s]) * m)
                total = f(total + r) if r > -np.inf else total
            out[i, j] = total
    return out


@pytest.mark.parametrize("kind", ["int8", "e4m3", "e5m2"])
def test_scaled_fp32_operations(request, kind):
    """Bitwise: scales of both signs, and query scales 0, -0, +-inf, NaN,
    +-3e38 (the query scale leaves the max: a NaN or -inf product is not
    summed)."""
    rng = _rng(request)
    nq, nd, lq, ld, d = 2, 3, 9, 11, 17
    Q, D, qm, dm = _case(rng, nq, nd, lq, ld, d)
    sign = lambda shape: rng.choice(np.array([1.0, -1.0], np.float32), shape)  # noqa: E731
    if kind == "int8":
        q, sq = lik.quantize_int8(Q)
        dq, sd = lik.quantize_int8(D)
        qv, dv = q.astype(np.float32), dq.astype(np.float32)
    else:
        dtype = torch.float8_e4m3fn if kind == "e4m3" else torch.float8_e5m2
        fmax = torch.finfo(dtype).max
        sq, sd = ((np.abs(X).max(-1) / fmax).astype(np.float32) for X in (Q, D))
        q = torch.from_numpy(Q / sq[..., None]).to(dtype)
        dq = torch.from_numpy(D / sd[..., None]).to(dtype)
        qv, dv = q.float().numpy(), dq.float().numpy()
    sq, sd = sq * sign(sq.shape), sd * sign(sd.shape)
    special = rng.random(sq.shape) < 0.3
    sq[special] = rng.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 3e38, -3e38], np.float32), special.sum())
    fn = lik.maxsim_inference_int8 if kind == "int8" else lik.maxsim_inference_fp8
    conv = (lambda x: x) if kind == "int8" else torch.from_numpy
    got = fn(q, dq, scale_Q=conv(sq), scale_D=conv(sd), q_mask=conv(qm), d_mask=conv(dm))
    with np.errstate(invalid="ignore", over="ignore"):
        want = _fp32_scores(qv, sq, dv, sd, qm, dm)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_retrieve_binary(request):
    rng = _rng(request)
    Q, D, qm, dm = _case(rng, 3, 50, 8, 20, 48)
    bits = lik.quantize_binary(D)
    s_all, i_all = lik.retrieve_binary(Q, D, bits, 5, candidates=10, q_mask=qm, d_mask=dm)
    s_ex, i_ex = lik.retrieve(Q, D, 5, qm, dm)
    np.testing.assert_array_equal(i_all, i_ex)  # candidates cover the corpus
    np.testing.assert_allclose(s_all, s_ex, rtol=1e-6)
    s, i = lik.retrieve_binary(Q, D, bits, 3, candidates=2, q_mask=qm, d_mask=dm)
    assert s.shape == (3, 3) and i.dtype == np.int64
    exact = lik.maxsim(Q, D, qm, dm, normalize=True)
    np.testing.assert_allclose(s, np.take_along_axis(exact, i, 1), rtol=1e-6)
    assert (np.diff(s, axis=1) <= 0).all()
    s1, i1 = lik.retrieve_binary(Q[0], D, bits, 3, candidates=2, q_mask=qm[0], d_mask=dm)
    np.testing.assert_array_equal(i1, i[0])
    s0, i0 = lik.retrieve_binary(Q, D[:0], bits[:0], 3, d_mask=dm[:0])
    assert s0.shape == (3, 0) and i0.shape == (3, 0)


def test_errors():
    qi = np.zeros((2, 3, 16), np.int8)
    sq = np.ones((2, 3), np.float32)
    with pytest.raises(TypeError, match="Q: dtype float32"):
        lik.maxsim_inference_int8(qi.astype(np.float32), qi, scale_Q=sq, scale_D=sq)
    with pytest.raises(ValueError, match=r"scale_D: shape \[3, 2\] is neither \(\) \(per tensor\) nor \[2, 3\]"):
        lik.maxsim_inference_int8(qi, qi, scale_Q=sq, scale_D=sq.T.copy())
    with pytest.raises(TypeError, match="scale_Q: dtype float64, expected float32"):
        lik.maxsim_inference_int8(qi, qi, scale_Q=sq.astype(np.float64), scale_D=sq)
    with pytest.raises(ValueError, match="D: last dimension d=8 does not match Q's d=16"):
        lik.maxsim_inference_int8(qi, qi[..., :8], scale_Q=sq, scale_D=sq)
    bits = np.zeros((2, 3, 2), np.uint8)
    with pytest.raises(ValueError, match=r"D_bits: last dimension 2 is not ceil\(d / 8\) = 3 for d=17"):
        lik.maxsim_inference_binary(bits, bits, d=17)
    with pytest.raises(ValueError, match="Q: last dimension d=16 does not match d=9"):
        lik.maxsim_inference_binary(qi, bits, d=9, scale_Q=sq)
    with pytest.raises(ValueError, match="scale_Q: must be NULL for bit queries"):
        lik.maxsim_inference_binary(bits, bits, scale_Q=sq)
    with pytest.raises(ValueError, match="scale_Q: is NULL"):
        lik.maxsim_inference_binary(qi, bits, d=16)
    with pytest.raises(TypeError, match="D_bits: dtype int8"):
        lik.maxsim_inference_binary(qi, qi, scale_Q=sq)
    with pytest.raises(TypeError, match="X: dtype int8 is not supported"):
        lik.quantize_int8(qi)
    with pytest.raises(ValueError, match="X: embedding dimension d=0"):
        lik.quantize_binary(np.zeros((2, 0), np.float32))
    with pytest.raises(ValueError, match=r"candidates: 0 is outside \[1, 9223372036854775807\]"):
        lik.retrieve_binary(np.zeros((3, 16), np.float32), np.zeros((2, 3, 16), np.float32), bits, 1, candidates=0)
    with pytest.raises(TypeError, match="dtype int8 is not supported"):
        lik.maxsim(qi, qi)


def test_retrieve_binary_torch_matches_numpy(request):
    rng = _rng(request)
    Q, D, qm, dm = _case(rng, 2, 40, 5, 12, 33)
    bits = lik.quantize_binary(D)
    s, i = lik.retrieve_binary(Q, D, bits, 4, candidates=3, q_mask=qm, d_mask=dm)
    st, it = lik.retrieve_binary(*(torch.from_numpy(x) for x in (Q, D, bits)), 4, candidates=3,
                                 q_mask=torch.from_numpy(qm), d_mask=torch.from_numpy(dm))
    np.testing.assert_array_equal(it.numpy(), i)
    np.testing.assert_array_equal(st.numpy(), s)


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_fp8_quantisers_and_compat(request, dtype):
    rng = _rng(request)
    Q, D, qm, dm = (torch.from_numpy(x) for x in _case(rng, 2, 3, 5, 9, 48))
    q8, sq = lik.quantize_fp8_per_token(Q, dtype)
    d8, sd = lik.quantize_fp8_per_tensor(D, dtype)
    assert q8.dtype == dtype and sq.shape == (2, 5) and sd.shape == ()
    fmax = torch.finfo(dtype).max
    np.testing.assert_array_equal(sq.numpy(), (Q.abs().amax(-1).clamp_min(1e-6) / fmax).numpy())
    np.testing.assert_array_equal(q8.float().numpy(), (Q / sq[..., None]).clamp(-fmax, fmax).to(dtype).float().numpy())
    got = lik.maxsim_inference_fp8(q8, d8, scale_Q=sq, scale_D=sd, q_mask=qm, d_mask=dm)
    ref, scale = maxsim_ref(lik.dequantize_fp8_per_token(q8, sq).double(),
                            lik.dequantize_fp8_per_tensor(d8, sd).double(), qm, dm)
    assert_scores(got, ref, scale, what="fp8 quantisers")
    import lik.compat.fp8 as seed_fp8

    np.testing.assert_array_equal(seed_fp8.maxsim_inference_fp8(q8, d8, scale_Q=sq, scale_D=sd, q_mask=qm,
                                                                d_mask=dm).numpy(), got.numpy())
    with pytest.raises(TypeError, match="fp8 dtype|float8"):
        lik.quantize_fp8_per_token(Q, torch.float16)
    # a scale of the wrong shape is a ValueError naming it, not torch's broadcast RuntimeError
    with pytest.raises(ValueError, match=r"scale: shape \(3,\), expected \(2, 5\)"):
        lik.dequantize_fp8_per_token(q8, sq[0, :3])
    with pytest.raises(ValueError, match=r"scale: shape \(2, 5\), expected \(\) \(one scale for the tensor"):
        lik.dequantize_fp8_per_tensor(q8, sq)
    with pytest.raises(TypeError, match="X_fp8: expected a torch tensor, got ndarray"):
        lik.dequantize_fp8_per_token(q8.float().numpy(), sq)
