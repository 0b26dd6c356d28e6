"""lik.distributed — past one device: sharded exact retrieval and data-parallel
training on ``torch.distributed`` (NCCL on GPUs, gloo on CPUs).

lik plugs into the process group the caller already runs (``torchrun`` /
``torch.distributed.init_process_group``); it starts nothing of its own.

* :func:`retrieve` — every rank holds a contiguous shard of the corpus (any
  sizes, empty shards too); every rank gets the global exact top-k with global
  document ids, identical (bitwise, ties included) to :func:`lik.retrieve` on
  the concatenated corpus.  Each rank runs :func:`lik.retrieve` on its shard,
  then one all-gather of the ``[world, Nq, k]`` candidates (after a tiny
  all-gather of shard sizes) and the C merge ``lik_topk_merge``.
* :func:`topk_merge` — that merge on its own (R sorted candidate lists per
  query -> global top-k), for servers that collect shard answers by RPC.
* :func:`all_gather_with_grad`, :func:`gather_documents` — autograd-aware
  all-gathers for in-batch negatives across ranks (PyLate's
  ``gather_across_devices``); uneven batch sizes and token lengths.
* :func:`contrastive_loss` — the in-batch-negatives loss over the documents of
  every rank, scaled so that DistributedDataParallel's gradient averaging
  gives the gradient of the one-process loss on the concatenated batch.

Every function is collective: every rank of ``group`` must call it, in the
same order.  An argument error on one rank is raised on every rank (the
failing rank raises its own exception, the others a RuntimeError naming it),
never a hang.

* :class:`ShardedIndex` — a PLAID index split over the ranks (one
  :class:`lik.plaid.Index` per rank, one codec trained once): build, save /
  load, and search with global ids (each shard searched, then the same
  all-gather and :func:`topk_merge`).
"""

from __future__ import annotations

import numpy as np

from . import _api, _lib
from ._collective import (_agree, _all_gather, _comm_device, _exchange, _gather_merge, _index, _raise_if_failed,
                          _require, dist, topk_merge, torch)
from ._sharded_index import ShardedIndex  # the sharded PLAID index, over the same collectives

__all__ = ["retrieve", "topk_merge", "ShardedIndex", "all_gather_with_grad", "gather_documents", "contrastive_loss"]


# ---- helpers ---------------------------------------------------------------------

_DTYPE_CODES: dict = {}


def _dtype_code(dt) -> int:
    if not _DTYPE_CODES:
        for i, d in enumerate((torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.bool,
                               torch.uint8, torch.int32, torch.int64)):
            _DTYPE_CODES[d] = i
    return _DTYPE_CODES.get(dt, 99)


# ---- retrieve ----------------------------------------------------------------------


