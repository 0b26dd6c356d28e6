"""lik.distributed.topk_merge (C lik_topk_merge) from Python: numpy and torch
inputs, lengths per list or per (list, query), the order rule, errors."""

from __future__ import annotations

import numpy as np
import pytest

import lik

ld = pytest.importorskip("lik.distributed")


def _lists():
    # R = 2 lists, Nq = 2 queries, K = 3; padding past the lengths is garbage
    s = np.array([[[3.0, 1.0, np.nan], [2.0, 2.0, -1.0]],
                  [[3.0, 0.5, 9.0], [np.nan, 7.0, 7.0]]], dtype=np.float32)
    i = np.array([[[4, 0, -1], [1, 5, 2]],
                  [[2, 9, -1], [3, -1, -1]]], dtype=np.int64)
    return s, i


def test_numpy_lengths_per_list_and_query():
    s, i = _lists()
    lengths = np.array([[2, 3], [2, 1]])
    out_s, out_i = ld.topk_merge(s, i, 3, lengths)
    assert isinstance(out_s, np.ndarray) and out_s.dtype == np.float32 and out_i.dtype == np.int64
    np.testing.assert_array_equal(out_i, [[2, 4, 0], [1, 5, 2]])  # 3.0 tie: id 2 before id 4
    np.testing.assert_array_equal(out_s, np.array([[3.0, 3.0, 1.0], [2.0, 2.0, -1.0]], np.float32))


def test_torch_lengths_per_list_nan_last():
    torch = pytest.importorskip("torch")
    s, i = _lists()
    s[1, 1] = [np.nan, np.nan, np.nan]
    i[1, 1] = [0, 8, 9]
    out_s, out_i = ld.topk_merge(torch.from_numpy(s), torch.from_numpy(i), 5, torch.tensor([3, 2]))
    assert isinstance(out_s, torch.Tensor)
    # query 0: the 3.0 tie by id, list 0's third entry (NaN) last; query 1: NaNs by id (0 before 8)
    assert out_i[0].tolist() == [2, 4, 0, 9, -1]
    assert out_i[1].tolist() == [1, 5, 2, 0, 8]
    assert np.isnan(out_s[1, 3:].numpy()).all()


def test_same_as_retrieve_of_concatenated_shards():
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((4, 5, 8)).astype(np.float32)
    D = rng.integers(-1, 2, size=(30, 6, 8)).astype(np.float32)  # ties
    sizes, k = [7, 0, 11, 12], 9
    ws, wi = lik.retrieve(Q, D, k)
    cs = np.zeros((4, 4, k), np.float32)
    ci = np.zeros((4, 4, k), np.int64)
    off = 0
    for r, n in enumerate(sizes):
        s, i = lik.retrieve(Q, D[off:off + n], k)
        cs[r, :, : s.shape[1]], ci[r, :, : s.shape[1]] = s, i + off
        off += n
    ms, mi = ld.topk_merge(cs, ci, k, np.minimum(sizes, k))
    assert ms.tobytes() == ws.tobytes()
    np.testing.assert_array_equal(mi, wi)


@pytest.mark.parametrize(
    "mutate, exc, needle",
    [
        (lambda s, i, L, k: (s.astype(np.float64), i, L, k), TypeError, "scores: dtype float64, expected float32"),
        (lambda s, i, L, k: (s, i.astype(np.int32), L, k), TypeError, "indices: dtype int32, expected int64"),
        (lambda s, i, L, k: (s, i[:, :, :2], L, k), ValueError, "indices: shape [2, 2, 2], expected [2, 2, 3]"),
        (lambda s, i, L, k: (s[0], i, L, k), ValueError, "scores: expected 3 dimensions, got 2"),
        (lambda s, i, L, k: (s, i, np.array([[1, 4], [0, 0]]), k), ValueError, "lengths: entry [0, 1] = 4 is outside [0, K=3]"),
        (lambda s, i, L, k: (s, i, np.array([1, 2, 3]), k), ValueError, "lengths: expected 2 dimensions"),
        (lambda s, i, L, k: (s, i, L, 0), ValueError, "top_k: got 0, but top_k must be positive"),
        (lambda s, i, L, k: (s, i, L, 6), ValueError, "top_k=6 exceeds the 4 candidates of query 0"),
        (lambda s, i, L, k: (s[:, :, ::-1], i, L, k), ValueError, "list 0 of query 0 is not sorted"),
        (lambda s, i, L, k: (s, i, L, 2.0), TypeError, "top_k: expected an int, got float"),
        (lambda s, i, L, k: ([1.0], i, L, k), TypeError, "scores: expected a numpy array or torch tensor"),
    ],
)
def test_errors(mutate, exc, needle):
    s, i = _lists()
    s, i, L, k = mutate(s, i, np.array([[2, 3], [2, 1]]), 2)
    with pytest.raises(exc) as e:
        ld.topk_merge(s, i, k, L)
    assert needle in str(e.value)


def test_distributed_functions_need_an_initialised_group():
    torch = pytest.importorskip("torch")
    if torch.distributed.is_initialized():
        pytest.skip("a process group is initialised")
    with pytest.raises(RuntimeError, match="torch.distributed is not initialised"):
        ld.retrieve(np.zeros((1, 2, 3), np.float32), np.zeros((1, 2, 3), np.float32), 1)
    with pytest.raises(RuntimeError, match="not initialised"):
        ld.all_gather_with_grad(torch.zeros(2))
