"""lik.plaid.Index — a PLAID index (centroids + IVF lists + compressed
residuals) built, saved, loaded and searched by the C library
(``lik_plaid_index_*`` in ``include/lik_experimental.h``).

The folder format is fast-plaid 1.7's (``metadata.json``, ``centroids.npy``,
``ivf.npy``, ``merged_codes.npy``, ...): an index built here loads in
fast-plaid and the other way round.  Search runs PLAID's stages (centroid
scores, IVF probing, approximate scores, exact residual MaxSim on the best
candidates) on the CPU threads, or on a CUDA device once :meth:`Index.to`
copied the index there (the library refreshes the device copy after each
change).  ``device=`` of :meth:`Index.build` / :meth:`Index.train`, and
:meth:`Index.add` / :meth:`Index.update` on an index with a device copy, run
the nearest-centroid search and the coding on that GPU (the same files, byte
for byte, as on the CPU); delete, compact and save stay on the host.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from . import _lib
from ._metadata import MetaDB

__all__ = ["Index"]


def _is_seq(x) -> bool:
    return isinstance(x, (list, tuple))


def _to_np(x):
    if _lib.is_torch(x):
        if x.device.type != "cpu":
            raise _lib.LikError("lik.plaid.Index runs on the CPU in this version: pass CPU tensors "
                                f"(got {x.device})", _lib.LIK_ERR_UNSUPPORTED)
        return x.detach()
    if isinstance(x, np.ndarray):
        return x
    raise TypeError(f"expected numpy arrays or torch tensors, got {type(x).__name__}")


def _device_id(device) -> int:
    """-1 (the host) or the CUDA device index of a ``device=`` argument:
    "cpu", "cuda" (torch's current device), "cuda:N", a torch.device, or an
    int N >= 0 (CUDA device N)."""
    if isinstance(device, (bool, np.bool_)):
        raise TypeError("device: expected 'cpu', 'cuda', 'cuda:N', a torch.device or an int, got bool")
    if isinstance(device, (int, np.integer)):
        return _lib.int_arg(device, "device", 0, _lib.INT32_MAX)
    if _lib._torch is not None and isinstance(device, _lib._torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise TypeError(f"device: expected 'cpu', 'cuda', 'cuda:N', a torch.device or an int, got "
                        f"{type(device).__name__}")
    if device in ("cpu", "cpu:0"):
        return -1
    if device == "cuda":
        torch = _lib._torch
        return torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else 0
    n = device.removeprefix("cuda:")
    if device.startswith("cuda:") and n.isascii() and n.isdigit():
        return _lib.int_arg(int(n), "device", 0, _lib.INT32_MAX)
    raise ValueError(f"device: {device!r}, expected 'cpu', 'cuda', 'cuda:N', a torch.device or an int N >= 0")


def _ints(x, name: str) -> np.ndarray:
    """An integer argument (a list, numpy array or torch tensor, a CUDA one
    copied to the host) as a contiguous int64 array.  Floats, bools and
    strings are a TypeError (they would be truncated or parsed); uint64
    beyond int64 is clamped to its maximum, so it stays out of range."""
    a = np.asarray(x.detach().cpu() if _lib.is_torch(x) else x)
    if a.size and a.dtype.kind not in "iu":
        raise TypeError(f"{name}: dtype {a.dtype} is not an integer dtype")
    if a.dtype == np.uint64:
        a = np.minimum(a, np.iinfo(np.int64).max)
    return np.asarray(a, dtype=np.int64, order="C")  # (ascontiguousarray makes 0-d 1-d)


def _subset(subset):
    """``subset=`` of :meth:`Index.search` as ``(ids, cu)``: int64 ids, and
    None (one list for every query) or the int64 ``[Nq + 1]`` offsets of one
    list per query in ``ids``.  Accepts a list / tuple / 1-D array of ids, a
    list of such lists, or a 2-D array (one row per query)."""
    if _lib.is_array(subset):
        a = _ints(subset, "subset")
        if a.ndim == 2:
            return a.reshape(-1), np.arange(a.shape[0] + 1, dtype=np.int64) * a.shape[1]
        if a.ndim != 1:
            raise ValueError(f"subset: expected one list of ids [n] or one per query [Nq, n], got shape {a.shape}")
        return a, None
    if not isinstance(subset, (list, tuple, range)):
        raise TypeError("subset: expected None, one list of document ids or one list per query, got "
                        f"{type(subset).__name__}")
    if not any(isinstance(x, (list, tuple, range)) or (_lib.is_array(x) and x.ndim) for x in subset):
        return _ints(list(subset), "subset"), None
    parts = [_ints(x, f"subset[{j}]") for j, x in enumerate(subset)]
    for j, x in enumerate(parts):
        if x.ndim != 1:
            raise ValueError(f"subset[{j}]: expected a list of document ids, got shape {x.shape}")
    cu = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in parts], out=cu[1:])
    return np.concatenate(parts), cu


def _packed(documents, cu_seqlens=None, doc_lengths=None):
    """(tokens [T, d], cu_seqlens int64 [N + 1]) of the accepted document
    layouts: a list of [L_i, d] arrays, a padded [N, L, d] array (with
    doc_lengths), or tokens [T, d] with cu_seqlens."""
    if _is_seq(documents):
        docs = [_to_np(x) for x in documents]
        for i, x in enumerate(docs):
            if x.ndim != 2:
                raise ValueError(f"documents[{i}]: expected [L, d], got shape {tuple(x.shape)}")
        if not docs:
            raise ValueError("documents: empty list")
        lens = np.array([x.shape[0] for x in docs], dtype=np.int64)
        cu = np.zeros(len(docs) + 1, dtype=np.int64)
        np.cumsum(lens, out=cu[1:])
        if all(_lib.is_torch(x) for x in docs):
            import torch

            dt = docs[0].dtype if all(x.dtype == docs[0].dtype for x in docs) else torch.float32
            return torch.cat([x.to(dt) for x in docs]), cu
        arrs = [x.numpy() if _lib.is_torch(x) else x for x in docs]
        dt = arrs[0].dtype if all(a.dtype == arrs[0].dtype for a in arrs) else np.float32
        return np.concatenate([a.astype(dt, copy=False) for a in arrs]), cu
    X = _to_np(documents)
    if cu_seqlens is not None:
        if X.ndim != 2:
            raise ValueError(f"documents: with cu_seqlens expected tokens [T, d], got shape {tuple(X.shape)}")
        return X, _ints(cu_seqlens, "cu_seqlens")
    if X.ndim == 3:
        N, L = X.shape[0], X.shape[1]
        lens = np.full(N, L, dtype=np.int64) if doc_lengths is None else _ints(doc_lengths, "doc_lengths")
        if lens.shape != (N,) or (lens < 0).any() or (lens > L).any():
            raise ValueError(f"doc_lengths: expected [{N}] values in [0, {L}]")
        keep = np.arange(L)[None, :] < lens[:, None]
        if _lib.is_torch(X):
            import torch

            toks = X[torch.from_numpy(keep)]
        else:
            toks = X[keep]
        cu = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(lens, out=cu[1:])
        return toks, cu
    if X.ndim == 2:  # one document
        return X, np.array([0, X.shape[0]], dtype=np.int64)
    raise ValueError(f"documents: expected a list of [L, d], [N, L, d] or [T, d] + cu_seqlens, got shape "
                     f"{tuple(X.shape)}")


def _padded_queries(qs):
    """A list of ``[Lq_i, d]`` queries (numpy, or torch on any device) as
    (float32 ``[Nq, max Lq_i, d]`` zero-padded, int64 lengths ``[Nq]``) on
    the host."""
    if not qs:
        raise ValueError("Q: empty list")
    qs = [np.asarray(x.detach().cpu().float() if _lib.is_torch(x) else x, dtype=np.float32) for x in qs]
    L = max(x.shape[0] for x in qs)
    d = qs[0].shape[-1]
    Qa = np.zeros((len(qs), L, d), dtype=np.float32)
    for i, x in enumerate(qs):
        if x.ndim != 2 or x.shape[-1] != d:
            raise ValueError(f"Q[{i}]: expected [Lq, {d}], got shape {x.shape}")
        Qa[i, : x.shape[0]] = x
    return Qa, np.array([x.shape[0] for x in qs], dtype=np.int64)


class _Progress:
    """A one-line progress bar on stderr (only when it is a terminal)."""

    def __init__(self, label: str):
        import sys

        self.label = label
        self.err = sys.stderr
        self.on = hasattr(sys.stderr, "isatty") and sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.on or total <= 0:
            return
        w = 40
        f = int(w * done / total)
        self.err.write(f"\r{self.label} [{'#' * f}{' ' * (w - f)}] {done}/{total}")
        if done >= total:
            self.err.write("\n")
        self.err.flush()


class Index:
    """A PLAID index over documents of token embeddings (C: ``lik_plaid_index``).

    Make one with :meth:`build` (one call over all documents), :meth:`train`
    then :meth:`add` (a corpus streamed in chunks), or :meth:`load` (a
    folder written by :meth:`save`, or by fast-plaid).  Documents get ids
    ``0, 1, ...`` in the order they were added (or a folder's
    ``doc_ids.npy``) and keep them for life: :meth:`delete`,
    :meth:`update` and :meth:`compact` never renumber the others.  Per
    document metadata (``metadata=`` of :meth:`build` / :meth:`add`) is an
    SQLite table queried by :meth:`where` and ``search(filter=...)``.

    An index lives on the host; :meth:`to` (or ``device=`` of :meth:`build`,
    :meth:`train`, :meth:`load`) also copies what search reads to a CUDA
    device, and :meth:`search` then runs there (docs/plaid_index.md, "On the
    GPU").

    Attributes (read-only): ``num_docs`` (live documents), ``num_deleted``,
    ``ids``, ``num_tokens``, ``dim``, ``nbits``, ``num_centroids``,
    ``num_chunks``, ``device``, ``device_bytes``, ``path`` (the folder it was
    loaded from or last saved to, else None).
    """

    def __init__(self, handle: int, path: str | None = None):
        self._h = handle
        self.path = path
        self._meta: MetaDB | None = None  # read from the index's bytes on first use

    # ---- construction ---------------------------------------------------------------

    @classmethod
    def build(cls, documents, path: str | os.PathLike | None = None, *, nbits: int = 2,
              cu_seqlens=None, doc_lengths=None, num_centroids: int | None = None,
              kmeans_niters: int = 4, max_points_per_centroid: int = 256,
              sample_docs: int | None = None, seed: int = 42, chunk_docs: int = 25000,
              doc_ids=None, metadata: Sequence[dict] | None = None,
              progress: bool = False, device=None) -> "Index":
        """Build an index (k-means, codec, every document coded, IVF) on the
        host, then copy it to ``device``.

        Args:
            documents: a list of ``[L_i, d]`` arrays (numpy or torch CPU,
                float16 / float32 / float64, bfloat16 torch), a padded
                ``[N, L, d]`` array (with ``doc_lengths [N]``), or tokens
                ``[T, d]`` with ``cu_seqlens [N + 1]``.
            path: folder to save the index into (fast-plaid's format), or None.
            nbits: bits per residual dimension, 1, 2, 4 or 8 (``d * nbits``
                a multiple of 8).
            num_centroids: K; None = ``2^floor(log2(16 * sqrt(tokens)))``
                (ColBERTv2 / fast-plaid), at most the sample's tokens.
            kmeans_niters, max_points_per_centroid, sample_docs, seed:
                k-means (spherical, on L2-normalised tokens) over
                ``min(N, 1 + 16 * sqrt(120 N))`` sampled documents by default,
                deterministic for a seed.
            chunk_docs: documents per chunk (``doclens.<i>.json``).
            doc_ids: None (ids ``0 .. N-1``) or unique int64 ``[N]`` ids
                in ``[0, 2**62)``, saved as ``doc_ids.npy`` (with ``path`` only): the
                returned index (loaded from ``path``) searches with them.
            metadata: None or one dict per document (keys: column names;
                values int, float, str, bytes or None), stored in the
                folder's ``metadata.sqlite`` (:meth:`where`).
            progress: show a progress bar on a terminal.
            device: None or "cpu" (the host), or a CUDA device (as
                :meth:`to`): the index is built there -- k-means'
                assignment passes and the coding of every document run on
                that GPU (the documents copied there in chunks; sampling,
                the centroid update, the codec's quantiles and the IVF on
                the host), the same files, byte for byte, as a CPU build
                with the same seed -- and the built index is copied there.

        Returns:
            the :class:`Index` (``path`` set when saved).

        Raises:
            ValueError: shapes, nbits, lengths, a NaN / infinite token, an
                option outside its C field's range; ``device`` as :meth:`to`.
            TypeError: dtypes, an option that is not an int, lengths that
                are not integers.
            lik.LikError: ``device`` as :meth:`to`.
        """
        X, cu = _packed(documents, cu_seqlens, doc_lengths)
        o, keep = _lib.plaid_build_options(
            nbits=nbits, kmeans_niters=kmeans_niters, num_centroids=num_centroids or 0,
            max_points_per_centroid=max_points_per_centroid, sample_docs=sample_docs or 0, seed=seed,
            chunk_docs=chunk_docs, progress=_Progress("lik index") if progress else None,
            device=-1 if device is None else _device_id(device))
        if metadata is not None and len(metadata) != len(cu) - 1:
            raise ValueError(f"metadata: {len(metadata)} entries for {len(cu) - 1} documents")
        dev = -1 if device is None else _device_id(device)  # (checked before the build)
        ix = cls(_lib.call_plaid_build(X, cu, o))
        del keep
        if metadata is not None:
            ids = range(len(cu) - 1) if doc_ids is None else _ints(doc_ids, "doc_ids")
            ix._meta = MetaDB()
            ix._meta.put(ids, metadata)
        if path is not None:
            ix.save(path, doc_ids=doc_ids)
            if doc_ids is not None:
                ix.close()
                ix = cls.load(path)
        return ix._placed(dev)

    @classmethod
    def train(cls, sample, *, nbits: int = 2, total_tokens: int | None = None,
              num_centroids: int | None = None, kmeans_niters: int = 4,
              max_points_per_centroid: int = 256, seed: int = 42, chunk_docs: int = 25000,
              device=None) -> "Index":
        """An empty index trained on sample tokens; add documents with :meth:`add`.

        Args:
            sample: ``[Ts, d]`` tokens (e.g. all tokens of randomly drawn
                documents), float (numpy or torch CPU).
            nbits, num_centroids, kmeans_niters, max_points_per_centroid,
                seed, chunk_docs: as :meth:`build`.
            total_tokens: the corpus's (estimated) token count, for K's rule
                (None: the sample's).
            device: as :meth:`build`: k-means runs its assignment passes
                there, the empty index is copied there, and every
                :meth:`add` codes its documents there and refreshes the copy.

        Returns:
            an :class:`Index` with the codec and no documents.

        Raises:
            ValueError: shapes, nbits, an empty sample, a NaN / infinite
                token, an option outside its C field's range; ``device`` as
                :meth:`to`.
            TypeError: dtypes, an option that is not an int.
            lik.LikError: ``device`` as :meth:`to`.
        """
        S = _to_np(sample)
        o, keep = _lib.plaid_build_options(
            nbits=nbits, kmeans_niters=kmeans_niters, num_centroids=num_centroids or 0,
            total_tokens=total_tokens or 0, max_points_per_centroid=max_points_per_centroid, seed=seed,
            chunk_docs=chunk_docs, device=-1 if device is None else _device_id(device))
        dev = -1 if device is None else _device_id(device)
        return cls(_lib.call_plaid_train(S, o))._placed(dev)

    @classmethod
    def load(cls, path: str | os.PathLike, *, verify: bool = False, device=None) -> "Index":
        """Map an index folder (lik's or fast-plaid's).

        Args:
            path: the folder.
            verify: read every code now (else a corrupt code is reported by
                the search reading it; a copy to a device checks every code
                anyway).
            device: None or "cpu" (the host), or a CUDA device (as
                :meth:`to`): the index is copied there.

        Returns:
            the :class:`Index` (``path`` set).

        Raises:
            ValueError: a missing or inconsistent file (the message names the
                file and the sizes); ``device`` as :meth:`to`.
            lik.LikError: ``device`` as :meth:`to`.
        """
        p = os.fspath(path)
        dev = -1 if device is None else _device_id(device)
        return cls(_lib.call_plaid_load(p, verify), p)._placed(dev)

    def _placed(self, dev: int) -> "Index":
        """self copied to CUDA device ``dev`` (-1: stays on the host); freed
        when the copy fails."""
        if dev < 0:
            return self
        try:
            return self.to(dev)
        except BaseException:
            self.close()
            raise

    def to(self, device) -> "Index":
        """Put the index's search state on ``device``, torch style.

        A CUDA device gets a copy of what search reads (centroids fp16,
        codec, codes int32, residuals, IVF, document table, ids, tombstones:
        about ``num_tokens * (4 + dim * nbits / 8)`` bytes, reported by
        :attr:`device_bytes`); the host copy stays (CPU searches, add,
        delete, update, compact and save use it, and the library refreshes
        the device copy after each change).  "cpu" frees the device copy.
        Moving to the device the index is on already does nothing.

        Args:
            device: "cpu", "cuda" (torch's current device), "cuda:N", a
                ``torch.device``, or an int N >= 0 (CUDA device N).

        Returns:
            self.

        Raises:
            TypeError: ``device`` not one of these forms.
            ValueError: a malformed device string, or no such CUDA device
                (the library's LIK_ERR_DEVICE); a corrupt code (the message
                names the document and the token).
            ImportError: a CUDA device without torch (the GPU search
                allocates its results with torch).
            lik.LikError: a library built without CUDA, an index without an
                IVF (LIK_ERR_UNSUPPORTED), device memory (LIK_ERR_ALLOC).
        """
        dev = _device_id(device)
        if dev == self._info().device:
            return self
        if dev >= 0 and _lib._torch is None:
            raise ImportError("lik.plaid.Index.to: the GPU search allocates its results with torch; install torch")
        _lib.call_plaid_to_device(self._handle(), dev)
        return self

    def add(self, documents, *, cu_seqlens=None, doc_lengths=None, expand_centroids: bool = False,
            metadata: Sequence[dict] | None = None, progress: bool = False) -> range:
        """Code documents with this index's codec and append them (the IVF
        is extended).  In memory until :meth:`save`.

        Args:
            documents, cu_seqlens, doc_lengths: a layout of :meth:`build`
                (an empty list adds nothing).
            expand_centroids: False (default): the centroids and codec do
                not change.  True: fast-plaid's update -- tokens whose
                residual norm to their nearest centroid exceeds the index's
                ``cluster_threshold`` (the 0.75-quantile of residual norms)
                get new centroids (k-means on them, 4 per 256 outliers)
                before the documents are coded, and the threshold moves to
                the token-weighted mean of the old one and the new tokens'
                0.75-quantile (docs/plaid_index.md).  Off by default, unlike
                fast-plaid: by that rule a quarter or more of the tokens of
                documents like the indexed ones are outliers too (35 % on
                bench/plaid_index.py's corpus: K +33 % for +0.005 recall@10),
                so every add grows K by about T_new / 256 centroids, and
                ``train`` + ``add`` in parts would no longer equal one
                ``add``; turn it on for documents unlike the indexed ones (a
                new domain), where it restores recall (0.41 -> 0.90 there).
            metadata: None or one dict per new document (as :meth:`build`).
            progress: show a progress bar on a terminal.

        On an index with a device copy (:meth:`to`) the documents are
        coded on that GPU (the same codes and residual bytes as on the CPU).

        Returns:
            ``range`` of the new documents' ids (``next_id`` onwards: after
            the highest id ever given, even when deleted).

        Raises:
            ValueError: shapes, d not the index's, lengths, a NaN / infinite
                token, ``metadata`` not one dict per document.
            TypeError: dtypes, lengths that are not integers,
                ``expand_centroids`` not a bool.
        """
        expand_centroids = _lib.flag(expand_centroids, "expand_centroids")
        first = int(self._info().next_id)
        if _is_seq(documents) and len(documents) == 0:
            return range(first, first)
        X, cu = _packed(documents, cu_seqlens, doc_lengths)
        if metadata is not None and len(metadata) != len(cu) - 1:
            raise ValueError(f"metadata: {len(metadata)} entries for {len(cu) - 1} documents")
        meta = self._metadb(create=metadata is not None)
        o, keep = _lib.plaid_build_options(progress=_Progress("lik add") if progress else None,
                                           expand_centroids=expand_centroids,
                                           device=int(self._info().device))
        _lib.call_plaid_add(self._handle(), X, cu, o)
        del keep
        new = range(first, int(self._info().next_id))
        if meta is not None:
            meta.drop(new)  # rows of ids a compact let go of
            if metadata is not None:
                meta.put(new, metadata)
        return new

    def delete(self, ids) -> None:
        """Delete documents by id: search never returns them again (they
        are left out before the candidate stages), the other documents keep
        their ids, their metadata rows go.  O(len(ids)) -- tombstones; the
        space is reclaimed by :meth:`compact`.  In memory until :meth:`save`
        (which writes ``deleted.npy`` in the same atomic change as the rest).

        Args:
            ids: integer ids (list, numpy array, torch CPU tensor).

        Raises:
            ValueError: an id out of range, unknown (compacted away),
                already deleted or given twice (the message names the
                entry); nothing is deleted then.
            TypeError: ids not integers.
        """
        v = _ints(ids, "ids").reshape(-1)
        meta = self._metadb()
        _lib.call_plaid_delete(self._handle(), v)
        if meta is not None:
            meta.drop(v)

    def update(self, ids, documents, *, cu_seqlens=None, doc_lengths=None,
               metadata: Sequence[dict] | None = None, expand_centroids: bool = False) -> None:
        """Replace documents: the new versions (coded with the index's codec,
        appended) take the ids, the old ones are deleted.

        Args:
            ids: the live ids replaced, one per new document.
            documents, cu_seqlens, doc_lengths, expand_centroids: as :meth:`add`.
            metadata: None (the rows stay) or one dict per document (replacing
                its row).

        Raises:
            ValueError: ids as :meth:`delete`, not one per document; the
                documents as :meth:`add`.  Nothing changes then.
            TypeError: as :meth:`add`.
        """
        expand_centroids = _lib.flag(expand_centroids, "expand_centroids")
        v = _ints(ids, "ids").reshape(-1)
        X, cu = _packed(documents, cu_seqlens, doc_lengths)
        if metadata is not None and len(metadata) != len(v):
            raise ValueError(f"metadata: {len(metadata)} entries for {len(v)} ids")
        meta = self._metadb(create=metadata is not None)
        o, keep = _lib.plaid_build_options(expand_centroids=expand_centroids,
                                           device=int(self._info().device))
        _lib.call_plaid_update(self._handle(), v, X, cu, o)
        del keep
        if metadata is not None:
            meta.put(v, metadata)

    def compact(self) -> None:
        """Drop the deleted documents from the codes, residuals and IVF
        (rewritten in memory; the next :meth:`save` writes them); every id
        stays.  A no-op without deleted documents.

        Raises:
            ValueError: a corrupt code in a loaded file (nothing changes).
        """
        _lib.call_plaid_compact(self._handle())

    # ---- metadata -------------------------------------------------------------------------

    def _metadb(self, create: bool = False) -> MetaDB | None:
        if self._meta is None:
            data = _lib.plaid_metadata_db(self._handle())
            if data is not None or create:
                self._meta = MetaDB(data)
        return self._meta

    def where(self, condition: str, parameters: Sequence[Any] = ()) -> np.ndarray:
        """Ids of the live documents whose metadata satisfies ``condition``.

        Args:
            condition: one SQL expression over the metadata's columns (the
                body of a WHERE clause), e.g. ``"year > ? AND lang = ?"``;
                ``_id`` is the document id.  Your own query on your own
                index (as fast-plaid's ``filtering.where``), confined to
                reading the metadata table: a ``;`` is refused, and only
                SELECT / column reads / functions are authorised.
            parameters: values bound to the ``?`` placeholders (never
                formatted into the SQL).

        Returns:
            int64 ``[n]`` ids, ascending (for ``search(subset=...)``).

        Raises:
            ValueError: the index has no metadata; a condition that is not
                one valid expression (SQLite's message).
            TypeError: ``parameters`` not a list / tuple.
        """
        meta = self._metadb()
        if meta is None:
            raise ValueError("index: has no metadata (build / add with metadata=[...])")
        found = meta.where(condition, parameters)
        return found[np.isin(found, self.ids)]  # rows of documents deleted outside Python

    def metadata(self, ids) -> list:
        """The metadata dicts of ``ids`` (None for a document without a
        row, {} when the index has no metadata)."""
        v = _ints(ids, "ids").reshape(-1)
        meta = self._metadb()
        return [{} for _ in v] if meta is None else meta.get(v)

    def save(self, path: str | os.PathLike, *, doc_ids=None) -> None:
        """Write the index into folder ``path`` (fast-plaid 1.7's files) as
        one atomic change: the new files are staged and fsynced, then switched
        in with one rename, so a failed or interrupted save leaves the old
        index and saving over the folder it was loaded from is safe
        (docs/plaid_index.md, "Atomic commits").  A save to the folder the
        index was loaded from or last saved to, while no one else changed
        it, writes only the files its changes touched (after deletes:
        ``deleted.npy`` and ``metadata.json``).

        Args:
            path: the folder (created if missing).
            doc_ids: None (the index's ids) or unique integer ids in
                ``[0, 2**62)``, one per stored document (``doc_ids.npy``; a
                load of the folder searches with them).  The metadata
                (``metadata.sqlite``), the tombstones (``deleted.npy``) and,
                when the ids do not imply it, the next id to give
                (``next_id.npy``: after a compact dropped the highest ids,
                which are never given again) are saved in the same change.

        Returns:
            None; ``self.path`` becomes ``path``.

        Raises:
            ValueError: ``doc_ids`` not ``[N]``; a folder or file that cannot
                be written (the message names it).
            TypeError: ``doc_ids`` not integers.
        """
        p = os.fspath(path)
        ids = None if doc_ids is None else _ints(doc_ids, "doc_ids")
        if self._meta is not None:  # saved in the same atomic change as the index files
            _lib.set_plaid_metadata_db(self._handle(), self._meta.to_bytes())
        _lib.call_plaid_save(self._handle(), p, ids)
        self.path = p

    # ---- search -------------------------------------------------------------------------

    def search(self, Q, top_k: int = 10, *, n_ivf_probe: int = 8, n_full_scores: int = 4096,
               centroid_score_threshold: float | None = None, q_lengths=None,
               subset: Sequence[int] | Sequence[Sequence[int]] | None = None,
               filter: tuple[str, Sequence[Any]] | None = None):
        """Top-``top_k`` documents of each query by PLAID search.

        Where it runs: an index without a device copy searches on the CPU
        threads (a CUDA ``Q`` is then a :class:`lik.LikError`).  An index on
        a CUDA device (:meth:`to`) searches there, whatever ``Q`` is: ``Q``
        and ``q_lengths`` are moved to the index's device (a copy unless
        they are there already), every stage runs on torch's current stream
        of that device, and the results are moved back to ``Q``'s device.
        With ``Q`` and ``q_lengths`` (or None) on the index's device the
        call does not synchronise with the host, so it can be captured in a
        CUDA graph (``torch.cuda.graph``; add, update, delete, compact and
        :meth:`to` replace the device copy such a graph reads: capture it
        again after one of them).  Exceptions: ``subset`` or
        ``filter`` on a CUDA index runs the CPU search (``Q`` copied to the
        host; the library's GPU search takes no subset in this version), its
        results moved to ``Q``'s device.

        The GPU's exact stage scores on fp16 tensor cores and sums centroid
        scores in another order than the CPU: its scores agree with the
        CPU's to about 2e-3 relative (2e-3 per query token absolute), and
        documents whose scores are that close may swap ranks.

        Args:
            Q: ``[Nq, Lq, d]`` or ``[Lq, d]`` (one query), or a list of
                ``[Lq_i, d]`` queries (padded here, on the host); float32 /
                float16 / float64 (numpy or torch) or bfloat16 (torch), any
                strides, on the CPU or a CUDA device.
            top_k: results per query.
            n_ivf_probe: IVF cells probed per query token (fast-plaid's 8;
                the GPU search takes at most 1024).
            n_full_scores: candidates kept by the approximate score; a quarter
                of them (at least top_k) are scored exactly (fast-plaid's rule).
            centroid_score_threshold: None, or ColBERTv2's centroid pruning
                threshold (e.g. 0.5).
            q_lengths: ``[Nq]`` valid tokens per padded query (None: all),
                integers, in ``[0, Lq]``: host values outside are a
                ValueError; values in a CUDA tensor are not read on the host
                (the GPU search clamps them to ``[0, Lq]``).
            subset: None (all documents); integer document ids searched for
                every query (a list / tuple, 1-D numpy array or torch tensor);
                or one such list per query (a list of them, or a 2-D array
                ``[Nq, n]``).  An empty list searches nothing (fast-plaid
                reads a top-level ``[]`` as None).  Deleted ids are skipped.
            filter: None, or ``(condition, parameters)`` of :meth:`where`:
                the documents searched (for every query; not with
                ``subset``).  Filters (subset, filter, deletions) apply
                before the candidate stages, and a query whose probes find
                fewer than ``top_k`` allowed documents scores every allowed
                one: ``top_k`` results whenever that many exist.

        Returns:
            ``(scores [Nq, top_k] float32, ids [Nq, top_k] int64)`` (2-D Q:
            ``[top_k]``); ids -1 / scores -inf fill the slots of a query with
            fewer results.  Scores are exact residual MaxSim scores (both
            sides L2-normalised).  numpy ``Q`` (or a list of numpy queries):
            numpy arrays; torch ``Q``: torch tensors on ``Q``'s device (a
            list: its first query's).

        Raises:
            ValueError: shapes; ``top_k`` outside ``[1, 2**40]``,
                ``n_ivf_probe`` / ``n_full_scores`` outside ``[1, 2**63 - 1]``
                (the message names the argument and the range; checked before
                anything is allocated); host ``q_lengths`` outside
                ``[0, Lq]``; ``subset`` ids out of range or nested deeper
                than one list per query.
            TypeError: dtypes; ``top_k`` / ``n_ivf_probe`` / ``n_full_scores``
                not ints (a bool included); ``subset`` or ``q_lengths`` not
                integers.
            lik.LikError: a CUDA ``Q`` and an index without a device copy
                (LIK_ERR_UNSUPPORTED); on the GPU, ``n_ivf_probe`` above
                512 (LIK_ERR_UNSUPPORTED), device memory (LIK_ERR_ALLOC), a
                CUDA error.
        """
        p = _lib.LikPlaidSearchParams()
        p.top_k = top_k = _lib.int_arg(top_k, "top_k", 1, _lib.PLAID_MAX_TOP_K)
        p.n_ivf_probe = _lib.int_arg(n_ivf_probe, "n_ivf_probe", 1)
        p.n_full_scores = _lib.int_arg(n_full_scores, "n_full_scores", 1)
        if centroid_score_threshold is not None:
            p.prune = 1
            p.centroid_score_threshold = float(centroid_score_threshold)
        if filter is not None:
            if subset is not None:
                raise ValueError("filter: give subset or filter, not both")
            if not isinstance(filter, tuple) or len(filter) != 2:
                raise TypeError("filter: expected (condition, parameters)")
            subset = self.where(*filter)
        first = Q[0] if _is_seq(Q) and Q else Q
        home = first.device if _lib.is_torch(first) else None  # where the results go (None: numpy)
        dev = self._info().device
        if home is not None and home.type == "cuda" and dev < 0:
            raise _lib.LikError(f"Q: on {home}, but the index has no CUDA copy: call index.to(\"{home}\") first, "
                                "or pass Q on the CPU", _lib.LIK_ERR_UNSUPPORTED)
        if _is_seq(Q):
            Q, q_lengths = _padded_queries(Q)
        if dev >= 0 and subset is None:
            return self._search_cuda(Q, q_lengths, p, dev, home)
        if _lib.is_torch(Q):
            Q = Q.detach().cpu()  # a CUDA Q here: the CPU search of a subset on a CUDA index
        else:
            Q = _to_np(Q)
        if not (1 <= Q.ndim <= 4):
            raise ValueError(f"Q: expected [Nq, Lq, d] or [Lq, d], got shape {tuple(Q.shape)}")
        ql = None if q_lengths is None else _ints(q_lengths, "q_lengths")
        sub, scu = (None, None) if subset is None else _subset(subset)
        nq = Q.shape[0] if Q.ndim == 3 else 1
        if scu is not None and Q.ndim in (2, 3) and len(scu) - 1 != nq:  # (another ndim: the library's error)
            raise ValueError(f"subset: {len(scu) - 1} lists (one per query) for {nq} queries")
        shape = ((Q.shape[0],) if Q.ndim == 3 else ()) + (int(top_k),)
        scores = np.empty(shape, dtype=np.float32)
        ids = np.empty(shape, dtype=np.int64)
        _lib.call_plaid_search(self._handle(), Q, ql, sub, scu, p, scores, ids)
        if home is None:
            return scores, ids
        return _lib.to_torch(scores).to(home), _lib.to_torch(ids).to(home)

    def _search_cuda(self, Q, q_lengths, p, dev: int, home):
        """The GPU search of :meth:`search` on CUDA device ``dev``: Q and
        q_lengths moved there, the results allocated there (no host
        synchronisation when both are there already), then moved to ``home``
        (None: numpy)."""
        torch = _lib._torch
        target = torch.device("cuda", dev)
        _lib.check_array(Q, "Q")
        Q = _lib.to_torch(Q).detach().to(target)
        if not (1 <= Q.ndim <= 4):
            raise ValueError(f"Q: expected [Nq, Lq, d] or [Lq, d], got shape {tuple(Q.shape)}")
        ql = None
        if _lib.is_torch(q_lengths) and q_lengths.is_cuda:  # read on the device only
            ql = q_lengths.detach()
            if ql.dtype.is_floating_point or ql.dtype.is_complex or ql.dtype == torch.bool:
                raise TypeError(f"q_lengths: dtype {_lib.dtype_name(ql)} is not an integer dtype")
            if ql.dtype not in (torch.int32, torch.int64):
                ql = ql.to(torch.int64)
            ql = ql.to(target)
        elif q_lengths is not None:  # host values: checked here as the CPU search checks them
            v = _ints(q_lengths, "q_lengths")
            lq, flat = (Q.shape[-2] if Q.ndim >= 2 else 0), v.reshape(-1)
            bad = np.flatnonzero((flat < 0) | (flat > lq))
            if bad.size:
                raise ValueError(f"q_lengths: q_lengths[{bad[0]}]={flat[bad[0]]} is outside [0, {lq}]")
            ql = torch.from_numpy(v).to(target)
        shape = ((Q.shape[0],) if Q.ndim == 3 else ()) + (int(p.top_k),)
        with torch.cuda.device(dev):
            scores = torch.empty(shape, dtype=torch.float32, device=target)
            ids = torch.empty(shape, dtype=torch.int64, device=target)
            _lib.call_plaid_search(self._handle(), Q, ql, None, None, p, scores, ids)
        if home is None:
            return scores.cpu().numpy(), ids.cpu().numpy()
        return scores.to(home), ids.to(home)

    # ---- properties -------------------------------------------------------------------

    def _handle(self) -> int:
        if not self._h:
            raise ValueError("index: is closed")
        return self._h

    def _info(self):
        return _lib.plaid_info(self._handle())

    @property
    def num_docs(self) -> int:
        """Live documents (stored minus deleted)."""
        i = self._info()
        return int(i.num_docs - i.num_deleted)

    @property
    def num_deleted(self) -> int:
        """Deleted documents not yet compacted away."""
        return int(self._info().num_deleted)

    @property
    def ids(self) -> np.ndarray:
        """int64 ``[num_docs]``: the live documents' ids, in stored order."""
        out = np.empty(int(self._info().num_docs), dtype=np.int64)
        _lib.call_plaid_ids(self._handle(), out)
        return out[out >= 0]

    @property
    def num_tokens(self) -> int:
        return int(self._info().num_tokens)

    @property
    def dim(self) -> int:
        return int(self._info().dim)

    @property
    def nbits(self) -> int:
        return int(self._info().nbits)

    @property
    def num_centroids(self) -> int:
        return int(self._info().num_centroids)

    @property
    def num_chunks(self) -> int:
        return int(self._info().num_chunks)

    @property
    def device(self) -> str:
        """Where :meth:`search` runs: "cpu", or "cuda:N" when CUDA device N
        holds a copy (:meth:`to`)."""
        dev = self._info().device
        return "cpu" if dev < 0 else f"cuda:{dev}"

    @property
    def device_bytes(self) -> int:
        """Bytes of the device copy (0 without one)."""
        return int(self._info().device_bytes)

    def __len__(self) -> int:
        return self.num_docs

    def __repr__(self) -> str:
        if not self._h:
            return "lik.plaid.Index(closed)"
        i = self._info()
        dev = "" if i.device < 0 else f", device='cuda:{i.device}'"
        return (f"lik.plaid.Index(num_docs={i.num_docs - i.num_deleted}, num_tokens={i.num_tokens}, dim={i.dim}, "
                f"nbits={i.nbits}, num_centroids={i.num_centroids}{dev}, path={self.path!r})")

    def close(self) -> None:
        """Free the index (unmap its files, free its device copy)."""
        h, self._h = self._h, None
        if h:
            _lib.plaid_free(h)

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass
