"""Data-parallel training with lik on 2 and 3 gloo ranks (CPU processes).

* DistributedDataParallel over an encoder whose loss uses lik.maxsim (local
  in-batch negatives): the ranks' averaged gradient equals the gradient of one
  process computing the mean of the ranks' losses.
* lik.distributed.contrastive_loss (documents of every rank gathered with
  gradient): the mean of the ranks' losses equals the one-process loss on the
  concatenated batch, and DDP's gradient equals its gradient, with uneven
  batch sizes, extra negatives and per-rank token lengths.
* all_gather_with_grad / gather_documents: values, offsets, masks, the
  backward's cross-rank sum (exact), and errors raised on every rank.

Gradients agree to fp32 rounding, not bitwise: the one-process backward adds
the ranks' contributions to a weight inside one lik backward and one matmul,
DDP adds per-rank partial sums in gloo's all_reduce (another association of
the same fp32 terms).  Losses and scores are bitwise equal per query; only
their reductions differ in order.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

from _launch import run_ranks  # noqa: E402

D_IN, D_OUT, LQ, TEMP = 12, 8, 4, 0.05
# per world size: queries per rank, documents per rank (positives first), doc token length per rank
SHAPES = {
    2: dict(B=[3, 2], M=[4, 2], L=[5, 3]),
    3: dict(B=[2, 3, 1], M=[2, 5, 1], L=[4, 6, 3]),
}
EQUAL = {2: dict(B=[3, 3], L=[5, 5]), 3: dict(B=[2, 2, 2], L=[4, 4, 4])}


class Encoder(torch.nn.Module):
    """A token projection (the model under training) applied to queries and
    documents in one forward (one DDP call per step)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.proj = torch.nn.Linear(D_IN, D_OUT, bias=False)
        with torch.no_grad():
            self.proj.weight.copy_(torch.randn(D_OUT, D_IN, generator=g))

    def forward(self, xq, xd):
        return self.proj(xq), self.proj(xd)


def batch(world: int, shapes: dict, seed: int):
    """Per-rank raw features and masks (numpy, from a fixed seed)."""
    rng = np.random.default_rng(seed * 10 + world)
    B, L = shapes["B"], shapes["L"]
    M = shapes.get("M", B)
    out = []
    for r in range(world):
        xq = rng.standard_normal((B[r], LQ, D_IN)).astype(np.float32)
        xd = rng.standard_normal((M[r], L[r], D_IN)).astype(np.float32)
        qm = rng.random((B[r], LQ)) < 0.85
        qm[:, 0] = True
        dm = rng.random((M[r], L[r])) < 0.85
        dm[:, 0] = True
        out.append((xq, xd, qm, dm))
    return out


def local_loss(Eq, Ed, qm, dm):
    import lik

    scores = lik.maxsim(Eq, Ed, qm, dm, normalize=True)
    return torch.nn.functional.cross_entropy(scores / TEMP, torch.arange(Eq.shape[0]))


def _t(*xs):
    return [torch.from_numpy(x) for x in xs]


# ---- workers ------------------------------------------------------------------------


