"""``DynamoDocumentStore``: the versioned-document primitive on one DynamoDB table (boto3).

Implements :class:`reactor.ports.DocumentStore` (``reactor/ports/documents.py``) so
:class:`reactor.generic.storage.GenericStorage` can build the whole storage on it
(docs/protocol.md#document-stores).

Table layout (single table, created by :meth:`DynamoDocumentStore.ensure_table`)::

    pk (S, hash)  = <prefix><collection>      sk (S, range) = <key>
    value (S)     = the document as JSON text
    version (S)   = a fresh UUID per write (no ABA)
    expires_at (N)= logical expiry, epoch seconds; absent = never. Also the table's TTL
                    attribute, which is garbage collection only (AWS deletes "within days")
    idx (S)       = the optional scan index
    gsi_pk (S)    = <prefix><collection>#<idx>, only on items that have an index

    GSI "by_index": gsi_pk (hash), sk (range), projection ALL -- sparse: items without an
    index are not in it.

* Compare-and-set: ``PutItem``/``DeleteItem`` with ``attribute_not_exists(pk)`` (expected
  ``None``) or ``version = :v``; ``ConditionalCheckFailedException`` is a normal ``False``.
* Reads are strongly consistent ``GetItem``; every read, scan and write judges expiry with
  ``expires_at <= now()`` itself (docs/protocol.md#conventions).
* Scans are ``Query`` calls -- on ``pk`` (strongly consistent), or on the GSI when an index is
  given (GSIs are eventually consistent on AWS: a just-written item may be missing from an
  indexed scan for a moment, which the sweepers tolerate) -- with ``sk > :after`` in the key
  condition. Never a table ``Scan``.
* Items over 400 KB are refused with :class:`ContextTooLargeError` before any request.
* Throttling is retried by botocore (``retries={"mode": "standard"}``, 10 attempts, backoff
  with jitter); any other client error is wrapped in :class:`StorageError`.

Clock: DynamoDB has no server time, so :meth:`DynamoDocumentStore.now` is the application
clock (the system clock, read at each call, unless a ``clock`` is injected). Every process
judging the same items must keep its clock in sync (NTP; on AWS the Time Sync Service keeps
instances within about a millisecond). The documented skew
budget is ``clock_skew_budget`` (default 1 s): keep every lock and lease TTL much larger than it
(the engine's shortest, ``context_lock_ttl``, defaults to 60 s). A process whose clock runs
ahead by *d* seconds may take over a lease *d* seconds early.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from reactor.errors import ContextTooLargeError
from reactor.ports.clock import Clock, wall_reader
from reactor.ports.documents import RawDocument, Versioned
from reactor.ports.driver_errors import translate_errors

__all__ = [
    "CREATED_BY_RETRY_SLACK",
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "GSI_NAME",
    "MAX_ITEM_BYTES",
    "DynamoDocumentStore",
    "RawDocument",
]

logger = logging.getLogger(__name__)

#: DynamoDB's largest item: 400 KB, counting attribute names and values.
MAX_ITEM_BYTES = 400 * 1024
#: Bytes reserved for the attributes around ``value`` (keys, version, expiry, index names).
_ENVELOPE_BYTES = 2048
#: The default largest encoded ``value`` accepted.
DEFAULT_MAX_DOCUMENT_BYTES = MAX_ITEM_BYTES - _ENVELOPE_BYTES
#: Name of the sparse index GSI.
GSI_NAME = "by_index"
#: Seconds of clock difference tolerated when a retried ``CreateTable`` finds the table and
#: :meth:`DynamoDocumentStore.ensure_table` judges by its creation time whether the request's
#: lost first attempt made it.
CREATED_BY_RETRY_SLACK = 5.0
_SEP = "#"
#: What boto3 raises for a failed request (wrapped in ``StorageError``).
_DRIVER_ERRORS = (ClientError, BotoCoreError)


def _number(value: float) -> str:
    """A DynamoDB ``N`` literal for a float (``repr`` round-trips exactly)."""
    return repr(float(value))


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _retried(exc: ClientError) -> bool:
    """Whether the driver sent the failed request more than once (botocore's retries)."""
    return int(exc.response.get("ResponseMetadata", {}).get("RetryAttempts", 0) or 0) > 0


class DynamoDocumentStore:
    """A :class:`reactor.ports.DocumentStore` on one DynamoDB table.

    Args:
        client: a boto3 DynamoDB *client* (``boto3.client("dynamodb", ...)``).
        table: the table name.
        prefix: prepended to every collection name in ``pk`` (namespaces share a table).
        clock: the application clock in epoch seconds: a callable or a
            :class:`reactor.ports.Clock` (injectable for tests); default ``None``: the system
            clock, read at call time.
        clock_skew_budget: the documented maximum clock difference between processes, in
            seconds (informational; see the module docstring).
        max_document_bytes: the largest encoded document accepted (default 400 KB minus the
            envelope); larger ones raise :class:`ContextTooLargeError` before any write.
        owns_client: close ``client`` on :meth:`close`.
    """

    def __init__(
        self,
        client: Any,
        table: str,
        *,
        prefix: str = "",
        clock: Callable[[], float] | Clock | None = None,
        clock_skew_budget: float = 1.0,
        max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
        owns_client: bool = False,
    ) -> None:
        self.client = client
        self.table = table
        self.prefix = prefix
        self.clock_skew_budget = float(clock_skew_budget)
        self.max_document_bytes = max_document_bytes
        self._clock = wall_reader(clock)
        self._owns_client = owns_client
        self._closed = False

    # -- the DocumentStore protocol -------------------------------------------------------

    def now(self) -> float:
        """The application clock in epoch seconds (DynamoDB has no server time)."""
        return self._clock()

    def read(self, collection: str, key: str) -> Versioned:
        """Read one item (strongly consistent); an expired one gives ``value=None``.

        Raises:
            StorageError: the request failed.
        """
        item = self._get(collection, key)
        if item is None:
            return Versioned(value=None, version=None)
        version = item["version"]["S"]
        exp = float(item["expires_at"]["N"]) if "expires_at" in item else None
        if exp is not None and exp <= self.now():
            return Versioned(value=None, version=version)
        return Versioned(value=json.loads(item["value"]["S"]), version=version, expires_at=exp)

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
        """Compare-and-set one item (``value=None`` deletes it).

        Args:
            collection: the reactor collection name.
            key: the item's sort key (a non-empty string).
            value: a JSON-native dict, or ``None`` to delete.
            expected_version: the version the caller read; ``None`` = physically absent.
            expires_at: epoch seconds after which the item reads as absent; ``None`` = never.
            index: an optional string :meth:`scan` can filter on (puts the item in the GSI).

        Returns:
            ``True`` when written, ``False`` when the stored version differed.

        Raises:
            ContextTooLargeError: the item would exceed 400 KB (nothing written).
            TypeError, ValueError: ``value`` is not JSON-serializable.
            StorageError: the request failed.
        """
        pk = self._pk(collection)
        keys = {"pk": {"S": pk}, "sk": {"S": key}}
        if expected_version is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            condition = {
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": {"S": expected_version}},
            }
        what = f"DynamoDB write {collection}/{key}"
        if value is None:
            return self._conditional(what, self.client.delete_item, Key=keys, **condition)
        text = json.dumps(dict(value), allow_nan=False, separators=(",", ":"))
        item: dict[str, Any] = {
            **keys,
            "value": {"S": text},
            "version": {"S": uuid.uuid4().hex},
        }
        if expires_at is not None:
            item["expires_at"] = {"N": _number(expires_at)}
        if index is not None:
            item["idx"] = {"S": index}
            item["gsi_pk"] = {"S": pk + _SEP + index}
        self._check_size(collection, key, item)
        return self._conditional(what, self.client.put_item, Item=item, **condition)

    def scan(
        self,
        collection: str,
        *,
        index: str | None = None,
        after: str | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, Mapping[str, Any]]]:
        """List unexpired items in ascending key order (``Query``, never a table ``Scan``).

        Args:
            collection: the reactor collection name.
            index: only items written with this ``index`` (queries the sparse GSI).
            after: only keys strictly greater than this one.
            limit: the maximum number of items (``<= 0`` gives ``[]``).

        Returns:
            ``(key, value)`` pairs.

        Raises:
            StorageError: the request failed.
        """
        if limit <= 0:
            return []
        pk = self._pk(collection)
        names = {"#h": "gsi_pk" if index is not None else "pk", "#exp": "expires_at"}
        values: dict[str, Any] = {
            ":h": {"S": pk + _SEP + index if index is not None else pk},
            ":now": {"N": _number(self.now())},
        }
        key_condition = "#h = :h"
        if after is not None:
            key_condition += " AND sk > :after"
            values[":after"] = {"S": after}
        request: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": key_condition,
            "FilterExpression": "attribute_not_exists(#exp) OR #exp > :now",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ProjectionExpression": "sk, #v",
        }
        names["#v"] = "value"
        if index is not None:
            request["IndexName"] = GSI_NAME
        else:
            request["ConsistentRead"] = True
        out: list[tuple[str, Mapping[str, Any]]] = []
        with translate_errors(_DRIVER_ERRORS, what=f"DynamoDB scan of {collection}"):
            while len(out) < limit:
                # Limit counts items *read* (before the expiry filter): page until filled.
                page = self.client.query(**request, Limit=min(max(limit - len(out), 25), 1000))
                for item in page.get("Items", []):
                    out.append((item["sk"]["S"], json.loads(item["value"]["S"])))
                    if len(out) >= limit:
                        break
                last = page.get("LastEvaluatedKey")
                if not last:
                    break
                request["ExclusiveStartKey"] = last
        return out

    def close(self) -> None:
        """Close the client when this store owns it; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self.client.close()

    # -- administration --------------------------------------------------------------------

    def ensure_table(self, *, wait: bool = True) -> bool:
        """Create the table (on-demand billing), its sparse GSI and the TTL setting; idempotent.

        Args:
            wait: block until the table is ``ACTIVE``.

        Returns:
            ``True`` when this call created the table, ``False`` when it existed. When the
            driver retried the request and the retry found the table (the first attempt may
            have created it before its answer was lost), the table counts as this call's if
            it was created after the call started, give or take
            :data:`CREATED_BY_RETRY_SLACK` seconds.

        Raises:
            StorageError: a request failed.
        """
        created = False
        started = self.now()
        with translate_errors(_DRIVER_ERRORS, what=f"DynamoDB create_table {self.table}"):
            try:
                self.client.create_table(
                    TableName=self.table,
                    BillingMode="PAY_PER_REQUEST",
                    AttributeDefinitions=[
                        {"AttributeName": "pk", "AttributeType": "S"},
                        {"AttributeName": "sk", "AttributeType": "S"},
                        {"AttributeName": "gsi_pk", "AttributeType": "S"},
                    ],
                    KeySchema=[
                        {"AttributeName": "pk", "KeyType": "HASH"},
                        {"AttributeName": "sk", "KeyType": "RANGE"},
                    ],
                    GlobalSecondaryIndexes=[
                        {
                            "IndexName": GSI_NAME,
                            "KeySchema": [
                                {"AttributeName": "gsi_pk", "KeyType": "HASH"},
                                {"AttributeName": "sk", "KeyType": "RANGE"},
                            ],
                            "Projection": {"ProjectionType": "ALL"},
                        }
                    ],
                )
                created = True
            except ClientError as exc:
                if _error_code(exc) != "ResourceInUseException":  # not "it exists already"
                    raise
                if _retried(exc):  # it exists: perhaps made by this call's lost first attempt
                    described = self.client.describe_table(TableName=self.table)["Table"]
                    made_at = described["CreationDateTime"].timestamp()
                    created = made_at >= started - CREATED_BY_RETRY_SLACK
        with translate_errors(_DRIVER_ERRORS, what=f"DynamoDB table setup of {self.table}"):
            if wait:
                self.client.get_waiter("table_exists").wait(
                    TableName=self.table, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
                )
            self._enable_ttl()
        return created

    def ensure_ttl(self) -> bool:
        """Check the table's TTL setting and enable it on ``expires_at`` when it is off.

        Idempotent: one ``DescribeTimeToLive``, plus one ``UpdateTimeToLive`` only when TTL is
        neither ``ENABLED`` nor ``ENABLING``. The storage factory calls it on every start, so a
        table created by hand (or whose TTL was switched off) still has expired items purged.
        Reactor never relies on the purge for correctness (every read filters on
        ``expires_at``), so a failure is logged as a warning, never raised: without TTL the
        table only grows (docs/adapters/dynamodb.md).

        Returns:
            ``True`` when TTL is enabled (or being enabled) on ``expires_at`` after the call;
            ``False`` when it could not be checked or enabled (the warning names the reason),
            or is enabled on another attribute.
        """
        try:
            status = self._enable_ttl()
        except (ClientError, BotoCoreError) as exc:
            logger.warning(
                "event=dynamodb_ttl_unavailable table=%s: cannot check or enable TTL on "
                "expires_at (expired items will not be purged): %s", self.table, exc,
            )
            return False
        if status == "other_attribute":
            logger.warning(
                "event=dynamodb_ttl_unavailable table=%s: TTL is enabled on another attribute, "
                "not expires_at (expired items will not be purged)", self.table,
            )
            return False
        return True

    def _enable_ttl(self) -> str:
        """Enable TTL on ``expires_at`` unless it is on or turning on.

        Returns:
            ``"enabled"`` (already on), ``"enabling"`` (this call or an earlier one turned it
            on) or ``"other_attribute"`` (on, for another attribute: left alone).

        Raises:
            ClientError, BotoCoreError: a request failed.
        """
        described = self.client.describe_time_to_live(TableName=self.table)
        ttl = described.get("TimeToLiveDescription", {})
        status = ttl.get("TimeToLiveStatus")
        if status in ("ENABLED", "ENABLING"):
            if ttl.get("AttributeName", "expires_at") != "expires_at":
                return "other_attribute"
            return "enabled" if status == "ENABLED" else "enabling"
        self.client.update_time_to_live(
            TableName=self.table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"},
        )
        logger.info("event=dynamodb_ttl_enabled table=%s attribute=expires_at", self.table)
        return "enabling"

    # -- probes and tests -----------------------------------------------------------------

    def raw(self, collection: str, key: str) -> RawDocument | None:
        """The physically stored item, expired or not; ``None`` when nothing is stored."""
        item = self._get(collection, key)
        if item is None:
            return None
        return RawDocument(
            value=json.loads(item["value"]["S"]),
            version=item["version"]["S"],
            expires_at=float(item["expires_at"]["N"]) if "expires_at" in item else None,
            index=item["idx"]["S"] if "idx" in item else None,
        )

    def set_expiry(self, collection: str, key: str, expires_at: float | None) -> bool:
        """Overwrite a stored item's expiry in place, keeping its version (probes).

        Returns:
            ``False`` when nothing is stored under ``key``.
        """
        request: dict[str, Any] = {
            "Key": {"pk": {"S": self._pk(collection)}, "sk": {"S": key}},
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeNames": {"#exp": "expires_at"},
        }
        if expires_at is None:
            request["UpdateExpression"] = "REMOVE #exp"
        else:
            request["UpdateExpression"] = "SET #exp = :e"
            request["ExpressionAttributeValues"] = {":e": {"N": _number(expires_at)}}
        what = f"DynamoDB set_expiry {collection}/{key}"
        return self._conditional(what, self.client.update_item, **request)

    # -- internals ------------------------------------------------------------------------

    def _pk(self, collection: str) -> str:
        return self.prefix + collection

    def _conditional(self, what: str, send: Callable[..., Any], **request: Any) -> bool:
        """Send one conditional request on the table: ``False`` when its condition failed (a
        lost race is a normal result, docs/protocol.md#conventions), else ``True``.

        Raises:
            StorageError: the request failed otherwise (named by ``what``).
        """
        with translate_errors(_DRIVER_ERRORS, what=what):
            try:
                send(TableName=self.table, **request)
            except ClientError as exc:
                if _error_code(exc) == "ConditionalCheckFailedException":
                    return False
                raise
        return True

    def _get(self, collection: str, key: str) -> dict[str, Any] | None:
        with translate_errors(_DRIVER_ERRORS, what=f"DynamoDB read {collection}/{key}"):
            reply = self.client.get_item(
                TableName=self.table,
                Key={"pk": {"S": self._pk(collection)}, "sk": {"S": key}},
                ConsistentRead=True,
            )
        item: dict[str, Any] | None = reply.get("Item")
        return item

    def _check_size(self, collection: str, key: str, item: Mapping[str, Any]) -> None:
        """Refuse a value over ``max_document_bytes`` or an item over DynamoDB's 400 KB.

        The item size is what DynamoDB counts: UTF-8 lengths of attribute names plus values
        (a number is counted as its worst case, 21 bytes).
        """
        value_size = _utf8_len(item["value"]["S"])
        size = 0
        for name, typed in item.items():
            size += _utf8_len(name)
            ((kind, raw),) = typed.items()
            size += 21 if kind == "N" else _utf8_len(str(raw))
        if value_size > self.max_document_bytes or size > MAX_ITEM_BYTES:
            limit = min(self.max_document_bytes, MAX_ITEM_BYTES)
            raise ContextTooLargeError(
                f"item {collection}/{key} is {size} bytes (value {value_size}); DynamoDB "
                f"accepts items up to {MAX_ITEM_BYTES} bytes, this store values up to "
                f"{self.max_document_bytes}",
                size_bytes=max(size, value_size),
                limit_bytes=limit,
            )
