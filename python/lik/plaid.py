"""lik.plaid — compressed late interaction: the ColBERTv2 / PLAID residual
codec and MaxSim scored on the compressed tokens (C: ``lik_experimental.h``).

A corpus is stored as one centroid id per token (``codes``) plus ``nbits``
bits per dimension of the residual to that centroid (``residuals``, uint8,
``d * nbits / 8`` bytes per token).  Functions:

* :func:`train_codec` — bucket cutoffs / weights from a residual sample.
* :func:`compress` — embeddings -> (codes, residuals).
* :func:`decompress` — (codes, residuals) -> embeddings.
* :func:`maxsim_residual` / :func:`maxsim_residual_varlen` — MaxSim of
  queries against padded / packed compressed documents, decoded on the fly
  (also exported as ``lik.maxsim_residual`` / ``lik.maxsim_residual_varlen``).
* :func:`plaid_approx_score` — PLAID's centroid-interaction score.
* :class:`Index` — a PLAID index: build / train + add, save / load in
  fast-plaid's folder format, search (``lik.index``).

Codec facts (ColBERT ``colbert/indexing/codecs/residual.py``, fast-plaid
``rust/index/create.rs``): a token's code is the centroid of highest inner
product (ties: lowest index); a residual value ``v`` falls in bucket
``#{cutoffs < v}`` (``torch.bucketize(right=False)``); decoding is
``centroid + bucket_weights[bucket]``, L2-normalised with ``normalize``.

``layout="colbert"`` (default) reads and writes the bytes of ColBERTv2,
fast-plaid and PyLate indexes: each dimension's bucket index least
significant bit first into one bit stream, packed most significant bit first
(``numpy.packbits``).  ``layout="lik"`` is the seed package's order (field
``i`` of a byte at bits ``i*nbits ..``): the 8-bit reversal of a colbert byte.

Inputs are numpy arrays or torch tensors (numpy in -> numpy out, any torch
in -> torch out).  Errors are the C library's messages (naming the argument
and the sizes) as ValueError (shape, value) / TypeError (dtype).
"""

from __future__ import annotations


from . import _api, _lib

__all__ = [
    "train_codec",
    "compress",
    "decompress",
    "maxsim_residual",
    "maxsim_residual_varlen",
    "plaid_approx_score",
    "Index",
]

_NBITS = (1, 2, 4, 8)


# ---- helpers ------------------------------------------------------------------------


def _int_arg(value, name: str) -> int:
    """nbits (a C int) / max_seqlen_d (int64), checked by _lib.int_arg."""
    return _lib.int_arg(value, name, *((_lib.INT32_MIN, _lib.INT32_MAX) if name == "nbits" else ()))


def _layout(layout) -> str:
    if layout not in _lib.RESIDUAL_LAYOUTS:
        raise ValueError(f"layout: must be one of {tuple(_lib.RESIDUAL_LAYOUTS)}, got {layout!r}")
    return layout


def _nb(nbits: int) -> int:
    """2^nbits for a valid nbits, else 1 (the C call then names the error)."""
    return 1 << nbits if nbits in _NBITS else 1


def _width(d: int, nbits: int) -> int:
    return d * nbits // 8 if nbits in _NBITS else 0


def _host(x):
    """A CPU copy of a torch CUDA tensor (other arrays unchanged)."""
    if _lib.is_torch(x) and x.device.type != "cpu":
        return x.detach().cpu()
    return x


def _on(x, like):
    """x moved to like's device (torch)."""
    if _lib.is_torch(like) and like.device.type != "cpu":
        return x.to(like.device)
    return x


def _is_cuda(x) -> bool:
    return _lib.is_torch(x) and x.device.type == "cuda"


# ---- codec ---------------------------------------------------------------------------


def train_codec(residuals, nbits: int):
    """Bucket cutoffs and weights of the residual codec from a sample.

    Args:
        residuals: residual values ``x - centroid[code]`` of a sample of
            tokens, any shape (1 to 4 dims), float; every value is pooled.
        nbits: 1, 2, 4 or 8.

    Returns:
        ``(bucket_cutoffs [2^nbits - 1], bucket_weights [2^nbits])`` float32:
        the quantiles at ``i / 2^nbits`` and ``(i + 0.5) / 2^nbits`` of the
        pooled values, linear interpolation (ColBERTv2's recipe).  Runs on the
        CPU; a CUDA tensor is copied to the host and the results returned on
        its device.

    Raises:
        ValueError: nbits not in {1, 2, 4, 8}, an empty sample, a NaN or
            infinite value.
    """
    nbits = _int_arg(nbits, "nbits")
    (r,), tm = _api._prepare(("residuals",), (residuals,), (False,))
    nb = _nb(nbits)
    cut = _api._empty((nb - 1,), "float32", tm, _host(r))
    wts = _api._empty((nb,), "float32", tm, _host(r))
    _lib.call_codec_train(_host(r), nbits, cut, wts)
    return _on(cut, r), _on(wts, r)


