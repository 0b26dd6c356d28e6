"""lik.plaid's residual codec against an independent numpy ColBERT codec
(tests/python/_colbert_codec.py) and against hand-built bytes with known
answers, for every nbits and both layouts."""

from __future__ import annotations

import numpy as np
import pytest

import lik
from lik import plaid

import _colbert_codec as ref

NBITS = (1, 2, 4, 8)
LAYOUTS = ("colbert", "lik")


def _dims(nbits):
    return [d for d in (1, 3, 8, 17, 48, 96, 1000) if (d * nbits) % 8 == 0]


def _corpus(rng, T, d, C):
    cent = rng.standard_normal((C, d)).astype(np.float32)
    cent /= np.linalg.norm(cent, axis=1, keepdims=True)
    X = rng.standard_normal((T, d)).astype(np.float32)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, cent


# ---- hand-built bytes -----------------------------------------------------------------------

# (nbits, bucket indices of the dimensions of one byte, colbert byte, lik byte):
# colbert writes each index LSB first into a bit stream packed MSB first, so
# the first dimension sits in the top field with its bits reversed.
KNOWN = [
    (1, [1, 1, 0, 0, 0, 0, 0, 0], 0xC0, 0x03),
    (1, [0, 0, 0, 0, 0, 1, 0, 1], 0x05, 0xA0),
    (2, [0, 1, 2, 3], 0x27, 0xE4),
    (2, [1, 0, 0, 0], 0x80, 0x01),
    (4, [1, 2], 0x84, 0x21),
    (4, [15, 6], 0xF6, 0x6F),
    (8, [1], 0x80, 0x01),
    (8, [200], 0x13, 0xC8),
]


@pytest.mark.parametrize("nbits,buckets,colbert_byte,lik_byte", KNOWN)
def test_known_bytes_decode(nbits, buckets, colbert_byte, lik_byte):
    d = len(buckets)
    weights = (np.arange(1 << nbits) * 10 + 10).astype(np.float32)
    cent = np.zeros((1, d), np.float32)
    for layout, byte in (("colbert", colbert_byte), ("lik", lik_byte)):
        x = plaid.decompress(np.zeros(1, np.int32), np.array([[byte]], np.uint8), cent, weights, nbits,
                             layout=layout, normalize=False)
        assert x.tolist() == [[10.0 * b + 10 for b in buckets]], layout


@pytest.mark.parametrize("nbits,buckets,colbert_byte,lik_byte", KNOWN)
def test_known_bytes_encode(nbits, buckets, colbert_byte, lik_byte):
    d = len(buckets)
    n = 1 << nbits
    cutoffs = (np.arange(1, n) - 0.5).astype(np.float32)  # bucket of value b is b
    cent = np.zeros((1, d), np.float32)
    X = np.array([buckets], np.float32)
    for layout, byte in (("colbert", colbert_byte), ("lik", lik_byte)):
        codes, res = plaid.compress(X, cent, cutoffs, nbits, layout=layout)
        assert codes.tolist() == [0] and res.tolist() == [[byte]], layout


def test_numpy_reference_matches_known_bytes():
    for nbits, buckets, colbert_byte, lik_byte in KNOWN:
        b = np.array([buckets])
        assert ref.pack(b, nbits, "colbert").tolist() == [[colbert_byte]]
        assert ref.pack(b, nbits, "lik").tolist() == [[lik_byte]]


# ---- round trips against the numpy codec ------------------------------------------------------


