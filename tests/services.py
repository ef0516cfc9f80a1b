"""Where the test services are: URLs exported by ``scripts/test``.

``scripts/test`` starts every backend the suite needs on free loopback ports and exports one
environment variable per service (see :data:`SERVICES`). Tests never start servers themselves and
never fall back to a default port (a machine may run its own Redis on 6379, which the suite must
not touch). A test that needs a service and does not find its variable FAILS, it is never
skipped: a skipped adapter test is a green CI that tested nothing.

Use the ``service_url`` fixture from ``tests/conftest.py`` in tests; this module is the plain
logic behind it, importable from tests and plugins (``from tests.services import ...``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from urllib.parse import urlsplit

__all__ = [
    "SERVICES",
    "SUITE_PREFIX",
    "SUITE_VARIABLES",
    "ServiceUnavailable",
    "clear_user_configuration",
    "cluster_startup_node",
    "is_suite_variable",
    "mongodb_urls",
    "service_url",
    "services_required",
]

#: The prefix of the suite's own knobs (service URLs, ``REACTOR_TEST_JOBS``, ...): kept.
SUITE_PREFIX = "REACTOR_TEST_"

#: The suite's other own variables, kept too: ``REACTOR_SKIP_INSTALL`` (scripts/_setup.sh),
#: ``REACTOR_REQUIRE_SERVICES`` (this module) and ``REACTOR_SCREENSHOTS_DIR`` (where the
#: dashboard's browser tests put their pictures). ``scripts/test`` keeps the same list.
SUITE_VARIABLES: frozenset[str] = frozenset(
    {"REACTOR_SKIP_INSTALL", "REACTOR_REQUIRE_SERVICES", "REACTOR_SCREENSHOTS_DIR"}
)

SERVICES: Mapping[str, str] = {
    "redis": "REACTOR_TEST_REDIS_URL",
    "redis_cluster": "REACTOR_TEST_REDIS_CLUSTER_URL",
    "moto": "REACTOR_TEST_MOTO_URL",
    "mongodb_wire": "REACTOR_TEST_MONGODB_WIRE_URL",
    "mongodb": "REACTOR_TEST_MONGODB_URL",
    "postgres": "REACTOR_TEST_POSTGRES_URL",
    "postgres_restart": "REACTOR_TEST_POSTGRES_RESTART",
    "moto_pid": "REACTOR_TEST_MOTO_PID",
    "mongodb_wire_pid": "REACTOR_TEST_MONGODB_WIRE_PID",
}
"""Service name -> environment variable holding its URL (or, for ``postgres_restart``, a
command).

* ``redis``: ``redis://127.0.0.1:PORT/0``, a standalone redis-server.
* ``redis_cluster``: ``redis+cluster://127.0.0.1:PORT``, one node of a 3-master Redis Cluster.
* ``moto``: ``http://127.0.0.1:PORT``, moto's server (DynamoDB and SQS; dummy credentials).
* ``mongodb_wire``: ``mongodb://127.0.0.1:PORT/?directConnection=true``, SecantusDB.
* ``mongodb``: a real MongoDB, only when the user exports it (never started by scripts/test).
* ``postgres``: ``postgresql://reactor@127.0.0.1:PORT/postgres``, a private PostgreSQL cluster
  (trust auth; never the system instance on 5432).
* ``postgres_restart``: a shell command that restarts that cluster (``pg_ctl -m fast -w
  restart`` with the options it was started with, as ``postgres`` when root) and returns once
  it accepts connections again; the order-fulfilment soak's ``--restart-command``.
