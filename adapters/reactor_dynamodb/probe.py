"""Contract-suite probes of the DynamoDB storage and the SQS router (entry points
``reactor.probes: dynamodb`` and ``reactor.router_probes: sqs``).

The storage probe is :class:`reactor_contract.generic_probe.GenericProbe` over the adapter's
:class:`reactor_dynamodb.documents.DynamoDocumentStore`, whose ``raw`` and ``set_expiry`` read
and rewrite items directly (bypassing logical expiry, keeping the version). Imported only by
the contract suite: it needs the ``reactor_contract`` package.
"""

from __future__ import annotations

from collections.abc import Callable

from reactor_contract.generic_probe import GenericProbe
from reactor_contract.probe import Probe, RouterProbe, UnsupportedBody

from reactor.ports.router import Router
from reactor.ports.storage import Storage
from reactor_dynamodb.documents import DynamoDocumentStore
from reactor_dynamodb.router import SQSRouter
from reactor_dynamodb.storage import DynamoStorage

__all__ = ["SQSRouterProbe", "probe_for", "router_probe_for"]


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

    return GenericProbe(documents, clocked=clocked)


class SQSRouterProbe:
    """Sends raw messages to an :class:`SQSRouter`'s queue.

    Args:
        router: the router under test.
    """

    def __init__(self, router: SQSRouter) -> None:
        self.router = router

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


def router_probe_for(router: Router) -> RouterProbe:
    """The router probe of an :class:`SQSRouter`.

    Raises:
        TypeError: ``router`` is not an ``SQSRouter``.
    """
    if not isinstance(router, SQSRouter):
        raise TypeError(f"router_probe_for needs an SQSRouter, got {type(router).__name__}")
    return SQSRouterProbe(router)
