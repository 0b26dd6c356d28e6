"""Packed calls with device cu_seqlens (lik.maxsim_varlen, lik.score_pairs_packed;
lik.maxsim_padded beside them) in CUDA graphs and under torch.compile.

Each call is captured (forward, and forward + backward with a gradient),
then its inputs are changed in place -- embeddings, masks, the cu_seqlens
offsets (the lengths permuted: the same totals, another layout), the pair
indices, grad_scores -- and the graph replayed: the outputs must equal, bit
for bit, eager calls on the new inputs with the same max_seqlen_q (the
same bound runs the same kernels; without one a captured call is bounded
by Q's rows, so its eager twin passes max_seqlen_q=total_q).  A replay that
read offsets frozen at capture, or a host copy during capture, fails here.

Every test is marked ``gpu`` and skipped without torch + CUDA.  Fresh
random data per test (seed printed; LIK_TEST_SEED replays one).

Run on the GPU machine:
    LIK_LIBRARY=build/liblik.so python3 -m pytest tests/gpu/test_gpu_packed_graph.py -q
"""

from __future__ import annotations

import itertools
import os

import pytest

torch = pytest.importorskip("torch")
import lik  # noqa: E402  (module level: the compiled functions below call it)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64}
# query / document lengths: one set with long queries (a query past 64 and
# 128 rows, an empty one), one of 64 short queries (stacked in a CTA's rows)
LENGTHS = {
    "long": ([5, 32, 0, 70, 17, 1, 140], [10, 0, 70, 33, 300, 1, 129, 64]),
    "short": ([3, 32, 0, 17, 9, 32, 1, 20] * 8, [40, 0, 7, 33, 120, 1] * 5),
}


@pytest.fixture
def seed():
    s = int(os.environ.get("LIK_TEST_SEED", int.from_bytes(os.urandom(4), "little")))
    print(f"seed={s}")
    return s


def _cu(lengths, dtype):
    return torch.tensor([0, *itertools.accumulate(lengths)], dtype=dtype, device="cuda")


class Batch:
    """A packed batch on the GPU whose tensors keep their storage: refill()
    writes new values into them (the lengths permuted)."""

    def __init__(self, dt, lengths, d, npairs, seed, grad):
        self.g = torch.Generator(device="cuda")
        self.g.manual_seed(seed)
        self.cpu = torch.Generator()
        self.cpu.manual_seed(seed)
        self.dtype = DT[dt]
        self.lq, self.ld = (list(x) for x in LENGTHS[lengths])
        self.Q = torch.empty((sum(self.lq), d), dtype=self.dtype, device="cuda", requires_grad=grad)
        self.D = torch.empty((sum(self.ld), d), dtype=self.dtype, device="cuda", requires_grad=grad)
        self.cu_q = _cu(self.lq, torch.int32)
        self.cu_d = _cu(self.ld, torch.int64)
        self.qm = torch.empty(sum(self.lq), dtype=torch.bool, device="cuda")
        self.dm = torch.empty(sum(self.ld), dtype=torch.bool, device="cuda")
        self.pq = torch.empty(npairs, dtype=torch.int64, device="cuda")
        self.pd = torch.empty(npairs, dtype=torch.int32, device="cuda")
        self.gs = torch.empty((len(self.lq), len(self.ld)), device="cuda")
        self.gp = torch.empty(npairs, device="cuda")
        self.longest = max(self.lq)
        self.refill()

    def refill(self):
        """New values in place: embeddings, masks, pairs, grad_scores, and the
        offsets of a permutation of the lengths (same totals and longest)."""
        g = self.g
        perm = torch.randperm(len(self.lq), generator=self.cpu).tolist()
        self.lq = [self.lq[i] for i in perm]
        perm = torch.randperm(len(self.ld), generator=self.cpu).tolist()
        self.ld = [self.ld[i] for i in perm]
        with torch.no_grad():
            self.Q.copy_(torch.randn(self.Q.shape, device="cuda", generator=g))
            self.D.copy_(torch.randn(self.D.shape, device="cuda", generator=g))
            self.cu_q.copy_(_cu(self.lq, torch.int32))
            self.cu_d.copy_(_cu(self.ld, torch.int64))
            self.qm.copy_(torch.rand(self.qm.shape, device="cuda", generator=g) < 0.8)
            self.dm.copy_(torch.rand(self.dm.shape, device="cuda", generator=g) < 0.7)
            self.pq.copy_(torch.randint(0, len(self.lq), self.pq.shape, device="cuda", generator=g))
            self.pd.copy_(torch.randint(0, len(self.ld), self.pd.shape, device="cuda", generator=g))
            self.gs.copy_(torch.randn(self.gs.shape, device="cuda", generator=g))
            self.gp.copy_(torch.randn(self.gp.shape, device="cuda", generator=g))


