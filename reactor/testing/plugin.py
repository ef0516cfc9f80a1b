"""The pytest plugin of the testing kit: the ``reactor_env`` fixture.

Installed with reactor (entry point ``reactor_testing`` in the ``pytest11`` group), so any
project that has reactor installed can ask for the fixture. It registers nothing else: a test
that does not ask for ``reactor_env`` runs exactly as without the plugin, and reactor itself
is imported only when a test asks for the fixture (docs/testing.md, "The pytest fixture").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from reactor.testing.environment import TestEnvironment  # deferred: pytest loads plugins early

__all__ = ["reactor_env"]


@pytest.fixture
def reactor_env() -> Iterator[TestEnvironment]:
    """A fresh :class:`reactor.testing.TestEnvironment` (queued jobs, default settings),
    active for the test and closed after it; the previous runtime is restored untouched.

    For other settings or ``jobs="inline"``, use ``with TestEnvironment(...) as env:`` in the
    test, or override this fixture in your ``conftest.py``.
    """
    from reactor.testing.environment import TestEnvironment  # deferred: pytest loads plugins early

    with TestEnvironment() as env:
        yield env