def retrieve(Q, D_local, top_k: int, *, q_mask=None, d_mask=None, normalize: bool = True, group=None):
    """Exact top-k over a corpus sharded across the ranks of ``group``.

    Rank r holds documents ``[offset_r, offset_r + n_r)`` of the corpus
    (contiguous shards in rank order; any sizes, 0 too); every rank passes the
    same queries.  Every rank gets the same global result, identical (bitwise,
    ties included: equal scores go to the lower global id) to
    ``lik.retrieve(Q, concatenation of the shards, top_k)``.

    Steps: :func:`lik.retrieve` on the local shard (``min(top_k, n_r)``
    results), an all-gather of the shard sizes (offsets), one all-gather of the
    ``[world, Nq, min(top_k, max n_r)]`` candidates (scores and global ids in
    one int32 buffer), the C merge ``lik_topk_merge`` on the host.
    Collectives run on CUDA tensors for NCCL, on CPU tensors for gloo.

    Args:
        Q: ``[Nq, Lq, d]`` or ``[Lq, d]``, float32 / float16 / float64 /
            torch.bfloat16; the same on every rank.
        D_local: this rank's shard ``[n_r, Ld, d]`` (``Ld`` may differ between
            ranks), same dtype as ``Q``, or a list of ``[Ld_j, d]`` documents
            as :func:`lik.retrieve` takes.
        top_k: int, ``1 <= top_k <= N`` (N = sum of the shard sizes).
        q_mask: optional ``[Nq, Lq]`` bool / uint8 (as :func:`lik.retrieve`).
        d_mask: optional mask of ``D_local`` (as :func:`lik.retrieve`).
        normalize: per-token L2 normalisation (default True, as
            :func:`lik.retrieve`).
        group: the process group (None: the default group).

    Returns:
        ``(scores, ids)``: float32 / int64 ``[Nq, top_k]`` (``[top_k]`` for a
        2-D ``Q``), scores descending, ids global.  numpy for numpy inputs,
        torch (on ``Q``'s device) if any input is a torch tensor.

    Raises:
        ValueError: ``top_k <= 0``; ``top_k`` larger than the corpus (the
            message names N and the shard sizes: unlike :func:`lik.retrieve`,
            which returns ``min(top_k, Nd)`` results, a sharded search does not
            shrink k silently); ranks disagreeing on Nq, d, top_k or the ndim
            of Q; argument errors of :func:`lik.retrieve` (raised on the rank
            that made them; the others raise RuntimeError naming that rank).
        TypeError: as :func:`lik.retrieve`.
        RuntimeError: torch.distributed not initialised; another rank failed.
        ImportError: without torch.
    """
    _require("retrieve")
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    err = None
    s = i = None
    n_local = nq = d = q2 = k_in = 0
    try:
        k_in = _index(top_k, "top_k", 1, None)  # above int64: every document (retrieve clamps)
        s, i = _api.retrieve(Q, D_local, k_in, q_mask, d_mask, normalize=normalize)
        q2 = int(Q.ndim == 2)
        if q2:
            s, i = s[None], i[None]
        n_local = len(D_local) if isinstance(D_local, (list, tuple)) else (
            D_local.shape[0] if D_local.ndim == 3 else 1)
        nq, d = s.shape[0], Q.shape[-1]
    except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
        err = exc
    meta = _exchange([err is not None, n_local, nq, k_in, d, q2], group)
    _raise_if_failed("retrieve", err, meta[:, 0], group)
    nq = _agree("retrieve", "Nq (queries)", meta[:, 2])
    k = _agree("retrieve", "top_k", meta[:, 3])
    _agree("retrieve", "d (embedding size)", meta[:, 4])
    q2 = _agree("retrieve", "Q's ndim (2-D vs 3-D)", meta[:, 5])
    sizes = meta[:, 1].astype(np.int64)
    total = int(sizes.sum())
    if k > total:
        raise ValueError(
            f"top_k={k} exceeds the corpus size N={total} (shards of {sizes.tolist()} documents on {world} ranks)"
        )
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    torch_mode = _lib.is_torch(s)
    st, it = (s, i) if torch_mode else (torch.from_numpy(s), torch.from_numpy(i))
    out_device = st.device
    out_s, out_i = _gather_merge(st, it + int(offsets[rank]), int(min(k, sizes.max())), k, group)
    if q2:
        out_s, out_i = out_s[0], out_i[0]
    if torch_mode:
        return out_s.to(out_device), out_i.to(out_device)
    return out_s.numpy(), out_i.numpy()



# ---- gathers with autograd ---------------------------------------------------------------


class _AllGatherGrad(torch.autograd.Function if torch is not None else object):
    """Concatenation over ranks along dim 0 (sizes known), autograd-aware:
    the backward sums every rank's gradient (all_reduce) and keeps this
    rank's rows, so each rank's rows get the gradient of the sum of all
    ranks' losses (with DDP's 1/world averaging: of their mean)."""

    @staticmethod
    def forward(ctx, x, group, sizes, rank):
        n_max = max(sizes)
        buf = x.detach()
        if buf.shape[0] < n_max:
            pad = buf.new_zeros((n_max - buf.shape[0],) + tuple(buf.shape[1:]))
            buf = torch.cat([buf, pad])
        parts = _all_gather(buf, group)
        ctx.group, ctx.sizes, ctx.rank = group, sizes, rank
        return torch.cat([p[:n] for p, n in zip(parts, sizes)]).to(x.device)

    @staticmethod
    def backward(ctx, grad):
        g = grad.to(_comm_device(ctx.group, grad)).contiguous().clone()
        dist.all_reduce(g, op=dist.ReduceOp.SUM, group=ctx.group)
        off = sum(ctx.sizes[: ctx.rank])
        return g[off : off + ctx.sizes[ctx.rank]].to(grad.device), None, None, None


def _shape_row(x) -> list[int]:
    shape = list(x.shape) + [-1] * (6 - x.dim())
    return [x.dim(), _dtype_code(x.dtype)] + shape[:6]


def all_gather_with_grad(x, *, group=None):
    """All-gather along dim 0 with autograd (PyLate's ``gather_across_devices``).

    Args:
        x: torch tensor ``[n_r, ...]`` (1 to 6 dims); ``n_r`` may differ per
            rank (0 too), the other dims and the dtype must agree.
        group: the process group (None: the default group).

    Returns:
        ``[sum n_r, ...]``: the ranks' tensors concatenated in rank order, on
        ``x``'s device.  Backward: each rank's rows receive the sum over ranks
        of the gradients flowing into them (an all_reduce), so under
        DistributedDataParallel (which averages gradients over ranks) the
        parameters get the gradient of the mean of the ranks' losses.  Every
        rank must run the backward.

    Raises:
        TypeError: ``x`` not a torch tensor; ranks disagree on the dtype.
        ValueError: ``x`` is 0-d or has more than 6 dims; ranks disagree on a
            dim other than 0 (every rank raises, naming the shapes).
        RuntimeError: torch.distributed not initialised; another rank failed.
    """
    _require("all_gather_with_grad")
    return _gather_grad("all_gather_with_grad", x, group, [])[0]


