"""The optional storage operations and router attribute the engine checks with ``declares``
(docs/protocol.md, "Optional storage operations"; reactor/ports/capabilities.py): none is a
member of a required protocol, and the built-in backends declare every one."""

from __future__ import annotations

from typing import Any

import pytest

from reactor.memory import LocalRouter, MemoryStorage
from reactor.ports.capabilities import (
    AppendsContexts,
    HasVisibilityTimeout,
    InspectsMapRollbacks,
    InspectsMaps,
    KeepsSweepCursors,
    ResetsSemaphores,
    declares,
)
from reactor.ports.storage import ContextStore, MapRollbackStore, MapStore, SemaphoreStore

#: (required protocol, the optional protocol its optional members moved to).
MOVED = [
    (ContextStore, AppendsContexts),
    (MapStore, InspectsMaps),
    (MapRollbackStore, InspectsMapRollbacks),
    (SemaphoreStore, ResetsSemaphores),
]


def _members(protocol: Any) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


@pytest.mark.parametrize(("required", "optional"), MOVED)
def test_an_optional_operation_is_no_member_of_the_required_protocol(
    required: Any, optional: Any
) -> None:
    assert _members(optional)
    assert not _members(optional) & _members(required)


def test_the_memory_backends_declare_every_optional_operation() -> None:
    storage = MemoryStorage()
    router = LocalRouter(workers=0)
    try:
        assert declares(storage.contexts, AppendsContexts)
        assert declares(storage.maps, InspectsMaps)
        assert declares(storage.map_rollbacks, InspectsMapRollbacks)
        assert declares(storage.semaphores, ResetsSemaphores)
        assert declares(storage, KeepsSweepCursors)
        assert declares(router, HasVisibilityTimeout)
    finally:
        router.close()
        storage.close()


def test_a_store_without_them_still_conforms_to_the_required_protocols() -> None:
    class Bare:
        """Only what the required protocol asks of a semaphore store."""

        def acquire(self, key: str, holder: str, limit: int, lease: float) -> bool:
            return True

        def release(self, key: str, holder: str) -> bool:
            return True

        def extend(self, key: str, holder: str, lease: float) -> bool:
            return True

        def state(self, key: str) -> None:
            return None

    assert isinstance(Bare(), SemaphoreStore)
    assert not declares(Bare(), ResetsSemaphores)
