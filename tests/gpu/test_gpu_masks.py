"""GPU parity of padding: prefix d_masks (detected on the device and run as
unmasked documents of their length), q_lengths / d_lengths, masks mixing
prefix and non-prefix documents, KD and pairs, graph capture, the
backward with lengths, and fp32 under both matmul precisions.

Tokens past a length hold NaN: a kernel that read them as valid fails.
Marked ``gpu``; skipped without CUDA.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

from test_gpu_parity import (  # noqa: E402  (pytest puts tests/gpu on sys.path)
    CASES, DT, FAMILY_OFF, check_argmax, check_scores, gen, rand, ref_scores, ref_sim, rmask,
)

__all__ = ["gen"]  # the fixture


def lengths(n, L, g):
    """Random lengths in [0, L] with 0 and L present (n >= 2)."""
    x = torch.randint(0, L + 1, (n,), device="cuda", generator=g, dtype=torch.int32)
    if n >= 2:
        x[0], x[-1] = 0, L
    return x


def prefix(n, L):
    return torch.arange(L, device="cuda") < n[..., None]


MASK_CASES = [c for c in CASES if c[0] != "f64" and c[5] <= 1000]


@pytest.mark.parametrize("form", ["d_mask", "d_lengths", "mixed"])
@pytest.mark.parametrize("family,case", [(f, c) for f in ("default", "mma.sync") for c in MASK_CASES],
                         ids=[f + "-" + "-".join(map(str, c)) for f in ("default", "mma.sync") for c in MASK_CASES])
def test_padding(case, family, form, gen):
    import lik
    from lik import _api

    dt, Nq, Nd, Lq, Ld, d = case
    Nd = max(Nd, 3)
    Q = rand((Nq, Lq, d), DT[dt], gen)
    D = rand((Nd, Ld, d), DT[dt], gen)
    nq, nd = lengths(Nq, Lq, gen), lengths(Nd, Ld, gen)
    qm, dm = prefix(nq, Lq), prefix(nd, Ld)
    if form == "mixed":  # document 1: a mask that is not a prefix
        dm[1] = rmask((Ld,), gen, 0.6)
        dm[1, 0] = False
    D[~dm] = float("nan")
    Q[~qm] = float("nan")
    kw = dict(q_lengths=nq, d_lengths=nd) if form == "d_lengths" else dict(q_mask=qm, d_mask=dm)
    with lik.Context(cuda_off=FAMILY_OFF[family]):
        scores, am = _api._forward(Q, D, normalize=True, with_argmax=True, **kw)
        s2 = _api.maxsim(Q, D, normalize=True, **kw)
    ref, mx, live, Sm = ref_scores(ref_sim(torch.nan_to_num(Q), torch.nan_to_num(D), True),
                                   qm[:, None, :], dm[None, :, None, :])
    check_scores(scores, ref, Lq)
    check_argmax(am, Sm, mx, live)
    check_scores(s2, ref, Lq)


@pytest.mark.parametrize("dt", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("Lq", [32, 100, 300])  # 300: the last 44 rows as a launch of their own
def test_kd_and_pairs_padding(dt, Lq, gen):
    from lik import _api

    Nq, K, Ld, d = 3, 5, 300, 128
    Q = rand((Nq, Lq, d), DT[dt], gen)
    D = rand((Nq, K, Ld, d), DT[dt], gen)
    nq = lengths(Nq, Lq, gen)
    nd = lengths(Nq * K, Ld, gen).reshape(Nq, K)
    qm, dm = prefix(nq, Lq), prefix(nd, Ld)
    D[~dm] = float("nan")
    ref, mx, live, Sm = ref_scores(ref_sim(Q, torch.nan_to_num(D), False, kd=True), qm[:, None, :],
                                   dm[:, :, None, :])
    for kw in (dict(q_mask=qm, d_mask=dm), dict(q_lengths=nq, d_lengths=nd)):
        scores, am = _api._forward(Q, D, with_argmax=True, **kw)
        check_scores(scores, ref, Lq)
        check_argmax(am, Sm, mx, live)
        p, pam = _api._forward(Q, D[:, 2], kw.get("q_mask"), kw["d_mask"][:, 2] if "d_mask" in kw else None,
                               pairs=True, with_argmax=True, q_lengths=kw.get("q_lengths"),
                               d_lengths=kw["d_lengths"][:, 2] if "d_lengths" in kw else None)
        check_scores(p, ref[:, 2], Lq)
        check_argmax(pam[:, None], Sm[:, 2:3], mx[:, 2:3], live[:, 2:3])


def test_strided_and_uint8_prefix_masks(gen):
    """The detection's scalar path: a mask view with token stride 2, uint8."""
    from lik import _api

    Nq, Nd, Lq, Ld, d = 2, 40, 32, 150, 128
    Q = rand((Nq, Lq, d), torch.bfloat16, gen)
    D = rand((Nd, Ld, d), torch.bfloat16, gen)
    nd = lengths(Nd, Ld, gen)
    big = torch.zeros(Nd, 2 * Ld, dtype=torch.uint8, device="cuda")
    big[:, ::2] = prefix(nd, Ld).to(torch.uint8)
    dm = big[:, ::2]
    D[~prefix(nd, Ld)] = float("nan")
    ref, *_ = ref_scores(ref_sim(Q, torch.nan_to_num(D), False), torch.ones(1, 1, Lq, dtype=torch.bool, device="cuda"),
                         prefix(nd, Ld)[None, :, None, :])
    check_scores(_api.maxsim(Q, D, None, dm), ref, Lq)
    assert torch.equal(_api.maxsim(Q, D, None, dm), _api.maxsim(Q, D, d_lengths=nd))


