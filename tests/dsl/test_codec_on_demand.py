"""A reactor's types are decodable in this process from the moment its class exists, before any
run registers them, and a registration of the user's own still wins (docs/concepts.md,
"Decisions"). The cross-process behaviour is tested in
tests/engine/test_stored_types_readable.py."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from reactor import DeserializationError, Input, Reactor, input, interrupt, registry, step
from reactor.model import codec


class Colour(enum.Enum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Point:
    x: int


class Verdict(BaseModel):
    ok: bool


@pytest.fixture
def cleanup() -> Iterator[list[type[Any]]]:
    """Types to unregister from the codec after the test (the reactors are dropped too)."""
    types: list[type[Any]] = []
    before = set(registry.names())
    yield types
    for cls in types:
        codec.unregister(cls)
    for name in set(registry.names()) - before:
        registry.unregister(name)


def _stored(cls: type[Any], payload: Any) -> str:
    """The codec text of a value of ``cls`` stored under its default tag."""
    tag = f"{cls.__module__}.{cls.__qualname__}"  # the default tag
    return f'{{"__t": "{tag}", "v": {payload}}}'


def test_a_value_of_each_type_decodes_before_the_first_run(cleanup: list[type[Any]]) -> None:
    cleanup.extend([Colour, Point, Verdict])

    class Paint(Reactor):
        colour = Input(Colour)
        at = Input(list[Point])
        verdict = interrupt(schema=Verdict)
        done = step(lambda inputs, ctx: None, wait_for="verdict")

    assert not any(codec.is_registered(t) for t in (Colour, Point, Verdict))  # no run yet
    assert codec.loads(_stored(Colour, '"red"')) is Colour.RED
    assert codec.loads(_stored(Point, '{"x": 1}')) == Point(1)
    assert codec.loads(_stored(Verdict, '{"ok": true}')) == Verdict(ok=True)
    assert codec.registered_tag(Verdict) == f"{__name__}.Verdict"


def test_a_registration_of_the_users_own_made_after_the_class_wins(
    cleanup: list[type[Any]],
) -> None:
    cleanup.append(Verdict)

    class Judge(Reactor):
        verdict = Input(Verdict)
        done = step(lambda inputs, ctx: inputs.v.ok, v=input("verdict"))

    codec.register_model(Verdict, tag="mine.Verdict")  # no "already registered" error
    assert codec.encode(Verdict(ok=True)) == {"__t": "mine.Verdict", "v": {"ok": True}}
    with pytest.raises(DeserializationError, match="unknown codec tag"):
        codec.loads(_stored(Verdict, '{"ok": true}'))  # the default tag is not taken as well
    assert codec.registered_tag(Verdict) == "mine.Verdict"
    assert Judge.run(verdict={"ok": True}).value == {"done": True}

