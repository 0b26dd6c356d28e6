"""Every error path of the training / packed calls: Python wrappers and the
C entry points (through ctypes), with the messages naming the argument."""

from __future__ import annotations

import ctypes

import pytest
import torch

import lik
from lik import _autograd, _lib

Q2 = torch.randn(5, 8)
D2 = torch.randn(7, 8)
CUQ = torch.tensor([0, 2, 5], dtype=torch.int32)
CUD = torch.tensor([0, 3, 7], dtype=torch.int32)


@pytest.mark.parametrize(
    "cu_q, pq, msg",
    [
        (torch.tensor([1, 2, 5]), None, "cu_seqlens_q: must start at 0"),
        (torch.tensor([0, 4, 3, 5]), None, "cu_seqlens_q: must be non-decreasing"),
        (torch.tensor([0, 2, 4]), None, "cu_seqlens_q: last entry 4 does not equal Q rows=5"),
        (CUQ, torch.tensor([0, 2]), r"pair_q_idx: entry 1 = 2 is outside \[0, Nq=2\)"),
        (CUQ, torch.tensor([-1]), "pair_q_idx: entry 0 = -1"),
    ],
)
def test_index_values_checked_for_cuda_tensors(cu_q, pq, msg):
    # the host-side check the Python front runs for CUDA tensors (the C
    # library cannot read device indices without a sync); run here on CPU tensors
    pd = torch.tensor([0]) if pq is not None else None
    with pytest.raises(ValueError, match=msg):
        _autograd._check_index_values(Q2, D2, cu_q, CUD, pq, pd)
    _autograd._check_index_values(Q2, D2, CUQ, CUD, torch.tensor([0, 1]), torch.tensor([1, 0]))


def test_max_seqlen_q_checked_for_cuda_tensors():
    # the same host-side check covers a given max_seqlen_q (longest query: 3)
    with pytest.raises(ValueError, match=r"max_seqlen_q: 2 is shorter than the longest query \(3 tokens"):
        _autograd._check_index_values(Q2, D2, CUQ, CUD, max_seqlen_q=2)
    assert _autograd._check_index_values(Q2, D2, CUQ, CUD, max_seqlen_q=3) == 3
    assert _autograd._check_index_values(Q2, D2, CUQ, CUD, max_seqlen_q=0) == 3  # 0: unknown


@pytest.mark.parametrize("bad, exc", [(-1, ValueError), ("5", TypeError), (2.5, TypeError), (True, TypeError),
                                      (2**62 + 1, ValueError)])
def test_bad_max_seqlen_q(bad, exc):
    with pytest.raises(exc, match="max_seqlen_q"):
        lik.maxsim_varlen(Q2, D2, CUQ, CUD, max_seqlen_q=bad)
    with pytest.raises(exc, match="max_seqlen_d"):
        lik.maxsim_varlen(Q2, D2, CUQ, CUD, max_seqlen_d=bad)


def test_max_seqlen_d_checked():
    # the longest document has 4 tokens: a shorter bound is a ValueError wherever cu_seqlens_d is read
    msg = r"max_seqlen_d: 3 is shorter than the longest document \(4 tokens in cu_seqlens_d\)"
    with pytest.raises(ValueError, match=msg):
        lik.maxsim_varlen(Q2, D2, CUQ, CUD, max_seqlen_d=3)
    with pytest.raises(ValueError, match=msg):
        lik.score_pairs_packed(Q2, D2, CUQ, CUD, torch.tensor([0]), torch.tensor([1]), max_seqlen_d=3)
    with pytest.raises(ValueError, match=msg):  # the host check of CUDA tensors
        _autograd._check_index_values(Q2, D2, CUQ, CUD, max_seqlen_d=3)
    ref = lik.maxsim_varlen(Q2, D2, CUQ, CUD)
    for md in (0, 4, 2**40):
        assert torch.equal(lik.maxsim_varlen(Q2, D2, CUQ, CUD, max_seqlen_d=md), ref)


def test_validate_argument():
    with pytest.raises(TypeError, match="validate: expected a bool"):
        lik.maxsim_varlen(Q2, D2, CUQ, CUD, validate="no")
    # CPU tensors are checked whatever validate says (no copy needed)
    for validate in (True, False):
        with pytest.raises(ValueError, match="cu_seqlens_q"):
            lik.maxsim_varlen(Q2, D2, torch.tensor([0, 4, 3, 5]), CUD, validate=validate)
        with pytest.raises(ValueError, match="max_seqlen_q: 2 is shorter"):
            lik.score_pairs_packed(Q2, D2, CUQ, CUD, torch.tensor([0]), torch.tensor([0]), max_seqlen_q=2,
                                   validate=validate)