def test_prefix_mask_scores_equal_lengths_bitwise(gen):
    """A detected prefix runs the kernel the lengths run: identical bits."""
    from lik import _api

    Q = rand((64, 32, 128), torch.bfloat16, gen)
    D = rand((300, 300, 128), torch.bfloat16, gen)
    nd = torch.randint(200, 301, (300,), device="cuda", generator=gen, dtype=torch.int32)
    assert torch.equal(_api.maxsim(Q, D, None, prefix(nd, 300)), _api.maxsim(Q, D, d_lengths=nd))


@pytest.mark.parametrize("Ld", [7, 16, 32, 40, 48, 64, 80, 100, 128, 144, 256, 272, 300, 528])
def test_prefix_detection_every_width(Ld, gen):
    """The detection (prefix.cu) reads 16-byte mask rows with 2, 4, .. 32 lanes
    per document by Ld (the masks here are views of rows padded to a multiple
    of 16 bytes, so a length inside a lane's 16 bytes is read byte by byte;
    Ld 7: a contiguous mask, a byte per lane), 37 documents so a warp's last
    documents are absent.  Prefix masks run as their lengths (bitwise) and
    score as the reference; with one token flipped per document (a hole, or a
    prefix one longer) the scores are the masks'.  Tokens outside every mask
    point along the query's first row, 50 times as long: a token taken as
    valid by mistake wins that row's max.  (A prefix missed by the detection
    scores the same on the masked path: that costs time, which no test sees.)"""
    from lik import _api

    Nd = 37
    Q = rand((1, 32, 128), torch.bfloat16, gen)
    D = rand((Nd, Ld, 128), torch.bfloat16, gen)
    nd = lengths(Nd, Ld, gen)
    t = torch.randint(0, Ld, (Nd,), device="cuda", generator=gen)
    width = Ld if Ld == 7 else (Ld + 15) // 16 * 16
    rows = torch.zeros(Nd, width, dtype=torch.bool, device="cuda")
    dm = rows[:, :Ld]
    dm.copy_(prefix(nd, Ld))
    flip = dm.clone()
    flip[torch.arange(Nd, device="cuda"), t] ^= True
    D[~(dm | flip)] = 50 * Q[0, 0]
    qm = torch.ones(1, 1, 32, dtype=torch.bool, device="cuda")
    S = ref_sim(Q, D, False)
    out = _api.maxsim(Q, D, None, dm)
    assert torch.equal(out, _api.maxsim(Q, D, d_lengths=nd))
    check_scores(out, ref_scores(S, qm, dm[None, :, None, :])[0], 32)
    check_scores(_api.maxsim(Q, D, None, flip), ref_scores(S, qm, flip[None, :, None, :])[0], 32)


@pytest.mark.parametrize("family", ["default", "mma.sync", "no-split"])
@pytest.mark.parametrize("Nq,Nd,Lq,Ld,d", [(1, 61, 32, 1000, 128), (3, 40, 100, 333, 128),
                                           (1, 2, 32, 4100, 128), (2, 23, 17, 257, 48)])