def packed_step(b, Q, D, mq, grad, validate=True):
    """Both packed calls on (Q, D) and b's other tensors; with grad, their
    backward with b's grad_scores into Q.grad / D.grad.  Returns the scores."""
    s = lik.maxsim_varlen(Q, D, b.cu_q, b.cu_d, max_seqlen_q=mq, q_mask=b.qm, d_mask=b.dm, normalize=True,
                          validate=validate)
    p = lik.score_pairs_packed(Q, D, b.cu_q, b.cu_d, b.pq, b.pd, max_seqlen_q=mq, d_mask=b.dm, validate=validate)
    if grad:
        torch.autograd.backward([s, p], [b.gs.to(s.dtype), b.gp.to(p.dtype)])
    return s, p


def capture(fn):
    """fn() warmed up on a side stream, then captured: (graph, fn's outputs)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def eager_twin(b, mq, grad):
    """The eager calls on clones of b's current inputs: (scores, grad_Q, grad_D)."""
    Q = b.Q.detach().clone().requires_grad_(grad)
    D = b.D.detach().clone().requires_grad_(grad)
    s, p = packed_step(b, Q, D, mq, grad)
    return (s, p), (Q.grad, D.grad)


@pytest.mark.parametrize("lengths", ["long", "short"])
@pytest.mark.parametrize("bound", ["exact", "loose", "none"])
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("dt,d", [("bf16", 128), ("f16", 48), ("f32", 64), ("f64", 16)])
def test_packed_calls_replay_in_cuda_graph(dt, d, grad, bound, lengths, seed):
    """maxsim_varlen + score_pairs_packed (forward; with grad forward +
    backward) captured once, replayed on new inputs and new offsets: the
    eager calls' bits."""
    b = Batch(dt, lengths, d, 300, seed, grad)
    total_q = b.Q.shape[0]
    mq = {"exact": b.longest, "loose": b.longest + 37, "none": None}[bound]
    # the kernels the captured calls run, launched once outside the capture
    # (capture()'s warm-up reads the longest query where none is given)
    eager_twin(b, mq if mq is not None else total_q, grad)

    def step():
        if grad:
            b.Q.grad = None
            b.D.grad = None
        return packed_step(b, b.Q, b.D, mq, grad)

    graph, (s_static, p_static) = capture(step)
    grads_static = (b.Q.grad, b.D.grad)
    for _ in range(3):
        b.refill()
        graph.replay()
        torch.cuda.synchronize()
        (s, p), grads = eager_twin(b, mq if mq is not None else total_q, grad)
        assert torch.equal(s_static, s) and torch.equal(p_static, p)
        if grad:
            assert torch.equal(grads_static[0], grads[0]) and torch.equal(grads_static[1], grads[1])
        assert torch.isfinite(s).all() and torch.isfinite(p).all()


