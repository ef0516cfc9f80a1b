"""Suite-wide pytest configuration: service URLs, AWS dummy credentials, hypothesis profiles.

Services are started by ``scripts/test`` (see ``tests/services.py``). A test asks for one with
the ``service_url`` fixture::

    def test_ping(service_url):
        client = redis.Redis.from_url(service_url("redis"))

A missing service fails the test (``pytest.fail``) with a message naming ``scripts/test``; it is
never skipped, in CI or elsewhere.

The suite is hermetic: before any test module is imported, every ``REACTOR_*`` variable that is
not one of the suite's own knobs (``REACTOR_TEST_*``, ``tests.services.SUITE_VARIABLES``) is
removed from this process's environment, so neither the tests nor the worker processes they
start see a developer's ``REACTOR_STORAGE_URL``, ``REACTOR_SECRET_KEYS`` or ``REACTOR_<SETTING>``
(docs/testing.md, "Running reactor's own suite").
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings

from tests.services import ServiceUnavailable, clear_user_configuration, mongodb_urls
from tests.services import service_url as _service_url

# A developer's reactor configuration never reaches a test (nor a process a test starts).
clear_user_configuration()

# The suite only ever talks to moto: never let a developer's real AWS identity leak in.
os.environ.update(
    AWS_ACCESS_KEY_ID="testing",
    AWS_SECRET_ACCESS_KEY="testing",
    AWS_DEFAULT_REGION="us-east-1",
    AWS_EC2_METADATA_DISABLED="true",
)
for _var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(_var, None)

# No deadlines: a loaded 2-core CI machine must not turn slow examples into failures.
settings.register_profile("dev", deadline=None)
settings.register_profile(
    "ci", deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")


@pytest.fixture(scope="session")
def service_url() -> Callable[[str], str]:
    """Returns a function ``name -> URL`` of a test service (keys of ``tests.services.SERVICES``).

    The function calls ``pytest.fail`` (never ``skip``) when the service's variable is missing.
    """

    def lookup(name: str) -> str:
        try:
            return _service_url(name)
        except ServiceUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)

    return lookup


@pytest.fixture(scope="session")
def mongodb_service_urls() -> list[str]:
    """Every MongoDB to test against: SecantusDB, plus ``$REACTOR_TEST_MONGODB_URL`` when set."""
    try:
        return mongodb_urls()
    except ServiceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