@pytest.mark.parametrize("nbits", NBITS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_codec_matches_numpy(rng, nbits, layout):
    for d in _dims(nbits):
        T, C = int(rng.integers(1, 300)), int(rng.integers(1, 50))
        X, cent = _corpus(rng, T, d, C)
        codes_np = np.argmax(X @ cent.T, axis=1)
        cutoffs, weights = plaid.train_codec(X - cent[codes_np], nbits)
        c_ref, w_ref = ref.train(X - cent[codes_np], nbits)
        np.testing.assert_allclose(cutoffs, c_ref, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(weights, w_ref, rtol=1e-6, atol=1e-7)

        codes, res = plaid.compress(X, cent, cutoffs, nbits, layout=layout)
        codes_ref, res_ref = ref.compress(X, cent, cutoffs, nbits, layout)
        assert codes.dtype == np.int32 and res.dtype == np.uint8
        assert res.shape == (T, d * nbits // 8)
        same = codes == codes_ref  # fp32 vs fp64 dots may split a near-tie
        scores = X.astype(np.float64) @ cent.T.astype(np.float64)
        gap = scores[np.arange(T), codes_ref] - scores[np.arange(T), codes]
        assert np.all(same | (gap < 1e-5)), (d, gap.max())
        np.testing.assert_array_equal(res[same], res_ref[same])

        for normalize in (False, True):
            x = plaid.decompress(codes_ref, res_ref, cent, weights, nbits, layout=layout, normalize=normalize)
            x_ref = ref.decompress(codes_ref, res_ref, cent, weights, nbits, layout, normalize)
            np.testing.assert_allclose(x, x_ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nbits", NBITS)
def test_layouts_are_byte_reversals(rng, nbits):
    d = 8 * 3
    X, cent = _corpus(rng, 40, d, 5)
    cutoffs, _ = plaid.train_codec(X - cent[np.argmax(X @ cent.T, 1)], nbits)
    _, a = plaid.compress(X, cent, cutoffs, nbits, layout="colbert")
    _, b = plaid.compress(X, cent, cutoffs, nbits, layout="lik")
    rev = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint8)
    np.testing.assert_array_equal(rev[a], b)


def test_zero_vectors_decode_to_zero(rng):
    for nbits in NBITS:
        d = 16
        T = 7
        res = rng.integers(0, 256, (T, d * nbits // 8)).astype(np.uint8)
        x = plaid.decompress(np.zeros(T, np.int64), res, np.zeros((3, d), np.float16),
                             np.zeros(1 << nbits, np.float32), nbits)
        assert np.all(x == 0) and not np.isnan(x).any()


def test_decompress_shapes_dtypes_and_views(rng):
    nbits, d, C = 2, 48, 9
    cent = rng.standard_normal((C, d)).astype(np.float32)
    w = np.sort(rng.standard_normal(4)).astype(np.float32)
    codes = rng.integers(0, C, (5, 7)).astype(np.int64)
    res = rng.integers(0, 256, (5, 7, 12)).astype(np.uint8)
    x = plaid.decompress(codes, res, cent.astype(np.float16), w, nbits, layout="lik")
    assert x.shape == (5, 7, d) and x.dtype == np.float32
    flat = ref.decompress(codes.reshape(-1), res.reshape(-1, 12), cent.astype(np.float16), w, nbits, "lik")
    np.testing.assert_allclose(x.reshape(-1, d), flat, rtol=1e-5, atol=1e-6)
    # strided views in, torch in -> torch out
    torch = pytest.importorskip("torch")
    big = rng.integers(0, 256, (35, 24)).astype(np.uint8)
    sub = big[::1, ::2]
    xt = plaid.decompress(torch.from_numpy(codes.reshape(-1)), torch.from_numpy(sub), torch.from_numpy(cent),
                          torch.from_numpy(w), nbits)
    assert isinstance(xt, torch.Tensor)
    np.testing.assert_allclose(xt.numpy(), ref.decompress(codes.reshape(-1), sub, cent, w, nbits, "colbert"),
                               rtol=1e-5, atol=1e-6)
    # empty
    assert plaid.decompress(np.zeros(0, np.int32), np.zeros((0, 12), np.uint8), cent, w, nbits).shape == (0, d)


def test_compress_torch_and_empty(rng):
    torch = pytest.importorskip("torch")
    X, cent = _corpus(rng, 30, 16, 4)
    cut = np.array([-0.1, 0.0, 0.1], np.float32)
    codes, res = plaid.compress(torch.from_numpy(X), torch.from_numpy(cent).half(), torch.from_numpy(cut), 2)
    assert isinstance(codes, torch.Tensor) and codes.dtype == torch.int32 and res.dtype == torch.uint8
    c2, r2 = ref.compress(X, cent.astype(np.float16), cut, 2)
    np.testing.assert_array_equal(res.numpy()[codes.numpy() == c2], r2[codes.numpy() == c2])
    codes, res = plaid.compress(np.zeros((0, 16), np.float32), cent, cut, 2)
    assert codes.shape == (0,) and res.shape == (0, 4)


# ---- errors -------------------------------------------------------------------------------------


def test_codec_errors(rng):
    X, cent = _corpus(rng, 10, 16, 4)
    w = np.zeros(4, np.float32)
    codes = np.zeros(10, np.int32)
    res = np.zeros((10, 4), np.uint8)
    with pytest.raises(ValueError, match="nbits: 3, must be 1, 2, 4 or 8"):
        plaid.train_codec(X, 3)
    with pytest.raises(ValueError, match="nbits: 5"):
        plaid.decompress(codes, res, cent, w, 5)
    with pytest.raises(ValueError, match=r"residuals: last dimension 3 does not match d\*nbits/8 = 4 \(d=16, nbits=2\)"):
        plaid.decompress(codes, res[:, :3], cent, w, 2)
    bad = codes.copy()
    bad[7] = 4
    with pytest.raises(ValueError, match=r"codes: codes\[7\]=4 is outside \[0, C=4\)"):
        plaid.decompress(bad, res, cent, w, 2)
    bad[7] = -1
    with pytest.raises(ValueError, match=r"codes\[7\]=-1"):
        plaid.decompress(bad, res, cent, w, 2)
    with pytest.raises(ValueError, match="bucket_weights: has 4 entries, expected 16 for nbits=4"):
        plaid.decompress(codes, np.zeros((10, 8), np.uint8), cent, w, 4)
    with pytest.raises(ValueError, match="not a whole number of bytes"):
        plaid.decompress(codes, res, np.zeros((4, 3), np.float32), w, 2)
    with pytest.raises(ValueError, match="the sample is empty"):
        plaid.train_codec(np.zeros(0, np.float32), 2)
    with pytest.raises(ValueError, match="residuals: value 3"):
        plaid.train_codec(np.array([0, 1, 2, np.nan], np.float32), 2)
    with pytest.raises(ValueError, match="X: d=8 does not match centroids' d=16"):
        plaid.compress(np.zeros((2, 8), np.float32), cent, np.zeros(3, np.float32), 2)
    with pytest.raises(ValueError, match="X: token 1 has no finite inner product"):
        Xn = X[:3].copy()
        Xn[1, 0] = np.nan
        plaid.compress(Xn, cent, np.zeros(3, np.float32), 2)
    with pytest.raises(TypeError, match="residuals: dtype int32, expected uint8"):
        plaid.decompress(codes, res.astype(np.int32), cent, w, 2)
    with pytest.raises(TypeError, match="centroids: dtype float64"):
        plaid.decompress(codes, res, cent.astype(np.float64), w, 2)
    with pytest.raises(ValueError, match="layout: must be one of"):
        plaid.decompress(codes, res, cent, w, 2, layout="big")
    with pytest.raises(TypeError, match="nbits: expected an int"):
        plaid.decompress(codes, res, cent, w, 2.0)
