"""lik.compat against the public signatures of late-interaction-kernels
0.4.5, written down here from the seed's documentation (name -> parameters
with their kind and default).  ``/`` never occurs; ``*`` starts the
keyword-only parameters; ``=x`` is a default."""

from __future__ import annotations

import importlib
import inspect

import pytest

torch = pytest.importorskip("torch")

SEED = {
    "maxsim": "Q, D, q_mask=None, d_mask=None, *, normalize=False, backward=None",
    "maxsim_pairs": "Q, D, q_mask=None, d_mask=None, *, normalize=False, backward=None",
    "maxsim_varlen": "Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, max_seqlen_q=None, max_seqlen_d=None",
    "maxsim_padded": "queries, documents, query_lengths, doc_lengths, *, validate=False",
    "retrieve": "Q, D, top_k, q_mask=None, d_mask=None, *, normalize=True, chunk=None, largest=True, sorted=True",
    "MaxSimScorer": "*, normalize=True, backward='auto', mask_pad_token=None",
    "MaxSimScorer.forward": "self, Q, D, q_mask=None, d_mask=None",
    "MaxSimScorer.score": "self, Q, D, q_mask=None, d_mask=None",
    "MaxSimScorer.retrieve": "self, Q, D, top_k, q_mask=None, d_mask=None, *, chunk=None",
    "MaxSimScorer.forward_with_ids": "self, Q, D, q_ids, d_ids",
    "patch_pylate": "",
    "unpatch_pylate": "",
    "patch_colpali_engine": "",
    "unpatch_colpali_engine": "",
    "autograd.maxsim": "Q, D, q_mask=None, d_mask=None, *, normalize=False, backward=None",
    "autograd.maxsim_pairs": "Q, D, q_mask=None, d_mask=None, *, normalize=False, backward=None",
    "padded.pack_padded": "queries, documents, query_lengths, doc_lengths, *, validate=False",
    "padded.maxsim_padded": "queries, documents, query_lengths, doc_lengths, *, validate=False",
    "score_pairs.score_pairs_packed": "Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, pair_q_idx, pair_d_idx, "
                                      "*, max_seqlen_q=None, max_seqlen_d=None",
    "topk.maxsim_topk": "Q, D, k, q_mask=None, d_mask=None, *, normalize=False, chunk_size=None, largest=True, "
                        "sorted=True",
    "forward.maxsim_forward": "Q, D, q_mask=None, d_mask=None, *, save_argmax=False, normalize=False",
    "backward.maxsim_backward_unified": "grad_scores, Q, D, argmax, q_mask=None, *, kd_layout=False",
    "backward.maxsim_backward_lowmem": "grad_scores, Q, D, argmax, q_mask=None, *, kd_layout=False",
    "backward.maxsim_backward_unified_reference": "grad_scores, Q, D, argmax, q_mask=None",
    "varlen.maxsim_varlen": "Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, max_seqlen_q=None, max_seqlen_d=None",
    "retrieve.retrieve": "Q, D, top_k, q_mask=None, d_mask=None, *, normalize=True, chunk=None, largest=True, "
                         "sorted=True",
    "plaid.plaid_approx_score": "query_centroid_scores, codes, doc_lengths",
    "plaid.maxsim_residual": "Q, codes, residuals, doc_lengths, centroids, bucket_weights, nbits, *, normalize=True",
    "plaid.maxsim_residual_varlen": "Q, codes_flat, residuals_flat, cu_seqlens_d, centroids, bucket_weights, nbits, "
                                    "*, max_seqlen_d=None, normalize=True",
    "fused_head.maxsim_from_hidden": "Q, H_d, W, b=None, d_mask=None, normalize=True",
    "fp8.maxsim_inference_fp8": "Q, D, *, scale_Q, scale_D, q_mask=None, d_mask=None",
    "fp8.quantize_fp8_per_tensor": "X, dtype=torch.float8_e4m3fn",
    "fp8.quantize_fp8_per_token": "X, dtype=torch.float8_e4m3fn",
    "fp8.dequantize_fp8_per_tensor": "X_fp8, scale",
    "fp8.dequantize_fp8_per_token": "X_fp8, scale",
    "mps.maxsim_mps": "Q, D, q_mask=None, d_mask=None, *, normalize=True",
    "mps.maxsim_inference_mps": "Q, D, q_mask=None, d_mask=None, *, normalize=True",
    "reference.maxsim_reference": "Q, D, q_mask=None, d_mask=None, *, normalize=False",
    "reference.maxsim_reference_varlen": "Q, D, cu_seqlens_q, cu_seqlens_d",
    "reference.maxsim_reference_scatter": "Q_packed, D_packed, cu_seqlens_q, cu_seqlens_d, pair_q_idx, pair_d_idx",
    "reference.maxsim_padded_reference": "queries, documents, query_lengths, doc_lengths",
    "reference.maxsim_from_hidden_reference": "Q, H_d, W, b=None, d_mask=None, *, normalize=True",
    "reference.plaid_approx_score_reference": "query_centroid_scores, codes, doc_lengths",
    "reference.unpack_residuals_reference": "residuals, nbits, d",
    "reference.maxsim_residual_reference": "Q, codes, residuals, doc_lengths, centroids, bucket_weights, nbits, *, "
                                           "normalize=True",
    "plaid.plaid_approx_score_reference": "query_centroid_scores, codes, doc_lengths",
    "plaid.maxsim_residual_reference": "Q, codes, residuals, doc_lengths, centroids, bucket_weights, nbits, *, "
                                       "normalize=True",
}

