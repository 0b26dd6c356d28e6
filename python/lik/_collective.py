"""Collectives and the candidate merge shared by :mod:`lik.distributed` and
its :class:`~lik.distributed.ShardedIndex` (``_sharded_index.py``): the torch /
torch.distributed handles, argument and agreement checks, the all-gathers of
metadata rows, :func:`topk_merge` (C ``lik_topk_merge``; public as
``lik.distributed.topk_merge``) and the gather-then-merge of per-rank
candidates.  Below both modules: it imports neither (imports go one way,
docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _lib

try:
    import torch
    import torch.distributed as dist
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None
    dist = None


# ---- helpers ---------------------------------------------------------------------


def _require(fn: str, *, initialized: bool = True) -> None:
    if torch is None:
        raise ImportError(f"lik.distributed.{fn} needs torch (pip install torch)")
    if initialized and not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            f"lik.distributed.{fn}: torch.distributed is not initialised "
            "(call torch.distributed.init_process_group, or run under torchrun)"
        )


def _index(value: Any, name: str, lo: int | None = _lib.INT64_MIN, hi: int | None = _lib.INT64_MAX) -> int:
    """An integer argument: :func:`lik._lib.int_arg`."""
    return _lib.int_arg(value, name, lo, hi)


def _comm_device(group, like=None):
    """The device a collective on ``group`` takes: CUDA for NCCL, CPU for
    gloo (and others); a group with both backends takes ``like``'s device."""
    backend = str(dist.get_backend(group)).lower()
    if "nccl" in backend and ("gloo" not in backend or (like is not None and like.is_cuda)):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _all_gather(t, group) -> list:
    """all_gather of equally shaped tensors on the group's device."""
    t = t.to(_comm_device(group, t)).contiguous()
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t, group=group)
    return parts


def _exchange(row: list[int], group) -> np.ndarray:
    """All-gather one int64 row per rank -> numpy [world, len(row)]."""
    parts = _all_gather(torch.tensor(row, dtype=torch.int64), group)
    return torch.stack(parts).cpu().numpy()


def _raise_if_failed(fn: str, err: BaseException | None, failed, group) -> None:
    """After a metadata exchange: the failing rank raises its own exception,
    the others a RuntimeError naming the failing ranks."""
    if err is not None:
        raise err
    bad = [r for r, f in enumerate(failed) if f]
    if bad:
        raise RuntimeError(
            f"lik.distributed.{fn}: rank(s) {bad} of {dist.get_world_size(group)} failed "
            "(their exception is raised there); no result"
        )


def _agree(fn: str, what: str, values) -> int:
    vals = [int(v) for v in values]
    if len(set(vals)) > 1:
        raise ValueError(f"lik.distributed.{fn}: ranks disagree on {what}: {vals} (rank 0, 1, ...)")
    return vals[0]

# ---- topk_merge ------------------------------------------------------------------


