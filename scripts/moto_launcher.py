"""Start moto's server for the tests, with DynamoDB requests applied one at a time.

moto checks a DynamoDB ``ConditionExpression`` and then stores the item without a lock, so two
racing conditional writes can both succeed on its threaded server — something real DynamoDB
never allows (conditional writes are atomic per item). The tests must assert AWS behaviour,
not moto's, so this launcher serialises DynamoDB requests (``X-Amz-Target: DynamoDB_*``) with
one lock while SQS and everything else stay concurrent (SQS long polls must not block the
server). Test infrastructure only.

Usage: python scripts/moto_launcher.py HOST PORT
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

_dynamodb = threading.Lock()


class SerialiseDynamoDB:
    """WSGI middleware: one DynamoDB request at a time (its whole response included)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if not str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith("DynamoDB"):
            return list(self.app(environ, start_response))
        with _dynamodb:
            return list(self.app(environ, start_response))


def main() -> None:
    host, port = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(
        host,
        port,
        SerialiseDynamoDB(app),
        threaded=True,
        request_handler=MotoRequestHandler,
    )


if __name__ == "__main__":
    main()
