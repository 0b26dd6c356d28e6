"""lik.distributed.ShardedIndex — a PLAID index split over the ranks of a
torch.distributed group: each rank holds a :class:`lik.plaid.Index` over its
own documents, all shards share one codec (centroids, bucket cutoffs and
weights, trained once), and a search runs on every shard and merges with
``lik_topk_merge`` (docs/distributed.md, "Sharded PLAID index")."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile

import numpy as np

from . import _lib
from ._collective import (_agree, _all_gather, _exchange, _gather_merge, _index, _raise_if_failed, _require, dist,
                          torch)
from .index import Index, _packed, _subset

__all__ = ["ShardedIndex"]

_CODEC_FILES = ("centroids.npy", "bucket_cutoffs.npy", "bucket_weights.npy", "avg_residual.npy",
                "cluster_threshold.npy")


def _shard_dir(path, rank: int) -> str:
    return os.path.join(os.fspath(path), f"shard-{rank}")


def _codec_digest(folder: str) -> int:
    """A 62-bit digest of the codec files of a saved index (equal codecs, equal digests)."""
    h = hashlib.sha256()
    for name in _CODEC_FILES:
        p = os.path.join(folder, name)
        if os.path.exists(p):
            with open(p, "rb") as f:
                h.update(f.read())
    return int.from_bytes(h.digest()[:8], "little") >> 2


def _local_sample(X, cu, first: int, picks: np.ndarray):
    """The tokens of the global documents ``picks`` that lie in this shard
    (global ids ``first .. first + n - 1``), in ascending order, float32."""
    n = len(cu) - 1
    mine = picks[(picks >= first) & (picks < first + n)] - first
    rows = [X[int(cu[j]):int(cu[j + 1])] for j in mine]
    rows = [r.float() if _lib.is_torch(r) else torch.from_numpy(np.asarray(r, dtype=np.float32)) for r in rows]
    d = X.shape[-1]
    return torch.cat(rows) if rows else torch.zeros((0, d))


class ShardedIndex:
    """A PLAID index whose documents are split over the ranks of a process
    group (rank r holds global ids ``offset_r .. offset_r + n_r - 1``,
    shards in rank order); every shard uses the same codec.

    Make one with :meth:`build` (collective: one codec trained on rank 0,
    documents added per rank), :meth:`load` (collective: ``path/shard-<rank>``)
    or ``ShardedIndex(index)`` around this rank's :class:`lik.plaid.Index`.
    :meth:`search` is collective and returns global ids.  ``local`` is this
    rank's index; add documents with :meth:`add` (local: ids continue after
    this shard's last document, so the global ids of later shards move).

    Args (constructor):
        local: this rank's :class:`lik.plaid.Index` (the shards must share one
            codec for results comparable across ranks; not checked here).
        group: the process group (None: the default group).

    Attributes (read-only): ``local``, ``group``, ``dim``, ``nbits``,
    ``num_centroids`` (this rank's shard; equal on every rank).
    """

    def __init__(self, local: Index, *, group=None):
        self.local = local
        self.group = group

    # ---- construction -----------------------------------------------------------------

    @classmethod
    def build(cls, documents, path=None, *, sample=None, nbits: int = 2, cu_seqlens=None, doc_lengths=None,
              num_centroids: int | None = None, kmeans_niters: int = 4, max_points_per_centroid: int = 256,
              sample_docs: int | None = None, seed: int = 42, chunk_docs: int = 25000,
              group=None) -> "ShardedIndex":
        """Train one codec for all ranks and index this rank's documents (collective).

        Rank 0 trains (:meth:`lik.plaid.Index.train` with ``total_tokens`` =
        the corpus's tokens), sends the codec to the other ranks, and every
        rank adds its documents: the shards equal ``Index.train(sample,
        total_tokens=T)`` followed by ``add`` of the whole corpus, split by
        rank (same codes and residuals, same IVF restricted to the shard).

        Args:
            documents: this rank's documents in any layout of
                :meth:`lik.plaid.Index.build` (an empty list: no documents).
            path: None, or a folder: rank r saves its shard into
                ``path/shard-r`` (see :meth:`save`).
            sample: tokens ``[Ts, d]`` to train on, read on rank 0 only; None:
                every rank contributes the tokens of its documents among
                ``sorted(numpy.random.default_rng(seed).choice(N, S,
                replace=False))`` (N documents in all, ``S = sample_docs`` or
                ``min(N, 1 + int(16 * sqrt(120 N)))``, fast-plaid's rule),
                gathered on rank 0 in global id order.
            nbits, num_centroids, kmeans_niters, max_points_per_centroid,
                seed, chunk_docs: as :meth:`lik.plaid.Index.build`.
            cu_seqlens, doc_lengths: as :meth:`lik.plaid.Index.build`.
            group: the process group (None: the default group).

        Returns:
            this rank's ``ShardedIndex``.

        Raises:
            ValueError, TypeError: as :meth:`lik.plaid.Index.build` (raised on
                the failing rank; the others raise RuntimeError naming it);
                ranks disagree on d; no document and no sample.
            RuntimeError: torch.distributed not initialised; another rank failed.
        """
        _require("ShardedIndex.build")
        fn = "ShardedIndex.build"
        rank = dist.get_rank(group)
        err = X = cu = None
        n = T = d = 0
        try:
            if isinstance(documents, (list, tuple)) and len(documents) == 0:
                cu = np.zeros(1, dtype=np.int64)
            else:
                X, cu = _packed(documents, cu_seqlens, doc_lengths)
                d = int(X.shape[-1])
            n, T = len(cu) - 1, int(cu[-1])
        except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
            err = exc
        meta = _exchange([err is not None, n, T, d, sample is not None], group)
        _raise_if_failed(fn, err, meta[:, 0], group)
        dims = sorted({int(v) for v in meta[:, 3] if v > 0})
        if len(dims) > 1:
            raise ValueError(f"lik.distributed.{fn}: ranks disagree on d: {meta[:, 3].tolist()} (rank 0, 1, ...)")
        sizes = meta[:, 1].astype(np.int64)
        N, total_tokens = int(sizes.sum()), int(meta[:, 2].sum())
        if not meta[0, 4] and N == 0:
            raise ValueError(f"lik.distributed.{fn}: no documents on any rank and no sample (on rank 0) to train on")
        if not meta[0, 4]:  # rank 0 decides: its sample, or one drawn from every rank
            S = min(N, sample_docs or 1 + int(16 * np.sqrt(120 * N)))
            picks = np.sort(np.random.default_rng(seed).choice(N, S, replace=False)) if N else np.zeros(0, int)
            part = _local_sample(X, cu, int(sizes[:rank].sum()), picks) if X is not None else torch.zeros((0, 0))
            sample = _gather_rows(part, dims[0] if dims else 0, group)
        local = _broadcast_trained(
            fn, lambda: Index.train(sample, nbits=nbits, total_tokens=total_tokens or None,
                                    num_centroids=num_centroids, kmeans_niters=kmeans_niters,
                                    max_points_per_centroid=max_points_per_centroid, seed=seed,
                                    chunk_docs=chunk_docs), group)
        err = None
        try:
            if X is not None:
                local.add(X, cu_seqlens=cu, expand_centroids=False)
        except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
            err = exc
        _raise_if_failed(fn, err, _exchange([err is not None], group)[:, 0], group)
        ix = cls(local, group=group)
        if path is not None:
            ix.save(path)
        return ix

    @classmethod
    def load(cls, path, *, verify: bool = False, group=None) -> "ShardedIndex":
        """Map this rank's shard ``path/shard-<rank>`` (collective).

        Args:
            path: the folder :meth:`save` wrote (every rank must see its own
                ``shard-<rank>`` folder; a shared file system is not needed).
            verify: as :meth:`lik.plaid.Index.load`.
            group: the process group (None: the default group).

        Raises:
            ValueError: a missing or inconsistent shard (as
                :meth:`lik.plaid.Index.load`), ``shards.json`` naming another
                number of ranks, shards with different codecs.
            RuntimeError: torch.distributed not initialised; another rank failed.
        """
        _require("ShardedIndex.load")
        fn = "ShardedIndex.load"
        world = dist.get_world_size(group)
        err = local = None
        digest = 0
        try:
            info = os.path.join(os.fspath(path), "shards.json")
            if os.path.exists(info):
                saved = _read_shards_json(fn, info)
                if saved != world:
                    raise ValueError(f"{fn}: {info} says the index has {saved} shards, the group has {world} ranks")
            folder = _shard_dir(path, dist.get_rank(group))
            local = Index.load(folder, verify=verify)
            digest = _codec_digest(folder)
        except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
            err = exc
        meta = _exchange([err is not None, digest], group)
        _raise_if_failed(fn, err, meta[:, 0], group)
        if len({int(v) for v in meta[:, 1]}) > 1:
            raise ValueError(f"lik.distributed.{fn}: the shards of {os.fspath(path)} do not share one codec "
                             "(centroids / buckets differ between ranks)")
        return cls(local, group=group)

    def add(self, documents, *, cu_seqlens=None, doc_lengths=None) -> range:
        """Add documents to this rank's shard (local, not collective).  The
        centroids never change (``expand_centroids=False``): the shards share
        one codec bit for bit, and a shard expanding on its own documents
        would no longer score like the others.

        Args:
            documents, cu_seqlens, doc_lengths: as :meth:`lik.plaid.Index.add`.

        Returns:
            ``range`` of the new documents' local ids (global id = this
            shard's offset + local id, offsets as :meth:`search` computes them).

        Raises:
            ValueError, TypeError: as :meth:`lik.plaid.Index.add`.
        """
        return self.local.add(documents, cu_seqlens=cu_seqlens, doc_lengths=doc_lengths, expand_centroids=False)

    def save(self, path) -> None:
        """Save rank r's shard into ``path/shard-r`` (fast-plaid's files: each
        shard is an index fast-plaid or :class:`lik.plaid.Index` loads) and,
        from rank 0, ``path/shards.json`` (``world_size``, ``num_docs`` per
        shard).  Collective: returns on every rank once ``shards.json`` is in
        place (two small exchanges).

        Args:
            path: a folder (created if missing), seen by each rank (a shared
                file system is not needed: rank r writes only ``shard-r``).

        Raises:
            ValueError: the folder or a shard's file cannot be written;
            OSError: ``shards.json`` cannot be written (rank 0).  Each is
                raised on the failing rank; the others raise RuntimeError
                naming it.
        """
        _require("ShardedIndex.save")
        err = None
        n = 0
        try:
            os.makedirs(os.fspath(path), exist_ok=True)
            self.local.save(_shard_dir(path, dist.get_rank(self.group)))
            n = self.local.num_docs
        except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
            err = exc
        meta = _exchange([err is not None, n], self.group)
        _raise_if_failed("ShardedIndex.save", err, meta[:, 0], self.group)
        if dist.get_rank(self.group) == 0:
            try:  # atomic: a rank that loads right after save never reads a half-written file
                info = os.path.join(os.fspath(path), "shards.json")
                with open(info + ".tmp", "w") as f:
                    json.dump({"world_size": len(meta), "num_docs": meta[:, 1].tolist()}, f)
                os.replace(info + ".tmp", info)
            except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
                err = exc
        # save returns on every rank only once shards.json is in place
        _raise_if_failed("ShardedIndex.save", err, _exchange([err is not None], self.group)[:, 0], self.group)

    # ---- search -------------------------------------------------------------------------

    def search(self, Q, top_k: int = 10, *, n_ivf_probe: int = 8, n_full_scores: int = 4096,
               centroid_score_threshold: float | None = None, q_lengths=None, subset=None):
        """Top-``top_k`` documents of each query over all shards (collective).

        Every rank runs :meth:`lik.plaid.Index.search` on its shard with the
        same parameters, then one all-gather of the ``[world, Nq, top_k]``
        candidates and ``lik_topk_merge`` (ties: the lower global id).  The
        probing is the single index's (same codec); the candidate cuts
        (``n_full_scores``) apply per shard, so each shard scores exactly at
        least the documents of its own that one index over all shards would:
        the result equals that index's whenever its cuts do not bind (e.g.
        ``n_full_scores >= 4 N``), and otherwise (without
        ``centroid_score_threshold``) holds, position by position, scores at
        least as high (docs/distributed.md).

        Args:
            Q, top_k, n_ivf_probe, n_full_scores, centroid_score_threshold,
                q_lengths: as :meth:`lik.plaid.Index.search`; the same on every
                rank.
            subset: None, or **global** document ids as
                :meth:`lik.plaid.Index.search` takes them (one list for every
                query, or one list per query); each rank searches the ids that
                fall in its shard.  The same on every rank.

        Returns:
            ``(scores [Nq, top_k] float32, ids [Nq, top_k] int64)`` (2-D Q:
            ``[top_k]``) with global ids on every rank; a query with fewer
            results ends with ids -1 and scores -inf.  torch in -> torch out.

        Raises:
            ValueError, TypeError: as :meth:`lik.plaid.Index.search` (raised on
                the failing rank; the others raise RuntimeError naming it);
                ranks disagree on Nq, d, top_k or Q's ndim; a ``subset`` id
                outside [0, total documents).
            RuntimeError: torch.distributed not initialised; another rank failed.
        """
        _require("ShardedIndex.search")
        fn = "ShardedIndex.search"
        group = self.group
        err = s = i = None
        nq = k = q2 = d = n = 0
        try:  # everything a rank can fail on before a collective happens inside a try: a
            n = self.local.num_docs  # closed index raises on its rank, the others learn it
        except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
            err = exc
        meta = _exchange([err is not None, n], group)  # the shard offsets, for global ids
        _raise_if_failed(fn, err, meta[:, 0], group)
        sizes = meta[:, 1]
        first = int(sizes[: dist.get_rank(group)].sum())
        try:
            k = _index(top_k, "top_k", 1, _lib.PLAID_MAX_TOP_K)
            d = self.local.dim
            if subset is not None:
                subset = _local_subset(subset, first, n, int(sizes.sum()))
            s, i = self.local.search(Q, k, n_ivf_probe=n_ivf_probe, n_full_scores=n_full_scores,
                                     centroid_score_threshold=centroid_score_threshold, q_lengths=q_lengths,
                                     subset=subset)
            q2 = int(s.ndim == 1)
            if q2:
                s, i = s[None], i[None]
            nq = s.shape[0]
        except Exception as exc:  # noqa: BLE001 - re-raised after the exchange
            err = exc
        meta = _exchange([err is not None, n, nq, k, q2, d], group)
        _raise_if_failed(fn, err, meta[:, 0], group)
        _agree(fn, "Nq (queries)", meta[:, 2])
        k = _agree(fn, "top_k", meta[:, 3])
        q2 = _agree(fn, "Q's ndim (2-D vs 3-D)", meta[:, 4])
        _agree(fn, "d (embedding size)", meta[:, 5])
        torch_mode = _lib.is_torch(s)
        st, it = (s, i) if torch_mode else (torch.from_numpy(s), torch.from_numpy(i))
        out_s, out_i = _gather_merge(st, torch.where(it >= 0, it + first, it), k, k, group)
        if q2:
            out_s, out_i = out_s[0], out_i[0]
        return (out_s, out_i) if torch_mode else (out_s.numpy(), out_i.numpy())

    # ---- properties -----------------------------------------------------------------

    @property
    def dim(self) -> int:
        return self.local.dim

    @property
    def nbits(self) -> int:
        return self.local.nbits

    @property
    def num_centroids(self) -> int:
        return self.local.num_centroids

    def __repr__(self) -> str:
        return f"lik.distributed.ShardedIndex(local={self.local!r})"


def _read_shards_json(fn: str, info: str) -> int:
    """The number of shards ``shards.json`` (written by :meth:`ShardedIndex.save`)
    declares: an object with ``world_size`` (an int >= 1) and, optionally,
    ``num_docs`` (a list of ``world_size`` ints >= 0).

    Raises:
        ValueError: anything else, naming the file and what is wrong.
    """
    def bad(why: str):
        return ValueError(f"{fn}: {info} is not a valid shards.json ({why}); ShardedIndex.save writes "
                          '{"world_size": R, "num_docs": [n_0, ..., n_R-1]}')

    def count(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if not stat.S_ISREG(os.stat(info).st_mode):  # a FIFO would block the read
        raise bad("not a regular file")
    try:
        with open(info, "rb") as f:
            meta = json.loads(f.read(1 << 20))
    except (ValueError, UnicodeDecodeError) as exc:  # json.JSONDecodeError is a ValueError
        raise bad(f"not JSON: {exc}") from None
    if not isinstance(meta, dict):
        raise bad(f"a JSON {type(meta).__name__}, not an object")
    world = meta.get("world_size")
    if not count(world) or world < 1:
        raise bad(f"world_size {world!r} is not an int >= 1")
    docs = meta.get("num_docs")
    if docs is not None and not (isinstance(docs, list) and len(docs) == world
                                 and all(count(n) and n >= 0 for n in docs)):
        raise bad(f"num_docs {docs!r} is not a list of {world} ints >= 0")
    return world


def _local_subset(subset, first: int, n: int, total: int):
    """Global ``subset`` ids (the forms :meth:`lik.plaid.Index.search` takes)
    -> this shard's local ids: those in [first, first + n), minus first."""
    ids, cu = _subset(subset)
    if ids.size and (ids.min() < 0 or ids.max() >= total):
        raise ValueError(f"subset: ids must be integers in [0, {total}) (the documents of all shards)")
    keep = (ids >= first) & (ids < first + n)
    if cu is None:
        return ids[keep] - first
    return [ids[a:b][keep[a:b]] - first for a, b in zip(cu[:-1], cu[1:])]


def _gather_rows(part, d: int, group):
    """The concatenation over ranks (rank order) of float32 ``[n_r, d]`` rows,
    on rank 0 (other ranks: None)."""
    counts = _exchange([part.shape[0]], group)[:, 0]
    n_max = int(counts.max())
    buf = torch.zeros((n_max, d))
    if part.shape[0]:
        buf[: part.shape[0]] = part
    parts = _all_gather(buf, group)
    if dist.get_rank(group) != 0:
        return None
    return torch.cat([p[: int(c)].cpu() for p, c in zip(parts, counts)])


def _broadcast_trained(fn: str, train, group) -> Index:
    """Rank 0 runs ``train()`` (an empty Index); the other ranks receive its
    codec (the saved files, broadcast) and load it: every rank returns an
    empty index with rank 0's codec, bitwise."""
    rank = dist.get_rank(group)
    msg = [None]
    ix = err = None
    if rank == 0:
        try:
            ix = train()
            with tempfile.TemporaryDirectory() as tmp:
                ix.save(tmp)
                msg[0] = {name: open(os.path.join(tmp, name), "rb").read() for name in os.listdir(tmp)}
        except Exception as exc:  # noqa: BLE001 - re-raised after the broadcast
            err = exc
    dist.broadcast_object_list(msg, src=_global_rank0(group), group=group)
    if rank == 0 and err is not None:
        raise err
    if msg[0] is None:
        raise RuntimeError(f"lik.distributed.{fn}: rank 0 failed to train the codec (its exception is raised "
                           "there); no result")
    if rank == 0:
        return ix
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in msg[0].items():
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        return Index.load(tmp)  # an empty index: its small files are read, nothing stays mapped


def _global_rank0(group) -> int:
    return 0 if group is None else dist.get_global_rank(group, 0)