def test_packed_width():
    """The Lq bound of a packed call (saved argmax, CUDA query blocks): a
    given max_seqlen_q capped at Q's rows (5); else the longest query (3),
    or Q's rows where nothing can be read back (CUDA graph capture,
    torch.compile)."""
    w = _autograd._packed_width
    for mq, want in ((None, 3), (0, 3), (3, 3), (4, 4), (2**40, 5)):
        assert w(Q2, D2, CUQ, CUD, None, None, mq, None, True) == want
    with pytest.raises(ValueError, match="max_seqlen_q: 2 is shorter"):
        w(Q2, D2, CUQ, CUD, None, None, 2, None, False)


def test_nothing_read_back_where_it_cannot_be(monkeypatch):
    """Where lik._lib.can_read_back says no (a CUDA graph being captured,
    torch.compile tracing), a packed call reads no value of cu_seqlens, the
    pairs or the masks on the host: simulated here on CPU tensors, whose C
    calls still check them.  Forward and backward match the eager calls
    bitwise (on the CPU the bound only sizes the argmax)."""
    Q = torch.randn(9, 8, dtype=torch.float64)
    D = torch.randn(11, 8, dtype=torch.float64)
    cu_q, cu_d = torch.tensor([0, 4, 4, 9]), torch.tensor([0, 5, 6, 11], dtype=torch.int32)
    pq, pd = torch.tensor([2, 0, 2]), torch.tensor([1, 2, 0])
    qm = torch.rand(9) > 0.2

    def run(mq):
        Qg = Q.clone().requires_grad_(True)
        a = lik.maxsim_varlen(Qg, D, cu_q, cu_d, max_seqlen_q=mq, q_mask=qm, normalize=True)
        b = lik.score_pairs_packed(Qg, D, cu_q, cu_d, pq, pd, max_seqlen_q=mq)
        (g,) = torch.autograd.grad(a.sum() + 2 * b.sum(), Qg)
        return a, b, g

    eager = run(None)

    def no_read(*args, **kwargs):
        raise AssertionError("a host read of device values")

    monkeypatch.setattr(_lib, "can_read_back", lambda x: False)
    for name in ("_cu_values", "_check_index_values", "_max_len"):
        monkeypatch.setattr(_autograd, name, no_read)
    assert _autograd._packed_width(Q, D, cu_q, cu_d, pq, pd, None, None, True) == 9  # Q's rows
    assert _autograd._packed_width(Q, D, cu_q, cu_d, pq, pd, 7, 1, True) == 7  # as given, unchecked
    for mq in (None, 5, 7, 2**40):
        got = run(mq)
        assert all(torch.equal(x, y) for x, y in zip(got, eager)), mq


@pytest.mark.parametrize("mq", [None, 0, 3, 2**40, 2**62])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_max_seqlen_q_bounds_only(mq, dtype):
    """The saved argmax is sized by the bound given, capped at Q's rows, or
    by the longest query (3 tokens) without one (0: unknown): no huge
    allocation, the same scores and gradients."""
    Q, D = Q2.to(dtype).requires_grad_(True), D2.to(dtype)
    s = lik.maxsim_varlen(Q, D, CUQ, CUD, max_seqlen_q=mq)
    (g,) = torch.autograd.grad(s.sum(), Q)
    Qr = Q.detach().clone().requires_grad_(True)
    ref = lik.maxsim_varlen(Qr, D, CUQ, CUD)
    (gr,) = torch.autograd.grad(ref.sum(), Qr)
    assert torch.equal(s.detach(), ref.detach()) and torch.equal(g, gr)


def test_bad_cu_seqlens_with_grad_is_checked_before_sizing():
    # the argmax a training call saves is sized from checked values only
    with pytest.raises(ValueError, match="cu_seqlens_q: must be non-decreasing"):
        lik.maxsim_varlen(Q2.clone().requires_grad_(True), D2, torch.tensor([0, 2**40, 5]), CUD)
    with pytest.raises(TypeError, match="cu_seqlens_q: dtype float32"):
        lik.maxsim_varlen(Q2.clone().requires_grad_(True), D2, CUQ.float() * 1e12, CUD)