def compress(X, centroids, bucket_cutoffs, nbits: int, *, layout: str = "colbert"):
    """Compress embeddings: ``(codes [T] int32, residuals [T, d*nbits/8] uint8)``.

    Args:
        X: ``[T, d]`` float embeddings (not normalised here; ColBERT's are).
        centroids: ``[C, d]`` float32 / float16 / bfloat16.
        bucket_cutoffs: ``[2^nbits - 1]`` float32 / float16 / bfloat16.
        nbits: 1, 2, 4 or 8 (``d * nbits`` a multiple of 8).
        layout: ``"colbert"`` (ColBERTv2 / fast-plaid / PyLate bytes) or ``"lik"``.

    The code is the centroid of highest fp32 inner product (ties: lowest
    index).  Runs on the CPU threads, or on the GPU for a CUDA ``X``
    (``centroids`` and ``bucket_cutoffs`` moved to its device): the same fp32
    FMA chains, so the same codes and bytes as the CPU's.

    Returns:
        ``(codes, residuals)``: int32 ``[T]`` and uint8 ``[T, d*nbits/8]``,
        numpy for numpy inputs, else torch on ``X``'s device.

    Raises:
        ValueError: shapes, nbits, a token with NaN / infinite inner products.
        TypeError: dtypes.
    """
    nbits = _int_arg(nbits, "nbits")
    layout = _layout(layout)
    (X, centroids, cut), tm = _api._prepare(("X", "centroids", "bucket_cutoffs"), (X, centroids, bucket_cutoffs),
                                            (False, False, False))
    T = X.shape[0] if X.ndim >= 1 else 0
    d = X.shape[-1] if X.ndim >= 1 else 0
    if _is_cuda(X):
        import torch

        centroids, cut = centroids.to(X.device), cut.to(X.device)
        codes = torch.empty((T,), dtype=torch.int32, device=X.device)
        res = torch.empty((T, _width(d, nbits)), dtype=torch.uint8, device=X.device)
        _lib.call_codec_compress(X, centroids, cut, nbits, layout, codes, res)
        # the device writes -1 for a token without a finite best centroid: the CPU's error
        bad = torch.nonzero(codes < 0)
        if bad.numel():
            raise ValueError(f"X: token {int(bad[0, 0])} has no finite inner product with any centroid "
                             "(NaN or infinite values); its code and residual are not written")
        return codes, res
    hX = _host(X)
    codes = _api._empty((T,), "int32", tm, hX)
    res = _api._empty((T, _width(d, nbits)), "uint8", tm, hX)
    _lib.call_codec_compress(hX, _host(centroids), _host(cut), nbits, layout, codes, res)
    return _on(codes, X), _on(res, X)


def decompress(codes, residuals, centroids, bucket_weights, nbits: int, *, layout: str = "colbert",
               normalize: bool = True):
    """Decode compressed tokens: ``[..., d]`` float32.

    Args:
        codes: ``[...]`` int32 / int64, each in ``[0, C)`` (checked).
        residuals: ``[..., d*nbits/8]`` uint8.
        centroids: ``[C, d]``; bucket_weights: ``[2^nbits]`` (float32 /
            float16 / bfloat16).
        nbits, layout: as :func:`compress`.
        normalize: L2-normalise each decoded token (``/ max(||x||, 1e-12)``;
            a zero vector stays 0).

    Runs on the device of the inputs (CPU threads or CUDA).

    Returns:
        float32 ``codes.shape + (d,)`` (numpy or torch, as the inputs).

    Raises:
        ValueError: shapes, nbits, layout, a code outside ``[0, C)``.
        TypeError: dtypes, a non-int ``nbits``.
    """
    nbits = _int_arg(nbits, "nbits")
    layout = _layout(layout)
    (codes, residuals, centroids, wts), tm = _api._prepare(
        ("codes", "residuals", "centroids", "bucket_weights"), (codes, residuals, centroids, bucket_weights),
        (False, False, False, False))
    lead = tuple(codes.shape)
    d = centroids.shape[-1] if centroids.ndim == 2 else 0
    flat_c = codes.reshape(-1)
    flat_r = residuals.reshape(-1, residuals.shape[-1]) if residuals.ndim >= 1 else residuals
    if _is_cuda(flat_c):
        _check_codes_host(flat_c, centroids.shape[0] if centroids.ndim == 2 else 0)
    out = _api._empty((flat_c.shape[0], d), "float32", tm, codes)
    _lib.call_codec_decompress(flat_c, flat_r, centroids, wts, nbits, layout, out, normalize=_lib.flag(normalize, "normalize"))
    return out.reshape(lead + (d,))