def _worker(rank: int, world: int):
    import lik.distributed as ld
    from torch.nn.parallel import DistributedDataParallel as DDP

    out = {}
    # 1. DDP, local in-batch negatives (equal batches)
    xq, xd, qm, dm = _t(*batch(world, EQUAL[world], 1)[rank])
    model = DDP(Encoder())
    Eq, Ed = model(xq, xd)
    loss = local_loss(Eq, Ed, qm, dm)
    loss.backward()
    out["ddp_loss"] = loss.item()
    out["ddp_grad"] = model.module.proj.weight.grad.numpy().copy()

    # 2. DDP + contrastive_loss over the documents of every rank (uneven)
    xq, xd, qm, dm = _t(*batch(world, SHAPES[world], 2)[rank])
    model = DDP(Encoder())
    Eq, Ed = model(xq, xd)
    loss = ld.contrastive_loss(Eq, Ed, qm, dm, temperature=TEMP, normalize=True)
    loss.backward()
    out["gather_loss"] = loss.item()
    out["gather_grad"] = model.module.proj.weight.grad.numpy().copy()

    # 3. all_gather_with_grad: exact cross-rank gradient sum, uneven rows (rank 0: none)
    n = [0, 2, 3][rank]
    x = (torch.arange(n * 3, dtype=torch.float32).reshape(n, 3) + 10 * rank).requires_grad_()
    y = ld.all_gather_with_grad(x)
    w = torch.arange(y.numel(), dtype=torch.float32).reshape(y.shape)
    (y * w * (rank + 1)).sum().backward()
    out["agg_y"] = y.detach().numpy().copy()
    out["agg_grad"] = x.grad.numpy().copy()

    # 4. gather_documents: rows, offset, masks of per-rank lengths
    D = torch.full((rank + 1, 2 + rank, 3), float(rank))
    m = torch.ones(rank + 1, 2 + rank, dtype=torch.bool)
    m[:, -1] = rank == 0
    D_all, m_all, off = ld.gather_documents(D, m if rank != 1 else None)
    out["gd"] = (D_all.numpy().copy(), m_all.numpy().copy(), off)
    D_all, m_all, off = ld.gather_documents(torch.ones(rank, 2, 3))
    out["gd_nomask"] = (tuple(D_all.shape), m_all, off)

    # 5. errors raised on every rank
    errs = {}
    for name, fn in {
        "dims": lambda: ld.all_gather_with_grad(torch.zeros(2, 3 + (rank == 1))),
        "dtype": lambda: ld.all_gather_with_grad(torch.zeros(2, 3, dtype=torch.float64 if rank else torch.float32)),
        "not_tensor": lambda: ld.all_gather_with_grad(np.zeros(3) if rank == 0 else torch.zeros(3)),
        "more_queries": lambda: ld.contrastive_loss(torch.zeros(2 + (rank == 1), 2, 3), torch.zeros(2, 2, 3)),
        "q_d_mismatch": lambda: ld.contrastive_loss(torch.zeros(2, 2, 3 + (rank == 1)), torch.zeros(2, 2, 3)),
        "d_mask_shape": lambda: ld.gather_documents(torch.zeros(2, 3, 4), torch.ones(2, 3 - (rank == 0), dtype=torch.bool)),
    }.items():
        try:
            fn()
            errs[name] = None
        except Exception as exc:  # noqa: BLE001 - compared by the parent
            errs[name] = (type(exc).__name__, str(exc))
    out["errors"] = errs
    return out


@pytest.fixture(scope="module", params=[2, 3], ids=["world2", "world3"])
def ranks(request):
    world = request.param
    return world, run_ranks(_worker, world, timeout=180)


# ---- one-process references --------------------------------------------------------------


def _close(got, want, what):
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6, err_msg=what)


def test_ddp_gradients_equal_one_process(ranks):
    world, res = ranks
    model = Encoder()
    losses = []
    for xq, xd, qm, dm in batch(world, EQUAL[world], 1):
        Eq, Ed = model(*_t(xq, xd))
        losses.append(local_loss(Eq, Ed, *_t(qm, dm)))
    torch.stack(losses).mean().backward()
    ref = model.proj.weight.grad.numpy()
    for r in range(world):
        assert res[r]["ddp_loss"] == pytest.approx(losses[r].item(), rel=1e-6)  # the same rank-local loss
        _close(res[r]["ddp_grad"], ref, f"rank {r}: DDP gradient vs one process")
        assert res[r]["ddp_grad"].tobytes() == res[0]["ddp_grad"].tobytes(), "ranks' gradients differ"


