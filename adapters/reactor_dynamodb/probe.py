"""Contract-suite probes of the DynamoDB storage and the SQS router (entry points
``reactor.probes: dynamodb`` and ``reactor.router_probes: sqs``).

The storage probe is :class:`reactor_contract.generic_probe.GenericProbe` over the adapter's
:class:`reactor_dynamodb.documents.DynamoDocumentStore`, whose ``raw`` and ``set_expiry`` read
and rewrite items directly (bypassing logical expiry, keeping the version). Imported only by
the contract suite: it needs the ``reactor_contract`` package.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reactor_contract.generic_probe import GenericProbe
from reactor_contract.probe import Probe, RouterProbe, UnsupportedBody

from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor_dynamodb.documents import DynamoDocumentStore
from reactor_dynamodb.router import SQSRouter
from reactor_dynamodb.storage import DynamoStorage

__all__ = ["DynamoCleanup", "SQSRouterProbe", "probe_for", "router_probe_for"]


def probe_for(storage: Storage) -> Probe:
    """The probe of a :class:`DynamoStorage`.

    It offers :class:`reactor_contract.probe.ClockProbe` (DynamoDB's clock is the application
    clock): ``with_clock`` builds a second ``DynamoStorage`` on the same table, prefix and
    boto3 client whose clock is the given one (docs/coordination.md#clock-skew).

    Raises:
        TypeError: ``storage`` is not a ``DynamoStorage``.
    """
    if not isinstance(storage, DynamoStorage):
        raise TypeError(f"probe_for needs a DynamoStorage, got {type(storage).__name__}")
    documents, context_ttl = storage.documents, storage.context_ttl

    def clocked(clock: Callable[[], float]) -> Storage:
        """A ``DynamoStorage`` on the same items judged by ``clock`` (shares the client)."""
        twin = DynamoDocumentStore(
            documents.client,
            documents.table,
            prefix=documents.prefix,
            clock=clock,
            clock_skew_budget=documents.clock_skew_budget,
            max_document_bytes=documents.max_document_bytes,
            owns_client=False,
        )
        return DynamoStorage(twin, context_ttl=context_ttl)

    return GenericProbe(documents, drivers=[(documents, "client")], clocked=clocked,
                       cleanup=DynamoCleanup(documents))


class DynamoCleanup:
    """Empties and lists one namespace of a shared table: the items whose ``pk`` starts with
    the store's prefix (the contract suite's ``CleanupProbe``, docs/contract-suite.md,
    "Cleanup: nothing left behind"). The table itself is the user's and stays.

    It reads with a table ``Scan`` filtered on the prefix: a test-suite tool, never used by
    the adapter.

    Args:
        documents: the store whose namespace it empties; its prefix must not be empty.

    Raises:
        ValueError: the store has no prefix (that would be the whole table).
    """

    def __init__(self, documents: DynamoDocumentStore) -> None:
        if not documents.prefix:
            raise ValueError("DynamoCleanup needs a prefixed store (it deletes by prefix)")
        self.documents = documents

    def _keys(self) -> list[dict[str, Any]]:
        docs = self.documents
        request: dict[str, Any] = {
            "TableName": docs.table,
            "FilterExpression": "begins_with(pk, :p)",
            "ExpressionAttributeValues": {":p": {"S": docs.prefix}},
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
        }
        keys: list[dict[str, Any]] = []
        while True:
            page = docs.client.scan(**request)
            keys += page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return keys
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def leftovers(self) -> list[str]:
        """``"<pk>/<sk>"`` of every item of the namespace, sorted."""
        return sorted(f"{k['pk']['S']}/{k['sk']['S']}" for k in self._keys())

    def purge_namespace(self) -> int:
        """Delete every item of the namespace, expired ones included (``BatchWriteItem``, 25
        at a time, unprocessed items sent again); returns the count."""
        keys = self._keys()
        table = self.documents.table
        for start in range(0, len(keys), 25):
            pending: dict[str, Any] = {
                table: [{"DeleteRequest": {"Key": key}} for key in keys[start : start + 25]]
            }
            while pending:
                reply = self.documents.client.batch_write_item(RequestItems=pending)
                pending = reply.get("UnprocessedItems") or {}
        return len(keys)


class SQSRouterProbe:
    """Sends raw messages to an :class:`SQSRouter`'s queue.

    Args:
        router: the router under test.
    """

    def __init__(self, router: SQSRouter) -> None:
        self.router = router

    def driver_clients(self) -> list[tuple[object, str]]:
        """``[(router.primitive, "client")]``: the boto3 SQS client of the router's queue
        (docs/contract-suite.md, "Faults injected at the driver")."""
        return [(self.router.primitive, "client")]

    def inject_raw(self, body: str | bytes) -> None:
        """Send ``body`` as a message, visible now, without validating it.

        Raises:
            UnsupportedBody: ``body`` is bytes that are not UTF-8: an SQS message body is
                Unicode text, so no producer can send them.
        """
        if isinstance(body, bytes):
            try:
                body = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UnsupportedBody(f"SQS message bodies are Unicode text: {exc}") from exc
        self.router.enqueue_raw(body)

    def purge_namespace(self) -> int:
        """Delete the router's queue and its dead-letter queue; returns how many existed."""
        deleted = 0
        for url in (self.router.queue_url, self.router.dlq_url):
            try:
                self.router.client.delete_queue(QueueUrl=url)
                deleted += 1
            except self.router.client.exceptions.QueueDoesNotExist:
                pass
        return deleted

    def leftovers(self) -> list[str]:
        """The names of the router's queues that still exist (``<name>``, ``<name>-dlq``)."""
        reply = self.router.client.list_queues(QueueNamePrefix=self.router.name)
        names = [url.rsplit("/", 1)[-1] for url in reply.get("QueueUrls", [])]
        return sorted(n for n in names if n in (self.router.name, self.router.dlq_name))


def router_probe_for(router: Router) -> RouterProbe:
    """The router probe of an :class:`SQSRouter`.

    Raises:
        TypeError: ``router`` is not an ``SQSRouter``.
    """
    if not isinstance(router, SQSRouter):
        raise TypeError(f"router_probe_for needs an SQSRouter, got {type(router).__name__}")
    return SQSRouterProbe(router)
