"""Start moto's server for the tests, with DynamoDB requests and SQS short polls applied one
at a time.

moto checks a DynamoDB ``ConditionExpression`` and then stores the item without a lock, so two
racing conditional writes can both succeed on its threaded server — something real DynamoDB
never allows (conditional writes are atomic per item). Likewise moto's ``ReceiveMessage`` reads
a message's visibility and then marks it received without a lock, so two concurrent receives
can both take one message — which SQS avoids (a received message stays hidden from other
receivers for its visibility timeout, bar the rare duplicate of a standard queue). The tests
must assert AWS behaviour, not moto's, so this launcher serialises DynamoDB requests
(``X-Amz-Target: DynamoDB_*``) with one lock and SQS receives that do not wait
(``WaitTimeSeconds`` 0: the dead-letter scans) with another, while long polls and everything
else stay concurrent (a long poll must not block the server). Test infrastructure only.

Usage: python scripts/moto_launcher.py HOST PORT
"""

from __future__ import annotations

import io
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

_dynamodb = threading.Lock()
_sqs_short_receives = threading.Lock()


def _short_receive(environ: dict[str, Any]) -> bool:
    """Whether the request is an SQS ``ReceiveMessage`` that does not wait (its body is read
    and put back for the app)."""
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target != "AmazonSQS.ReceiveMessage":
        return False
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    environ["wsgi.input"] = io.BytesIO(body)
    try:
        wait = json.loads(body or b"{}").get("WaitTimeSeconds", 0)
    except ValueError:
        return False
    return not wait


class SerialiseAtomicRequests:
    """WSGI middleware: one DynamoDB request at a time, and one SQS receive that does not wait
    at a time (each with its whole response)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB"):
            with _dynamodb:
                return list(self.app(environ, start_response))
        if _short_receive(environ):
            with _sqs_short_receives:
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
