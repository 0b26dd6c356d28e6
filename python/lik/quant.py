"""Low-bit MaxSim: int8, fp8 and binary embeddings (``lik_experimental.h``).

Fewer bytes per token for inference: scores only, no gradient.  Every
function takes numpy arrays or torch tensors (fp8: torch only, numpy has no
fp8 dtype) and returns the same kind.  The MaxSim calls run on the CPU
(AVX-512 VNNI / AVX2 / portable) and on CUDA (tensor cores: int8 sm_80+,
fp8 sm_89+); the quantisers run where their input is, CPU or CUDA, bitwise
alike.  Semantics (the C header states them exactly):

* int8 / fp8: ``sim(s, t) = |scale_Q[s]| * (scale_D[t] * <Q[s], D[t]>)`` with
  ``Q[s]`` negated where ``scale_Q[s] < 0`` (so a query token adds
  ``|scale_Q[s]| * max_t(scale_D[t] * <Q[s], D[t]>)``: the query scale
  leaves the max, one product per token pair), the
  dot product exact in integers (int8) or summed in fp32 (fp8; on an H100 /
  H200, several queries of 64 < d <= 128 run on wgmma, whose fp8 sums keep
  fewer bits: up to 1.3e-4 of ``sum_k |q_k d_k|`` times the scales, low);
  scales are per tensor (0-d) or per token (``[Nq, Lq]`` / ``[Nd, Ld]``).
* binary documents: bit ``k`` set means ``+1``, clear ``-1``; an int8 query
  scores ``scale_Q[s] * sum_k q_k * (+-1)``, a binary query
  ``d - 2 * popcount(q xor d)``.  Bits are packed most significant bit first
  (``numpy.packbits(X > 0, axis=-1)``).

``score[i, j] = sum over valid query tokens of the max over valid document
tokens of sim``, as :func:`lik.maxsim`.
"""

from __future__ import annotations


import numpy as np

from . import _lib
from ._api import _empty, _prepare, _scores_shape, maxsim

__all__ = [
    "quantize_fp8_per_tensor",
    "quantize_fp8_per_token",
    "dequantize_fp8_per_tensor",
    "dequantize_fp8_per_token",
    "quantize_int8",
    "quantize_binary",
    "maxsim_inference_int8",
    "maxsim_inference_fp8",
    "maxsim_inference_binary",
    "retrieve_binary",
]


def quantize_int8(X, *, normalize: bool = False):
    """Symmetric per-token int8 quantisation.

    Args:
        X: ``[..., d]`` (1 to 4 dims) float32 / float16 / float64 /
            torch.bfloat16, any strides.
        normalize: scale the L2-normalised token (``q * scale`` approximates
            ``X / ||X||``); the int8 values are the same either way.

    Returns:
        ``(X_int8, scale)``: int8 ``X.shape`` with ``q = round(x / scale)``
        (half to even, fp32, clamped to [-127, 127]) and float32 ``scale``
        of shape ``X.shape[:-1]``, ``max|x| / 127`` (0 for an all-zero token).

    Raises:
        TypeError: not an array, unsupported dtype.
        ValueError: ``d = 0``, more than 4 dims.
        lik.LikError: CUDA tensors in a build of lik without CUDA.

    CUDA tensors are quantised on their device (the current stream), values
    and scales bitwise those of the CPU.
    """
    (X,), tm = _prepare(("X",), (X,), (False,))
    X_int8 = _empty(tuple(X.shape), "int8", tm, X)
    scale = _empty(tuple(X.shape[:-1]), "float32", tm, X)
    _lib.call_quantize_int8(X, X_int8, scale, normalize=normalize)
    return X_int8, scale


def _fp8_max(dtype) -> float:
    import torch

    if dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise TypeError(f"dtype: expected torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")
    return float(torch.finfo(dtype).max)


