"""Hypothesis property tests: random shapes, dtypes, masks, layouts and
strides against the float64 reference."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import lik  # noqa: E402
from _reference import assert_scores, maxsim_ref  # noqa: E402

DTYPES = ["float32", "float16", "float64"]


@st.composite
def problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    dtype = draw(st.sampled_from(DTYPES))
    d = draw(st.sampled_from([1, 2, 3, 5, 8, 16, 17, 31, 48, 64, 96, 128, 129]))
    Nq = draw(st.integers(0, 4))
    Nd = draw(st.integers(0, 5))
    Lq = draw(st.integers(0, 40))
    Ld = draw(st.integers(0, 70))
    layout = draw(st.sampled_from(["cross", "q2", "d2", "both2", "kd"]))
    use_qm = draw(st.booleans())
    use_dm = draw(st.booleans())
    mask_u8 = draw(st.booleans())
    strided = draw(st.booleans())
    normalize = draw(st.booleans())
    sign = draw(st.sampled_from(["mixed", "negative"]))

    def arr(shape, neg=False):
        if strided and len(shape) >= 2:
            # a reversed, step-2 view on the token axis of a bigger buffer
            big = list(shape)
            big[-2] = 2 * shape[-2]
            x = rng.standard_normal(big)[..., ::-2, :]
        else:
            x = rng.standard_normal(shape)
        if neg:
            x = -np.abs(x) - 0.05
        elif sign == "negative":
            x = np.abs(x) + 0.05
        return x.astype(dtype)

    def mask(shape):
        m = rng.random(shape) < rng.uniform(0.2, 1.0)
        return m.astype(np.uint8) if mask_u8 else m

    neg = sign == "negative"
    if layout == "kd":
        K = draw(st.integers(0, 3))
        Q, D = arr((Nq, Lq, d)), arr((Nq, K, Ld, d), neg)
        qm = mask((Nq, Lq)) if use_qm else None
        dm = mask((Nq, K, Ld)) if use_dm else None
    else:
        qs = (Lq, d) if layout in ("q2", "both2") else (Nq, Lq, d)
        ds = (Ld, d) if layout in ("d2", "both2") else (Nd, Ld, d)
        Q, D = arr(qs), arr(ds, neg)
        qm = mask(qs[:-1]) if use_qm else None
        dm = mask(ds[:-1]) if use_dm else None
    return dtype, Q, D, qm, dm, normalize


@given(problems())
def test_maxsim_property(p):
    dtype, Q, D, qm, dm, normalize = p
    out = lik.maxsim(Q, D, qm, dm, normalize=normalize)
    ref, sc = maxsim_ref(Q, D, qm, dm, normalize=normalize)
    assert out.dtype == np.float32
    if dtype == "float64":
        err = np.abs(out.astype(np.float64) - ref)
        rel = 1e-6 if normalize else 1e-12
        assert np.all(err <= 6.0e-8 * np.abs(ref) + rel * sc + 1e-300)
    else:
        assert_scores(out, ref, sc, dtype=dtype, normalize=normalize)


@given(problems(), st.integers(1, 8))
def test_retrieve_property(p, top_k):
    dtype, Q, D, qm, dm, normalize = p
    if D.ndim == 4:
        return
    s, i = lik.retrieve(Q, D, top_k, qm, dm, normalize=normalize)
    ref, sc = maxsim_ref(Q, D, qm, dm, normalize=normalize)
    if D.ndim == 2:
        ref, sc = ref[..., None], sc[..., None]
    Nd = ref.shape[-1]
    k = min(top_k, Nd)
    assert s.shape[-1] == k and i.shape == s.shape
    if k == 0 or ref.size == 0:
        return
    ref2 = ref.reshape(-1, Nd)
    sc2 = sc.reshape(-1, Nd)
    s2 = s.reshape(-1, k)
    i2 = i.reshape(-1, k)
    for q in range(ref2.shape[0]):
        assert len(set(i2[q].tolist())) == k
        assert_scores(s2[q], ref2[q, i2[q]], sc2[q, i2[q]], dtype=dtype if dtype != "float64" else "float32")
        assert np.all(np.diff(s2[q]) <= 0)
        # equal returned scores come in ascending index order
        for a in range(k - 1):
            if s2[q, a] == s2[q, a + 1]:
                assert i2[q, a] < i2[q, a + 1]
        rest = np.setdiff1d(np.arange(Nd), i2[q])
        if rest.size and k:
            assert ref2[q, rest].max() <= ref2[q, i2[q]].min() + 2e-5 * sc2[q].max() + 1e-30


@given(problems())
def test_pairs_property(p):
    dtype, Q, D, qm, dm, normalize = p
    if Q.ndim != 3 or D.ndim != 3:
        return
    B = min(Q.shape[0], D.shape[0])
    Q, D = Q[:B], D[:B]
    qm = None if qm is None else qm[:B]
    dm = None if dm is None else dm[:B]
    out = lik.maxsim_pairs(Q, D, qm, dm, normalize=normalize)
    assert out.shape == (B,)
    ref, sc = maxsim_ref(Q, D, qm, dm, normalize=normalize)
    ref, sc = np.diag(ref) if B else np.zeros(0), np.diag(sc) if B else np.zeros(0)
    assert_scores(out, ref, sc, dtype="float32" if dtype == "float64" else dtype, normalize=normalize)


try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


@pytest.mark.skipif(torch is None, reason="needs torch")
@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 3),
    st.integers(0, 4),
    st.integers(0, 20),
    st.integers(0, 40),
    st.sampled_from([1, 3, 16, 17, 64, 100]),
    st.booleans(),
    st.booleans(),
)
def test_bf16_torch_property(seed, Nq, Nd, Lq, Ld, d, masked, normalize):
    rng = np.random.default_rng(seed)
    Q = torch.from_numpy(rng.standard_normal((Nq, Lq, d)) * 3).to(torch.bfloat16)
    D = torch.from_numpy(rng.standard_normal((Nd, Ld, 2 * d)) * 3).to(torch.bfloat16)[..., ::2]
    qm = torch.from_numpy(rng.random((Nq, Lq)) < 0.7) if masked else None
    dm = torch.from_numpy(rng.random((Nd, Ld)) < 0.7) if masked else None
    with torch.no_grad():
        out = lik.maxsim(Q, D, qm, dm, normalize=normalize)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    ref, sc = maxsim_ref(Q, D, qm, dm, normalize=normalize)
    assert_scores(out, ref, sc, dtype="bfloat16", normalize=normalize)
