"""q_lengths / d_lengths (lik_options' lengths) against the float64 reference.

A length is a prefix mask: every test fills the tokens past each length with
NaN / Inf garbage, so a kernel that read them would fail.
"""

from __future__ import annotations

import numpy as np
import pytest

import lik
from _reference import assert_scores, maxsim_ref

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")


def rand(rng, shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def lengths(rng, shape, L):
    """Random lengths in [0, L], with 0 and L present where there is room."""
    n = rng.integers(0, L + 1, size=shape).astype(np.int32)
    flat = n.reshape(-1)
    if flat.size >= 2:
        flat[0], flat[-1] = 0, L
    return n


def prefix(n, L):
    """The prefix mask [..., L] of lengths n."""
    return np.arange(L) < np.asarray(n)[..., None]


def garbage(x, n, bad=np.nan):
    """x with every token past its sequence's length set to `bad`."""
    x = x.copy()
    x[~prefix(n, x.shape[-2])] = bad
    return x


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@pytest.mark.parametrize("d", [1, 3, 17, 48, 96, 1000])
@pytest.mark.parametrize("Lq,Ld", [(1, 1), (7, 33), (33, 301)])
def test_cross_lengths(rng, dtype, d, Lq, Ld):
    nq, nd = lengths(rng, 3, Lq), lengths(rng, 5, Ld)
    Q = garbage(rand(rng, (3, Lq, d), dtype), nq)
    D = garbage(rand(rng, (5, Ld, d), dtype), nd, np.inf)
    out = lik.maxsim(Q, D, q_lengths=nq, d_lengths=nd)
    ref, sc = maxsim_ref(Q, D, prefix(nq, Lq), prefix(nd, Ld))
    assert_scores(out, ref, sc)
    # exactly the prefix masks' scores
    assert np.array_equal(out, lik.maxsim(Q, D, prefix(nq, Lq), prefix(nd, Ld)))


@pytest.mark.parametrize("d", [3, 128])
def test_lengths_and_masks_combine(rng, d):
    Lq, Ld = 9, 70
    nq, nd = lengths(rng, 4, Lq), lengths(rng, 6, Ld)
    qm, dm = rng.random((4, Lq)) < 0.7, rng.random((6, Ld)) < 0.6
    Q = garbage(rand(rng, (4, Lq, d)), nq)
    D = garbage(rand(rng, (6, Ld, d)), nd)
    out = lik.maxsim(Q, D, qm, dm, q_lengths=nq, d_lengths=nd, normalize=True)
    ref, sc = maxsim_ref(Q, D, qm & prefix(nq, Lq), dm & prefix(nd, Ld), normalize=True)
    assert_scores(out, ref, sc)


@pytest.mark.parametrize("d", [1, 17, 128])
def test_kd_and_pairs_lengths(rng, d):
    Nq, K, Lq, Ld = 3, 4, 7, 45
    nq, nd = lengths(rng, Nq, Lq), lengths(rng, (Nq, K), Ld)
    Q = garbage(rand(rng, (Nq, Lq, d)), nq)
    D = garbage(rand(rng, (Nq, K, Ld, d)), nd)
    out = lik.maxsim(Q, D, q_lengths=nq, d_lengths=nd)
    ref, sc = maxsim_ref(Q, D, prefix(nq, Lq), prefix(nd, Ld))
    assert out.shape == (Nq, K)
    assert_scores(out, ref, sc)
    # pairs: the K = 1 case, with a transposed (strided) D and lengths view
    Dp = np.ascontiguousarray(D[:, 0].transpose(1, 0, 2)).transpose(1, 0, 2)
    ndp = np.ascontiguousarray(np.stack([nd[:, 0], nd[:, 1]], 1))[:, 0]
    outp = lik.maxsim_pairs(Q, Dp, q_lengths=nq, d_lengths=ndp)
    refp, scp = maxsim_ref(Q, D[:, :1], prefix(nq, Lq), prefix(nd[:, :1], Ld))
    assert_scores(outp, refp[:, 0], scp[:, 0])


def test_two_dimensional_inputs_take_0d_lengths(rng):
    Q, D = rand(rng, (5, 16)), rand(rng, (40, 16))
    nq, nd = np.array(3, np.int32), np.array(17, np.int32)
    out = lik.maxsim(garbage(Q, nq), garbage(D, nd), q_lengths=nq, d_lengths=nd)
    ref, sc = maxsim_ref(Q, D, prefix(nq, 5), prefix(nd, 40))
    assert_scores(out, ref, sc)


def test_int64_lengths_and_empty_batches(rng):
    Q, D = rand(rng, (2, 5, 8)), rand(rng, (3, 6, 8))
    nq, nd = np.array([5, 1]), np.array([0, 6, 2])  # int64
    out = lik.maxsim(Q, D, q_lengths=nq, d_lengths=nd)
    assert np.all(out[:, 0] == 0)
    ref, sc = maxsim_ref(Q, D, prefix(nq, 5), prefix(nd, 6))
    assert_scores(out, ref, sc)
    empty = lik.maxsim(Q[:0], D, q_lengths=nq[:0], d_lengths=nd)
    assert empty.shape == (0, 3)


def test_length_errors(rng):
    Q, D = rand(rng, (2, 5, 8)), rand(rng, (3, 6, 8))
    with pytest.raises(ValueError, match=r"d_lengths: entry 1 is 7, outside \[0, D's length 6\]"):
        lik.maxsim(Q, D, d_lengths=np.array([1, 7, 0], np.int32))
    with pytest.raises(ValueError, match=r"q_lengths: entry 0 is -1"):
        lik.maxsim(Q, D, q_lengths=np.array([-1, 2], np.int32))
    with pytest.raises(ValueError, match=r"d_lengths: shape \[2\] does not match D's sequences \[3\]"):
        lik.maxsim(Q, D, d_lengths=np.array([1, 2], np.int32))
    with pytest.raises(TypeError, match="q_lengths: dtype float32 is not an integer dtype"):
        lik.maxsim(Q, D, q_lengths=np.array([1.0, 2.0], np.float32))
    with pytest.raises(TypeError, match="d_lengths: dtype bool is not an integer dtype"):
        lik.maxsim_pairs(Q, D[:2], d_lengths=np.array([True, False]))
    # int64 entries outside int32 must not wrap to a valid length (2^40 -> 0); 0-d int64 lengths of 2-D D
    np.testing.assert_array_equal(lik.maxsim(Q, D[1], d_lengths=np.array(2)),
                                  lik.maxsim(Q, D[1], d_lengths=np.array(2, np.int32)))
    with pytest.raises(ValueError, match=r"d_lengths: entry 0 is 2147483647, outside \[0, D's length 6\]"):
        lik.maxsim(Q, D, d_lengths=np.array([2**40, 1, 0]))
    with pytest.raises(ValueError, match=r"q_lengths: entry 1 is -1, outside"):
        lik.maxsim(Q, D, q_lengths=np.array([1, -(2**32)]))
    if torch is not None:
        with pytest.raises(ValueError, match=r"d_lengths: entry 2 is 2147483647"):
            lik.maxsim(torch.from_numpy(Q), torch.from_numpy(D), d_lengths=torch.tensor([1, 2, 2**32 + 3]))


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint16", "uint32", "uint64", "int64"])
def test_any_integer_dtype_of_lengths(rng, dtype):
    # "integer lengths" (the docstrings): every integer dtype but uint8 (a mask dtype) and bool
    Q, D = rand(rng, (2, 5, 8)), rand(rng, (3, 6, 8))
    nq, nd = np.array([5, 1], dtype), np.array([0, 6, 2], dtype)
    ref, sc = maxsim_ref(Q, D, prefix(nq, 5), prefix(nd, 6))
    assert_scores(lik.maxsim(Q, D, q_lengths=nq, d_lengths=nd), ref, sc)
    if dtype.startswith("uint"):  # beyond int32 stays out of range, never wraps to a valid length
        with pytest.raises(ValueError, match=r"d_lengths: entry 1 is \d+, outside \[0, D's length 6\]"):
            lik.maxsim(Q, D, d_lengths=np.array([0, np.iinfo(dtype).max, 2], dtype))
    if torch is not None:
        tq, td = (torch.from_numpy(n.astype(np.int64)).to(getattr(torch, dtype)) for n in (nq, nd))
        assert_scores(lik.maxsim(torch.from_numpy(Q), torch.from_numpy(D), q_lengths=tq, d_lengths=td), ref, sc)
    with pytest.raises(TypeError, match="d_lengths: dtype uint8 is not an integer dtype for lengths"):
        lik.maxsim(Q, D, d_lengths=nd.astype(np.uint8))


@needs_torch
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16] if torch else [])
def test_torch_lengths_gradients_equal_prefix_masks(rng, dtype):
    Nq, Nd, Lq, Ld, d = 3, 4, 6, 30, 17
    nq, nd = lengths(rng, Nq, Lq), lengths(rng, Nd, Ld)
    Q = torch.from_numpy(rand(rng, (Nq, Lq, d))).to(dtype)
    D = torch.from_numpy(rand(rng, (Nd, Ld, d))).to(dtype)
    g = torch.from_numpy(rand(rng, (Nq, Nd)))

    def grads(**kw):
        q, dd = Q.clone().requires_grad_(), D.clone().requires_grad_()
        s = lik.maxsim(q, dd, normalize=True, **kw)
        (s * g).sum().backward()
        return s.detach(), q.grad, dd.grad

    a = grads(q_lengths=torch.from_numpy(nq), d_lengths=torch.from_numpy(nd).long())
    b = grads(q_mask=torch.from_numpy(prefix(nq, Lq)), d_mask=torch.from_numpy(prefix(nd, Ld)))
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    # padding past the lengths gets exactly zero gradient
    assert torch.all(a[2][torch.from_numpy(~prefix(nd, Ld))] == 0)


@needs_torch
def test_maxsim_padded_uses_lengths(rng):
    B, C, Lq, Ld, d = 2, 3, 5, 20, 8
    q = torch.from_numpy(rand(rng, (B, Lq, d)))
    docs = torch.from_numpy(rand(rng, (B, C, Ld, d)))
    ql, dl = torch.tensor([5, 2]), torch.from_numpy(lengths(rng, (B, C), Ld)).long()
    out = lik.maxsim_padded(q, docs, ql, dl)
    ref, sc = maxsim_ref(q, docs, prefix(ql.numpy(), Lq), prefix(dl.numpy(), Ld))
    assert_scores(out.numpy(), ref, sc)
