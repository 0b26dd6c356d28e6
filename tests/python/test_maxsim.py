"""lik.maxsim / lik.maxsim_pairs against the independent float64 reference."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import lik
from _reference import assert_scores, f64, maxsim_ref, maxsim_ref_einsum

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

DIMS = [1, 3, 17, 48, 96, 128, 1000]
LENS = [(1, 1), (7, 33), (33, 7), (5, 301)]


def rand(rng, shape, dtype="float32", scale=1.0):
    x = rng.standard_normal(shape) * scale
    if dtype == "bfloat16":
        return torch.from_numpy(x).to(torch.bfloat16)
    return x.astype(dtype)


def rand_mask(rng, shape, p=0.7):
    return rng.random(shape) < p


def assert_fp64(out, ref, sc):
    """fp64 accumulation, then one fp32 rounding of the result (half an ulp)."""
    err = np.abs(f64(out) - ref)
    tol = 6.0e-8 * np.abs(ref) + 1e-12 * sc + 1e-300
    assert np.all(err <= tol), f"fp64 scores off: max err {err.max()}"


# ---- values ------------------------------------------------------------------


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("Lq,Ld", LENS)
def test_cross_fp32(rng, d, Lq, Ld):
    Q = rand(rng, (3, Lq, d))
    D = rand(rng, (4, Ld, d))
    out = lik.maxsim(Q, D)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (3, 4)
    ref, sc = maxsim_ref_einsum(Q, D)
    assert_scores(out, ref, sc, what=f"d={d} Lq={Lq} Ld={Ld}")


@pytest.mark.parametrize("d", [1, 17, 128, 1000])
@pytest.mark.parametrize("Lq,Ld", [(1, 1), (7, 33), (33, 301)])
def test_cross_masked_fp32(rng, d, Lq, Ld):
    Q = rand(rng, (3, Lq, d))
    D = rand(rng, (5, Ld, d))
    qm = rand_mask(rng, (3, Lq))
    dm = rand_mask(rng, (5, Ld))
    dm[1] = False  # a document with no valid token: every query token adds 0
    out = lik.maxsim(Q, D, qm, dm)
    ref, sc = maxsim_ref_einsum(Q, D, qm, dm)
    assert_scores(out, ref, sc)
    assert np.all(out[:, 1] == 0)


@pytest.mark.parametrize("dtype", ["float16", "float64"])
@pytest.mark.parametrize("d", [3, 48, 128, 1000])
def test_cross_other_dtypes_numpy(rng, dtype, d):
    Q = rand(rng, (2, 9, d), dtype)
    D = rand(rng, (3, 33, d), dtype)
    qm = rand_mask(rng, (2, 9))
    dm = rand_mask(rng, (3, 33))
    out = lik.maxsim(Q, D, qm, dm)
    assert out.dtype == np.float32
    ref, sc = maxsim_ref_einsum(Q, D, qm, dm)  # from the same rounded inputs
    if dtype == "float64":
        assert_fp64(out, ref, sc)
    else:
        assert_scores(out, ref, sc, dtype=dtype)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
@pytest.mark.parametrize("d", [1, 17, 96, 1000])
def test_cross_torch_dtypes(rng, dtype, d):
    tdt = getattr(torch, dtype)
    Q = torch.from_numpy(rng.standard_normal((3, 7, d))).to(tdt)
    D = torch.from_numpy(rng.standard_normal((2, 33, d))).to(tdt)
    qm = torch.from_numpy(rand_mask(rng, (3, 7)))
    dm = torch.from_numpy(rand_mask(rng, (2, 33)))
    out = lik.maxsim(Q, D, qm, dm)
    assert isinstance(out, torch.Tensor) and out.shape == (3, 2)
    # fp32 scores; float64 torch inputs may give float64 (the autograd path
    # re-sums in double so that gradcheck works)
    assert out.dtype == torch.float32 or (dtype == "float64" and out.dtype == torch.float64)
    ref, sc = maxsim_ref_einsum(Q, D, qm, dm)
    if dtype == "float64":
        assert_fp64(out, ref, sc)
    else:
        assert_scores(out, ref, sc, dtype=dtype)


def test_fp16_products_beyond_fp16_range():
    # 300 * 300 * 4 = 360000 > 65504 (fp16 max): must accumulate in fp32.
    Q = np.full((1, 2, 4), 300, np.float16)
    D = np.full((1, 3, 4), 300, np.float16)
    out = lik.maxsim(Q, D)
    assert np.isfinite(out).all()
    assert out[0, 0] == np.float32(2 * 360000.0)
    Dn = -D
    out = lik.maxsim(Q, Dn)
    assert out[0, 0] == np.float32(-2 * 360000.0)


@needs_torch
def test_bf16_large_products():
    Q = torch.full((1, 3, 8), 1000.0, dtype=torch.bfloat16)
    D = torch.full((2, 5, 8), -1000.0, dtype=torch.bfloat16)
    out = lik.maxsim(Q, D)
    assert torch.equal(out, torch.full((1, 2), -3 * 8e6, dtype=torch.float32))


@pytest.mark.parametrize("d", [1, 17, 128])
def test_masks_with_negative_similarities(rng, d):
    # Every similarity is negative: a kernel that writes 0 for masked document
    # tokens (instead of -inf) would return max = 0 and fail here.
    Q = np.abs(rand(rng, (3, 7, d))) + 0.1
    D = -(np.abs(rand(rng, (4, 33, d))) + 0.1)
    qm = rand_mask(rng, (3, 7))
    qm[:, 0] = True
    dm = rand_mask(rng, (4, 33), p=0.3)
    dm[:, 0] = True
    out = lik.maxsim(Q, D, qm, dm)
    ref, sc = maxsim_ref_einsum(Q, D, qm, dm)
    assert np.all(ref < 0)
    assert np.all(out < 0)
    assert_scores(out, ref, sc)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_nonfinite_in_masked_tokens(rng, bad, dtype):
    Q = rand(rng, (3, 7, 17), dtype)
    D = rand(rng, (4, 33, 17), dtype)
    qm = rand_mask(rng, (3, 7))
    dm = rand_mask(rng, (4, 33))
    qm[:, 0] = dm[:, 0] = True
    clean = lik.maxsim(Q, D, qm, dm)
    Qb, Db = Q.copy(), D.copy()
    Qb[~qm] = bad
    Db[~dm] = bad
    Db[~dm, 3] = -bad if not np.isnan(bad) else bad
    out = lik.maxsim(Qb, Db, qm, dm)
    assert np.isfinite(out).all()
    np.testing.assert_array_equal(out, clean)
    ref, sc = maxsim_ref_einsum(Qb, Db, qm, dm)
    assert_scores(out, ref, sc, dtype=dtype if dtype != "float64" else "float32")


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_nan_in_valid_document_token_is_skipped_like_a_masked_one(rng, dtype):
    # lik.h: a NaN similarity never wins a max (documented; torch.max would propagate it)
    Q = rand(rng, (3, 7, 17), dtype)
    D = rand(rng, (4, 33, 17), dtype)
    D[1, 5, 2] = np.nan
    dm = np.ones((4, 33), bool)
    dm[1, 5] = False
    out = lik.maxsim(Q, D)
    np.testing.assert_array_equal(out, lik.maxsim(Q, D, None, dm))
    assert np.isfinite(out).all()


def test_uint8_masks_equal_bool(rng):
    Q = rand(rng, (2, 7, 17))
    D = rand(rng, (3, 33, 17))
    qm = rand_mask(rng, (2, 7))
    dm = rand_mask(rng, (3, 33))
    a = lik.maxsim(Q, D, qm, dm)
    qu = qm.astype(np.uint8) * rng.integers(1, 256, size=qm.shape).astype(np.uint8)  # any nonzero = valid
    b = lik.maxsim(Q, D, qu, dm.astype(np.uint8))
    np.testing.assert_array_equal(a, b)


# ---- layouts -------------------------------------------------------------------


def test_squeezing_2d(rng):
    Q = rand(rng, (3, 7, 17))
    D = rand(rng, (4, 33, 17))
    qm = rand_mask(rng, (3, 7))
    dm = rand_mask(rng, (4, 33))
    full = lik.maxsim(Q, D, qm, dm)
    a = lik.maxsim(Q[1], D, qm[1], dm)
    assert a.shape == (4,)
    np.testing.assert_array_equal(a, full[1])
    b = lik.maxsim(Q, D[2], qm, dm[2])
    assert b.shape == (3,)
    np.testing.assert_array_equal(b, full[:, 2])
    c = lik.maxsim(Q[1], D[2], qm[1], dm[2])
    assert c.shape == () and isinstance(c, np.ndarray)
    assert c == full[1, 2]
    ref, sc = maxsim_ref(Q[1], D[2], qm[1], dm[2])
    assert_scores(c, ref, sc)
    # no masks at all
    ref, sc = maxsim_ref(Q[0], D)
    assert_scores(lik.maxsim(Q[0], D), ref, sc)


@pytest.mark.parametrize("d", [3, 48, 128])
def test_kd_layout(rng, d):
    Nq, K, Lq, Ld = 3, 4, 7, 33
    Q = rand(rng, (Nq, Lq, d))
    D = rand(rng, (Nq, K, Ld, d))
    qm = rand_mask(rng, (Nq, Lq))
    dm = rand_mask(rng, (Nq, K, Ld))
    out = lik.maxsim(Q, D, qm, dm)
    assert out.shape == (Nq, K) and out.dtype == np.float32
    ref, sc = maxsim_ref(Q, D, qm, dm)
    assert_scores(out, ref, sc)
    # each KD row equals the cross product of the query with its candidates
    for i in range(Nq):
        ri, si = maxsim_ref(Q[i], D[i], qm[i], dm[i])
        assert_scores(out[i], ri, si)


@pytest.mark.parametrize("d", [1, 17, 128])
def test_pairs(rng, d):
    B = 5
    Q = rand(rng, (B, 7, d))
    D = rand(rng, (B, 33, d))
    qm = rand_mask(rng, (B, 7))
    dm = rand_mask(rng, (B, 33))
    out = lik.maxsim_pairs(Q, D, qm, dm)
    assert out.shape == (B,) and out.dtype == np.float32
    ref, sc = maxsim_ref_einsum(Q, D, qm, dm)
    assert_scores(out, np.diag(ref), np.diag(sc))
    out_n = lik.maxsim_pairs(Q, D, qm, dm, normalize=True)
    ref, sc = maxsim_ref_einsum(Q, D, qm, dm, normalize=True)
    assert_scores(out_n, np.diag(ref), np.diag(sc))


@pytest.mark.parametrize("d", [1, 3, 128, 1000])
def test_normalize(rng, d):
    Q = rand(rng, (3, 7, d), scale=5.0)
    D = rand(rng, (4, 33, d), scale=0.01)
    D[0, 0] = 0.0  # a zero token: normalised by max(||x||, 1e-12) -> stays 0
    qm = rand_mask(rng, (3, 7))
    out = lik.maxsim(Q, D, qm, normalize=True)
    ref, sc = maxsim_ref_einsum(Q, D, qm, normalize=True)
    assert_scores(out, ref, sc)
    assert np.all(np.abs(out) <= qm.sum(1)[:, None] + 1e-4)
    # default is normalize=False (the seed's maxsim)
    raw, rsc = maxsim_ref_einsum(Q, D, qm)
    assert_scores(lik.maxsim(Q, D, qm), raw, rsc)


# ---- strides ---------------------------------------------------------------------


def test_strided_numpy_views(rng):
    base_q = rand(rng, (17, 14, 6))  # [d, Lq*2, Nq] -> transposed view
    Q = base_q.transpose(2, 1, 0)[:, ::2, :]  # [6, 7, 17], strides odd & non-unit
    base_d = rand(rng, (8, 33, 34))
    D = base_d[::-2, :, ::2]  # [4, 33, 17] negative batch stride, step-2 features
    qm = rand_mask(rng, (7, 6)).T  # transposed mask
    dm = rand_mask(rng, (4, 66))[:, ::-2]  # negative-stride mask
    assert not Q.flags.c_contiguous and D.strides[0] < 0
    out = lik.maxsim(Q, D, qm, dm)
    ref, sc = maxsim_ref_einsum(Q, D, qm, dm)
    assert_scores(out, ref, sc)
    # and equal (bitwise) to the same values laid out contiguously
    same = lik.maxsim(np.ascontiguousarray(Q), np.ascontiguousarray(D), np.ascontiguousarray(qm), np.ascontiguousarray(dm))
    np.testing.assert_array_equal(out, same)


def test_strided_kd_and_pairs(rng):
    D = rand(rng, (3, 8, 33, 20))[:, ::2, ::-1, 1:18]  # [3, 4, 33, 17]
    Q = rand(rng, (3, 7, 40))[:, :, ::-2][:, :, :17]
    dm = rand_mask(rng, (3, 4, 33))
    out = lik.maxsim(Q, D, None, dm)
    ref, sc = maxsim_ref(Q, D, None, dm)
    assert_scores(out, ref, sc)
    P = rand(rng, (33, 3, 17)).transpose(1, 0, 2)
    out = lik.maxsim_pairs(Q, P)
    ref, sc = maxsim_ref_einsum(Q, P)
    assert_scores(out, np.diag(ref), np.diag(sc))


def test_broadcast_zero_stride(rng):
    # a stride-0 view: the same document repeated 4 times, a mask broadcast over rows
    d1 = rand(rng, (1, 33, 17))
    D = np.broadcast_to(d1, (4, 33, 17))
    dm = np.broadcast_to(rand_mask(rng, (1, 33)), (4, 33))
    Q = rand(rng, (3, 7, 17))
    out = lik.maxsim(Q, D, None, dm)
    assert np.all(out == out[:, :1])
    ref, sc = maxsim_ref_einsum(Q, D, None, dm)
    assert_scores(out, ref, sc)


@needs_torch
def test_strided_torch_views(rng):
    Q = torch.from_numpy(rand(rng, (17, 7, 3))).permute(2, 1, 0)  # [3, 7, 17]
    D = torch.from_numpy(rand(rng, (4, 66, 17)))[:, 1::2]  # [4, 33, 17], storage offset
    dm = torch.from_numpy(rand_mask(rng, (33, 4))).t()
    out = lik.maxsim(Q, D, None, dm)
    ref, sc = maxsim_ref_einsum(Q, D, None, dm)
    assert_scores(out, ref, sc)


@needs_torch
def test_torch_negative_bit_views(rng):
    # x.conj().imag of a complex tensor is a view with torch's negative bit:
    # its memory holds -x, so reading the raw data would score -x
    def neg_bit(x, requires_grad=False):
        im = torch.from_numpy(-x).requires_grad_(requires_grad)
        return im, torch.complex(torch.zeros_like(im), im).conj().imag

    q, dd = rand(rng, (2, 7, 17)), rand(rng, (3, 33, 17))
    (_, Q), (_, D) = neg_bit(q), neg_bit(dd)
    assert Q.is_neg() and D.is_neg()
    ref, sc = maxsim_ref_einsum(q, dd)
    tq, td = torch.from_numpy(q), torch.from_numpy(dd)
    for Qx, Dx in ((Q, td), (tq, D)):  # one side at a time: -Q with -D would give the same scores
        assert_scores(lik.maxsim(Qx, Dx), ref, sc)
        assert_scores(lik.maxsim_pairs(Qx, Dx[:2]), np.diagonal(ref)[:2], np.diagonal(sc)[:2])
        s, i = lik.retrieve(Qx, Dx, 2, normalize=False)
        np.testing.assert_array_equal(i.numpy(), np.argsort(-ref, axis=1, kind="stable")[:, :2])
    # gradients reach the leaf through the view: d/d(-q) = -d/dq
    leaf, Qv = neg_bit(q, requires_grad=True)
    lik.maxsim(Qv, torch.from_numpy(dd)).sum().backward()
    plain = torch.from_numpy(q).requires_grad_()
    lik.maxsim(plain, torch.from_numpy(dd)).sum().backward()
    torch.testing.assert_close(leaf.grad, -plain.grad)


# ---- invariances -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_padding_invariance(rng, dtype):
    d = 48
    Q = rand(rng, (3, 7, d), dtype)
    lens = [1, 33, 5, 64, 17]
    docs = [rand(rng, (n, d), dtype) for n in lens]
    Lmax = max(lens)
    Dp = rand(rng, (len(lens), Lmax, d), dtype)  # garbage in the padding
    dm = np.zeros((len(lens), Lmax), bool)
    for j, x in enumerate(docs):
        Dp[j, : len(x)] = x
        dm[j, : len(x)] = True
    batched = lik.maxsim(Q, Dp, None, dm)
    for j, x in enumerate(docs):
        alone = lik.maxsim(Q, x)
        np.testing.assert_array_equal(batched[:, j], alone)
        # also alone as a 1-document batch, and with extra padding
        pad = np.zeros((1, len(x) + 9, d), dtype)
        pad[0, : len(x)] = x
        pm = np.zeros((1, len(x) + 9), bool)
        pm[0, : len(x)] = True
        np.testing.assert_array_equal(lik.maxsim(Q, pad, None, pm)[:, 0], alone)
    # query-side padding too
    Qp = np.concatenate([Q, rand(rng, (3, 5, d), dtype)], axis=1)
    qm = np.zeros((3, 12), bool)
    qm[:, :7] = True
    np.testing.assert_array_equal(lik.maxsim(Qp, Dp, qm, dm), batched)


def test_batch_composition_invariance(rng):
    Q = rand(rng, (5, 7, 17))
    D = rand(rng, (6, 33, 17))
    full = lik.maxsim(Q, D)
    np.testing.assert_array_equal(lik.maxsim(Q[2:4], D[1:5]), full[2:4, 1:5])
    np.testing.assert_array_equal(lik.maxsim(Q[3], D[4]), full[3, 4])


@pytest.mark.parametrize("normalize", [False, True])
def test_thread_count_invariance(rng, threads, normalize):
    Q = rand(rng, (9, 33, 96))
    D = rand(rng, (13, 301, 96))
    dm = rand_mask(rng, (13, 301))
    results = []
    for n in (1, 2, 3, 7, 0):
        threads.set_num_threads(n)
        assert threads.get_num_threads() == n
        results.append(lik.maxsim(Q, D, None, dm, normalize=normalize))
        results.append(lik.maxsim_pairs(Q[:9], D[:9], None, dm[:9], normalize=normalize))
        results.append(lik.retrieve(Q, D, 5, None, dm, normalize=normalize)[0])
    for k in range(3):
        for r in results[k::3]:
            np.testing.assert_array_equal(r, results[k])


def test_thread_env_invariance(rng, threads, monkeypatch):
    threads.set_num_threads(0)  # defer to $LIK_NUM_THREADS
    Q = rand(rng, (4, 33, 17))
    D = rand(rng, (11, 301, 17))
    outs = []
    for n in ("1", "2", "5"):
        monkeypatch.setenv("LIK_NUM_THREADS", n)
        outs.append(lik.maxsim(Q, D))
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


def test_set_num_threads_errors(threads):
    with pytest.raises(ValueError, match=r"set_num_threads: n .*: -1 is outside \[0, 2147483647\]"):
        lik.set_num_threads(-1)
    with pytest.raises(TypeError):
        lik.set_num_threads(1.5)


def test_concurrent_python_threads(rng):
    Q = rand(rng, (4, 33, 48))
    D = rand(rng, (9, 101, 48))
    expect = lik.maxsim(Q, D)
    errors = []

    def work():
        try:
            for _ in range(5):
                np.testing.assert_array_equal(lik.maxsim(Q, D), expect)
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


# ---- empty ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "qs,ds,shape",
    [
        ((0, 7, 17), (4, 33, 17), (0, 4)),
        ((3, 7, 17), (0, 33, 17), (3, 0)),
        ((0, 7, 17), (0, 33, 17), (0, 0)),
        ((3, 0, 17), (4, 33, 17), (3, 4)),
        ((3, 7, 17), (4, 0, 17), (3, 4)),
        ((7, 17), (0, 33, 17), (0,)),
        ((0, 7, 17), (33, 17), (0,)),
        ((0, 17), (33, 17), ()),
        ((3, 7, 17), (3, 0, 33, 17), (3, 0)),
        ((0, 7, 17), (0, 2, 33, 17), (0, 2)),
        ((3, 7, 17), (3, 2, 0, 17), (3, 2)),
    ],
)
def test_empty(rng, qs, ds, shape):
    Q = rand(rng, qs)
    D = rand(rng, ds)
    out = lik.maxsim(Q, D)
    assert out.shape == shape and out.dtype == np.float32
    assert np.all(out == 0)


def test_empty_pairs(rng):
    assert lik.maxsim_pairs(rand(rng, (0, 7, 17)), rand(rng, (0, 5, 17))).shape == (0,)
    out = lik.maxsim_pairs(rand(rng, (3, 0, 17)), rand(rng, (3, 5, 17)))
    assert out.shape == (3,) and np.all(out == 0)
    out = lik.maxsim_pairs(rand(rng, (3, 4, 17)), rand(rng, (3, 0, 17)))
    assert out.shape == (3,) and np.all(out == 0)


def test_all_masked(rng):
    Q = rand(rng, (3, 7, 17))
    D = rand(rng, (4, 33, 17))
    out = lik.maxsim(Q, D, np.zeros((3, 7), bool), None)
    assert np.all(out == 0)
    out = lik.maxsim(Q, D, None, np.zeros((4, 33), bool))
    assert np.all(out == 0)


# ---- torch specifics -------------------------------------------------------------


@needs_torch
def test_torch_requires_grad_forward_only(rng):
    Q = torch.from_numpy(rand(rng, (2, 7, 17))).requires_grad_()
    D = torch.from_numpy(rand(rng, (3, 33, 17)))
    out = lik.maxsim(Q, D)
    ref, sc = maxsim_ref_einsum(Q, D)
    assert_scores(out, ref, sc)


@needs_torch
def test_mixed_numpy_torch_gives_torch(rng):
    Q = rand(rng, (2, 7, 17))
    D = torch.from_numpy(rand(rng, (3, 33, 17)))
    dm = rand_mask(rng, (3, 33))
    out = lik.maxsim(Q, D, None, dm)
    assert isinstance(out, torch.Tensor)
    ref, sc = maxsim_ref_einsum(Q, D, None, dm)
    assert_scores(out, ref, sc)
    # numpy mask with negative strides still works in torch mode
    out2 = lik.maxsim(Q, D, None, np.ascontiguousarray(dm[:, ::-1])[:, ::-1])
    assert torch.equal(out, out2)


@needs_torch
def test_scorer_module(rng):
    s = lik.MaxSimScorer()
    assert isinstance(s, torch.nn.Module)
    assert s.normalize is True and s.backward == "auto"
    assert "normalize=True" in repr(s)
    Q = torch.from_numpy(rand(rng, (2, 7, 17)))
    D = torch.from_numpy(rand(rng, (3, 33, 17)))
    out = s(Q, D)
    ref, sc = maxsim_ref_einsum(Q, D, normalize=True)
    assert_scores(out, ref, sc)
    assert torch.equal(s.score(Q, D), out)
    sc_, ix = s.retrieve(Q, D, 2)
    assert sc_.shape == (2, 2) and ix.dtype == torch.int64
    raw = lik.MaxSimScorer(normalize=False, mask_pad_token=0)
    q_ids = torch.from_numpy(rng.integers(0, 3, (2, 7)))
    d_ids = torch.from_numpy(rng.integers(0, 3, (3, 33)))
    out = raw.forward_with_ids(Q, D, q_ids, d_ids)
    ref, sc = maxsim_ref_einsum(Q, D, q_ids != 0, d_ids != 0)
    assert_scores(out, ref, sc)
    with pytest.raises(ValueError, match="mask_pad_token"):
        lik.MaxSimScorer().forward_with_ids(Q, D, q_ids, d_ids)
    with pytest.raises(ValueError, match="backward"):
        lik.MaxSimScorer(backward="bogus")


@needs_torch
def test_scorer_autograd(rng):
    Q = torch.from_numpy(rand(rng, (2, 7, 17))).requires_grad_()
    D = torch.from_numpy(rand(rng, (3, 33, 17))).requires_grad_()
    s = lik.MaxSimScorer(backward="lowmem")
    out = s(Q, D)
    assert out.requires_grad
    out.sum().backward()
    assert Q.grad is not None and Q.grad.shape == Q.shape and D.grad.shape == D.shape
    ref, sc = maxsim_ref_einsum(Q, D, normalize=True)
    assert_scores(out, ref, sc)
    assert not s.score(Q, D).requires_grad


def test_scorer_numpy(rng):
    s = lik.MaxSimScorer(normalize=False)
    Q = rand(rng, (2, 7, 17))
    D = rand(rng, (3, 33, 17))
    out = s(Q, D)
    assert isinstance(out, np.ndarray)
    ref, sc = maxsim_ref_einsum(Q, D)
    assert_scores(out, ref, sc)


# ---- GPU -------------------------------------------------------------------------


@pytest.mark.gpu
@needs_torch
def test_cuda_matches_reference(rng):
    Q = torch.from_numpy(rand(rng, (3, 7, 48))).to(torch.float16).cuda()
    D = torch.from_numpy(rand(rng, (4, 33, 48))).to(torch.float16).cuda()
    dm = torch.from_numpy(rand_mask(rng, (4, 33))).cuda()
    try:
        out = lik.maxsim(Q, D, None, dm)
    except lik.LikError as e:
        pytest.skip(f"this build has no CUDA backend: {e}")
    assert out.is_cuda
    ref, sc = maxsim_ref_einsum(Q, D, None, dm)
    np.testing.assert_allclose(f64(out), ref, rtol=0, atol=float(np.max(sc)) * 5e-3 + 1e-6)


# ---- strided views normalise as their contiguous copies (issue 27 B, item 7) -----------------


@pytest.mark.parametrize("isa", ["portable", "avx2", "avx512"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_strided_normalize_bitwise_equals_contiguous(rng, isa, dtype):
    # stride-2 views along d (sk != 1) took the scalar norm on the SIMD paths,
    # contiguous rows the SIMD one: results differed in the last bits.  One
    # route now: the same bits on every CPU path, for every d (tails included).
    for d in (1, 7, 16, 17, 33, 96):
        Qw = (rng.standard_normal((3, 5, 2 * d)) * 3).astype(dtype)
        Dw = (rng.standard_normal((4, 6, 2 * d)) * 3).astype(dtype)
        Q, D = Qw[..., ::2], Dw[..., ::2]
        assert not Q.flags.c_contiguous
        Qc, Dc = np.ascontiguousarray(Q), np.ascontiguousarray(D)
        with lik.Context(cpu_isa=isa):
            np.testing.assert_array_equal(lik.maxsim(Q, D, normalize=True), lik.maxsim(Qc, Dc, normalize=True))
            np.testing.assert_array_equal(lik.maxsim_pairs(Q[:3], D[:3], normalize=True),
                                          lik.maxsim_pairs(Qc[:3], Dc[:3], normalize=True))
            s, i = lik.retrieve(Q, D, 2)
            sc, ic = lik.retrieve(Qc, Dc, 2)
            np.testing.assert_array_equal(s, sc)
            np.testing.assert_array_equal(i, ic)


@pytest.mark.parametrize("fn", [lik.maxsim, lik.maxsim_pairs, lik.retrieve])
def test_docstrings_say_what_a_missing_mask_means(fn):
    # q_mask=None / d_mask=None: every token valid, padding included (issue 27 B, item 8)
    doc = " ".join(fn.__doc__.split())
    for m in ("q_mask", "d_mask"):
        entry = doc.split(f"{m}: optional", 1)[1].split(":", 3)[:3]
        assert "None" in " ".join(entry) and "valid" in " ".join(entry), (fn.__name__, m, entry)