def test_random_masks_across_tiles_and_items(family, Nq, Nd, Lq, Ld, d, gen):
    """Random d_masks on documents of many tiles, one item after another in a
    CTA, an Ld split (two long documents), and prefix-masked documents (run
    unmasked) between them: the kernel loads a tile's d_mask words a tile
    early and must use the words of the tile it computes."""
    import lik
    from lik import _api

    Q = rand((Nq, Lq, d), torch.bfloat16, gen)
    D = rand((Nd, Ld, d), torch.bfloat16, gen)
    dm = rmask((Nd, Ld), gen, 0.6)
    pre = torch.rand(Nd, device="cuda", generator=gen) < 0.3
    dm[pre] = prefix(lengths(Nd, Ld, gen)[pre], Ld)
    D[~dm] = float("nan")
    with lik.Context(cuda_off=FAMILY_OFF[family]):
        scores, am = _api._forward(Q, D, None, dm, with_argmax=True)
        s2 = _api.maxsim(Q, D, None, dm)
    qm = torch.ones(Nq, 1, Lq, dtype=torch.bool, device="cuda")
    ref, mx, live, Sm = ref_scores(ref_sim(Q, torch.nan_to_num(D), False), qm, dm[None, :, None, :])
    check_scores(scores, ref, Lq)
    check_argmax(am, Sm, mx, live)
    check_scores(s2, ref, Lq)


@pytest.mark.parametrize("Lq", [32, 100])
def test_random_masks_kd_and_pairs_many_items(Lq, gen):
    """The same for KD (items row * K + k) and pairs (no early load across
    items): random d_masks on 3-tile documents, prefix-masked ones between."""
    from lik import _api

    Nq, K, Ld, d = 6, 9, 300, 128
    Q = rand((Nq, Lq, d), torch.bfloat16, gen)
    D = rand((Nq, K, Ld, d), torch.bfloat16, gen)
    dm = rmask((Nq, K, Ld), gen, 0.6)
    pre = torch.rand(Nq, K, device="cuda", generator=gen) < 0.3
    dm[pre] = prefix(lengths(Nq * K, Ld, gen).reshape(Nq, K)[pre], Ld)
    D[~dm] = float("nan")
    qm = torch.ones(Nq, 1, Lq, dtype=torch.bool, device="cuda")
    ref, mx, live, Sm = ref_scores(ref_sim(Q, torch.nan_to_num(D), False, kd=True), qm, dm[:, :, None, :])
    scores, am = _api._forward(Q, D, None, dm, with_argmax=True)
    check_scores(scores, ref, Lq)
    check_argmax(am, Sm, mx, live)
    Qp = Q.repeat_interleave(K, 0)
    p = _api.maxsim_pairs(Qp, D.reshape(Nq * K, Ld, d), None, dm.reshape(Nq * K, Ld))
    check_scores(p.reshape(Nq, K), ref, Lq)


def test_graph_capture_with_mask_and_lengths(gen):
    from lik import _api

    Q = rand((2, 32, 128), torch.bfloat16, gen)
    D = rand((50, 300, 128), torch.bfloat16, gen)
    nd = lengths(50, 300, gen)
    dm = prefix(nd, 300)
    dm[3] = rmask((300,), gen)
    ref_m, ref_l = _api.maxsim(Q, D, None, dm), _api.maxsim(Q, D, d_lengths=nd)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        _api.maxsim(Q, D, None, dm)
        _api.maxsim(Q, D, d_lengths=nd)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out_m = _api.maxsim(Q, D, None, dm)
        out_l = _api.maxsim(Q, D, d_lengths=nd)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out_m, ref_m) and torch.equal(out_l, ref_l)


@pytest.mark.parametrize("dt", ["bf16", "f32"])
def test_backward_with_lengths_equals_prefix_masks(dt, gen):
    import lik

    Nq, Nd, Lq, Ld, d = 3, 7, 40, 90, 64
    Q0 = rand((Nq, Lq, d), DT[dt], gen)
    D0 = rand((Nd, Ld, d), DT[dt], gen)
    nq, nd = lengths(Nq, Lq, gen), lengths(Nd, Ld, gen)
    w = torch.randn(Nq, Nd, device="cuda", generator=gen)

    def run(**kw):
        Q, D = Q0.clone().requires_grad_(), D0.clone().requires_grad_()
        (lik.maxsim(Q, D, normalize=True, **kw) * w).sum().backward()
        return Q.grad, D.grad

    a = run(q_lengths=nq, d_lengths=nd)
    b = run(q_mask=prefix(nq, Lq), d_mask=prefix(nd, Ld))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("d", [17, 128, 300])