@pytest.mark.parametrize(
    "cu, msg",
    [
        (torch.tensor([1, 2, 5], dtype=torch.int32), "must start at 0"),
        (torch.tensor([0, 4, 3, 5], dtype=torch.int32), "non-decreasing"),
        (torch.tensor([0, 2, 4], dtype=torch.int32), "does not equal Q rows=5"),
        (torch.tensor([0, 2, 6], dtype=torch.int64), "does not equal Q rows=5"),
        (torch.tensor([], dtype=torch.int32), "0 entries"),
    ],
)
def test_bad_cu_seqlens_q(cu, msg):
    with pytest.raises(ValueError, match=msg):
        lik.maxsim_varlen(Q2, D2, cu, CUD, max_seqlen_q=5)
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        lik.score_pairs_packed(Q2, D2, cu, CUD, torch.tensor([0]), torch.tensor([0]), max_seqlen_q=5)


def test_bad_cu_seqlens_types():
    with pytest.raises(TypeError, match="cu_seqlens_d: dtype float32"):
        lik.maxsim_varlen(Q2, D2, CUQ, CUD.float())
    with pytest.raises(ValueError, match="cu_seqlens_d"):
        lik.maxsim_varlen(Q2, D2, CUQ, CUD[None])
    with pytest.raises(ValueError, match="cu_seqlens_d.*D rows=7"):
        lik.maxsim_varlen(Q2, D2, CUQ, torch.tensor([0, 3, 8]))
    with pytest.raises(TypeError, match="cu_seqlens_q"):
        lik.maxsim_varlen(Q2, D2, [0, 2, 5], CUD)


