"""``MongoDocumentStore``: the versioned-document primitive on MongoDB (pymongo).

Implements :class:`reactor.ports.DocumentStore` (``reactor/ports/documents.py``) so
:class:`reactor.generic.storage.GenericStorage` can build the whole storage on it
(docs/protocol.md#document-stores).

Layout: one MongoDB collection per reactor collection, named ``<prefix><collection>``
(default prefix ``reactor_``), one document per key::

    {_id: <key>, value: <JSON text>, version: <uuid hex>, exp: <epoch seconds | null>,
     expires_at: <BSON datetime | null>, idx: <string | null>}

* ``value`` is the JSON text of the document. Storing text (not a BSON sub-document) keeps the
  round trip exact for every JSON value (integers beyond int64, keys with ``$`` or ``.``) and
  makes the size check exact.
* ``exp`` is the exact logical expiry (epoch seconds, a double). Every read, scan and
  compare-and-set judges expiry by ``exp <= now()``: expiry never depends on the database's
  TTL deletion (docs/protocol.md#conventions).
* ``expires_at`` is ``exp + gc_grace`` as a BSON datetime, covered by a TTL index
  (``expireAfterSeconds: 0``). It is **garbage collection only**: the grace (default 60 s) keeps
  the TTL monitor from deleting a document the adapter's clock still considers alive, whatever
  the clock offset and millisecond rounding.
* ``idx`` is the optional scan index; the compound index ``(idx, _id)`` makes an indexed scan
  an index range walk, and ``_id`` order is the key order (MongoDB compares strings by their
  UTF-8 bytes, which is code-point order, like Python).

Compare-and-set: ``expected_version=None`` inserts (a duplicate ``_id`` -> ``False``); otherwise
``replace_one``/``delete_one`` filtered on ``{_id, version}`` (nothing matched -> ``False``).
A fresh UUID version per write rules out ABA.

Clock: :class:`reactor_mongodb._clock.ServerClock` (server clock, calibrated from ``hello``).
"""

from __future__ import annotations

import json
import math
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from pymongo import ASCENDING
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError, PyMongoError

from reactor.errors import ContextTooLargeError
from reactor.ports.documents import RawDocument, Versioned
from reactor.ports.driver_errors import translate_errors
from reactor_mongodb._clock import ServerClock

__all__ = ["DEFAULT_MAX_DOCUMENT_BYTES", "MAX_BSON_BYTES", "MongoDocumentStore", "RawDocument"]

#: MongoDB's largest BSON document (16 MiB).
MAX_BSON_BYTES = 16 * 1024 * 1024
#: Bytes reserved for the envelope fields around ``value`` (``_id``, version, dates, index).
_ENVELOPE_BYTES = 1024
#: The default largest encoded ``value`` accepted (16 MiB minus the envelope).
DEFAULT_MAX_DOCUMENT_BYTES = MAX_BSON_BYTES - _ENVELOPE_BYTES

_EPOCH = datetime(1970, 1, 1)
#: Largest epoch seconds a BSON datetime built by this module may hold (year 9999).
_MAX_EPOCH = 253402300799.0


def _gc_datetime(exp: float | None, grace: float) -> datetime | None:
    """The naive-UTC BSON datetime of the TTL index (``exp + grace``, rounded up to 1 ms)."""
    if exp is None:
        return None
    seconds = min(exp + grace, _MAX_EPOCH)
    millis = math.ceil(seconds * 1000)
    return _EPOCH + timedelta(milliseconds=millis)


