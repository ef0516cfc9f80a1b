"""A reactor's suspend switch as this release stores it (docs/operations.md, "Suspend and
unsuspend"): the lock ``@suspended_reactor:<reactor>`` whose owner text is the switch's
suspension. ``stored/reactor_suspension.json`` holds the key and owner texts this release
wrote; never regenerate it: later releases must read the switch an earlier one set, and clear
it.
"""

from __future__ import annotations

import json
from pathlib import Path

from reactor.engine.env import make_env
from reactor.engine.run_control import reactor_suspension
from reactor.model.engine_state import Suspension
from reactor.model.keys import reactor_suspension_key
from reactor.testing import TestEnvironment

STORED: dict[str, str] = json.loads(
    (Path(__file__).parent / "stored" / "reactor_suspension.json").read_text(encoding="utf-8")
)


def test_the_key_and_owner_texts_are_read_and_written_as_stored() -> None:
    assert reactor_suspension_key("shop.checkout") == STORED["lock_key"]
    switch = Suspension("payment gateway incident", "alice", 1700000000.5)
    assert Suspension.decode(STORED["owner"]) == switch
    assert switch.encode() == STORED["owner"]
    assert Suspension.decode(STORED["owner_unset"]) == Suspension(None, None, 1700000000.0)


def test_a_stored_switch_is_seen_and_cleared() -> None:
    with TestEnvironment() as test:
        env, storage = make_env(test.runtime), test.storage
        assert storage.locks.acquire(STORED["lock_key"], STORED["owner"], None)
        seen = reactor_suspension.read(env, "shop.checkout")
        assert seen is not None
        assert (seen.reason, seen.by) == ("payment gateway incident", "alice")
        assert reactor_suspension.switch_off(env, "shop.checkout") == seen
        assert storage.locks.info(STORED["lock_key"]) is None