def _gather_grad(fn: str, x, group, extra: list[int]):
    """all_gather_with_grad plus extra int columns exchanged with the shapes.
    Returns (gathered, meta [world, 9 + len(extra)], sizes)."""
    err = None
    row = [0] * 8
    try:
        if not (torch.is_tensor(x)):
            raise TypeError(f"{fn}: expected a torch tensor, got {type(x).__name__}")
        if not 1 <= x.dim() <= 6:
            raise ValueError(f"{fn}: expected 1 to 6 dims, got shape {tuple(x.shape)}")
        row = _shape_row(x)
    except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
        err = exc
    meta = _exchange([err is not None] + row + list(extra), group)
    _raise_if_failed(fn, err, meta[:, 0], group)
    if len({int(c) for c in meta[:, 2]}) > 1:
        raise TypeError(f"{fn}: ranks disagree on the dtype: {[str(_dtype_name(int(c))) for c in meta[:, 2]]}")
    trailing = {tuple(int(v) for v in r[1:2]) + tuple(int(v) for v in r[4:9]) for r in meta}
    if len(trailing) > 1:
        shapes = [tuple(int(v) for v in r[3 : 3 + int(r[1])]) for r in meta]
        raise ValueError(f"{fn}: ranks disagree on the dims after dim 0: shapes {shapes} (rank 0, 1, ...)")
    sizes = [int(v) for v in meta[:, 3]]
    rank = dist.get_rank(group)
    return _AllGatherGrad.apply(x, group, sizes, rank), meta, sizes


def _dtype_name(code: int) -> str:
    for dt, c in _DTYPE_CODES.items():
        if c == code:
            return str(dt)
    return "unsupported"


def gather_documents(D, d_mask=None, *, group=None, _extra=()):
    """All-gather token embeddings of every rank for in-batch negatives, with
    autograd; uneven document counts and token lengths.

    Args:
        D: torch ``[n_r, L_r, d]``: this rank's documents (``n_r`` and ``L_r``
            may differ per rank; ``d`` and the dtype must agree).
        d_mask: optional ``[n_r, L_r]`` bool / uint8 (True = valid token).
        group: the process group (None: the default group).

    Returns:
        ``(D_all, d_mask_all, offset)``: ``D_all [sum n_r, max L_r, d]`` (rank
        order; shorter documents zero-padded, padding masked out),
        ``d_mask_all [sum n_r, max L_r]`` bool, or None when no rank passed a
        mask and all ``L_r`` agree, and ``offset``, the row of ``D_all`` where
        this rank's documents start.  ``D_all`` is differentiable as
        :func:`all_gather_with_grad`; padding changes no MaxSim score.

    Raises:
        TypeError: ``D`` / ``d_mask`` not torch tensors, a mask not bool /
            uint8, ranks disagree on the dtype.
        ValueError: ``D`` not 3-D, ``d_mask``'s shape not ``[n_r, L_r]``, ranks
            disagree on ``d``.
        RuntimeError: torch.distributed not initialised; another rank failed.
    """
    _require("gather_documents")
    fn = "gather_documents"
    err = None
    L = has_mask = 0
    try:
        if not torch.is_tensor(D):
            raise TypeError(f"D: expected a torch tensor, got {type(D).__name__}")
        if D.dim() != 3:
            raise ValueError(f"D: expected [n, L, d], got shape {tuple(D.shape)}")
        if d_mask is not None:
            if not torch.is_tensor(d_mask):
                raise TypeError(f"d_mask: expected None or a torch tensor, got {type(d_mask).__name__}")
            if d_mask.dtype not in (torch.bool, torch.uint8):
                raise TypeError(f"d_mask: dtype {d_mask.dtype} is not a mask dtype (bool or uint8)")
            if tuple(d_mask.shape) != tuple(D.shape[:2]):
                raise ValueError(f"d_mask: shape {tuple(d_mask.shape)} does not match D's [n, L] = {tuple(D.shape[:2])}")
        L, has_mask = int(D.shape[1]), int(d_mask is not None)
    except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
        err = exc
    meta = _exchange([err is not None, L, has_mask] + list(_extra), group)
    _raise_if_failed(fn, err, meta[:, 0], group)
    L_max = int(meta[:, 1].max())
    need_mask = bool(meta[:, 2].any()) or int(meta[:, 1].min()) != L_max
    if D.shape[1] < L_max:
        D = torch.nn.functional.pad(D, (0, 0, 0, L_max - D.shape[1]))
    D_all, _, sizes = _gather_grad(fn, D, group, [])
    rank = dist.get_rank(group)
    offset = sum(sizes[:rank])
    m_all = None
    if need_mask:
        m = torch.ones(D.shape[:2], dtype=torch.uint8, device=D.device)
        if d_mask is not None:
            m[:, : d_mask.shape[1]] = d_mask.to(torch.uint8)
        m[:, L:] = 0
        n_max = max(sizes)
        if m.shape[0] < n_max:
            m = torch.cat([m, m.new_zeros((n_max - m.shape[0], L_max))])
        parts = _all_gather(m, group)
        m_all = torch.cat([p[:n] for p, n in zip(parts, sizes)]).to(device=D.device, dtype=torch.bool)
    if _extra:
        return D_all, m_all, offset, meta
    return D_all, m_all, offset


