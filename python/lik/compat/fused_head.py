"""The seed's ``late_interaction_kernels.fused_head``: :func:`maxsim_from_hidden`
over ``lik.maxsim_from_hidden`` where this build of lik has it."""

from __future__ import annotations

from ._native import native

__all__ = ["maxsim_from_hidden"]

_INSTEAD = ("lik.maxsim(Q, torch.nn.functional.normalize(torch.nn.functional.linear(H_d, W, b), dim=-1), "
            "d_mask=d_mask) (the unfused projection)")


def maxsim_from_hidden(Q, H_d, W, b=None, d_mask=None, normalize: bool = True):
    """The seed's ``maxsim_from_hidden``: MaxSim of ``Q`` against documents
    projected from hidden states, ``D = normalize(H_d @ W.T + b)``, by
    ``lik.maxsim_from_hidden``.

    Args:
        Q: ``[Nq, Lq, d_out]``.
        H_d: ``[Nd, Ld, d_model]`` document hidden states.
        W: ``[d_out, d_model]`` projection; b: optional ``[d_out]`` bias.
        d_mask: optional ``[Nd, Ld]`` bool mask.
        normalize: L2-normalise the projected tokens (and Q).

    Returns:
        ``[Nq, Nd]`` float32 scores, differentiable.

    Raises:
        NotImplementedError: this build of lik has no ``maxsim_from_hidden``
            (the message names the unfused equivalent).
        TypeError, ValueError: as ``lik.maxsim_from_hidden``.
    """
    return native("maxsim_from_hidden", _INSTEAD)(Q, H_d, W, b, d_mask, normalize=normalize)
