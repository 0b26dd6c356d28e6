"""Per-document metadata of a :class:`lik.plaid.Index`: an SQLite database
(Python's ``sqlite3``) with one row per document, table ``metadata``, column
``_id`` (the document's id, INTEGER PRIMARY KEY) and one column per key the
documents' dicts used (SQLite's dynamic types: int, float, str, bytes, None).

The database lives in memory beside the index and travels with it as bytes
(``Connection.serialize``): a save writes it as ``metadata.sqlite`` inside
the index's own atomic change (C: ``lik_plaid_index_set_metadata_db``), and a
load reads it with the index files, so after a crash the two are always of
the same state (docs/plaid_index.md, "Metadata").

Conditions (:meth:`MetaDB.where`) are the caller's own SQL over their own
index, as in fast-plaid's ``filtering.where``; they are still confined: one
expression inside ``WHERE (...)`` (a ``;`` is refused), parameters bound by
sqlite3 and never formatted in, and an authorizer that allows reading the
``metadata`` table and calling functions only (no ATTACH, PRAGMA, writes).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Iterable, Sequence

import numpy as np

_TABLE = "metadata"
_ID = "_id"
_READ_ONLY = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}


def _column(name: Any) -> str:
    if not isinstance(name, str) or not name or '"' in name or "\0" in name:
        raise ValueError(f"metadata: key {name!r} is not a column name (a non-empty str without '\"')")
    if name.lower() == _ID:
        raise ValueError(f"metadata: key {name!r} is reserved (the document id's column)")
    return '"' + name + '"'


class MetaDB:
    """The metadata table of one index (in memory)."""

    def __init__(self, data: bytes | None = None):
        self.db = sqlite3.connect(":memory:", check_same_thread=False)
        if data:
            self.db.deserialize(data)
        self.db.execute(f'CREATE TABLE IF NOT EXISTS {_TABLE} ("{_ID}" INTEGER PRIMARY KEY)')
        self.cols = {r[1] for r in self.db.execute(f"PRAGMA table_info({_TABLE})")} - {_ID}

    def to_bytes(self) -> bytes:
        return self.db.serialize()

    def put(self, ids: Iterable[int], rows: Sequence[dict]) -> None:
        """Sets the rows of ``ids`` (replacing any); new keys become columns."""
        ids = [int(x) for x in ids]
        if len(rows) != len(ids):
            raise ValueError(f"metadata: {len(rows)} entries for {len(ids)} documents")
        with self.db:
            for j, r in enumerate(rows):
                if not isinstance(r, dict):
                    raise TypeError(f"metadata[{j}]: expected a dict, got {type(r).__name__}")
                for k in r:
                    if k not in self.cols:
                        self.db.execute(f"ALTER TABLE {_TABLE} ADD COLUMN {_column(k)}")
                        self.cols.add(k)
            self._delete(ids)
            for i, r in zip(ids, rows):
                keys = list(r)
                cols = ", ".join([f'"{_ID}"'] + [_column(k) for k in keys])
                marks = ", ".join("?" * (len(keys) + 1))
                try:
                    self.db.execute(f"INSERT INTO {_TABLE} ({cols}) VALUES ({marks})", [i, *r.values()])
                except sqlite3.InterfaceError as e:
                    raise TypeError(f"metadata of document {i}: {e} (values: int, float, str, bytes, "
                                    "None)") from None

    def drop(self, ids: Iterable[int]) -> None:
        """Removes the rows of ``ids``, committed (what :meth:`to_bytes` and so
        a save see: an uncommitted delete is visible to this connection only)."""
        with self.db:
            self._delete(ids)

    def _delete(self, ids: Iterable[int]) -> None:
        self.db.executemany(f'DELETE FROM {_TABLE} WHERE "{_ID}" = ?', [(int(x),) for x in ids])

    def where(self, condition: str, parameters: Sequence[Any] = ()) -> np.ndarray:
        """Ascending int64 ids of the rows where ``condition`` holds."""
        if not isinstance(condition, str) or not condition.strip():
            raise ValueError("condition: expected a non-empty SQL expression (str)")
        if ";" in condition:
            raise ValueError("condition: one WHERE expression only (';' is refused)")
        if isinstance(parameters, (str, bytes)) or not isinstance(parameters, (list, tuple)):
            raise TypeError(f"parameters: expected a list or tuple, got {type(parameters).__name__}")

        def allow(action, arg1, *_):
            ok = action in _READ_ONLY and (action != sqlite3.SQLITE_READ or arg1 == _TABLE)
            return sqlite3.SQLITE_OK if ok else sqlite3.SQLITE_DENY

        self.db.set_authorizer(allow)
        try:
            rows = self.db.execute(f'SELECT "{_ID}" FROM {_TABLE} WHERE ({condition}) ORDER BY "{_ID}"',
                                   list(parameters)).fetchall()
        except (sqlite3.OperationalError, sqlite3.ProgrammingError, sqlite3.DatabaseError) as e:
            raise ValueError(f"condition {condition!r}: {e}") from None
        finally:
            self.db.set_authorizer(None)
        return np.array([r[0] for r in rows], dtype=np.int64)

    def get(self, ids: Iterable[int]) -> list[dict | None]:
        """The rows of ``ids`` as dicts (None: no row)."""
        cur = self.db.cursor()
        out = []
        for i in ids:
            cur.execute(f'SELECT * FROM {_TABLE} WHERE "{_ID}" = ?', (int(i),))
            r = cur.fetchone()
            out.append(None if r is None else
                       {d[0]: v for d, v in zip(cur.description, r) if d[0] != _ID and v is not None})
        return out