def test_gathered_negatives_equal_one_process_on_concatenated_batch(ranks):
    import lik

    world, res = ranks
    data = batch(world, SHAPES[world], 2)
    Lmax = max(SHAPES[world]["L"])
    xq = np.concatenate([b[0] for b in data])
    qm = np.concatenate([b[2] for b in data])
    xd = np.concatenate([np.pad(b[1], ((0, 0), (0, Lmax - b[1].shape[1]), (0, 0))) for b in data])
    dm = np.concatenate([np.pad(b[3], ((0, 0), (0, Lmax - b[3].shape[1]))) for b in data])
    doc_off = np.cumsum([0] + SHAPES[world]["M"])[:-1]
    labels = np.concatenate([doc_off[r] + np.arange(SHAPES[world]["B"][r]) for r in range(world)])
    model = Encoder()
    Eq, Ed = model(*_t(xq, xd))
    scores = lik.maxsim(Eq, Ed, *_t(qm, dm), normalize=True)
    loss = torch.nn.functional.cross_entropy(scores / TEMP, torch.from_numpy(labels))
    loss.backward()
    ref = model.proj.weight.grad.numpy()
    mean_loss = np.mean([res[r]["gather_loss"] for r in range(world)])
    assert mean_loss == pytest.approx(loss.item(), rel=1e-6)
    for r in range(world):
        _close(res[r]["gather_grad"], ref, f"rank {r}: DDP + contrastive_loss gradient vs one process")


def test_all_gather_with_grad_values_and_backward(ranks):
    world, res = ranks
    n = [0, 2, 3][:world]
    xs = [np.arange(k * 3, dtype=np.float32).reshape(k, 3) + 10 * r for r, k in enumerate(n)]
    y = np.concatenate(xs)
    w = np.arange(y.size, dtype=np.float32).reshape(y.shape)
    total = sum(r + 1 for r in range(world))  # every rank's loss weights w by (rank + 1)
    for r in range(world):
        np.testing.assert_array_equal(res[r]["agg_y"], y)
        off = sum(n[:r])
        np.testing.assert_array_equal(res[r]["agg_grad"], w[off:off + n[r]] * total)


def test_gather_documents_pads_and_masks(ranks):
    world, res = ranks
    Lmax = 2 + world - 1
    rows = []
    masks = []
    for r in range(world):
        for _ in range(r + 1):
            row = np.zeros((Lmax, 3), np.float32)
            row[: 2 + r] = r
            rows.append(row)
            mk = np.zeros(Lmax, bool)
            mk[: 2 + r] = True
            if r != 1:  # rank 1 passed no mask: all of its tokens valid
                mk[1 + r] = r == 0
            masks.append(mk)
    for r in range(world):
        D_all, m_all, off = res[r]["gd"]
        np.testing.assert_array_equal(D_all, np.stack(rows))
        np.testing.assert_array_equal(m_all, np.stack(masks))
        assert off == sum(k + 1 for k in range(r))
        shape, m, off = res[r]["gd_nomask"]
        assert shape == (sum(range(world)), 2, 3) and m is None and off == sum(range(r))


ERRORS = {
    "dims": ("ValueError", "ranks disagree on the dims after dim 0"),
    "dtype": ("TypeError", "ranks disagree on the dtype"),
    "not_tensor": ("TypeError", "expected a torch tensor", "rank(s) [0]"),
    "more_queries": ("ValueError", "rank(s) [1] have more queries than documents"),
    "d_mask_shape": ("ValueError", "d_mask: shape", "rank(s) [0]"),
    "q_d_mismatch": ("ValueError", "Q must be a torch tensor [B, Lq, d] with D's d on every rank; not on rank(s) [1]"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_raised_on_every_rank(ranks, name):
    world, res = ranks
    want = ERRORS[name]
    for r in range(world):
        got = res[r]["errors"][name]
        assert got is not None, f"rank {r}: no error"
        if len(want) == 3 and r != 0 and name in ("not_tensor", "d_mask_shape"):
            assert got[0] == "RuntimeError" and want[2] in got[1], f"rank {r}: {got}"
        else:
            assert got[0] == want[0] and want[1] in got[1], f"rank {r}: {got}"