def test_unchecked_calls_do_not_sync(seed):
    """validate=False with max_seqlen_q given: forward and backward read
    nothing back (torch's sync debug mode raises on a synchronising call)."""
    b = Batch("bf16", "long", 64, 50, seed, True)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        packed_step(b, b.Q, b.D, b.longest, True, validate=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    (s, p), grads = eager_twin(b, b.longest, True)
    b.Q.grad = b.D.grad = None
    s2, p2 = packed_step(b, b.Q, b.D, b.longest, True, validate=False)
    assert torch.equal(s, s2) and torch.equal(p, p2)
    assert torch.equal(b.Q.grad, grads[0]) and torch.equal(b.D.grad, grads[1])


def test_short_bound_is_memory_safe(seed):
    """A max_seqlen_q shorter than a query (unchecked: validate=False) sizes
    the argmax and the tiles short: nothing outside the tensors is touched
    (compute-sanitizer runs the same call: tests/gpu/sanitize_train.py), the
    long query's rows past the bound take no gradient, the other queries
    score as with a true bound."""
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    lq, ld = [5, 40, 3], [9, 70, 2, 33]
    Q = torch.randn((sum(lq), 64), device="cuda", generator=g).to(torch.bfloat16).requires_grad_(True)
    D = torch.randn((sum(ld), 64), device="cuda", generator=g).to(torch.bfloat16)
    cu_q, cu_d = _cu(lq, torch.int32), _cu(ld, torch.int32)
    s = lik.maxsim_varlen(Q, D, cu_q, cu_d, max_seqlen_q=8, validate=False)
    s.sum().backward()
    torch.cuda.synchronize()
    assert (Q.grad[5 + 8:5 + 40] == 0).all()
    ref = lik.maxsim_varlen(Q.detach(), D, cu_q, cu_d, max_seqlen_q=40)
    torch.testing.assert_close(s.detach()[[0, 2]], ref[[0, 2]], rtol=1e-2, atol=1e-2)
    with pytest.raises(ValueError, match=r"max_seqlen_q: 8 is shorter than the longest query \(40 tokens"):
        lik.maxsim_varlen(Q, D, cu_q, cu_d, max_seqlen_q=8)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("bound", ["exact", "none"])
def test_packed_calls_compile_fullgraph(backend, bound, seed):
    """torch.compile(fullgraph=True) of both packed calls with autograd: the
    eager calls' bits (without max_seqlen_q the compiled calls are bounded
    by Q's rows: the eager twin passes that)."""
    torch._dynamo.reset()
    b = Batch("bf16", "long", 128, 100, seed, True)
    mq = b.longest if bound == "exact" else None

    def f(Q, D):
        return packed_step(b, Q, D, mq, False)

    Q = b.Q.detach().clone().requires_grad_(True)
    D = b.D.detach().clone().requires_grad_(True)
    s, p = torch.compile(f, fullgraph=True, backend=backend)(Q, D)
    torch.autograd.backward([s, p], [b.gs, b.gp])
    (se, pe), grads = eager_twin(b, mq if mq is not None else b.Q.shape[0], True)
    assert torch.equal(s, se) and torch.equal(p, pe)
    assert torch.equal(Q.grad, grads[0]) and torch.equal(D.grad, grads[1])


def test_packed_call_compile_reduce_overhead(seed):
    """torch.compile(mode="reduce-overhead"): the step runs as CUDA graphs
    (torch's cudagraph trees), forward and backward, on new embeddings each
    step: the eager calls' bits."""
    torch._dynamo.reset()
    b = Batch("bf16", "short", 64, 10, seed, False)
    mq = b.longest

    def step(Q, D):
        return lik.maxsim_varlen(Q, D, b.cu_q, b.cu_d, max_seqlen_q=mq, q_mask=b.qm, normalize=True)

    cstep = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):
        Q = torch.randn(b.Q.shape, device="cuda", generator=b.g).to(torch.bfloat16).requires_grad_(True)
        D = torch.randn(b.D.shape, device="cuda", generator=b.g).to(torch.bfloat16).requires_grad_(True)
        torch.compiler.cudagraph_mark_step_begin()
        s = cstep(Q, D)
        s.backward(b.gs)
        Qe, De = Q.detach().clone().requires_grad_(True), D.detach().clone().requires_grad_(True)
        se = step(Qe, De)
        se.backward(b.gs)
        assert torch.equal(s, se)
        assert torch.equal(Q.grad, Qe.grad) and torch.equal(D.grad, De.grad)


def test_maxsim_padded_replays_in_cuda_graph(seed):
    """lik.maxsim_padded (validate=True, the default) captures: the lengths
    check is skipped while capturing; the replay reads the new lengths."""
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    B, C, Lq, Ld, d = 4, 5, 32, 80, 128
    queries = torch.randn((B, Lq, d), device="cuda", generator=g).to(torch.bfloat16)
    docs = torch.randn((B, C, Ld, d), device="cuda", generator=g).to(torch.bfloat16)
    ql = torch.randint(0, Lq + 1, (B,), device="cuda", generator=g)
    dl = torch.randint(0, Ld + 1, (B, C), device="cuda", generator=g)
    graph, s_static = capture(lambda: lik.maxsim_padded(queries, docs, ql, dl, normalize=True))
    for _ in range(2):
        queries.copy_(torch.randn(queries.shape, device="cuda", generator=g))
        docs.copy_(torch.randn(docs.shape, device="cuda", generator=g))
        ql.copy_(torch.randint(0, Lq + 1, (B,), device="cuda", generator=g))
        dl.copy_(torch.randint(0, Ld + 1, (B, C), device="cuda", generator=g))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(s_static, lik.maxsim_padded(queries, docs, ql, dl, normalize=True))