# ---- checks of device data (CUDA: the C library does not read it) ------------------------


def _check_codes_host(codes, ncent: int, lengths=None, cu=None) -> None:
    """Lengths / cu_seqlens and the codes a call reads, checked on the device
    with one host synchronisation; the offending entry is located only on
    failure.  Wrong shapes or dtypes are left to the C library's messages."""
    import torch

    if codes.dtype not in (torch.int32, torch.int64):
        return
    if cu is not None:
        if cu.dim() != 1 or cu.numel() == 0 or cu.dtype not in (torch.int32, torch.int64):
            return
        c = cu.long()
        T = codes.shape[0] if codes.dim() == 1 else -1
        flags = torch.stack([c[0] != 0, (c[1:] < c[:-1]).any(), c[-1] != T]).tolist()
        if flags[0]:
            raise ValueError(f"cu_seqlens_d: must start at 0, got {int(c[0])}")
        if flags[1]:
            raise ValueError("cu_seqlens_d: must be non-decreasing")
        if flags[2]:
            raise ValueError(f"cu_seqlens_d: last entry {int(c[-1])} does not equal the number of tokens T={T}")
    read = codes
    if lengths is not None:  # padded [Nd, Ld]: the codes within each length
        if codes.dim() != 2 or lengths.dim() != 1 or lengths.shape[0] != codes.shape[0]:
            return
        ld = codes.shape[1]
        n = lengths.long()
        badlen = (n < 0) | (n > ld)
        if bool(badlen.any()):
            j = int(badlen.nonzero()[0, 0])
            raise ValueError(f"doc_lengths: doc_lengths[{j}]={int(n[j])} is outside [0, Ld={ld}]")
        read = codes[torch.arange(ld, device=codes.device)[None, :] < n[:, None]]
    bad = (read < 0) | (read >= ncent)
    if bool(bad.any()):
        i = int(bad.reshape(-1).nonzero()[0, 0])
        raise ValueError(f"codes: entry {i} of the tokens read = {int(read.reshape(-1)[i])} is outside [0, C={ncent})")


# ---- scoring ---------------------------------------------------------------------------


def _residual_forward(Q, codes, residuals, lengths, centroids, wts, nbits, layout, normalize, packed,
                      with_argmax):
    """Scores (and the argmax when asked) of a residual MaxSim call."""
    q3 = Q.ndim == 3
    tm = _lib.is_torch(Q)
    nd = (lengths.shape[0] - 1 if packed else lengths.shape[0]) if lengths.ndim == 1 else 0
    grid = ((Q.shape[0],) if q3 else ()) + (max(nd, 0),)
    if _is_cuda(codes):
        ncent = centroids.shape[0] if centroids.ndim == 2 else 0
        if packed:
            _check_codes_host(codes, ncent, cu=lengths)
        else:
            _check_codes_host(codes, ncent, lengths=lengths)
    scores = _api._empty(grid, "float32", tm, Q)
    argmax = _api._empty(grid + (Q.shape[-2] if Q.ndim >= 2 else 0,), "int32", tm, Q) if with_argmax else None
    _lib.call_maxsim_residual(Q, codes, residuals, lengths, centroids, wts, nbits, layout, scores, argmax,
                              normalize=normalize, packed=packed)
    return scores, argmax