def quantize_fp8_per_tensor(X, dtype=None):
    """FP8 with one scale for the tensor (the seed's formula).

    Args:
        X: float torch tensor ``[..., d]``.
        dtype: ``torch.float8_e4m3fn`` (default) or ``torch.float8_e5m2``.

    Returns:
        ``(X_fp8, scale)``: ``X / scale`` clamped to the format's range and
        rounded to fp8, and a 0-d float32 ``scale = max(max|X|, 1e-6) /
        fp8_max`` (``X_fp8 * scale`` reads ``X`` back); an empty ``X`` gets
        scale 1.

    Raises:
        TypeError: ``X`` not a torch tensor, ``dtype`` not an fp8 dtype.
    """
    import torch

    if not isinstance(X, torch.Tensor):
        raise TypeError(f"X: expected a torch tensor (numpy has no fp8), got {type(X).__name__}")
    dtype = torch.float8_e4m3fn if dtype is None else dtype
    fmax = _fp8_max(dtype)
    if X.numel() == 0:
        return X.to(dtype), torch.ones((), device=X.device, dtype=torch.float32)
    scale = X.abs().amax().float().clamp_min(1e-6) / fmax
    return (X.float() / scale).clamp(-fmax, fmax).to(dtype).contiguous(), scale


def quantize_fp8_per_token(X, dtype=None):
    """FP8 with one scale per token (the seed's formula).

    Args:
        X: float torch tensor ``[..., d]``.
        dtype: ``torch.float8_e4m3fn`` (default) or ``torch.float8_e5m2``.

    Returns:
        ``(X_fp8, scale)``: float32 ``scale [...] = max(max_k |x_k|, 1e-6) /
        fp8_max`` per token and ``X / scale`` clamped and rounded to fp8.

    Raises:
        TypeError: as :func:`quantize_fp8_per_tensor`.
    """
    import torch

    if not isinstance(X, torch.Tensor):
        raise TypeError(f"X: expected a torch tensor (numpy has no fp8), got {type(X).__name__}")
    dtype = torch.float8_e4m3fn if dtype is None else dtype
    fmax = _fp8_max(dtype)
    scale = X.abs().amax(dim=-1).float().clamp_min(1e-6) / fmax
    return (X.float() / scale[..., None]).clamp(-fmax, fmax).to(dtype).contiguous(), scale