#: The seed's public names of the package and of each submodule (its ``__all__`` where it has one).
SEED_ALL = {
    "": ["__version__", "MaxSimScorer", "retrieve", "maxsim_padded", "patch_pylate", "unpatch_pylate",
         "patch_colpali_engine", "unpatch_colpali_engine", "maxsim", "maxsim_pairs", "maxsim_varlen", "reference"],
    "padded": ["PackedBatch", "pack_padded", "maxsim_padded"],
    "score_pairs": ["score_pairs_packed"],
    "topk": ["maxsim_topk"],
    "backward": ["maxsim_backward_unified", "maxsim_backward_unified_reference", "maxsim_backward_lowmem"],
    "retrieve": ["MaxSimScorer", "retrieve"],
    "fp8": ["maxsim_inference_fp8", "quantize_fp8_per_tensor", "quantize_fp8_per_token", "dequantize_fp8_per_tensor",
            "dequantize_fp8_per_token"],
    "mps": ["maxsim_mps", "maxsim_inference_mps"],
    "reference": ["NEG_INF", "maxsim_reference", "maxsim_reference_varlen", "maxsim_reference_scatter",
                  "maxsim_padded_reference", "maxsim_from_hidden_reference", "plaid_approx_score_reference",
                  "unpack_residuals_reference", "maxsim_residual_reference"],
    "pylate_compat": ["patch_pylate", "unpatch_pylate", "patched_colbert_scores", "patched_colbert_kd_scores",
                      "patched_colbert_scores_pairwise"],
    "colpali_compat": ["patch_colpali_engine", "unpatch_colpali_engine"],
}


def _lookup(dotted: str):
    """``name`` in lik.compat, ``module.name`` in lik.compat.module (the
    package's ``retrieve`` is the function, as the seed's), ``Class.method``."""
    head, _, tail = dotted.partition(".")
    if tail and head[0].islower():
        return getattr(importlib.import_module(f"lik.compat.{head}"), tail)
    obj = getattr(importlib.import_module("lik.compat"), head)
    return getattr(obj, tail) if tail else obj


def _render(fn) -> str:
    sig = inspect.signature(fn)
    out, star = [], False
    for p in sig.parameters.values():
        assert p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY), f"{fn}: {p}"
        if p.kind == p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        if p.default is p.empty:
            out.append(p.name)
        elif isinstance(p.default, torch.dtype):
            out.append(f"{p.name}={p.default}")
        else:
            out.append(f"{p.name}={p.default!r}")
    return ", ".join(out)


@pytest.mark.parametrize("name", sorted(SEED))
def test_signature_matches_the_seed(name):
    assert _render(_lookup(name)) == SEED[name]


@pytest.mark.parametrize("module", sorted(SEED_ALL))
def test_public_names_present(module):
    mod = importlib.import_module("lik.compat" + (f".{module}" if module else ""))
    missing = [n for n in SEED_ALL[module] if not hasattr(mod, n)]
    assert not missing


@pytest.mark.parametrize("name", sorted(n for n in SEED if not n.startswith(("MaxSimScorer", "patch_", "unpatch_"))))
def test_every_compat_function_documented(name):
    doc = inspect.getdoc(_lookup(name)) or ""
    for section in ("Args:", "Returns:", "Raises:"):
        assert section in doc, f"{name}: no {section}"


def test_import_as_the_seed():
    import lik.compat as late_interaction_kernels
    from lik.compat.padded import PackedBatch, pack_padded  # noqa: F401
    from lik.compat.score_pairs import score_pairs_packed  # noqa: F401

    assert late_interaction_kernels.__version__


def test_every_native_public_function_documented():
    import lik
    import lik.plaid

    for mod in (lik, lik.plaid):
        for name in mod.__all__:
            fn = getattr(mod, name)
            if inspect.isclass(fn) or not callable(fn):
                continue
            kinds = {p.kind for p in inspect.signature(fn).parameters.values()}
            assert inspect.Parameter.VAR_POSITIONAL not in kinds and inspect.Parameter.VAR_KEYWORD not in kinds, name
            doc = inspect.getdoc(fn) or ""
            for section in ("Args:", "Returns:", "Raises:"):
                assert section in doc, f"{mod.__name__}.{name}: no {section}"