# ---- contrastive loss ------------------------------------------------------------------


def contrastive_loss(Q, D, q_mask=None, d_mask=None, *, temperature: float = 1.0, normalize: bool = False,
                     group=None):
    """In-batch-negatives contrastive loss against the documents of every rank
    (PyLate's ``Contrastive`` with ``gather_across_devices=True``), scaled for
    DistributedDataParallel.

    Rank r holds ``B_r`` queries and ``M_r >= B_r`` documents; document i < B_r
    is the positive of query i, the others are extra negatives.  Every query
    is scored by :func:`lik.maxsim` against all ``M = sum M_r`` documents
    (gathered with :func:`gather_documents`) and its positive is the global
    row ``offset_r + i``.  With ``ce_i`` the cross-entropy of query i over
    ``scores / temperature`` and ``N = sum B_r``, rank r returns::

        loss_r = (world / N) * sum_{i on rank r} ce_i

    so that (a) the mean of ``loss_r`` over ranks is the one-process loss on
    the concatenated batch (``mean_i ce_i``: queries and documents of all
    ranks concatenated in rank order), and (b) DistributedDataParallel's
    averaged gradient is that loss's gradient (uneven ``B_r`` included).  For
    logging: ``all_reduce(loss.detach()) / world``.

    Args:
        Q: torch ``[B_r, Lq, d]`` queries (differentiable).
        D: torch ``[M_r, L_r, d]`` documents, positives first (differentiable;
            ``L_r`` may differ per rank).
        q_mask, d_mask: optional bool / uint8 masks ``[B_r, Lq]`` / ``[M_r, L_r]``.
        temperature: the scores are divided by it (PyLate's default 1.0).
        normalize: L2-normalise tokens inside :func:`lik.maxsim`.
        group: the process group (None: the default group).

    Returns:
        a 0-d float32 tensor (float64 for float64 inputs).

    Raises:
        ValueError: ``B_r > M_r``, or ``Q`` not a 3-D tensor with ``D``'s
            ``d``, on some rank (every rank raises, naming the ranks); shapes
            as :func:`gather_documents` / :func:`lik.maxsim`.
        TypeError, RuntimeError: as :func:`gather_documents`.
    """
    _require("contrastive_loss")
    from . import maxsim  # the autograd-aware lik.maxsim

    B = int(Q.shape[0]) if torch.is_tensor(Q) and Q.dim() >= 1 else 0
    M = int(D.shape[0]) if torch.is_tensor(D) and D.dim() >= 1 else 0
    q_ok = (torch.is_tensor(Q) and Q.dim() == 3 and torch.is_tensor(D) and D.dim() == 3
            and Q.shape[-1] == D.shape[-1])
    D_all, m_all, offset, meta = gather_documents(D, d_mask, group=group, _extra=(B, M, q_ok))
    bad_q = [r for r, ok in enumerate(meta[:, 5].tolist()) if not ok]
    if bad_q:  # checked on every rank, so that no rank is left waiting in the backward's collectives
        raise ValueError(
            f"contrastive_loss: Q must be a torch tensor [B, Lq, d] with D's d on every rank; "
            f"not on rank(s) {bad_q}"
        )
    bq, bd = meta[:, 3].tolist(), meta[:, 4].tolist()
    short = [r for r in range(len(bq)) if bq[r] > bd[r]]
    if short:
        raise ValueError(
            f"contrastive_loss: rank(s) {short} have more queries than documents "
            f"(queries {bq}, documents {bd}): document i must be query i's positive"
        )
    world, N = len(bq), int(sum(bq))
    scores = maxsim(Q, D_all, q_mask, m_all, normalize=normalize)  # [B_r, M]
    if N == 0:
        return scores.sum() * 0
    labels = torch.arange(offset, offset + B, device=scores.device)
    ce = torch.nn.functional.cross_entropy(scores / temperature, labels, reduction="sum")
    return ce * (world / N)