def test_fp32_precision_switch(d, gen):
    """"highest": fp32 accuracy (3xTF32); "high": TF32 (10-bit mantissas)."""
    import lik

    Q = rand((3, 32, d), torch.float32, gen)
    D = rand((20, 150, d), torch.float32, gen)
    ref, *_ = ref_scores(ref_sim(Q, D, True), torch.ones(1, 1, 32, dtype=torch.bool, device="cuda"),
                         torch.ones(1, 1, 1, 150, dtype=torch.bool, device="cuda"))
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        hi = lik.maxsim(Q, D, normalize=True)
        torch.set_float32_matmul_precision("high")
        lo = lik.maxsim(Q, D, normalize=True)
    finally:
        torch.set_float32_matmul_precision(old)
    check_scores(hi, ref, 32)
    err = (lo.double() - ref).abs().max().item()
    assert err <= 32 * 2.0 ** -9, f"TF32 scores off by {err}"  # unit vectors: each term |err| <= ~2^-10
    assert not torch.equal(hi, lo), "the precision switch changed nothing"


def _packed(X, n):
    """[N, L, d] with lengths n -> (packed [sum n, d], cu_seqlens int32 [N + 1])."""
    keep = torch.arange(X.shape[1], device="cuda") < n[:, None]
    cu = torch.zeros(len(n) + 1, dtype=torch.int32, device="cuda")
    cu[1:] = torch.cumsum(n, 0)
    return X[keep].contiguous(), cu


@pytest.mark.parametrize("d", [64, 128])
def test_fp32_precision_every_call_form(d, gen):
    """Every fp32 call form follows torch's matmul precision alike: under
    "high" the packed calls (lik.maxsim_varlen, lik.score_pairs_packed) and
    lik.retrieve agree with the padded lik.maxsim / maxsim_pairs under "high"
    (TF32), not with "highest" (3xTF32).  The packed forward once passed no
    fp32_precision and stayed at 3xTF32 whatever torch asked for."""
    import lik

    Nq, Nd, Lq, Ld = 3, 6, 32, 150
    Q = rand((Nq, Lq, d), torch.float32, gen)
    D = rand((Nd, Ld, d), torch.float32, gen)
    nq, nd = lengths(Nq, Lq, gen), lengths(Nd, Ld, gen)
    nq[0] = Lq  # every query has tokens: a TF32 score differs from the fp32 one
    nd[0] = Ld // 2
    Qp, cq = _packed(Q, nq)
    Dp, cd = _packed(D, nd)
    pq = torch.tensor([0, 1, 2, 0], dtype=torch.int32, device="cuda")
    pd = torch.tensor([5, 1, 2, 3], dtype=torch.int32, device="cuda")

    def run():
        pad = lik.maxsim(Q, D, q_lengths=nq, d_lengths=nd, normalize=True)
        packed = lik.maxsim_varlen(Qp, Dp, cq, cd, normalize=True)
        pairs_pad = lik.maxsim_pairs(Q[pq.long()], D[pd.long()], q_lengths=nq[pq.long()], d_lengths=nd[pd.long()],
                                     normalize=True)
        pairs_packed = lik.score_pairs_packed(Qp, Dp, cq, cd, pq, pd, normalize=True)
        rs, ri = lik.retrieve(Q, D, 4, q_mask=prefix(nq, Lq), d_mask=prefix(nd, Ld))  # normalize=True
        return pad, packed, pairs_pad, pairs_packed, rs, ri

    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        hi = run()
        torch.set_float32_matmul_precision("high")
        lo = run()
    finally:
        torch.set_float32_matmul_precision(old)

    def gap(a, b):
        return (a.double() - b.double()).abs().max().item()

    tf32_gap = gap(lo[0], hi[0])  # what TF32 changes in the padded call
    assert tf32_gap > 1e-5, f"the precision switch changed the padded scores by {tf32_gap} only"
    # under each precision, every form gives the padded form's scores (up to summation order)
    for prec, r in (("highest", hi), ("high", lo)):
        pad, packed, pairs_pad, pairs_packed, rs, ri = r
        retrieved = torch.gather(pad, 1, ri)
        for name, a, b in (("maxsim_varlen", packed, pad), ("score_pairs_packed", pairs_packed, pairs_pad),
                           ("retrieve", rs, retrieved)):
            assert gap(a, b) < tf32_gap / 8, f"{prec}: {name} differs from the padded call by {gap(a, b)} " \
                                             f"(TF32 moves scores by {tf32_gap})"
