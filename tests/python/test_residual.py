"""Residual MaxSim (lik.maxsim_residual, lik.maxsim_residual_varlen) and
PLAID's centroid score (lik.plaid.plaid_approx_score) against decode-then-
MaxSim in float64 with the independent numpy codec (_colbert_codec.py), and
against lik's own dense maxsim on the decoded tokens."""

from __future__ import annotations

import numpy as np
import pytest

import lik
from lik import plaid

import _colbert_codec as ref

torch = pytest.importorskip("torch")


def _index(rng, nbits, d, C, lengths, layout="colbert"):
    """A random compressed corpus: (codes [T], residuals [T, w], cu [Nd+1],
    centroids fp16, weights)."""
    cent = rng.standard_normal((C, d)).astype(np.float32)
    cent = (cent / np.linalg.norm(cent, axis=1, keepdims=True)).astype(np.float16)
    T = int(sum(lengths))
    codes = rng.integers(0, C, T).astype(np.int32)
    res = rng.integers(0, 256, (T, d * nbits // 8)).astype(np.uint8)
    weights = np.sort(rng.standard_normal(1 << nbits) * 0.1).astype(np.float32)
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return codes, res, cu, cent, weights


def _docs(codes, res, cu, cent, weights, nbits, layout, normalize):
    x = ref.decompress(codes, res, cent, weights, nbits, layout, normalize)
    return [x[cu[j]:cu[j + 1]] for j in range(len(cu) - 1)]


def _padded(codes, res, cu, fill_code):
    lengths = np.diff(cu)
    nd, ld = len(lengths), int(lengths.max(initial=0)) + 2
    pc = np.full((nd, ld), fill_code, np.int64)
    pr = np.zeros((nd, ld, res.shape[1]), np.uint8)
    for j in range(nd):
        pc[j, :lengths[j]] = codes[cu[j]:cu[j + 1]]
        pr[j, :lengths[j]] = res[cu[j]:cu[j + 1]]
    return pc, pr, lengths


@pytest.mark.parametrize("nbits", (1, 2, 4, 8))
@pytest.mark.parametrize("layout", ("colbert", "lik"))
@pytest.mark.parametrize("normalize", (True, False))
def test_varlen_and_padded_match_reference(rng, nbits, layout, normalize):
    for d in [d for d in (8, 17, 48, 96, 128) if d * nbits % 8 == 0][:3]:
        lengths = [int(x) for x in rng.integers(0, 40, int(rng.integers(1, 8)))]
        lengths[0] = 1
        codes, res, cu, cent, w = _index(rng, nbits, d, int(rng.integers(1, 60)), lengths)
        Q = rng.standard_normal((int(rng.integers(1, 4)), int(rng.integers(1, 40)), d)).astype(np.float32)
        want = ref.maxsim(Q, _docs(codes, res, cu, cent, w, nbits, layout, normalize), normalize)
        got = lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits, normalize=normalize, layout=layout)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * (1 if normalize else 10))
        pc, pr, lens = _padded(codes, res, cu, fill_code=-3)  # padding never read
        got_p = lik.maxsim_residual(Q, pc, pr, lens, cent, w, nbits, normalize=normalize, layout=layout)
        np.testing.assert_array_equal(got_p, got)


def test_matches_dense_maxsim_on_decoded_tokens(rng):
    nbits, d = 2, 128
    lengths = [int(x) for x in rng.integers(1, 300, 20)]
    codes, res, cu, cent, w = _index(rng, nbits, d, 257, lengths)
    Q = torch.from_numpy(rng.standard_normal((3, 32, d)).astype(np.float32))
    x = plaid.decompress(codes, res, cent, w, nbits)  # normalised, float32
    dense = lik.maxsim_varlen(Q.reshape(-1, d), torch.from_numpy(x), torch.arange(0, 97, 32, dtype=torch.int32),
                              torch.from_numpy(cu), normalize=True)
    got = lik.maxsim_residual_varlen(Q, torch.from_numpy(codes), torch.from_numpy(res), torch.from_numpy(cu),
                                     torch.from_numpy(cent), torch.from_numpy(w), nbits)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    torch.testing.assert_close(got, dense, rtol=1e-5, atol=1e-5)


