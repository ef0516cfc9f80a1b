"""A reactor definition's fingerprint and version label (docs/deploys.md, "Fingerprints"):
what changes it (the shape a stored run depends on) and what does not (code, retries, time
limits), its stability across processes, and the stamp every run stores."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from reactor import FanOut, Input, Reactor, Retries, Step, input, result, step
from reactor.dsl import compose, element, map_step
from reactor.dsl.fingerprint import definition_id, fingerprint, shape
from reactor.errors import DefinitionError
from reactor.model.engine_state import DefinitionStamp


def _one(inputs: Any, ctx: Any) -> int:
    return 1


def _two(inputs: Any, ctx: Any) -> int:
    return 2


def _undo(result: Any, inputs: Any, ctx: Any) -> None:
    return None


def _build(name: str = "fp.Order", **overrides: Any) -> type[Reactor]:
    """A two-step reactor; ``overrides`` replace namespace entries (``None`` removes one)."""
    namespace: dict[str, Any] = {
        "__module__": __name__,
        "order": Input(str),
        "amount": Input(int),
        "reserve": step(_one, order=input("order")),
        "charge": step(_one, amount=input("amount"), reservation=result("reserve")),
        "returns": "charge",
    }
    for key, value in overrides.items():
        if value is None:
            namespace.pop(key, None)
        else:
            namespace[key] = value
    return type("Order", (Reactor,), namespace, name=name)


BASE = fingerprint(_build().definition)


def test_the_same_shape_declared_twice_has_the_same_fingerprint() -> None:
    assert fingerprint(_build().definition) == BASE
    assert len(BASE) == 16 and int(BASE, 16) >= 0


def test_the_fingerprint_is_the_same_in_another_process() -> None:
    """No hash randomization or memory addresses in the shape: a worker process started
    with another PYTHONHASHSEED computes the same fingerprint."""
    code = (
        "from tests.dsl.test_fingerprint import _build\n"
        "from reactor.dsl.fingerprint import fingerprint\n"
        "print(fingerprint(_build().definition))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == BASE


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"ship": step(_one, order=input("order"))}, id="a step added"),
        pytest.param({"charge": None, "returns": "reserve"}, id="a step removed"),
        pytest.param({"charge": None, "pay": step(_one, amount=input("amount")),
                      "returns": "pay"}, id="a step renamed"),
        pytest.param({"charge": step(_one, amount=input("order"),
                                     reservation=result("reserve"))}, id="wiring to another input"),
        pytest.param({"charge": step(_one, amount=input("amount"),
                                     reservation=result("reserve", "id"))}, id="a result path"),
        pytest.param({"charge": step(_one, amount=input("amount"))}, id="an argument dropped"),
        pytest.param({"returns": "reserve"}, id="returns"),
        pytest.param({"reserve": step(_one, order=input("order"), wait_for=["charge"]),
                      "charge": step(_one, amount=input("amount"))}, id="wait_for"),
    ],
)
def test_a_change_of_shape_changes_the_fingerprint(change: dict[str, Any]) -> None:
    assert fingerprint(_build(**change).definition) != BASE


def test_an_undo_added_changes_the_fingerprint() -> None:
    reserve = step(_one, order=input("order"))
    reserve.undo(_undo)
    assert fingerprint(_build(reserve=reserve).definition) != BASE


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"reserve": step(_two, order=input("order"))}, id="another body"),
        pytest.param({"reserve": step(_one, order=input("order"),
                                      retries=Retries(max_attempts=5))}, id="retries"),
        pytest.param({"deadline": 60}, id="a reactor deadline"),
        pytest.param({"version": "2027-01"}, id="the version label"),
    ],
)
def test_a_code_change_keeps_the_fingerprint(change: dict[str, Any]) -> None:
    assert fingerprint(_build(**change).definition) == BASE


def test_a_child_reactor_change_changes_the_parent_fingerprint() -> None:
    class Child(Reactor, name="fp.Child"):
        order = Input(str)
        pack = step(_one, order=input("order"))

    class ChildV2(Reactor, name="fp.ChildV2"):
        order = Input(str)
        pack = step(_one, order=input("order"))
        label = step(_one, order=input("order"))

    def parent(child: type[Reactor]) -> str:
        namespace: dict[str, Any] = {
            "__module__": __name__, "order": Input(str),
            "fulfil": compose(child, order=input("order")),
        }
        return fingerprint(type("Parent", (Reactor,), namespace, name="fp.Parent").definition)

    assert parent(Child) != parent(ChildV2)
    assert shape(_build().definition)["steps"][0][0] == "reserve"


def test_a_map_s_element_reactor_is_part_of_its_shape() -> None:
    class Line(Reactor, name="fp.Line"):
        sku = Input(str)
        pick = step(_one, sku=input("sku"))

    class Order(Reactor, name="fp.MapOrder"):
        skus = Input(list)
        lines = map_step(Line, source=input("skus"), args={"sku": element("lines")})

    steps = dict(shape(Order.definition)["steps"])
    assert steps["lines"]["kind"] == "map"
    assert steps["lines"]["child"] == fingerprint(Line.definition)
    assert steps["lines"]["source"][0] == "input"


def test_a_version_label_is_kept_beside_the_fingerprint() -> None:
    labelled = _build(version="2026-12")
    assert labelled.definition.version == "2026-12"
    assert definition_id(labelled.definition) == DefinitionStamp(BASE, "2026-12")
    assert definition_id(_build().definition) == DefinitionStamp(BASE, None)


@pytest.mark.parametrize("bad", ["", "   ", "x" * 201, "a\nb", 7, 1.5, ["v1"]])
def test_a_bad_version_label_is_a_definition_error_naming_it(bad: Any) -> None:
    with pytest.raises(DefinitionError, match="version must be"):
        _build(version=bad)


def test_an_input_named_version_stays_an_input() -> None:
    class Versioned(Reactor, name="fp.Versioned"):
        version = Input(str)
        echo = step(_one, v=input("version"))

    assert "version" in Versioned.definition.contract.names
    assert Versioned.definition.version is None
    assert Versioned.run(version="v9").value == {"echo": 1}


def test_every_run_stores_the_definition_it_started_under() -> None:
    labelled = _build(name="fp.Stored", version="2026-12")
    outcome = labelled.run(order="o-1", amount=3)
    view = labelled.find(outcome.run_id or "")
    assert view is not None
    assert view.definition == definition_id(labelled.definition)
    assert view.definition.version == "2026-12"


def test_a_class_step_and_a_function_step_with_an_undo_differ() -> None:
    class Reserve(Step):
        order = Input(str)

        def run(self) -> int:
            return 1

        def undo(self) -> None:
            return None

    with_class = _build(reserve=step(Reserve, order=input("order")))
    reserve = step(_one, order=input("order"))
    reserve.undo(_undo)
    assert fingerprint(with_class.definition) == fingerprint(_build(reserve=reserve).definition)


@pytest.mark.parametrize("fan_out", [None, FanOut(batch_size=1)], ids=["inline", "fan-out"])
def test_a_map_element_stores_its_element_reactor_s_definition(fan_out: FanOut | None) -> None:
    class Pick(Reactor, name="fp.Pick"):
        version = "picker-2"
        sku = Input(str)
        pick = step(_one, sku=input("sku"))

    class Picking(Reactor, name="fp.Picking"):
        skus = Input(list)
        lines = map_step(Pick, source=input("skus"), args={"sku": element("lines")},
                         fan_out=fan_out)

    outcome = Picking.run(skus=["a", "b"])
    view = Picking.find(outcome.run_id or "")
    assert view is not None and view.definition == definition_id(Picking.definition)
    page = view.map_elements("lines")
    assert len(page.elements) == 2
    for entry in page.elements:
        element_view = Pick.find(entry.run_id)
        assert element_view is not None
        assert element_view.definition == DefinitionStamp(fingerprint(Pick.definition), "picker-2")


def test_the_fingerprints_example_of_the_deploys_page_runs_and_prints_its_stamp(
    tmp_path: Any,
) -> None:
    """docs/deploys.md, "Fingerprints": the example runs as written and prints the stamp its
    comment shows (the fingerprint is stable across processes). Before, it had no imports."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "deploys.md").read_text(encoding="utf-8")
    section = text[text.index("## Fingerprints"):text.index("## Compatibility rules")]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "docs/deploys.md has no example under 'Fingerprints'"
    script = tmp_path / "fingerprint_example.py"
    script.write_text(match.group(1), encoding="utf-8")
    done = subprocess.run([sys.executable, "-W", "error", str(script)], capture_output=True,
                          text=True, timeout=120, cwd=root, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = re.search(r"# (DefinitionStamp\(.*\))", match.group(1))
    assert shown is not None and done.stdout.strip() == shown.group(1)
