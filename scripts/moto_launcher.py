"""Start moto's server for the tests, with DynamoDB requests and each pass of an SQS receive
applied one at a time.

moto checks a DynamoDB ``ConditionExpression`` and then stores the item without a lock, so two
racing conditional writes can both succeed on its threaded server — something real DynamoDB
never allows (conditional writes are atomic per item). Likewise moto's ``ReceiveMessage`` reads
a message's visibility and then marks it received without a lock, so two concurrent receives
can both take one message with the same receive count — which SQS avoids (a received message
stays hidden from other receivers for its visibility timeout, bar the rare duplicate of a
standard queue). The tests must assert AWS behaviour, not moto's, so this launcher serialises
DynamoDB requests (``X-Amz-Target: DynamoDB_*``) with one lock, and runs every SQS receive as
passes that do not wait, each under another lock, with the waits of a long poll between them
outside it (a long poll must not block the server; the first version locked only receives
that do not wait, and two long polls among eight racing receivers on a loaded machine took one
message together). Test infrastructure only.

Usage: python scripts/moto_launcher.py HOST PORT
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from moto.sqs.models import SQSBackend
from werkzeug.serving import run_simple

_dynamodb = threading.Lock()
_sqs_receives = threading.Lock()
_receive_message = SQSBackend.receive_message


def _atomic_receive_message(
    self: SQSBackend,
    queue_name: str,
    count: int,
    wait_seconds_timeout: int,
    visibility_timeout: int,
    message_attribute_names: list[str] | None = None,
) -> list[Any]:
    """moto's ``receive_message``, one non-waiting pass at a time under :data:`_sqs_receives`;
    a long poll waits for messages between passes, outside the lock, until its deadline."""
    deadline = time.monotonic() + (wait_seconds_timeout or 0)
    while True:
        with _sqs_receives:
            got = _receive_message(self, queue_name, count, 0, visibility_timeout,
                                   message_attribute_names)
        if got or time.monotonic() >= deadline:
            return list(got)
        self.get_queue(queue_name).wait_for_messages(1)
        time.sleep(0.005)  # visible messages another receiver takes first: do not spin


SQSBackend.receive_message = _atomic_receive_message  # type: ignore[method-assign]


class SerialiseAtomicRequests:
    """WSGI middleware: one DynamoDB request at a time (each with its whole response)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB"):
            with _dynamodb:
                return list(self.app(environ, start_response))
        return list(self.app(environ, start_response))


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        host,
        port,
        SerialiseAtomicRequests(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