def test_empty_documents_batches_and_2d_query(rng):
    nbits, d = 4, 16
    codes, res, cu, cent, w = _index(rng, nbits, d, 5, [0, 3, 0])
    Q = rng.standard_normal((7, d)).astype(np.float32)
    s = lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits)
    assert s.shape == (3,) and s[0] == 0 and s[2] == 0 and s[1] != 0
    assert lik.maxsim_residual_varlen(Q[None][:0], codes, res, cu, cent, w, nbits).shape == (0, 3)
    e = lik.maxsim_residual_varlen(Q, codes[:0], res[:0], np.zeros(1, np.int64), cent, w, nbits)
    assert e.shape == (0,)
    pc, pr, lens = _padded(codes, res, cu, fill_code=99)
    np.testing.assert_array_equal(lik.maxsim_residual(Q, pc, pr, lens, cent, w, nbits), s)


def test_strided_views_and_dtypes(rng):
    nbits, d = 2, 48
    codes, res, cu, cent, w = _index(rng, nbits, d, 11, [5, 9, 4])
    Q = rng.standard_normal((2, 6, d)).astype(np.float32)
    base = lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits)
    res_s = np.zeros((res.shape[0], 2 * res.shape[1]), np.uint8)
    res_s[:, ::2] = res
    codes_s = np.zeros(2 * len(codes), np.int64)
    codes_s[::2] = codes
    Qt = np.ascontiguousarray(Q.transpose(0, 2, 1)).transpose(0, 2, 1)
    got = lik.maxsim_residual_varlen(Qt, codes_s[::2], res_s[:, ::2], cu.astype(np.int32), cent.astype(np.float32),
                                     w.astype(np.float16), nbits)
    want = lik.maxsim_residual_varlen(Q, codes, res, cu, cent.astype(np.float32), w.astype(np.float16), nbits)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(base, want, rtol=1e-3)  # fp16 weights
    got16 = lik.maxsim_residual_varlen(torch.from_numpy(Q).bfloat16(), torch.from_numpy(codes), torch.from_numpy(res),
                                       torch.from_numpy(cu), torch.from_numpy(cent), torch.from_numpy(w), nbits)
    np.testing.assert_allclose(got16.numpy(), base, rtol=2e-2, atol=2e-2)


def test_thread_count_invariance(rng, threads):
    nbits, d = 2, 128
    lengths = [int(x) for x in rng.integers(0, 200, 37)]
    codes, res, cu, cent, w = _index(rng, nbits, d, 300, lengths)
    Q = rng.standard_normal((3, 33, d)).astype(np.float32)
    out = []
    for n in (1, 2, 5):
        threads.set_num_threads(n)
        out.append(lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits))
    assert all(np.array_equal(out[0], o) for o in out[1:])


@pytest.mark.parametrize("normalize", (True, False))
@pytest.mark.parametrize("packed", (True, False))
def test_grad_q(rng, normalize, packed):
    nbits, d = 4, 24
    lengths = [3, 0, 11, 6]
    codes, res, cu, cent, w = _index(rng, nbits, d, 13, lengths)
    Q = torch.tensor(rng.standard_normal((2, 5, d)), dtype=torch.float32, requires_grad=True)
    tc, tr, tcu, tcent, tw = (torch.from_numpy(a) for a in (codes, res, cu, cent, w))
    if packed:
        s = lik.maxsim_residual_varlen(Q, tc, tr, tcu, tcent, tw, nbits, normalize=normalize)
    else:
        pc, pr, lens = _padded(codes, res, cu, fill_code=0)
        s = lik.maxsim_residual(Q, torch.from_numpy(pc), torch.from_numpy(pr), torch.from_numpy(lens), tcent, tw,
                                nbits, normalize=normalize)
    g = torch.from_numpy(rng.standard_normal(s.shape).astype(np.float32))
    (s * g).sum().backward()
    # the same in float64 torch on the decoded tokens (the argmax is stable: random data)
    Q64 = Q.detach().double().requires_grad_(True)
    docs = _docs(codes, res, cu, cent, w, nbits, "colbert", normalize)
    q = Q64 / Q64.norm(dim=-1, keepdim=True).clamp_min(1e-12) if normalize else Q64
    cols = [((q @ torch.from_numpy(D).T).max(-1).values.sum(-1) if len(D) else q.sum((1, 2)) * 0) for D in docs]
    (torch.stack(cols, 1) * g.double()).sum().backward()
    torch.testing.assert_close(Q.grad.double(), Q64.grad, rtol=1e-4, atol=1e-5)