def _encode(value: Mapping[str, Any]) -> str:
    """JSON text of a document (raises TypeError/ValueError for non-JSON values)."""
    text = json.dumps(dict(value), allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates cannot be BSON strings: escape them
        text = json.dumps(dict(value), allow_nan=False, separators=(",", ":"))
    return text


class MongoDocumentStore:
    """A :class:`reactor.ports.DocumentStore` on one MongoDB database.

    Args:
        database: the pymongo (or API-compatible, e.g. mongomock) database.
        prefix: prepended to every collection name (``"reactor_"`` -> ``reactor_locks``).
        clock: the store clock; default a :class:`ServerClock` calibrated against the server
            (``"server"``), or pass ``"application"`` or any ``() -> epoch seconds`` callable.
        gc_grace: seconds between logical expiry and the TTL index's deletion (GC only).
        max_document_bytes: the largest encoded document accepted (default 16 MiB minus the
            envelope); a larger one raises :class:`ContextTooLargeError` before any write.
        owns_client: close the database's client on :meth:`close`.
        clock_skew_budget: with the application clock, the largest difference in seconds
            between the clocks of processes sharing the database (default 1).

    Raises:
        ValueError: a negative ``gc_grace`` or ``clock_skew_budget``, or an unknown clock mode.
    """

    def __init__(
        self,
        database: Database[Any],
        *,
        prefix: str = "reactor_",
        clock: str | Callable[[], float] = "server",
        gc_grace: float = 60.0,
        max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
        owns_client: bool = False,
        clock_skew_budget: float = 1.0,
    ) -> None:
        if gc_grace < 0:
            raise ValueError(f"gc_grace must be >= 0 seconds, got {gc_grace!r}")
        if clock_skew_budget < 0:
            raise ValueError(f"clock_skew_budget must be >= 0 seconds, got {clock_skew_budget!r}")
        #: With the application clock: the largest difference in seconds between the clocks of
        #: processes sharing the database (docs/coordination.md#clock-skew); unused otherwise.
        self.clock_skew_budget = float(clock_skew_budget)
        self.database = database
        self.prefix = prefix
        self.gc_grace = float(gc_grace)
        self.max_document_bytes = max_document_bytes
        self._owns_client = owns_client
        #: ``"server"`` or ``"application"``: where :meth:`now` comes from.
        self.clock_kind = "server" if clock == "server" else "application"
        if isinstance(clock, str):
            self._clock: Callable[[], float] = ServerClock(
                lambda name: database.client.admin.command(name), mode=clock
            ).now
        else:
            self._clock = clock
        self._ensured: set[str] = set()
        self._ensure_lock = threading.Lock()
        self._closed = False

    # -- the DocumentStore protocol -------------------------------------------------------

    def now(self) -> float:
        """The store clock in epoch seconds (server clock by default; module docstring).

        Raises:
            StorageError: calibrating against the server failed.
        """
        return self._clock()

    def read(self, collection: str, key: str) -> Versioned:
        """Read one document; an expired one gives ``value=None`` with its stored version.

        Raises:
            StorageError: the server failed.
        """
        doc = self._find(collection, key)
        if doc is None:
            return Versioned(value=None, version=None)
        exp = doc.get("exp")
        version = str(doc["version"])
        if exp is not None and float(exp) <= self.now():
            return Versioned(value=None, version=version)
        return Versioned(
            value=json.loads(doc["value"]),
            version=version,
            expires_at=None if exp is None else float(exp),
        )

    def write(
        self,
        collection: str,
        key: str,
        value: Mapping[str, Any] | None,
        *,
        expected_version: str | None,
        expires_at: float | None,
        index: str | None = None,
    ) -> bool:
        """Compare-and-set one document (``value=None`` deletes it).

        Args:
            collection: the reactor collection name.
            key: the document key (``_id``).
            value: a JSON-native dict, or ``None`` to delete.
            expected_version: the version the caller read; ``None`` = physically absent.
            expires_at: epoch seconds after which the document reads as absent; ``None`` = never.
            index: an optional string :meth:`scan` can filter on.

        Returns:
            ``True`` when written, ``False`` when the stored version differed.

        Raises:
            ContextTooLargeError: the encoded document exceeds ``max_document_bytes``
                (nothing written).
            TypeError, ValueError: ``value`` is not JSON-serializable.
            StorageError: the server failed.
        """
        coll = self._collection(collection)
        with translate_errors(PyMongoError, what=f"MongoDB write {collection}/{key}"):
            if value is None:
                if expected_version is None:
                    return coll.find_one({"_id": key}, projection={"_id": 1}) is None
                result = coll.delete_one({"_id": key, "version": expected_version})
                return result.deleted_count == 1
            text = _encode(value)
            size = len(text.encode("utf-8"))
            if size > self.max_document_bytes:
                raise ContextTooLargeError(
                    f"document {collection}/{key} is {size} bytes; MongoDB accepts at most "
                    f"{self.max_document_bytes}",
                    size_bytes=size,
                    limit_bytes=self.max_document_bytes,
                )
            body: dict[str, Any] = {
                "value": text,
                "version": uuid.uuid4().hex,
                "exp": None if expires_at is None else float(expires_at),
                "expires_at": _gc_datetime(expires_at, self.gc_grace),
                "idx": index,
            }
            if expected_version is None:
                try:
                    coll.insert_one({"_id": key, **body})
                except DuplicateKeyError:
                    return False
                return True
            replaced = coll.replace_one({"_id": key, "version": expected_version}, body)
            return replaced.matched_count == 1

    def scan(
        self,
        collection: str,
        *,
        index: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, Mapping[str, Any]]]:
        """List unexpired documents in ascending key order (an indexed query).

        Args:
            collection: the reactor collection name.
            index: only documents written with this ``index`` (``None``: all).
            after: only keys strictly greater than this one.
            limit: the maximum number of documents (``<= 0`` gives ``[]``).

        Returns:
            ``(key, value)`` pairs.

        Raises:
            StorageError: the server failed.
        """
        if limit <= 0:
            return []
        query: dict[str, Any] = {}
        if index is not None:
            query["idx"] = index
        if after is not None:
            query["_id"] = {"$gt": after}
        query["$or"] = [{"exp": None}, {"exp": {"$gt": self.now()}}]
        coll = self._collection(collection)
        with translate_errors(PyMongoError, what=f"MongoDB scan of {collection}"):
            cursor = (
                coll.find(query, projection={"value": 1}).sort("_id", ASCENDING).limit(int(limit))
            )
            return [(str(doc["_id"]), json.loads(doc["value"])) for doc in cursor]

    def close(self) -> None:
        """Close the client when this store owns it; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self.database.client.close()

    # -- administration --------------------------------------------------------------------

    def collection_name(self, collection: str) -> str:
        """The MongoDB collection name of a reactor collection (``prefix + collection``)."""
        return self.prefix + collection

    def ensure_indexes(self, collections: Iterable[str] | None = None) -> list[str]:
        """Create the TTL (GC) and ``(idx, _id)`` scan indexes; idempotent.

        Indexes are also created on first use of each collection by this process; call this at
        deploy time to take index builds off the request path.

        Args:
            collections: reactor collection names; ``None`` = every existing collection with
                this store's prefix.

        Returns:
            The reactor collection names that were ensured.

        Raises:
            StorageError: the server failed.
        """
        if collections is None:
            with translate_errors(PyMongoError, what="MongoDB list_collection_names"):
                names = self.database.list_collection_names()
            collections = [n[len(self.prefix) :] for n in names if n.startswith(self.prefix)]
        done = []
        for name in collections:
            self._create_indexes(name)
            with self._ensure_lock:
                self._ensured.add(name)
            done.append(name)
        return done

    # -- probes and tests -----------------------------------------------------------------

    def raw(self, collection: str, key: str) -> RawDocument | None:
        """The physically stored document, expired or not; ``None`` when nothing is stored."""
        doc = self._find(collection, key)
        if doc is None:
            return None
        exp = doc.get("exp")
        return RawDocument(
            value=json.loads(doc["value"]),
            version=str(doc["version"]),
            expires_at=None if exp is None else float(exp),
            index=doc.get("idx"),
        )

    def set_expiry(self, collection: str, key: str, expires_at: float | None) -> bool:
        """Overwrite a stored document's expiry in place, keeping its version (probes).

        Returns:
            ``False`` when nothing is stored under ``key``.
        """
        with translate_errors(PyMongoError, what=f"MongoDB set_expiry {collection}/{key}"):
            result = self._collection(collection).update_one(
                {"_id": key},
                {
                    "$set": {
                        "exp": None if expires_at is None else float(expires_at),
                        "expires_at": _gc_datetime(expires_at, self.gc_grace),
                    }
                },
            )
        return result.matched_count == 1

    # -- internals ------------------------------------------------------------------------

    def _find(self, collection: str, key: str) -> dict[str, Any] | None:
        with translate_errors(PyMongoError, what=f"MongoDB read {collection}/{key}"):
            found: dict[str, Any] | None = self._collection(collection).find_one({"_id": key})
        return found

    def _collection(self, collection: str) -> Collection[Any]:
        """The MongoDB collection, its indexes created before this process first uses it.

        A thread that finds the collection not yet ensured waits for the one creating its
        indexes: no operation of this process meets a half-created collection (its implicit
        creation racing the index build).
        """
        if collection not in self._ensured:
            with self._ensure_lock:
                if collection not in self._ensured:
                    self._create_indexes(collection)  # StorageError: not ensured, retried
                    self._ensured.add(collection)
        return self.database[self.collection_name(collection)]

    def _create_indexes(self, collection: str) -> None:
        coll = self.database[self.collection_name(collection)]
        with translate_errors(PyMongoError, what=f"MongoDB index creation on {coll.name}"):
            coll.create_index(
                [("expires_at", ASCENDING)], name="reactor_gc_ttl", expireAfterSeconds=0
            )
            coll.create_index([("idx", ASCENDING), ("_id", ASCENDING)], name="reactor_scan")
