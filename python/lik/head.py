"""lik.head — the fused D-side head: MaxSim against documents given as hidden
states, projected on the fly (C: ``lik_maxsim_from_hidden`` in
``lik_experimental.h``; the seed's ``maxsim_from_hidden``).

``maxsim_from_hidden(Q, H_d, W, b)`` equals
``maxsim(Q, F.normalize(F.linear(H_d, W, b), dim=-1))`` (with ``Q`` used as
given) without the ``[Nd, Ld, d_out]`` projection ever being written to
memory.  The backward is closed form: only the argmax tokens carry gradient,
so only those rows of ``H_d`` are read and projected again.
"""

from __future__ import annotations

import torch

from . import _lib

__all__ = ["maxsim_from_hidden"]


def _check(Q, H_d, W, b, q_mask, d_mask) -> None:
    for x, name, optional in ((Q, "Q", False), (H_d, "H_d", False), (W, "W", False), (b, "b", True),
                              (q_mask, "q_mask", True), (d_mask, "d_mask", True)):
        if x is not None and not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: expected a torch tensor, got {type(x).__name__}")
        _lib.check_array(x, name, optional=optional)


class _MaxSimFromHidden(torch.autograd.Function):
    """Forward saves the argmax; backward is lik_maxsim_from_hidden_backward."""

    @staticmethod
    def forward(ctx, Q, H_d, W, b, q_mask, d_mask, normalize):
        scores, argmax = _forward(Q, H_d, W, b, q_mask, d_mask, normalize, True)
        ctx.save_for_backward(Q, H_d, W, b, q_mask, d_mask, argmax)
        ctx.normalize = normalize
        ctx.mark_non_differentiable(argmax)
        return scores

    @staticmethod
    def backward(ctx, grad_scores):
        Q, H_d, W, b, q_mask, d_mask, argmax = ctx.saved_tensors
        need = ctx.needs_input_grad
        if grad_scores.dtype not in (torch.float32, torch.float64):
            grad_scores = grad_scores.float()
        grads = [torch.empty_like(x) if need[k] and x is not None else None
                 for k, x in enumerate((Q, H_d, W, b))]
        _lib.call_maxsim_from_hidden_backward(Q, H_d, W, b, q_mask, d_mask, argmax, grad_scores, *grads,
                                              normalize=ctx.normalize)
        return (*grads, None, None, None)


def _forward(Q, H_d, W, b, q_mask, d_mask, normalize, with_argmax):
    n_cand = H_d.shape[1] if H_d.ndim == 4 else H_d.shape[0]
    sdt = torch.float64 if Q.dtype == torch.float64 else torch.float32  # F64: the double sum
    scores = torch.empty(Q.shape[0], n_cand, dtype=sdt, device=Q.device)
    argmax = None
    if with_argmax:
        argmax = torch.empty(Q.shape[0], n_cand, Q.shape[1], dtype=torch.int32, device=Q.device)
    _lib.call_maxsim_from_hidden(Q, H_d, W, b, q_mask, d_mask, scores, argmax, normalize=normalize)
    return scores, argmax


def maxsim_from_hidden(Q, H_d, W, b=None, d_mask=None, normalize: bool = True, *, q_mask=None):
    """Fused ``F.linear(H_d, W, b)`` -> L2 normalise -> MaxSim against ``Q``.

    ``D = H_d @ W.T + b``, each token L2-normalised (``x / max(||x||,
    1e-12)``) when ``normalize``; ``score[i, j] = sum_s max_t <Q[i, s],
    D[j, t]>`` over valid tokens.  ``Q`` is used as given: pass it already
    projected and normalised.  Autograd-aware in ``Q``, ``H_d``, ``W`` and
    ``b`` (closed-form backward over the argmax tokens, deterministic); when
    none of them requires grad no argmax is kept.

    On CUDA (float16 / bfloat16 / float32, ``d_out <= 256``) the projection
    runs on tensor cores: half / bf16 operands exactly, float32 as 3xTF32
    (fp32 accuracy, about 1e-6 relative), or one TF32 product (about 1e-3)
    under ``torch.set_float32_matmul_precision("high")`` / ``"medium"``;
    float64 runs on the CPU only.  On Hopper (sm_90a; bfloat16, or float16
    with ``normalize``; ``d_out <= 128``, ``Lq <= 256``) the forward runs on
    wgmma and scores the projection as a hi / lo pair of the input dtype
    (within about 2^-16 of fp32).

    Args:
        Q: ``[Nq, Lq, d_out]`` or ``[Lq, d_out]`` float32 / float16 /
            bfloat16 / float64 torch tensor.
        H_d: cross ``[Nd, Ld, d_model]`` or KD ``[Nq, K, Ld, d_model]``
            (per-query candidates; needs 3-D ``Q``), ``Q``'s dtype and device.
        W: ``[d_out, d_model]`` (``torch.nn.Linear.weight``), ``Q``'s dtype.
        b: ``None`` or ``[d_out]``, ``Q``'s dtype.
        d_mask: ``None`` or bool / uint8 with ``H_d``'s shape without
            ``d_model`` (``[Ld]`` is read as ``[1, Ld]``); masked tokens are
            never read for scoring and get zero gradient.
        normalize: L2-normalise each projected document token.
        q_mask: ``None`` or bool / uint8 ``[Nq, Lq]`` (``[Lq]`` for 2-D Q).

    Returns:
        scores ``[Nq, Nd]`` (cross), ``[Nq, K]`` (KD), ``[Nd]`` for 2-D
        ``Q``: float32, float64 for float64 inputs (so
        ``torch.autograd.gradcheck`` works).  A query token with no valid
        document token adds 0.

    Raises:
        TypeError: an argument is not a torch tensor, or a dtype is
            unsupported or differs from ``Q``'s.
        ValueError: shapes disagree (``W`` not ``[d_out, d_model]``, ``b``
            not ``[d_out]``, masks, batch sizes) or devices differ; the
            message names the argument and the sizes.
        lik.LikError: allocation failure, CUDA error, CUDA tensors with a
            library built without CUDA, or float64 / ``d_out > 256`` on CUDA.
    """
    _check(Q, H_d, W, b, q_mask, d_mask)
    single = Q.ndim == 2
    if single:
        Q = Q.unsqueeze(0)
        q_mask = q_mask.unsqueeze(0) if q_mask is not None and q_mask.ndim == 1 else q_mask
    if d_mask is not None and d_mask.ndim == 1:
        d_mask = d_mask.unsqueeze(0)
    if Q.ndim != 3:
        raise ValueError(f"Q: expected [Nq, Lq, d_out] or [Lq, d_out], got shape {tuple(Q.shape)}")
    if H_d.ndim not in (3, 4):
        raise ValueError(f"H_d: expected [Nd, Ld, d_model] or [Nq, K, Ld, d_model], got shape {tuple(H_d.shape)}")
    normalize = _lib.flag(normalize, "normalize")
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in (Q, H_d, W, b)):
        scores = _MaxSimFromHidden.apply(Q, H_d, W, b, q_mask, d_mask, normalize)
    else:
        scores, _ = _forward(Q, H_d, W, b, q_mask, d_mask, normalize, False)
    return scores.squeeze(0) if single else scores