def topk_merge(scores, indices, top_k: int, lengths=None):
    """Global top-k of R sorted candidate lists per query (C ``lik_topk_merge``).

    The lists are each sorted under :func:`lik.retrieve`'s order: score
    descending, NaN below every number, equal scores by lower id.  When list
    r holds shard r's exact top-k (``min(top_k, shard size)`` entries) with ids
    offset to global ids, the result equals :func:`lik.retrieve` on the whole
    corpus, bitwise.

    Args:
        scores: float32 ``[R, Nq, K]`` (numpy or torch; any strides).
        indices: int64 ``[R, Nq, K]``: the candidates' ids, compared as given.
        top_k: int >= 1; every query needs at least ``top_k`` candidates.
        lengths: optional int64 ``[R, Nq]`` or ``[R]`` (one length per list):
            list r of query q is its first ``lengths[r, q]`` entries (0 <= ... <=
            K); entries past it are never read.  None: all K entries.

    Returns:
        ``(scores, indices)``: float32 / int64 ``[Nq, top_k]``; numpy for numpy
        inputs, torch (on ``scores``' device; a CUDA input is merged on the
        host: the candidates are small) if any input is a torch tensor.

    Raises:
        TypeError: non-array argument, ``top_k`` not an int, wrong dtypes.
        ValueError: shapes (the message names them), ``top_k <= 0``, a length
            outside ``[0, K]``, a list not sorted (naming list, query and
            entries), fewer than ``top_k`` candidates for a query.
    """
    top_k = _index(top_k, "top_k")
    for name, x, opt in (("scores", scores, False), ("indices", indices, False), ("lengths", lengths, True)):
        _lib.check_array(x, name, optional=opt)
    torch_mode = any(_lib.is_torch(x) for x in (scores, indices, lengths))
    device = None
    if torch_mode:
        scores, indices, lengths = (_lib.to_torch(x) for x in (scores, indices, lengths))
        device = scores.device
        scores, indices = scores.detach().cpu(), indices.detach().cpu()
        lengths = lengths.cpu() if lengths is not None else None
    R = scores.shape[0] if scores.ndim == 3 else 0
    nq = scores.shape[1] if scores.ndim == 3 else 0
    if lengths is not None and lengths.ndim == 1 and tuple(lengths.shape) == (R,):
        lengths = lengths[:, None].expand(R, nq) if torch_mode else np.broadcast_to(lengths[:, None], (R, nq))
    shape = (nq, max(top_k, 0))
    if torch_mode:
        out_s = torch.empty(shape, dtype=torch.float32)
        out_i = torch.empty(shape, dtype=torch.int64)
    else:
        out_s = np.empty(shape, dtype=np.float32)
        out_i = np.empty(shape, dtype=np.int64)
    _lib.call_topk_merge(scores, indices, lengths, min(top_k, 2**63 - 1), out_s, out_i)
    if torch_mode and device.type != "cpu":
        out_s, out_i = out_s.to(device), out_i.to(device)
    return out_s, out_i



def _gather_merge(s, gid, width: int, k: int, group):
    """The global top-k of every rank's candidates: one all-gather, then
    :func:`topk_merge` on the host.

    ``s`` float32 / ``gid`` int64 torch ``[Nq, kr]`` (``kr <= width``, the
    same ``width`` on every rank): this rank's candidates, sorted, global ids;
    the valid entries are a prefix, the rest have id -1.  Returns torch CPU
    ``(scores [Nq, k], ids [Nq, k])``; a query with fewer than k candidates
    on all ranks together ends with ids -1 and scores -inf."""
    nq, kr = s.shape
    if nq == 0:  # every rank agreed on Nq: nothing to exchange (an empty int64 view would fail)
        return torch.zeros((0, k)), torch.zeros((0, k), dtype=torch.int64)
    buf = torch.full((nq, width, 3), -1, dtype=torch.int32, device=_comm_device(group, s))
    if kr and nq:  # scores and ids in one int32 buffer: 12 bytes a candidate
        buf[:, :kr, 0] = s.to(buf.device, torch.float32).contiguous().view(torch.int32)
        buf[:, :kr, 1:] = gid.to(buf.device).contiguous().view(torch.int32).view(nq, kr, 2)
    g = torch.stack(_all_gather(buf, group)).cpu()  # [R, Nq, width, 3]
    cand_s = g[..., 0].contiguous().view(torch.float32)
    cand_i = g[..., 1:].contiguous().view(torch.int64)[..., 0]
    lengths = (cand_i >= 0).sum(-1)  # [R, Nq]
    deficit = (k - lengths.sum(0)).clamp(min=0)
    if not bool(deficit.any()):
        return topk_merge(cand_s, cand_i, k, lengths)
    # Too few candidates: one more list of -inf fillers with ids above every real one.
    R, w = cand_s.shape[0], max(width, k)
    filler = int(cand_i.max()) + 1
    cs = torch.full((R + 1, nq, w), -float("inf"))
    ci = torch.full((R + 1, nq, w), -1, dtype=torch.int64)
    cs[:R, :, :width], ci[:R, :, :width] = cand_s, cand_i
    ci[R] = filler + torch.arange(w)
    out_s, out_i = topk_merge(cs, ci, k, torch.cat([lengths, deficit[None]]))
    out_i[out_i >= filler] = -1
    return out_s, out_i
