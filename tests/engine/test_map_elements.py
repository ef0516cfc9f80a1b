"""``RunView.map_elements`` and ``reactor.runs.map_element_page``: a map step's element runs,
paged (docs/fan_out.md, "Listing a map's elements"), for inline and fan-out maps."""

from __future__ import annotations

from typing import Any

import pytest

from reactor import FanOut, Input, Reactor, element, input, map_step, step
from reactor.config import Runtime
from reactor.engine.api import load_run
from reactor.engine.env import make_env
from reactor.runs import (
    MapElement,
    MapElementPage,
    MapElementsArgumentError,
    MapInfo,
    RunView,
    map_element_page,
)


class Tile(Reactor, name="test_map_elements.tile"):
    n = Input(int)

    @step(n=input("n"))
    def square(inputs: Any, ctx: Any) -> int:
        if inputs.n < 0:
            raise ValueError(f"negative {inputs.n}")
        return int(inputs.n) ** 2

    returns = "square"


class Mosaic(Reactor, name="test_map_elements.mosaic"):
    items = Input(list)

    inline = map_step(Tile, source=input("items"), args={"n": element("inline")}, atomic=False)
    spread = map_step(Tile, source=input("items"), args={"n": element("spread")},
                      atomic=False, fan_out=FanOut(batch_size=2))


ITEMS = [1, -2, 3, 4, -5, 6, 7]


@pytest.fixture
def view(runtime: Runtime) -> RunView:
    done = Mosaic.run(items=ITEMS)
    return Mosaic.find(done.run_id)


def _summary(page: MapElementPage) -> list[tuple[int, str]]:
    return [(e.index, e.outcome) for e in page.elements]


@pytest.mark.parametrize("step_name", ["inline", "spread"])
def test_a_view_names_each_element_run_with_its_index(view: RunView, step_name: str) -> None:
    assert set(view.maps) == {"inline", "spread"}
    assert view.maps["spread"].fan_out and view.maps["spread"].count == len(ITEMS)
    page = view.map_elements(step_name, limit=len(ITEMS))
    assert _summary(page) == [
        (i, "failed" if n < 0 else "succeeded") for i, n in enumerate(ITEMS)
    ]
    assert page.next_offset is None
    for item, found in zip(ITEMS, page.elements, strict=True):
        assert found.run_id is not None
        element_view = Tile.find(found.run_id)
        assert element_view.inputs == {"n": item}
        assert element_view.map_metadata is not None
        assert element_view.map_metadata["index"] == found.index
        assert element_view.map_membership is not None
        assert element_view.map_membership.index == found.index
        assert element_view.map_membership.map_step == step_name
    failed = [e for e in page.elements if e.outcome == "failed"]
    assert [e.error for e in failed] == ["negative -2", "negative -5"]


@pytest.mark.parametrize("step_name", ["inline", "spread"])
def test_pages_follow_next_offset_with_and_without_an_outcome(view: RunView,
                                                              step_name: str) -> None:
    seen: list[int] = []
    offset: int | None = 0
    while offset is not None:
        page = view.map_elements(step_name, offset=offset, limit=3)
        assert len(page.elements) <= 3
        seen.extend(e.index for e in page.elements)
        offset = page.next_offset
    assert seen == list(range(len(ITEMS)))
    first = view.map_elements(step_name, outcome="succeeded", limit=2)
    assert [e.index for e in first.elements] == [0, 2] and first.next_offset == 2
    rest = view.map_elements(step_name, outcome="succeeded", offset=2, limit=10)
    assert [e.index for e in rest.elements] == [3, 5, 6] and rest.next_offset is None
    assert view.map_elements(step_name, outcome="halted").elements == ()


def test_a_fan_out_element_without_a_slot_is_pending(runtime: Runtime) -> None:
    info = MapInfo(map_id="never-started", fan_out=True, count=2)
    page = map_element_page(runtime.storage, info)
    assert [(e.index, e.outcome, e.error) for e in page.elements] == [
        (0, "pending", None), (1, "pending", None),
    ]
    assert all(isinstance(e, MapElement) and e.run_id for e in page.elements)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"step": "nope"}, "step"),
    ({"step": "inline", "outcome": "won"}, "outcome"),
    ({"step": "inline", "offset": -1}, "offset"),
    ({"step": "inline", "limit": 0}, "limit"),
    ({"step": "inline", "limit": 1001}, "limit"),
])
def test_unusable_arguments_are_refused_naming_the_field(view: RunView, kwargs: dict[str, Any],
                                                         field: str) -> None:
    with pytest.raises(MapElementsArgumentError) as raised:
        view.map_elements(**kwargs)
    assert raised.value.field == field
    assert field in str(raised.value)


def test_a_view_built_without_storage_says_so(runtime: Runtime) -> None:
    done = Mosaic.run(items=[1])
    ctx = load_run(None, done.run_id, make_env(runtime), open_secrets=False)
    bare = RunView.from_context(ctx)  # the context as find() loads it, without a reader
    assert set(bare.maps) == {"inline", "spread"}
    with pytest.raises(MapElementsArgumentError) as raised:
        bare.map_elements("inline")
    assert raised.value.field == "view"