def test_bad_packed_embeddings():
    with pytest.raises(ValueError, match="Q"):
        lik.maxsim_varlen(Q2[None], D2, CUQ, CUD, max_seqlen_q=3)
    with pytest.raises(ValueError, match="d=4 does not match Q's d=8"):
        lik.maxsim_varlen(Q2, D2[:, :4], CUQ, CUD)
    with pytest.raises(TypeError, match="dtype"):
        lik.maxsim_varlen(Q2, D2.double(), CUQ, CUD)
    with pytest.raises(ValueError, match="q_mask"):
        lik.maxsim_varlen(Q2, D2, CUQ, CUD, q_mask=torch.ones(4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"max_seqlen_q: 1 is shorter than the longest query \(3 tokens"):
        lik.maxsim_varlen(Q2.clone().requires_grad_(True), D2, CUQ, CUD, max_seqlen_q=1)
    with pytest.raises(ValueError, match="max_seqlen_q: 2 is shorter"):
        lik.score_pairs_packed(Q2, D2, CUQ, CUD, torch.tensor([0]), torch.tensor([0]), max_seqlen_q=2)


@pytest.mark.parametrize(
    "pq, pd, exc, msg",
    [
        (torch.tensor([0, 2]), torch.tensor([0, 1]), ValueError, r"pair_q\[1\]=2 is out of range \[0, Nq=2\)"),
        (torch.tensor([0, -1]), torch.tensor([0, 1]), ValueError, r"pair_q\[1\]=-1"),
        (torch.tensor([0, 1]), torch.tensor([5, 1]), ValueError, r"pair_d\[0\]=5 is out of range \[0, Nd=2\)"),
        (torch.tensor([0, 1]), torch.tensor([0]), ValueError, "pair_d: has 1 pairs but pair_q has 2"),
        (torch.tensor([0.0, 1.0]), torch.tensor([0, 1]), TypeError, "pair_q: dtype float32"),
        (torch.tensor([[0, 1]]), torch.tensor([0, 1]), ValueError, "pair_q"),
    ],
)
def test_bad_pairs(pq, pd, exc, msg):
    with pytest.raises(exc, match=msg):
        lik.score_pairs_packed(Q2, D2, CUQ, CUD, pq, pd)


def test_bad_backward_and_padded_arguments():
    Q, D = torch.randn(2, 3, 8), torch.randn(4, 5, 8)
    with pytest.raises(ValueError, match="backward= must be one of"):
        lik.maxsim(Q, D, backward="atomic")
    with pytest.raises(ValueError, match="backward= must be one of"):
        lik.maxsim_varlen(Q2, D2, CUQ, CUD, backward="csr")
    docs = torch.randn(2, 3, 5, 8)
    ql, dl = torch.tensor([3, 1]), torch.tensor([[5, 1, 0], [2, 2, 2]])
    with pytest.raises(ValueError, match="queries: must be"):
        lik.maxsim_padded(Q[0], docs, ql, dl)
    with pytest.raises(ValueError, match="documents: must be"):
        lik.maxsim_padded(Q, D, ql, dl)
    with pytest.raises(ValueError, match="batch B=3"):
        lik.maxsim_padded(Q, torch.randn(3, 3, 5, 8), ql, dl)
    with pytest.raises(ValueError, match="query_lengths: must be"):
        lik.maxsim_padded(Q, docs, ql[:1], dl)
    with pytest.raises(ValueError, match="doc_lengths: must be"):
        lik.maxsim_padded(Q, docs, ql, dl[:, :2])
    with pytest.raises(ValueError, match="query_lengths: every entry"):
        lik.maxsim_padded(Q, docs, torch.tensor([4, 1]), dl)
    with pytest.raises(ValueError, match="doc_lengths: every entry"):
        lik.maxsim_padded(Q, docs, ql, torch.tensor([[6, 1, 0], [2, 2, 2]]))
    with pytest.raises(ValueError, match="doc_lengths: every entry"):
        lik.maxsim_padded(Q, docs, ql, torch.tensor([[-1, 1, 0], [2, 2, 2]]))


# ---- the C backward entry points directly ------------------------------------------------


def _c_backward(Q, D, qm, dm, argmax, gs, gQ, gD, *, backward=0, fn="lik_maxsim_backward"):
    keep = [_lib.view(x) for x in (Q, D, qm, dm, argmax, gs, gQ, gD)]
    ptr = [ctypes.byref(t) if t is not None else None for _, t in keep]
    o = _lib.make_options()
    o.backward = backward
    st = getattr(_lib.lib, fn)(*ptr[:6], ctypes.byref(o), *ptr[6:])
    return st, (_lib.lib.lik_last_error() or b"").decode()


def _setup():
    Q, D = torch.randn(2, 3, 8), torch.randn(4, 5, 8)
    dm = torch.ones(4, 5, dtype=torch.bool)
    dm[:, 4] = False
    scores = torch.empty(2, 4)
    argmax = torch.empty(2, 4, 3, dtype=torch.int32)
    _lib.call_maxsim(Q, D, None, dm, scores, argmax)
    return Q, D, dm, argmax, torch.randn(2, 4), torch.empty_like(Q), torch.empty_like(D)


def test_c_backward_ok_and_argument_errors():
    Q, D, dm, am, gs, gQ, gD = _setup()
    assert _c_backward(Q, D, None, dm, am, gs, gQ, gD)[0] == _lib.LIK_OK
    assert _c_backward(Q, D, None, dm, am, gs, None, None)[0] == _lib.LIK_OK
    cases = [
        (dict(argmax=None), _lib.LIK_ERR_NULL, "argmax: is NULL"),
        (dict(gs=None), _lib.LIK_ERR_NULL, "grad_scores: is NULL"),
        (dict(argmax=am[:, :, :2]), _lib.LIK_ERR_SHAPE, "argmax: shape"),
        (dict(argmax=am.long()), _lib.LIK_ERR_DTYPE, "argmax: dtype int64"),
        (dict(gs=gs.int()), _lib.LIK_ERR_DTYPE, "grad_scores: dtype int32"),
        (dict(gs=gs.half()), _lib.LIK_ERR_DTYPE, "grad_scores: dtype float16"),
        (dict(gs=gs[:, :3]), _lib.LIK_ERR_SHAPE, "grad_scores: shape"),
        (dict(gQ=gQ.double()), _lib.LIK_ERR_DTYPE, "grad_Q: dtype float64"),
        (dict(gD=gD[:3]), _lib.LIK_ERR_SHAPE, "grad_D: shape"),
        (dict(gQ=torch.empty(1, 3, 8).expand(2, 3, 8)), _lib.LIK_ERR_SHAPE, "grad_Q: stride 0"),
        (dict(dm=torch.ones(4, 4, dtype=torch.bool)), _lib.LIK_ERR_SHAPE, "d_mask"),
        (dict(backward=9), _lib.LIK_ERR_VALUE, "opts->backward: 9"),
        (dict(D=D.double()), _lib.LIK_ERR_DTYPE, "D: dtype float64"),
    ]
    for kw, status, msg in cases:
        args = dict(Q=Q, D=D, qm=None, dm=dm, argmax=am, gs=gs, gQ=gQ, gD=gD)
        backward = kw.pop("backward", 0)
        args.update(kw)
        st, err = _c_backward(args["Q"], args["D"], args["qm"], args["dm"], args["argmax"], args["gs"],
                              args["gQ"], args["gD"], backward=backward)
        assert st == status, (kw, err)
        assert msg in err, (kw, err)


@pytest.mark.parametrize("bad", [5, -2, 4])
def test_c_backward_rejects_bad_argmax_values(bad):
    Q, D, dm, am, gs, gQ, gD = _setup()
    am = am.clone()
    am[1, 2, 0] = bad  # 5: out of range, -2: negative, 4: a masked doc token
    for backward in (0, 1, 2):
        st, err = _c_backward(Q, D, None, dm, am, gs, gQ, gD, backward=backward)
        assert st == _lib.LIK_ERR_VALUE and "argmax" in err


def test_c_backward_cuda_tensors_without_a_gpu():
    """CUDA tensors: a build without the CUDA backend says so (UNSUPPORTED); a
    CUDA build on a machine without a GPU reports the runtime's error.  (With
    a GPU, tests/gpu runs the CUDA backward on real device memory.)"""
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: tests/gpu covers the CUDA backward")
    Q, D, dm, am, gs, gQ, gD = _setup()
    keep = [_lib.view(x) for x in (Q, D, am, gs, gQ, gD)]
    for _, t in keep:
        t.device = _lib.LIK_CUDA
    o = _lib.make_options()
    p = [ctypes.byref(t) for _, t in keep]
    st = _lib.lib.lik_maxsim_backward(p[0], p[1], None, None, p[2], p[3], ctypes.byref(o), p[4], p[5])
    assert st in (_lib.LIK_ERR_UNSUPPORTED, _lib.LIK_ERR_CUDA)
    assert b"CUDA" in _lib.lib.lik_last_error()


def test_c_pairs_backward_and_packed_backward_errors():
    Q, D = torch.randn(2, 3, 8), torch.randn(3, 5, 8)
    st, err = _c_backward(Q, D, None, None, torch.zeros(2, 3, dtype=torch.int32), torch.zeros(2), None, None,
                          fn="lik_maxsim_pairs_backward")
    assert st == _lib.LIK_ERR_SHAPE and "batch B=3" in err
    # packed backward: argmax too short for the longest query
    keep = [_lib.view(x) for x in (Q2, D2, CUQ, CUD, None, None, torch.zeros(2, 2, 2, dtype=torch.int32),
                                   torch.zeros(2, 2), torch.empty_like(Q2), None)]
    p = [ctypes.byref(t) if t is not None else None for _, t in keep]
    o = _lib.make_options()
    st = _lib.lib.lik_maxsim_varlen_backward(*p[:8], ctypes.byref(o), *p[8:])
    assert st == _lib.LIK_ERR_SHAPE and b"shorter than the longest query (3 tokens)" in _lib.lib.lik_last_error()


def test_backward_without_saved_argmax_is_an_error():
    ctx = type("Ctx", (), {})()
    ctx.saved_tensors = (Q2, D2, None, None, torch.empty(0, dtype=torch.int32))
    ctx.saved_argmax = False
    with pytest.raises(RuntimeError, match="without saving the argmax"):
        _autograd._maxsim_backward(ctx, torch.ones(1), None)


@pytest.mark.parametrize(
    "qshape, dshape",
    [((8,), (4, 5, 8)), ((), (4, 5, 8)), ((2, 3, 8), (8,)), ((3, 8), (2, 2, 5, 8)), ((1, 2, 3, 8), (4, 5, 8))],
)
def test_bad_ranks_raise_value_errors_with_grad(qshape, dshape):
    Q = torch.randn(qshape, requires_grad=True)
    D = torch.randn(dshape, requires_grad=True)
    with pytest.raises(ValueError):
        lik.maxsim(Q, D)
    with pytest.raises(ValueError):
        lik.maxsim_pairs(Q, D)
