"""lik.maxsim_from_hidden (fused D-side head) against a float64 torch
reference: F.linear -> F.normalize -> masked MaxSim, and its autograd
gradients.  Fresh seeds (``rng``), odd sizes, garbage in masked tokens,
strided views, empty batches, KD layout."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import lik  # noqa: E402

SIZES = [(1, 1), (3, 17), (17, 128), (96, 17), (96, 128)]  # (d_model, d_out)


def reference(Q, H, W, b, q_mask, d_mask, normalize):
    """float64 scores of the unfused pipeline; differentiable in Q, H, W, b.
    Masked tokens are zeroed first so their garbage cannot reach a product."""
    kd = H.ndim == 4
    if q_mask is not None:
        Q = torch.where(q_mask[..., None], Q, torch.zeros((), dtype=Q.dtype))
    if d_mask is not None:
        H = torch.where(d_mask[..., None], H, torch.zeros((), dtype=H.dtype))
    D = F.linear(H, W, b)
    if normalize:
        D = F.normalize(D, dim=-1, eps=1e-12)
    S = torch.einsum("isk,ictk->icst" if kd else "isk,ctk->icst", Q, D)
    if d_mask is not None:
        S = S.masked_fill(~(d_mask[:, :, None, :] if kd else d_mask[None, :, None, :]), -torch.inf)
    if S.shape[-1] == 0:
        return S.sum(-1).sum(-1)
    m = S.amax(-1)
    ok = torch.isfinite(m)
    if q_mask is not None:
        ok = ok & q_mask[:, None, :]
    return torch.where(ok, m, torch.zeros((), dtype=m.dtype)).sum(-1)


def make(rng, nq, lq, nd, ld, d_model, d_out, dtype=torch.float64, kd=0, masks=True, bias=True):
    t = lambda *s: torch.from_numpy(rng.standard_normal(s))  # noqa: E731
    Q = F.normalize(t(nq, lq, d_out), dim=-1)
    H = t(nq, kd, ld, d_model) if kd else t(nd, ld, d_model)
    W = t(d_out, d_model) / np.sqrt(d_model)
    b = t(d_out) if bias else None
    qm = dm = None
    if masks:
        qm = torch.from_numpy(rng.random((nq, lq)) < 0.75)
        dm = torch.from_numpy(rng.random(H.shape[:-1]) < 0.7)
        Q[~qm] = torch.nan  # garbage the kernel must never read
        H[~dm] = torch.inf
    cast = lambda x: None if x is None else x.to(dtype)  # noqa: E731
    return cast(Q), cast(H), cast(W), cast(b), qm, dm


def check_forward(Q, H, W, b, qm, dm, normalize, rtol):
    got = lik.maxsim_from_hidden(Q, H, W, b, d_mask=dm, normalize=normalize, q_mask=qm)
    f = lambda x: None if x is None else x.detach().double()  # noqa: E731
    ref = reference(f(Q), f(H), f(W), f(b), qm, dm, normalize)
    assert got.dtype == (torch.float64 if Q.dtype == torch.float64 else torch.float32)
    assert got.shape == ref.shape
    scale = 1.0 + ref.abs()
    err = (got.double() - ref).abs()
    assert bool((err <= rtol * scale).all()), f"max err {err.max().item()} (rtol {rtol})"
    return got


@pytest.mark.parametrize("d_model,d_out", SIZES)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("kd", [0, 3])
def test_forward_float64(rng, d_model, d_out, normalize, kd):
    args = make(rng, 3, 7, 5, 37, d_model, d_out, kd=kd)
    check_forward(*args, normalize, 1e-10)  # fp64 compute, float64 scores


@pytest.mark.parametrize("dtype,rtol", [(torch.float32, 2e-5), (torch.float16, 2e-5), (torch.bfloat16, 2e-5)])
@pytest.mark.parametrize("d_model,d_out", [(17, 128), (96, 17)])
def test_forward_low_precision(rng, dtype, rtol, d_model, d_out):
    # fp16 / bf16 inputs are widened exactly and accumulated in fp32: the
    # reference uses the same rounded values, so fp32's tolerance holds.
    args = make(rng, 2, 9, 4, 70, d_model, d_out, dtype=dtype)
    check_forward(*args, True, rtol)


@pytest.mark.parametrize("d_model,d_out", SIZES)
@pytest.mark.parametrize("normalize", [True, False])
@pytest.mark.parametrize("kd", [0, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_gradients_match_autograd(rng, d_model, d_out, normalize, kd, bias):
    Q, H, W, b, qm, dm = make(rng, 3, 6, 4, 23, d_model, d_out, kd=kd, bias=bias)
    ins = [x for x in (Q, H, W, b) if x is not None]
    ours = [x.clone().requires_grad_(True) for x in ins]
    refs = [torch.where(torch.isfinite(x), x, 0.0).requires_grad_(True) for x in ins]
    g = torch.from_numpy(rng.standard_normal((3, kd or 4))).float()
    bb = lambda xs: xs[3] if bias else None  # noqa: E731
    s = lik.maxsim_from_hidden(ours[0], ours[1], ours[2], bb(ours), d_mask=dm, normalize=normalize, q_mask=qm)
    (s * g.double()).sum().backward()
    r = reference(refs[0], refs[1], refs[2], bb(refs), qm, dm, normalize)
    (r * g.double()).sum().backward()
    for name, a, e in zip("QHWb", ours, refs):
        assert a.grad.dtype == a.dtype and a.grad.shape == a.shape
        assert bool(torch.isfinite(a.grad).all()), f"grad_{name} has non-finite entries"
        err = (a.grad - e.grad).abs().max().item()
        assert err <= 1e-10 * (1.0 + e.grad.abs().max().item()), f"grad_{name}: max err {err}"
    assert bool((ours[0].grad[~qm] == 0).all()) and bool((ours[1].grad[~dm] == 0).all())


@pytest.mark.parametrize("normalize", [True, False])
def test_gradcheck_float64(rng, normalize):
    Q, H, W, b, _, _ = make(rng, 2, 4, 3, 9, 5, 6, masks=False)
    xs = [x.requires_grad_(True) for x in (Q, H, W, b)]
    assert torch.autograd.gradcheck(lambda *a: lik.maxsim_from_hidden(*a, normalize=normalize), xs)


def test_float32_gradients(rng):
    Q, H, W, b, qm, dm = make(rng, 2, 5, 3, 40, 96, 128, dtype=torch.float32)
    xs = [x.clone().requires_grad_(True) for x in (Q, H, W, b)]
    rs = [torch.where(torch.isfinite(x), x, 0.0).double().requires_grad_(True) for x in (Q, H, W, b)]
    lik.maxsim_from_hidden(*xs, d_mask=dm, q_mask=qm).sum().backward()
    reference(*rs, qm, dm, True).sum().backward()
    for name, a, e in zip("QHWb", xs, rs):
        err = (a.grad.double() - e.grad).abs().max().item()
        assert err <= 1e-4 * (1.0 + e.grad.abs().max().item()), f"grad_{name}: max err {err}"


def test_strided_views(rng):
    Q, H, W, b, qm, dm = make(rng, 3, 8, 4, 30, 17, 20)
    Hs = torch.stack([H, H], dim=-1)[..., 1].transpose(0, 1).contiguous().transpose(0, 1)
    Wt = W.t().contiguous().t()  # column-major W
    Qs = torch.stack([Q, Q], dim=1)[:, 1]
    qms = torch.stack([qm, qm], dim=-1)[..., 0]
    bs = torch.stack([b, b], dim=-1)[:, 0]
    assert not any(x.is_contiguous() for x in (Hs, Wt, Qs, qms, bs))
    got = check_forward(Qs, Hs, Wt, bs, qms, dm, True, 1e-10)
    assert torch.equal(got, lik.maxsim_from_hidden(Q, H, W, b, d_mask=dm, q_mask=qm))


@pytest.mark.parametrize("nq,lq,nd,ld,kd", [(0, 4, 3, 5, 0), (2, 4, 0, 5, 0), (2, 0, 3, 5, 0),
                                            (2, 4, 3, 0, 0), (2, 4, 0, 5, 0), (3, 2, 0, 4, 0)])
def test_empty(rng, nq, lq, nd, ld, kd):
    Q, H, W, b, _, _ = make(rng, nq, lq, nd, ld, 3, 5, masks=False)
    xs = [x.requires_grad_(True) for x in (Q, H, W, b)]
    s = lik.maxsim_from_hidden(*xs)
    assert s.shape == (nq, nd) and bool((s == 0).all())
    s.sum().backward()
    for x in xs:
        assert x.grad.shape == x.shape and bool((x.grad == 0).all())


def test_kd_empty_k(rng):
    Q, H, W, b, _, _ = make(rng, 2, 3, 0, 4, 3, 5, kd=0, masks=False)
    H = torch.zeros(2, 0, 4, 3, dtype=torch.float64)
    assert lik.maxsim_from_hidden(Q, H, W, b).shape == (2, 0)


def test_single_query_and_fully_masked_document(rng):
    Q, H, W, b, _, dm = make(rng, 1, 4, 3, 6, 5, 7)
    dm[1] = False
    got = lik.maxsim_from_hidden(Q[0], H, W, b, d_mask=dm)
    assert got.shape == (3,) and got[1].item() == 0.0
    ref = reference(Q, H, W, b, None, dm, True)[0]
    assert torch.allclose(got, ref, rtol=1e-10, atol=1e-12)


def test_deterministic_across_threads(rng, threads):
    Q, H, W, b, qm, dm = make(rng, 4, 8, 9, 50, 33, 24, dtype=torch.float32)
    outs = []
    for n in (1, 2, 3):
        threads.set_num_threads(n)
        xs = [x.clone().requires_grad_(True) for x in (Q, H, W, b)]
        s = lik.maxsim_from_hidden(*xs, d_mask=dm, q_mask=qm)
        s.sum().backward()
        outs.append([s] + [x.grad for x in xs])
    for o in outs[1:]:
        assert all(torch.equal(a, e) for a, e in zip(o, outs[0]))


def test_errors(rng):
    Q, H, W, b, _, _ = make(rng, 2, 3, 4, 5, 6, 7, masks=False)
    with pytest.raises(ValueError, match=r"W must be \[d_out=7, d_model=6\], got \[6, 6\]"):
        lik.maxsim_from_hidden(Q, H, W[:6])
    with pytest.raises(ValueError, match=r"b must be \[d_out=7\], got \[6\]"):
        lik.maxsim_from_hidden(Q, H, W, b[:6])
    with pytest.raises(TypeError, match="W: dtype float32 does not match Q's dtype float64"):
        lik.maxsim_from_hidden(Q, H, W.float())
    with pytest.raises(ValueError, match="d_mask"):
        lik.maxsim_from_hidden(Q, H, W, d_mask=torch.ones(4, 6, dtype=torch.bool))
    with pytest.raises(ValueError, match="H_d: KD layout"):
        lik.maxsim_from_hidden(Q, H[None].expand(3, -1, -1, -1), W)
    with pytest.raises(TypeError, match="H_d: expected a torch tensor"):
        lik.maxsim_from_hidden(Q, H.numpy(), W)
