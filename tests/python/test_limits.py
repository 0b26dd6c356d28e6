"""Extreme sizes, non-finite similarities, empty dimensions and aliasing
(issue 22): every finding pinned through the Python front, numpy and torch."""

from __future__ import annotations

import time

import numpy as np
import pytest

import lik
from lik import _lib

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")

BIG = 2**31 + 3


def big(shape, dtype):
    """A stride-0 view of any shape: nothing is allocated."""
    return np.broadcast_to(np.zeros((1,) * len(shape), dtype), shape)


def fast(fn, *args, **kw):
    """Runs fn, which must raise; returns the exception, checks it took < 1 s."""
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:
        fn(*args, **kw)
    assert time.monotonic() - t0 < 1.0
    return info.value


# ---- sequence lengths beyond INT32_MAX: one error on every dtype path ----------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_length_beyond_int32_is_refused(dtype):
    q = np.ones((1, 2, 4), dtype)
    e = fast(lik.maxsim, q, big((1, BIG, 4), dtype))
    assert isinstance(e, ValueError) and "D: sequence length Ld=2147483651 exceeds" in str(e)
    e = fast(lik.maxsim_pairs, big((1, BIG, 4), dtype), q)
    assert isinstance(e, ValueError) and "Q: sequence length Lq=2147483651" in str(e)
    e = fast(lik.retrieve, q, big((1, BIG, 4), dtype), 1)
    assert isinstance(e, ValueError) and "Ld=2147483651" in str(e)
    e = fast(lik.maxsim, big((1, 2**31, 4), dtype), big((1, 2**31, 4), dtype))
    assert isinstance(e, ValueError) and "Lq=2147483648" in str(e)


@needs_torch
@pytest.mark.parametrize("requires_grad", [False, True])
def test_length_beyond_int32_torch_float64(requires_grad):
    # the float64 front rescored from a wrapped argmax and returned 0.0
    q = torch.ones(1, 1, 4, dtype=torch.float64, requires_grad=requires_grad)
    d = torch.zeros(1, 1, 4, dtype=torch.float64).expand(1, BIG, 4)
    lik.maxsim(q, q.detach())  # the first custom-op call sets torch up (not timed)
    for fn in (lik.maxsim, lik.maxsim_pairs):
        e = fast(fn, q, d)
        assert isinstance(e, ValueError) and "Ld=2147483651" in str(e), e


@needs_torch
def test_scratch_overflow_is_an_allocation_error():
    m = 2**31 - 1  # Lq = d = INT32_MAX: within the limits, its scratch cannot exist
    q = torch.zeros(1, 1, 1).expand(1, m, m)  # numpy refuses views of 2^62 elements
    d = torch.zeros(1, 1, 1).expand(1, 1, m)
    lik.maxsim(torch.zeros(1, 1, 1), torch.zeros(1, 1, 1))  # not timed: torch setup
    e = fast(lik.maxsim, q, d)
    assert isinstance(e, lik.LikError) and e.status == _lib.LIK_ERR_ALLOC
    assert "Lq=2147483647" in str(e) and "d=2147483647" in str(e)


# ---- empty dimensions: zeros / empty results on every dtype --------------------------------


@needs_torch
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_empty_dimensions_torch(dtype):
    q = torch.randn(2, 3, 4, dtype=dtype, requires_grad=True)
    cases = [
        (lik.maxsim_pairs, torch.randn(2, 0, 4, dtype=dtype), (2,)),  # pairs, Ld = 0
        (lik.maxsim, torch.randn(2, 5, 0, 4, dtype=dtype), (2, 5)),  # KD, Ld = 0
        (lik.maxsim, torch.randn(2, 0, 5, 4, dtype=dtype), (2, 0)),  # KD, K = 0
        (lik.maxsim, torch.randn(5, 0, 4, dtype=dtype), (2, 5)),  # cross, Ld = 0
        (lik.maxsim, torch.randn(0, 3, 4, dtype=dtype), (2, 0)),  # cross, Nd = 0
    ]
    for fn, d, shape in cases:
        s = fn(q, d)
        assert s.shape == shape and s.dtype == dtype and bool((s == 0).all())
        s.sum().backward()
        assert bool((q.grad == 0).all())
        q.grad = None
    s = lik.maxsim(q[:, :0], torch.randn(5, 3, 4, dtype=dtype))  # Lq = 0
    assert s.shape == (2, 5) and bool((s == 0).all())


# ---- non-finite similarities (lik.h) -------------------------------------------------------