def test_no_grad_and_2d_grad(rng):
    nbits, d = 2, 16
    codes, res, cu, cent, w = _index(rng, nbits, d, 5, [4, 2])
    tc, tr, tcu, tcent, tw = (torch.from_numpy(a) for a in (codes, res, cu, cent, w))
    Q = torch.randn(3, d, requires_grad=True)
    with torch.no_grad():
        s0 = lik.maxsim_residual_varlen(Q, tc, tr, tcu, tcent, tw, nbits)
    s = lik.maxsim_residual_varlen(Q, tc, tr, tcu, tcent, tw, nbits)
    torch.testing.assert_close(s.detach(), s0)
    s.sum().backward()
    assert Q.grad.shape == Q.shape and torch.isfinite(Q.grad).all()


def test_plaid_approx_score(rng):
    C = 40
    lengths = [0, 1, 7, 30, 2]
    codes = rng.integers(0, C, sum(lengths)).astype(np.int64)
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    cs = rng.standard_normal((3, 9, C)).astype(np.float32)
    got = plaid.plaid_approx_score(cs, codes, cu)
    want = np.zeros((3, len(lengths)))
    for j in range(len(lengths)):
        c = codes[cu[j]:cu[j + 1]]
        if len(c):
            want[:, j] = cs[:, :, c].max(-1).sum(-1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(plaid.plaid_approx_score(cs[1], codes, cu), want[1], rtol=1e-6, atol=1e-6)
    t = plaid.plaid_approx_score(torch.from_numpy(cs).half(), torch.from_numpy(codes), torch.from_numpy(cu))
    np.testing.assert_allclose(t.numpy(), want, rtol=2e-3, atol=2e-3)
    with pytest.raises(ValueError, match=r"codes\[3\]=40 is outside \[0, C=40\)"):
        bad = codes.copy()
        bad[3] = 40
        plaid.plaid_approx_score(cs, bad, cu)


def test_scoring_errors(rng):
    nbits, d = 2, 16
    codes, res, cu, cent, w = _index(rng, nbits, d, 5, [4, 2])
    Q = rng.standard_normal((2, 3, d)).astype(np.float32)
    pc, pr, lens = _padded(codes, res, cu, fill_code=0)
    with pytest.raises(ValueError, match=r"doc_lengths: doc_lengths\[1\]=-1 is outside \[0, Ld=6\]"):
        lik.maxsim_residual(Q, pc, pr, np.array([4, -1]), cent, w, nbits)
    with pytest.raises(ValueError, match=r"doc_lengths\[0\]=7 is outside \[0, Ld=6\]"):
        lik.maxsim_residual(Q, pc, pr, np.array([7, 1]), cent, w, nbits)
    with pytest.raises(ValueError, match="cu_seqlens_d: cu_seqlens_d\\[2\\]=5 < cu_seqlens_d\\[1\\]=6"):
        lik.maxsim_residual_varlen(Q, codes, res, np.array([0, 6, 5, 6]), cent, w, nbits)
    with pytest.raises(ValueError, match="does not equal codes' T=6"):
        lik.maxsim_residual_varlen(Q, codes, res, np.array([0, 4, 5]), cent, w, nbits)
    with pytest.raises(ValueError, match=r"codes: codes\[1, 0\]=5 is outside \[0, C=5\)"):
        bad = pc.copy()
        bad[1, 0] = 5
        lik.maxsim_residual(Q, bad, pr, lens, cent, w, nbits)
    with pytest.raises(ValueError, match=r"residuals: last dimension 8 does not match d\*nbits/8 = 4"):
        lik.maxsim_residual_varlen(Q, codes, np.zeros((6, 8), np.uint8), cu, cent, w, nbits)
    with pytest.raises(ValueError, match="Q: d=8 does not match centroids' d=16"):
        lik.maxsim_residual_varlen(Q[..., :8], codes, res, cu, cent, w, nbits)
    with pytest.raises(ValueError, match="nbits: 6"):
        lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, 6)
    with pytest.raises(ValueError, match="max_seqlen_d: 3 is shorter than the longest document"):
        lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits, max_seqlen_d=3)
    lik.maxsim_residual_varlen(Q, codes, res, cu, cent, w, nbits, max_seqlen_d=4)