def _grad_q(Q, grad, argmax, codes, residuals, lengths, centroids, wts, nbits, layout, normalize, packed):
    """d score / d Q: sum_j grad[i, j] * x_hat[j, argmax[i, j, s]], then the
    Jacobian of the query normalisation; documents in chunks (bounded memory)."""
    import torch

    Q3 = Q.unsqueeze(0) if Q.dim() == 2 else Q
    am = argmax.unsqueeze(0) if Q.dim() == 2 else argmax  # [Nq, Nd, Lq]
    g = grad.unsqueeze(0) if Q.dim() == 2 else grad  # [Nq, Nd]
    Nq, Nd, Lq = am.shape
    d = Q3.shape[-1]
    flat_c = codes.reshape(-1)
    flat_r = residuals.reshape(-1, residuals.shape[-1])
    base = lengths[:-1].long() if packed else torch.arange(Nd, device=Q.device) * codes.shape[-1]
    gq = torch.zeros(Nq, Lq, d, dtype=torch.float32, device=Q.device)
    chunk = max(1, (1 << 24) // max(1, Nq * Lq * d))
    for j0 in range(0, Nd, chunk):
        a = am[:, j0:j0 + chunk].long()
        tok = (base[j0:j0 + chunk][None, :, None] + a.clamp_min(0)).reshape(-1)
        x = decompress(flat_c[tok], flat_r[tok], centroids, wts, nbits, layout=layout, normalize=normalize)
        w = torch.where(a >= 0, g[:, j0:j0 + chunk, None].float(), 0.0)
        gq += (x.reshape(a.shape + (d,)) * w[..., None]).sum(1)
    if normalize:
        q = Q3.float()
        n = torch.linalg.vector_norm(q, dim=-1, keepdim=True)
        y = q / n.clamp_min(1e-12)
        gq = torch.where(n > 1e-12, (gq - y * (gq * y).sum(-1, keepdim=True)) / n, gq / 1e-12)
    gq = gq.to(Q.dtype)
    return gq.squeeze(0) if Q.dim() == 2 else gq


def _autograd_fn():
    import torch

    class _ResidualMaxSim(torch.autograd.Function):
        @staticmethod
        def forward(ctx, Q, codes, residuals, lengths, centroids, wts, nbits, layout, normalize, packed):
            scores, argmax = _residual_forward(Q.detach(), codes, residuals, lengths, centroids, wts, nbits, layout,
                                               normalize, packed, True)
            ctx.save_for_backward(Q, codes, residuals, lengths, centroids, wts, argmax)
            ctx.args = (nbits, layout, normalize, packed)
            return scores

        @staticmethod
        def backward(ctx, grad):
            Q, codes, residuals, lengths, centroids, wts, argmax = ctx.saved_tensors
            gq = _grad_q(Q, grad, argmax, codes, residuals, lengths, centroids, wts, *ctx.args)
            return (gq,) + (None,) * 9

    return _ResidualMaxSim


_FN = None


def _score(Q, codes, residuals, lengths, centroids, bucket_weights, nbits, normalize, layout, packed):
    global _FN
    nbits = _int_arg(nbits, "nbits")
    layout = _layout(layout)
    names = ("Q", "codes", "residuals", "cu_seqlens_d" if packed else "doc_lengths", "centroids", "bucket_weights")
    (Q, codes, residuals, lengths, centroids, wts), tm = _api._prepare(
        names, (Q, codes, residuals, lengths, centroids, bucket_weights), (False,) * 6)
    if tm and Q.requires_grad and _grad_enabled():
        if Q.ndim not in (2, 3) or lengths.ndim != 1:
            return _residual_forward(Q.detach(), codes, residuals, lengths, centroids, wts, nbits, layout,
                                     _lib.flag(normalize, "normalize"), packed, False)[0]  # raises the C library's error
        if _FN is None:
            _FN = _autograd_fn()
        return _FN.apply(Q, codes, residuals, lengths, centroids, wts, nbits, layout, _lib.flag(normalize, "normalize"), packed)
    return _residual_forward(Q, codes, residuals, lengths, centroids, wts, nbits, layout, _lib.flag(normalize, "normalize"), packed,
                             False)[0]


def _grad_enabled() -> bool:
    import torch

    return torch.is_grad_enabled()


def maxsim_residual(Q, codes, residuals, doc_lengths, centroids, bucket_weights, nbits: int, *,
                    normalize: bool = True, layout: str = "colbert"):
    """MaxSim of queries against padded compressed documents, decoded on the fly.

    ``score[i, j] = sum_s max_{t < doc_lengths[j]} <q_hat[i, s], x_hat[j, t]>``
    with ``x_hat`` the decoded token (:func:`decompress`) and, under
    ``normalize`` (PLAID's convention, the default), both sides
    L2-normalised.  No dense ``[Nd, Ld, d]`` tensor is formed.

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]`` float.
        codes: ``[Nd, Ld]`` int32 / int64 (entries past a length are not read).
        residuals: ``[Nd, Ld, d*nbits/8]`` uint8.
        doc_lengths: ``[Nd]`` int, each in ``[0, Ld]``.
        centroids: ``[C, d]``; bucket_weights: ``[2^nbits]``.
        nbits: 1, 2, 4 or 8.  layout: ``"colbert"`` or ``"lik"``.

    Returns:
        ``[Nq, Nd]`` float32 (``[Nd]`` for 2-D ``Q``); an empty document
        scores 0.  Differentiable in ``Q`` (torch): the backward decodes the
        winning tokens only.  Codes and lengths are checked (on CUDA through
        one host copy).  Precision on CUDA: a float32 ``Q`` in fp32 (TF32
        under ``torch.set_float32_matmul_precision("high")``; d > 1088 on
        half operands), a float16 / bfloat16 ``Q`` on fp16 (``normalize``)
        or bf16 operands, fp32 sums; the CPU computes in fp32.

    Raises:
        ValueError: shapes, nbits, layout, a code outside ``[0, C)``, a
            length outside ``[0, Ld]``, tensors on different devices.
        TypeError: dtypes, a non-int ``nbits``.
        lik.LikError (RuntimeError): allocation / CUDA failures.
    """
    return _score(Q, codes, residuals, doc_lengths, centroids, bucket_weights, nbits, normalize, layout, False)


def maxsim_residual_varlen(Q, codes, residuals, cu_seqlens_d, centroids, bucket_weights, nbits: int, *,
                           max_seqlen_d: int | None = None, normalize: bool = True, layout: str = "colbert"):
    """:func:`maxsim_residual` on packed documents (a ColBERT / fast-plaid
    index's layout): document ``j`` is tokens ``cu_seqlens_d[j] ..
    cu_seqlens_d[j+1] - 1`` of ``codes [T]`` / ``residuals [T, d*nbits/8]``.

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]`` float.
        codes: ``[T]`` int32 / int64; residuals: ``[T, d*nbits/8]`` uint8.
        cu_seqlens_d: ``[Nd + 1]`` int, from 0, non-decreasing, last ``T``.
        centroids, bucket_weights, nbits, normalize, layout: as
            :func:`maxsim_residual`.
        max_seqlen_d: accepted for the seed's signature; not needed (a value
            shorter than the longest document raises ValueError).

    Returns:
        ``[Nq, Nd]`` float32 (``[Nd]`` for 2-D ``Q``); differentiable in ``Q``.

    Raises:
        ValueError, TypeError, lik.LikError: as :func:`maxsim_residual`, and
            ValueError for a malformed ``cu_seqlens_d``.
    """
    if max_seqlen_d is not None:
        m = _int_arg(max_seqlen_d, "max_seqlen_d")
        if _lib.is_array(cu_seqlens_d) and cu_seqlens_d.ndim == 1 and cu_seqlens_d.shape[0] > 1:
            c = _host(cu_seqlens_d)
            longest = int((c[1:] - c[:-1]).max())
            if m < longest:
                raise ValueError(f"max_seqlen_d: {m} is shorter than the longest document ({longest} tokens)")
    return _score(Q, codes, residuals, cu_seqlens_d, centroids, bucket_weights, nbits, normalize, layout, True)


def plaid_approx_score(centroid_scores, codes, cu_seqlens_d):
    """PLAID's centroid-interaction score (the IVF pruning step).

    ``score[i, j] = sum_s max_{t in document j} centroid_scores[i, s, codes[t]]``

    Args:
        centroid_scores: ``[Nq, Lq, C]`` or ``[Lq, C]`` float32 / float16 /
            bfloat16 (e.g. ``Q @ centroids.T``).
        codes: ``[T]`` int32 / int64, each in ``[0, C)``.
        cu_seqlens_d: ``[Nd + 1]`` int (packed documents).

    Returns:
        ``[Nq, Nd]`` float32 (``[Nd]`` for 2-D scores); an empty document
        scores 0.

    Raises:
        ValueError: shapes, a code outside ``[0, C)``, a malformed
            ``cu_seqlens_d``.
        TypeError: dtypes.
    """
    (cs, codes, cu), tm = _api._prepare(("centroid_scores", "codes", "cu_seqlens_d"),
                                        (centroid_scores, codes, cu_seqlens_d), (False, False, False))
    nd = cu.shape[0] - 1 if cu.ndim == 1 else 0
    grid = ((cs.shape[0],) if cs.ndim == 3 else ()) + (max(nd, 0),)
    if _is_cuda(codes):
        _check_codes_host(codes, cs.shape[-1] if cs.ndim >= 1 else 0, cu=cu)
    scores = _api._empty(grid, "float32", tm, cs)
    _lib.call_plaid_approx(cs, codes, cu, scores)
    return scores


from .index import Index  # noqa: E402 (the index uses this module's codec docs only)