def _check_dequantize(X_fp8, scale, per_token: bool) -> None:
    """``X_fp8`` / ``scale`` torch tensors; ``scale`` of ``X_fp8.shape[:-1]``
    (per token) or of one element (per tensor)."""
    import torch

    for name, x in (("X_fp8", X_fp8), ("scale", scale)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: expected a torch tensor, got {type(x).__name__}")
    want = tuple(X_fp8.shape[:-1]) if per_token else ()
    bad = tuple(scale.shape) != want if per_token else scale.numel() != 1
    if bad:
        raise ValueError(f"scale: shape {tuple(scale.shape)}, expected {want} (one scale "
                         f"{'per token' if per_token else 'for the tensor'} of X_fp8 {tuple(X_fp8.shape)})")


def dequantize_fp8_per_tensor(X_fp8, scale):
    """Reads per-tensor FP8 back.

    Args:
        X_fp8: float8 torch tensor ``[..., d]``.
        scale: 0-d float32 tensor (from :func:`quantize_fp8_per_tensor`;
            any one-element tensor).

    Returns:
        float32 tensor ``X_fp8 * scale``.

    Raises:
        TypeError: ``X_fp8`` or ``scale`` is not a torch tensor.
        ValueError: ``scale`` has more than one element.
    """
    _check_dequantize(X_fp8, scale, False)
    return X_fp8.float() * scale


def dequantize_fp8_per_token(X_fp8, scale):
    """Reads per-token FP8 back.

    Args:
        X_fp8: float8 torch tensor ``[..., d]``.
        scale: float32 ``[...]`` (from :func:`quantize_fp8_per_token`).

    Returns:
        float32 tensor ``X_fp8 * scale[..., None]``.

    Raises:
        TypeError: ``X_fp8`` or ``scale`` is not a torch tensor.
        ValueError: ``scale``'s shape is not ``X_fp8.shape[:-1]``.
    """
    _check_dequantize(X_fp8, scale, True)
    return X_fp8.float() * scale[..., None]


def quantize_binary(X):
    """Sign bits of every token: bit ``k`` is set iff ``x_k > 0``.

    Args:
        X: ``[..., d]`` (1 to 4 dims) float32 / float16 / float64 /
            torch.bfloat16.

    Returns:
        uint8 ``[..., ceil(d / 8)]``: dimension ``k`` in bit ``7 - k % 8`` of
        byte ``k // 8`` (``numpy.packbits(X > 0, axis=-1)``), the bits past
        ``d`` zero.  32x fewer bytes than float32.

    Raises:
        TypeError / ValueError / lik.LikError: as :func:`quantize_int8`.

    CUDA tensors are quantised on their device (the current stream), the
    bits bitwise those of the CPU.
    """
    (X,), tm = _prepare(("X",), (X,), (False,))
    bits = _empty(tuple(X.shape[:-1]) + (-(-X.shape[-1] // 8) if X.ndim else 0,), "uint8", tm, X)
    _lib.call_quantize_binary(X, bits)
    return bits


def _as_scale(s, name: str, tm: bool, like):
    """A Python number as a 0-d float32 scale of the call's kind."""
    if isinstance(s, (int, float, np.number)) and not isinstance(s, bool):
        arr = np.asarray(s, dtype=np.float32)
        return _lib.to_torch(arr) if tm else arr
    _lib.check_array(s, name)
    return s


def _scaled(Q, D, scale_Q, scale_D, q_mask, d_mask, allowed, what: str):
    (Q, D, q_mask, d_mask), tm = _prepare(
        ("Q", "D", "q_mask", "d_mask"), (Q, D, q_mask, d_mask), (False, False, True, True)
    )
    if _lib.dtype_name(Q) not in allowed:
        raise TypeError(f"Q: dtype {_lib.dtype_name(Q)} is not {what} ({', '.join(allowed)})")
    scale_Q = _as_scale(scale_Q, "scale_Q", tm, Q)
    scale_D = _as_scale(scale_D, "scale_D", tm, Q)
    if tm:
        scale_Q, scale_D = _lib.to_torch(scale_Q), _lib.to_torch(scale_D)
    scores = _empty(_scores_shape(Q, D), "float32", tm, Q)
    _lib.call_maxsim_scaled(Q, scale_Q, D, scale_D, q_mask, d_mask, scores)
    return scores


def maxsim_inference_int8(Q, D, *, scale_Q, scale_D, q_mask=None, d_mask=None):
    """MaxSim of int8 embeddings with per-tensor or per-token scales.

    Args:
        Q: int8 ``[Nq, Lq, d]`` or ``[Lq, d]`` (e.g. from :func:`quantize_int8`).
        D: int8 ``[Nd, Ld, d]`` or ``[Ld, d]``.
        scale_Q: float32 ``()`` (per tensor; a Python number too) or
            ``[Nq, Lq]`` / ``[Lq]`` (per token).
        scale_D: the same rules for ``D``.
        q_mask, d_mask: optional bool / uint8 ``[Nq, Lq]`` / ``[Nd, Ld]``.

    Returns:
        float32 scores ``[Nq, Nd]`` (dims of 2-D inputs dropped): per token
        pair ``|scale_Q| * (scale_D * dot)`` with the exact integer dot
        product (values read clamped to [-127, 127], negated for a negative
        ``scale_Q``), the ``|scale_Q|`` product taken after the max over
        document tokens (the module's semantics).

    Raises:
        TypeError: ``Q`` / ``D`` not int8 or not the same dtype, scales not
            float32, masks not bool / uint8.
        ValueError: shapes (d, scale, mask), different devices.
        lik.LikError: allocation / CUDA failure, fp8 on a GPU below sm_89.
    """
    return _scaled(Q, D, scale_Q, scale_D, q_mask, d_mask, ("int8",), "int8")


def maxsim_inference_fp8(Q, D, *, scale_Q, scale_D, q_mask=None, d_mask=None):
    """MaxSim of fp8 embeddings (the seed's ``maxsim_inference_fp8``).

    Args:
        Q: torch.float8_e4m3fn or torch.float8_e5m2 ``[Nq, Lq, d]`` / ``[Lq, d]``.
        D: the same fp8 dtype, ``[Nd, Ld, d]`` / ``[Ld, d]``.
        scale_Q, scale_D: float32 ``()`` or per token, as
            :func:`maxsim_inference_int8`.
        q_mask, d_mask: optional bool / uint8 masks.

    Returns:
        float32 scores ``[Nq, Nd]``: per token pair ``|scale_Q| * (scale_D *
        sum_k q_k d_k)`` summed in fp32 (the fp8 products are exact; ``q``
        negated for a negative ``scale_Q``, ``|scale_Q|`` after the max).  On the
        CPU the fp8 values are decoded to fp32 (no fp8 arithmetic on x86), so
        this path saves memory, not time.

    Raises:
        TypeError / ValueError / lik.LikError: as :func:`maxsim_inference_int8`.
    """
    return _scaled(Q, D, scale_Q, scale_D, q_mask, d_mask, ("float8_e4m3fn", "float8_e5m2"), "fp8")


def maxsim_inference_binary(Q, D_bits, *, d: int | None = None, scale_Q=None, q_mask=None, d_mask=None):
    """MaxSim against binary documents (from :func:`quantize_binary`).

    Args:
        Q: int8 ``[Nq, Lq, d]`` / ``[Lq, d]`` with ``scale_Q`` (int8 query x
            sign document: ``scale_Q[s] * sum_k q_k * (+-1)``), or uint8 bits
            ``[Nq, Lq, ceil(d / 8)]`` with ``scale_Q=None`` (binary x binary:
            ``d - 2 * popcount(xor)``, unscaled).
        D_bits: uint8 ``[Nd, Ld, ceil(d / 8)]`` or ``[Ld, ceil(d / 8)]``.
        d: the embedding dimension; default ``Q.shape[-1]`` for int8 queries,
            ``8 * D_bits.shape[-1]`` for bit queries.
        scale_Q: float32 ``()`` / per token (int8 queries only).
        q_mask, d_mask: optional bool / uint8 masks.

    Returns:
        float32 scores ``[Nq, Nd]`` (dims of 2-D inputs dropped).

    Raises:
        TypeError: dtypes (``Q`` neither int8 nor uint8, ``D_bits`` not uint8).
        ValueError: a byte dimension that is not ``ceil(d / 8)``, ``d < 1``,
            ``scale_Q`` missing for int8 or given for bit queries, shapes.
        lik.LikError: CUDA failure.
    """
    (Q, D_bits, q_mask, d_mask), tm = _prepare(
        ("Q", "D_bits", "q_mask", "d_mask"), (Q, D_bits, q_mask, d_mask), (False, False, True, True)
    )
    if d is None:
        d = Q.shape[-1] if _lib.dtype_name(Q) == "int8" else 8 * D_bits.shape[-1]
    d = _lib.int_arg(d, "d")
    if scale_Q is not None:
        scale_Q = _as_scale(scale_Q, "scale_Q", tm, Q)
        if tm:
            scale_Q = _lib.to_torch(scale_Q)
    scores = _empty(_scores_shape(Q, D_bits), "float32", tm, Q)
    _lib.call_maxsim_binary(Q, scale_Q, D_bits, d, q_mask, d_mask, scores)
    return scores


def retrieve_binary(Q, D, D_bits, top_k: int, *, candidates: int = 10, q_mask=None, d_mask=None,
                    normalize: bool = True):
    """Top-k by a binary pre-filter, then exact MaxSim rescoring.

    The queries are quantised to int8 (:func:`quantize_int8`) and scored
    against the binary corpus ``D_bits`` (:func:`maxsim_inference_binary`);
    the ``top_k * candidates`` best documents per query are rescored exactly
    by :func:`lik.maxsim` on ``D`` (KD layout; the candidates are gathered,
    a copy, in query blocks of at most 2^26 elements), and the ``top_k`` best
    of those returned.  Reads 1 bit per dimension for the whole corpus and full
    precision only for the candidates.

    Args:
        Q: float ``[Nq, Lq, d]`` or ``[Lq, d]``.
        D: float ``[Nd, Ld, d]`` (same dtype as ``Q``): the exact corpus.
        D_bits: uint8 ``[Nd, Ld, ceil(d / 8)]``, ``quantize_binary(D)``.
        top_k: int >= 1; ``k = min(top_k, Nd)`` results.
        candidates: int >= 1, candidates per result (``c = min(top_k *
            candidates, Nd)`` documents are rescored).
        q_mask, d_mask: optional bool / uint8 masks.
        normalize: cosine scoring (per-token L2 normalisation) in the exact
            rescoring and in the query quantisation (default True, as
            :func:`lik.retrieve`).

    Returns:
        ``(scores, indices)``: float32 exact scores and int64 document
        indices ``[Nq, k]`` (``[k]`` for 2-D ``Q``), scores descending, ties
        by lower index.  numpy for numpy inputs, torch for torch.

    Raises:
        TypeError: non-int ``top_k`` / ``candidates``, dtypes.
        ValueError: ``top_k`` or ``candidates`` < 1, shapes.
    """
    top_k = _lib.int_arg(top_k, "top_k", 1)
    candidates = _lib.int_arg(candidates, "candidates", 1)
    (Q, D, D_bits, q_mask, d_mask), tm = _prepare(
        ("Q", "D", "D_bits", "q_mask", "d_mask"), (Q, D, D_bits, q_mask, d_mask),
        (False, False, False, True, True)
    )
    if Q.ndim == 2:
        s, i = retrieve_binary(Q[None], D, D_bits, top_k, candidates=candidates,
                               q_mask=None if q_mask is None else q_mask[None], d_mask=d_mask,
                               normalize=normalize)
        return s[0], i[0]
    if D.ndim != 3 or D_bits.ndim != 3 or D.shape[:2] != D_bits.shape[:2]:
        raise ValueError(f"D, D_bits: expected [Nd, Ld, d] and [Nd, Ld, ceil(d / 8)], got "
                         f"{tuple(D.shape)} and {tuple(D_bits.shape)}")
    Qi, sq = quantize_int8(Q, normalize=normalize)  # where Q is: bitwise the CPU's on CUDA
    coarse = maxsim_inference_binary(Qi, D_bits, d=D.shape[-1], scale_Q=sq, q_mask=q_mask, d_mask=d_mask)
    nq, nd = coarse.shape
    k, c = min(top_k, nd), min(top_k * candidates, nd)
    if tm:
        import torch

        if c == 0:
            return coarse[:, :0], torch.zeros((nq, 0), dtype=torch.int64, device=coarse.device)

        cand = torch.topk(coarse, c, dim=1).indices.sort(dim=1).values
    elif c == 0:
        return coarse[:, :0], np.zeros((nq, 0), np.int64)
    else:
        cand = np.argpartition(-coarse, c - 1, axis=1)[:, :c] if c < nd else np.tile(np.arange(nd), (nq, 1))
        cand = np.sort(cand, axis=1)
    # exact rescoring in the KD layout, in query blocks of at most ~2^26 gathered elements
    qb = max(1, (1 << 26) // max(1, c * D.shape[1] * D.shape[2]))
    parts = [maxsim(Q[a:a + qb], D[cand[a:a + qb]], None if q_mask is None else q_mask[a:a + qb],
                    None if d_mask is None else d_mask[cand[a:a + qb]], normalize=normalize)
             for a in range(0, nq, qb)]
    exact = (torch.cat(parts) if tm else np.concatenate(parts)) if parts else coarse[:, :0]
    if tm:  # a stable descending sort keeps the lower index (cand ascending) first on ties
        order = torch.sort(exact, dim=1, descending=True, stable=True).indices[:, :k]
        return exact.gather(1, order), cand.gather(1, order)
    order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(exact, order, axis=1), np.take_along_axis(cand, order, axis=1).astype(np.int64)