def _inf_problem(dtype):
    """One query token q = [1, 0]; documents whose tokens t = [v, 0] have
    similarity v.  Returns (Q, D, d_mask, expected scores, expected argmax)."""
    inf, nan = np.inf, np.nan
    docs = [  # (values, valid), expected score, expected argmax
        (([-inf], [1]), -inf, 0),
        (([nan, -inf, nan], [1, 1, 1]), -inf, 1),
        (([nan, nan], [1, 1]), 0.0, -1),
        (([-inf, 3, -inf], [1, 1, 1]), 3.0, 1),
        (([inf, -inf], [1, 1]), inf, 0),
        (([-inf, nan], [0, 1]), 0.0, -1),
        (([-inf, 2], [0, 1]), 2.0, 1),
    ]
    L = 3
    D = np.zeros((len(docs), L, 2), dtype)
    m = np.zeros((len(docs), L), bool)
    for j, ((v, valid), _, _) in enumerate(docs):
        D[j, : len(v), 0] = v
        m[j, : len(v)] = np.array(valid, bool)
    Q = np.array([[[1.0, 0.0]]], dtype)
    return Q, D, m, np.array([[s for _, s, _ in docs]]), np.array([[[a] for _, _, a in docs]])


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_infinite_similarities_numpy(dtype):
    Q, D, m, want, want_am = _inf_problem(dtype)
    s, am = lik._api._forward(Q, D, None, m, with_argmax=True)
    np.testing.assert_array_equal(s, want.astype(np.float32))
    np.testing.assert_array_equal(am, want_am)
    # fp32 overflow of finite inputs is -inf too
    s = lik.maxsim(np.array([[1e20, 0]], np.float32), np.array([[-1e20, 0]], np.float32))
    assert s == -np.inf


@needs_torch
def test_infinite_similarities_torch_float64():
    Q, D, m, want, _ = _inf_problem(np.float64)
    q = torch.from_numpy(Q).requires_grad_()
    s = lik.maxsim(q, torch.from_numpy(D), None, torch.from_numpy(m))
    assert s.dtype == torch.float64
    np.testing.assert_array_equal(s.detach().numpy(), want)


def test_retrieve_ranks_minus_inf_last(rng):
    Q = np.array([[[1.0, 0.0]]], np.float32)
    vals = rng.permutation(np.array([1.0, -np.inf, np.nan, -5.0], np.float32))
    D = np.zeros((4, 1, 2), np.float32)
    D[:, 0, 0] = vals
    s, i = lik.retrieve(Q, D, 4, normalize=False)
    order = [int(np.flatnonzero(vals == v)[0]) if not np.isnan(v) else int(np.flatnonzero(np.isnan(vals))[0])
             for v in (1.0, np.nan, -5.0, -np.inf)]
    np.testing.assert_array_equal(i[0], order)
    np.testing.assert_array_equal(s[0], [1.0, 0.0, -5.0, -np.inf])  # all-NaN document: 0


# ---- argument dtypes and aliasing ----------------------------------------------------------


def test_list_documents_with_float_masks(rng):
    Q = rng.standard_normal((2, 3, 4)).astype(np.float32)
    docs = [rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)]
    with pytest.raises(TypeError, match=r"d_mask\[0\]: dtype float32 is not a mask dtype"):
        lik.retrieve(Q, docs, 1, d_mask=[np.ones(5, np.float32), np.ones(2, np.float32)])
    if torch is not None:
        with pytest.raises(TypeError, match=r"d_mask\[1\]: dtype float64 is not a mask dtype"):
            lik.retrieve(Q, docs, 1, d_mask=[torch.ones(5, dtype=torch.bool), torch.ones(2, dtype=torch.float64)])
    # bool / uint8 masks work, and mask out the right tokens
    s, _ = lik.retrieve(Q, docs, 2, d_mask=[np.eye(5, dtype=bool)[0], np.ones(2, np.uint8)], normalize=False)
    ref = lik.maxsim(Q, np.stack([docs[0][0], docs[1][0]])[:, None], normalize=False)
    ref2 = lik.maxsim(Q, docs[1])
    np.testing.assert_allclose(np.sort(s, axis=1), np.sort(np.stack([ref[:, 0], ref2], 1), axis=1), rtol=1e-6)


@needs_torch
def test_padded_lengths_must_be_integers():
    q, d = torch.randn(2, 3, 4), torch.randn(2, 2, 5, 4)
    with pytest.raises(TypeError, match="query_lengths: dtype torch.float32 is not an integer dtype"):
        lik.maxsim_padded(q, d, torch.tensor([1.0, 2.0]), torch.tensor([[1, 2], [3, 4]]))
    with pytest.raises(TypeError, match="doc_lengths: dtype torch.bool"):
        lik.maxsim_padded(q, d, torch.tensor([1, 2]), torch.ones(2, 2, dtype=torch.bool))


def test_output_aliasing_an_input_is_refused(rng):
    buf = rng.standard_normal(64).astype(np.float32)
    Q, D = buf[:24].reshape(2, 3, 4), buf[24:48].reshape(2, 3, 4)
    with pytest.raises(ValueError, match="scores: overlaps Q in memory"):
        _lib.call_maxsim(Q, D, None, None, buf[10:14].reshape(2, 2))
    before = buf.copy()
    scores = np.empty((2, 2), np.float32)
    _lib.call_maxsim(Q, D, None, None, scores)  # disjoint: fine, inputs untouched
    np.testing.assert_array_equal(buf, before)


def test_public_docstrings_state_args_and_raises():
    for fn in (lik.maxsim, lik.maxsim_pairs, lik.retrieve):
        doc = fn.__doc__ or ""
        for section in ("Args:", "Returns:", "Raises:", "TypeError", "ValueError"):
            assert section in doc, (fn.__name__, section)