* ``moto_pid``, ``mongodb_wire_pid``: the process id of that moto or SecantusDB server (the
  order-fulfilment soak's ``--server-pid``: it SIGSTOPs the server to pause it).
"""


class ServiceUnavailable(LookupError):
    """A test needs a service whose URL variable is not set.

    Attributes:
        name: the service name (a key of :data:`SERVICES`).
        variable: the environment variable that was missing.
    """

    def __init__(self, name: str, variable: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.variable = variable


def is_suite_variable(name: str) -> bool:
    """Tells whether environment variable ``name`` is one of the suite's own knobs.

    Args:
        name: an environment variable's name.

    Returns:
        True for ``REACTOR_TEST_*`` and :data:`SUITE_VARIABLES`; False for every other
        ``REACTOR_*`` name (a user's reactor configuration) and for names outside ``REACTOR_``.
    """
    return name.startswith(SUITE_PREFIX) or name in SUITE_VARIABLES


def clear_user_configuration(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Removes every ``REACTOR_*`` variable that is not one of the suite's own knobs.

    The suite is hermetic (docs/testing.md, "Running reactor's own suite"): reactor reads its
    configuration from ``REACTOR_STORAGE_URL``, ``REACTOR_ROUTER_URL``, ``REACTOR_SECRET_KEYS``,
    ``REACTOR_MIDDLEWARE`` and ``REACTOR_<SETTING>`` (docs/workers.md, "Running workers"), so
    a developer's shell must not reach the tests, nor the worker processes they start (which
    inherit this process's environment). ``tests/conftest.py`` calls it before any test runs;
    ``scripts/test`` does the same in shell before it runs anything.

    Args:
        environ: the environment to clean, in place (default ``os.environ``).

    Returns:
        The names removed, sorted.
    """
    env = os.environ if environ is None else environ
    removed = sorted(
        name for name in env if name.startswith("REACTOR_") and not is_suite_variable(name)
    )
    for name in removed:
        del env[name]
    return removed


def services_required(environ: Mapping[str, str] | None = None) -> bool:
    """Tells whether this is a run where every service must be present (CI or scripts/test).

    Args:
        environ: the environment to read (default ``os.environ``).

    Returns:
        True when ``CI=true`` or ``REACTOR_REQUIRE_SERVICES=1``.
    """
    env = os.environ if environ is None else environ
    return env.get("CI", "").lower() == "true" or env.get("REACTOR_REQUIRE_SERVICES") == "1"


def service_url(name: str, environ: Mapping[str, str] | None = None) -> str:
    """Returns the URL of test service ``name``.

    Args:
        name: a key of :data:`SERVICES` (``"redis"``, ``"redis_cluster"``, ``"moto"``,
            ``"mongodb_wire"``, ``"mongodb"``, ``"postgres"``, ``"postgres_restart"``,
            ``"moto_pid"``, ``"mongodb_wire_pid"``).
        environ: the environment to read (default ``os.environ``).

    Returns:
        The URL, exactly as exported.

    Raises:
        KeyError: ``name`` is not a known service.
        ServiceUnavailable: its variable is unset or empty; the message says how to get it.
    """
    variable = SERVICES[name]
    env = os.environ if environ is None else environ
    url = env.get(variable, "").strip()
    if url:
        return url
    if name == "mongodb":
        hint = "it is optional: export it to test against a real MongoDB as well"
    elif services_required(env):
        hint = "scripts/test exports it; this run requires every service"
        hint += " (CI=true or REACTOR_REQUIRE_SERVICES=1)"
    else:
        hint = "run the suite with scripts/test, which starts the services and exports it"
    message = f"test service {name!r} unavailable: ${variable} is not set ({hint})"
    raise ServiceUnavailable(name, variable, message)


def mongodb_urls(environ: Mapping[str, str] | None = None) -> list[str]:
    """Returns every MongoDB to test against: the wire server, plus a real one when set.

    Args:
        environ: the environment to read (default ``os.environ``).

    Returns:
        ``[REACTOR_TEST_MONGODB_WIRE_URL]``, followed by ``REACTOR_TEST_MONGODB_URL`` when set.

    Raises:
        ServiceUnavailable: the wire server's URL is missing.
    """
    urls = [service_url("mongodb_wire", environ)]
    try:
        urls.append(service_url("mongodb", environ))
    except ServiceUnavailable:
        pass
    return urls


def cluster_startup_node(url: str) -> tuple[str, int]:
    """Splits a ``redis+cluster://HOST:PORT`` URL into the host and port of a startup node.

    Args:
        url: the cluster URL (``REACTOR_TEST_REDIS_CLUSTER_URL``).

    Returns:
        ``(host, port)``.

    Raises:
        ValueError: the URL has another scheme or no port.
    """
    parts = urlsplit(url)
    if parts.scheme != "redis+cluster" or parts.hostname is None or parts.port is None:
        raise ValueError(f"not a redis+cluster://HOST:PORT URL: {url!r}")
    return parts.hostname, parts.port
