"""The seed's ``late_interaction_kernels.mps`` (Apple Silicon): lik has no
MPS backend; both names raise NotImplementedError naming the alternative."""

from __future__ import annotations

__all__ = ["maxsim_mps", "maxsim_inference_mps"]

_MESSAGE = ("lik has no Apple MPS backend; move the tensors to the CPU and call lik.maxsim "
            "(lik's SIMD CPU kernels, autograd-aware)")


def maxsim_mps(Q, D, q_mask=None, d_mask=None, *, normalize: bool = True):
    """Not provided by lik (the seed's MPS MaxSim).

    Args:
        Q, D, q_mask, d_mask, normalize: as the seed's.

    Returns:
        Never returns.

    Raises:
        NotImplementedError: always; use :func:`lik.maxsim` on CPU tensors.
    """
    raise NotImplementedError(_MESSAGE)


def maxsim_inference_mps(Q, D, q_mask=None, d_mask=None, *, normalize: bool = True):
    """Not provided by lik (the seed's MPS inference MaxSim).

    Args:
        Q, D, q_mask, d_mask, normalize: as the seed's.

    Returns:
        Never returns.

    Raises:
        NotImplementedError: always; use :func:`lik.maxsim` on CPU tensors.
    """
    raise NotImplementedError(_MESSAGE)
